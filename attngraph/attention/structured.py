"""Structured self-attentive sentence embedding (Lin et al. 2017, "A Structured Self-attentive Sentence
Embedding", ICLR).

r attention hops read the n hidden states H (..., n, d) of a sentence, each hop a distribution over words:

    A = softmax(W_s2 tanh(W_s1 Hᵀ))   (..., r, n), the softmax over the n words
    M = A H                           (..., r, d), the sentence embedding matrix
    P = ‖A Aᵀ − I‖²_F                 the penalty that pushes the hops towards different words

with W_s1 (d_a, d) and W_s2 (r, d_a), stored transposed as ``Linear`` weights.
"""
from __future__ import annotations

import numpy as np

from ..core import functional as F
from ..nn import Linear, Module
from ..nn.checks import flag, sizes
from .attention import attend


class StructuredSelfAttention(Module):
    """embedding, weights = StructuredSelfAttention(dim, attention_dim, hops)(hidden, mask=None).

    hidden H (..., n, dim); ``mask`` (..., n) is True at real words and False at padding, which gets zero
    weight. Returns M (..., hops, dim) and A (..., hops, n); A is recorded under this module's scope.
    ``bias`` adds a bias inside the tanh (W_s1 h + b, which the paper does not have)."""

    def __init__(self, dim: int, attention_dim: int, hops: int, bias: bool = False, rng=None):
        super().__init__()
        dim, attention_dim, hops = sizes(dim=dim, attention_dim=attention_dim, hops=hops)
        self.w_s1 = Linear(dim, attention_dim, bias=flag("bias", bias), rng=rng)
        self.w_s2 = Linear(attention_dim, hops, bias=False, rng=rng)

    def forward(self, hidden, mask=None):
        scores = F.swapaxes(self.w_s2(F.tanh(self.w_s1(hidden))), -1, -2)
        return attend(scores, hidden, mask)


def redundancy_penalty(weights):
    """P = ‖A Aᵀ − I‖²_F for A (..., r, n): the squared Frobenius norm of each sentence (eq. 8 of the paper),
    averaged over the leading (batch) axes so that it does not grow with the batch size. A sentence that is
    all padding has A = 0 and contributes ‖I‖²_F = r."""
    r = weights.shape[-2]
    excess = weights @ F.swapaxes(weights, -1, -2) - np.eye(r, dtype=weights.dtype)
    return F.mean(F.sum(excess * excess, (-2, -1)))
