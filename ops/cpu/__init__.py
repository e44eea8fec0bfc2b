"""Numba CPU kernels, one module per op family, compiled lazily per dtype and rank and cached on disk.

Numba keys its on-disk cache on each kernel's own source file, so it does not notice an edit of a helper in
another file that a kernel inlines: mathfn.py's functions in every kernel, recurrence.py's ``bmm`` and
matmul.py's ``dot_into`` in the generated time loops, softmax's and reduce's row kernels in them too. On import,
this package's cache (__pycache__, the generated kernels' folder in it included) is cleared when any of its
sources differs from those it was built with, per a hash stamp kept beside it. A cache elsewhere
(NUMBA_CACHE_DIR, ATTNGRAPH_KERNELS) is not checked.

Importing the package also tunes the C allocator so that freed arrays are reused (``memory.py``) and loads SciPy's
BLAS for numba without the rest of ``scipy.linalg`` (``scipy_blas.py``); numba compiles loops to the CPU's full vector
width (``vectors.py``).
"""
import hashlib
from pathlib import Path

from ops.cpu import scipy_blas, vectors
from ops.cpu.memory import reuse_freed_memory


def _clear_cache_if_changed(package):
    """Delete numba's cache files under package/__pycache__ unless the stamp there matches the package's sources."""
    cache = package / "__pycache__"
    stamp = cache / "sources.sha256"
    try:
        digest = hashlib.sha256()
        for source in sorted(package.glob("*.py")):
            digest.update(source.name.encode() + b"\0" + source.read_bytes())
        digest = digest.hexdigest()
        if stamp.is_file() and stamp.read_text() == digest:
            return
        for path in [*cache.rglob("*.nbi"), *cache.rglob("*.nbc")]:
            path.unlink(missing_ok=True)
        cache.mkdir(exist_ok=True)
        stamp.write_text(digest)
    except OSError:     # a read-only install, or no source: leave the cache alone
        pass


_clear_cache_if_changed(Path(__file__).parent)

reuse_freed_memory()
scipy_blas.load()
vectors.use_full_width()
