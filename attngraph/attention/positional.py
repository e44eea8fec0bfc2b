"""Position information for attention, which by itself is blind to order.

Absolute encodings are added to the token embeddings: ``SinusoidalPositions`` (fixed) and
``LearnedPositions`` (trained). Relative position representations (Shaw et al. 2018) instead enter every
attention score and every output through ``RelativePositions`` and ``RelativeMultiHeadAttention``.
Positions are read with ``arange`` / ``relative_distance`` when the graph runs, so the sequence length may
stay symbolic.
"""
from __future__ import annotations

import math

import numpy as np

from ..core import functional as F
from ..core.parameter import Parameter
from ..errors import ShapeError
from ..nn import Module, init
from ..nn.checks import integer, sizes
from .attention import key_mask
from .multihead import MultiHeadAttention, head_mask, merge_heads, split_heads


def gather_positions(table, x):
    """Rows 0 .. T − 1 of ``table`` (max_length, d) for x (..., T, d): a (T, d) tensor."""
    length, max_length = x.shape[-2], table.shape[0]
    if isinstance(length, int) and length > max_length:
        raise ShapeError(f"sequence length {length} exceeds the {max_length} positions of the table")
    return F.embedding(table, F.arange(x, axis=-2))


class SinusoidalPositions(Module):
    """x + PE[:T] with PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(p / 10000^(2i/d))
    (Vaswani et al. 2017, section 3.5).

    x is (..., T, d). The (max_length, d) table is computed once, in NumPy, and enters the graph as a
    constant; there is nothing to train. A run with T > max_length raises a BindingError."""

    def __init__(self, dim: int, max_length: int = 512):
        super().__init__()
        dim, max_length = sizes(dim=dim, max_length=max_length)
        self.dim, self.max_length = dim, max_length
        position = np.arange(max_length)[:, None]
        angle = position / 10000 ** (np.arange(0, dim, 2) / dim)
        self.table = np.zeros((max_length, dim))
        self.table[:, 0::2] = np.sin(angle)
        self.table[:, 1::2] = np.cos(angle[:, :dim // 2])

    def forward(self, x):
        return x + gather_positions(self.table.astype(x.dtype), x)

    def extra_repr(self) -> str:
        return f"{self.dim}, max_length={self.max_length}"


class LearnedPositions(Module):
    """x + P[:T] with P a trained (max_length, d) table, N(0, 0.02²) at the start (as GPT-2 and BERT).

    x is (..., T, d); a run with T > max_length raises a BindingError."""

    def __init__(self, max_length: int, dim: int, rng=None):
        super().__init__()
        max_length, dim = sizes(max_length=max_length, dim=dim)
        self.max_length, self.dim = max_length, dim
        self.weight = Parameter(init.normal((max_length, dim), 0.02, rng=rng))

    def forward(self, x):
        return x + gather_positions(self.weight, x)

    def extra_repr(self) -> str:
        return f"{self.max_length}, {self.dim}"


class RelativePositions(Module):
    """a_K, a_V = RelativePositions(max_distance, dim)(q, k): relative position representations
    (Shaw et al. 2018).

    The relation of query i to key j is represented by a^K_ij = w^K_clip(j − i, k) for the keys and
    a^V_ij = w^V_clip(j − i, k) for the values, clip(x, k) = max(−k, min(k, x)): 2k + 1 rows in each of
    two tables ``key`` and ``value`` (2k + 1, d), shared by all heads (and layers that share the module).
    Every distance beyond k uses the row of distance ±k, which therefore collects their gradients.
    q is (..., Tq, ·) and k (..., Tk, ·); a_K and a_V are (Tq, Tk, d)."""

    def __init__(self, max_distance: int, dim: int, rng=None):
        super().__init__()
        max_distance, dim = sizes(max_distance=max_distance, dim=dim)
        self.max_distance, self.dim = max_distance, dim
        bound = 1 / math.sqrt(dim)
        self.key = Parameter(init.uniform((2 * max_distance + 1, dim), bound, rng=rng))
        self.value = Parameter(init.uniform((2 * max_distance + 1, dim), bound, rng=rng))

    def forward(self, q, k):
        distance = F.relative_distance(q, k, self.max_distance)
        return F.embedding(self.key, distance), F.embedding(self.value, distance)

    def extra_repr(self) -> str:
        return f"max_distance={self.max_distance}, dim={self.dim}"


def per_query(x, table):
    """out_i = x_i · table_i for every query i: x (..., Tq, n) and a table (Tq, n, m) holding one matrix
    per query give (..., Tq, m) — a (1 × n)(n × m) product per query, broadcast over the leading axes."""
    return (F.expand_dims(x, -2) @ table)[..., 0, :]


class RelativeMultiHeadAttention(MultiHeadAttention):
    """Multi-head attention with relative position representations (Shaw et al. 2018, equations 3-4):

        e_ij = (q_i · k_j + q_i · a^K_ij) / √d_h        α = softmax(e, mask)
        z_i  = Σ_j α_ij (v_j + a^V_ij)

    per head, with q, k, v the projected heads of width d_h = d_model / heads and a^K, a^V from a
    ``RelativePositions(max_distance, d_h)`` shared across the heads. Calls, masks and the recorded
    weights are those of ``MultiHeadAttention``."""

    def __init__(self, d_model: int, heads: int, max_distance: int, dropout: float = 0.0, bias: bool = True,
                 rng=None):
        max_distance = integer("max_distance", max_distance)
        super().__init__(d_model, heads, dropout, bias, rng)
        self.relative = RelativePositions(max_distance, self.d_model // self.heads, rng)

    def forward(self, query, key, value, mask=None, causal: bool = False):
        q, k, v = (split_heads(w(x), self.heads) for w, x in ((self.w_q, query), (self.w_k, key), (self.w_v, value)))
        a_k, a_v = self.relative(q, k)
        scores = (q @ F.swapaxes(k, -1, -2) + per_query(q, F.swapaxes(a_k, -1, -2))) * (1 / math.sqrt(q.shape[-1]))
        mask = head_mask(mask)
        mask = key_mask(mask, scores)
        weights = self.dropout(F.name(F.softmax(scores, mask=mask, causal=causal), "attention"))
        return self.w_o(merge_heads(weights @ v + per_query(weights, a_v)))
