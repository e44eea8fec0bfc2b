"""Elementwise primitives with NumPy broadcasting; each derivative is one line of graph ops.

Broadcasting is undone by autodiff (it sums a gradient back to its input's shape), so the rules below
are written as if every operand had the output's shape.
"""
import math

import numpy as np


from .. import tensor as F
from ..primitive import define, per_element
from ..dims import broadcast
from ._infer import comparison, elementwise, float_elementwise, logical, require_float, same_dtype


def unary_float(x):
    require_float(x)
    return x.shape, x.dtype


def gelu_derivative(x, approximate: str):
    """d/dx GELU(x) as graph ops: the gradient of ``gelu_grad`` with respect to its g (Hendrycks & Gimpel 2016)."""
    if approximate == "tanh":
        c, k = math.sqrt(2 / math.pi), 0.044715
        t = F.tanh(c * (x + k * x * x * x))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * k * x * x)
    return 0.5 * (1 + F.erf(x * (1 / math.sqrt(2)))) + x * F.exp(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi))


def gelu_second_derivative(x, approximate: str):
    """d²/dx² GELU(x) as graph ops. tanh form: with u = c(x + kx³), t = tanh u,
    (1 − t²)(u' + ½x(u'' − 2t u'²)), u' = c(1 + 3kx²), u'' = 6ckx; exact form: φ(x)(2 − x²)."""
    if approximate == "tanh":
        c, k = math.sqrt(2 / math.pi), 0.044715
        t = F.tanh(c * (x + k * x * x * x))
        du = c * (1 + 3 * k * x * x)
        return (1 - t * t) * (du + 0.5 * x * (6 * c * k * x - 2 * t * du * du))
    return F.exp(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi)) * (2 - x * x)


def gelu_rule(x, bias=None, *, approximate):
    """gelu(x[, bias]): GELU(x + bias) with bias a vector along x's last axis."""
    require_float(x)
    if bias is not None and bias.shape != x.shape[-1:]:
        raise ValueError(f"a bias must be a vector along x's last axis, of shape ({x.shape[-1]},)")
    return x.shape, same_dtype(x, *([] if bias is None else [bias]))


def gelu_grad_rule(g, x, bias=None, *, approximate):
    if g.shape != x.shape:
        raise ValueError("gelu_grad's gradient and input must have one shape")
    return gelu_rule(x, bias, approximate=approximate)[0], same_dtype(g, x)


def gelu_vjp(g, y, x, bias=None, *, approximate):
    dx = F.emit("gelu_grad", g, x, *([] if bias is None else [bias]), approximate=approximate)
    return dx, dx


def gelu_grad_vjp(gg, y, g, x, bias=None, *, approximate):
    z = x if bias is None else x + bias
    dz = gg * g * gelu_second_derivative(z, approximate)
    return gg * gelu_derivative(z, approximate), dz, dz


def larger_share(a, b):
    """0 where a < b, ½ where a = b, else 1: ``a``'s share of the gradient of maximum(a, b), and ``b``'s of
    minimum(a, b). As in PyTorch, ties split the gradient evenly and a NaN operand passes it to both."""
    return 1 - F.less(a, b).astype(a.dtype) - 0.5 * F.equal(a, b).astype(a.dtype)


def pow_vjp(g, y, a, b):
    """d/da aᵇ = b·aᵇ⁻¹, but 0 where b = 0; d/db aᵇ = aᵇ·ln a, but 0 where a = 0 and b ≥ 0: PyTorch's
    values where the formulas give 0·∞ (x⁰ at x = 0, 0ʸ). A negative base gives NaN for d/db, as there."""
    da = F.where(F.equal(b, 0.0), 0.0, g * b * a ** (b - 1))
    db = F.where(F.logical_and(F.equal(a, 0.0), F.greater_equal(b, 0.0)), 0.0, g * y * F.log(a))
    return da, db


