"""Ordering along the last axis: the index of the largest (smallest) element, and the stable sort's indices.

  arg_extreme(x, largest)     = the first j with x[..., j] the maximum (largest) or the minimum
  argsort(x, k, descending)   = the first k (None: all) indices of the stable sort of each row of x

Order is torch's: NaN is larger than every number (argmax and argmin both find the first NaN; a sort puts
NaNs last ascending, first descending), -0.0 equals 0.0, and equal elements keep their order (lower index
first) in both directions, as torch.sort(stable=True) and ONNX's TopK. Rows are sorted by Numba's merge sort
(stable, NaN last); descending is the ascending sort of the reversed row read backwards, which keeps equal
elements in index order. Bool rows are sorted as uint8. A row with no element has no extreme: ValueError.
"""
import math

import numpy as np
from numba import njit, prange

from ops.cpu.layout import rows
from ops.cpu.threads import parallel_kernel


def arg_extreme(x, largest):
    """int64 index along the last axis of each row's first maximum (``largest``) or minimum; NaN wins."""
    x = np.asarray(x)
    if x.shape[-1] == 0:
        raise ValueError(f"{'argmax' if largest else 'argmin'} over an empty axis: shape {x.shape}")
    return _arg_extreme_rows(rows(_comparable(x)), largest).reshape(x.shape[:-1])


def argsort(x, k, descending):
    """int64 (..., k): the first ``k`` (None: all) indices of the stable sort of each row along the last axis."""
    x = np.asarray(x)
    k = _count(k, x.shape[-1])
    return _argsort_rows(rows(_comparable(x)), k, descending).reshape(x.shape[:-1] + (k,))


def _count(k, n):
    """How many indices to keep of a row of n: k, or all of them when k is None; at most n."""
    if k is not None and k > n:
        raise ValueError(f"the top {k} of an axis of size {n}: k must be at most the axis' size")
    return n if k is None else k


def _comparable(x):
    """x, with bool as uint8 (False < True)."""
    return x.view(np.uint8) if x.dtype == np.bool_ else x


@njit(cache=True)
def precedes(a, b, largest):
    """Whether a comes strictly before b: larger (``largest``) or smaller, a NaN before any number."""
    return (a > b if largest else a < b) or (math.isnan(a) and not math.isnan(b))


@parallel_kernel
def _arg_extreme_rows(x, largest):
    out = np.empty(x.shape[0], np.int64)
    for r in prange(x.shape[0]):
        best = 0
        for j in range(1, x.shape[1]):
            if precedes(x[r, j], x[r, best], largest):
                best = j
        out[r] = best
    return out


@parallel_kernel
def _argsort_rows(x, k, descending):
    n = x.shape[1]
    out = np.empty((x.shape[0], k), np.int64)
    for r in prange(x.shape[0]):
        if descending:
            order = np.argsort(x[r, ::-1], kind="mergesort")
            for j in range(k):
                out[r, j] = n - 1 - order[n - 1 - j]
        else:
            out[r] = np.argsort(x[r], kind="mergesort")[:k]
    return out


KERNELS = {
    "argmax": lambda x: arg_extreme(x, True),
    "argmin": lambda x: arg_extreme(x, False),
    "argsort": argsort,
}
