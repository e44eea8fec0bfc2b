"""Optimizers that update ``Parameter`` arrays in place from a list of gradients."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..core.parameter import Parameter


class Adam:
    """Adam (Kingma & Ba 2015): m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², θ ← θ − lr·m̂/(√v̂ + ε), with the
    bias corrections m̂ = m/(1−β₁ᵗ), v̂ = v/(1−β₂ᵗ)."""

    def __init__(self, params: Sequence[Parameter], lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8):
        self.params, self.lr, self.betas, self.eps, self.t = list(params), lr, betas, eps, 0
        self.m = [np.zeros_like(p.data) for p in self.params]
        self.v = [np.zeros_like(p.data) for p in self.params]

    def step(self, grads: Sequence[np.ndarray]) -> None:
        if len(grads) != len(self.params):
            raise ValueError(f"{len(grads)} gradients for {len(self.params)} parameters")
        self.t += 1
        b1, b2 = self.betas
        step = self.lr * np.sqrt(1 - b2 ** self.t) / (1 - b1 ** self.t)
        for p, g, m, v in zip(self.params, grads, self.m, self.v):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            p.data -= (step * m / (np.sqrt(v) + self.eps)).astype(p.data.dtype)
