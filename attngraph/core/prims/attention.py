"""Fused scaled-dot-product attention: softmax(s·q kᵀ + bias, mask) v as one primitive, flash-style.

``attention(q, k, v[, mask][, bias], causal, scale)`` takes q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv) with
one batch shape, a boolean mask broadcasting to (..., Tq, Tk) (True = may attend) and a float additive bias
broadcasting there too (the boolean extra input is the mask, the float one the bias:
``ops.shapes.extras``); ``causal``
lets query i see key j ≤ i + Tk − Tq. With ``layout="bthd"`` (default "bhtd") q, k, v and the output have the
heads' axis after the tokens' — q (..., Tq, H, d) — as the fusion pass gives split heads, read in place; the
mask and bias still broadcast to the scores (..., H, Tq, Tk). Its kernel (``ops/cpu/attention.py``) never holds a Tq × Tk matrix, and its
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

``additive_scores(a, b, v)`` is Bahdanau's score of every query against every key, s = vᵀ tanh(a_i + b_j) for the
projected queries a (..., Tq, H) and keys b (..., Tk, H) of one batch shape, (..., Tq, Tk), without the
(..., Tq, Tk, H) hidden tensor (``ops/cpu/additive.py``); ``additive_scores_grad`` stacks da, db and each batch
element's share of dv, (..., 3, max(Tq, Tk), H), zero-padded, under ``packable``'s condition as attention's
gradient; dv is the sum of the shares. ``attngraph.core.additive`` chooses it or the composition.

``ring_attention(q, k, v, comm, split, causal, scale, layout)`` is self-attention over a sequence split across
the ranks of ``comm`` (a static attribute: an mpi4py-like communicator, or None for one process), q, k, v being
this rank's shard (``ops/cpu/ring.py``; on CUDA ``ops/cuda/ring.py``, staged through host memory; users call
``attngraph.attention.ring``). Its value stacks the output and
each row's log-sum-exp L on the features, (..., T, dv + 1), so that its gradient node ``ring_attention_grad``
has both (the backward needs L and walks the ring again) and takes a gradient reaching L into account.
"""
from math import prod

from ops.shapes import LAYOUTS, extras, lengths, scores_shape

from .. import tensor as F
from ..dims import broadcast, format_shape
from ..primitive import define, first_order_only
from ._infer import require_float, same_dtype


def packable(tq, tk) -> bool:
    """Whether the gradients of queries of length tq and keys of length tk can share one node's rows."""
    return tq == tk or isinstance(tq, int) and isinstance(tk, int)


def attention_rule(q, k, v, *extra, causal, scale, layout="bhtd"):
    require_float(q, k, v)
    if layout not in LAYOUTS:
        raise ValueError(f"attention layout must be one of {LAYOUTS}, got {layout!r}")
    lead = 2 if layout == "bhtd" else 3         # axes after the batch: (T, d) or (T, H, d)
    if len(q.shape) < lead or len(k.shape) != len(q.shape) or len(v.shape) != len(q.shape):
        raise ValueError(f"q, k and v must have the same rank, at least {lead}: (..., T, features) or "
                         "(..., T, heads, features)")
    if k.shape[:-lead] != q.shape[:-lead] or v.shape[:-lead] != q.shape[:-lead] \
            or k.shape[-lead + 1:] != q.shape[-lead + 1:] or v.shape[:-1] != k.shape[:-1]:
        raise ValueError(f"expected q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv) with one batch shape (heads "
                         f"after T in layout bthd), got {format_shape(q.shape)}, {format_shape(k.shape)}, "
                         f"{format_shape(v.shape)}")
    mask, bias = extras(extra)
    if len(extra) > 2 or extra[:1] == (bias,) and len(extra) == 2:
        raise ValueError("attention takes at most a boolean mask and then a float bias after q, k, v")
    scores = scores_shape(q.shape, k.shape, layout)
    for name, x in (("mask", mask), ("bias", bias)):
        if x is not None and broadcast(scores, x.shape) != scores:
            raise ValueError(f"{name} {format_shape(x.shape)} does not broadcast to the scores {format_shape(scores)}")
    return q.shape[:-1] + v.shape[-1:], same_dtype(q, k, v, *([] if bias is None else [bias]))


