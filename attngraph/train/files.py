"""Files written atomically: a temporary file beside the target, synced, renamed over it (``os.replace`` is
atomic), the folder synced; a crash, even ``kill -9``, leaves the old file or the new one, never a mix.

A temporary file is named ``.<target name>.<pid>.<random>.tmp``, so that the next write or read of the target
can delete those whose process has died (``remove_stale_temporaries``) and leave alone those being written.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_atomically(target: Path, write: Callable) -> None:
    """Call ``write(file)`` on a temporary file beside ``target`` (its folder created if need be), sync it, rename
    it to ``target`` and sync the folder. On any failure the temporary file is deleted and the error (an
    ``OSError`` for the file system's) is raised; ``target`` is as it was."""
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp")
    try:
        os.chmod(temporary, _mode_of(target))
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _sync_folder(target.parent)


def _mode_of(target: Path) -> int:
    """The permissions ``open(target, "wb")`` would leave: those of the file it replaces, else 0o666 less the
    umask (``mkstemp`` makes its file 0o600). The umask can only be read by setting it, so it is set back at once."""
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask


def remove_stale_temporaries(target: Path) -> None:
    """Delete the temporary files that saves of ``target`` left behind when their process died mid-save."""
    prefix = f".{target.name}."
    with contextlib.suppress(OSError):
        for entry in target.parent.iterdir():
            pid = entry.name.removeprefix(prefix).split(".")[0]
            ours = entry.name.startswith(prefix) and entry.name.endswith(".tmp") and pid.isdigit()
            if ours and not _running(int(pid)):
                entry.unlink(missing_ok=True)


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists. On Windows, assume not: it refuses to delete a file still open."""
    if os.name == "nt":
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:             # a process of another user
        return True
    except (OSError, OverflowError):
        return False
    return True


def _sync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX: Windows cannot open a folder)."""
    if os.name == "nt":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
