"""Padding, and the masks that go with it: ``True`` marks a real token, one that may be attended to.

    ids, mask = pad_sequences([[5, 6, 7], [8]])        # ids [[5 6 7] [8 0 0]], mask [[T T T] [T F F]]

A (B, T) mask is a key padding mask once broadcast against attention scores (B, ..., Tq, T) along its
last axis: give it as (B, 1, T) or (B, 1, 1, T), never (B, T, 1), which would mask query rows instead.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...errors import DataError


def pad_sequences(rows: Sequence[Sequence[int]], length: int | None = None, value: int = 0
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ids as one (len(rows), length) int64 array filled up with ``value`` (default: the
    ``<pad>`` id 0), and its mask; ``length`` defaults to the longest row, and longer rows are cut."""
    length = max((len(r) for r in rows), default=0) if length is None else _size(length, "length")
    ids = np.full((len(rows), length), value, np.int64)
    mask = np.zeros((len(rows), length), bool)
    for i, row in enumerate(rows):
        n = min(len(row), length)
        ids[i, :n] = row[:n]
        mask[i, :n] = True
    return ids, mask


def pad_documents(documents: Sequence[Sequence[Sequence[int]]], sentences: int | None = None,
                  words: int | None = None, value: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Documents (lists of sentences of ids) as one (B, S, W) int64 array, for hierarchical models: ids,
    the word mask (B, S, W) and the sentence mask (B, S), True at sentences holding a word. S and W default to the
    most sentences in a document and the longest sentence; longer documents and sentences are cut."""
    sentences = max((len(d) for d in documents), default=0) if sentences is None else _size(sentences, "sentences")
    words = max((len(s) for d in documents for s in d), default=0) if words is None else _size(words, "words")
    ids = np.full((len(documents), sentences, words), value, np.int64)
    word_mask = np.zeros(ids.shape, bool)
    for i, document in enumerate(documents):
        rows = document[:sentences]
        if rows:
            ids[i, :len(rows)], word_mask[i, :len(rows)] = pad_sequences(rows, words, value)
    return ids, word_mask, word_mask.any(axis=-1)


def _size(value: int, name: str) -> int:
    if value < 0:
        raise DataError(f"{name} must be 0 or more, got {value}")
    return value
