"""``Vocabulary``: symbols (words, characters) to integer ids and back, the special symbols first."""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

import numpy as np

from ...errors import DataError
from ...models.tokens import PAD, SPECIALS

UNK = "<unk>"


class Vocabulary:
    """Ids 0, 1, ... are the ``specials`` in order, then ``symbols``. With ``<unk>`` among the specials,
    an unknown symbol encodes to it; without, encoding one raises ``DataError``.

    Word vocabularies use the default specials, ``<pad>`` = 0 and ``<unk>`` = 1; a character-level
    corpus uses none (every character is known), so its ids are exactly its characters."""

    def __init__(self, symbols: Iterable[str], specials: Sequence[str] = (SPECIALS[PAD], UNK)):
        self.symbols = [*specials, *symbols]
        self.specials = tuple(specials)
        self.index = {s: i for i, s in enumerate(self.symbols)}
        if len(self.index) != len(self.symbols):
            raise DataError("a vocabulary's symbols (specials included) must be distinct")
        self.unk = self.index.get(UNK)

    @classmethod
    def build(cls, sequences: Iterable[Iterable[str]], min_count: int = 1, max_size: int | None = None,
              specials: Sequence[str] = (SPECIALS[PAD], UNK)) -> "Vocabulary":
        """The symbols seen at least ``min_count`` (>= 1) times, the most frequent first (ties in sorted order),
        at most ``max_size`` ids in all, specials included."""
        if min_count < 1:
            raise DataError(f"min_count must be at least 1, got {min_count}")
        if max_size is not None and max_size < len(specials):
            raise DataError(f"max_size {max_size} leaves no room for the {len(specials)} specials {list(specials)}")
        counts = Counter(s for sequence in sequences for s in sequence)
        ranked = sorted((s for s, c in counts.items() if c >= min_count and s not in specials),
                        key=lambda s: (-counts[s], s))
        keep = None if max_size is None else max_size - len(specials)
        return cls(ranked[:keep], specials)

    def __len__(self) -> int:
        return len(self.symbols)

    def __contains__(self, symbol: str) -> bool:
        return symbol in self.index

    def encode(self, sequence: Iterable[str]) -> np.ndarray:
        """The ids of ``sequence``'s symbols, as int64."""
        try:
            return np.array([self.index[s] if self.unk is None else self.index.get(s, self.unk) for s in sequence],
                            np.int64)
        except KeyError as e:
            raise DataError(f"symbol {e.args[0]!r} is not in the vocabulary, which has no {UNK}") from None

    def decode(self, ids: Iterable[int], skip: Sequence[str] = ()) -> list[str]:
        """The symbols of ``ids``, leaving out those in ``skip`` (e.g. the padding). An id outside 0 ..
        len - 1, or one that is not an integer, raises ``DataError`` (a negative one is not counted from the end)."""
        ids = np.asarray(list(ids))
        if ids.size and ids.dtype.kind not in "iu":
            raise DataError(f"ids must be integers, got {ids.dtype} ids such as {ids.flat[0]!r}")
        wrong = ids[(ids < 0) | (ids >= len(self))]
        if wrong.size:
            raise DataError(f"id {wrong[0]} is not in the vocabulary, whose ids run from 0 to {len(self) - 1}")
        return [self.symbols[i] for i in ids if self.symbols[i] not in skip]

    def config(self) -> dict:
        """The vocabulary as JSON (for a checkpoint's metadata); ``Vocabulary(**config)`` rebuilds it."""
        return {"symbols": self.symbols[len(self.specials):], "specials": list(self.specials)}

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} symbols, specials {list(self.specials)})"
