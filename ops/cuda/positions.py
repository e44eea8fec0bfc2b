"""Integer position tensors and element counts, read from other tensors' run-time shapes.

  arange(x, axis)                    = [0, 1, ..., x.shape[axis] - 1]
  relative_distance(q, k, d)[i, j]   = clip(j - i, -d, d) + d   for query i and key j
  size(x, axes, dtype)               = the number of elements over ``axes`` (what ``mean`` divides by)

The twins of attngraph/core/prims/positions.py's NumPy kernels; a thread per element.
"""
import math

import numpy as np

from ops._cuda import cuda, empty
from ops.cuda.elementwise import full
from ops.cuda.launch import THREADS, blocks


def arange(x, axis):
    out = empty((x.shape[axis],), np.int64)
    _arange[blocks(out.size), THREADS](out)
    return out


def relative_distance(q, k, max_distance):
    (*_, tq, _), (*_, tk, _) = q.shape, k.shape
    out = empty((tq, tk), np.int64)
    _relative_distance[blocks(out.size), THREADS](out, max_distance)
    return out


def size(x, axes, dtype):
    return full((), math.prod(x.shape[a] for a in axes), dtype)


@cuda.jit
def _arange(out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = i


@cuda.jit
def _relative_distance(out, max_distance):
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i, j = divmod(e, out.shape[1])
        out[i, j] = min(max(j - i, -max_distance), max_distance) + max_distance


KERNELS = {"arange": arange, "relative_distance": relative_distance, "size": size}
