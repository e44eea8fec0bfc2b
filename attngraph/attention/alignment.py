"""Structural alignment biases (Cohn et al. 2016, "Incorporating Structural Alignment Biases into an
Attentional Neural Translation Model", NAACL, §3.1–3.2).

An additive score whose tanh also sees where the two words are and where the previous target word looked:

    e_ij = vᵀ tanh(W_1 s_i + W_2 h_j + W_3 ψ(i, j, I) + W_4 ξ_ij)
    ψ(i, j, I) = [log(1 + j), log(1 + i), log(1 + I)]         positional bias
    ξ_ij = [α_{i−1, j−k}, ..., α_{i−1, j}, ..., α_{i−1, j+k}]  Markov term: the previous alignment around j

for target (query) position i, source (key) position j — both 0-based — and source length I. ξ is zero
where j ± k falls outside the source, and absent at the first step (no previous alignment). W_2 carries the
bias b of the additive score.
"""
from __future__ import annotations

import functools
import math
import operator

from ..core import functional as F
from ..core.parameter import Parameter
from ..nn import Module, init
from ..nn.checks import integer
from .attention import attend
from .local import key_positions, query_positions, source_lengths
from .scores import AdditiveScore


def previous_alignment_window(previous, k: int) -> list:
    """ξ as 2k + 1 tensors shaped like ``previous`` α_{i−1} (..., Tq, Tk): the m-th is α_{i−1, j+m} for
    m = −k .. k, zero beyond the ends. Each shift is a product with a 0/1 band matrix built from positions,
    so the source length may be symbolic."""
    positions = F.arange(previous, -1)
    offsets = F.expand_dims(positions, -1) - F.expand_dims(positions, 0)
    return [previous @ F.astype(F.equal(offsets, m), previous.dtype) for m in range(-k, k + 1)]


def _weighted_sum(features: list, weight):
    """W f = Σ_c f_c ⊗ W[c], the rows of ``weight`` (len(features), hidden) weighted by the features, which
    are separate tensors that broadcast against each other: they never have to be stacked into one."""
    return functools.reduce(operator.add, [F.expand_dims(f, -1) * weight[c] for c, f in enumerate(features)])


def _projection(features: int, hidden: int, rng) -> Parameter:
    """W (features, hidden) from U(−1/√features, 1/√features), as ``Linear`` initializes its weight."""
    return Parameter(init.uniform((features, hidden), 1 / math.sqrt(features), rng=rng))


class AlignmentBiasedScore(AdditiveScore):
    """scores = AlignmentBiasedScore(query_dim, key_dim, hidden, markov_width=1)(q, k, mask=None,
    previous=None, step=0).

    q (..., Tq, dq) decoder states s_i, k (..., Tk, dk) encoder states h_j; the result is (..., Tq, Tk).
    ``mask`` (True = may attend) only sets the source length I, the number of keys it allows (Tk without
    it); ``previous`` (..., Tq, Tk) is α_{i−1} for each query; query t is target position i = step + t. Used
    in ``Attention(score)``, it sees neither mask nor previous alignment: the positional bias alone."""

    def __init__(self, query_dim: int, key_dim: int, hidden: int, markov_width: int = 1, rng=None):
        markov_width = integer("markov_width", markov_width, minimum=0)
        super().__init__(query_dim, key_dim, hidden, rng=rng)
        self.markov_width = markov_width
        self.w_position = _projection(3, hidden, rng)
        self.w_markov = _projection(2 * markov_width + 1, hidden, rng)

    def forward(self, q, k, mask=None, previous=None, step: int = 0):
        psi = [key_positions(k), query_positions(q, k.dtype, step), source_lengths(k, mask)]
        hidden = (F.expand_dims(self.w_query(q), -2) + F.expand_dims(self.w_key(k), -3)
                  + _weighted_sum([F.log(1.0 + x) for x in psi], self.w_position))
        if previous is not None:
            xi = previous_alignment_window(previous, self.markov_width)
            hidden = hidden + _weighted_sum(xi, self.w_markov)
        return F.tanh(hidden) @ self.v


class AlignmentAttention(Module):
    """context, weights = AlignmentAttention(query_dim, key_dim, hidden, markov_width=1)(query, keys,
    values=None, mask=None, previous=None, step=0): ``attend`` with an ``AlignmentBiasedScore``.

    To decode step by step, pass Tq = 1, ``step`` = i and ``previous`` = the weights returned at step i − 1
    (None at the first step). Weights (..., Tq, Tk) are recorded under this module's scope."""

    def __init__(self, query_dim: int, key_dim: int, hidden: int, markov_width: int = 1, rng=None):
        super().__init__()
        self.score = AlignmentBiasedScore(query_dim, key_dim, hidden, markov_width, rng)

    def forward(self, query, keys, values=None, mask=None, previous=None, step: int = 0):
        scores = self.score(query, keys, mask, previous, step)
        return attend(scores, keys if values is None else values, mask)
