"""Softmax and log-softmax over the last axis, with an optional mask and causal masking.

An entry (..., i, j) of x takes part when mask[..., i, j] is True (the mask broadcasts against x) and,
when `causal`, when j <= i + (Tk - Tq) for x of shape (..., Tq, Tk): bottom-right aligned, so that cached
decoding works. Entries that take no part, and every entry of a row where none does, are exactly 0 in
the output (for log_softmax too: they have no log-probability, and 0 keeps them finite) and get gradient
0; never NaN. (Scores of -inf, an additive mask, also give softmax 0 and no NaN, but take masks as booleans;
the log-softmax of a row whose entries taking part are all -inf is NaN, -inf - (-inf), as PyTorch's.)

NaN and Inf propagate as in PyTorch, confined to the entries taking part: a NaN or +inf among them makes
every one of them NaN, forward and backward (the row's shift m is then NaN, ``mathfn.softmax_shift``),
while a masked-out score, whatever its value, changes nothing. The kernels use ``mathfn.FASTMATH``, which
keeps IEEE NaN and Inf (``fastmath=True`` let the max drop a NaN and the row become finite).

  softmax:     y_j = e^(x_j - m) / sum_k e^(x_k - m),  m = max of the x_k taking part
  log_softmax: y_j = (x_j - m) - log sum_k e^(x_k - m), in this order: x_j - (m + log sum) loses the
               sum's bits beside a large m (float32 logits of 1e4 were off by 3e-4)
  backward:    softmax: dx = y (g - sum_k g_k y_k), 0 where y = 0;  log_softmax: dx = g - e^y sum_k g_k

x is viewed as rows (R, T) that threads share out. The mask is kept as its distinct rows (Rm, T) plus,
per row of x, the index of its mask row: a (B, 1, 1, T) padding mask costs R indices, not R*T bytes. The
causal condition is a prefix of each row, computed from the row index: no T x T mask is built.
"""
import math

import numpy as np
from numba import njit, prange

from ops.cpu import mathfn
from ops.cpu.layout import mask_rows, rows
from ops.cpu.threads import parallel_kernel


def softmax(x, mask=None, causal=False):
    """Softmax of x over its last axis; 0 where masked and on fully masked rows."""
    x_rows, *masking = _rows_and_masking(x, mask, causal)
    return _softmax_rows(x_rows, *masking, np.finfo(x_rows.dtype).min).reshape(np.shape(x))


def softmax_backward(g, y):
    """dx = y (g - sum(g y)) over the last axis, from softmax's output y; exactly 0 where y is 0 (masked
    entries), also when the row's sum is NaN."""
    return _softmax_backward_rows(rows(g), rows(y)).reshape(np.shape(y))


def log_softmax(x, mask=None, causal=False):
    """Log-softmax of x over its last axis; 0 where masked and on fully masked rows."""
    x_rows, *masking = _rows_and_masking(x, mask, causal)
    return _log_softmax_rows(x_rows, *masking, np.finfo(x_rows.dtype).min).reshape(np.shape(x))


def log_softmax_backward(g, y, mask=None, causal=False):
    """dx = g - e^y sum(g) over the entries taking part, 0 elsewhere, from log_softmax's output y."""
    y_rows, *masking = _rows_and_masking(y, mask, causal)
    return _log_softmax_backward_rows(rows(g), y_rows, *masking).reshape(np.shape(y))


def _rows_and_masking(x, mask, causal):
    """x's rows, the distinct mask rows, each row's mask row index, causal, and Tq."""
    shape = np.shape(x)
    if causal and len(shape) < 2:
        raise ValueError(f"causal masking needs x with at least 2 dims (..., Tq, Tk), got shape {shape}")
    return (rows(x), *mask_rows(mask, shape), causal, shape[-2] if causal else 1)


@njit(cache=True)
def _causal_end(r, t, causal, tq):
    """Row r (query i = r mod tq) may use columns j < end: all t, or j <= i + t - tq when causal."""
    return min(max(r % tq + t - tq + 1, 0), t) if causal else t


