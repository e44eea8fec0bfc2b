"""``Attention``: weights from a score function and a (masked) softmax, and the weighted sum of values."""
from __future__ import annotations

from ..core import functional as F
from ..core.tracing import as_node
from ..errors import ShapeError
from ..nn import Module


def check_mask(mask, scores) -> None:
    """A mask must broadcast to the scores (..., Tq, Tk) and have its key axis last.

    A padding mask shaped (B, Tk, 1) or (B, 1, Tk, 1) would broadcast against (B, Tq, Tk) when Tq = Tk and
    silently mask whole query rows instead of keys; it is refused."""
    if mask is None:
        return
    mshape, tk = as_node(mask).shape, as_node(scores).shape[-1]
    if mshape and mshape[-1] == 1 and tk != 1:
        raise ShapeError(f"mask of shape {mshape} has size 1 on its last axis, the key axis: a padding mask "
                         "must mask keys, shaped (B, 1, Tk) or (B, 1, 1, Tk), not (B, Tk, 1)")


def attend(scores, values, mask=None, causal: bool = False):
    """weights = softmax(scores, mask); context = weights · values. Fully masked rows give zero context."""
    check_mask(mask, scores)
    weights = F.softmax(scores, mask=mask, causal=causal)
    F.name(weights, "attention")
    return weights @ values, weights


class Attention(Module):
    """context, weights = Attention(score)(query, keys, values=None, mask=None).

    query (..., Tq, dq) — or (..., dq) for a single query, in which case Tq is dropped from the results —
    keys (..., Tk, dk), values (..., Tk, dv) (default: the keys). weights = softmax(score(query, keys)) over
    the keys that ``mask`` allows (True = may attend; it broadcasts to (..., Tq, Tk)); context = weights ·
    values. The weights are recorded under this module's scope for heatmaps."""

    def __init__(self, score: Module):
        super().__init__()
        self.score = score

    def forward(self, query, keys, values=None, mask=None, causal: bool = False):
        single = len(query.shape) == len(keys.shape) - 1
        if single:
            query = F.expand_dims(query, -2)
            mask = None if mask is None else F.expand_dims(mask, -2)
        context, weights = attend(self.score(query, keys), keys if values is None else values, mask, causal)
        if single:
            return context[..., 0, :], weights[..., 0, :]
        return context, weights
