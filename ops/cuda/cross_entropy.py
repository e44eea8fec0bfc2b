"""Softmax cross-entropy from logits, fused, with integer targets and an optional ignored target value.

The contract of ops/cpu/cross_entropy.py:

  loss = (1 / n) sum over kept rows r of (logsumexp(logits[r]) - logits[r, targets[r]])
  dlogits[r] = g / n (softmax(logits[r]) - onehot(targets[r])) for kept rows, 0 for ignored ones

n counts the kept rows (targets != ignore_index); with none kept the loss and the gradient are 0. A thread
per row classifies it with the CPU's ``_status``; n is a sum and the last out-of-range row a max over those
(ops/cuda/reduce.py). That row is copied to the host to raise IndexError as the CPU does, so each call waits
for its kernels once. A block per row then computes the row's loss or gradient, with tree reductions for
its max and its sum of exponentials; the loss is the sum of the rows' losses over n. NaN and Inf as on the CPU:
a NaN or +inf logit in a kept row makes the loss and that row's gradient NaN; an ignored row is never read.
"""
import math

import numpy as np

from ops._cuda import cuda, empty, to_host
from ops.cpu.cross_entropy import _KEPT, _OUT_OF_RANGE, _status
from ops.cuda import mathfn
from ops.cuda import reduce as red
from ops.cuda.launch import ROW_THREADS, THREADS, blocks
from ops.cuda.layout import flat, rows
from ops.cuda.reduce import block_max, block_sum


def cross_entropy(logits, targets, ignore_index=None):
    """Mean cross-entropy of logits (N, C) against targets (N,), as a 0-d array of logits' dtype."""
    kept, n = _kept_rows(logits, targets, ignore_index)
    losses = empty(kept.shape, logits.dtype)
    _row_losses[blocks(len(kept), 1), ROW_THREADS](losses, logits, targets, kept)
    loss = empty((), logits.dtype)
    _mean_over_kept[1, 1](loss.reshape(1), red.sum(losses, (0,), False).reshape(1), n.reshape(1))
    return loss


def cross_entropy_backward(g, logits, targets, ignore_index=None):
    """dlogits of cross_entropy for the 0-d output gradient g."""
    kept, n = _kept_rows(logits, targets, ignore_index)
    dlogits = empty(logits.shape, logits.dtype)
    _rows_backward[blocks(len(kept), 1), ROW_THREADS](dlogits, logits, targets, kept, g.reshape(1), n.reshape(1))
    return dlogits


def _kept_rows(logits, targets, ignore_index):
    """(kept, n): 1 for the rows that count and 0 for the others, in logits' dtype, and their number (0-d);
    raises IndexError for a target out of range that is not ignore_index."""
    rows, classes = logits.shape
    use_ignore = ignore_index is not None
    kept, bad = empty((rows,), logits.dtype), empty((rows,), np.int64)
    _classify[blocks(rows), THREADS](kept, bad, targets, classes, int(ignore_index) if use_ignore else 0,
                                     use_ignore)
    bad_row = int(to_host(red.max(bad, (0,), False))) if rows else -1
    if bad_row >= 0:
        target = to_host(targets[bad_row:bad_row + 1])[0]
        raise IndexError(f"target {target} (row {bad_row}) is out of range for {classes} classes and is not "
                         "the ignore_index")
    return kept, red.sum(kept, (0,), False)


@cuda.jit
def _classify(kept, bad, targets, classes, ignore, use_ignore):
    for r in range(cuda.grid(1), targets.size, cuda.gridsize(1)):
        status = _status(targets[r], classes, ignore, use_ignore)
        kept[r] = 1 if status == _KEPT else 0
        bad[r] = r if status == _OUT_OF_RANGE else -1


@cuda.jit(device=True)
def _max_and_sum_exp(shared, row):
    """The row's max m (NaN if it is NaN or +inf) and sum_j e^(row_j - m), computed by the whole block."""
    m = row[0]
    for j in range(cuda.threadIdx.x, row.size, ROW_THREADS):
        m = mathfn.maximum(m, row[j])
    m = mathfn.softmax_shift(block_max(shared, m))
    s = row.dtype.type(0)
    for j in range(cuda.threadIdx.x, row.size, ROW_THREADS):
        s += mathfn.exp(row[j] - m)
    return m, block_sum(shared, s)


@cuda.jit
def _row_losses(losses, logits, targets, kept):
    shared = cuda.shared.array(ROW_THREADS, logits.dtype)
    for r in range(cuda.blockIdx.x, logits.shape[0], cuda.gridDim.x):
        if kept[r] > 0:         # the same for every thread of the block: barriers inside are safe
            m, s = _max_and_sum_exp(shared, logits[r])
            losses[r] = math.log(s) - (logits[r, targets[r]] - m)     # not m + log s - logit: see ops/cpu
        else:
            losses[r] = 0


@cuda.jit
def _mean_over_kept(loss, total, n):
    loss[0] = total[0] / n[0] if n[0] > 0 else total.dtype.type(0)


@cuda.jit
def _rows_backward(dlogits, logits, targets, kept, g, n):
    shared = cuda.shared.array(ROW_THREADS, logits.dtype)
    scale = g[0] / n[0] if n[0] > 0 else logits.dtype.type(0)
    for r in range(cuda.blockIdx.x, logits.shape[0], cuda.gridDim.x):
        if kept[r] > 0:
            m, s = _max_and_sum_exp(shared, logits[r])
            row_scale = scale / s
            for j in range(cuda.threadIdx.x, logits.shape[1], ROW_THREADS):
                onehot = scale if j == targets[r] else logits.dtype.type(0)
                dlogits[r, j] = mathfn.exp(logits[r, j] - m) * row_scale - onehot
        else:
            for j in range(cuda.threadIdx.x, logits.shape[1], ROW_THREADS):
                dlogits[r, j] = 0


KERNELS = {
    "cross_entropy": lambda logits, targets, ignore_index: cross_entropy(rows(logits), flat(targets), ignore_index),
    "cross_entropy_grad": lambda g, logits, targets, ignore_index: cross_entropy_backward(
        g, rows(logits), flat(targets), ignore_index).reshape(logits.shape),
}
