"""SNAIL, a simple neural attentive meta-learner (Mishra, Rohaninejad, Chen & Abbeel, ICLR 2018).

A sequence x (B, T, D) of (feature, label) pairs passes through blocks that each concatenate new channels to
their input, all causal so that step t sees only steps ≤ t:

  DenseBlock(x; d, f):   z = tanh(W_f ⋆_d x) ∘ σ(W_g ⋆_d x),  out = [x, z]       (⋆_d: causal conv, kernel 2,
                                                                                  dilation d, f filters)
  TCBlock(x; T, f):      DenseBlocks with dilations 1, 2, 4, …, 2^(⌈log₂ T⌉ − 1), so the last step sees all T
  AttentionBlock(x; k, v): q, k, v = x W_q, x W_k, x W_v,  out = [x, softmax(q kᵀ / √k, causal) v]

The registered model ("snail") does few-shot classification as in the paper's section 4.1: an episode shows
``ways · shots`` support examples with their labels, then a query with an all-zero label; the classes' features
and which label names which class are drawn anew for every episode, so that the query's label can only be found
by looking back at the support examples. The logits at every step are read by a linear layer; the loss is the
cross-entropy of the query's (the last step's).
"""
from __future__ import annotations

import math

import numpy as np

from ..core import functional as F
from ..core.sdpa import scaled_dot_product_attention
from ..core.tracing import Input
from ..nn import Conv1d, Linear, Module, ModuleList
from ..nn.checks import integer, sizes
from .registry import ModelSpec, register


class DenseBlock(Module):
    """[x, tanh(W_f ⋆ x) ∘ σ(W_g ⋆ x)] over x (B, T, C): ``filters`` channels from causal convolutions of kernel 2
    and ``dilation``, concatenated to x's, (B, T, C + filters)."""

    def __init__(self, channels: int, filters: int, dilation: int, rng=None):
        super().__init__()
        self.filter = Conv1d(channels, filters, 2, dilation=dilation, causal=True, rng=rng)
        self.gate = Conv1d(channels, filters, 2, dilation=dilation, causal=True, rng=rng)

    def forward(self, x):
        h = F.swapaxes(x, 1, 2)
        z = F.tanh(self.filter(h)) * F.sigmoid(self.gate(h))
        return F.concat([x, F.swapaxes(z, 1, 2)], axis=2)


class TCBlock(Module):
    """⌈log₂ length⌉ DenseBlocks of ``filters`` each, dilations 1, 2, 4, …: (B, T, C) → (B, T, C + n·filters), the
    receptive field covering ``length`` steps."""

    def __init__(self, channels: int, length: int, filters: int, rng=None):
        super().__init__()
        count = max(1, math.ceil(math.log2(integer("length", length))))
        self.blocks = ModuleList(DenseBlock(channels + i * filters, filters, 2 ** i, rng=rng) for i in range(count))
        self.out_channels = channels + count * filters

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


class AttentionBlock(Module):
    """[x, softmax(q kᵀ / √key_size, causal) v] with q, k, v = x W_q, x W_k, x W_v over x (B, T, C): single-head
    causal attention whose read (value_size channels) is concatenated to x."""

    def __init__(self, channels: int, key_size: int, value_size: int, rng=None):
        super().__init__()
        self.query, self.key = Linear(channels, key_size, rng=rng), Linear(channels, key_size, rng=rng)
        self.value = Linear(channels, value_size, rng=rng)
        self.out_channels = channels + value_size

    def forward(self, x):
        read = scaled_dot_product_attention(self.query(x), self.key(x), self.value(x), causal=True)
        return F.concat([x, read], axis=2)


class SNAIL(Module):
    """logits = SNAIL(...)(x): x (B, T, features + classes) → logits (B, T, classes) at every step.

    Attention(key_size, value_size) → TC(filters) → Attention → TC → Attention(2·key_size, 2·value_size) → Linear,
    the paper's Omniglot stack (section 4.1) at a chosen width; T = ``ways · shots + 1``."""

    def __init__(self, features: int = 16, ways: int = 5, shots: int = 1, key_size: int = 32, value_size: int = 32,
                 filters: int = 32, rng=None):
        super().__init__()
        features, ways, shots, key_size, value_size, filters = sizes(
            features=features, ways=ways, shots=shots, key_size=key_size, value_size=value_size, filters=filters)
        self.features, self.ways, self.shots = features, integer("ways", ways, minimum=2), shots
        length, channels = ways * shots + 1, features + ways
        blocks = []
        for make in (lambda c: AttentionBlock(c, key_size, value_size, rng=rng),
                     lambda c: TCBlock(c, length, filters, rng=rng),
                     lambda c: AttentionBlock(c, key_size, value_size, rng=rng),
                     lambda c: TCBlock(c, length, filters, rng=rng),
                     lambda c: AttentionBlock(c, 2 * key_size, 2 * value_size, rng=rng)):
            blocks.append(make(channels))
            channels = blocks[-1].out_channels
        self.blocks = ModuleList(blocks)
        self.classify = Linear(channels, ways, rng=rng)

    @property
    def length(self) -> int:
        return self.ways * self.shots + 1

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.classify(x)


def episodes(rng: np.random.Generator, size: int, features: int, ways: int, shots: int,
             noise: float = 0.1) -> dict[str, np.ndarray]:
    """``size`` few-shot episodes: x (size, ways·shots + 1, features + ways), labels (size,).

    Per episode, ``ways`` class centres are drawn from N(0, I) and shuffled labels assigned to them; the support
    steps hold centre + N(0, noise²) with the one-hot label, in random order; the last step holds a noisy example
    of a random class and no label. ``labels`` is the query's label."""
    length = ways * shots
    x = np.zeros((size, length + 1, features + ways), np.float32)
    labels = rng.integers(0, ways, size)
    for e in range(size):
        centres = rng.standard_normal((ways, features))
        support = rng.permutation(np.repeat(np.arange(ways), shots))
        x[e, :length, :features] = centres[support] + noise * rng.standard_normal((length, features))
        x[e, np.arange(length), features + support] = 1
        x[e, length, :features] = centres[labels[e]] + noise * rng.standard_normal(features)
    return dict(x=x, labels=labels)


def loss(model: SNAIL, x, labels):
    """Cross-entropy of the query's logits (the last step's)."""
    return F.cross_entropy(model(x)[:, -1], labels)


register(ModelSpec(
    name="snail",
    factory=SNAIL,
    inputs=lambda model: dict(x=Input(("B", model.length, model.features + model.ways))),
    batch=lambda model, rng, size: episodes(rng, size, model.features, model.ways, model.shots),
    loss=loss,
    defaults=dict(features=16, ways=5, shots=1, key_size=32, value_size=32, filters=32),
    tiny=dict(features=4, ways=2, shots=2, key_size=4, value_size=4, filters=4),
    description="SNAIL meta-learner (Mishra et al. 2018): causal dilated convolutions and attention over "
                "few-shot episodes",
))
