"""Score functions: how well each key matches each query.

Every score maps queries q of shape (..., Tq, dq) and keys k of shape (..., Tk, dk) to scores of shape
(..., Tq, Tk); ``Attention`` turns them into weights with a (masked) softmax.
"""
from __future__ import annotations

import math

import numpy as np

from ..core import functional as F
from ..core.additive import additive_scores
from ..core.parameter import Parameter
from ..nn import Linear, Module, init
from ..nn.checks import flag, integer, positive, sizes


class DotScore(Module):
    """score(q, k) = qᵀk (Luong et al. 2015, "dot")."""

    def forward(self, q, k):
        return q @ F.swapaxes(k, -1, -2)


class ScaledDotScore(Module):
    """score(q, k) = qᵀk / √d (Vaswani et al. 2017): keeps the logits' variance near 1 for large d."""

    def forward(self, q, k):
        return q @ F.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]))


class GeneralScore(Module):
    """score(q, k) = qᵀ W k, a bilinear form (Luong et al. 2015, "general")."""

    def __init__(self, query_dim: int, key_dim: int, rng=None):
        super().__init__()
        query_dim, key_dim = sizes(query_dim=query_dim, key_dim=key_dim)
        self.weight = Parameter(init.uniform((query_dim, key_dim), 1 / math.sqrt(query_dim), rng=rng))

    def forward(self, q, k):
        return (q @ self.weight) @ F.swapaxes(k, -1, -2)


class AdditiveScore(Module):
    """score(q, k) = vᵀ tanh(W₁q + W₂k) (Bahdanau et al. 2015), a one-hidden-layer MLP of both.

    The two projections are computed once per query and once per key; ``core.additive.additive_scores`` takes
    them to the scores without holding the (..., Tq, Tk, H) hidden tensor."""

    def __init__(self, query_dim: int, key_dim: int, hidden: int, rng=None):
        super().__init__()
        query_dim, key_dim, hidden = sizes(query_dim=query_dim, key_dim=key_dim, hidden=hidden)
        self.w_query = Linear(query_dim, hidden, bias=False, rng=rng)
        self.w_key = Linear(key_dim, hidden, rng=rng)
        self.v = Parameter(init.uniform((hidden,), 1 / math.sqrt(hidden), rng=rng))

    def forward(self, q, k):
        return additive_scores(self.w_query(q), self.w_key(k), self.v)


class ConcatScore(Module):
    """score(q, k) = vᵀ tanh(W[q; k] + b) (Bahdanau et al. 2015; Luong's "concat").

    W[q; k] equals W_q q + W_k k for the row blocks W = [W_q; W_k], which is how it is computed: the
    Tq × Tk concatenations are never built."""

    def __init__(self, query_dim: int, key_dim: int, hidden: int, rng=None):
        super().__init__()
        query_dim, key_dim, hidden = sizes(query_dim=query_dim, key_dim=key_dim, hidden=hidden)
        self.query_dim = query_dim
        self.w = Linear(query_dim + key_dim, hidden, rng=rng)
        self.v = Parameter(init.uniform((hidden,), 1 / math.sqrt(hidden), rng=rng))

    def forward(self, q, k):
        w_q, w_k = F.split(self.w.weight, [self.query_dim, self.w.weight.shape[0] - self.query_dim], axis=0)
        return additive_scores(q @ w_q, k @ w_k + self.w.bias, self.v)


class CosineScore(Module):
    """score(q, k) = β · cos(q, k), content-based addressing with sharpening β > 0 (Graves et al. 2014,
    Neural Turing Machines). ``beta`` is a fixed number or, with ``learn_beta``, a parameter starting there.

    cos(q, k) = (q / max(‖q‖, ε)) · (k / max(‖k‖, ε)), PyTorch's ``cosine_similarity``: each vector is
    normalized on its own, so a zero vector scores 0 against every key, with finite gradients. The clamped
    norm is computed as √max(‖x‖², ε²), which passes no gradient below ε (‖x‖ itself has none at x = 0);
    ε² must be a normal float32 number, so ε >= 1.1e-19."""

    def __init__(self, beta: float = 1.0, learn_beta: bool = False, eps: float = 1e-8):
        super().__init__()
        self.eps = positive("eps", eps)
        if self.eps ** 2 < np.finfo(np.float32).tiny:
            raise ValueError(f"eps must be at least 1.1e-19, so that eps² does not underflow in float32; got {eps}")
        beta = positive("beta", beta)
        self.beta = Parameter(np.array(beta, np.float32)) if flag("learn_beta", learn_beta) else beta

    def forward(self, q, k):
        return self.beta * (_unit(q, self.eps) @ F.swapaxes(_unit(k, self.eps), -1, -2))


def _unit(x, eps: float):
    """x / max(‖x‖, ε) over the last axis, as √max(‖x‖², ε²)."""
    return x / F.sqrt(F.maximum(F.sum(x * x, -1, keepdims=True), eps * eps))


class LocationScore(Module):
    """score(q, ·) = W_a q (Luong et al. 2015, "location"): the weights depend on the query alone, one
    learned score per source position up to ``max_length``; keys only fix how many positions there are."""

    def __init__(self, query_dim: int, max_length: int, rng=None):
        super().__init__()
        self.max_length = integer("max_length", max_length)
        self.w = Linear(integer("query_dim", query_dim), self.max_length, rng=rng)

    def forward(self, q, k):
        length = k.shape[-2]
        if isinstance(length, str) or length > self.max_length:
            raise ValueError(f"location-based attention needs a concrete key length <= {self.max_length}, "
                             f"got {length}")
        return self.w(q)[..., :length]
