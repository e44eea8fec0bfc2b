"""Launch geometry: threads per block, tile sizes and grid sizes of the CUDA kernels.

Every kernel loops over its work with a stride of the whole grid (elements, rows or tiles), so any grid
computes the same result and grids are capped instead of growing with the data. Under the simulator each
thread is a Python thread, slow to start, and each barrier is slow to pass, so blocks and grids are small
there; the tiles shrink too, so that tests on tiny arrays still cross tile boundaries. The kernels' code is the
same either way: only these compile-time constants differ.
"""
from ops._cuda import SIMULATOR

THREADS = 32 if SIMULATOR else 256          # threads per block of elementwise (grid-stride) kernels
ROW_THREADS = 8 if SIMULATOR else 128       # threads that reduce one row together: a power of two
TILE = 4 if SIMULATOR else 16               # matmul tiles are TILE x TILE, one thread per output element
ATTENTION_TILE = 4 if SIMULATOR else 16     # queries (or keys) per block of the fused attention kernels
HEAD_DIM_MAX = 128                          # the fused attention kernels keep rows of up to this many features
# The attention kernels hold two ATTENTION_TILE x HEAD_DIM_MAX tiles in shared memory: 32 KiB in float64,
# within the 48 KiB that a block may declare statically.
MAX_BLOCKS = 2 if SIMULATOR else 65535      # cap on each dimension of a grid


def blocks(count: int, per_block: int = THREADS) -> int:
    """Blocks for ``count`` items handled ``per_block`` at a time: at least 1, at most MAX_BLOCKS."""
    return max(1, min(-(-count // per_block), MAX_BLOCKS))
