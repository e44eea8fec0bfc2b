"""Hierarchical attention pooling (Yang et al. 2016, "Hierarchical Attention Networks for Document
Classification", NAACL).

One vector from a sequence of hidden states h_t (..., T, d), at word level (words of a sentence) and at
sentence level (sentence vectors of a document) alike:

    u_t = tanh(W h_t + b)                    (..., T, a)
    α_t = exp(u_tᵀ u_w) / Σ_t' exp(u_t'ᵀ u_w)   over the unpadded t, u_w a learned context vector (a,)
    s   = Σ_t α_t h_t                         (..., d)

This is the structured self-attention of Lin et al. 2017 with a single hop and a bias inside the tanh:
W, b are ``w_s1`` and u_w is the single column of ``w_s2``.
"""
from __future__ import annotations

from .structured import StructuredSelfAttention


class AttentionPooling(StructuredSelfAttention):
    """pooled, weights = AttentionPooling(dim, attention_dim)(hidden, mask=None).

    hidden (..., T, dim); ``mask`` (..., T) is True at real positions and False at padding. Returns s (..., dim)
    and α (..., T); a row that is all padding gives α = 0 and s = 0. The weights are recorded under this
    module's scope, shaped (..., 1, T)."""

    def __init__(self, dim: int, attention_dim: int, rng=None):
        super().__init__(dim, attention_dim, hops=1, bias=True, rng=rng)

    def forward(self, hidden, mask=None):
        pooled, weights = super().forward(hidden, mask)
        return pooled[..., 0, :], weights[..., 0, :]
