"""What the ``attngraph`` command and the demos share to read their arguments: a parser whose errors are one
line, the number types of their options, and the check of an output folder made before any work.

A bad argument exits with status 2 and one line on stderr, ``PROG: error: WHAT (see PROG --help)``; no
usage block, no traceback. This module is light (argparse only): every command imports it.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose usage errors print one line (sub-commands inherit the class)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def one_line(message: object) -> str:
    """``message`` as text on one line (a library error may span several)."""
    return " ".join(str(message).split())


def positive_int(text: str) -> int:
    """An integer >= 1, for counts and sizes."""
    return _integer(text, 1, "a positive integer")


def seed(text: str) -> int:
    """An integer >= 0, what ``numpy.random.default_rng`` takes."""
    return _integer(text, 0, "a non-negative integer seed")


def _integer(text: str, least: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def writable_folder(path: Path) -> Path:
    """``path`` as a folder that takes new files: created with its parents when missing. Raises
    ``argparse.ArgumentTypeError`` saying why when it is a file or cannot be written (a file is created and
    removed there to know: permission bits do not tell, e.g. for root or on a read-only mount)."""
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot write into {path}: {e.strerror or e}") from None
    return path
