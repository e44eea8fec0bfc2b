"""Ordering along the last axis: the twins of ops/cpu/sort.py, with its order (NaN the largest, equal elements in
index order) from its ``precedes`` helper.

- ``arg_extreme``: a thread per row scans it for its first maximum or minimum.
- ``argsort``: a thread per element counts the elements of its row that come before it (those that precede it,
  and those equal to it at a lower index), which is its place in the stable sort: n² comparisons per row of n,
  all independent, with no shared memory or barrier; a rank at or beyond k is not written.
"""
import numpy as np

from ops._cuda import cuda, empty
from ops.cpu.sort import _count, precedes
from ops.cuda.elementwise import astype
from ops.cuda.launch import THREADS, blocks
from ops.cuda.layout import rows


def arg_extreme(x, largest):
    """int64 index along the last axis of each row's first maximum (``largest``) or minimum; NaN wins."""
    *lead, n = x.shape
    if n == 0:
        raise ValueError(f"{'argmax' if largest else 'argmin'} over an empty axis: shape {tuple(x.shape)}")
    r = rows(_comparable(x))
    out = empty((r.shape[0],), np.int64)
    _arg_extreme_rows[blocks(out.size), THREADS](out, r, largest)
    return out.reshape(tuple(lead))


def argsort(x, k, descending):
    """int64 (..., k): the first ``k`` (None: all) indices of the stable sort of each row along the last axis."""
    *lead, n = x.shape
    k = _count(k, n)
    r = rows(_comparable(x))
    out = empty((r.shape[0], k), np.int64)
    _argsort_rows[blocks(r.size), THREADS](out, r, descending)
    return out.reshape((*lead, k))


def _comparable(x):
    """x, with bool as uint8 (False < True)."""
    return astype(x, np.uint8) if x.dtype == np.bool_ else x


@cuda.jit
def _arg_extreme_rows(out, x, largest):
    for r in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        best = 0
        for j in range(1, x.shape[1]):
            if precedes(x[r, j], x[r, best], largest):
                best = j
        out[r] = best


@cuda.jit
def _argsort_rows(out, x, descending):
    n = x.shape[1]
    for e in range(cuda.grid(1), x.shape[0] * n, cuda.gridsize(1)):
        r, j = divmod(e, n)
        v, rank = x[r, j], 0
        for i in range(n):
            u = x[r, i]
            before, after = (precedes(u, v, True), precedes(v, u, True)) if descending else \
                (precedes(v, u, True), precedes(u, v, True))
            if before or (i < j and not after):
                rank += 1
        if rank < out.shape[1]:
            out[r, rank] = j


KERNELS = {
    "argmax": lambda x: arg_extreme(x, True),
    "argmin": lambda x: arg_extreme(x, False),
    "argsort": argsort,
}
