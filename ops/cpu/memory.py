"""Buffer reuse through the C allocator: freed arrays stay in the process for the next kernel's outputs.

A training step allocates and frees the same few hundred arrays every step. glibc's malloc gives an array above
its mmap threshold (128 KiB at first, raised up to 32 MiB as large blocks are freed) pages of its own, and
returns the top of its heap to the system once more than twice that threshold lies free there: the next step's
arrays then come from fresh pages, each zeroed by the kernel at its first write (a page fault). With the
settings below a step after the first takes no page faults, and the peak resident memory is unchanged (the
memory kept is what the next step takes again).

``reuse_freed_memory()`` (called when ops.cpu is imported) sets, through ``mallopt``, an mmap threshold of 64 MiB
(arrays below it come from the heap, and their memory is reused when freed) and keeps up to 256 MiB free at the
top of the heap instead of trimming it. It leaves the allocator as it is where the process is not on glibc, where
the environment already tunes malloc (``MALLOC_*_`` variables, ``GLIBC_TUNABLES``, a preloaded allocator such
as jemalloc), or where ``ATTNGRAPH_MALLOC=system``.
"""
import ctypes
import ctypes.util
import functools
import os

MMAP_THRESHOLD = 64 * 2 ** 20
TOP_PAD = 256 * 2 ** 20
M_TOP_PAD, M_MMAP_THRESHOLD = -2, -3            # glibc's mallopt parameter numbers (malloc.h)


@functools.cache
def glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc (it has mallopt and malloc_trim), else None (macOS, Windows, musl)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if all(hasattr(libc, name) for name in ("mallopt", "malloc_trim")) else None


def reuse_freed_memory() -> bool:
    """Tune glibc's malloc as the module docstring says; True if it did."""
    if os.environ.get("ATTNGRAPH_MALLOC") == "system" or "LD_PRELOAD" in os.environ or "GLIBC_TUNABLES" in os.environ \
            or any(name.startswith("MALLOC_") and name.endswith("_") for name in os.environ):
        return False
    libc = glibc()
    return libc is not None and bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) \
        and bool(libc.mallopt(M_TOP_PAD, TOP_PAD))
