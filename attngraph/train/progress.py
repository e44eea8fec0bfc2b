"""``CompileProgress``: what numba is compiling, shown while it compiles.

numba compiles a kernel the first time it runs on new argument types; on a cold cache a graph's first run
compiles tens of kernels (seconds to tens of seconds), later runs load them from numba's cache. Everything that
runs graphs for a user (``Trainer.fit``, ``attngraph check-grads`` and ``warmup``, the demos) shows those compiles
with it::

    with CompileProgress():
        executable(**feeds)

It follows the Trainer's ``progress`` setting: ``None`` (the default) draws a tqdm bar on stderr when stderr
is a terminal, counting the kernels and naming the one compiling, and otherwise writes one line on stderr
when the first compile starts; ``True`` always draws the bar, ``False`` shows nothing. ``close()`` ends the
display (the Trainer closes it after each step); a later compile starts a new one.
"""
from __future__ import annotations

import sys
from typing import Self

from numba.core import event
from tqdm.auto import tqdm

MESSAGE = "compiling kernels (first run; cached afterwards)"


class CompileProgress(event.Listener):
    """A listener of numba's compile events, installed by ``with`` (module docstring). ``bar``: report in
    that bar (its postfix names the kernel compiling) instead of one of its own, as ``attngraph warmup``
    does in its bar over programs."""

    def __init__(self, progress: bool | None = None, bar: tqdm | None = None):
        self.progress, self.outer = progress, bar
        self.depth = 0          # a kernel's compile nests its helpers' compiles: only the outer ones count
        self.bar: tqdm | None = None

    def __enter__(self) -> Self:
        event.register("numba:compile", self)
        return self

    def __exit__(self, *exc_info) -> None:
        event.unregister("numba:compile", self)
        self.close()

    def on_start(self, event) -> None:
        self.depth += 1
        if self.depth > 1 or self.progress is False:
            return
        if self.bar is None:
            self.bar = self.outer or tqdm(desc=MESSAGE, unit=" kernels", leave=False,
                                          disable=None if self.progress is None else False)
            if self.bar.disable:
                print(f"{MESSAGE}...", file=sys.stderr, flush=True)
        self.bar.set_postfix_str(event.data["dispatcher"].py_func.__qualname__)

    def on_end(self, event) -> None:
        self.depth -= 1
        if self.depth == 0 and self.bar is not None and self.bar is not self.outer:
            self.bar.update(1)

    def close(self) -> None:
        """End the display; the next compile starts a new one."""
        if self.bar is not None and self.bar is not self.outer:
            self.bar.close()
        self.bar = None
