"""Softmax cross-entropy from logits, fused, with integer targets and an optional ignored target value.

  loss = (1 / n) sum over kept rows r of (logsumexp(logits[r]) - logits[r, targets[r]])
  dlogits[r] = g / n (softmax(logits[r]) - onehot(targets[r])) for kept rows, 0 for ignored ones

n counts the kept rows (targets != ignore_index); with none kept the loss is 0 and so is the gradient,
never NaN. A target outside [0, C) that is not ignore_index raises IndexError: the kernels report the
last such row (rows are shared out among threads) and the Python wrapper raises.
"""
import math

import numpy as np
from numba import njit, prange

from ops.cpu import mathfn


def cross_entropy(logits, targets, ignore_index=None):
    """Mean cross-entropy of logits (N, C) against targets (N,), as a 0-d array of logits' dtype."""
    logits, targets, ignore, use_ignore = _prepare(logits, targets, ignore_index)
    total, kept, bad_row = _cross_entropy_rows(logits, targets, ignore, use_ignore)
    _check(bad_row, targets, logits.shape[1])
    return np.asarray(total / kept if kept else 0.0, logits.dtype)


def cross_entropy_backward(g, logits, targets, ignore_index=None):
    """dlogits of cross_entropy for the 0-d output gradient g."""
    logits, targets, ignore, use_ignore = _prepare(logits, targets, ignore_index)
    kept = len(targets) - (np.count_nonzero(targets == ignore) if use_ignore else 0)
    scale = logits.dtype.type(float(g) / kept if kept else 0.0)
    dlogits, bad_row = _cross_entropy_backward_rows(logits, targets, ignore, use_ignore, scale)
    _check(bad_row, targets, logits.shape[1])
    return dlogits


def _prepare(logits, targets, ignore_index):
    """C-contiguous logits and int64 targets, and the ignored value with whether there is one."""
    targets = np.ascontiguousarray(targets, np.int64)
    return np.ascontiguousarray(logits), targets, -1 if ignore_index is None else int(ignore_index), \
        ignore_index is not None


def _check(bad_row, targets, num_classes):
    if bad_row >= 0:
        raise IndexError(f"target {targets[bad_row]} (row {bad_row}) is out of range for "
                         f"{num_classes} classes and is not the ignore_index")


@njit(cache=True)
def _skip(t, num_classes, ignore, use_ignore):
    """0: a valid target; 1: an ignored one; 2: one out of range."""
    if use_ignore and t == ignore:
        return 1
    return 0 if 0 <= t < num_classes else 2


@njit(fastmath=True, cache=True)
def _max(x):
    m = x[0]
    for j in range(x.size):
        m = mathfn.maximum(m, x[j])
    return m


@njit(fastmath=True, cache=True)
def _logsumexp(x):
    m = _max(x)
    s = x.dtype.type(0)
    for j in range(x.size):
        s += mathfn.exp(x[j] - m)
    return m + math.log(s)


@njit(parallel=True, cache=True)
def _cross_entropy_rows(logits, targets, ignore, use_ignore):
    """(sum of the kept rows' losses in float64, number of kept rows, last bad row or -1)"""
    total, kept, bad_row = 0.0, 0, -1
    for r in prange(logits.shape[0]):
        skip = _skip(targets[r], logits.shape[1], ignore, use_ignore)
        if skip == 0:
            total += _logsumexp(logits[r]) - logits[r, targets[r]]
            kept += 1
        elif skip == 2:
            bad_row = max(bad_row, r)
    return total, kept, bad_row


@njit(parallel=True, fastmath=True, cache=True)
def _cross_entropy_backward_rows(logits, targets, ignore, use_ignore, scale):
    """(dlogits, last bad row or -1)"""
    N, C = logits.shape
    dlogits = np.empty_like(logits)
    bad_row = -1
    for r in prange(N):
        skip = _skip(targets[r], C, ignore, use_ignore)
        if skip == 0:
            m, s = _max(logits[r]), logits.dtype.type(0)
            for j in range(C):
                dlogits[r, j] = mathfn.exp(logits[r, j] - m)
                s += dlogits[r, j]
            row_scale = scale / s
            for j in range(C):
                dlogits[r, j] *= row_scale
            dlogits[r, targets[r]] -= scale
        else:
            dlogits[r, :] = 0
            if skip == 2:
                bad_row = max(bad_row, r)
    return dlogits, bad_row
