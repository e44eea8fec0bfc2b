"""Fused neural-network primitives: masked softmax and log-softmax, layer norm, cross-entropy, dropout.

Each is one kernel forward and one kernel backward (layer norm: two, for dx and for (dγ, dβ)); the backward
kernels are primitives too (``*_grad``), first-order only. The unfused compositions stay available in
``unfused`` for reference and tests.
"""
from math import inf, prod

import numpy as np


from .. import tensor as F
from ..dims import broadcast, format_shape
from ..primitive import define, first_order_only, per_element
from ._infer import require_float, same_dtype


no_second_order = first_order_only("second-order gradients through softmax, layer norm or cross-entropy are "
                                   "not supported")


def softmax_rule(x, mask=None, *, causal):
    require_float(x)
    if mask is not None:
        if mask.dtype != np.bool_:
            raise TypeError(f"a mask must be boolean (True = may attend), not {mask.dtype}")
        if broadcast(x.shape, mask.shape) != x.shape:
            raise ValueError(f"mask {format_shape(mask.shape)} does not broadcast to {format_shape(x.shape)}")
    if causal and len(x.shape) < 2:
        raise ValueError("a causal mask needs at least two axes (queries, keys)")
    return x.shape, x.dtype


def softmax_grad_rule(g, y, mask=None, *, causal=False):
    return y.shape, same_dtype(g, y)


def layer_norm_rule(x, weight, bias, eps):
    require_float(x)
    if not 0 <= eps < inf:
        raise ValueError(f"eps must be a finite number >= 0 (it is added to the variance; PyTorch's default is "
                         f"1e-5), got {eps}")
    for p in (weight, bias):
        if p.shape != x.shape[-1:]:
            raise ValueError(f"weight and bias must have shape {format_shape(x.shape[-1:])}, "
                             f"got {format_shape(p.shape)}")
    return x.shape, same_dtype(x, weight, bias)


def layer_norm_vjp(g, y, x, weight, bias, eps):
    """dx, and dγ = Σ g∘x̂ and dβ = Σ g over the leading axes, by two fused kernels."""
    params = F.emit("layer_norm_params_grad", g, x, eps=eps)
    return F.emit("layer_norm_grad", g, x, weight, eps=eps), params[0], params[1]


def cross_entropy_rule(logits, targets, ignore_index):
    require_float(logits)
    if targets.dtype.kind not in "iu":
        raise TypeError(f"targets must be integer class indices, not {targets.dtype}")
    if len(logits.shape) < 1 or targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets {format_shape(targets.shape)} must have the shape of the logits "
                         f"{format_shape(logits.shape)} without its last (class) axis")
    return (), logits.dtype


def dropout_rule(x, seed, p, key):
    require_float(x)
    if not 0 <= p < 1:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    return x.shape, x.dtype


define("softmax", softmax_rule, flops=per_element(5),
       vjp=lambda g, y, x, mask=None, *, causal: (F.emit("softmax_grad", g, y), None))
define("softmax_grad", softmax_grad_rule, flops=per_element(4),
       vjp=no_second_order)
define("log_softmax", softmax_rule, flops=per_element(5),
       vjp=lambda g, y, x, mask=None, *, causal: (
           F.emit("log_softmax_grad", g, y, *([] if mask is None else [mask]), causal=causal), None))
define("log_softmax_grad", softmax_grad_rule, flops=per_element(4),
       vjp=no_second_order)
define("layer_norm", layer_norm_rule, flops=per_element(8), vjp=layer_norm_vjp)
define("layer_norm_grad", lambda g, x, weight, eps: (x.shape, same_dtype(g, x, weight)), flops=per_element(10),
       vjp=no_second_order)
define("layer_norm_params_grad", lambda g, x, eps: ((2,) + x.shape[-1:], same_dtype(g, x)),
       flops=lambda out, g, x, eps: 8 * prod(x),
       vjp=no_second_order,
       doc="(dγ, dβ) stacked: Σ g∘x̂ and Σ g over every axis but the last")
define("cross_entropy", cross_entropy_rule, flops=lambda out, logits, targets, ignore_index: 5 * prod(logits),
       vjp=lambda g, y, logits, targets, ignore_index: (
           F.emit("cross_entropy_grad", g, logits, targets, ignore_index=ignore_index), None))
define("cross_entropy_grad", lambda g, logits, targets, ignore_index: (logits.shape, logits.dtype),
       flops=lambda out, g, logits, targets, ignore_index: 5 * prod(logits), vjp=no_second_order)
define("dropout", dropout_rule, flops=per_element(2),
       vjp=lambda g, y, x, seed, p, key: (F.emit("dropout", g, seed, p=p, key=key), None))
