"""Multi-head attention (Vaswani et al. 2017), with grouped-query attention, ALiBi and a key/value cache.

head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V) with scaled dot scores; MHA(Q, K, V) = [head_1; ...; head_h] W^O.
The h projections of width d/h are computed as one d × d projection whose output is split into heads.

Grouped-query attention (Ainslie et al. 2023) projects keys and values to g < h heads only, each read by the
h / g query heads of its group: head_i = Attention(Q W_i^Q, K W_⌊i/(h/g)⌋^K, V W_⌊i/(h/g)⌋^V); g = 1 is multi-query
attention (Shazeer 2019). A decoder's key/value cache is then h / g times smaller.

ALiBi (Press et al. 2022) adds no position embedding: head i's scores get the bias −mᵢ·|qpos − j| for the
query at position qpos (= i + Tk − Tq, bottom-right aligned) and key j, with the geometric slopes
mᵢ = 2^(−8i/h) (``alibi_slopes``).
"""
from __future__ import annotations

import math

import numpy as np

from ..core import functional as F
from ..nn import Dropout, Linear, Module
from ..nn.checks import divisible, flag, integer, probability, sizes
from .attention import key_mask


def split_heads(x, heads: int):
    """(B, T, d) -> (B, h, T, d/h)."""
    *lead, t, d = x.shape
    return F.swapaxes(F.reshape(x, (*lead, t, heads, d // heads)), -2, -3)


def merge_heads(x):
    """(B, h, T, d/h) -> (B, T, d): the inverse of ``split_heads``."""
    *lead, h, t, dh = x.shape
    return F.reshape(F.swapaxes(x, -2, -3), (*lead, t, h * dh))


def alibi_slopes(heads: int) -> np.ndarray:
    """ALiBi's per-head slopes (Press et al. 2022): 2^(−8i/h) for i = 1 … h when h is a power of 2; otherwise
    those of the power of 2 n below h, then every other slope of 2n, as the paper's code."""
    n = 2 ** int(math.log2(heads))
    slopes = 2.0 ** (-8 * np.arange(1, n + 1) / n)
    return np.concatenate([slopes, 2.0 ** (-8 * np.arange(1, 2 * n + 1, 2) / (2 * n))[:heads - n]])


def alibi_bias(q, k, slopes: np.ndarray):
    """The (h, Tq, Tk) ALiBi bias −mᵢ·|i + Tk − Tq − j| for q (..., h, Tq, ·), k (..., Tk, ·), read when the graph
    runs (the lengths may be symbolic)."""
    offset = F.emit("size", k, axes=(len(k.shape) - 2,), dtype="int64") - \
        F.emit("size", q, axes=(len(q.shape) - 2,), dtype="int64")
    distance = F.abs(F.expand_dims(F.arange(q, -2) + offset, -1) - F.arange(k, -2)).astype(q.dtype)
    return F.reshape(-slopes.astype(q.dtype), (-1, 1, 1)) * distance


def repeat_heads(x, times: int):
    """(B, g, T, d) -> (B, g·times, T, d): each head repeated ``times`` times in a row (grouped-query attention)."""
    if times == 1:
        return x
    *lead, g, t, d = x.shape
    return F.reshape(F.broadcast_to(F.expand_dims(x, -3), (*lead, g, times, t, d)), (*lead, g * times, t, d))


def head_mask(mask):
    """Masks given per batch — (B, Tk) padding or (B, Tq, Tk) — get the head axis: (B, 1, 1, Tk) / (B, 1, Tq, Tk)."""
    if mask is None or len(mask.shape) == 4:
        return mask
    if len(mask.shape) == 2:
        return F.reshape(mask, (mask.shape[0], 1, 1, mask.shape[1]))
    return F.expand_dims(mask, 1)


class MultiHeadAttention(Module):
    """out = MultiHeadAttention(d_model, heads, kv_heads=None, alibi=False)(query, key, value, mask=None,
    causal=False, bias=None, cache=None).

    query (B, Tq, d), key and value (B, Tk, d). ``mask`` (True = may attend) is (B, Tk) for padding,
    (B, Tq, Tk), or anything broadcasting to (B, h, Tq, Tk); ``causal`` lets query i see keys j ≤ i + Tk − Tq;
    ``bias`` (float) is added to the scaled scores and broadcasts to (B, h, Tq, Tk). ``kv_heads`` (dividing
    ``heads``; default ``heads``) is the number of key/value heads of grouped-query attention; ``alibi`` adds
    the ALiBi bias. The weights (B, h, Tq, Tk) are recorded under this module's scope.

    ``cache``, for incremental decoding, is a dict: empty, it receives this call's keys and values (B, kv_heads,
    Tk, d/h) as "k" and "v"; holding them from earlier calls, with one more position at the end whose content is
    ignored, it takes the single query's key and value there (a step: Tq = 1, causal) and is updated in place."""

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0, bias: bool = True, rng=None,
                 kv_heads: int | None = None, alibi: bool = False):
        super().__init__()
        d_model, heads = sizes(d_model=d_model, heads=heads)
        self.d_model, self.heads = divisible("d_model", d_model, "heads", heads), heads
        self.kv_heads = integer("kv_heads", heads if kv_heads is None else kv_heads)
        divisible("heads", heads, "kv_heads", self.kv_heads)
        dropout, bias = probability("dropout", dropout), flag("bias", bias)
        self.slopes = alibi_slopes(heads) if flag("alibi", alibi) else None
        kv_width = self.kv_heads * (d_model // heads)
        self.w_q = Linear(d_model, d_model, bias, rng=rng)
        self.w_k = Linear(d_model, kv_width, bias, rng=rng)
        self.w_v = Linear(d_model, kv_width, bias, rng=rng)
        self.w_o = Linear(d_model, d_model, bias, rng=rng)
        self.dropout = Dropout(dropout)
        self.context = None         # a context-parallel attention (attention.ring.Ring) when the sequence is split

    def forward(self, query, key, value, mask=None, causal: bool = False, bias=None, cache: dict | None = None):
        q = split_heads(self.w_q(query), self.heads)
        k, v = (split_heads(w(x), self.kv_heads) for w, x in ((self.w_k, key), (self.w_v, value)))
        if cache is not None:
            k, v = (_cached(cache, name, x) for name, x in (("k", k), ("v", v)))
        k, v = (repeat_heads(x, self.heads // self.kv_heads) for x in (k, v))
        if self.context is not None:
            if any(x is not None for x in (mask, bias, cache, self.slopes)):
                raise ValueError("attention split over ranks (context=) takes no mask, bias, cache or ALiBi")
            return self.w_o(merge_heads(self.context(q, k, v, causal=causal)))
        scores = q @ F.swapaxes(k, -1, -2) * (1 / (self.d_model // self.heads) ** 0.5)
        for extra in (bias, None if self.slopes is None else alibi_bias(q, k, self.slopes)):
            scores = scores if extra is None else scores + extra
        mask = key_mask(head_mask(mask), scores)
        weights = F.name(F.softmax(scores, mask=mask, causal=causal), "attention")
        return self.w_o(merge_heads(self.dropout(weights) @ v))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, heads={self.heads}" + \
            (f", kv_heads={self.kv_heads}" if self.kv_heads != self.heads else "") + \
            (", alibi=True" if self.slopes is not None else "")


def _cached(cache: dict, name: str, x):
    """x (B, g, T, d) stored as cache[name], or, when the cache holds (B, g, S, d), written at its last position
    S − 1 (x then has T = 1): the keys or values to attend to, which the cache then holds."""
    if name in cache:
        past = cache[name]
        last = F.equal(F.arange(past, -2), F.emit("size", past, axes=(len(past.shape) - 2,), dtype="int64") - 1)
        x = F.where(F.expand_dims(last, -1), x, past)
    cache[name] = x
    return x
