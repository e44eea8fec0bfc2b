"""Token conventions of the text models: special ids, padding, and greedy decoding.

Ids 0-3 are special in every vocabulary; ordinary tokens are ``FIRST`` and up. Masks are derived from
the tokens: a position holding ``PAD`` is never attended to. ``IGNORE`` marks targets that carry no loss
(``cross_entropy(..., ignore_index=IGNORE)``), as PyTorch's -100.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..core import functional as F

PAD, BOS, EOS, MASK = 0, 1, 2, 3
FIRST = 4
IGNORE = -100


def padding_mask(tokens):
    """(B, T) bool, True at real tokens: the keys a query may attend to."""
    return F.not_equal(tokens, PAD)


def pad(rows: Sequence[Sequence[int]], length: int) -> np.ndarray:
    """Rows of tokens as one (len(rows), length) int64 array, filled up with ``PAD``."""
    out = np.full((len(rows), length), PAD, np.int64)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


def greedy(next_logits: Callable[[np.ndarray], np.ndarray], batch: int, max_length: int) -> np.ndarray:
    """Greedy decoding: start every row from ``BOS`` and append the most likely next token,
    ``next_logits(tokens (B, t)) -> (B, V)``, until every row has produced ``EOS`` or ``max_length``
    tokens. Returns (B, n ≤ max_length) without the BOS, ``PAD`` after a row's EOS."""
    tokens = np.full((batch, 1), BOS, np.int64)
    done = np.zeros(batch, bool)
    while tokens.shape[1] <= max_length and not done.all():
        chosen = np.where(done, PAD, next_logits(tokens).argmax(-1))
        done |= chosen == EOS
        tokens = np.concatenate([tokens, chosen[:, None]], axis=1)
    return tokens[:, 1:]
