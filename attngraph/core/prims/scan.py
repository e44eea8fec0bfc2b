"""Running reductions along the last axis (``functional`` moves any other axis last): ``cumsum``, from the first
element or, ``reverse``, from the last; ``cumprod``; ``logcumsumexp``, either way; and ``cumarg``, the int64 index of
the running maximum (``largest``) or minimum, through which ``cummax`` and ``cummin`` gather their values (as
``sort`` gathers through ``argsort``: the values' gradient goes back to each one's position). Floats keep their
dtype; bool and integers are summed and multiplied in int64, as torch.cumsum and torch.cumprod."""
from math import prod

import numpy as np


from .. import tensor as F
from ..primitive import define
from ._infer import require_float


def scan_rule(x, **attrs):
    if not x.shape:
        raise ValueError("a running reduction takes at least one axis")
    return x.shape, x.dtype if x.dtype.kind == "f" else np.dtype(np.int64)


def logcumsumexp_rule(x, reverse):
    require_float(x)
    return scan_rule(x)


def cumarg_rule(x, largest):
    return scan_rule(x)[0], np.dtype(np.int64)


def suffix_sums(g):
    """Σ_{j ≥ i} g_j along the last axis."""
    return F.emit("cumsum", g, reverse=True)


def cumprod_vjp(g, y, x):
    """∂L/∂xᵢ = Σ_{j ≥ i} g_j Π_{k ≤ j, k ≠ i} x_k. Before a row's first zero z this is Σ_{j ≥ i} g_j y_j / xᵢ (the
    y_j past z are 0); at z it is Σ_{j ≥ z} g_j y'_j, y' the running product with x_z read as 1; past z it is 0, each
    term holding x_z (torch's cumprod_backward)."""
    zero = F.equal(x, 0)
    zeros_so_far = F.emit("cumsum", zero, reverse=False)
    before, first = F.equal(zeros_so_far, 0), F.logical_and(zero, F.equal(zeros_so_far, 1))
    at_first = suffix_sums(g * F.emit("cumprod", F.where(first, 1, x)))
    return (F.where(before, suffix_sums(g * y) / F.where(zero, 1, x), F.where(first, at_first, 0)),)


def logcumsumexp_vjp(g, y, x, reverse):
    """∂L/∂xᵢ = Σ_{j ≥ i} g_j exp(xᵢ − y_j), summed in log space apart for g > 0 and g < 0 (torch's
    logcumsumexp_backward, after TensorFlow's): exp(xᵢ + logcumsumexp(log|g| − y) taken the other way)."""
    lowest = np.finfo(x.dtype).min
    log_abs = F.log(F.where(F.equal(g, 0), 1, F.abs(g)))

    def part(sign):
        shifted = F.where(sign, log_abs, lowest) - y
        return F.exp(F.emit("logcumsumexp", shifted, reverse=not reverse) + x)
    return (part(F.greater(g, 0)) - part(F.less(g, 0)),)


define("cumsum", scan_rule, flops=lambda out, x, reverse: prod(x),
       vjp=lambda g, y, x, reverse: (F.emit("cumsum", g, reverse=not reverse),))
define("cumprod", scan_rule, flops=lambda out, x: prod(x), vjp=cumprod_vjp)
define("logcumsumexp", logcumsumexp_rule, flops=lambda out, x, reverse: 4 * prod(x), vjp=logcumsumexp_vjp)
define("cumarg", cumarg_rule, differentiable=False, flops=lambda out, x, largest: prod(x))
