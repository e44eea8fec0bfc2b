"""``Attention``: weights from a score function and a (masked) softmax, and the weighted sum of values."""
from __future__ import annotations

from ..core import functional as F
from ..core.functional import as_node
from ..errors import ShapeError
from ..nn import Module
from ..nn.checks import module


def key_mask(mask, scores):
    """The mask made to broadcast against the scores (..., Tq, Tk), checked.

    A mask with one axis fewer than the scores is a padding mask over keys, (..., Tk): it gets the query
    axis, (..., 1, Tk). Any other rank must equal the scores'. A mask whose last (key) axis has size 1
    would mask whole query rows instead of keys — a (B, Tk, 1) for (B, 1, Tk) mix-up — and is refused."""
    if mask is None:
        return None
    mshape, sshape = as_node(mask).shape, as_node(scores).shape
    if len(mshape) == len(sshape) - 1:
        mask, mshape = F.expand_dims(mask, -2), mshape[:-1] + (1,) + mshape[-1:]
    elif len(mshape) != len(sshape):
        raise ShapeError(f"mask of shape {mshape} for scores of shape {sshape}: give a padding mask over keys "
                         "(..., Tk) or a full mask (..., Tq, Tk)")
    if mshape[-1] == 1 and sshape[-1] != 1:
        raise ShapeError(f"mask of shape {mshape} has size 1 on its last axis, the key axis: a padding mask "
                         "must mask keys, shaped (B, 1, Tk) or (B, 1, 1, Tk), not (B, Tk, 1)")
    return mask


def attend(scores, values, mask=None, causal: bool = False):
    """weights = softmax(scores, mask); context = weights · values. Fully masked rows give zero context."""
    weights = F.softmax(scores, mask=key_mask(mask, scores), causal=causal)
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
        self.score = module("score", score)

    def forward(self, query, keys, values=None, mask=None, causal: bool = False):
        single = len(query.shape) == len(keys.shape) - 1
        if single:
            query = F.expand_dims(query, -2)
        context, weights = attend(self.score(query, keys), keys if values is None else values, mask, causal)
        if single:
            return context[..., 0, :], weights[..., 0, :]
        return context, weights