def sign(x):
    """−1, 0 or 1 as x is negative, zero or positive; 0 at NaN: the derivative of |x| (0 at 0, as PyTorch)."""
    return F.greater(x, 0.0).astype(x.dtype) - F.less(x, 0.0).astype(x.dtype)


def silu_derivative(x):
    """d/dx x·σ(x) = σ(x)(1 + x(1 − σ(x)))."""
    s = F.sigmoid(x)
    return s * (1 + x * (1 - s))


def clip_vjp(g, y, x, lo, hi):
    """x takes g where lo ≤ x ≤ hi (not at NaN, as torch.clamp), the bounds where x lies beyond them."""
    inside = F.logical_and(F.greater_equal(x, lo), F.less_equal(x, hi))
    return F.where(inside, g, 0.0), F.where(F.less(x, lo), g, 0.0), F.where(F.greater(x, hi), g, 0.0)


def no_bool(rule, hint: str):
    """``rule`` refusing boolean inputs, as PyTorch does for ``-`` (``hint`` names the logical op to use)."""
    def checked(*nodes):
        if any(n.dtype == np.bool_ for n in nodes):
            raise TypeError(f"boolean tensors do not support this op; use {hint} instead")
        return rule(*nodes)
    return checked


def integer_elementwise(*nodes):
    """Broadcast shapes, one integer dtype (the functional API sends booleans to the logical ops)."""
    if any(n.dtype.kind not in "iu" for n in nodes):
        raise TypeError("bitwise ops take integer tensors (ag.logical_and, logical_or, not_equal and logical_not "
                        f"take booleans), not {' and '.join(sorted({str(n.dtype) for n in nodes}))}")
    return elementwise(*nodes)


def shift_rule(a, b):
    """Shifts compute in int64, so uint64, whose top bit int64 cannot hold, is refused."""
    if a.dtype == np.uint64:
        raise TypeError("shifts take integer tensors of up to 63 value bits; cast uint64 to int64")
    return integer_elementwise(a, b)


def bitcast_rule(x, dtype):
    """The shape kept; ``dtype`` must have x's itemsize (torch refuses the rest for tensors of any rank)."""
    if np.dtype(dtype).itemsize != x.dtype.itemsize:
        raise TypeError(f"bitcast reads {x.dtype}'s {x.dtype.itemsize}-byte elements as {dtype}, whose elements "
                        f"have {np.dtype(dtype).itemsize} bytes: bitcast needs dtypes of one itemsize")
    return x.shape, np.dtype(dtype)


def where_rule(cond, a, b):
    if cond.dtype != np.bool_:
        raise TypeError(f"where's condition must be boolean, not {cond.dtype}")
    return broadcast(cond.shape, a.shape, b.shape), same_dtype(a, b)


define("add", elementwise, elementwise=True, flops=per_element(1), vjp=lambda g, y, a, b: (g, g))
define("sub", no_bool(elementwise, "ag.not_equal(a, b) (exclusive or)"), elementwise=True,
       flops=per_element(1), vjp=lambda g, y, a, b: (g, -g))
define("mul", elementwise, elementwise=True, flops=per_element(1),
       vjp=lambda g, y, a, b: (g * b, g * a))
define("div", float_elementwise, elementwise=True, flops=per_element(1),
       vjp=lambda g, y, a, b: (g / b, -g * y / b))
define("pow", float_elementwise, elementwise=True, flops=per_element(10), vjp=pow_vjp)
define("maximum", elementwise, elementwise=True, flops=per_element(1),
       vjp=lambda g, y, a, b: (g * larger_share(a, b), g * larger_share(b, a)))
define("minimum", elementwise, elementwise=True, flops=per_element(1),
       vjp=lambda g, y, a, b: (g * larger_share(b, a), g * larger_share(a, b)))
define("neg", no_bool(lambda x: (x.shape, x.dtype), "ag.logical_not(x)"), elementwise=True,
       flops=per_element(1), vjp=lambda g, y, x: (-g,))
