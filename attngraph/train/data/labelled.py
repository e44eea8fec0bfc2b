"""Labelled text for sentence and document classification, from a zip archive or a folder.

Two layouts are read, told apart by where the text files lie (README*, hidden files and __MACOSX are
skipped):

- every file in one folder: each file is a class named by its extension (``rt-polarity.pos`` → "pos";
  a ``.txt`` file by its stem, ``pos.txt`` → "pos") and each non-empty line is an example — the MR
  sentence-polarity corpus (Pang & Lee 2005);
- files in several folders: each folder is a class and each file an example, a document — the
  movie-review polarity corpus v2.0 (Pang & Lee 2004), one sentence per line.

Files are decoded as UTF-8 (a BOM is dropped), or as Latin-1 when they are not valid UTF-8 (rt-polarity is
Latin-1). What cannot be a corpus raises ``DataError`` naming the file: a binary file (a NUL byte: also UTF-16),
a file beside the class folders, two class folders of one name, an empty class folder or document, a class
file without a non-empty line, a single class, an encrypted, truncated or corrupt zip archive.

    data = read_labelled_text("../shared/data/sentence_polarity.zip")
    train, test = data.split(heldout=0.1, seed=0)
    vocab = Vocabulary.build((tokenize(t) for t in train.texts), min_count=2)
    ids, mask = pad_sequences([vocab.encode(tokenize(t)) for t in train.texts[:32]])
"""
from __future__ import annotations

import re
import zipfile
import zlib
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

    def __post_init__(self):
        self.labels = np.asarray(self.labels)
        if self.labels.shape != (len(self.texts),) or self.labels.dtype.kind not in "iu":
            raise DataError(f"{len(self.texts)} texts need as many integer labels, got an array of "
                            f"{self.labels.dtype} of shape {self.labels.shape}")
        if len(self.labels) and not 0 <= self.labels.min() <= self.labels.max() < len(self.classes):
            raise DataError(f"labels must index the {len(self.classes)} classes, got labels from "
                            f"{self.labels.min()} to {self.labels.max()}")

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, indices) -> "LabelledText":
        return LabelledText([self.texts[i] for i in indices], self.labels[indices], self.classes)

    def split(self, heldout: float = 0.1, seed: int = 0) -> tuple["LabelledText", "LabelledText"]:
        """A seeded random split: (train, held-out), the held-out part ``round(heldout · n)`` examples, 0 <
        ``heldout`` < 1; neither part may be empty."""
        if not 0 < heldout < 1:
            raise DataError(f"the held-out fraction must lie strictly between 0 and 1, got {heldout}")
        cut = len(self) - round(heldout * len(self))
        if not 0 < cut < len(self):
            raise DataError(f"holding out {heldout} of {len(self)} examples leaves a part empty; give more examples")
        order = np.random.default_rng(seed).permutation(len(self))
        return self.subset(np.sort(order[:cut])), self.subset(np.sort(order[cut:]))


def read_labelled_text(path) -> LabelledText:
    """The labelled examples of the zip archive or folder at ``path`` (layouts in the module docstring)."""
    files, folders = _text_files(Path(path))
    if not files:
        raise DataError(f"{path} holds no text files")
    texts = {name: _decode(path, name, data) for name, data in files.items()}
    if len({name.parent for name in files}) > 1:
        _check_class_folders(path, files, folders)
        named = [(name.parent.name, [text]) for name, text in texts.items()]
    else:
        named = [(name.stem if name.suffix in ("", ".txt") else name.suffix[1:],
                  [line.strip() for line in text.splitlines() if line.strip()]) for name, text in texts.items()]
    for name, (_, examples) in zip(texts, named):
        if not any(text.strip() for text in examples):
            raise DataError(f"{path}: {name} holds no text; remove it or fill it")
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


def _check_class_folders(path, files, folders: set[PurePosixPath]) -> None:
    """Raise ``DataError`` unless the folders holding ``files`` are class folders: no file lies in a folder
    above another one's, no two have one name, and no folder beside them is empty (an empty class)."""
    classes = {name.parent for name in files}
    for name in files:
        if any(name.parent in other.parents for other in classes):
            raise DataError(f"{path}: {name} lies beside the class folders, not in one; move it away (or name "
                            "it README)")
    by_name = {}
    for folder in sorted(classes):
        first = by_name.setdefault(folder.name, folder)
        if first != folder:
            raise DataError(f"{path}: two class folders are named {folder.name!r} ({first}, {folder}); give the "
                            "folder that holds one set of class folders")
    parents = {folder.parent for folder in classes}
    for folder in sorted(folders - classes):
        if folder.parent in parents and not any(folder in c.parents for c in classes):
            raise DataError(f"{path}: the class folder {folder} holds no text files")


def _text_files(path: Path) -> tuple[dict[PurePosixPath, bytes], set[PurePosixPath]]:
    """The contents of the text files under ``path`` (a zip or a folder), by relative path, sorted, and the
    folders there (hidden ones and __MACOSX left out)."""
    def wanted(name: PurePosixPath) -> bool:
        return not any(part.startswith(".") or part == "__MACOSX" for part in name.parts) \
            and not name.name.upper().startswith("README")

    try:
        if path.is_dir():
            entries = {PurePosixPath(p.relative_to(path).as_posix()): p for p in path.rglob("*")}
            folders = {name for name, p in entries.items() if p.is_dir() and wanted(name)}
            return {name: p.read_bytes() for name, p in sorted(entries.items())
                    if p.is_file() and wanted(name)}, folders
        with zipfile.ZipFile(path) as archive:
            infos = [i for i in archive.infolist() if wanted(PurePosixPath(i.filename))]
            encrypted = [i.filename for i in infos if i.flag_bits & 0x1]
            if encrypted:
                raise DataError(f"{path} is encrypted ({encrypted[0]}); extract it with its password and give "
                                "the folder")
            folders = {PurePosixPath(i.filename) for i in infos if i.is_dir()}
            return {PurePosixPath(i.filename): archive.read(i) for i in sorted(infos, key=lambda i: i.filename)
                    if not i.is_dir()}, folders
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError) as e:
        raise DataError(f"cannot read labelled text from {path}: {e}; give a zip archive or a folder") from None


def _decode(path, name: PurePosixPath, data: bytes) -> str:
    """``data`` as UTF-8, else Latin-1; a NUL byte marks a binary (or UTF-16) file: ``DataError``."""
    if b"\0" in data:
        raise DataError(f"{path}: {name} is not a text file (it holds NUL bytes; UTF-16 text has them too: "
                        "save it as UTF-8)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")
