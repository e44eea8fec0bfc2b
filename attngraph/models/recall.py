"""Associative recall: a sequence of distinct tokens and a query token taken from it; the answer is the token
that follows the query. ``AdditiveRecall`` answers with additive attention (Bahdanau et al. 2015) over the
positions: it learns to attend to the query's position."""
from __future__ import annotations

import numpy as np

from ..core import functional as F
from ..nn import Embedding, Linear, Module, Parameter, init


class AdditiveRecall(Module):
    """Reads the token after ``query`` in ``tokens``: hₜ = [embed(xₜ); embed(xₜ₊₁)], α = softmax(vᵀ tanh(W_q q +
    W_k hₜ)), logits = W_o Σₜ αₜ hₜ. ``forward`` returns the logits (B, vocab) and α (B, T)."""

    def __init__(self, vocab: int, dim: int = 32, hidden: int = 32):
        super().__init__()
        self.embed = Embedding(vocab, dim)
        self.w_query = Linear(dim, hidden, bias=False)
        self.w_key = Linear(2 * dim, hidden)
        self.v = Parameter(init.uniform((hidden,), 1 / np.sqrt(hidden)))
        self.out = Linear(2 * dim, vocab)

    def forward(self, tokens, next_tokens, query):
        h = F.concat([self.embed(tokens), self.embed(next_tokens)], axis=-1)      # (B, T, 2d)
        q = F.expand_dims(self.w_query(self.embed(query)), 1)                    # (B, 1, hidden)
        alpha = F.softmax(F.tanh(q + self.w_key(h)) @ self.v)                   # (B, T)
        context = F.sum(F.expand_dims(alpha, -1) * h, axis=1)                   # (B, 2d)
        return self.out(context), alpha


def make_batch(rng: np.random.Generator, batch: int, length: int, vocab: int):
    """``batch`` examples of distinct tokens: the model's inputs {tokens, next_tokens, query} (query: a token of
    the sequence), the answers (the token after the query) and the query's positions."""
    tokens = np.stack([rng.choice(vocab, size=length + 1, replace=False) for _ in range(batch)])
    where = rng.integers(0, length, size=batch)
    rows = np.arange(batch)
    return dict(tokens=tokens[:, :-1], next_tokens=tokens[:, 1:], query=tokens[rows, where]), \
        tokens[rows, where + 1], where