define("exp", unary_float, elementwise=True, flops=per_element(4), vjp=lambda g, y, x: (g * y,))
define("log", unary_float, elementwise=True, flops=per_element(4), vjp=lambda g, y, x: (g / x,))
define("sqrt", unary_float, elementwise=True, flops=per_element(1),
       vjp=lambda g, y, x: (g / (2 * y),))
define("tanh", unary_float, elementwise=True, flops=per_element(6),
       vjp=lambda g, y, x: (g * (1 - y * y),))
define("sigmoid", unary_float, elementwise=True, flops=per_element(6),
       vjp=lambda g, y, x: (g * y * (1 - y),))
define("relu", unary_float, elementwise=True, flops=per_element(1),
       vjp=lambda g, y, x: (F.where(F.less_equal(y, 0.0), 0.0, g),))      # NaN passes g on, as in PyTorch
define("softplus", float_elementwise, elementwise=True, flops=per_element(10),
       vjp=lambda g, y, x, beta, threshold: (F.where(x * beta > threshold, g, g * F.sigmoid(x * beta)), None, None),
       doc="softplus(x, beta, threshold): ln(1 + e^(βx)) / β, x where βx > threshold; β and the threshold 0-d")
define("abs", no_bool(lambda x: (x.shape, x.dtype), "x itself"), elementwise=True,
       flops=per_element(1), vjp=lambda g, y, x: (g * sign(x),))
define("sin", unary_float, elementwise=True, flops=per_element(10), vjp=lambda g, y, x: (g * F.cos(x),))
define("cos", unary_float, elementwise=True, flops=per_element(10),
       vjp=lambda g, y, x: (-g * F.sin(x),))
define("rsqrt", unary_float, elementwise=True, flops=per_element(2),
       vjp=lambda g, y, x: (g * -0.5 * y * y * y,))
define("silu", unary_float, elementwise=True, flops=per_element(7),
       vjp=lambda g, y, x: (g * silu_derivative(x),))
define("clip", elementwise, elementwise=True, flops=per_element(2), vjp=clip_vjp,
       doc="clip(x, lo, hi): min(max(x, lo), hi), the bounds 0-d constants of x's dtype")
define("erf", unary_float, elementwise=True, flops=per_element(10),
       vjp=lambda g, y, x: (g * (2 / math.sqrt(math.pi)) * F.exp(-x * x),))
define("gelu", gelu_rule, flops=per_element(10), vjp=gelu_vjp,
       doc="GELU(x + bias), the bias optional (the fusion pass moves a Linear layer's bias add in)")
define("gelu_grad", gelu_grad_rule, flops=per_element(14), vjp=gelu_grad_vjp,
       doc="g · GELU'(x + bias): GELU's backward in one pass (composed, it is 19 elementwise nodes)")
define("tan", unary_float, elementwise=True, flops=per_element(10), vjp=lambda g, y, x: (g * (1 + y * y),))
define("asin", unary_float, elementwise=True, flops=per_element(10),
       vjp=lambda g, y, x: (g * F.rsqrt(1 - x * x),))
define("acos", unary_float, elementwise=True, flops=per_element(10),
       vjp=lambda g, y, x: (-g * F.rsqrt(1 - x * x),))
define("atan", unary_float, elementwise=True, flops=per_element(10), vjp=lambda g, y, x: (g / (1 + x * x),))
define("atan2", float_elementwise, elementwise=True, flops=per_element(12),
       vjp=lambda g, y, a, b: (g * b / (a * a + b * b), -g * a / (a * a + b * b)))
define("sinh", unary_float, elementwise=True, flops=per_element(8), vjp=lambda g, y, x: (g * F.cosh(x),))
define("cosh", unary_float, elementwise=True, flops=per_element(8), vjp=lambda g, y, x: (g * F.sinh(x),))
define("asinh", unary_float, elementwise=True, flops=per_element(10),
       vjp=lambda g, y, x: (g * F.rsqrt(x * x + 1),))
