"""Pointer networks (Vinyals et al. 2015): attention as the output, a distribution over input positions.

An LSTM encoder reads the inputs x_1 … x_n into states e_1 … e_n; an LSTM decoder starts from the
encoder's final state and, at each step i, points at one input with the additive score

    u_ij = vᵀ tanh(W1 e_j + W2 d_i)        p(C_i = j | C_<i, x) = softmax_j(u_ij)

over the positions not yet pointed at (a permutation never points twice). The decoder's next input is the
input it pointed at (the true one under teacher forcing while training, its own argmax when decoding).
"""
from __future__ import annotations

import math

import numpy as np

from ..attention import AdditiveScore
from ..core import functional as F
from ..core.api import trace
from ..core.parameter import Parameter
from ..core.tracing import Input
from ..errors import ShapeError
from ..nn import LSTM, Linear, LSTMCell, Module, Recurrent, init
from ..nn.checks import sizes
from . import tasks
from .registry import ModelSpec, register


def one_hot(indices, like):
    """(..., n) rows with a 1 at each index of ``indices`` (...), of ``like``'s dtype, n its last axis (which may
    be symbolic)."""
    return F.equal(F.expand_dims(indices, -1), F.arange(like, -1)).astype(like.dtype)


class PointerNetwork(Module):
    """log_p = PointerNetwork(...)(numbers, order): numbers (B, n), order (B, n) the target permutation of
    each row (teacher forcing; a repeated position would be masked at its second step and add no loss);
    log_p (B, n, n) holds log p(C_i = j), 0 at the positions step i may not point at (those of order[:, :i]).

    Each number is embedded as z_j = W_in x_j + b (``embed``); the encoder LSTM reads z_1 … z_n, the decoder
    LSTM is fed a learned ``start`` vector, then z of the position pointed at before. ``decode`` points
    greedily. n may be symbolic (each LSTM is one ``scan``)."""

    def __init__(self, embed_dim: int = 16, hidden: int = 32, attention_dim: int = 32, rng=None):
        super().__init__()
        embed_dim, hidden, attention_dim = sizes(embed_dim=embed_dim, hidden=hidden, attention_dim=attention_dim)
        self.embed = Linear(1, embed_dim, rng=rng)
        self.start = Parameter(init.uniform((embed_dim,), 1 / math.sqrt(embed_dim), rng=rng))
        self.encoder = LSTM(embed_dim, hidden, rng=rng)
        self.decoder = LSTMCell(embed_dim, hidden, rng=rng)
        self.pointer = AdditiveScore(hidden, hidden, attention_dim, rng=rng)

    def encode(self, numbers):
        """The embedded inputs z (B, n, E), encoder states e (B, n, H) and the decoder's first state."""
        z = self.embed(F.expand_dims(numbers, -1))
        states, final = self.encoder(z)
        return z, states, final

    def step(self, z_prev, state, states, allowed):
        """One decoder step: fed z_prev (B, E) in ``state`` (h, c), it points over ``states`` (B, n, H) at the
        positions ``allowed`` (B, n) (True = may point). Returns log p (B, n) and the new state."""
        state = self.decoder(z_prev, state)
        scores = self.pointer(F.expand_dims(state[0], -2), states)[:, 0]
        return F.log_softmax(scores, mask=allowed), state

    def forward(self, numbers, order):
        """Teacher forcing: the decoder's inputs (``start``, then z of order_{i−1}) and the positions each step
        may point at are known before it runs, so the decoder LSTM is one scan over them (its input projection
        all at once) and the pointer scores all n steps at once, (B, n steps, n positions)."""
        z, states, state = self.encode(numbers)
        chosen = one_hot(order, numbers)                       # (B, n steps, n positions)
        previous = F.eye(chosen.shape[1], k=-1, dtype=chosen.dtype) @ chosen      # row i: chosen[:, i − 1]; row 0: 0
        inputs = previous @ z + F.expand_dims(1 - F.sum(previous, axis=-1), -1) * self.start
        allowed = F.equal(F.cumsum(previous, axis=1), 0.0)     # not pointed at by the steps before
        decoded, _ = Recurrent.unroll(self.decoder, inputs, None, reverse=False, state=state)
        return F.log_softmax(self.pointer(decoded, states), mask=allowed)

    def decode(self, numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Greedy decoding: the permutation (B, n) that points at the most likely remaining position at each
        step, and the pointer distributions (B, n steps, n). The encoder and one decoder step are each traced
        and compiled once."""
        numbers = np.asarray(numbers, self.start.data.dtype)
        if numbers.ndim != 2 or numbers.size == 0:
            raise ShapeError(f"numbers must be a non-empty (batch, length) array, got shape {numbers.shape}")
        z, states, h, c = trace(self.encode, numbers=numbers).compile()(numbers=numbers)
        step = trace(lambda z_prev, h, c, states, allowed: self.step(z_prev, (h, c), states, allowed),
                     z_prev=z[:, 0], h=h, c=c, states=states, allowed=np.ones(numbers.shape, bool)).compile()
        rows, allowed = np.arange(len(numbers)), np.ones(numbers.shape, bool)
        z_prev = np.broadcast_to(self.start.data, z[:, 0].shape)
        order, probabilities = [], []
        for _ in range(numbers.shape[1]):
            log_p, h, c = step(z_prev=z_prev, h=h, c=c, states=states, allowed=allowed)
            choice = np.where(allowed, log_p, -np.inf).argmax(-1)
            order.append(choice)
            probabilities.append(np.where(allowed, np.exp(log_p), 0.0))
            allowed[rows, choice] = False
            z_prev = z[rows, choice]
        return np.stack(order, axis=1), np.stack(probabilities, axis=1)


def pointer_loss(model, numbers, order):
    """Teacher forcing: the mean over steps and rows of −log p(C_i = order_i)."""
    return -F.mean(F.sum(model(numbers, order) * one_hot(order, numbers), axis=-1))


LENGTH = 5


register(ModelSpec(
    name="pointer",
    factory=PointerNetwork,
    inputs=lambda model: dict(numbers=Input(("B", LENGTH)), order=Input(("B", LENGTH), "int64")),
    batch=lambda model, rng, size: tasks.sorting(rng, size, LENGTH),
    loss=pointer_loss,
    defaults=dict(embed_dim=16, hidden=32, attention_dim=32),
    tiny=dict(embed_dim=8, hidden=8, attention_dim=8),
    description="Pointer network (Vinyals et al. 2015) sorting random numbers: attention over the inputs "
                "as the output",
))
