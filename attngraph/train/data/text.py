"""Character-level text for language models: a corpus from a file, and the tinyshakespeare download.

    corpus = CharCorpus.from_file(tinyshakespeare())      # or any UTF-8 text file (--text PATH)
    batch = corpus.batch(rng, size=12, block=64)           # x (12, 64) and y = x shifted by one

The first 90% of the characters are the training split and the last 10% the validation split, as in
char-rnn and nanoGPT (tinyshakespeare: 1,003,854 / 111,540 characters, vocabulary 65).
"""
from __future__ import annotations

import hashlib
import os
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ...errors import DataError
from .vocab import Vocabulary

TINYSHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
TINYSHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"


@dataclass
class CharCorpus:
    """A text as character ids: ``vocab`` (its distinct characters in sorted order, no specials),
    ``train`` the first ``train_fraction`` of the ids and ``val`` the rest."""

    vocab: Vocabulary
    train: np.ndarray
    val: np.ndarray

    @classmethod
    def from_text(cls, text: str, train_fraction: float = 0.9) -> "CharCorpus":
        vocab = Vocabulary(sorted(set(text)), specials=())
        ids = vocab.encode(text)
        cut = int(len(ids) * train_fraction)
        return cls(vocab, ids[:cut], ids[cut:])

    @classmethod
    def from_file(cls, path, train_fraction: float = 0.9) -> "CharCorpus":
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise DataError(f"cannot read a UTF-8 text from {path}: {e}") from None
        return cls.from_text(text, train_fraction)

    def batch(self, rng: np.random.Generator, size: int, block: int, split: str = "train") -> dict[str, np.ndarray]:
        """``size`` windows of ``block`` + 1 characters at random offsets of ``split`` ("train" or "val"):
        x (size, block) and its next characters y (size, block), int64."""
        ids = {"train": self.train, "val": self.val}[split]
        if len(ids) <= block:
            raise ValueError(f"the {split} split has {len(ids)} characters, too few for windows of {block} + 1")
        starts = rng.integers(0, len(ids) - block, size)
        windows = ids[starts[:, None] + np.arange(block + 1)]
        return dict(x=windows[:, :-1], y=windows[:, 1:])

    def decode(self, ids) -> str:
        return "".join(self.vocab.decode(ids))


def tinyshakespeare(cache_dir=None, fetch: Callable[[str], bytes] | None = None) -> Path:
    """The path of tinyshakespeare (Karpathy's char-rnn data), downloaded on first use into
    ``cache_dir`` (default ``$ATTNGRAPH_CACHE`` or ``~/.cache/attngraph``) and checked by SHA-256.
    ``fetch(url) -> bytes`` defaults to an HTTP GET; offline, the error says what to do instead."""
    folder = Path(cache_dir or os.environ.get("ATTNGRAPH_CACHE") or Path.home() / ".cache" / "attngraph")
    path = folder / "tinyshakespeare.txt"
    if path.is_file():
        return path
    try:
        data = (fetch or _http_get)(TINYSHAKESPEARE_URL)
    except OSError as e:        # urllib's URLError and timeouts are OSErrors
        raise DataError(f"cannot download tinyshakespeare from {TINYSHAKESPEARE_URL} ({e}). Offline? "
                             f"Put the file at {path} by hand, or pass the path of any text file instead "
                             "(--text PATH)") from None
    if hashlib.sha256(data).hexdigest() != TINYSHAKESPEARE_SHA256:
        raise DataError(f"the file downloaded from {TINYSHAKESPEARE_URL} is not tinyshakespeare "
                             "(SHA-256 mismatch); nothing was saved")
    folder.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)
    return path


def _http_get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()
