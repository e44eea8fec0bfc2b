"""Cumulative sums along the last axis: the twin of ops/cpu/scan.py (floats accumulated in float64, bool and
integers summed in int64), a thread per row scanning it in order."""
import numpy as np

from ops._cuda import cuda, empty
from ops.cuda.elementwise import astype
from ops.cuda.launch import THREADS, blocks
from ops.cuda.layout import rows


def cumsum(x, reverse):
    """The running sums of each row along the last axis, forwards or (``reverse``) backwards."""
    if x.dtype.kind != "f":
        x = astype(x, np.int64)
    zero = np.float64(0) if x.dtype.kind == "f" else np.int64(0)
    out = empty(x.shape, x.dtype)
    r = rows(x)
    _cumsum_rows[blocks(r.shape[0]), THREADS](rows(out), r, reverse, zero)
    return out


@cuda.jit
def _cumsum_rows(out, x, reverse, zero):
    n = x.shape[1]
    for r in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        total = zero
        for i in range(n):
            j = n - 1 - i if reverse else i
            total += x[r, j]
            out[r, j] = total


KERNELS = {"cumsum": cumsum}
