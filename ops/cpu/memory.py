"""Buffer reuse through the C allocator: freed arrays stay in the process for the next kernel's outputs.

A training step allocates and frees the same few hundred arrays every step. glibc's malloc gives an array above
its mmap threshold (128 KiB at first, raised up to 32 MiB as large blocks are freed) pages of its own, and
returns the top of its heap to the system once more than twice that threshold lies free there: the next step's
arrays then come from fresh pages, each zeroed by the kernel at its first write (a page fault). Measured on the
benchmarks' steps on one thread: 6,500 page faults per HAN step and 5,900 per small GPT step, and with the
settings below none, the HAN step going from 75 to 33 ms and the GPT step from 185 to 123 ms, the peak resident
memory unchanged (the memory kept is what the next step takes again).

``reuse_freed_memory()`` (called when ops.cpu is imported) sets, through ``mallopt``, an mmap threshold of 64 MiB
(arrays below it come from the heap, and their memory is reused when freed) and keeps up to 256 MiB free at the
top of the heap instead of trimming it. It leaves the allocator as it is where the process is not on glibc, where
the environment already tunes malloc (``MALLOC_*_`` variables, ``GLIBC_TUNABLES``, a preloaded allocator such
as jemalloc), or where ``ATTNGRAPH_MALLOC=system``.
"""
import ctypes
import ctypes.util
import os

MMAP_THRESHOLD = 64 * 2 ** 20
TOP_PAD = 256 * 2 ** 20
_M_TOP_PAD, _M_MMAP_THRESHOLD = -2, -3          # glibc's mallopt parameter numbers (malloc.h)


def reuse_freed_memory() -> bool:
    """Tune glibc's malloc as the module docstring says; True if it did."""
    if os.environ.get("ATTNGRAPH_MALLOC") == "system" or "LD_PRELOAD" in os.environ or "GLIBC_TUNABLES" in os.environ \
            or any(name.startswith("MALLOC_") and name.endswith("_") for name in os.environ):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):       # not glibc (macOS, Windows, musl without mallopt)
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TOP_PAD, TOP_PAD))
