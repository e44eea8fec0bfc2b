"""Sum and max over a set of axes, and the block-wide tree reductions that the row kernels share.

As on the CPU (ops/cpu/reduce.py), x becomes a C-contiguous (A, K, N) array reduced over its middle axis: a
free reshape when the reduced axes are consecutive, otherwise a transposed copy that moves them last (N = 1).
- N == 1: a block per row; its ROW_THREADS threads stride over the row, then combine their partial results
  in shared memory, halving the active threads at each of log2(ROW_THREADS) steps (``block_sum``,
  ``block_max``).
- N > 1: a thread per output (a, n) loops over k; neighbouring threads read neighbouring n (coalesced).
Sums accumulate in the input dtype, as on the CPU. Max propagates NaN (ops/cpu/mathfn.py's maximum).
"""
import math

from ops._cuda import cuda, device_function, empty
from ops.cuda import mathfn
from ops.cuda.launch import ROW_THREADS, THREADS, blocks
from ops.cuda.movement import transpose


def _block_reduction(combine):
    """A device function combining one value from each thread of a block of ROW_THREADS threads; every thread
    gets the result. ``shared`` is a shared array of ROW_THREADS elements, free again when it returns."""
    @cuda.jit(device=True)
    def reduce(shared, value):
        t = cuda.threadIdx.x
        shared[t] = value
        cuda.syncthreads()
        step = ROW_THREADS // 2
        while step > 0:
            if t < step:
                shared[t] = combine(shared[t], shared[t + step])
            cuda.syncthreads()
            step //= 2
        result = shared[0]
        cuda.syncthreads()
        return result
    return reduce


block_sum = _block_reduction(device_function(lambda a, b: a + b))
block_max = _block_reduction(mathfn.maximum)


def sum(x, axes, keepdims):
    """Sum of x over ``axes`` (normalized, non-negative; () gives a copy); 0 over empty axes."""
    x3, shape = _as_reduction(x, axes, keepdims)
    a, k, n = x3.shape
    out = empty((a, n), x.dtype)
    if n == 1:
        _sum_rows[blocks(a, 1), ROW_THREADS](out, x3.reshape(a, k))
    else:
        _sum_middle[blocks(a * n), THREADS](out, x3)
    return out.reshape(shape)


def max(x, axes, keepdims):
    """Maximum of x over ``axes`` (normalized, non-negative; () gives a copy); NaN if any is NaN."""
    x3, shape = _as_reduction(x, axes, keepdims)
    a, k, n = x3.shape
    if k == 0:
        raise ValueError(f"max over an empty axis: shape {tuple(x.shape)}, axes {tuple(axes)}")
    out = empty((a, n), x.dtype)
    if n == 1:
        _max_rows[blocks(a, 1), ROW_THREADS](out, x3.reshape(a, k))
    else:
        _max_middle[blocks(a * n), THREADS](out, x3)
    return out.reshape(shape)


def _as_reduction(x, axes, keepdims):
    """x as a C-contiguous (A, K, N) device array to reduce over K, and the shape of the result."""
    axes = sorted(axes)
    kept = [i for i in range(len(x.shape)) if i not in axes]
    shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape)) if keepdims \
        else tuple(x.shape[i] for i in kept)
    first = axes[0] if axes else len(x.shape)
    if axes != list(range(first, first + len(axes))):
        x = transpose(x, kept + axes)
        first = len(kept)
    last = first + len(axes)
    return x.reshape(math.prod(x.shape[:first]), math.prod(x.shape[first:last]), math.prod(x.shape[last:])), shape


@cuda.jit
def _sum_rows(out, x):
    """out[a, 0] = sum_k x[a, k]"""
    shared = cuda.shared.array(ROW_THREADS, x.dtype)
    for a in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        s = x.dtype.type(0)
        for k in range(cuda.threadIdx.x, x.shape[1], ROW_THREADS):
            s += x[a, k]
        s = block_sum(shared, s)
        if cuda.threadIdx.x == 0:
            out[a, 0] = s


@cuda.jit
def _max_rows(out, x):
    """out[a, 0] = max_k x[a, k] for K >= 1"""
    shared = cuda.shared.array(ROW_THREADS, x.dtype)
    for a in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        m = x[a, 0]
        for k in range(cuda.threadIdx.x, x.shape[1], ROW_THREADS):
            m = mathfn.maximum(m, x[a, k])
        m = block_max(shared, m)
        if cuda.threadIdx.x == 0:
            out[a, 0] = m


@cuda.jit
def _sum_middle(out, x):
    """out[a, n] = sum_k x[a, k, n]"""
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        a, n = divmod(i, out.shape[1])
        s = x.dtype.type(0)
        for k in range(x.shape[1]):
            s += x[a, k, n]
        out[a, n] = s


@cuda.jit
def _max_middle(out, x):
    """out[a, n] = max_k x[a, k, n] for K >= 1"""
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        a, n = divmod(i, out.shape[1])
        m = x[a, 0, n]
        for k in range(1, x.shape[1]):
            m = mathfn.maximum(m, x[a, k, n])
        out[a, n] = m

