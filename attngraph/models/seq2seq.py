"""RNN encoder-decoders with attention: Bahdanau et al. 2015 and Luong et al. 2015.

Both read the source with a GRU encoder into a memory h_1 … h_S and decode one token at a time from a
GRU state s; they differ in where attention enters the step. Every recurrence is one ``scan`` node (``ag.scan``),
so the source and target lengths may be symbolic (``ag.Input(("B", "S"), "int64")``). Teacher forcing embeds all
targets at once and runs only what feeds the state inside the loop; what reads the state without feeding it back
(the readout and output layer, Luong's attention) runs after it on all T steps at once: one product of B·T rows in
place of T products of B.
"""
from __future__ import annotations

import numpy as np

from ..attention import AdditiveScore, Attention, DotScore, GeneralScore
from ..core import functional as F
from ..core.api import trace
from ..core.tracing import Input, module_scope
from ..nn import GRU, Embedding, GRUCell, Linear, Module, Recurrent
from ..nn.checks import integer, one_of, sizes
from . import tasks
from .registry import ModelSpec, register
from .tokens import greedy, padding_mask, token_ids, vocabulary


class Seq2Seq(Module):
    """logits = model(src, tgt_in) with teacher forcing: the decoder is fed the true previous target
    token y_{t−1} (tgt_in = BOS y_1 … y_{T−1}) and predicts y_t; logits are (B, T, tgt_vocab).

    Subclasses define ``encode(src, mask) -> (memory (B, S, ·), s_0)``, the teacher-forced
    ``decode(tgt_in (B, T), s_0, memory, mask) -> logits (B, T, V)`` and the single
    ``step(y_prev (B,), s, memory, mask) -> (logits (B, V), s', α (B, S))`` that greedy decoding runs, the same
    function one step at a time. ``PAD`` (0) marks padding; the source's padding is masked out of the attention.
    ``decode`` records the attention of all steps, (B, T, S), under the attention module's scope
    (``inspect.attention_maps``) when S is concrete."""

    def forward(self, src, tgt_in):
        mask = padding_mask(src)
        memory, state = self.encode(src, mask)
        return self.decode(tgt_in, state, memory, mask)

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

    def attend_and_update(self, embedded, state, memory, mask):
        """The recurrence: (s_i, c_i, α_i) from E y_{i−1} (B, E) and s_{i−1}."""
        context, alpha = self.attention(state, memory, mask=mask)
        return self.cell(F.concat([embedded, context], axis=-1), state), context, alpha

    def logits(self, state, context, embedded):
        """W_o tanh(U_o [s_i; c_i; E y_{i−1}]), for one step (B, ·) or all (B, T, ·)."""
        return self.out(F.tanh(self.readout(F.concat([state, context, embedded], axis=-1))))

    def step(self, y_prev, state, memory, mask):
        embedded = self.tgt_embed(y_prev)
        state, context, alpha = self.attend_and_update(embedded, state, memory, mask)
        return self.logits(state, context, embedded), state, alpha

    def decode(self, tgt_in, state, memory, mask):
        """One scan over the embedded targets carrying s and emitting c_i (and α_i where S is concrete: the scan
        packs outputs of concrete sizes); the readout after it, on all steps."""
        recorded = isinstance(memory.shape[1], int)

        def step(state, embedded):
            state, context, alpha = self.attend_and_update(embedded, state, memory, mask)
            return state, (state, context, alpha) if recorded else (state, context)

        embedded = self.tgt_embed(tgt_in)
        _, (states, contexts, *alpha) = F.scan(step, state, embedded)
        if recorded:
            F.as_node(alpha[0]).scope = module_scope(self.attention)
            F.name(alpha[0], "attention")
        return self.logits(states, contexts, embedded)


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

    def attend(self, state, memory, mask):
        """(logits, α) from the new state(s) h_t, (B, H) or all steps' (B, T, H): the attention feeds nothing
        back into the recurrence, so teacher forcing runs it once, on every step's query."""
        context, alpha = self.attention(state, memory, mask=mask)
        return self.out(F.tanh(self.attentional(F.concat([context, state], axis=-1)))), alpha

    def step(self, y_prev, state, memory, mask):
        state = self.cell(self.tgt_embed(y_prev), state)
        logits, alpha = self.attend(state, memory, mask)
        return logits, state, alpha

    def decode(self, tgt_in, state, memory, mask):
        """The decoder GRU as one scan over the embedded targets (their input projection all at once, as
        ``nn.Recurrent``), then the attention and the output layer on all T states together."""
        states, _ = Recurrent.unroll(self.cell, self.tgt_embed(tgt_in), None, reverse=False, state=state)
        return self.attend(states, memory, mask)[0]


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
