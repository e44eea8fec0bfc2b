"""The Transformer encoder-decoder (Vaswani et al. 2017, "Attention Is All You Need")."""
from __future__ import annotations

import numpy as np

from ..attention import SinusoidalPositions
from ..core.api import trace
from ..core.tracing import Input
from ..nn import Dropout, Embedding, Linear, Module
from ..nn.checks import flag, integer
from . import tasks
from .blocks import Decoder, Encoder, stack_settings
from .registry import ModelSpec, register
from .tokens import greedy, padding_mask, token_ids, vocabulary


class Transformer(Module):
    """logits = Transformer(...)(src, tgt_in): p(y_t | y_<t, x) for every target position.

    src (B, S) and tgt_in (B, T) are token ids (``PAD`` = 0 is padding, masked out of every attention;
    the decoder's self-attention is causal); logits are (B, T, tgt_vocab). Both lengths may be symbolic.

    Embeddings plus sinusoidal positions, then ``layers`` encoder and decoder layers (post-norm as in the
    paper, or ``pre_norm``), and a linear map to the target vocabulary. The paper scales N(0, 1/d_model)
    embeddings by √d_model; ``Embedding`` starts from N(0, 1), which is the same at initialization.
    The cross-attention weights of decoder layer i are recorded under ``decoder.layers.i.cross_attn``.
    """

    def __init__(self, src_vocab: int, tgt_vocab: int, d_model: int = 64, heads: int = 4, layers: int = 2,
                 d_ff: int = 256, dropout: float = 0.1, pre_norm: bool = False, max_length: int = 256, rng=None):
        super().__init__()
        src_vocab, tgt_vocab = vocabulary("src_vocab", src_vocab), vocabulary("tgt_vocab", tgt_vocab)
        layers, d_model, heads, d_ff, dropout = stack_settings(layers, d_model, heads, d_ff, dropout)
        max_length, pre_norm = integer("max_length", max_length), flag("pre_norm", pre_norm)
        self.src_embed = Embedding(src_vocab, d_model, rng=rng)
        self.tgt_embed = Embedding(tgt_vocab, d_model, rng=rng)
        self.positions = SinusoidalPositions(d_model, max_length)
        self.dropout = Dropout(dropout)
        self.encoder = Encoder(layers, d_model, heads, d_ff, dropout, pre_norm, rng=rng)
        self.decoder = Decoder(layers, d_model, heads, d_ff, dropout, pre_norm, rng=rng)
        self.out = Linear(d_model, tgt_vocab, rng=rng)

    def encode(self, src):
        """The memory (B, S, d_model) the decoder attends to."""
        return self.encoder(self.dropout(self.positions(self.src_embed(src))), mask=padding_mask(src))

    def decode(self, memory, src, tgt_in):
        """Logits (B, T, tgt_vocab) given the memory of ``src``."""
        x = self.dropout(self.positions(self.tgt_embed(tgt_in)))
        return self.out(self.decoder(x, memory, padding_mask(src)))

    def forward(self, src, tgt_in):
        return self.decode(self.encode(src), src, tgt_in)

    def greedy_decode(self, src: np.ndarray, max_length: int) -> np.ndarray:
        """Target tokens (B, n ≤ max_length) for ``src`` (B, S), see ``tokens.greedy``. The source is
        encoded once; each step reruns the decoder on the prefix (one compiled graph serves every length).
        S and ``max_length`` (>= 1) are at most the model's ``max_length`` positions; they and the source's
        token ids are checked before anything is traced. Call ``eval()`` first to turn dropout off."""
        src = token_ids("src", src, self.src_embed.num_embeddings)
        max_length = integer("max_length", max_length, maximum=self.positions.max_length)
        memory = trace(self.encode, src=src).compile()(src=src)
        decode = trace(self.decode, memory=memory, src=src, tgt_in=Input((len(src), "T"), "int64")).compile()
        return greedy(lambda prefix: decode(memory=memory, src=src, tgt_in=prefix)[:, -1], len(src), max_length)


register(ModelSpec(
    name="transformer",
    factory=Transformer,
    inputs=lambda model: dict(src=Input(("B", "S"), "int64"), tgt_in=Input(("B", "T"), "int64")),
    batch=tasks.reversal_batch(8),
    loss=tasks.reversal_loss,
    defaults=dict(src_vocab=32, tgt_vocab=32, d_model=64, heads=4, layers=2, d_ff=256, dropout=0.1,
                  pre_norm=False, max_length=256),
    tiny=dict(src_vocab=12, tgt_vocab=12, d_model=16, heads=2, layers=1, d_ff=32, dropout=0.0, max_length=16),
    description="Transformer encoder-decoder (Vaswani et al. 2017) on sequence reversal",
))
