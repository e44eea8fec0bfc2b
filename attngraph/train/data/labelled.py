"""Labelled text for sentence and document classification, from a zip archive or a folder.

Two layouts are read, told apart by where the text files lie (README* and hidden files are skipped):

- every file in one folder: each file is a class named by its extension (``rt-polarity.pos`` → "pos";
  a ``.txt`` file by its stem, ``pos.txt`` → "pos") and each non-empty line is an example — the MR
  sentence-polarity corpus (Pang & Lee 2005);
- files in several folders: each folder is a class and each file an example, a document — the
  movie-review polarity corpus v2.0 (Pang & Lee 2004), one sentence per line.

Files are decoded as UTF-8, or as Latin-1 when they are not valid UTF-8 (rt-polarity is Latin-1).

    data = read_labelled_text("../shared/data/sentence_polarity.zip")
    train, test = data.split(heldout=0.1, seed=0)
    vocab = Vocabulary.build((tokenize(t) for t in train.texts), min_count=2)
    ids, mask = pad_sequences([vocab.encode(tokenize(t)) for t in train.texts[:32]])
"""
from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

from ...errors import DataError

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*|[^\sa-z0-9]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass
class LabelledText:
    """Examples ``texts`` with integer ``labels`` indexing ``classes`` (sorted names)."""

    texts: list[str]
    labels: np.ndarray
    classes: list[str]

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, indices) -> "LabelledText":
        return LabelledText([self.texts[i] for i in indices], self.labels[indices], self.classes)

    def split(self, heldout: float = 0.1, seed: int = 0) -> tuple["LabelledText", "LabelledText"]:
        """A seeded random split: (train, held-out), the held-out part ``round(heldout · n)`` examples."""
        order = np.random.default_rng(seed).permutation(len(self))
        cut = len(self) - round(heldout * len(self))
        return self.subset(np.sort(order[:cut])), self.subset(np.sort(order[cut:]))


def read_labelled_text(path) -> LabelledText:
    """The labelled examples of the zip archive or folder at ``path`` (layouts in the module docstring)."""
    files = _text_files(Path(path))
    folders = {name.parent for name in files}
    if not files:
        raise DataError(f"{path} holds no text files")
    if len(folders) > 1:
        named = [(name.parent.name, [_decode(data)]) for name, data in files.items()]
    else:
        named = [(name.stem if name.suffix in ("", ".txt") else name.suffix[1:],
                  [line.strip() for line in _decode(data).splitlines() if line.strip()])
                 for name, data in files.items()]
    classes = sorted({label for label, _ in named})
    if len(classes) < 2:
        raise DataError(f"{path} holds a single class {classes}; expected one file or folder per class")
    texts = [text for _, examples in named for text in examples]
    labels = np.array([classes.index(label) for label, examples in named for _ in examples], np.int64)
    return LabelledText(texts, labels, classes)


def tokenize(text: str) -> list[str]:
    """Lower-cased words (with inner apostrophes: "it's") and single punctuation marks."""
    return _TOKEN.findall(text.lower())


def sentences(document: str) -> list[str]:
    """A document's sentences, for hierarchical models: its non-empty lines when it has several (the
    movie reviews hold one sentence per line), else the pieces after each . ! or ? followed by a space."""
    lines = [line.strip() for line in document.splitlines() if line.strip()]
    if len(lines) > 1:
        return lines
    return [s for s in _SENTENCE_END.split(lines[0]) if s] if lines else []


def _text_files(path: Path) -> dict[PurePosixPath, bytes]:
    """The contents of the text files under ``path`` (a zip or a folder), by relative path, sorted."""
    def wanted(name: PurePosixPath) -> bool:
        return not name.name.startswith(".") and not name.name.upper().startswith("README")

    try:
        if path.is_dir():
            files = {PurePosixPath(p.relative_to(path).as_posix()): p for p in path.rglob("*") if p.is_file()}
            return {name: files[name].read_bytes() for name in sorted(files) if wanted(name)}
        with zipfile.ZipFile(path) as archive:
            names = [PurePosixPath(i.filename) for i in archive.infolist() if not i.is_dir()]
            return {name: archive.read(str(name)) for name in sorted(names) if wanted(name)}
    except (OSError, zipfile.BadZipFile) as e:
        raise DataError(f"cannot read labelled text from {path}: {e}; give a zip archive or a folder") from None


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")
