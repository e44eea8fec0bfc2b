"""Stochastic hard attention (Xu et al. 2015, "Show, Attend and Tell", §4.1).

The model reads ONE location s̃ ~ Multinoulli(α) instead of the α-weighted average: z = v_s̃. Sampling is
not differentiable, so the attention learns by REINFORCE (Williams 1992), whose estimate of the gradient of
the expected reward is unbiased for any baseline b:

    ∇ E[R] = E[(R − b) ∇ log α_s̃]

A training step (1) runs the graph to get α; (2) draws s̃ = ``sample(α, rng)`` in NumPy, outside the graph;
(3) feeds s̃ back as an input and minimizes the surrogate loss

    L = −(R − b) · log α_s̃ − λ · H(α),     H(α) = −Σ_s α_s log α_s,

averaged over the batch, with the reward R held constant — its gradient is the REINFORCE estimate of
−∇ E[R] minus the entropy bonus that keeps the attention exploring; (4) moves the baseline towards the
reward, b ← 0.9 b + 0.1 R (``MovingAverageBaseline``), which lowers the estimate's variance.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import functional as F
from ..nn import Module
from ..nn.checks import module, probability
from .attention import key_mask


def sample(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One location per row of ``weights`` (..., T): int64 indices (...) drawn by inverse CDF from one
    ``rng.random`` call, so the same generator state gives the same locations. Rows need not be exactly
    normalized (float32 softmax outputs), but a row of zeros (fully masked) has nothing to sample."""
    cdf = np.cumsum(np.asarray(weights, np.float64), -1)
    total = cdf[..., -1:]
    if np.any(total <= 0):
        raise ValueError("a row of attention weights sums to 0 (every location masked): nothing to sample")
    u = rng.random(total.shape) * total
    return np.minimum(np.sum(cdf <= u, -1), cdf.shape[-1] - 1).astype(np.int64)


def one_hot(locations, weights):
    """(..., T) bool, True where the last axis of ``weights`` reaches each row's sampled location (...)."""
    return F.equal(F.arange(weights, -1), F.expand_dims(locations, -1))


def log_probability(weights, locations):
    """log α_s̃ (...) of the sampled ``locations`` under ``weights`` (..., T)."""
    return F.log(F.sum(F.where(one_hot(locations, weights), weights, 0.0), -1))


def entropy(weights):
    """H(α) = −Σ α log α over the last axis; masked locations (α = 0) add 0 (log is taken of max(α, tiny),
    so no −∞ and no NaN gradient)."""
    tiny = float(np.finfo(weights.dtype).tiny)
    return -F.sum(weights * F.log(F.maximum(weights, tiny)), -1)


def reinforce_loss(weights, locations, reward, baseline, entropy_weight: float = 0.0):
    """mean(−(R − b) · log α_s̃ − λ · H(α)): the surrogate whose gradient is the REINFORCE estimate.

    weights α (..., T), ``locations`` s̃ (...) sampled from them, ``reward`` R (...) — no gradient flows
    into it, so it may be computed in the same graph (Xu et al. use log p(y | s̃)) — ``baseline`` b a float
    or a tensor, ``entropy_weight`` λ."""
    advantage = F.stop_gradient(reward) - baseline
    return -F.mean(advantage * log_probability(weights, locations) + entropy_weight * entropy(weights))


@dataclass
class MovingAverageBaseline:
    """b ← momentum · b + (1 − momentum) · mean(R), kept outside the graph and fed to ``reinforce_loss``."""

    value: float = 0.0
    momentum: float = 0.9

    def __post_init__(self):
        self.momentum = probability("momentum", self.momentum)

    def update(self, reward) -> float:
        self.value = self.momentum * self.value + (1 - self.momentum) * float(np.mean(reward))
        return self.value


class HardAttention(Module):
    """context, weights = HardAttention(score)(query, keys, values=None, mask=None, locations=None).

    weights α = softmax(score(query, keys)) over the keys ``mask`` allows, (..., Tq, Tk), recorded under this
    module's scope. With ``locations`` (..., Tq), the sampled key of each query, the context is that key's
    value; without, it is the expectation Σ α v, which Xu et al. use in place of the sample with
    probability 0.5 to lower the variance."""

    def __init__(self, score: Module):
        super().__init__()
        self.score = module("score", score)

    def forward(self, query, keys, values=None, mask=None, locations=None):
        scores = self.score(query, keys)
        mask = key_mask(mask, scores)
        weights = F.name(F.softmax(scores, mask=mask), "attention")
        chosen = weights if locations is None else F.astype(one_hot(locations, weights), weights.dtype)
        return chosen @ (keys if values is None else values), weights
