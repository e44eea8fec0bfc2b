"""The NumPy side of the benchmarks: forward and backward written out by hand, as one would without a
framework. Attention materializes the T × T scores, as the straightforward formulation does."""
from __future__ import annotations

import numpy as np


def attention(q, k, v, g):
    """Causal softmax(q kᵀ/√d) v and the gradients of Σ out ∘ g with respect to q, k, v."""
    t, d = q.shape[-2], q.shape[-1]
    allowed = np.tril(np.ones((t, t), bool))
    s = np.where(allowed, q @ k.swapaxes(-1, -2) / np.float32(np.sqrt(d)), -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dv = p.swapaxes(-1, -2) @ g
    dp = g @ v.swapaxes(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) / np.float32(np.sqrt(d))
    return p @ v, ds @ k, ds.swapaxes(-1, -2) @ q, dv


def layer_norm(x, w, b, g, eps=1e-5):
    """LayerNorm over the last axis and the gradients of Σ out ∘ g with respect to x, w, b."""
    mean = x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + np.float32(eps))
    xhat = (x - mean) * rstd
    gx = g * w
    dx = rstd * (gx - gx.mean(-1, keepdims=True) - xhat * (gx * xhat).mean(-1, keepdims=True))
    return xhat * w + b, dx, (g * xhat).sum(0), g.sum(0)


def softmax(x, g):
    """Softmax over the last axis and the gradient of Σ out ∘ g."""
    y = np.exp(x - x.max(-1, keepdims=True))
    y /= y.sum(-1, keepdims=True)
    return y, y * (g - (g * y).sum(-1, keepdims=True))


def cross_entropy(logits, targets):
    """Mean cross-entropy and its gradient with respect to the logits."""
    shifted = logits - logits.max(-1, keepdims=True)
    e = np.exp(shifted)
    total = e.sum(-1, keepdims=True)
    rows = np.arange(len(targets))
    loss = np.mean(np.log(total[:, 0]) - shifted[rows, targets])
    grad = e / total
    grad[rows, targets] -= 1
    return loss, grad / len(targets)
