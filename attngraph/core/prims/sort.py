"""Ordering along the last axis (``functional`` moves any other axis last): ``argmax`` and ``argmin``, the int64
index of the first maximum or minimum (NaN counting as the largest, as torch), and ``argsort``, the first ``k``
(None: all) indices of a stable sort, ascending or ``descending``.

A node has one shape and one dtype, and values and indices differ in dtype, so ``sort`` and ``topk`` are not one
node with two outputs: they emit ``argsort`` and gather the values through its indices (``functional``), whose
gradient, the ``gather``'s scatter-add, sends each value's gradient back to the position it came from. The
gather costs one pass over the k picked values beside the sort's n log n comparisons, and needs no kernel of its
own on any device. Indices are not differentiable.
"""
from math import ceil, log2, prod

import numpy as np


from ..primitive import define


def arg_extreme_rule(x):
    if not x.shape or x.shape[-1] == 0:
        raise ValueError("there is no extreme element in an axis of size 0")
    return x.shape[:-1], np.dtype(np.int64)


def argsort_rule(x, k, descending):
    n = x.shape[-1] if x.shape else None
    if n is None:
        raise ValueError("sorting takes at least one axis")
    if k is not None and isinstance(n, int) and not 0 <= k <= n:
        raise ValueError(f"k = {k} is out of range for an axis of size {n}: it must be in [0, {n}]")
    return x.shape[:-1] + (n if k is None else k,), np.dtype(np.int64)


def argsort_flops(out, x, k, descending):
    """A merge sort's comparisons: n·⌈log₂ n⌉ per row of n elements."""
    n = x[-1]
    return prod(x) * ceil(log2(n)) if n > 1 else 0


define("argmax", arg_extreme_rule, differentiable=False, flops=lambda out, x: prod(x))
define("argmin", arg_extreme_rule, differentiable=False, flops=lambda out, x: prod(x))
define("argsort", argsort_rule, differentiable=False, flops=argsort_flops)
