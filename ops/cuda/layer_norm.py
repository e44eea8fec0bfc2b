"""Layer normalization over the last axis, as PyTorch defines it: biased variance, eps inside the root.

  forward:  x^ = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps),  y = x^ * weight + bias
  backward: dx = rstd * (g^ - mean(g^) - x^ * mean(g^ * x^)),  g^ = g * weight
            dweight = sum over rows of g * x^,  dbias = sum over rows of g

The contract of ops/cpu/layer_norm.py. A block per row: the mean, the variance (a second pass over
x - mean, for accuracy) and the backward's two means are tree reductions in shared memory
(ops/cuda/reduce.py), over x - x[0] as on the CPU, so that a constant row's output is exactly bias, and a row
whose squares overflow is scaled by its largest deviation as on the CPU; the
backward recomputes mean and rstd instead of storing them. NaN, Inf, eps = 0 and an empty last axis behave
as on the CPU. The parameter gradients take the rows' mean and rstd from a first kernel, then a thread per
column sums over the rows (neighbouring threads read neighbouring columns; no atomics, so the sums are the
same on every run).
"""
import math

from ops._cuda import cuda, empty
from ops.cuda.elementwise import full
from ops.cuda.launch import ROW_THREADS, THREADS, blocks
from ops.cuda.layout import rows
from ops.cuda.reduce import block_max, block_sum


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis; weight, bias (D,) or None."""
    y, x_rows = empty(x.shape, x.dtype), rows(x)
    _layer_norm_rows[blocks(x_rows.shape[0], 1), ROW_THREADS](
        rows(y), x_rows, _param(weight, x, 1), _param(bias, x, 0), x.dtype.type(eps))
    return y


def layer_norm_backward(g, x, weight=None, eps=1e-5):
    """dx of layer_norm for the output gradient g."""
    dx, x_rows = empty(x.shape, x.dtype), rows(x)
    _layer_norm_backward_rows[blocks(x_rows.shape[0], 1), ROW_THREADS](
        rows(dx), rows(g), x_rows, _param(weight, x, 1), x.dtype.type(eps))
    return dx


def layer_norm_params_backward(g, x, eps=1e-5):
    """(2, D): the gradients of layer_norm's weight (row 0) and bias (row 1) for the output gradient g."""
    x_rows = rows(x)
    stats, out = empty((2, x_rows.shape[0]), x.dtype), empty((2, x_rows.shape[1]), x.dtype)
    _row_stats[blocks(x_rows.shape[0], 1), ROW_THREADS](stats, x_rows, x.dtype.type(eps))
    _params_backward_columns[blocks(x_rows.shape[1]), THREADS](out, rows(g), x_rows, stats)
    return out


def _param(p, x, default):
    """weight or bias, or a (D,) array filled with ``default`` when None."""
    return full(rows(x).shape[1:], default, x.dtype) if p is None else p


@cuda.jit(device=True)
def _mean_rstd(shared, x, eps):
    """Mean and 1 / sqrt(biased variance + eps) of the row x, computed by the whole block from x - x[0]."""
    n = x.dtype.type(x.size)
    shift = x[0] if x.size else x.dtype.type(0)
    s = x.dtype.type(0)
    for j in range(cuda.threadIdx.x, x.size, ROW_THREADS):
        s += x[j] - shift
    d = block_sum(shared, s) / n
    s = x.dtype.type(0)
    for j in range(cuda.threadIdx.x, x.size, ROW_THREADS):
        s += (x[j] - shift - d) * (x[j] - shift - d)
    var = block_sum(shared, s) / n
    if var == math.inf and math.isfinite(d):        # the same for the whole block: its barriers are safe
        return shift + d, _scaled_rstd(shared, x, shift + d, eps)
    return shift + d, x.dtype.type(1) / math.sqrt(var + eps)


@cuda.jit(device=True)
def _scaled_rstd(shared, x, mean, eps):
    """1 / sqrt(mean((x - mean)²) + eps) of a row whose squares overflow, as on the CPU: the deviations divided by
    the largest one, a, so that rstd = (1/a) / sqrt(mean(((x - mean)/a)²) + eps/a²)."""
    a = x.dtype.type(0)
    for j in range(cuda.threadIdx.x, x.size, ROW_THREADS):
        a = max(a, abs(x[j] - mean))
    scale = x.dtype.type(1) / block_max(shared, a)
    s = x.dtype.type(0)
    for j in range(cuda.threadIdx.x, x.size, ROW_THREADS):
        s += ((x[j] - mean) * scale) * ((x[j] - mean) * scale)
    return scale / math.sqrt(block_sum(shared, s) / x.dtype.type(x.size) + eps * scale * scale)


@cuda.jit
def _layer_norm_rows(y, x, weight, bias, eps):
    shared = cuda.shared.array(ROW_THREADS, x.dtype)
    for r in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        mean, rstd = _mean_rstd(shared, x[r], eps)
        for j in range(cuda.threadIdx.x, x.shape[1], ROW_THREADS):
            y[r, j] = (x[r, j] - mean) * rstd * weight[j] + bias[j]


@cuda.jit
def _layer_norm_backward_rows(dx, g, x, weight, eps):
    shared = cuda.shared.array(ROW_THREADS, x.dtype)
    n = x.dtype.type(x.shape[1])
    for r in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        mean, rstd = _mean_rstd(shared, x[r], eps)
        mean_g = x.dtype.type(0)
        mean_gx = x.dtype.type(0)
        for j in range(cuda.threadIdx.x, x.shape[1], ROW_THREADS):
            gw = g[r, j] * weight[j]
            mean_g += gw
            mean_gx += gw * (x[r, j] - mean) * rstd
        mean_g = block_sum(shared, mean_g) / n
        mean_gx = block_sum(shared, mean_gx) / n
        for j in range(cuda.threadIdx.x, x.shape[1], ROW_THREADS):
            dx[r, j] = rstd * (g[r, j] * weight[j] - mean_g - (x[r, j] - mean) * rstd * mean_gx)


@cuda.jit
def _row_stats(stats, x, eps):
    """stats[:, r] = the mean and rstd of row r"""
    shared = cuda.shared.array(ROW_THREADS, x.dtype)
    for r in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        mean, rstd = _mean_rstd(shared, x[r], eps)
        if cuda.threadIdx.x == 0:
            stats[0, r], stats[1, r] = mean, rstd


@cuda.jit
def _params_backward_columns(out, g, x, stats):
    """out[:, j] = (sum_r g[r, j] x^[r, j], sum_r g[r, j])"""
    for j in range(cuda.grid(1), x.shape[1], cuda.gridsize(1)):
        dweight = x.dtype.type(0)
        dbias = x.dtype.type(0)
        for r in range(x.shape[0]):
            dweight += g[r, j] * (x[r, j] - stats[0, r]) * stats[1, r]
            dbias += g[r, j]
        out[0, j], out[1, j] = dweight, dbias


KERNELS = {
    "layer_norm": layer_norm,
    "layer_norm_grad": layer_norm_backward,
    "layer_norm_params_grad": layer_norm_params_backward,
}
