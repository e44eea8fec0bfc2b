"""Embedding lookup and its gradient: rows of a table gathered by integer indices, and scattered back.

  gather:      out[..., :] = table[idx[...], :]
  scatter_add: out = zeros(num_rows, D);  out[idx[...], :] += g[..., :]  (repeated indices accumulate)

The contract of ops/cpu/embedding.py: an index outside [0, V) raises IndexError naming it. A first kernel
finds the first bad position (an atomic min over the positions), which is copied to the host, so each call
waits for its kernels once; the copying kernels then need no bounds checks. A thread per element: gather
reads table rows, scatter_add adds into the output with atomic adds, so repeated indices accumulate safely
(in an order that may differ from run to run: float sums may differ in the last bits).
"""
import numpy as np

from ops._cuda import cuda, empty, to_host
from ops.cuda.elementwise import full
from ops.cuda.launch import THREADS, blocks
from ops.cuda.layout import flat


def gather(table, idx):
    """table[idx] for table (V, D) and integer idx of any shape: (*idx.shape, D)."""
    positions = _checked(idx, table.shape[0])
    out = empty((positions.size, table.shape[1]), table.dtype)
    _gather_rows[blocks(out.size), THREADS](out, table, positions)
    return out.reshape(*idx.shape, table.shape[1])


def scatter_add(g, idx, num_rows):
    """(num_rows, D) zeros plus the rows of g (*idx.shape, D) added at idx."""
    positions = _checked(idx, num_rows)
    *_, d = g.shape
    out = full((num_rows, d), 0, g.dtype)
    _scatter_add_rows[blocks(positions.size * d), THREADS](out, g.reshape(positions.size, d), positions)
    return out


def _checked(idx, num_rows):
    """idx flattened, after checking that every index is in [0, num_rows)."""
    positions = flat(idx)
    bad = first_out_of_range(positions, num_rows)
    if bad is not None:
        raise IndexError(f"index {bad} is out of range for {num_rows} rows")
    return positions


def first_out_of_range(idx, n):
    """The first entry of the integer device array ``idx`` that is outside [0, n), copied to the host; None when
    all are in range."""
    positions = flat(idx)
    first = full((1,), positions.size, np.int64)
    _first_bad[blocks(positions.size), THREADS](first, positions, n)
    at = int(to_host(first)[0])
    return None if at == positions.size else to_host(positions[at:at + 1])[0]


@cuda.jit
def _first_bad(first, idx, num_rows):
    for i in range(cuda.grid(1), idx.size, cuda.gridsize(1)):
        if not 0 <= idx[i] < num_rows:
            cuda.atomic.min(first, 0, i)


@cuda.jit
def _gather_rows(out, table, idx):
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i, j = divmod(e, out.shape[1])
        out[i, j] = table[idx[i], j]


@cuda.jit
def _scatter_add_rows(out, g, idx):
    for e in range(cuda.grid(1), g.size, cuda.gridsize(1)):
        i, j = divmod(e, g.shape[1])
        cuda.atomic.add(out, (idx[i], j), g[i, j])


KERNELS = {"gather": gather, "scatter_add": scatter_add}
