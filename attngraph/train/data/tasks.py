"""Synthetic sequence-to-sequence tasks, generated offline from seeds: copy, reverse, sort and addition
(date-format translation is in ``dates.py``).

A task maps a random source string to its target string over a small alphabet. The split a pair belongs
to is a fixed function of its key (the source; for dates, the date): the pair is held out when
blake2b(task name : key) / 2⁶⁴ < ``heldout``. The train and held-out splits are therefore disjoint
whatever seeds draw from them, and fresh held-out pairs can be drawn at will::

    task = Reverse(symbols=10, max_length=8)
    train = task.sample(10_000, "train", seed=0)          # [("3814", "4183"), ...]
    test = task.sample(500, "heldout", seed=1, distinct=True)
    batch = task.batch(train[:32])                         # src (B, S), tgt_in (B, T), tgt_out (B, T)

Token ids: <pad> 0, <s> 1, </s> 2, <mask> 3 — ``attngraph.models.tokens``' PAD, BOS, EOS and MASK —
then the task's alphabet.
"""
from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Sequence

import numpy as np

from ...errors import DataError
from ...models.tokens import IGNORE, SPECIALS
from .batching import pad_sequences
from .vocab import Vocabulary

DIGITS = "0123456789"
SYMBOLS = DIGITS + "abcdefghijklmnopqrstuvwxyz"
SPLITS = ("train", "heldout")
DRAWS_AT_ONCE = 1024     # pairs ``sample`` asks ``pairs`` for at a time


@cache
def _hashed(prefix: str):
    """blake2b's 64-bit state after ``prefix``: a pair's hash continues from a copy of it."""
    return hashlib.blake2b(prefix.encode(), digest_size=8)


@dataclass(frozen=True, kw_only=True)
class Task:
    """A task: ``pair(rng)`` draws a (source, target) pair of either split, ``key`` names what decides
    its split. Subclasses set ``name`` and ``alphabet`` (every character of sources and targets). A setting
    out of range raises ``DataError``: ``heldout``, the fraction of pairs held out, lies strictly between 0
    and 1."""

    heldout: float = 0.1
    name = "task"
    alphabet = ""

    def __post_init__(self):
        if not 0 < self.heldout < 1:
            raise DataError(f"{type(self).__name__}: heldout must lie strictly between 0 and 1, got {self.heldout}")

    def pair(self, rng: np.random.Generator) -> tuple[str, str]:
        raise NotImplementedError

    def pairs(self, rng: np.random.Generator, count: int) -> list[tuple[str, str]]:
        """``count`` pairs of either split: ``pair`` drawn ``count`` times, unless a task draws them at once."""
        return [self.pair(rng) for _ in range(count)]

    def key(self, source: str, target: str) -> str:
        return source

    def split_of(self, source: str, target: str) -> str:
        """The pair's split, by the 64-bit blake2b hash of "name:key": held out when below heldout · 2**64."""
        digest = _hashed(f"{self.name}:").copy()
        digest.update(self.key(source, target).encode())
        return "heldout" if int.from_bytes(digest.digest(), "little") < self.heldout * 2 ** 64 else "train"

    def sample(self, n: int, split: str = "train", seed: int = 0, distinct: bool = False) -> list[tuple[str, str]]:
        """``n`` pairs of ``split`` drawn with ``np.random.default_rng(seed)`` (pairs of the other split
        are drawn and skipped); ``distinct`` makes them pairwise different. When 100·n + 10,000 draws do not
        give them, the task has too few such pairs: ``DataError``."""
        if split not in SPLITS:
            raise DataError(f"split must be one of {SPLITS}, got {split!r}")
        if n < 0:
            raise DataError(f"cannot draw {n} pairs; ask for 0 or more")
        rng = np.random.default_rng(seed)
        pairs, seen, draws, budget = [], set(), 0, 100 * n + 10_000
        while len(pairs) < n:
            if draws == budget:
                raise DataError(f"{self!r}: {budget} draws gave only {len(pairs)} of the {n} "
                                f"{'distinct ' * distinct}{split} pairs asked for; the task has too few of them: "
                                "ask for fewer, or make the task larger")
            block = self.pairs(rng, min(DRAWS_AT_ONCE, budget - draws))
            draws += len(block)
            for pair in block:
                if self.split_of(*pair) == split and not (distinct and pair in seen):
                    if distinct:
                        seen.add(pair)
                    pairs.append(pair)
        return pairs[:n]

    @cached_property
    def vocab(self) -> Vocabulary:
        return Vocabulary(self.alphabet, SPECIALS)

    def batch(self, pairs: Sequence[tuple[str, str]]) -> dict[str, np.ndarray]:
        """An encoder-decoder batch, padded to its longest sequences: src = x, tgt_in = <s> y and
        tgt_out = y </s> (teacher forcing), each (B, length) int64 with <pad> = 0 after the end."""
        bos, eos = self.vocab.index["<s>"], self.vocab.index["</s>"]
        targets = [self.vocab.encode(t) for _, t in pairs]
        return dict(src=pad_sequences([self.vocab.encode(s) for s, _ in pairs])[0],
                    tgt_in=pad_sequences([[bos, *t] for t in targets])[0],
                    tgt_out=pad_sequences([[*t, eos] for t in targets])[0])

    def decoder_batch(self, pairs: Sequence[tuple[str, str]]) -> dict[str, np.ndarray]:
        """A batch for a decoder-only (GPT-style) model over the sequences x <s> y </s>: ``tokens`` is
        each sequence but its last token, ``targets`` the next tokens, with ``IGNORE`` wherever the next
        token is not part of y </s> (the model reads the source, it is not asked to predict it)."""
        bos, eos = self.vocab.index["<s>"], self.vocab.index["</s>"]
        sequences = [[*self.vocab.encode(s), bos, *self.vocab.encode(t), eos] for s, t in pairs]
        targets = [[IGNORE] * len(s) + seq[len(s) + 1:] for (s, _), seq in zip(pairs, sequences)]
        return dict(tokens=pad_sequences([seq[:-1] for seq in sequences])[0],
                    targets=pad_sequences(targets, value=IGNORE)[0])

    def decode(self, ids) -> str:
        """The string a model's output ids spell, up to the first </s> (<pad> and <s> left out)."""
        symbols = self.vocab.decode(ids)
        end = symbols.index("</s>") if "</s>" in symbols else len(symbols)
        return "".join(s for s in symbols[:end] if s not in SPECIALS)

    def complete(self, model, sources: Sequence[str]) -> list[str]:
        """A decoder-only model's answers to ``sources``: the prompts x <s> continued greedily by
        ``model.generate`` (a GPT, in eval mode) for len(x) + 1 tokens, one batch per source length: the
        symbols written up to and including the first </s> (a right answer is y </s>, nothing after it)."""
        bos = self.vocab.index["<s>"]
        answers = [""] * len(sources)
        for length in sorted({len(source) for source in sources}):
            rows = [i for i, source in enumerate(sources) if len(source) == length]
            prompts = np.array([[*self.vocab.encode(sources[i]), bos] for i in rows])
            continued = model.generate(prompts, new_tokens=length + 1, temperature=0)
            for i, row in zip(rows, continued):
                symbols = self.vocab.decode(row[length + 1:])
                answers[i] = "".join(symbols[:symbols.index("</s>") + 1] if "</s>" in symbols else symbols)
        return answers

    def config(self) -> dict:
        return {"task": self.name, **dataclasses.asdict(self)}


