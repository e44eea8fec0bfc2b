"""Additive scores as modules call them: the fused ``additive_scores`` primitive where queries and keys are as many,
else the composition of core/unfused.py."""
from __future__ import annotations

from . import tensor as F
from . import unfused
from .dims import broadcast
from .tensor import as_node


def additive_scores(a, b, v):
    """s[..., i, j] = vᵀ tanh(a[..., i] + b[..., j]) (Bahdanau et al. 2015) for projected queries a (..., Tq, H),
    keys b (..., Tk, H) with broadcasting batch axes and v (H,). Runs the fused primitive, which never holds the
    (..., Tq, Tk, H) hidden tensor, where Tq = Tk (a pointer network's steps against its inputs); the composition
    otherwise, and when a or b has no token axis or their batch axes do not broadcast (its error then names them).
    The fused gradient stacks da and db on max(Tq, Tk) rows: a decoder's one query a step (Tq = 1) against S keys
    ran slower fused, its reverse loop carrying 3·S·H columns a step for the composition's S·H (seq2seq's step 14.8
    → 16.1 ms, benchmarks/MEASUREMENTS.md)."""
    shapes = [as_node(x).shape for x in (a, b)]
    if min(map(len, shapes)) < 2 or len(as_node(v).shape) != 1 or shapes[0][-2] != shapes[1][-2]:
        return unfused.additive_scores(a, b, v)
    try:
        batch = broadcast(*(s[:-2] for s in shapes))
    except ValueError:
        return unfused.additive_scores(a, b, v)
    a, b = (x if s[:-2] == batch else F.broadcast_to(x, batch + s[-2:]) for x, s in zip((a, b), shapes))
    return F.emit("additive_scores", a, b, v)
