"""Sum, product, max, min and log-sum-exp over a set of axes.

The reduced axes are brought together so that x becomes an (A, K, N) array reduced over its middle axis: a
free reshape when the axes are consecutive (sums over leading axes, which undo broadcasting, stay in place),
otherwise a copy that moves them last (N = 1). The innermost loop always runs over contiguous memory:
- N == 1: threads own rows; the fastmath sum vectorizes into several partial sums.
- N > 1: threads own blocks of columns and combine whole rows of x into them (vectorized, race-free);
  a floating-point sum with A == 1 (over leading axes: a bias's gradient) is the BLAS product 1ᵀx instead
  (NumPy's, on BLAS's threads, which share out the rows too: a bias of up to 512 columns is one block, so one
  thread in the loop), with half NumPy's error.
A sum reads a strided view in place where the (A, K, N) view of it has adjacent entries along N (a slice of
columns, a reshape of one): the loops read its rows from a flat span of memory at their offsets, and BLAS reads it
with its leading dimension (through ``np.matmul``: ``np.dot`` copies a strided operand first, 117 against 41 µs for
a (1920, 192) slice of a (1920, 448) array); bit for bit the sum of a contiguous copy. Other layouts are copied
first.
Sums of floats accumulate in the input dtype: float32 fills twice the vector lanes of float64 accumulators,
and the lanes' partial sums keep the error NumPy's own. Sums of bool and integers are int64, as torch.sum
and np.sum give them.
The product, of bool and integers in int64 too (as torch.prod), is NumPy's (one multiply per element: an op
rarely on a model's hot path, kept IEEE-exact without fastmath, so that 0 · inf is NaN and NaN propagates).
Max keeps the input dtype, bool and integers included. It runs without fastmath so that NaN propagates as
in np.max; mathfn.maximum keeps it vectorized (a comparison in its place does not vectorize).
Min is the max of the order-reversed input: -max(-x) for floats (exact, NaN kept), ~max(~x) for integers and
bool (~ reverses their order without overflow), at the cost of one more pass over x.
Log-sum-exp is m + log Σ exp(x - m), m the maximum (or 0 where that is ±inf or NaN): no overflow, and
underflow only for terms negligible beside the largest.
The variance takes two passes, Σ(x - mean)² / max(0, n - correction), from the sums above.
"""
import builtins
import math

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from ops.cpu import elementwise, mathfn
from ops.cpu.matmul import numpy_matmul
from ops.cpu.threads import parallel_kernel

_BLOCK = 512    # columns per thread in the N > 1 loops


def sum(x, axes, keepdims):
    """Sum of x over `axes` (normalized, non-negative; () gives a copy); 0 over empty axes. Floats keep their
    dtype; bool and integers are summed in int64. Axes in several runs (a convolution's bias gradient, over B, H
    and W) are summed a run at a time, the last first, each in place: no copy moving them together."""
    axes = sorted(axes)
    last = _last_run(axes)
    if last > 0:
        out = sum(sum(x, axes[last:], False), axes[:last], False)
        return out.reshape(_reduced_shape(np.shape(x), axes, keepdims))
    x3, shape = _as_reduction(x, axes, keepdims, in_place=True)
    if x3.dtype.kind != "f":
        x3 = np.ascontiguousarray(x3, np.int64)
    if x3.shape[2] == 1:
        out = _sum_rows(np.ascontiguousarray(x3).reshape(x3.shape[:2]))
    elif x3.shape[0] == 1 and x3.shape[1] > 0 and x3.dtype.kind == "f":
        out = numpy_matmul(np.ones(x3.shape[1], x3.dtype), x3[0])
    else:
        out = _sum_middle(*_span(x3))
    return out.reshape(shape)


