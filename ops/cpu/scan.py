"""Cumulative sums along the last axis, from the first element or (``reverse``) from the last:

  cumsum(x)[..., j]                = x[..., 0] + ... + x[..., j]
  cumsum(x, reverse=True)[..., j]  = x[..., j] + ... + x[..., n - 1]

Floats keep their dtype and are accumulated in float64 (as torch on the CPU: the error of a float32 running
sum does not grow with the row's length); bool and integers are summed in int64, as torch.cumsum gives them.
A thread owns whole rows.
"""
import numpy as np
from numba import prange

from ops.cpu.layout import rows
from ops.cpu.threads import parallel_kernel


def cumsum(x, reverse):
    """The running sums of each row along the last axis, forwards or (``reverse``) backwards."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        x = x.astype(np.int64)
    zero = np.float64(0) if x.dtype.kind == "f" else np.int64(0)
    return _cumsum_rows(rows(x), reverse, zero).reshape(x.shape)


@parallel_kernel
def _cumsum_rows(x, reverse, zero):
    """out[r, j] = Σ x[r, i] over i ≤ j (i ≥ j when ``reverse``), accumulated in the type of ``zero``."""
    n = x.shape[1]
    out = np.empty_like(x)
    for r in prange(x.shape[0]):
        total = zero
        for i in range(n):
            j = n - 1 - i if reverse else i
            total += x[r, j]
            out[r, j] = total
    return out


KERNELS = {"cumsum": cumsum}
