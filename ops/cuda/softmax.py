"""Softmax and log-softmax over the last axis, with an optional mask and causal masking.

The contract of ops/cpu/softmax.py: entry (..., i, j) of x takes part when mask[..., i, j] is True (the mask
broadcasts against x) and, when ``causal``, when j <= i + (Tk - Tq); entries that take no part, and every
entry of a row where none does, are exactly 0 in the output and get gradient 0, never NaN; a NaN or +inf among
the entries taking part makes all of them NaN (``mathfn.softmax_shift``), forward and backward.

  softmax:     y_j = e^(x_j - m) / sum_k e^(x_k - m),  m = max of the x_k taking part
  log_softmax: y_j = (x_j - m) - log sum_k e^(x_k - m), in this order (ops/cpu/softmax.py)
  backward:    softmax: dx = y (g - sum_k g_k y_k), 0 where y = 0;  log_softmax: dx = g - e^y sum_k g_k

x is viewed as rows (R, T), a block per row: its ROW_THREADS threads stride over the row, and the row's max
and sums are tree reductions in shared memory (ops/cuda/reduce.py). The mask is read through broadcast
strides over x's shape (no broadcast copy); the causal condition is a prefix of each row, from the CPU's
``_causal_end``.
"""
import functools
import math

import numpy as np

from ops._cuda import cuda, empty
from ops.cpu.softmax import _causal_end
from ops.cuda import mathfn
from ops.cuda.elementwise import full
from ops.cuda.launch import ROW_THREADS, blocks
from ops.cuda.layout import broadcast_strides, flat, offset, rows
from ops.cuda.reduce import block_max, block_sum


def softmax(x, mask=None, causal=False):
    """Softmax of x over its last axis; 0 where masked and on fully masked rows."""
    y = empty(x.shape, x.dtype)
    _softmax_rows[_grid(x)](rows(y), rows(x), np.finfo(x.dtype).min, *masking(x.shape, mask, causal))
    return y


def softmax_backward(g, y):
    """dx = y (g - sum(g y)) over the last axis, from softmax's output y; exactly 0 where y is 0."""
    dx = empty(y.shape, y.dtype)
    _softmax_backward_rows[_grid(y)](rows(dx), rows(g), rows(y))
    return dx


def log_softmax(x, mask=None, causal=False):
    """Log-softmax of x over its last axis; 0 where masked and on fully masked rows."""
    y = empty(x.shape, x.dtype)
    _log_softmax_rows[_grid(x)](rows(y), rows(x), np.finfo(x.dtype).min, *masking(x.shape, mask, causal))
    return y


def log_softmax_backward(g, y, mask=None, causal=False):
    """dx = g - e^y sum(g) over the entries taking part, 0 elsewhere, from log_softmax's output y."""
    dx = empty(y.shape, y.dtype)
    _log_softmax_backward_rows[_grid(y)](rows(dx), rows(g), rows(y), *masking(y.shape, mask, causal))
    return dx


def _grid(x):
    """A block of ROW_THREADS threads per row of x (grid-stride over the rows)."""
    return blocks(rows(x).shape[0], 1), ROW_THREADS


