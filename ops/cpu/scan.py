"""Running (cumulative) reductions along the last axis, from the first element or (``reverse``) from the last:

  cumsum(x)[..., j]                = x[..., 0] + ... + x[..., j]
  cumsum(x, reverse=True)[..., j]  = x[..., j] + ... + x[..., n - 1]
  cumprod(x)[..., j]               = x[..., 0] · ... · x[..., j]
  logcumsumexp(x)[..., j]          = log(exp x[..., 0] + ... + exp x[..., j])
  cumarg(x, largest)[..., j]       = the index i ≤ j of max (min) x[..., :j + 1], the latest one among ties; a NaN
                                     is the extremum from where it stands on (as torch.cummax and torch.cummin)

Floats keep their dtype and are accumulated in float64 (as torch on the CPU: the error of a float32 running
sum does not grow with the row's length); bool and integers are summed and multiplied in int64, as torch.cumsum
and torch.cumprod give them. Log-sum-exp adds one term at a time with ``log_add``
(log(eᵃ + eᵇ) = max + log1p(e^-|a − b|)), which neither overflows nor underflows. A thread owns whole rows.
"""
import math

import numpy as np
from numba import njit, prange

from ops.cpu.layout import rows
from ops.cpu.threads import parallel_kernel


def cumsum(x, reverse):
    """The running sums of each row along the last axis, forwards or (``reverse``) backwards."""
    return _running(x, reverse, False)


def cumprod(x):
    """The running products of each row along the last axis."""
    return _running(x, False, True)


def _running(x, reverse, product):
    x = np.asarray(x)
    if x.dtype.kind != "f":
        x = x.astype(np.int64)
    start = (np.float64 if x.dtype.kind == "f" else np.int64)(product)
    return _running_rows(rows(x), reverse, start, product).reshape(x.shape)


def logcumsumexp(x, reverse):
    """log Σ exp over the elements up to each one (from each one to the end when ``reverse``) of a float x."""
    x = np.asarray(x)
    return _logcumsumexp_rows(rows(x), reverse).reshape(x.shape)


def cumarg(x, largest):
    """The int64 index of the running maximum (``largest``) or minimum of each row along the last axis."""
    x = np.asarray(x)
    return _cumarg_rows(rows(x), largest).reshape(x.shape)


@parallel_kernel
def _running_rows(x, reverse, start, product):
    """out[r, j] = Σ (``product``: Π) x[r, i] over i ≤ j (i ≥ j when ``reverse``), accumulated from ``start``, of
    its type."""
    n = x.shape[1]
    out = np.empty_like(x)
    for r in prange(x.shape[0]):
        total = start
        for i in range(n):
            j = n - 1 - i if reverse else i
            total = total * x[r, j] if product else total + x[r, j]
            out[r, j] = total
    return out


@njit(cache=True)
def log_add(a, b):
    """log(eᵃ + eᵇ), exact for ±inf (−inf is no term) and NaN if either is NaN."""
    if a != a or b != b:
        return a + b
    if a == b:
        return a + math.log(2.0)
    high, low = (a, b) if a > b else (b, a)
    return high + math.log1p(math.exp(low - high))


@parallel_kernel
def _logcumsumexp_rows(x, reverse):
    """out[r, j] = log Σ exp x[r, i] over i ≤ j (i ≥ j when ``reverse``), accumulated in float64."""
    n = x.shape[1]
    out = np.empty_like(x)
    for r in prange(x.shape[0]):
        total = -np.inf
        for i in range(n):
            j = n - 1 - i if reverse else i
            total = log_add(total, np.float64(x[r, j]))
            out[r, j] = total
    return out


@parallel_kernel
def _cumarg_rows(x, largest):
    """out[r, j] = the latest index i ≤ j of the maximum (``largest``) or minimum of x[r, :j + 1], NaN winning."""
    out = np.empty(x.shape, np.int64)
    for r in prange(x.shape[0]):
        at = 0
        for j in range(x.shape[1]):
            if takes_over(x[r, j], x[r, at], largest) or j == 0:
                at = j
            out[r, j] = at
    return out


@njit(cache=True)
def takes_over(value, best, largest):
    """Whether ``value`` replaces ``best`` as the running maximum (``largest``) or minimum: a tie or a NaN does,
    and nothing replaces a NaN."""
    if value != value:
        return True
    if best != best:
        return False
    return value >= best if largest else value <= best


KERNELS = {"cumsum": cumsum, "cumprod": cumprod, "logcumsumexp": logcumsumexp, "cumarg": cumarg}
