"""Elementwise primitives with NumPy broadcasting; each derivative is one line of graph ops.

Broadcasting is undone by autodiff (it sums a gradient back to its input's shape), so the rules below
are written as if every operand had the output's shape.
"""
import math

import numpy as np

from ops.cpu import elementwise as ew

from .. import functional as F
from ..primitive import define, per_element
from ..dims import broadcast
from ._infer import comparison, elementwise, float_elementwise, logical, require_float, same_dtype


def kernel(ufunc):
    """Numba ufuncs return NumPy scalars for 0-d operands; the executor wants arrays."""
    return lambda *xs: np.asarray(ufunc(*xs))


def unary_float(x):
    require_float(x)
    return x.shape, x.dtype


def gelu_derivative(x, approximate: str):
    """d/dx GELU(x), composed so that second derivatives come for free (Hendrycks & Gimpel 2016)."""
    if approximate == "tanh":
        c, k = math.sqrt(2 / math.pi), 0.044715
        t = F.tanh(c * (x + k * x * x * x))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * k * x * x)
    return 0.5 * (1 + F.erf(x * (1 / math.sqrt(2)))) + x * F.exp(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi))


def maximum_share(a, b):
    """Where ``a`` wins the maximum it takes the gradient; ties split it evenly (as PyTorch does)."""
    return F.greater(a, b).astype(a.dtype) + 0.5 * F.equal(a, b).astype(a.dtype)


def where_rule(cond, a, b):
    if cond.dtype != np.bool_:
        raise TypeError(f"where's condition must be boolean, not {cond.dtype}")
    return broadcast(cond.shape, a.shape, b.shape), same_dtype(a, b)


define("add", elementwise, cpu=kernel(ew.add), flops=per_element(1), vjp=lambda g, y, a, b: (g, g))
define("sub", elementwise, cpu=kernel(ew.sub), flops=per_element(1), vjp=lambda g, y, a, b: (g, -g))
define("mul", elementwise, cpu=kernel(ew.mul), flops=per_element(1), vjp=lambda g, y, a, b: (g * b, g * a))
define("div", float_elementwise, cpu=kernel(ew.div), flops=per_element(1),
       vjp=lambda g, y, a, b: (g / b, -g * y / b))
define("pow", float_elementwise, cpu=kernel(ew.pow), flops=per_element(10),
       vjp=lambda g, y, a, b: (g * b * a ** (b - 1), g * y * F.log(a)))
define("maximum", elementwise, cpu=kernel(ew.maximum), flops=per_element(1),
       vjp=lambda g, y, a, b: (g * maximum_share(a, b), g * maximum_share(b, a)))
define("neg", lambda x: (x.shape, x.dtype), cpu=kernel(ew.neg), flops=per_element(1),
       vjp=lambda g, y, x: (-g,))
define("exp", unary_float, cpu=kernel(ew.exp), flops=per_element(4), vjp=lambda g, y, x: (g * y,))
define("log", unary_float, cpu=kernel(ew.log), flops=per_element(4), vjp=lambda g, y, x: (g / x,))
define("sqrt", unary_float, cpu=kernel(ew.sqrt), flops=per_element(1), vjp=lambda g, y, x: (g / (2 * y),))
define("tanh", unary_float, cpu=kernel(ew.tanh), flops=per_element(6),
       vjp=lambda g, y, x: (g * (1 - y * y),))
define("sigmoid", unary_float, cpu=kernel(ew.sigmoid), flops=per_element(6),
       vjp=lambda g, y, x: (g * y * (1 - y),))
define("relu", unary_float, cpu=kernel(ew.relu), flops=per_element(1),
       vjp=lambda g, y, x: (F.where(F.greater(x, 0.0), g, 0.0),))
define("erf", unary_float, cpu=kernel(ew.erf), flops=per_element(10),
       vjp=lambda g, y, x: (g * (2 / math.sqrt(math.pi)) * F.exp(-x * x),))
define("gelu", lambda x, approximate: unary_float(x),
       cpu=lambda x, approximate: np.asarray((ew.gelu_tanh if approximate == "tanh" else ew.gelu_erf)(x)),
       flops=per_element(10), vjp=lambda g, y, x, approximate: (g * gelu_derivative(x, approximate),))
define("where", where_rule, cpu=kernel(ew.where), flops=per_element(1),
       vjp=lambda g, y, c, a, b: (None, F.where(c, g, 0.0), F.where(c, 0.0, g)))
define("astype", lambda x, dtype: (x.shape, np.dtype(dtype)), cpu=lambda x, dtype: x.astype(dtype),
       vjp=lambda g, y, x, dtype: (g.astype(x.dtype) if x.dtype.kind == "f" else None,))
define("stop_gradient", lambda x: (x.shape, x.dtype), cpu=lambda x: x, vjp=lambda g, y, x: (None,))

for name, ufunc in [("equal", ew.equal), ("not_equal", ew.not_equal), ("less", ew.less),
                    ("less_equal", ew.less_equal), ("greater", ew.greater), ("greater_equal", ew.greater_equal)]:
    define(name, comparison, cpu=kernel(ufunc), flops=per_element(1), differentiable=False)
for name, ufunc in [("logical_and", ew.logical_and), ("logical_or", ew.logical_or)]:
    define(name, logical, cpu=kernel(ufunc), differentiable=False)
define("logical_not", logical, cpu=kernel(ew.logical_not), differentiable=False)