def prod(x, axes, keepdims):
    """Product of x over `axes` (normalized, non-negative; () gives a copy); 1 over empty axes. Floats keep their
    dtype; bool and integers are multiplied in int64."""
    x = np.asarray(x)
    with np.errstate(invalid="ignore", over="ignore"):     # 0 · inf = NaN and overflow to inf are IEEE's answers
        return np.asarray(np.prod(x, tuple(axes), x.dtype if x.dtype.kind == "f" else np.int64, keepdims=keepdims))


def max(x, axes, keepdims):
    """Maximum of x over `axes` (normalized, non-negative; () gives a copy); NaN if any is NaN."""
    x3, shape = _as_reduction(x, axes, keepdims)
    if x3.shape[1] == 0:
        raise ValueError(f"max over an empty axis: shape {np.shape(x)}, axes {tuple(axes)}")
    out = _max_rows(x3.reshape(x3.shape[:2])) if x3.shape[2] == 1 else _max_middle(x3)
    return out.reshape(shape)


def min(x, axes, keepdims):
    """Minimum of x over `axes` (normalized, non-negative; () gives a copy); NaN if any is NaN."""
    flip = np.negative if np.asarray(x).dtype.kind == "f" else np.invert
    out = max(flip(x), axes, keepdims)
    return flip(out, out=out)        # in place: a 0-d result stays an array, not a NumPy scalar


def logsumexp(x, axes, keepdims):
    """log Σ exp(x) over `axes` of a floating-point x, computed stably: m + log Σ exp(x - m) with m the
    maximum (0 where it is infinite, so that all -inf gives -inf and any +inf gives +inf; a NaN maximum stays,
    so a NaN's reduction is NaN without exp overflowing on its other elements); -inf over empty axes."""
    m = max(x, axes, True) if all(np.shape(x)[a] for a in axes) else np.zeros((), np.asarray(x).dtype)
    m = elementwise.where(np.isinf(m), m.dtype.type(0), m)
    with np.errstate(divide="ignore"):         # log 0 = -inf is the exact answer (all -inf, or no element)
        out = elementwise.add(elementwise.log(sum(elementwise.exp(elementwise.sub(x, m)), axes, True)), m)
    return out if keepdims else out.reshape([n for i, n in enumerate(out.shape) if i not in axes])


def var(x, axes, correction, keepdims):
    """Σ(x - mean)² / max(0, n - correction) over `axes` of a floating-point x, n the count reduced: inf where
    n <= correction, NaN where the squares sum to 0 there too and over empty axes (as torch.var)."""
    x = np.asarray(x)
    n = math.prod(x.shape[a] for a in axes)
    with np.errstate(divide="ignore", invalid="ignore"):     # 0 / 0 and s / 0: the NaN and inf above
        deviation = elementwise.sub(x, elementwise.div(sum(x, axes, True), x.dtype.type(n)))
        return elementwise.div(sum(elementwise.mul(deviation, deviation), axes, keepdims),
                               x.dtype.type(builtins.max(0, n - correction)))


def _as_reduction(x, axes, keepdims, in_place=False):
    """x as a C-contiguous (A, K, N) array to reduce over K, and the shape of the result; ``in_place``: as a view
    of x where it has adjacent entries along N (strides ≥ 0), a C-contiguous copy otherwise."""
    x = np.asarray(x)
    axes = sorted(axes)
    kept = [i for i in range(x.ndim) if i not in axes]
    shape = _reduced_shape(x.shape, axes, keepdims)
    first = axes[0] if axes else x.ndim
    if axes != list(range(first, first + len(axes))):
        x = np.moveaxis(x, axes, range(len(kept), x.ndim))
        first = len(kept)
    last = first + len(axes)
    a, k, n = (math.prod(x.shape[:first]), math.prod(x.shape[first:last]), math.prod(x.shape[last:]))
    if not in_place:
        return np.ascontiguousarray(x).reshape(a, k, n), shape
    x3 = x.reshape(a, k, n)
    if not x3.flags.c_contiguous and (builtins.min(x3.strides) < 0 or n > 1 and x3.strides[2] != x3.itemsize):
        x3 = np.ascontiguousarray(x3)
    return x3, shape


