"""The fused primitives written out as compositions of elementwise ops and reductions.

They define what the fused kernels must compute (the tests compare the two, values and gradients) and
are the readable version of the math; the fused kernels are what models run.
"""
from __future__ import annotations

import math

import numpy as np

from . import tensor as F
from .tensor import as_node


def softmax(x, axis: int = -1, mask=None):
    """exp(x − max x) / Σ exp(x − max x) over the entries ``mask`` allows; fully masked rows give 0."""
    if mask is not None:
        x = F.where(mask, x, float(np.finfo(as_node(x).dtype).min))
    e = F.exp(x - F.stop_gradient(F.max(x, axis, keepdims=True)))
    if mask is not None:
        e = F.where(mask, e, 0.0)
    return e / F.maximum(F.sum(e, axis, keepdims=True), float(np.finfo(as_node(x).dtype).tiny))


def log_softmax(x, axis: int = -1):
    """x − max x − log Σ exp(x − max x)."""
    shifted = x - F.stop_gradient(F.max(x, axis, keepdims=True))
    return shifted - F.log(F.sum(F.exp(shifted), axis, keepdims=True))


def layer_norm(x, weight, bias, eps: float = 1e-5):
    """(x − μ) / √(σ² + ε) · γ + β with the biased variance σ² = mean((x − μ)²)."""
    centered = x - F.mean(x, -1, keepdims=True)
    return centered / F.sqrt(F.mean(centered * centered, -1, keepdims=True) + eps) * weight + bias


def cross_entropy(logits, targets, ignore_index: int | None = None):
    """−mean log softmax(logits)[target] over the targets not equal to ``ignore_index``."""
    classes = as_node(logits).shape[-1]
    picked = F.equal(np.arange(classes, dtype=as_node(targets).dtype), F.expand_dims(targets, -1))
    picked = picked.astype(as_node(logits).dtype)
    nll = -F.sum(log_softmax(logits) * picked, -1)
    if ignore_index is None:
        return F.mean(nll)
    keep = F.not_equal(targets, ignore_index).astype(as_node(logits).dtype)
    return F.sum(nll * keep) / F.maximum(F.sum(keep), 1.0)


def scaled_dot_product_attention(q, k, v, mask=None, bias=None, causal: bool = False):
    """softmax(q kᵀ / √d + bias, mask, causal) v, with the Tq × Tk scores and weights as graph nodes."""
    scores = F.matmul(q, F.swapaxes(k, -1, -2)) * (1 / math.sqrt(as_node(q).shape[-1]))
    if bias is not None:
        scores = scores + bias
    return F.matmul(F.softmax(scores, mask=mask, causal=causal), v)


def additive_scores(a, b, v):
    """vᵀ tanh(a_i + b_j) for every query a_i (..., Tq, H) and key b_j (..., Tk, H), through the broadcast
    (..., Tq, Tk, H) hidden tensor."""
    return F.matmul(F.tanh(F.expand_dims(a, -2) + F.expand_dims(b, -3)), v)
