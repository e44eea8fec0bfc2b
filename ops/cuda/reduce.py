"""Sum, product, max, min and log-sum-exp over a set of axes, and the block-wide tree reductions that the row kernels
share.

As on the CPU (ops/cpu/reduce.py), x becomes a C-contiguous (A, K, N) array reduced over its middle axis: a
free reshape when the reduced axes are consecutive, otherwise a transposed copy that moves them last (N = 1).
- N == 1: a block per row; its ROW_THREADS threads stride over the row, then combine their partial results
  in shared memory, halving the active threads at each of log2(ROW_THREADS) steps (``block_sum``,
  ``block_max``).
- N > 1: a thread per output (a, n) loops over k; neighbouring threads read neighbouring n (coalesced).
Sums and products of floats accumulate in the input dtype, of bool and integers in int64, as on the CPU. Max and min
keep
the input dtype (bool and integers included) and propagate NaN. Log-sum-exp is m + log Σ exp(x - m) as on the
CPU, from these kernels and the elementwise ones, and so is the variance, Σ(x - mean)² / max(0, n - correction).
"""
import math

import numpy as np

from ops._cuda import cuda, device_function, empty
from ops.cuda.elementwise import KERNELS as EW
from ops.cuda.elementwise import astype, full
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


def _reduction(combine, start):
    """The block-wide reduction (``_block_reduction``) and the two kernels of a reduction by ``combine(a, b)``, a
    device function, of x (A, K, N) over K into out (A, N): ``rows`` for N == 1, a block per row of x taken as
    (A, K), and ``middle`` for N > 1, a thread per output. Each thread's partial result starts at
    ``start(x, index)``, given the index of the output's first input, (a, 0) or (a, 0, n): the identity of
    ``combine``, or that input where combining a value with itself gives it back (max; K >= 1)."""
    block = _block_reduction(combine)

    @cuda.jit
    def rows(out, x):
        """out[a, 0] from the x[a, k]"""
        shared = cuda.shared.array(ROW_THREADS, x.dtype)
        for a in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
            value = start(x, (a, 0))
            for k in range(cuda.threadIdx.x, x.shape[1], ROW_THREADS):
                value = combine(value, x[a, k])
            value = block(shared, value)
            if cuda.threadIdx.x == 0:
                out[a, 0] = value

    @cuda.jit
    def middle(out, x):
        """out[a, n] from the x[a, k, n]"""
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            a, n = divmod(i, out.shape[1])
            value = start(x, (a, 0, n))
            for k in range(x.shape[1]):
                value = combine(value, x[a, k, n])
            out[a, n] = value

    return block, rows, middle


block_sum, _sum_rows, _sum_middle = _reduction(device_function(lambda a, b: a + b),
                                               device_function(lambda x, index: x.dtype.type(0)))
_, _prod_rows, _prod_middle = _reduction(device_function(lambda a, b: a * b),
                                         device_function(lambda x, index: x.dtype.type(1)))
block_max, _max_rows, _max_middle = _reduction(device_function(lambda a, b: a if a >= b or a != a else b),
                                               device_function(lambda x, index: x[index]))
_, _min_rows, _min_middle = _reduction(device_function(lambda a, b: a if a <= b or a != a else b),
                                       device_function(lambda x, index: x[index]))


def sum(x, axes, keepdims):
    """Sum of x over ``axes`` (normalized, non-negative; () gives a copy); 0 over empty axes. Floats keep their
    dtype; bool and integers are summed in int64."""
    if x.dtype.kind != "f":
        x = astype(x, np.int64)
    return _reduce(_sum_rows, _sum_middle, *_as_reduction(x, axes, keepdims))


def prod(x, axes, keepdims):
    """Product of x over ``axes`` (normalized, non-negative; () gives a copy); 1 over empty axes. Floats keep their
    dtype; bool and integers are multiplied in int64."""
    if x.dtype.kind != "f":
        x = astype(x, np.int64)
    return _reduce(_prod_rows, _prod_middle, *_as_reduction(x, axes, keepdims))


def max(x, axes, keepdims):
    """Maximum of x over ``axes`` (normalized, non-negative; () gives a copy); NaN if any is NaN."""
    return _extremum("max", _max_rows, _max_middle, x, axes, keepdims)


def min(x, axes, keepdims):
    """Minimum of x over ``axes`` (normalized, non-negative; () gives a copy); NaN if any is NaN."""
    return _extremum("min", _min_rows, _min_middle, x, axes, keepdims)


def _extremum(name, rows, middle, x, axes, keepdims):
    x3, shape = _as_reduction(x, axes, keepdims)
    if x3.shape[1] == 0:
        raise ValueError(f"{name} over an empty axis: shape {tuple(x.shape)}, axes {tuple(axes)}")
    return _reduce(rows, middle, x3, shape)


def logsumexp(x, axes, keepdims):
    """log Σ exp(x) over ``axes`` of a floating-point x: m + log Σ exp(x - m), m the maximum (0 where it is not
    finite); -inf over empty axes."""
    zero = full((), 0, x.dtype)
    m = max(x, axes, True) if all(x.shape[a] for a in axes) else zero
    m = EW["where"](EW["less"](EW["abs"](m), full((), math.inf, x.dtype)), m, zero)
    out = EW["add"](EW["log"](sum(EW["exp"](EW["sub"](x, m)), axes, True)), m)
    return out if keepdims else out.reshape(tuple(n for i, n in enumerate(out.shape) if i not in axes))


def var(x, axes, correction, keepdims):
    """Σ(x - mean)² / max(0, n - correction) over ``axes`` of a floating-point x, as on the CPU."""
    n = math.prod(x.shape[a] for a in axes)
    deviation = EW["sub"](x, EW["div"](sum(x, axes, True), full((), n, x.dtype)))
    count = full((), n - correction if n > correction else 0, x.dtype)
    return EW["div"](sum(EW["mul"](deviation, deviation), axes, keepdims), count)


def _reduce(rows, middle, x3, shape):
    """x3 (A, K, N) reduced over K by a reduction's kernels (``_reduction``), as an array of ``shape``."""
    a, k, n = x3.shape
    out = empty((a, n), x3.dtype)
    if n == 1:
        rows[blocks(a, 1), ROW_THREADS](out, x3.reshape(a, k))
    else:
        middle[blocks(a * n), THREADS](out, x3)
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


KERNELS = {"sum": sum, "prod": prod, "max": max, "min": min, "logsumexp": logsumexp, "var": var}