@dataclass(frozen=True, kw_only=True)
class SymbolTask(Task):
    """Sources of ``min_length`` to ``max_length`` symbols drawn uniformly from the first ``symbols`` of
    0-9a-z; the target is ``transform(source)``."""

    symbols: int = 10
    min_length: int = 1
    max_length: int = 10

    def __post_init__(self):
        super().__post_init__()
        if not 1 <= self.symbols <= len(SYMBOLS) or not 1 <= self.min_length <= self.max_length:
            raise DataError(f"{type(self).__name__} needs 1 <= symbols <= {len(SYMBOLS)} and "
                            f"1 <= min_length <= max_length, got {self}")

    @property
    def alphabet(self) -> str:
        return SYMBOLS[:self.symbols]

    def pair(self, rng):
        return self.pairs(rng, 1)[0]

    def pairs(self, rng, count):
        """The lengths, then a row of ``max_length`` symbols per pair, whose first ``length`` make the source."""
        lengths = rng.integers(self.min_length, self.max_length + 1, count).tolist()
        rows = np.frombuffer(self.alphabet.encode(), np.uint8)[rng.integers(0, self.symbols, (count, self.max_length))]
        text, width = rows.tobytes().decode(), self.max_length
        sources = [text[i * width:i * width + length] for i, length in enumerate(lengths)]
        return [(source, self.transform(source)) for source in sources]

    @staticmethod
    def transform(source: str) -> str:
        raise NotImplementedError


class Copy(SymbolTask):
    """y = x"""
    name = "copy"
    transform = staticmethod(lambda source: source)


class Reverse(SymbolTask):
    """y = x reversed"""
    name = "reverse"
    transform = staticmethod(lambda source: source[::-1])


class Sort(SymbolTask):
    """y = the symbols of x in ascending order (0-9 before a-z)"""
    name = "sort"
    transform = staticmethod(lambda source: "".join(sorted(source)))


@dataclass(frozen=True, kw_only=True)
class Addition(Task):
    """Multi-digit addition: "a+b" → "c", c = a + b in decimal. Each operand has 1 to ``digits`` digits,
    the count drawn uniformly and then the number (no leading zeros), so short sums are as common as
    long ones."""

    digits: int = 3
    name = "addition"
    alphabet = DIGITS + "+"

    def __post_init__(self):
        super().__post_init__()
        if self.digits < 1:
            raise DataError(f"Addition needs operands of at least 1 digit, got digits={self.digits}")

    def pair(self, rng):
        a, b = (self._number(rng) for _ in range(2))
        return f"{a}+{b}", str(a + b)

    def _number(self, rng) -> int:
        n = int(rng.integers(1, self.digits + 1))
        return int(rng.integers(0 if n == 1 else 10 ** (n - 1), 10 ** n))
