"""RNN encoder-decoders with attention: Bahdanau et al. 2015 and Luong et al. 2015.

Both read the source with a GRU encoder into a memory h_1 … h_S and decode one token at a time from a
GRU state s; they differ in where attention enters the step. The recurrences are unrolled in the graph,
so the source and target lengths must be concrete when tracing (``ag.Input(("B", 10), "int64")``).
"""
from __future__ import annotations

import numpy as np

from ..attention import AdditiveScore, Attention, DotScore, GeneralScore
from ..core import functional as F
from ..core.api import trace
from ..core.tracing import Input
from ..nn import GRU, Embedding, GRUCell, Linear, Module
from ..nn.checks import integer, one_of, sizes
from . import tasks
from .registry import ModelSpec, register
from .tokens import greedy, padding_mask, token_ids, vocabulary


class Seq2Seq(Module):
    """logits = model(src, tgt_in) with teacher forcing: the decoder is fed the true previous target
    token y_{t−1} (tgt_in = BOS y_1 … y_{T−1}) and predicts y_t; logits are (B, T, tgt_vocab).

    Subclasses define ``encode(src, mask) -> (memory (B, S, ·), s_0)`` and
    ``step(y_prev (B,), s, memory, mask) -> (logits (B, V), s', α (B, S))``. ``PAD`` (0) marks padding;
    the source's padding is masked out of the attention."""

    def forward(self, src, tgt_in):
        mask = padding_mask(src)
        memory, state = self.encode(src, mask)
        logits = []
        for t in range(tgt_in.shape[1]):
            step_logits, state, _ = self.step(tgt_in[:, t], state, memory, mask)
            logits.append(step_logits)
        return F.stack(logits, axis=1)

    def greedy_decode(self, src: np.ndarray, max_length: int) -> tuple[np.ndarray, np.ndarray]:
        """Target tokens (B, n ≤ max_length) for ``src`` (B, S) by greedy decoding (``tokens.greedy``), and
        the attention weights of every step (B, n, S). ``max_length`` >= 1; it and the source's token ids
        are checked before anything is traced. The encoder and one decoder step are each traced and compiled
        once; the state is carried between step calls."""
        src = token_ids("src", src, self.src_embed.num_embeddings)
        max_length = integer("max_length", max_length)
        memory, state = trace(lambda src: self.encode(src, padding_mask(src)), src=src).compile()(src=src)
        step = trace(lambda y, state, memory, src: self.step(y, state, memory, padding_mask(src)),
                     y=Input((len(src),), "int64"), state=state, memory=memory, src=src).compile()
        weights = []

        def next_logits(prefix):
            nonlocal state
            logits, state, alpha = step(y=prefix[:, -1], state=state, memory=memory, src=src)
            weights.append(alpha)
            return logits

        tokens = greedy(next_logits, len(src), max_length)
        return tokens, np.stack(weights, axis=1)


def checked_sizes(src_vocab, tgt_vocab, embed_dim, hidden) -> tuple[int, int, int, int]:
    """The sizes every encoder-decoder takes, checked."""
    return (vocabulary("src_vocab", src_vocab), vocabulary("tgt_vocab", tgt_vocab),
            *sizes(embed_dim=embed_dim, hidden=hidden))


