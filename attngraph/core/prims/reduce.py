"""Reductions over axes: ``sum``, ``prod``, ``max``, ``min``, ``logsumexp``, ``var``, and ``size`` (the element count
that ``mean`` divides by, read at run time so that it holds for symbolic dimensions). Sums and products of bool and
integers are int64 (as torch.sum and torch.prod), 0 and 1 over an axis of size 0; max and min keep their input's
dtype and have no value over an axis of size 0 (as torch.amax and torch.amin); logsumexp takes floats and is -inf over an axis of size 0 (as torch.logsumexp)."""
from math import prod

import numpy as np


from .. import tensor as F
from ..primitive import define
from ._infer import require_float


def reduced_shape(x, axes, keepdims):
    for a in axes:
        if not 0 <= a < len(x.shape):
            raise ValueError(f"axis {a} is out of range for {len(x.shape)} dimensions")
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def sum_rule(x, axes, keepdims):
    return reduced_shape(x, axes, keepdims), x.dtype if x.dtype.kind == "f" else np.dtype(np.int64)


def prod_vjp(g, y, x, axes, keepdims):
    """∂/∂xᵢ Π x = Π_{j ≠ i} xⱼ: y / xᵢ where the reduction holds no zero; at its only zero the product of the others,
    and 0 at every element of a reduction with two zeros or more (as torch's prod_backward). Zeros are divided
    by 1 in the first form, so that no 0 / 0 reaches the gradient's own gradient."""
    zero = F.equal(x, 0)
    nonzero = F.where(zero, 1, x)
    lone_zero = F.equal(F.sum(zero, axes, keepdims=True), 1).astype(x.dtype)
    others = F.where(zero, F.prod(nonzero, axes, keepdims=True) * lone_zero, spread(y, x, axes, keepdims) / nonzero)
    return (spread(g, x, axes, keepdims) * others,)


def extremum_rule(name: str):
    """The shape rule of ``max`` or ``min`` (``name``), which have no value over an axis of size 0."""
    def rule(x, axes, keepdims):
        empty = [a for a in axes if x.shape[a] == 0]
        if empty:
            raise ValueError(f"{name} over axis {empty[0]}, of size 0, has no value; reduce over other axes")
        return reduced_shape(x, axes, keepdims), x.dtype
    return rule


def logsumexp_rule(x, axes, keepdims):
    require_float(x)
    return reduced_shape(x, axes, keepdims), x.dtype


def spread(g, x, axes, keepdims):
    """The gradient of a reduction, broadcast back over the reduced axes."""
    return F.broadcast_to(g if keepdims else F.reshape(g, reduced_shape(x, axes, True)), x.shape)


def extremum_vjp(g, y, x, axes, keepdims):
    """The maximum's (or minimum's) gradient goes to the elements equal to it, shared evenly between ties."""
    winners = F.equal(x, spread(y, x, axes, keepdims)).astype(x.dtype)
    return (winners * spread(g, x, axes, keepdims) / F.sum(winners, axes, keepdims=True),)


def logsumexp_vjp(g, y, x, axes, keepdims):
    """∂/∂x log Σ exp(x) = exp(x − y), the softmax over the reduced axes."""
    return (spread(g, x, axes, keepdims) * F.exp(x - spread(y, x, axes, keepdims)),)


def var_rule(x, axes, correction, keepdims):
    require_float(x)
    return reduced_shape(x, axes, keepdims), x.dtype


def var_vjp(g, y, x, axes, correction, keepdims):
    """∂/∂x Σ(x − μ)² / max(0, n − c) = 2(x − μ) / max(0, n − c): the term through μ, −2 Σ(x − μ) ∂μ/∂x, is 0 in
    exact arithmetic and left out as in torch's var_backward, so that a row holding inf has the gradient
    [−inf, NaN, −inf] of [1, inf, 2], not NaN throughout. μ stays differentiable here: second-order gradients
    keep the term's own derivative."""
    deviation = x - F.mean(x, axes, keepdims=True)
    count = F.maximum(F.emit("size", x, axes=axes, dtype=x.dtype) - correction, 0)
    return (spread(g, x, axes, keepdims) * (2 * deviation) / count,)


def reduce_flops(out, x, axes, keepdims):
    return prod(x)


define("sum", sum_rule, flops=reduce_flops,
       vjp=lambda g, y, x, axes, keepdims: (spread(g, x, axes, keepdims),))
define("prod", sum_rule, flops=reduce_flops, vjp=prod_vjp)
define("max", extremum_rule("max"), flops=reduce_flops,
       vjp=extremum_vjp)
define("min", extremum_rule("min"), flops=reduce_flops,
       vjp=extremum_vjp)
define("logsumexp", logsumexp_rule, flops=lambda out, x, axes, keepdims: 4 * prod(x), vjp=logsumexp_vjp)
define("var", var_rule, flops=lambda out, x, axes, correction, keepdims: 4 * prod(x), vjp=var_vjp)
define("size", lambda x, axes, dtype: ((), np.dtype(dtype)), differentiable=False, shape_only=True)
