"""Fused scaled-dot-product attention: softmax(s·q kᵀ + bias, mask) v as one primitive, flash-style.

``attention(q, k, v[, mask][, bias], causal, scale)`` takes q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv) with
one batch shape, a boolean mask broadcasting to (..., Tq, Tk) (True = may attend) and a float additive bias
broadcasting there too (the boolean extra input is the mask, the float one the bias:
``ops.cpu.attention.extras``); ``causal``
lets query i see key j ≤ i + Tk − Tq. Its kernel (``ops/cpu/attention.py``) never holds a Tq × Tk matrix, and its
backward kernel recomputes the probabilities from q and k, so nothing but the output is kept for it.

The gradient is one node, ``attention_grad``, whose value stacks dq, dk and dv: (3, ..., max(Tq, Tk),
max(d, dv)), zero-padded; three ``getitem`` nodes read them out — free views when Tq = Tk and d = dv, as
in self-attention. The bias's gradient is a second node, ``attention_bias_grad``, the score gradient
dZ = P ∘ (dO vᵀ − D) at the full (..., Tq, Tk) shape, which autodiff sums over the bias's broadcast axes
(its kernel recomputes P: a bias costs one more pass over the scores in the backward). The stacking
needs the row count as one dimension, so Tq and Tk must be equal (symbolic or not) or both concrete;
``packable`` says whether they are. The unfused composition in ``core/unfused.py`` is the reference the
tests compare against; the compiler's ``fuse_attention`` pass (``core/passes/attention.py``) turns the
composed attention that modules trace into these primitives when nothing reads the attention weights.
"""
from math import prod

from ops.cpu.attention import extras

from ...errors import AttnGraphError
from .. import functional as F
from ..dims import broadcast, format_shape
from ..primitive import define
from ._infer import require_float, same_dtype


def packable(tq, tk) -> bool:
    """Whether the gradients of queries of length tq and keys of length tk can share one node's rows."""
    return tq == tk or isinstance(tq, int) and isinstance(tk, int)


def attention_rule(q, k, v, *extra, causal, scale):
    require_float(q, k, v)
    if len(q.shape) < 2 or len(k.shape) != len(q.shape) or len(v.shape) != len(q.shape):
        raise ValueError("q, k and v must have the same rank, at least 2: (..., T, features)")
    if k.shape[:-2] != q.shape[:-2] or v.shape[:-2] != q.shape[:-2] or k.shape[-1] != q.shape[-1] \
            or v.shape[-2] != k.shape[-2]:
        raise ValueError(f"expected q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv) with one batch shape, got "
                         f"{format_shape(q.shape)}, {format_shape(k.shape)}, {format_shape(v.shape)}")
    mask, bias = extras(extra)
    if len(extra) > 2 or extra[:1] == (bias,) and len(extra) == 2:
        raise ValueError("attention takes at most a boolean mask and then a float bias after q, k, v")
    scores = q.shape[:-1] + k.shape[-2:-1]
    for name, x in (("mask", mask), ("bias", bias)):
        if x is not None and broadcast(scores, x.shape) != scores:
            raise ValueError(f"{name} {format_shape(x.shape)} does not broadcast to the scores {format_shape(scores)}")
    return q.shape[:-1] + v.shape[-1:], same_dtype(q, k, v, *([] if bias is None else [bias]))


def attention_grad_rule(g, o, q, k, v, *extra, causal, scale):
    tq, tk = q.shape[-2], k.shape[-2]
    if not packable(tq, tk):
        raise ValueError(f"the fused attention gradient needs Tq = Tk or both concrete, got {tq} and {tk}")
    rows = tq if tq == tk else max(tq, tk)
    return (3,) + q.shape[:-2] + (rows, max(q.shape[-1], v.shape[-1])), same_dtype(g, o, q)


def attention_bias_grad_rule(g, o, q, k, v, *extra, causal, scale):
    return q.shape[:-1] + k.shape[-2:-1], same_dtype(g, o, q)


def attention_vjp(g, o, q, k, v, *extra, causal, scale):
    """(dq, dk, dv) read out of one ``attention_grad`` node, nothing for the mask, and ``attention_bias_grad``
    for the bias."""
    grads = F.emit("attention_grad", g, o, q, k, v, *extra, causal=causal, scale=scale)
    parts = tuple(F.emit("getitem", grads, index=index) for index in gradient_parts(q, k, v, grads))
    mask, bias = extras(extra)
    return parts + (() if mask is None else (None,)) + \
        (() if bias is None else (F.emit("attention_bias_grad", g, o, q, k, v, *extra, causal=causal, scale=scale),))


def gradient_parts(q, k, v, grads) -> list[tuple]:
    """The ``getitem`` indices of dq, dk and dv in the value of ``attention_grad`` (nodes or tensors)."""
    rows, width = grads.shape[-2:]
    batch = (slice(None),) * (len(q.shape) - 2)
    return [(i,) + batch + (slice(None) if length == rows else slice(0, length),
                            slice(None) if features == width else slice(0, features))
            for i, (length, features) in enumerate([q.shape[-2:], k.shape[-2:], v.shape[-2:]])]


def attention_flops(out, q, k, v, *extra, causal, scale):
    """As the composition counts them: scores 2·d, scaling 1, softmax 5 and mixing 2·dv per score,
    over the whole Tq × Tk matrix even when causal (a bias's addition is not counted)."""
    scores = prod(q[:-1]) * k[-2]
    return scores * (2 * q[-1] + 1 + 5 + 2 * v[-1])


def attention_grad_flops(out, g, o, q, k, v, *extra, causal, scale):
    """Per score: the recomputed forward without mixing (2·d + 6), dP = dO vᵀ (2·dv), dS (3), dv, dq and
    dk (2·dv + 4·d)."""
    return prod(q[:-1]) * k[-2] * (6 * q[-1] + 4 * v[-1] + 9)


def attention_bias_grad_flops(out, g, o, q, k, v, *extra, causal, scale):
    """Per score: the recomputed forward without mixing (2·d + 6), dP = dO vᵀ (2·dv) and dZ (3)."""
    return prod(q[:-1]) * k[-2] * (2 * q[-1] + 2 * v[-1] + 9)


def first_order_only(g, y, *inputs, **attrs):
    raise AttnGraphError("attention_grad is the fused attention's backward kernel and has no gradient of its "
                         "own: for second-order gradients use the composed attention in attngraph.core.unfused")


define("attention", attention_rule, flops=attention_flops, vjp=attention_vjp)
define("attention_grad", attention_grad_rule, vjp=first_order_only, flops=attention_grad_flops)
define("attention_bias_grad", attention_bias_grad_rule, vjp=first_order_only, flops=attention_bias_grad_flops)
