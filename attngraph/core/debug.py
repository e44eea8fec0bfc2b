"""Debug mode: every node's output is checked for NaN/Inf as the graph runs, forward and backward.

Turn it on with ``with ag.debug():`` or the environment variable ``ATTNGRAPH_DEBUG=1``.
"""
import os
from contextlib import contextmanager
from typing import Iterator

_depth = [int(os.environ.get("ATTNGRAPH_DEBUG", "0") not in ("", "0"))]


def enabled() -> bool:
    return _depth[0] > 0


@contextmanager
def debug(on: bool = True) -> Iterator[None]:
    """Check for NaN/Inf inside the block (``debug(False)`` turns the checks off inside it)."""
    saved = _depth[0]
    _depth[0] = saved + 1 if on else 0
    try:
        yield
    finally:
        _depth[0] = saved
