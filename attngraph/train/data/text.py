"""Character-level text for language models: a corpus from a file, and the tinyshakespeare download.

    corpus = CharCorpus.from_file(tinyshakespeare())      # or any UTF-8 text file (--text PATH)
    batch = corpus.batch(rng, size=12, block=64)           # x (12, 64) and y = x shifted by one

The first 90% of the characters are the training split and the last 10% the validation split, as in
char-rnn and nanoGPT (tinyshakespeare: 1,003,854 / 111,540 characters, vocabulary 65). A text that cannot be
read as UTF-8, or that leaves a split empty, or too short for the windows asked for, raises ``DataError``.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ...errors import DataError
from .. import files
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
        """The first ``int(len(text) · train_fraction)`` characters train, the rest validate; neither may be
        empty."""
        if not 0 < train_fraction < 1:
            raise DataError(f"train_fraction must lie strictly between 0 and 1, got {train_fraction}")
        cut = int(len(text) * train_fraction)
        if not 0 < cut < len(text):
            raise DataError(f"a text of {len(text)} characters split at {train_fraction} leaves a split empty; "
                            "give a longer text")
        vocab = Vocabulary(sorted(set(text)), specials=())
        ids = vocab.encode(text)
        return cls(vocab, ids[:cut], ids[cut:])

    @classmethod
    def from_file(cls, path, train_fraction: float = 0.9) -> "CharCorpus":
        """The text of the UTF-8 file at ``path`` (a BOM is dropped)."""
        try:
            text = Path(path).read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as e:
            raise DataError(f"cannot read a UTF-8 text from {path}: {e}") from None
        try:
            return cls.from_text(text, train_fraction)
        except DataError as e:
            raise DataError(f"{path}: {e}") from None

    def check(self, block: int) -> None:
        """Raise ``DataError`` unless both splits are longer than ``block`` (a demo calls this before it
        builds its model, so that a short text fails at once)."""
        for split in ("train", "val"):
            self._ids(split, block)

    def _ids(self, split: str, block: int) -> np.ndarray:
        if split not in ("train", "val"):
            raise DataError(f"split must be 'train' or 'val', got {split!r}")
        if block < 1:
            raise DataError(f"windows need a block of at least 1 character, got {block}")
        ids = self.train if split == "train" else self.val
        if len(ids) <= block:
            raise DataError(f"the {split} split has {len(ids)} characters, too few for windows of {block} + 1; "
                            "give a longer text")
        return ids

    def batch(self, rng: np.random.Generator, size: int, block: int, split: str = "train") -> dict[str, np.ndarray]:
        """``size`` windows of ``block`` + 1 characters at random offsets of ``split`` ("train" or "val"):
        x (size, block) and its next characters y (size, block), int64."""
        ids = self._ids(split, block)
        starts = rng.integers(0, len(ids) - block, size)
        windows = ids[starts[:, None] + np.arange(block + 1)]
        return dict(x=windows[:, :-1], y=windows[:, 1:])

    def decode(self, ids) -> str:
        return "".join(self.vocab.decode(ids))


def tinyshakespeare(cache_dir=None, fetch: Callable[[str], bytes] | None = None) -> Path:
    """The path of tinyshakespeare (Karpathy's char-rnn data), downloaded on first use into
    ``cache_dir`` (default ``$ATTNGRAPH_CACHE`` or ``~/.cache/attngraph``). Both the cached file and a download
    are checked by SHA-256: a partial or altered file is never used (it is downloaded again), and a download
    is written to a temporary file renamed at the end, so an interrupted one leaves nothing behind.
    ``fetch(url) -> bytes`` defaults to an HTTP GET; offline, the error says what to do instead."""
    folder = Path(cache_dir or os.environ.get("ATTNGRAPH_CACHE") or Path.home() / ".cache" / "attngraph")
    path = folder / "tinyshakespeare.txt"
    if path.is_file() and _sha256(path.read_bytes()) == TINYSHAKESPEARE_SHA256:
        return path
    try:
        data = (fetch or _http_get)(TINYSHAKESPEARE_URL)
    except (OSError, http.client.HTTPException) as e:   # URLError, timeouts; IncompleteRead: a cut connection
        raise DataError(f"cannot download tinyshakespeare from {TINYSHAKESPEARE_URL} ({e}). Offline? "
                        f"Put the file at {path} by hand, or pass the path of any text file instead "
                        "(--text PATH)") from None
    if _sha256(data) != TINYSHAKESPEARE_SHA256:
        raise DataError(f"the file downloaded from {TINYSHAKESPEARE_URL} is not tinyshakespeare "
                        "(SHA-256 mismatch: an interrupted or altered download); nothing was saved")
    try:
        files.write_atomically(path, lambda f: f.write(data))
    except OSError as e:
        raise DataError(f"cannot save tinyshakespeare in {folder}: {e}; set ATTNGRAPH_CACHE to a folder that "
                        "can be written") from None
    return path


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _http_get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()
