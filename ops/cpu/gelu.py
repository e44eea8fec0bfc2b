"""GELU with an optional bias fused in, forward and backward: one vectorized pass over the rows.

  forward:   y = GELU(x + b)
  backward:  dx = g · GELU'(x + b)        (the caller sums dx over the rows for db)

b (D,) is added along the last axis (a Linear layer's bias; None: no bias). GELU is exact (x Φ(x)) or its
tanh approximation, as ``mathfn`` defines them (NaN gives NaN; beyond |x| = 10 or so, 0 or x and gradient 0
or 1). The loops need ``error_model="numpy"`` and fast-math flags to vectorize (the tanh has a division):
``mathfn.FASTMATH``, which keeps NaN and Inf. Both passes beat NumPy-ufunc loops, which do not vectorize
and would need another pass for a separate bias add.
"""
import numpy as np
from numba import prange

from ops.cpu import mathfn
from ops.cpu.layout import rows
from ops.cpu.threads import parallel_kernel


def gelu(x, bias=None, exact=False):
    """GELU(x + bias) with bias (D,) on the last axis, or None."""
    x = np.asarray(x)
    return _forward(rows(x), _bias(bias, x), exact).reshape(x.shape)


def gelu_backward(g, x, bias=None, exact=False):
    """dx = g · GELU'(x + bias) for the output gradient g (x's shape)."""
    x = np.asarray(x)
    return _backward(rows(g), rows(x), _bias(bias, x), exact).reshape(x.shape)


def _bias(bias, x):
    return np.zeros(x.shape[-1:] or 1, x.dtype) if bias is None else np.ascontiguousarray(bias, x.dtype)


@parallel_kernel(fastmath=mathfn.FASTMATH, error_model="numpy")
def _forward(x, b, exact):
    y = np.empty_like(x)
    for r in prange(x.shape[0]):
        if exact:
            for j in range(x.shape[1]):
                y[r, j] = mathfn.gelu_erf(x[r, j] + b[j])
        else:
            for j in range(x.shape[1]):
                y[r, j] = mathfn.gelu_tanh(x[r, j] + b[j])
    return y


@parallel_kernel(fastmath=mathfn.FASTMATH, error_model="numpy")
def _backward(g, x, b, exact):
    dx = np.empty_like(x)
    for r in prange(x.shape[0]):
        if exact:
            for j in range(x.shape[1]):
                dx[r, j] = g[r, j] * mathfn.gelu_erf_derivative(x[r, j] + b[j])
        else:
            for j in range(x.shape[1]):
                dx[r, j] = g[r, j] * mathfn.gelu_tanh_derivative(x[r, j] + b[j])
    return dx


KERNELS = {
    "gelu": lambda x, bias=None, *, approximate: gelu(x, bias, approximate == "none"),
    "gelu_grad": lambda g, x, bias=None, *, approximate: gelu_backward(g, x, bias, approximate == "none"),
}
