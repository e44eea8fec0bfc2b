"""Numba CPU kernels, one module per op family, each compiled lazily per dtype and rank (cache=True).

Numba keys its on-disk cache on the source file of each kernel, so it does not notice an edit of
mathfn.py, whose helpers are inlined into kernels of other files. On import, the cache of this package
is cleared when mathfn.py differs from the copy the cache was built with (a hash stamp beside the cache).
Caches elsewhere (NUMBA_CACHE_DIR) are not checked.
"""
import hashlib
from pathlib import Path


def _clear_cache_if_mathfn_changed():
    here = Path(__file__).parent
    cache, stamp_name = here / "__pycache__", "mathfn.sha256"
    try:
        digest = hashlib.sha256((here / "mathfn.py").read_bytes()).hexdigest()
        if (cache / stamp_name).is_file() and (cache / stamp_name).read_text() == digest:
            return
        for path in [*cache.glob("*.nbi"), *cache.glob("*.nbc")]:
            path.unlink(missing_ok=True)
        cache.mkdir(exist_ok=True)
        (cache / stamp_name).write_text(digest)
    except OSError:     # a read-only install: nothing to clear, nowhere to write
        pass


_clear_cache_if_mathfn_changed()
