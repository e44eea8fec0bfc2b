"""The PyTorch side of the benchmarks: the same computations as attngraph's, written as a PyTorch user
would (``scaled_dot_product_attention``, ``F.layer_norm``, ``torch.optim.AdamW``). Imported only when
PyTorch is installed."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    """attngraph's pre-norm GPT layer: x + Wₒ·attention(LN(x)), then x + W₂·GELU(W₁·LN(x))."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.attention_norm, self.mlp_norm = nn.LayerNorm(width), nn.LayerNorm(width)
        self.q, self.k, self.v, self.o = (nn.Linear(width, width) for _ in range(4))
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, width = x.shape
        h = self.attention_norm(x)
        q, k, v = (proj(h).view(b, t, self.heads, width // self.heads).transpose(1, 2)
                   for proj in (self.q, self.k, self.v))
        heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(heads.transpose(1, 2).reshape(b, t, width))
        return x + self.down(F.gelu(self.up(self.mlp_norm(x)), approximate="tanh"))


class GPT(nn.Module):
    """Token embeddings plus learned positions, the layers, a final LayerNorm, logits = h Eᵀ (tied)."""

    def __init__(self, vocab: int, width: int, heads: int, layers: int, length: int):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, width), nn.Embedding(length, width)
        self.layers = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)

    def forward(self, tokens):
        x = self.tokens(tokens) + self.positions(torch.arange(tokens.shape[1]))
        for layer in self.layers:
            x = layer(x)
        return self.norm(x) @ self.tokens.weight.T


def gpt_step(vocab, width, heads, layers, tokens: np.ndarray, targets: np.ndarray, compiled: bool = False):
    """One AdamW training step of the cross-entropy of next-token logits, as a function of nothing; with
    ``compiled``, the model's forward and backward go through ``torch.compile`` (inductor's fused C++ kernels)."""
    torch.manual_seed(0)
    model = GPT(vocab, width, heads, layers, tokens.shape[1])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    logits_of = torch.compile(model) if compiled else model
    tokens, targets = torch.from_numpy(tokens), torch.from_numpy(targets)

    def step():
        loss = F.cross_entropy(logits_of(tokens).reshape(-1, vocab), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return step


def loss_and_grads(f, *arrays: np.ndarray, wrt: int):
    """A function computing Σ f(*arrays) ∘ g (g, the last array, a fixed output gradient) and its gradients
    with respect to the first ``wrt`` arrays."""
    tensors = [torch.from_numpy(a) for a in arrays]
    leaves, g = tensors[:wrt], tensors[-1]

    def run():
        for t in leaves:
            t.requires_grad_(True)
            t.grad = None
        (f(*tensors[:-1]) * g).sum().backward()
    return run


def matmul(a: np.ndarray, b: np.ndarray):
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    return lambda: ta @ tb


def cross_entropy(logits: np.ndarray, targets: np.ndarray):
    x, t = torch.from_numpy(logits), torch.from_numpy(targets)

    def run():
        x.requires_grad_(True)
        x.grad = None
        F.cross_entropy(x, t).backward()
    return run


def attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def layer_norm(x, w, b):
    return F.layer_norm(x, x.shape[-1:], w, b)


def softmax(x):
    return torch.softmax(x, -1)
