"""A GPT-style decoder-only language model (Radford et al. 2018, 2019)."""
from __future__ import annotations

import numpy as np

from ..attention import LearnedPositions
from ..core import functional as F
from ..core.api import trace
from ..core.tracing import Input
from ..errors import NonFiniteError
from ..nn import Dropout, Embedding, Linear, Module
from ..nn.checks import flag, integer, non_negative, one_of, sizes
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
    or its exact form ("none"); ``layer_norm_eps`` is the ε of every LayerNorm. ``positions="alibi"`` replaces
    the learned positions by ALiBi's biases (Press et al. 2022); ``kv_heads`` < ``heads`` makes the attention
    grouped-query (Ainslie et al. 2023; 1: multi-query, Shazeer 2019), see ``MultiHeadAttention``.

    ``model(tokens, caches)`` with one dict per layer is a step of cached decoding (see ``generate``): empty
    dicts receive each layer's keys and values; filled ones (B, kv_heads, S, d/h), their last position free,
    take the single token (B, 1) at position S − 1.

    ``context``, a ``Ring`` (``attngraph.attention.ring``), splits the sequence over its ranks (context
    parallelism): every self-attention runs ring attention, and ``model(tokens, positions=ring.positions(T))``
    takes this rank's shard of the tokens with their positions in the whole sequence."""

    def __init__(self, vocab: int, d_model: int = 64, heads: int = 4, layers: int = 2, d_ff: int = 256,
                 max_length: int = 128, dropout: float = 0.1, tie_weights: bool = True, rng=None,
                 gelu: str = "tanh", layer_norm_eps: float = 1e-5, positions: str = "learned",
                 kv_heads: int | None = None, context=None):
        super().__init__()
        vocab, max_length = sizes(vocab=vocab, max_length=max_length)
        layers, d_model, heads, d_ff, dropout = stack_settings(layers, d_model, heads, d_ff, dropout)
        tie_weights = flag("tie_weights", tie_weights)
        activation, layer_norm_eps = gelu_and_eps(gelu, layer_norm_eps)
        self.max_length = max_length
        self.token_embed = Embedding(vocab, d_model, std=0.02, rng=rng)
        alibi = one_of("positions", positions, ("learned", "alibi")) == "alibi"
        self.positions = None if alibi else LearnedPositions(max_length, d_model, rng=rng)
        self.dropout = Dropout(dropout)
        self.transformer = Encoder(layers, d_model, heads, d_ff, dropout, pre_norm=True, activation=activation, rng=rng,
                                   layer_norm_eps=layer_norm_eps, kv_heads=kv_heads, alibi=alibi)
        self.out = None if tie_weights else Linear(d_model, vocab, bias=False, rng=rng)
        for layer in self.transformer.layers:
            layer.self_attn.context = context

    def forward(self, tokens, caches: list[dict] | None = None, positions=None):
        x = self.token_embed(tokens)
        if self.positions is not None and caches and caches[0]:
            past = caches[0]["k"]
            x = x + F.embedding(self.positions.weight, F.emit("size", past, axes=(2,), dtype="int64") - 1)
        elif self.positions is not None and positions is not None:
            x = x + F.embedding(self.positions.weight, positions)
        elif self.positions is not None:
            x = self.positions(x)
        h = self.transformer(self.dropout(x), causal=True, caches=caches)
        return h @ self.token_embed.weight.T if self.out is None else self.out(h)

    def decoders(self, batch: int):
        """The two compiled graphs of cached decoding for ``batch`` sequences: the prefill, tokens (batch, T) →
        logits and each layer's keys and values (batch, kv_heads, T, d/h) as k0, v0, k1, ...; and the step, one
        token (batch, 1) and those caches grown by a free last position → its logits and the updated caches."""
        attention = self.transformer.layers[0].self_attn
        names = _cache_names(len(self.transformer.layers))

        def run(tokens, **past):
            caches = [{kind: past[f"{kind}{i}"] for kind in "kv" if past} for i in range(len(names) // 2)]
            logits = self(tokens, caches)
            return {"logits": logits, **{f"{kind}{i}": cache[kind] for i, cache in enumerate(caches) for kind in "kv"}}
        cache = Input((batch, attention.kv_heads, "S", attention.d_model // attention.heads),
                      self.token_embed.weight.dtype)
        prefill = trace(run, tokens=Input((batch, "T"), "int64")).compile()
        step = trace(run, tokens=Input((batch, 1), "int64"), **dict.fromkeys(names, cache)).compile()
        return prefill, step

    def generate(self, prompt: np.ndarray, new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 seed: int = 0) -> np.ndarray:
        """The prompt (B, T₀), or one prompt (T₀,), followed by ``new_tokens`` >= 0 tokens (B, T₀ + new_tokens),
        or (T₀ + new_tokens,), each drawn by ``sample`` from the logits at the last position. The sequence may
        grow beyond ``max_length``: the model then sees its last ``max_length`` tokens, a sliding window.
        Decoding is cached (``decoders``): the prompt runs through the prefill graph, then each new token through
        the step graph with the keys and values of the tokens before it; once the window slides, the positions
        shift and every token goes through the prefill again.
        ``temperature`` >= 0, 0 being greedy decoding; ``top_k`` in [1, vocab] or None; the same ``seed``
        (an int >= 0) gives the same tokens. Every argument is checked before anything is traced. Call
        ``eval()`` first to turn dropout off."""
        vocab = self.token_embed.num_embeddings
        prompt = token_ids("prompt", prompt, vocab, ranks=(1, 2))
        new_tokens, seed = integer("new_tokens", new_tokens, minimum=0), integer("seed", seed, minimum=0)
        temperature, top_k = sampling(temperature, top_k, vocab)
        rng = np.random.default_rng(seed)
        tokens = np.atleast_2d(prompt)
        prefill, step = self.decoders(len(tokens))
        caches = None
        for _ in range(new_tokens):
            if caches is None or tokens.shape[1] > self.max_length:
                logits, *caches = prefill(tokens=tokens[:, -self.max_length:])
            else:
                grown = [np.concatenate([c, np.zeros_like(c[:, :, :1])], axis=2) for c in caches]
                logits, *caches = step(tokens=tokens[:, -1:], **dict(zip(_cache_names(len(grown) // 2), grown)))
            tokens = np.concatenate([tokens, sample(logits[:, -1], rng, temperature, top_k)[:, None]], axis=1)
        return tokens if prompt.ndim == 2 else tokens[0]


def _cache_names(layers: int) -> list[str]:
    """k0, v0, k1, v1, ...: the names of the caches of ``layers`` layers in the decoding graphs."""
    return [f"{kind}{i}" for i in range(layers) for kind in "kv"]


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
    defaults=dict(vocab=32, d_model=64, heads=4, layers=2, d_ff=256, max_length=128, dropout=0.1, tie_weights=True,
                  positions="learned", kv_heads=None),
    tiny=dict(vocab=12, d_model=16, heads=2, layers=1, d_ff=32, max_length=16, dropout=0.0),
    description="GPT-style decoder-only language model (Radford et al. 2019) on counting sequences",
))
