"""Multi-head attention (Vaswani et al. 2017).

head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V) with scaled dot scores; MHA(Q, K, V) = [head_1; ...; head_h] W^O.
The h projections of width d/h are computed as one d × d projection whose output is split into heads.
"""
from __future__ import annotations

from ..core import functional as F
from ..nn import Dropout, Linear, Module
from ..nn.checks import divisible, flag, probability, sizes
from .attention import key_mask


def split_heads(x, heads: int):
    """(B, T, d) -> (B, h, T, d/h)."""
    *lead, t, d = x.shape
    return F.swapaxes(F.reshape(x, (*lead, t, heads, d // heads)), -2, -3)


def merge_heads(x):
    """(B, h, T, d/h) -> (B, T, d): the inverse of ``split_heads``."""
    *lead, h, t, dh = x.shape
    return F.reshape(F.swapaxes(x, -2, -3), (*lead, t, h * dh))


def head_mask(mask):
    """Masks given per batch — (B, Tk) padding or (B, Tq, Tk) — get the head axis: (B, 1, 1, Tk) / (B, 1, Tq, Tk)."""
    if mask is None or len(mask.shape) == 4:
        return mask
    if len(mask.shape) == 2:
        return F.reshape(mask, (mask.shape[0], 1, 1, mask.shape[1]))
    return F.expand_dims(mask, 1)


class MultiHeadAttention(Module):
    """out = MultiHeadAttention(d_model, heads)(query, key, value, mask=None, causal=False).

    query (B, Tq, d), key and value (B, Tk, d). ``mask`` (True = may attend) is (B, Tk) for padding,
    (B, Tq, Tk), or anything broadcasting to (B, h, Tq, Tk); ``causal`` lets query i see keys j ≤ i + Tk − Tq.
    The weights (B, h, Tq, Tk) are recorded under this module's scope."""

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0, bias: bool = True, rng=None):
        super().__init__()
        d_model, heads = sizes(d_model=d_model, heads=heads)
        self.d_model, self.heads = divisible("d_model", d_model, "heads", heads), heads
        dropout, bias = probability("dropout", dropout), flag("bias", bias)
        self.w_q = Linear(d_model, d_model, bias, rng=rng)
        self.w_k = Linear(d_model, d_model, bias, rng=rng)
        self.w_v = Linear(d_model, d_model, bias, rng=rng)
        self.w_o = Linear(d_model, d_model, bias, rng=rng)
        self.dropout = Dropout(dropout)

    def forward(self, query, key, value, mask=None, causal: bool = False):
        q, k, v = (split_heads(w(x), self.heads) for w, x in ((self.w_q, query), (self.w_k, key), (self.w_v, value)))
        mask = head_mask(mask)
        scores = q @ F.swapaxes(k, -1, -2) * (1 / (self.d_model // self.heads) ** 0.5)
        mask = key_mask(mask, scores)
        weights = F.name(F.softmax(scores, mask=mask, causal=causal), "attention")
        return self.w_o(merge_heads(self.dropout(weights) @ v))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, heads={self.heads}"
