"""Local attention (Luong, Pham & Manning 2015, "Effective Approaches to Attention-based Neural Machine
Translation", §3.2): each query looks only at a window of 2D + 1 source positions around an aligned
position p_t, and favours the middle of the window:

    a_t(s) = align(h_t, h̄_s) · exp(−(s − p_t)² / 2σ²),   σ = D / 2,   for s in [p_t − D, p_t + D]
    c_t = Σ_s a_t(s) h̄_s

- local-m (monotonic):  p_t = t, the query's own position;
- local-p (predictive): p_t = S · sigmoid(v_pᵀ tanh(W_p h_t)), a real number in (0, S), S the source length.

align is the softmax of the scores over the source positions inside the window (and allowed by the mask);
as in the paper, the Gaussian multiplies that normalized alignment and the product is *not* renormalized,
so a row of weights sums to at most 1. Edges: a window that crosses an end of the sentence is cut there
("we simply ignore the outside part"), and the softmax runs over the positions that remain. A window
holding no allowed position (local-m with t > S − 1 + D) gives zero weights and a zero context.
Positions are 0-based: s = 0 .. S − 1 and t = 0 .. Tq − 1 (shifted by ``step``).
"""
from __future__ import annotations

import math

from ..core import functional as F
from ..core.parameter import Parameter
from ..nn import Linear, Module, init
from ..nn.checks import integer, module, sizes
from .attention import key_mask


def query_positions(query, dtype, step: int = 0):
    """The queries' positions step, step + 1, ... as floats (Tq, 1), to broadcast against scores (..., Tq, Tk)."""
    return F.expand_dims(F.arange(query, -2).astype(dtype), -1) + float(step)


def key_positions(keys):
    """The keys' positions 0 .. Tk − 1 as floats of their dtype, (Tk,)."""
    return F.arange(keys, -2).astype(keys.dtype)


def source_lengths(keys, mask=None):
    """The source length seen by each query: the number of keys ``mask`` allows (..., 1), or Tk without a mask."""
    if mask is None:
        return F.max(key_positions(keys)) + 1.0
    return F.sum(F.astype(mask, keys.dtype), -1, keepdims=True)


class LocalAttention(Module):
    """Luong's local-m attention: context, weights = LocalAttention(score, window)(query, keys, values=None,
    mask=None, step=0), with p_t = t.

    query (..., Tq, dq), keys (..., Tk, dk), values (..., Tk, dv) (default: the keys); ``mask`` (True = may
    attend) broadcasts to the scores (..., Tq, Tk). ``window`` is D. Query t sits at position step + t: to
    decode one step at a time pass Tq = 1 and ``step`` = t. Weights (..., Tq, Tk) are recorded under this
    module's scope."""

    def __init__(self, score: Module, window: int):
        super().__init__()
        self.score, self.window = module("score", score), integer("window", window)

    def centres(self, query, keys, mask, step: int):
        """p_t (Tq, 1): the query's own position."""
        return query_positions(query, keys.dtype, step)

    def forward(self, query, keys, values=None, mask=None, step: int = 0):
        scores = self.score(query, keys)
        mask = key_mask(mask, scores)
        squared_distance = (key_positions(keys) - self.centres(query, keys, mask, step)) ** 2
        allowed = squared_distance <= float(self.window ** 2)
        align = F.softmax(scores, mask=allowed if mask is None else allowed & mask)
        sigma = self.window / 2
        weights = F.name(align * F.exp(squared_distance * (-1 / (2 * sigma ** 2))), "attention")
        return weights @ (keys if values is None else values), weights

    def extra_repr(self) -> str:
        return f"window={self.window}"


class PredictiveLocalAttention(LocalAttention):
    """Luong's local-p attention: LocalAttention whose centre is predicted from the query,
    p_t = S · sigmoid(v_pᵀ tanh(W_p h_t)) with W_p (dq, hidden) and v_p (hidden,). S is the source length:
    the number of keys the mask allows, so that padding does not move the window; ``step`` is unused."""

    def __init__(self, score: Module, window: int, query_dim: int, hidden: int, rng=None):
        super().__init__(score, window)
        query_dim, hidden = sizes(query_dim=query_dim, hidden=hidden)
        self.w_p = Linear(query_dim, hidden, bias=False, rng=rng)
        self.v_p = Parameter(init.uniform((hidden,), 1 / math.sqrt(hidden), rng=rng))

    def centres(self, query, keys, mask, step: int):
        """p_t (..., Tq, 1) = S · sigmoid(v_pᵀ tanh(W_p h_t))."""
        return source_lengths(keys, mask) * F.sigmoid(F.expand_dims(F.tanh(self.w_p(query)) @ self.v_p, -1))