define("acosh", unary_float, elementwise=True, flops=per_element(10),
       vjp=lambda g, y, x: (g * F.rsqrt(x * x - 1),))
define("atanh", unary_float, elementwise=True, flops=per_element(10), vjp=lambda g, y, x: (g / (1 - x * x),))
define("log2", unary_float, elementwise=True, flops=per_element(4),
       vjp=lambda g, y, x: (g / (x * math.log(2)),))
define("log10", unary_float, elementwise=True, flops=per_element(4),
       vjp=lambda g, y, x: (g / (x * math.log(10)),))
define("exp2", unary_float, elementwise=True, flops=per_element(4), vjp=lambda g, y, x: (g * y * math.log(2),))
define("expm1", unary_float, elementwise=True, flops=per_element(4), vjp=lambda g, y, x: (g * (y + 1),))
define("log1p", unary_float, elementwise=True, flops=per_element(4), vjp=lambda g, y, x: (g / (x + 1),))
define("logaddexp", float_elementwise, elementwise=True, flops=per_element(10),
       vjp=lambda g, y, a, b: (g / (1 + F.exp(b - a)), g / (1 + F.exp(a - b))))
define("copysign", float_elementwise, elementwise=True, flops=per_element(1),     # b's gradient is 0, as PyTorch's
       vjp=lambda g, y, a, b: (F.where(F.equal(a, 0.0), 0.0, g * y / a), F.zeros_like(b)))
for name in ("floor", "ceil", "round", "trunc"):     # piecewise constant: no gradient (PyTorch's is 0)
    define(name, unary_float, elementwise=True, flops=per_element(1), differentiable=False)
define("sign", no_bool(lambda x: (x.shape, x.dtype), "x itself"), elementwise=True, flops=per_element(1),
       differentiable=False)
for name in ("isnan", "isinf", "isfinite"):
    define(name, lambda x: (x.shape, np.dtype(bool)), elementwise=True, flops=per_element(1), differentiable=False)
define("floor_divide", no_bool(elementwise, "an integer dtype"), elementwise=True, flops=per_element(2),
       differentiable=False)      # piecewise constant: PyTorch implements no derivative
define("remainder", no_bool(elementwise, "an integer dtype"), elementwise=True, flops=per_element(2),
       vjp=lambda g, y, a, b: (g, -g * F.floor_divide(a, b)))
define("fmod", no_bool(elementwise, "an integer dtype"), elementwise=True, flops=per_element(2),
       vjp=lambda g, y, a, b: (g, -g * F.div(a, b, rounding_mode="trunc")))
for name in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"):
    define(name, integer_elementwise, elementwise=True, flops=per_element(1), differentiable=False)
for name in ("left_shift", "right_shift"):
    define(name, shift_rule, elementwise=True, flops=per_element(1), differentiable=False)
define("where", where_rule, elementwise=True, flops=per_element(1),
       vjp=lambda g, y, c, a, b: (None, F.where(c, g, 0.0), F.where(c, 0.0, g)))
define("astype", lambda x, dtype: (x.shape, np.dtype(dtype)), elementwise=True,
       vjp=lambda g, y, x, dtype: (g.astype(x.dtype) if x.dtype.kind == "f" else None,))
define("stop_gradient", lambda x: (x.shape, x.dtype), vjp=lambda g, y, x: (None,))
define("bitcast", bitcast_rule, differentiable=False,
       doc="bitcast(x, dtype): x's bits read as dtype, of x's itemsize (a view, as torch's Tensor.view(dtype))")

for name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
    define(name, comparison, flops=per_element(1), differentiable=False, elementwise=True)
for name in ("logical_and", "logical_or"):
    define(name, logical, differentiable=False, elementwise=True)
define("logical_not", logical, differentiable=False, elementwise=True)
