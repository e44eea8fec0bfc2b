"""Softmax cross-entropy from logits, fused, with integer targets and an optional ignored target value.

  loss = (1 / n) sum over kept rows r of (log sum_j e^(logits[r, j] - m) - (logits[r, targets[r]] - m)),
         m the row's max: logsumexp - logit, without adding m to the sum's log (float32 logits of 1e6 lost
         the whole log, 0.875 for 0.862)
  dlogits[r] = g / n (softmax(logits[r]) - onehot(targets[r])) for kept rows, 0 for ignored ones

n counts the kept rows (targets != ignore_index); with none kept the loss is 0 and so is the gradient,
never NaN. A target outside [0, C) that is not ignore_index raises IndexError: the kernels report the
last such row (rows are shared out among threads) and the Python wrapper raises.

NaN and Inf, as in PyTorch: a kept row holding a NaN or +inf logit makes the loss NaN and its own row of
dlogits NaN (its log-sum-exp is NaN, ``mathfn.softmax_shift``); a target logit of -inf makes the loss +inf.
An ignored row is never read, whatever it holds: it adds nothing to the loss and gets gradient 0, where
PyTorch's gradient of a NaN ignored row is NaN (its log_softmax backward multiplies the NaN by 0). The
kernels use ``mathfn.FASTMATH``, which keeps IEEE NaN and Inf.
"""
import math

import numpy as np
from numba import njit, prange

from ops.cpu import mathfn
from ops.cpu.layout import rows
from ops.cpu.threads import parallel_kernel


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
    """C-contiguous logits, int64 targets, the ignored value (any int if none), whether there is one."""
    use_ignore = ignore_index is not None
    return (np.ascontiguousarray(logits), np.ascontiguousarray(targets, np.int64),
            int(ignore_index) if use_ignore else 0, use_ignore)


def _check(bad_row, targets, num_classes):
    if bad_row >= 0:
        raise IndexError(f"target {targets[bad_row]} (row {bad_row}) is out of range for "
                         f"{num_classes} classes and is not the ignore_index")


_KEPT, _IGNORED, _OUT_OF_RANGE = 0, 1, 2


@njit(cache=True)
def _status(t, num_classes, ignore, use_ignore):
    """What the row with target t is: _KEPT, _IGNORED or _OUT_OF_RANGE."""
    if use_ignore and t == ignore:
        return _IGNORED
    return _KEPT if 0 <= t < num_classes else _OUT_OF_RANGE


@njit(fastmath=mathfn.FASTMATH, cache=True)
def _shift(x):
    """The max of x, or NaN if x holds a NaN or +inf."""
    m = x[0]
    for j in range(x.size):
        m = mathfn.maximum(m, x[j])
    return mathfn.softmax_shift(m)


@njit(fastmath=mathfn.FASTMATH, cache=True)
def _shift_and_log_sum(x):
    """The row's shift m (``_shift``) and log sum_j e^(x_j - m): its log-sum-exp is their sum."""
    m = _shift(x)
    s = x.dtype.type(0)
    for j in range(x.size):
        s += mathfn.exp(x[j] - m)
    return m, math.log(s)


@parallel_kernel
def _cross_entropy_rows(logits, targets, ignore, use_ignore):
    """(sum of the kept rows' losses in float64, number of kept rows, last bad row or -1)"""
    total, kept, bad_row = 0.0, 0, -1
    for r in prange(logits.shape[0]):
        status = _status(targets[r], logits.shape[1], ignore, use_ignore)
        if status == _KEPT:
            m, log_sum = _shift_and_log_sum(logits[r])
            total += log_sum - (logits[r, targets[r]] - m)
            kept += 1
        elif status == _OUT_OF_RANGE:
            bad_row = max(bad_row, r)
    return total, kept, bad_row


@parallel_kernel(fastmath=mathfn.FASTMATH)
def _cross_entropy_backward_rows(logits, targets, ignore, use_ignore, scale):
    """(dlogits, last bad row or -1)"""
    N, C = logits.shape
    dlogits = np.empty_like(logits)
    bad_row = -1
    for r in prange(N):
        status = _status(targets[r], C, ignore, use_ignore)
        if status == _KEPT:
            m, s = _shift(logits[r]), logits.dtype.type(0)
            for j in range(C):
                dlogits[r, j] = mathfn.exp(logits[r, j] - m)
                s += dlogits[r, j]
            row_scale = scale / s
            for j in range(C):
                dlogits[r, j] *= row_scale
            dlogits[r, targets[r]] -= scale
        else:
            dlogits[r, :] = 0
            if status == _OUT_OF_RANGE:
                bad_row = max(bad_row, r)
    return dlogits, bad_row


KERNELS = {
    "cross_entropy": lambda logits, targets, ignore_index: cross_entropy(rows(logits), targets.reshape(-1),
                                                                         ignore_index),
    "cross_entropy_grad": lambda g, logits, targets, ignore_index: cross_entropy_backward(
        g, rows(logits), targets.reshape(-1), ignore_index).reshape(logits.shape),
}