def attention_grad_rule(g, o, q, k, v, *extra, causal, scale, layout="bhtd"):
    tq, tk = lengths(q.shape, k.shape, layout)
    if not packable(tq, tk):
        raise ValueError(f"the fused attention gradient needs Tq = Tk or both concrete, got {tq} and {tk}")
    rows, width = tq if tq == tk else max(tq, tk), max(q.shape[-1], v.shape[-1])
    stacked = q.shape[:-2] + (rows, width) if layout == "bhtd" else q.shape[:-3] + (rows, q.shape[-2], width)
    return (3,) + stacked, same_dtype(g, o, q)


def attention_bias_grad_rule(g, o, q, k, v, *extra, causal, scale, layout="bhtd"):
    return scores_shape(q.shape, k.shape, layout), same_dtype(g, o, q)


def attention_vjp(g, o, q, k, v, *extra, **attrs):
    """(dq, dk, dv) read out of one ``attention_grad`` node, nothing for the mask, and ``attention_bias_grad``
    for the bias."""
    grads = F.emit("attention_grad", g, o, q, k, v, *extra, **attrs)
    parts = tuple(F.emit("getitem", grads, index=index)
                  for index in gradient_parts(q, k, v, grads, attrs.get("layout", "bhtd")))
    mask, bias = extras(extra)
    return parts + (() if mask is None else (None,)) + \
        (() if bias is None else (F.emit("attention_bias_grad", g, o, q, k, v, *extra, **attrs),))


def gradient_parts(q, k, v, grads, layout: str = "bhtd") -> list[tuple]:
    """The ``getitem`` indices of dq, dk and dv in the value of ``attention_grad`` (nodes or tensors)."""
    tq, tk = lengths(q.shape, k.shape, layout)
    rows, width = grads.shape[-2 if layout == "bhtd" else -3], grads.shape[-1]
    batch = (slice(None),) * (len(q.shape) - (2 if layout == "bhtd" else 3))
    heads = () if layout == "bhtd" else (slice(None),)

    def upto(size, whole):
        return slice(None) if size == whole else slice(0, size)
    return [(i,) + batch + (upto(length, rows),) + heads + (upto(x.shape[-1], width),)
            for i, (x, length) in enumerate(((q, tq), (k, tk), (v, tk)))]


def _scores(q, k, layout) -> int:
    return prod(scores_shape(q, k, layout))


def attention_flops(out, q, k, v, *extra, causal, scale, layout="bhtd"):
    """As the composition counts them: scores 2·d, scaling 1, softmax 5 and mixing 2·dv per score,
    over the whole Tq × Tk matrix even when causal (a bias's addition is not counted)."""
    return _scores(q, k, layout) * (2 * q[-1] + 1 + 5 + 2 * v[-1])


def attention_grad_flops(out, g, o, q, k, v, *extra, causal, scale, layout="bhtd"):
    """Per score: the recomputed forward without mixing (2·d + 6), dP = dO vᵀ (2·dv), dS (3), dv, dq and
    dk (2·dv + 4·d)."""
    return _scores(q, k, layout) * (6 * q[-1] + 4 * v[-1] + 9)


def attention_bias_grad_flops(out, g, o, q, k, v, *extra, causal, scale, layout="bhtd"):
    """Per score: the recomputed forward without mixing (2·d + 6), dP = dO vᵀ (2·dv) and dZ (3)."""
    return _scores(q, k, layout) * (2 * q[-1] + 2 * v[-1] + 9)


no_second_order = first_order_only("for second-order gradients use the composed attention in "
                                   "attngraph.core.unfused")


define("attention", attention_rule, flops=attention_flops, vjp=attention_vjp)
define("attention_grad", attention_grad_rule, vjp=no_second_order, flops=attention_grad_flops)
define("attention_bias_grad", attention_bias_grad_rule, vjp=no_second_order, flops=attention_bias_grad_flops)


def ring_attention_rule(q, k, v, *, comm, split, causal, scale, layout="bhtd"):
    """The shard's output and log-sum-exp stacked on the features: (..., T, dv + 1), or (..., T, H, dv + 1)."""
    shape, dtype = attention_rule(q, k, v, causal=causal, scale=scale, layout=layout)
    tq, tk = lengths(q.shape, k.shape, layout)
    if tq != tk:
        raise ValueError(f"ring attention is self-attention over this rank's shard: q and k must be the same "
                         f"positions, got lengths {tq} and {tk}")
    return shape[:-1] + (shape[-1] + 1,), dtype


