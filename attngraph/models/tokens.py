"""Token conventions of the text models: special ids, padding, and greedy decoding.

Ids 0-3 are special in every vocabulary; ordinary tokens are ``FIRST`` and up, so a vocabulary has more
than ``FIRST`` ids (``vocabulary``). Masks are derived from the tokens: a position holding ``PAD`` is never
attended to. ``IGNORE`` marks targets that carry no loss (``cross_entropy(..., ignore_index=IGNORE)``), as
PyTorch's -100.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..core import functional as F
from ..errors import BindingError, DTypeError, ShapeError
from ..nn.checks import integer

PAD, BOS, EOS, MASK = 0, 1, 2, 3
SPECIALS = ("<pad>", "<s>", "</s>", "<mask>")       # the symbols of PAD, BOS, EOS and MASK
FIRST = 4
IGNORE = -100


def vocabulary(name: str, size) -> int:
    """A vocabulary size, checked: an int > ``FIRST``, the special ids and at least one ordinary token."""
    return integer(name, size, minimum=FIRST + 1)


def token_ids(name: str, tokens, vocab: int, ranks: tuple[int, ...] = (2,)) -> np.ndarray:
    """``tokens`` as an int64 array, checked before any work: a non-empty array of one of ``ranks`` axes
    (ShapeError), of integers (DTypeError), each a token id in [0, vocab) (BindingError)."""
    try:
        array = np.asarray(tokens)
    except ValueError as e:                       # ragged rows
        raise ShapeError(f"{name} must be an array of token ids: {e}") from None
    if array.ndim not in ranks or array.size == 0:
        raise ShapeError(f"{name} must be a non-empty {' or '.join(map(str, ranks))}-d array of token ids, "
                         f"got shape {array.shape}")
    if array.dtype.kind not in "iu":
        raise DTypeError(f"{name} must hold integer token ids, got dtype {array.dtype}")
    if array.min() < 0 or array.max() >= vocab:
        outside = array[(array < 0) | (array >= vocab)].flat[0]
        raise BindingError(f"{name} holds token id {outside}, outside the model's vocabulary [0, {vocab})")
    return array.astype(np.int64)


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
