"""Content-based addressing of a memory, as in Neural Turing Machines (Graves et al. 2014, §3.3.1-3.3.2).

A head emits a key k (..., M), a key strength β ≥ 0 and a sharpening exponent γ ≥ 1; over the N rows
M_i of a memory (..., N, M):

    w_i = softmax_i(β · K(k, M_i))         K the cosine similarity (``CosineScore``)
    w̃_i = w_i^γ / Σ_j w_j^γ               sharpening
    r   = Σ_i w̃_i M_i                       the read vector

β → ∞ makes w a hard argmax read, β = 0 a uniform one. In the full NTM the content weights are interpolated
with the previous step's and shifted before being sharpened; ``sharpen`` takes any weights for that reason.
Applied straight to content weights, as here, it multiplies β by γ.
"""
from __future__ import annotations

import numpy as np

from ..core import functional as F
from ..nn import Linear, Module
from ..nn.checks import positive, sizes
from .scores import CosineScore


def sharpen(weights, gamma, mask=None):
    """w^γ / Σ_j w^γ over the last axis, for weights w (..., N) and exponents γ (...) ≥ 1, one per row.

    Computed as softmax(γ · log w), the same ratio in log space, so that a large γ cannot underflow every
    w^γ to 0 and give 0/0; zero weights (masked slots) stay zero. A row that ``mask`` (True = may attend)
    forbids entirely is all zeros."""
    log_weights = F.log(F.maximum(weights, float(np.finfo(weights.dtype).tiny)))
    return F.softmax(F.expand_dims(gamma, -1) * log_weights, mask=mask)


class ContentAddressing(Module):
    """read, weights = ContentAddressing(eps)(key, memory, beta, gamma=None, mask=None).

    key (..., M), memory (..., N, M), beta (...) ≥ 0 and gamma (...) ≥ 1 (no sharpening when None), one per
    key; ``mask`` (..., N) is True at the memory rows that may be read. Returns the read vector (..., M) and
    the weights (..., N) of the module docstring, recorded under this module's scope for heatmaps. ``eps``
    bounds the norms in the cosine (a zero row has similarity 0 to every key)."""

    def __init__(self, eps: float = 1e-8):
        super().__init__()
        self.similarity = CosineScore(eps=positive("eps", eps))

    def forward(self, key, memory, beta, gamma=None, mask=None):
        scores = F.expand_dims(beta, -1) * self.similarity(F.expand_dims(key, -2), memory)[..., 0, :]
        weights = F.softmax(scores, mask=mask)
        if gamma is not None:
            weights = sharpen(weights, gamma, mask)
        F.name(weights, "attention")
        return (F.expand_dims(weights, -2) @ memory)[..., 0, :], weights


class ContentReadHead(Module):
    """read, weights = ContentReadHead(controller_dim, memory_dim)(h, memory, mask=None): an NTM read head.

    One linear layer of the controller's output h (..., controller_dim) gives the key k, and the raw
    strength and sharpening values b, g: β = softplus(b) ≥ 0, γ = 1 + softplus(g) ≥ 1. They address
    ``memory`` (..., N, memory_dim) by content (``ContentAddressing``)."""

    def __init__(self, controller_dim: int, memory_dim: int, eps: float = 1e-8, rng=None):
        super().__init__()
        controller_dim, self.memory_dim = sizes(controller_dim=controller_dim, memory_dim=memory_dim)
        self.params = Linear(controller_dim, self.memory_dim + 2, rng=rng)
        self.addressing = ContentAddressing(eps)

    def forward(self, h, memory, mask=None):
        out = self.params(h)
        key, strength, sharpness = out[..., :self.memory_dim], out[..., -2], out[..., -1]
        return self.addressing(key, memory, F.softplus(strength), 1 + F.softplus(sharpness), mask)