def masking(shape, mask, causal):
    """The kernels' masking arguments for scores of ``shape``: the flat mask, its strides over ``shape``, the
    shape, causal and Tq."""
    shape = tuple(shape)
    if causal and len(shape) < 2:
        raise ValueError(f"causal masking needs x with at least 2 dims (..., Tq, Tk), got shape {shape}")
    mask = _everything() if mask is None else mask
    try:
        fits = np.broadcast_shapes(tuple(mask.shape), shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to x's shape {shape}")
    return flat(mask), broadcast_strides(mask.shape, shape), shape, causal, shape[-2] if causal else 1


@functools.cache
def _everything():
    """The mask of no mask: one True, broadcast to every shape."""
    return full((), True, np.bool_)


@cuda.jit(device=True)
def _allowed(mask, mask_strides, shape, r, j, t):
    """Whether entry j of row r takes part according to the mask."""
    return mask[offset(r * t + j, shape, mask_strides)]


@cuda.jit(device=True)
def _row_max(shared, x, r, end, lowest, mask, mask_strides, shape):
    """The max of x[r, j] over the j < end that the mask allows (lowest if there are none; NaN if it is NaN or
    +inf: the softmax's shift), by the whole block in ``shared``; every thread gets it. (The sums of e^(x - m)
    that follow stay in each kernel: softmax rounds each term, which it keeps, before adding it, whereas
    log_softmax's addition takes exp's last product unrounded (an FMA on a GPU), so one shared loop would
    change one of them in the last bit.)"""
    m = lowest
    for j in range(cuda.threadIdx.x, end, ROW_THREADS):
        if _allowed(mask, mask_strides, shape, r, j, x.shape[1]):
            m = mathfn.maximum(m, x[r, j])
    return mathfn.softmax_shift(block_max(shared, m))


@cuda.jit
def _softmax_rows(y, x, lowest, mask, mask_strides, shape, causal, tq):
    shared = cuda.shared.array(ROW_THREADS, x.dtype)
    rows, t = x.shape
    zero = x.dtype.type(0)
    for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        end = _causal_end(r, t, causal, tq)
        m = _row_max(shared, x, r, end, lowest, mask, mask_strides, shape)
        s = zero
        for j in range(cuda.threadIdx.x, end, ROW_THREADS):
            e = mathfn.exp(x[r, j] - m) if _allowed(mask, mask_strides, shape, r, j, t) else zero
            y[r, j] = e
            s += e
        s = block_sum(shared, s)
        # s >= 1, or 0 when nothing takes part, or NaN: then e is NaN where allowed, 0 elsewhere, as is e * 0
        scale = x.dtype.type(1) / s if s > zero else zero
        for j in range(cuda.threadIdx.x, t, ROW_THREADS):
            y[r, j] = y[r, j] * scale if j < end else zero


@cuda.jit
def _softmax_backward_rows(dx, g, y):
    shared = cuda.shared.array(ROW_THREADS, y.dtype)
    rows, t = y.shape
    for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        d = y.dtype.type(0)
        for j in range(cuda.threadIdx.x, t, ROW_THREADS):
            d += g[r, j] * y[r, j]
        d = block_sum(shared, d)
        for j in range(cuda.threadIdx.x, t, ROW_THREADS):
            dx[r, j] = y[r, j] * (g[r, j] - d) if y[r, j] != 0 else y.dtype.type(0)


@cuda.jit
def _log_softmax_rows(y, x, lowest, mask, mask_strides, shape, causal, tq):
    shared = cuda.shared.array(ROW_THREADS, x.dtype)
    rows, t = x.shape
    zero = x.dtype.type(0)
    for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        end = _causal_end(r, t, causal, tq)
        m = _row_max(shared, x, r, end, lowest, mask, mask_strides, shape)
        s = zero
        for j in range(cuda.threadIdx.x, end, ROW_THREADS):
            if _allowed(mask, mask_strides, shape, r, j, t):
                s += mathfn.exp(x[r, j] - m)
        s = block_sum(shared, s)
        log_sum = math.log(s) if s != zero else -math.inf   # NaN: the row is NaN; -inf: all -inf, NaN below
        for j in range(cuda.threadIdx.x, t, ROW_THREADS):
            keep = j < end and _allowed(mask, mask_strides, shape, r, j, t)
            y[r, j] = (x[r, j] - m) - log_sum if keep else zero


@cuda.jit
def _log_softmax_backward_rows(dx, g, y, mask, mask_strides, shape, causal, tq):
    shared = cuda.shared.array(ROW_THREADS, y.dtype)
    rows, t = y.shape
    zero = y.dtype.type(0)
    for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        end = _causal_end(r, t, causal, tq)
        total = zero
        for j in range(cuda.threadIdx.x, end, ROW_THREADS):
            if _allowed(mask, mask_strides, shape, r, j, t):
                total += g[r, j]
        total = block_sum(shared, total)
        for j in range(cuda.threadIdx.x, t, ROW_THREADS):
            keep = j < end and _allowed(mask, mask_strides, shape, r, j, t)
            dx[r, j] = g[r, j] - mathfn.exp(y[r, j]) * total if keep else zero


KERNELS = {
    "softmax": lambda x, mask=None, *, causal: softmax(x, mask, causal),
    "softmax_grad": softmax_backward,
    "log_softmax": lambda x, mask=None, *, causal: log_softmax(x, mask, causal),
    "log_softmax_grad": lambda g, y, mask=None, *, causal: log_softmax_backward(g, y, mask, causal),
}
