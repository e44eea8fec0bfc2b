"""A BERT-style encoder trained by masked language modelling (Devlin et al. 2019)."""
from __future__ import annotations

import numpy as np

from ..attention import LearnedPositions
from ..core import functional as F
from ..core.parameter import Parameter
from ..core.tracing import Input
from ..errors import BindingError
from ..nn import Dropout, Embedding, LayerNorm, Linear, Module
from ..nn import checks
from . import tasks
from .blocks import Encoder, gelu_and_eps, stack_settings
from .registry import ModelSpec, register
from .tokens import FIRST, IGNORE, MASK, padding_mask, vocabulary


class BERT(Module):
    """logits = BERT(...)(tokens, segment_ids=None): for every position, the masked-LM distribution over the
    vocabulary.

    tokens (B, T) → logits (B, T, vocab); ``PAD`` positions are masked out of the attention. Token
    embeddings plus learned positions (plus, with ``segments`` > 0, the embedding of each position's segment
    in ``segment_ids`` (B, T), segment 0 everywhere when None, as BERT's token types), LayerNorm and
    dropout, ``layers`` post-norm GELU encoder layers (as BERT), and the masked-LM head: a GELU layer,
    LayerNorm, and the transposed token embedding with an output bias, logits = LN(GELU(W h + b)) Eᵀ + c.
    Next-sentence prediction is left out. ``gelu`` picks GELU's tanh approximation or its exact form
    ("none", as BERT); ``layer_norm_eps`` is the ε of every LayerNorm (BERT's is 1e-12). Layer i's
    attention weights are recorded under ``encoder.layers.i.self_attn``."""

    def __init__(self, vocab: int, d_model: int = 64, heads: int = 4, layers: int = 2, d_ff: int = 256,
                 max_length: int = 128, dropout: float = 0.1, rng=None, segments: int = 0, gelu: str = "tanh",
                 layer_norm_eps: float = 1e-5):
        super().__init__()
        vocab, max_length = vocabulary("vocab", vocab), checks.integer("max_length", max_length)
        layers, d_model, heads, d_ff, dropout = stack_settings(layers, d_model, heads, d_ff, dropout)
        segments = checks.integer("segments", segments, minimum=0)
        self.activation, layer_norm_eps = gelu_and_eps(gelu, layer_norm_eps)
        self.token_embed = Embedding(vocab, d_model, std=0.02, rng=rng)
        self.segment_embed = Embedding(segments, d_model, std=0.02, rng=rng) if segments else None
        self.positions = LearnedPositions(max_length, d_model, rng=rng)
        self.embed_norm = LayerNorm(d_model, layer_norm_eps)
        self.dropout = Dropout(dropout)
        self.encoder = Encoder(layers, d_model, heads, d_ff, dropout, activation=self.activation, rng=rng,
                               layer_norm_eps=layer_norm_eps)
        self.transform = Linear(d_model, d_model, rng=rng)
        self.transform_norm = LayerNorm(d_model, layer_norm_eps)
        self.out_bias = Parameter(np.zeros(vocab, np.float32))

    def forward(self, tokens, segment_ids=None):
        x = self.positions(self.token_embed(tokens))
        if self.segment_embed is not None:
            x = x + (self.segment_embed.weight[0] if segment_ids is None else self.segment_embed(segment_ids))
        elif segment_ids is not None:
            raise BindingError("segment_ids given to a BERT without segment embeddings: build it with segments > 0")
        h = self.encoder(self.dropout(self.embed_norm(x)), mask=padding_mask(tokens))
        return self.transform_norm(self.activation(self.transform(h))) @ self.token_embed.weight.T + self.out_bias


def mask_tokens(tokens: np.ndarray, rng: np.random.Generator, vocab: int,
                probability: float = 0.15) -> tuple[np.ndarray, np.ndarray]:
    """BERT's masked-LM corruption (Devlin et al. 2019, section 3.1): every ordinary token (id ≥ ``FIRST``;
    padding and other special tokens never) is selected with ``probability``, independently; a selected
    token becomes ``MASK`` with probability 0.8, a uniformly random ordinary token with 0.1, and stays
    itself with 0.1. Returns (inputs, targets): targets hold the original token at the selected positions
    and ``IGNORE`` everywhere else, so that the loss counts the selected positions only. ``probability`` is
    in [0, 1] and ``vocab`` > ``FIRST``."""
    probability, vocab = checks.probability("probability", probability, certain=True), vocabulary("vocab", vocab)
    selected = (tokens >= FIRST) & (rng.random(tokens.shape) < probability)
    action = rng.random(tokens.shape)
    replaced = selected & (0.8 <= action) & (action < 0.9)
    inputs = np.where(selected & (action < 0.8), MASK, tokens)
    inputs[replaced] = rng.integers(FIRST, vocab, np.count_nonzero(replaced))
    return inputs, np.where(selected, tokens, IGNORE)


def loss(model: BERT, tokens, targets):
    """Mean cross-entropy over the selected positions; 0 (not NaN) when a batch has none."""
    return F.cross_entropy(model(tokens), targets, ignore_index=IGNORE)


def batch(model: BERT, rng: np.random.Generator, size: int) -> dict[str, np.ndarray]:
    """Counting sequences corrupted by ``mask_tokens``."""
    vocab = model.token_embed.num_embeddings
    tokens, targets = mask_tokens(tasks.counting(rng, size, 8, vocab), rng, vocab)
    return dict(tokens=tokens, targets=targets)


register(ModelSpec(
    name="bert",
    factory=BERT,
    inputs=lambda model: dict(tokens=Input(("B", "T"), "int64")),
    batch=batch,
    loss=loss,
    defaults=dict(vocab=32, d_model=64, heads=4, layers=2, d_ff=256, max_length=128, dropout=0.1),
    tiny=dict(vocab=12, d_model=16, heads=2, layers=1, d_ff=32, max_length=16, dropout=0.0),
    description="BERT-style encoder with a masked-LM head (Devlin et al. 2019) on counting sequences",
))
