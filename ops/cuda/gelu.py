"""GELU with an optional bias fused in, forward and backward: the contract of ops/cpu/gelu.py.

  forward:   y = GELU(x + b)
  backward:  dx = g · GELU'(x + b)        (the caller sums dx over the rows for db)

b (D,) is added along the last axis (None: no bias). GELU is exact (x Φ(x)) or its tanh approximation, as
ops/cpu/mathfn.py defines them and their derivatives, compiled for CUDA (ops/cuda/mathfn.py). One pass, a
thread per element, b broadcast without a copy (ops/cuda/elementwise.py).
"""
from ops.cuda import mathfn
from ops.cuda.elementwise import Elementwise, full

_FORWARD = {False: Elementwise(lambda x, b: mathfn.gelu_tanh(x + b)),
            True: Elementwise(lambda x, b: mathfn.gelu_erf(x + b))}
_BACKWARD = {False: Elementwise(lambda g, x, b: g * mathfn.gelu_tanh_derivative(x + b)),
             True: Elementwise(lambda g, x, b: g * mathfn.gelu_erf_derivative(x + b))}


def gelu(x, bias=None, exact=False):
    """GELU(x + bias) with bias (D,) on the last axis, or None."""
    return _FORWARD[exact](x, _bias(bias, x))


def gelu_backward(g, x, bias=None, exact=False):
    """dx = g · GELU'(x + bias) for the output gradient g (x's shape)."""
    return _BACKWARD[exact](g, x, _bias(bias, x))


def _bias(bias, x):
    return full((), 0, x.dtype) if bias is None else bias


KERNELS = {
    "gelu": lambda x, bias=None, *, approximate: gelu(x, bias, approximate == "none"),
    "gelu_grad": lambda g, x, bias=None, *, approximate: gelu_backward(g, x, bias, approximate == "none"),
}
