"""A GPT-style decoder-only language model (Radford et al. 2018, 2019)."""
from __future__ import annotations

import numpy as np

from ..attention import LearnedPositions
from ..core import functional as F
from ..core.api import trace
from ..core.tracing import Input
from ..errors import NonFiniteError
from ..nn import Dropout, Embedding, Linear, Module
from ..nn.checks import flag, integer, non_negative, sizes
from . import tasks
from .blocks import Encoder, gelu_and_eps, stack_settings
from .registry import ModelSpec, register
from .tokens import token_ids


class GPT(Module):
    """logits = GPT(...)(tokens): p(x_{t+1} | x_≤t) for every position t.

    tokens (B, T) → logits (B, T, vocab), T ≤ max_length and possibly symbolic. Token embeddings plus
    learned positions, ``layers`` pre-norm layers of causal self-attention and GELU feed-forward (as
    GPT-2), a final LayerNorm, and the output map — with ``tie_weights`` the transposed token embedding,
    logits = h Eᵀ (Press & Wolf 2017), else its own linear map. Layer i's attention weights are recorded
    under ``transformer.layers.i.self_attn``. ``gelu`` picks GELU's tanh approximation (GPT-2's "gelu_new")
    or its exact form ("none"); ``layer_norm_eps`` is the ε of every LayerNorm."""

    def __init__(self, vocab: int, d_model: int = 64, heads: int = 4, layers: int = 2, d_ff: int = 256,
                 max_length: int = 128, dropout: float = 0.1, tie_weights: bool = True, rng=None,
                 gelu: str = "tanh", layer_norm_eps: float = 1e-5):
        super().__init__()
        vocab, max_length = sizes(vocab=vocab, max_length=max_length)
        layers, d_model, heads, d_ff, dropout = stack_settings(layers, d_model, heads, d_ff, dropout)
        tie_weights = flag("tie_weights", tie_weights)
        activation, layer_norm_eps = gelu_and_eps(gelu, layer_norm_eps)
        self.max_length = max_length
        self.token_embed = Embedding(vocab, d_model, std=0.02, rng=rng)
        self.positions = LearnedPositions(max_length, d_model, rng=rng)
        self.dropout = Dropout(dropout)
        self.transformer = Encoder(layers, d_model, heads, d_ff, dropout, pre_norm=True, activation=activation, rng=rng,
                                   layer_norm_eps=layer_norm_eps)
        self.out = None if tie_weights else Linear(d_model, vocab, bias=False, rng=rng)

    def forward(self, tokens):
        h = self.transformer(self.dropout(self.positions(self.token_embed(tokens))), causal=True)
        return h @ self.token_embed.weight.T if self.out is None else self.out(h)

    def generate(self, prompt: np.ndarray, new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 seed: int = 0) -> np.ndarray:
        """The prompt (B, T₀), or one prompt (T₀,), followed by ``new_tokens`` >= 0 tokens (B, T₀ + new_tokens),
        or (T₀ + new_tokens,), each drawn by ``sample`` from the logits at the last position. The sequence may
        grow beyond ``max_length``: the model then sees its last ``max_length`` tokens, a sliding window.
        ``temperature`` >= 0, 0 being greedy decoding; ``top_k`` in [1, vocab] or None; the same ``seed``
        (an int >= 0) gives the same tokens. Every argument is checked before anything is traced. Call
        ``eval()`` first to turn dropout off."""
        vocab = self.token_embed.num_embeddings
        prompt = token_ids("prompt", prompt, vocab, ranks=(1, 2))
        new_tokens, seed = integer("new_tokens", new_tokens, minimum=0), integer("seed", seed, minimum=0)
        temperature, top_k = sampling(temperature, top_k, vocab)
        rng = np.random.default_rng(seed)
        tokens = np.atleast_2d(prompt)
        logits_of = trace(self, tokens=Input((len(tokens), "T"), "int64")).compile()
        for _ in range(new_tokens):
            logits = logits_of(tokens=tokens[:, -self.max_length:])[:, -1]
            tokens = np.concatenate([tokens, sample(logits, rng, temperature, top_k)[:, None]], axis=1)
        return tokens if prompt.ndim == 2 else tokens[0]


def sampling(temperature, top_k, vocab: int) -> tuple[float, int | None]:
    """The sampling settings, checked: a finite ``temperature`` >= 0, and ``top_k`` None or an int in [1, vocab]."""
    return non_negative("temperature", temperature), None if top_k is None else integer("top_k", top_k, maximum=vocab)


def sample(logits: np.ndarray, rng: np.random.Generator, temperature: float = 1.0,
           top_k: int | None = None) -> np.ndarray:
    """One token per row of logits (B, V): a draw from softmax(logits / temperature) over the ``top_k``
    largest logits (all when None; logits tied with the k-th largest stay in), or the argmax when
    ``temperature`` is 0. The logits are shifted by their row maximum before the division, so that a tiny
    temperature draws the argmax rather than NaN. A row whose maximum is NaN or +inf, or that is all −inf,
    has no distribution: NonFiniteError."""
    temperature, top_k = sampling(temperature, top_k, logits.shape[-1])
    peak = logits.max(-1, keepdims=True)
    if not np.isfinite(peak).all():
        raise NonFiniteError("logits hold NaN or +inf, or a row of them is all -inf: there is nothing to sample "
                             "from (a diverged model? check it with ag.debug())")
    if temperature == 0:
        return logits.argmax(-1)
    logits = (logits.astype(np.float64) - peak) / temperature
    if top_k is not None:
        kth_largest = np.sort(logits, axis=-1)[:, -top_k, None]
        logits = np.where(logits < kth_largest, -np.inf, logits)
    p = np.exp(logits)
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
