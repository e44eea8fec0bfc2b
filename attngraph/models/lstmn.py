"""LSTMN (Cheng, Dong & Lapata 2016, "Long Short-Term Memory-Networks for Machine Reading"): an LSTM whose single
memory cell is replaced by a tape of every previous hidden and cell state, read by intra-attention.

At step t, with input x_t and the tape of h_i, c_i for i < t (section 3.1):

    a_i^t = vᵀ tanh(W_h h_i + W_x x_t + W_h̃ h̃_{t−1})     intra-attention over the tape
    s^t   = softmax(a^t) over i < t
    h̃_t  = Σ_i s_i^t h_i,   c̃_t = Σ_i s_i^t c_i           adaptive summaries
    i_t, f_t, o_t = σ(W [h̃_t; x_t]),  ĉ_t = tanh(W_c [h̃_t; x_t])
    c_t   = f_t ⊙ c̃_t + i_t ⊙ ĉ_t,   h_t = o_t ⊙ tanh(c_t)

At t = 1 the tape is empty: the summaries are zero (a fully masked softmax gives zero weights), so the first
step is an ordinary LSTM step from the zero state. The gates are an ``nn.LSTMCell`` run on (h̃_t, c̃_t). This is
the single-sequence LSTMN; the paper's encoder-decoder fusions are not built here.

The recurrence is one ``scan`` whose carry holds the tape at its full length T, a slot per step, as JAX's
``lax.scan`` carries it: step t attends over the slots i < t and then writes h_t, c_t (and the key W_h h_t + b)
into slot t; the slots not yet written are zeros, never attended to. Unrolled, the tape grew by one slot a step
and each step concatenated it anew: 790 kernel calls for a training step over 12 tokens.
"""
from __future__ import annotations

import math

import numpy as np

from ..attention.attention import attend
from ..core import functional as F
from ..core.parameter import Parameter
from ..core.tracing import Input, module_scope
from ..errors import ShapeError
from ..nn import Embedding, Linear, LSTMCell, Module, init
from ..nn.checks import integer, sizes
from ..nn.recurrent import zeros
from . import tasks
from .registry import ModelSpec, register
from .tokens import padding_mask, vocabulary


def blank(x, length: int, size: int):
    """Zeros (B, length, size) for the batch of ``x``: the tape's slots not yet written."""
    return F.broadcast_to(np.zeros((), x.dtype), (x.shape[0], length, size))


