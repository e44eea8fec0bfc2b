"""Numba CPU kernels, one module per op family, compiled lazily per dtype and rank and cached on disk.

Numba keys its on-disk cache on each kernel's own source file, so it does not notice an edit of
mathfn.py, whose helpers are inlined into kernels of the other files. On import, this package's cache
(__pycache__) is cleared when mathfn.py differs from the copy it was built with, per a hash stamp kept
beside it. A cache elsewhere (NUMBA_CACHE_DIR) is not checked.

Importing the package also tunes the C allocator so that freed arrays are reused (``memory.py``).
"""
import hashlib
from pathlib import Path

from ops.cpu.memory import reuse_freed_memory


def _clear_cache_if_changed(package, helper="mathfn.py"):
    """Delete numba's cache files in package/__pycache__ unless the stamp there matches `helper`."""
    cache = package / "__pycache__"
    stamp = cache / f"{helper}.sha256"
    try:
        digest = hashlib.sha256((package / helper).read_bytes()).hexdigest()
        if stamp.is_file() and stamp.read_text() == digest:
            return
        for path in [*cache.glob("*.nbi"), *cache.glob("*.nbc")]:
            path.unlink(missing_ok=True)
        cache.mkdir(exist_ok=True)
        stamp.write_text(digest)
    except OSError:     # a read-only install, or no source: leave the cache alone
        pass


_clear_cache_if_changed(Path(__file__).parent)

reuse_freed_memory()
