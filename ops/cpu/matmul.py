"""Matrix product with NumPy's batching rules, through BLAS (np.dot inside numba, needs SciPy).

a is (..., M, K) and b is (..., K, N), both at least 2-D; the batch dims broadcast and the result is
(..., M, N). When b is one matrix, a's batch folds into its rows: one large BLAS call. Otherwise the
products a[ia[i]] @ b[ib[i]] of the flattened batch go into out[i]; the index arrays implement
broadcasting without copying a or b. np.dot always writes into `out`: returning np.dot's result into
out[i] compiles 10x slower.

Threads: OpenBLAS (SciPy's, which numba calls) runs a product of M*K*N <= 2**18 on one thread and
larger ones on all cores; called from numba's threads it oversubscribes them (64x(128x64 @ 64x128):
9.5 ms against 1.5 ms serially). So numba's threads take the batch only for small products
(32x(64x64 @ 64x64): 0.06 ms, NumPy 0.12 ms); larger ones run one after the other, each on BLAS's threads.
"""
import math

import numpy as np
from numba import njit, prange

from ops.cpu.threads import parallel_kernel

_BLAS_SERIAL_MAX = 2 ** 18     # OpenBLAS's threshold (SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD)


def matmul(a, b):
    """a @ b for a (..., M, K) and b (..., K, N)."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    (m, k), n = a.shape[-2:], b.shape[-1]
    if b.ndim == 2:
        return _matmul_2d(a.reshape(math.prod(a.shape[:-1]), k), b).reshape(*a.shape[:-1], n)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    out = _matmul_batched(a.reshape(math.prod(a.shape[:-2]), m, k), b.reshape(math.prod(b.shape[:-2]), k, n),
                          _batch_index(a.shape[:-2], batch), _batch_index(b.shape[:-2], batch),
                          m * k * n <= _BLAS_SERIAL_MAX)
    return out.reshape(*batch, m, n)


def _batch_index(shape, batch):
    """For every position of the broadcast batch, the flat index of the matrix taken from `shape`."""
    return np.broadcast_to(np.arange(math.prod(shape)).reshape(shape), batch).ravel()


@njit(cache=True)
def _matmul_2d(a, b):
    """a @ b for 2-D a and b; BLAS uses its own threads"""
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    np.dot(a, b, out)
    return out


@parallel_kernel
def _matmul_batched(a, b, ia, ib, threaded):
    """out[i] = a[ia[i]] @ b[ib[i]], on numba's threads if `threaded`, else on BLAS's"""
    out = np.empty((ia.size, a.shape[1], b.shape[2]), a.dtype)
    if threaded:
        for i in prange(ia.size):
            np.dot(a[ia[i]], b[ib[i]], out[i])
    else:
        for i in range(ia.size):
            np.dot(a[ia[i]], b[ib[i]], out[i])
    return out