class LSTMN(Module):
    """states, final, weights = LSTMN(input_size, hidden_size, attention_size)(x, mask=None).

    x (B, T, input_size) with T concrete; ``mask`` (B, T) is True at real steps. ``states`` (B, T, H) are the
    h_t (zero at padded steps), ``final`` the (h, c) of the last real step, ``weights`` (B, T, T) the s_i^t of
    the module docstring: row t sums to one over the real i < t, and is zero at t = 0 and at padded steps. At
    a padded step the state is carried over, as in ``nn.Recurrent``, and padded steps are never attended to.
    Each step's weights (B, 1, T) are also recorded as ``"attention"`` under this module's scope, so
    ``inspect.attention_maps`` gives the T rows of the heatmap.

    Parameters: ``w_h`` (W_h with the bias), ``w_x`` and ``w_summary`` (W_x, W_h̃) into the attention size,
    ``v``, and ``cell``, the LSTM gates on [h̃_t; x_t]."""

    def __init__(self, input_size: int, hidden_size: int, attention_size: int, rng=None):
        super().__init__()
        input_size, self.hidden_size, attention_size = sizes(
            input_size=input_size, hidden_size=hidden_size, attention_size=attention_size)
        self.w_h = Linear(self.hidden_size, attention_size, rng=rng)
        self.w_x = Linear(input_size, attention_size, bias=False, rng=rng)
        self.w_summary = Linear(self.hidden_size, attention_size, bias=False, rng=rng)
        self.v = Parameter(init.uniform((attention_size,), 1 / math.sqrt(attention_size), rng=rng))
        self.cell = LSTMCell(input_size, self.hidden_size, rng=rng)

    def forward(self, x, mask=None):
        length = x.shape[1]
        if isinstance(length, str):
            raise ShapeError(f"an LSTMN's tape has a slot per step and needs a concrete length, not {length!r}: "
                             "trace with e.g. ag.Input(('B', 12, dim))")
        allowed = np.tri(length, k=-1, dtype=bool)[None]                 # allowed[:, t, i]: i < t
        if mask is not None:
            allowed = F.expand_dims(mask, -1) & F.expand_dims(mask, -2) & allowed
        batch = (x.shape[0], length, length)
        sequences = (self.cell.project(x), self.w_x(x),                  # the input's terms, all steps at once
                     F.broadcast_to(allowed, batch), F.broadcast_to(np.eye(length, dtype=bool), batch),
                     *(() if mask is None else (mask,)))

        def step(state, inputs):
            h, c, summary, keys, tape = state          # keys W_h h_i + b and tape [h_i; c_i] in slot i < t
            gates_x, scores_x, allowed_t, slot, *real = inputs
            query = F.expand_dims(scores_x + self.w_summary(summary), 1)
            context, weights = attend(F.expand_dims(F.tanh(keys + query) @ self.v, 1), tape, allowed_t)
            new_summary, c_summary = F.split(context[:, 0], self.hidden_size, axis=-1)
            new = (*self.cell.step(gates_x, (new_summary, c_summary)), new_summary)
            output = new[0]
            if mask is not None:            # a padded step carries the state over and outputs zeros
                real = F.expand_dims(real[0], -1)
                new = tuple(F.where(real, n, old) for n, old in zip(new, (h, c, summary)))
                output = F.where(real, new[0], 0.0)
            h, c, summary = new
            slot = F.expand_dims(slot, -1)
            keys = F.where(slot, F.expand_dims(self.w_h(h), 1), keys)
            tape = F.where(slot, F.expand_dims(F.concat([h, c], axis=-1), 1), tape)
            return (h, c, summary, keys, tape), (output, weights[:, 0])

        hidden = zeros(x, self.hidden_size)
        state = (hidden, hidden, hidden, blank(x, length, self.v.shape[0]), blank(x, length, 2 * self.hidden_size))
        (h, c, *_), (states, weights) = F.scan(step, state, sequences)
        F.as_node(weights).scope = module_scope(self)
        F.name(weights, "attention")
        return states, (h, c), weights


class LSTMNClassifier(Module):
    """logits = LSTMNClassifier(vocab, ...)(tokens): tokens (B, T) with ``PAD`` (0) at the end of a row, T
    concrete, read by an ``LSTMN`` (``lstmn``); the final hidden state h of the last real token is mapped to
    ``classes`` logits (B, classes). The intra-attention weights are recorded under ``lstmn``."""

    def __init__(self, vocab: int, embed_dim: int = 32, hidden: int = 32, attention_dim: int = 32,
                 classes: int = 2, rng=None):
        super().__init__()
        vocab, classes = vocabulary("vocab", vocab), integer("classes", classes, minimum=2)
        embed_dim, hidden, attention_dim = sizes(embed_dim=embed_dim, hidden=hidden, attention_dim=attention_dim)
        self.embed = Embedding(vocab, embed_dim, rng=rng)
        self.lstmn = LSTMN(embed_dim, hidden, attention_dim, rng=rng)
        self.classifier = Linear(hidden, classes, rng=rng)

    def forward(self, tokens):
        _, (h, _), _ = self.lstmn(self.embed(tokens), padding_mask(tokens))
        return self.classifier(h)


LENGTH = 8  # the sentence length of the registry's examples: whether one holds the keyword


register(ModelSpec(
    name="lstmn",
    factory=LSTMNClassifier,
    inputs=lambda model: dict(tokens=Input(("B", LENGTH), "int64")),
    batch=tasks.keyword_batch(LENGTH),
    loss=lambda model, tokens, labels: F.cross_entropy(model(tokens), labels),
    defaults=dict(vocab=32, embed_dim=32, hidden=32, attention_dim=32, classes=2),
    tiny=dict(vocab=10, embed_dim=8, hidden=8, attention_dim=8),
    description="LSTMN (Cheng et al. 2016): an LSTM with intra-attention over its memory tape, finding a keyword",
))