class BahdanauSeq2Seq(Seq2Seq):
    """Bahdanau et al. 2015, "Neural Machine Translation by Jointly Learning to Align and Translate".

    Encoder: a bidirectional GRU, h_j = [h→_j; h←_j]; the decoder starts from s_0 = tanh(W_s h←_1).
    Each step attends *before* updating the state, with the previous state as the query:

        e_ij = vᵀ tanh(W s_{i−1} + U h_j)        α_i = softmax(e_i)        c_i = Σ_j α_ij h_j
        s_i  = GRU([E y_{i−1}; c_i], s_{i−1})
        p(y_i) = softmax(W_o tanh(U_o [s_i; c_i; E y_{i−1}]))

    A tanh readout takes the place of the paper's maxout, and reads the new state s_i (as most
    implementations) where the paper reads s_{i−1}."""

    def __init__(self, src_vocab: int, tgt_vocab: int, embed_dim: int = 32, hidden: int = 64, rng=None):
        super().__init__()
        src_vocab, tgt_vocab, embed_dim, hidden = checked_sizes(src_vocab, tgt_vocab, embed_dim, hidden)
        self.src_embed = Embedding(src_vocab, embed_dim, rng=rng)
        self.tgt_embed = Embedding(tgt_vocab, embed_dim, rng=rng)
        self.encoder = GRU(embed_dim, hidden, bidirectional=True, rng=rng)
        self.bridge = Linear(hidden, hidden, rng=rng)
        self.attention = Attention(AdditiveScore(hidden, 2 * hidden, hidden, rng=rng))
        self.cell = GRUCell(embed_dim + 2 * hidden, hidden, rng=rng)
        self.readout = Linear(hidden + 2 * hidden + embed_dim, hidden, rng=rng)
        self.out = Linear(hidden, tgt_vocab, rng=rng)

    def encode(self, src, mask):
        memory, final = self.encoder(self.src_embed(src), mask)
        _, backward_first = F.split(final, final.shape[-1] // 2, axis=-1)
        return memory, F.tanh(self.bridge(backward_first))

    def step(self, y_prev, state, memory, mask):
        embedded = self.tgt_embed(y_prev)
        context, alpha = self.attention(state, memory, mask=mask)
        state = self.cell(F.concat([embedded, context], axis=-1), state)
        logits = self.out(F.tanh(self.readout(F.concat([state, context, embedded], axis=-1))))
        return logits, state, alpha


class LuongSeq2Seq(Seq2Seq):
    """Luong et al. 2015, "Effective Approaches to Attention-based Neural Machine Translation" (global
    attention).

    Encoder: a GRU; the decoder starts from its final state. Each step updates the state first and
    attends *after*, with the new state as the query:

        h_t = GRU(E y_{t−1}, h_{t−1})
        α_t = softmax(score(h_t, h̄_s)),  score = h_tᵀ W_a h̄_s ("general") or h_tᵀ h̄_s ("dot")
        c_t = Σ_s α_ts h̄_s
        h̃_t = tanh(W_c [c_t; h_t])          the attentional hidden state
        p(y_t) = softmax(W_s h̃_t)

    The paper stacks LSTMs and optionally feeds h̃_{t−1} back into the input ("input feeding"); here one
    GRU layer and no input feeding keep the attention itself in view."""

    def __init__(self, src_vocab: int, tgt_vocab: int, embed_dim: int = 32, hidden: int = 64,
                 score: str = "general", rng=None):
        super().__init__()
        src_vocab, tgt_vocab, embed_dim, hidden = checked_sizes(src_vocab, tgt_vocab, embed_dim, hidden)
        scores = {"general": lambda: GeneralScore(hidden, hidden, rng=rng), "dot": DotScore}
        score = one_of("score", score, scores)
        self.src_embed = Embedding(src_vocab, embed_dim, rng=rng)
        self.tgt_embed = Embedding(tgt_vocab, embed_dim, rng=rng)
        self.encoder = GRU(embed_dim, hidden, rng=rng)
        self.cell = GRUCell(embed_dim, hidden, rng=rng)
        self.attention = Attention(scores[score]())
        self.attentional = Linear(2 * hidden, hidden, bias=False, rng=rng)
        self.out = Linear(hidden, tgt_vocab, rng=rng)

    def encode(self, src, mask):
        return self.encoder(self.src_embed(src), mask)

    def step(self, y_prev, state, memory, mask):
        state = self.cell(self.tgt_embed(y_prev), state)
        context, alpha = self.attention(state, memory, mask=mask)
        logits = self.out(F.tanh(self.attentional(F.concat([context, state], axis=-1))))
        return logits, state, alpha


LENGTH = 6  # the source length of the registry's examples; targets have one more token (BOS or EOS)


def seq2seq_spec(name: str, factory: type, description: str, **settings) -> ModelSpec:
    return ModelSpec(
        name=name,
        factory=factory,
        inputs=lambda model: dict(src=Input(("B", LENGTH), "int64"), tgt_in=Input(("B", LENGTH + 1), "int64")),
        batch=tasks.reversal_batch(LENGTH),
        loss=tasks.reversal_loss,
        defaults=dict(src_vocab=32, tgt_vocab=32, embed_dim=32, hidden=64, **settings),
        tiny=dict(src_vocab=10, tgt_vocab=10, embed_dim=8, hidden=12),
        description=f"GRU encoder-decoder of {description} on sequence reversal",
    )


register(seq2seq_spec("seq2seq-bahdanau", BahdanauSeq2Seq, "Bahdanau et al. 2015 (additive attention before the step)"))
register(seq2seq_spec("seq2seq-luong", LuongSeq2Seq, "Luong et al. 2015 (attention after the step)", score="general"))
