"""Matrix product with NumPy's batching rules, tiled in shared memory.

The contract of ops/cpu/matmul.py: op(a) is (..., M, K) and op(b) is (..., K, N), both at least 2-D, where
op(x) is x or, when its ``transpose_`` flag is set, x with its last two axes swapped; the batch dims broadcast
and the result is (..., M, N). When b is one matrix and a is not transposed, a's batch folds into its rows:
one product.

A block of TILE x TILE threads computes one TILE x TILE tile of one output matrix: for each of the
ceil(K / TILE) steps it loads a tile of op(a) and a tile of op(b) into shared memory (zeros past the edges, so
sizes need not divide TILE), waits for the whole block, and adds their product to each thread's accumulator:

  out[i, j] = sum over steps s of  sum_t  A_s[i, t] B_s[t, j],  A_s = op(a)[tile rows, s-th K tile], ...

Every element of a and b is read from global memory K/TILE times fewer than by a naive kernel. Operands are
read through strides (ops/cuda/layout.py): a transposed operand has its two strides swapped, and a broadcast
batch dim has stride 0, so neither is copied. The grid is (M tiles, N tiles, batch), each dimension capped
and strided over.
"""
import math

import numpy as np

from ops._cuda import cuda, empty
from ops.cuda.launch import TILE, blocks
from ops.cuda.layout import broadcast_strides, flat, offset


def matmul(a, b, transpose_a=False, transpose_b=False):
    """op(a) @ op(b) for device arrays with op(a) (..., M, K) and op(b) (..., K, N)."""
    (*a_batch, a_rows, a_cols), (*b_batch, b_rows, b_cols) = a.shape, b.shape
    m, k = (a_cols, a_rows) if transpose_a else (a_rows, a_cols)
    n = b_rows if transpose_b else b_cols
    a_strides = (1, a_cols) if transpose_a else (a_cols, 1)         # of op(a)[i, t], in elements
    b_strides = (1, b_cols) if transpose_b else (b_cols, 1)
    if not b_batch and not transpose_a:                             # a's batch folds into its rows
        batch, rows, out_shape = (1,), math.prod(a_batch) * m, (*a_batch, m, n)
        a_batch_strides = b_batch_strides = (0,)
    else:
        batch = tuple(np.broadcast_shapes(tuple(a_batch), tuple(b_batch)))
        rows, out_shape = m, (*batch, m, n)
        batch = batch or (1,)                                       # kernels take at least one axis
        a_batch_strides = tuple(s * a_rows * a_cols for s in broadcast_strides(a_batch, batch))
        b_batch_strides = tuple(s * b_rows * b_cols for s in broadcast_strides(b_batch, batch))
    out = empty((math.prod(batch), rows, n), a.dtype)
    grid = (blocks(rows, TILE), blocks(n, TILE), blocks(out.shape[0], 1))
    _matmul_tiles[grid, (TILE, TILE)](out, flat(a), flat(b), k, batch, a_batch_strides, a_strides, b_batch_strides,
                                      b_strides)
    return out.reshape(out_shape)


@cuda.jit
def _matmul_tiles(out, a, b, k, batch, a_batch_strides, a_strides, b_batch_strides, b_strides):
    a_tile = cuda.shared.array((TILE, TILE), a.dtype)
    b_tile = cuda.shared.array((TILE, TILE), a.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y       # tx walks the columns: neighbours write neighbours
    count, m, n = out.shape
    zero = a.dtype.type(0)
    for z in range(cuda.blockIdx.z, count, cuda.gridDim.z):
        za, zb = offset(z, batch, a_batch_strides), offset(z, batch, b_batch_strides)
        for i0 in range(cuda.blockIdx.x * TILE, m, cuda.gridDim.x * TILE):
            for j0 in range(cuda.blockIdx.y * TILE, n, cuda.gridDim.y * TILE):
                i, j = i0 + ty, j0 + tx
                acc = zero
                for k0 in range(0, k, TILE):
                    ka, kb = k0 + tx, k0 + ty
                    a_tile[ty, tx] = a[za + i * a_strides[0] + ka * a_strides[1]] if i < m and ka < k else zero
                    b_tile[ty, tx] = b[zb + kb * b_strides[0] + j * b_strides[1]] if kb < k and j < n else zero
                    cuda.syncthreads()
                    for t in range(TILE):
                        acc += a_tile[ty, t] * b_tile[t, tx]
                    cuda.syncthreads()
                if i < m and j < n:
                    out[z, i, j] = acc


KERNELS = {"matmul": matmul}