@njit(fastmath=mathfn.FASTMATH, cache=True)
def _shifted_exps(e, x, allowed, end, lowest):
    """e[j] = e^(x[j] - m) for the j < end with allowed[j] and 0 for the other j < end, where m is the max of
    those x[j] (lowest if there are none; NaN if it is NaN or +inf); returns m and the sum of e[:end]. The
    prologue of both forward kernels: softmax keeps e, log_softmax only m and the sum."""
    zero = x.dtype.type(0)
    m = lowest
    for j in range(end):
        m = mathfn.maximum(m, x[j] if allowed[j] else lowest)
    m = mathfn.softmax_shift(m)
    s = zero
    for j in range(end):
        e[j] = mathfn.exp(x[j] - m) if allowed[j] else zero
        s += e[j]
    return m, s


@parallel_kernel(fastmath=mathfn.FASTMATH)
def _softmax_rows(x, mask_rows, mask_index, causal, tq, lowest):
    R, T = x.shape
    zero = x.dtype.type(0)
    y = np.empty_like(x)
    for r in prange(R):
        allowed, end = mask_rows[mask_index[r]], _causal_end(r, T, causal, tq)
        _, s = _shifted_exps(y[r], x[r], allowed, end, lowest)
        # s >= 1, or 0 when nothing takes part, or NaN: then e is NaN where allowed, 0 elsewhere, as is e * 0
        scale = x.dtype.type(1) / s if s > zero else zero
        for j in range(end):
            y[r, j] *= scale
        y[r, end:] = zero
    return y


@parallel_kernel(fastmath=mathfn.FASTMATH)
def _softmax_backward_rows(g, y):
    dx = np.empty_like(y)
    for r in prange(y.shape[0]):
        zero = y.dtype.type(0)
        d = zero
        for j in range(y.shape[1]):     # a select here would cost a third of the kernel
            d += g[r, j] * y[r, j]
        for j in range(y.shape[1]):
            dx[r, j] = y[r, j] * (g[r, j] - d) if y[r, j] != zero else zero
    return dx


@parallel_kernel(fastmath=mathfn.FASTMATH - {"reassoc"})      # reassoc would make x - (m + log sum) of y's formula
def _log_softmax_rows(x, mask_rows, mask_index, causal, tq, lowest):
    R, T = x.shape
    zero = x.dtype.type(0)
    y = np.empty_like(x)
    for r in prange(R):
        allowed, end = mask_rows[mask_index[r]], _causal_end(r, T, causal, tq)
        m, s = _shifted_exps(y[r], x[r], allowed, end, lowest)     # y[r] as scratch, overwritten below
        log_sum = math.log(s)       # NaN: the row is NaN; -inf (s = 0): the entries taking part are all -inf
        for j in range(end):
            y[r, j] = (x[r, j] - m) - log_sum if allowed[j] else zero
        y[r, end:] = zero
    return y


@parallel_kernel(fastmath=mathfn.FASTMATH)
def _log_softmax_backward_rows(g, y, mask_rows, mask_index, causal, tq):
    R, T = y.shape
    zero = y.dtype.type(0)
    dx = np.empty_like(y)
    for r in prange(R):
        allowed, end = mask_rows[mask_index[r]], _causal_end(r, T, causal, tq)
        total = zero
        for j in range(end):
            total += g[r, j] if allowed[j] else zero
        for j in range(end):
            dx[r, j] = g[r, j] - mathfn.exp(y[r, j]) * total if allowed[j] else zero
        dx[r, end:] = zero
    return dx


KERNELS = {
    "softmax": lambda x, mask=None, *, causal: softmax(x, mask, causal),
    "softmax_grad": softmax_backward,
    "log_softmax": lambda x, mask=None, *, causal: log_softmax(x, mask, causal),
    "log_softmax_grad": lambda g, y, mask=None, *, causal: log_softmax_backward(g, y, mask, causal),
}
