"""Debug mode: every node's output is checked for NaN/Inf as the graph runs, forward and backward.

Turn it on with ``with ag.debug():``, which holds for the code that runs in the block's thread (and asyncio
task) only, or for the whole process with the environment variable ``ATTNGRAPH_DEBUG=1``.
"""
import os
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

_FROM_ENVIRONMENT = os.environ.get("ATTNGRAPH_DEBUG", "0") not in ("", "0")
_on: ContextVar[bool] = ContextVar("attngraph_debug", default=_FROM_ENVIRONMENT)


def enabled() -> bool:
    return _on.get()


@contextmanager
def debug(on: bool = True) -> Iterator[None]:
    """Check for NaN/Inf inside the block (``debug(False)`` turns the checks off inside it), in this thread."""
    token = _on.set(on)
    try:
        yield
    finally:
        _on.reset(token)
