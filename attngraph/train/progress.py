"""``CompileProgress``: what numba is compiling, shown while it compiles.

numba compiles a kernel the first time it runs on new argument types; on a cold cache a graph's first run
compiles tens of kernels (seconds to tens of seconds), later runs load them from numba's cache. Everything that
runs graphs for a user (``Trainer.fit``, ``attngraph check-grads`` and ``warmup``, the demos) shows those compiles
with it::

    with CompileProgress():
        executable(**feeds)

It follows the Trainer's ``progress`` setting: ``None`` (the default) draws a tqdm bar on stderr when stderr
is a terminal, counting the kernels and naming the one compiling, and otherwise writes one line on stderr
when the first compile starts, then, while compiles go on (a cold cache: minutes), a line at the end of a kernel
every ``INTERVAL`` seconds with the kernels compiled and the time elapsed, and a last line with both when it
wrote any; ``True`` always draws the bar, ``False`` shows nothing. ``close()`` ends the display (the Trainer
closes it after each step); a later compile starts a new one.

``StepClock`` gives the Trainer's progress lines their elapsed time and ETA, in ``duration``'s format.
"""
from __future__ import annotations

import sys
import time
from typing import Self

from numba.core import event
from tqdm.auto import tqdm

MESSAGE = "compiling kernels (first run; cached afterwards)"
INTERVAL = 10.0         # seconds between two lines of compile progress off a terminal


def duration(seconds: float) -> str:
    """``seconds`` as m:ss, or h:mm:ss from an hour on (tqdm's format)."""
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


class StepClock:
    """The time of a run of steps from ``first`` (the step it starts after) to ``last``: ``text(step)`` is
    "elapsed 0:12, ETA 0:33", the ETA extrapolating the mean time of the steps taken so far."""

    def __init__(self, first: int, last: int):
        self.first, self.last, self.started = first, last, time.perf_counter()

    def text(self, step: int) -> str:
        elapsed = time.perf_counter() - self.started
        left = elapsed / max(step - self.first, 1) * max(self.last - step, 0)
        return f"elapsed {duration(elapsed)}, ETA {duration(left)}"


class CompileProgress(event.Listener):
    """A listener of numba's compile events, installed by ``with`` (module docstring). ``bar``: report in
    that bar (its postfix names the kernel compiling) instead of one of its own, as ``attngraph warmup``
    does in its bar over programs."""

    def __init__(self, progress: bool | None = None, bar: tqdm | None = None):
        self.progress, self.outer = progress, bar
        self.depth = 0          # a kernel's compile nests its helpers' compiles: only the outer ones count
        self.bar: tqdm | None = None
        self.started: float | None = None       # off a terminal: when the first compile of the display started,
        self.next_line = 0.0                    # and when a kernel's end may write the next line
        self.compiled, self.wrote = 0, False    # kernels compiled (outer ones); whether a line followed the first

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
                self.started, self.compiled, self.wrote = time.perf_counter(), 0, False
                self.next_line = self.started + INTERVAL
        self.bar.set_postfix_str(event.data["dispatcher"].py_func.__qualname__)

    def on_end(self, event) -> None:
        self.depth -= 1
        if self.depth > 0 or self.bar is None:
            return
        if self.bar is not self.outer:
            self.bar.update(1)
        self.compiled += 1
        if self.started is not None and time.perf_counter() >= self.next_line:
            self.next_line, self.wrote = time.perf_counter() + INTERVAL, True
            self._line(f"{self.compiled} kernels compiled so far (the last: "
                       f"{event.data['dispatcher'].py_func.__qualname__})")

    def close(self) -> None:
        """End the display; the next compile starts a new one."""
        if self.started is not None and self.wrote:
            self._line(f"compiled {self.compiled} kernels")
        if self.bar is not None and self.bar is not self.outer:
            self.bar.close()
        self.bar, self.started = None, None

    def _line(self, what: str) -> None:
        elapsed = duration(time.perf_counter() - self.started)
        print(f"{what}, {elapsed} elapsed", file=sys.stderr, flush=True)