def ring_attention_grad_rule(g, y, q, k, v, **attrs):
    return attention_grad_rule(g, y, q, k, v, causal=attrs["causal"], scale=attrs["scale"], layout=attrs["layout"])


def ring_attention_vjp(g, y, q, k, v, **attrs):
    """(dq, dk, dv) read out of one ``ring_attention_grad`` node, which also takes the gradient of L (the last
    feature of y) into account."""
    grads = F.emit("ring_attention_grad", g, y, q, k, v, **attrs)
    return tuple(F.emit("getitem", grads, index=index) for index in gradient_parts(q, k, v, grads, attrs["layout"]))


def _ranks(comm) -> int:
    return 1 if comm is None else comm.Get_size()


def ring_attention_flops(out, q, k, v, *, comm, **attrs):
    """This rank's: its queries against every rank's keys, as ``attention_flops`` counts them."""
    return _ranks(comm) * attention_flops(out, q, k, v, causal=attrs["causal"], scale=attrs["scale"],
                                          layout=attrs["layout"])


def ring_attention_grad_flops(out, g, y, q, k, v, *, comm, **attrs):
    return _ranks(comm) * attention_grad_flops(out, g, y, q, k, v, causal=attrs["causal"], scale=attrs["scale"],
                                               layout=attrs["layout"])


define("ring_attention", ring_attention_rule, flops=ring_attention_flops, vjp=ring_attention_vjp)
define("ring_attention_grad", ring_attention_grad_rule, vjp=no_second_order, flops=ring_attention_grad_flops)


def additive_scores_rule(a, b, v):
    require_float(a, b, v)
    if len(a.shape) < 2 or len(b.shape) != len(a.shape) or a.shape[:-2] != b.shape[:-2] \
            or b.shape[-1] != a.shape[-1] or v.shape != a.shape[-1:]:
        raise ValueError(f"additive scores take a (..., Tq, H), b (..., Tk, H) of one batch shape and v (H,), got "
                         f"{format_shape(a.shape)}, {format_shape(b.shape)} and {format_shape(v.shape)}")
    return a.shape[:-1] + b.shape[-2:-1], same_dtype(a, b, v)


def additive_scores_grad_rule(g, a, b, v):
    tq, tk = a.shape[-2], b.shape[-2]
    if not packable(tq, tk):
        raise ValueError(f"the fused additive scores' gradient needs Tq = Tk or both concrete, got {tq} and {tk}")
    return a.shape[:-2] + (3, tq if tq == tk else max(tq, tk), a.shape[-1]), same_dtype(g, a, b, v)


def additive_scores_vjp(g, s, a, b, v):
    """da and db read out of one ``additive_scores_grad`` node; dv the sum of its batch elements' shares."""
    grads = F.emit("additive_scores_grad", g, a, b, v)
    batch, rows = (slice(None),) * (len(a.shape) - 2), grads.shape[-2]

    def part(i, length):
        return F.emit("getitem", grads, index=batch + (i, slice(None) if length == rows else slice(0, length)))
    shares = F.emit("getitem", grads, index=batch + (2, slice(0, 1)))      # no row at all where Tq = Tk = 0
    return part(0, a.shape[-2]), part(1, b.shape[-2]), F.sum(shares, tuple(range(len(batch) + 1)))


def additive_scores_flops(out, a, b, v):
    """Per (query, key, feature), as the composition counts them: the sum 1, tanh 6, the product with v 2."""
    return 9 * prod(a) * b[-2]


def additive_scores_grad_flops(out, g, a, b, v):
    """Per (query, key, feature): the recomputed tanh 7, dv 2, d = g·v·(1 − t²) 4, da and db 2."""
    return 15 * prod(a) * b[-2]


define("additive_scores", additive_scores_rule, vjp=additive_scores_vjp, flops=additive_scores_flops,
       doc="s[..., i, j] = vᵀ tanh(a[..., i] + b[..., j])")
define("additive_scores_grad", additive_scores_grad_rule, flops=additive_scores_grad_flops,
       vjp=first_order_only("for second-order gradients use the composition in attngraph.core.unfused"),
       doc="da, db and each batch element's share of dv stacked, (..., 3, max(Tq, Tk), H), zero-padded")
