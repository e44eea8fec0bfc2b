"""Embedding lookup and its gradient: rows of a table gathered by integer indices, and scattered back.

  gather:      out[..., :] = table[idx[...], :]
  scatter_add: out = zeros(num_rows, D);  out[idx[...], :] += g[..., :]  (repeated indices accumulate)

An index outside [0, V) raises IndexError (negative indices too: they are not Python-style wrapped);
the kernels report the last bad position and the Python wrappers raise. In scatter_add each thread owns
a range of output rows and scans all indices for its own, so no two threads add into the same row, and
each adds whole contiguous rows.
"""
import math

import numba
import numpy as np
from numba import njit, prange


def gather(table, idx):
    """table[idx] for table (V, D) and integer idx of any shape: (*idx.shape, D)."""
    table, flat = np.ascontiguousarray(table), _flat(idx)
    out, bad = _gather_rows(table, flat)
    _check(bad, flat, len(table))
    return out.reshape(*np.shape(idx), table.shape[1])


def scatter_add(g, idx, num_rows):
    """(num_rows, D) zeros plus the rows of g (*idx.shape, D) added at idx."""
    flat = _flat(idx)
    g = np.ascontiguousarray(g).reshape(len(flat), np.shape(g)[-1])
    out, bad = _scatter_add_rows(g, flat, num_rows, numba.get_num_threads())
    _check(bad, flat, num_rows)
    return out


def _flat(idx):
    return np.ascontiguousarray(idx, np.int64).reshape(math.prod(np.shape(idx)))


def _check(bad, flat, num_rows):
    if bad >= 0:
        raise IndexError(f"index {flat[bad]} is out of range for {num_rows} rows")


@njit(parallel=True, cache=True)
def _gather_rows(table, idx):
    """(table[idx], last position of a bad index or -1)"""
    out = np.empty((idx.size, table.shape[1]), table.dtype)
    bad = -1
    for i in prange(idx.size):
        if 0 <= idx[i] < table.shape[0]:
            for j in range(table.shape[1]):
                out[i, j] = table[idx[i], j]
        else:
            bad = max(bad, i)
    return out, bad


@njit(parallel=True, cache=True)
def _scatter_add_rows(g, idx, num_rows, threads):
    """(zeros(num_rows, D) with g[i] added at row idx[i], last position of a bad index or -1)"""
    out = np.zeros((num_rows, g.shape[1]), g.dtype)
    span = (num_rows + threads - 1) // threads
    bad = -1
    for t in prange(threads):
        lo, hi = t * span, min(t * span + span, num_rows)
        for i in range(idx.size):
            if lo <= idx[i] < hi:
                for j in range(g.shape[1]):
                    out[idx[i], j] += g[i, j]
            elif not 0 <= idx[i] < num_rows:
                bad = max(bad, i)
    return out, bad
