"""A GPT-style decoder-only language model (Radford et al. 2018, 2019)."""
from __future__ import annotations

import numpy as np

from ..attention import LearnedPositions
from ..core import functional as F
from ..core.api import trace
from ..core.tracing import Input
from ..nn import Dropout, Embedding, Linear, Module
from . import tasks
from .blocks import Encoder
from .registry import ModelSpec, register


class GPT(Module):
    """logits = GPT(...)(tokens): p(x_{t+1} | x_≤t) for every position t.

    tokens (B, T) → logits (B, T, vocab), T ≤ max_length and possibly symbolic. Token embeddings plus
    learned positions, ``layers`` pre-norm layers of causal self-attention and GELU feed-forward (as
    GPT-2), a final LayerNorm, and the output map — with ``tie_weights`` the transposed token embedding,
    logits = h Eᵀ (Press & Wolf 2017), else its own linear map. Layer i's attention weights are recorded
    under ``transformer.layers.i.self_attn``."""

    def __init__(self, vocab: int, d_model: int = 64, heads: int = 4, layers: int = 2, d_ff: int = 256,
                 max_length: int = 128, dropout: float = 0.1, tie_weights: bool = True, rng=None):
        super().__init__()
        self.max_length = max_length
        self.token_embed = Embedding(vocab, d_model, std=0.02, rng=rng)
        self.positions = LearnedPositions(max_length, d_model, rng=rng)
        self.dropout = Dropout(dropout)
        self.transformer = Encoder(layers, d_model, heads, d_ff, dropout, pre_norm=True, activation=F.gelu, rng=rng)
        self.out = None if tie_weights else Linear(d_model, vocab, bias=False, rng=rng)

    def forward(self, tokens):
        h = self.transformer(self.dropout(self.positions(self.token_embed(tokens))), causal=True)
        return h @ self.token_embed.weight.T if self.out is None else self.out(h)

    def generate(self, prompt: np.ndarray, new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 seed: int = 0) -> np.ndarray:
        """The prompt (B, T₀) followed by ``new_tokens`` tokens, each drawn by ``sample`` from the logits
        at the last position; the model sees at most the last ``max_length`` tokens. ``temperature=0``
        is greedy decoding. The same seed gives the same tokens. Call ``eval()`` first to turn dropout off."""
        rng = np.random.default_rng(seed)
        tokens = np.asarray(prompt, np.int64)
        logits_of = trace(self, tokens=Input((len(tokens), "T"), "int64")).compile()
        for _ in range(new_tokens):
            logits = logits_of(tokens=tokens[:, -self.max_length:])[:, -1]
            tokens = np.concatenate([tokens, sample(logits, rng, temperature, top_k)[:, None]], axis=1)
        return tokens


def sample(logits: np.ndarray, rng: np.random.Generator, temperature: float = 1.0,
           top_k: int | None = None) -> np.ndarray:
    """One token per row of logits (B, V): a draw from softmax(logits / temperature) over the ``top_k``
    largest logits (all when None), or the argmax when ``temperature`` is 0."""
    if temperature == 0:
        return logits.argmax(-1)
    logits = logits.astype(np.float64) / temperature
    if top_k is not None:
        kth_largest = np.sort(logits, axis=-1)[:, -top_k, None]
        logits = np.where(logits < kth_largest, -np.inf, logits)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.array([rng.choice(len(row), p=row) for row in p])


def batch(model: GPT, rng: np.random.Generator, size: int) -> dict[str, np.ndarray]:
    """Counting sequences: inputs x₁ … x_T and targets x₂ … x_{T+1}."""
    sequences = tasks.counting(rng, size, 9, model.token_embed.num_embeddings)
    return dict(tokens=sequences[:, :-1], targets=sequences[:, 1:])


register(ModelSpec(
    name="gpt",
    factory=GPT,
    inputs=lambda model: dict(tokens=Input(("B", "T"), "int64")),
    batch=batch,
    loss=lambda model, tokens, targets: F.cross_entropy(model(tokens), targets),
    defaults=dict(vocab=32, d_model=64, heads=4, layers=2, d_ff=256, max_length=128, dropout=0.1, tie_weights=True),
    tiny=dict(vocab=12, d_model=16, heads=2, layers=1, d_ff=32, max_length=16, dropout=0.0),
    description="GPT-style decoder-only language model (Radford et al. 2019) on counting sequences",
))