def _last_run(axes):
    """Where in the sorted ``axes`` their last run of consecutive axes starts (0: they are one run)."""
    start = builtins.max(len(axes) - 1, 0)
    while start > 0 and axes[start - 1] == axes[start] - 1:
        start -= 1
    return start


def _reduced_shape(shape, axes, keepdims):
    """The shape of a reduction of an array of ``shape`` over ``axes``."""
    return tuple(1 if i in axes else n for i, n in enumerate(shape)) if keepdims \
        else tuple(n for i, n in enumerate(shape) if i not in axes)


def _span(x3):
    """An (A, K, N) array with adjacent entries along N as (flat, A, K, N, a_stride, k_stride): ``flat`` the
    C-contiguous 1-D span of memory from its first entry to its last, where x3[a, k, n] is
    flat[a·a_stride + k·k_stride + n]."""
    a, k, n = x3.shape
    a_stride, k_stride = (s // x3.itemsize for s in x3.strides[:2])
    size = (a - 1) * a_stride + (k - 1) * k_stride + n if x3.size else 0
    return np.lib.stride_tricks.as_strided(x3, (size,), (x3.itemsize,)), a, k, n, a_stride, k_stride


def _larger(a, b):
    """The larger of a and b, of any one dtype; NaN if either is NaN."""


@overload(_larger, inline="always")
def _larger_of_type(a, b):
    if isinstance(a, types.Float):
        return lambda a, b: mathfn.maximum(a, b)
    return lambda a, b: a if a >= b else b


@njit(cache=True, inline="always")
def _column_block(t, n, blocks):
    """The (row, first column, end column) of the t-th block of _BLOCK columns of an (A, n) output."""
    a = t // blocks
    lo = (t - a * blocks) * _BLOCK
    return a, lo, builtins.min(lo + _BLOCK, n)


@parallel_kernel(fastmath=True)
def _sum_rows(x):
    """out[a] = sum_k x[a, k]"""
    out = np.empty(x.shape[0], x.dtype)
    for a in prange(x.shape[0]):
        s = x.dtype.type(0)
        for k in range(x.shape[1]):
            s += x[a, k]
        out[a] = s
    return out


@parallel_kernel(fastmath=True)
def _sum_middle(x, A, K, N, a_stride, k_stride):
    """out[a, n] = sum_k x[a·a_stride + k·k_stride + n] (an (A, K, N) array laid out in the flat x: ``_span``)"""
    out = np.zeros((A, N), x.dtype)
    blocks = (N + _BLOCK - 1) // _BLOCK
    for t in prange(A * blocks):
        a, lo, hi = _column_block(t, N, blocks)
        acc = out[a, lo:hi]
        for k in range(K):
            start = a * a_stride + k * k_stride
            row = x[start + lo:start + hi]
            for n in range(hi - lo):
                acc[n] += row[n]
    return out


@parallel_kernel
def _max_rows(x):
    """out[a] = max_k x[a, k] for K >= 1"""
    out = np.empty(x.shape[0], x.dtype)
    for a in prange(x.shape[0]):
        m = x[a, 0]
        for k in range(1, x.shape[1]):
            m = _larger(m, x[a, k])
        out[a] = m
    return out


@parallel_kernel
def _max_middle(x):
    """out[a, n] = max_k x[a, k, n] for K >= 1"""
    A, K, N = x.shape
    out = x[:, 0, :].copy()
    blocks = (N + _BLOCK - 1) // _BLOCK
    for t in prange(A * blocks):
        a, lo, hi = _column_block(t, N, blocks)
        acc = out[a, lo:hi]
        for k in range(1, K):
            row = x[a, k, lo:hi]
            for n in range(hi - lo):
                acc[n] = _larger(acc[n], row[n])
    return out


KERNELS = {"sum": sum, "prod": prod, "max": max, "min": min, "logsumexp": logsumexp, "var": var}
