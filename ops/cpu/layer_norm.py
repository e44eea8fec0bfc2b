"""Layer normalization over the last axis, as PyTorch defines it: biased variance, eps inside the root.

  forward:  x^ = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps),  y = x^ * weight + bias
  backward: dx = rstd * (g^ - mean(g^) - x^ * mean(g^ * x^)),  g^ = g * weight
            dweight = sum over rows of g * x^,  dbias = sum over rows of g

The backward recomputes mean and rstd from x (one pass over a row) instead of storing them. Threads
share out the rows; the row reductions use fastmath flags so that they vectorize (``mathfn.FASTMATH``,
which keeps NaN and Inf), and the variance takes a second pass over (x - mean) for accuracy. Both passes
work on x - x[0], so that a constant row has its mean exactly and its output is exactly bias. A finite row
whose squared deviations overflow the dtype (float32 [3e19, -3e19, 1, 1]: var = 4.5e38) takes a third pass,
scaled by the largest deviation a: rstd = (1/a) / sqrt(mean((dev/a)²) + eps/a²), finite as PyTorch's. The
parameter gradients take one pass over g and x, each thread summing a block of rows, rather than
recomputing x^ as a layer norm, multiplying by g and summing twice.

NaN and Inf, as in PyTorch: a NaN or Inf in a row makes that row's output and dx NaN, and dweight NaN (a
sum over the rows); eps = 0 on a constant row gives 0 · inf = NaN; a last axis of size 0 gives empty
results. Divisions follow IEEE (``error_model="numpy"``): no exception from inside a kernel.
"""
import numba
import numpy as np
from numba import njit, prange

from ops.cpu import mathfn
from ops.cpu.layout import rows
from ops.cpu.threads import parallel_kernel


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis; weight, bias (D,) or None."""
    x = np.asarray(x)
    y = _layer_norm_rows(rows(x), _param(weight, x, 1), _param(bias, x, 0), x.dtype.type(eps))
    return y.reshape(x.shape)


def layer_norm_backward(g, x, weight=None, eps=1e-5):
    """dx of layer_norm for the output gradient g."""
    x = np.asarray(x)
    dx = _layer_norm_backward_rows(rows(g), rows(x), _param(weight, x, 1), x.dtype.type(eps))
    return dx.reshape(x.shape)


def layer_norm_params_backward(g, x, eps=1e-5):
    """(2, D): the gradients of layer_norm's weight (row 0) and bias (row 1) for the output gradient g."""
    x = np.asarray(x)
    return _layer_norm_params_backward_rows(rows(g), rows(x), x.dtype.type(eps), numba.get_num_threads())


def _param(p, x, default):
    """weight or bias as a contiguous (D,) array of x's dtype, filled with `default` when None."""
    return np.full(x.shape[-1], default, x.dtype) if p is None else np.ascontiguousarray(p, x.dtype)


@njit(fastmath=mathfn.FASTMATH, error_model="numpy", cache=True)
def _mean_rstd(x, eps):
    """Mean and 1 / sqrt(biased variance + eps) of the 1-D array x, summing x - x[0]: the mean of a constant
    row is then exactly its value, where a float32 sum of the row itself is off by rounding that rstd
    magnifies (1023 values of −31.06 normalized to 6e-3, not 0)."""
    zero = x.dtype.type(0)
    n = x.dtype.type(x.size)
    shift = x[0] if x.size else zero
    d = zero
    for j in range(x.size):
        d += x[j] - shift
    d /= n
    var = zero
    for j in range(x.size):
        var += (x[j] - shift - d) * (x[j] - shift - d)
    if var == np.inf and np.isfinite(d):    # finite deviations whose squares overflow: rare, so a branch
        return shift + d, _scaled_rstd(x, shift + d, eps)
    return shift + d, x.dtype.type(1) / np.sqrt(var / n + eps)


@njit(fastmath=mathfn.FASTMATH, error_model="numpy", cache=True)
def _scaled_rstd(x, mean, eps):
    """1 / sqrt(mean((x - mean)²) + eps) of a row whose squares overflow: the deviations divided by the largest
    one, a, first, so that rstd = (1/a) / sqrt(mean(((x - mean)/a)²) + eps/a²)."""
    a = x.dtype.type(0)
    for j in range(x.size):
        a = max(a, abs(x[j] - mean))
    scale = x.dtype.type(1) / a
    s = x.dtype.type(0)
    for j in range(x.size):
        s += ((x[j] - mean) * scale) * ((x[j] - mean) * scale)
    return scale / np.sqrt(s / x.dtype.type(x.size) + eps * scale * scale)


@parallel_kernel(fastmath=mathfn.FASTMATH, error_model="numpy")
def _layer_norm_rows(x, weight, bias, eps):
    y = np.empty_like(x)
    for r in prange(x.shape[0]):
        mean, rstd = _mean_rstd(x[r], eps)
        for j in range(x.shape[1]):
            y[r, j] = (x[r, j] - mean) * rstd * weight[j] + bias[j]
    return y


@parallel_kernel(fastmath=mathfn.FASTMATH, error_model="numpy")
def _layer_norm_backward_rows(g, x, weight, eps):
    dx = np.empty_like(x)
    n = x.dtype.type(x.shape[1])
    for r in prange(x.shape[0]):
        mean, rstd = _mean_rstd(x[r], eps)
        mean_g = x.dtype.type(0)
        mean_gx = x.dtype.type(0)
        for j in range(x.shape[1]):
            gw = g[r, j] * weight[j]
            mean_g += gw
            mean_gx += gw * (x[r, j] - mean) * rstd
        mean_g /= n
        mean_gx /= n
        for j in range(x.shape[1]):
            dx[r, j] = rstd * (g[r, j] * weight[j] - mean_g - (x[r, j] - mean) * rstd * mean_gx)
    return dx


@parallel_kernel(fastmath=mathfn.FASTMATH, error_model="numpy")
def _layer_norm_params_backward_rows(g, x, eps, threads):
    """each thread sums a block of rows into its own partial (dweight, dbias); then the partials are added"""
    R, D = x.shape
    partial = np.zeros((threads, 2, D), x.dtype)
    span = (R + threads - 1) // threads
    for t in prange(threads):
        dweight, dbias = partial[t, 0], partial[t, 1]
        for r in range(t * span, min(t * span + span, R)):
            mean, rstd = _mean_rstd(x[r], eps)
            for j in range(D):
                dweight[j] += g[r, j] * (x[r, j] - mean) * rstd
                dbias[j] += g[r, j]
    for t in range(1, threads):
        for j in range(D):
            partial[0, 0, j] += partial[t, 0, j]
            partial[0, 1, j] += partial[t, 1, j]
    return partial[0].copy()


KERNELS = {
    "layer_norm": layer_norm,
    "layer_norm_grad": layer_norm_backward,
    "layer_norm_params_grad": layer_norm_params_backward,
}
