"""Scaled dot-product attention as users call it: the fused ``attention`` primitive where its gradient can be
held, else the composition of core/unfused.py."""
from __future__ import annotations

import math

import numpy as np

from ..errors import DTypeError, ShapeError
from . import tensor as F
from . import unfused
from .dims import broadcast, format_shape
from .tensor import as_node
from .prims.attention import packable
from .tracing import user_source


def scaled_dot_product_attention(q, k, v, mask=None, bias=None, causal: bool = False):
    """softmax(q kᵀ / √d + bias, mask) v (Vaswani et al. 2017). q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv)
    with broadcasting batch axes; ``mask`` (boolean, True = may attend) and ``bias`` (float, added to the scaled
    scores: ALiBi's (H, Tq, Tk), a (B, 1, 1, Tk) padding bias) broadcast to (..., Tq, Tk), as torch's
    ``attn_mask``; ``causal`` aligns bottom-right. A row with no key allowed, or whose biases are all −inf,
    gives zeros (torch: NaN). Runs the fused, flash-style ``attention`` primitive (no Tq × Tk matrix is stored,
    forward or backward); the composition ``unfused.scaled_dot_product_attention`` — the reference in tests —
    runs instead for a vector q, k or v, and when Tq and Tk are different lengths one of which is symbolic,
    which the fused gradient cannot hold (see ``prims/attention.py``)."""
    d = as_node(q).shape[-1]
    if isinstance(d, str):
        raise ShapeError(f"the head dimension must be concrete, not {d}")
    if mask is not None:
        mask_node, tk = as_node(mask), as_node(k).shape[-2]
        if mask_node.dtype != np.bool_:
            raise DTypeError(f"a mask must be boolean (True = may attend), not {mask_node.dtype}; pass an additive "
                             f"float mask as bias= (at {user_source()})")
        if mask_node.shape and mask_node.shape[-1] == 1 and tk != 1:
            raise ShapeError(f"mask {format_shape(mask_node.shape)} has size 1 on its last axis, which is the key "
                             "axis: a padding mask must be shaped (B, 1, 1, Tk) to mask keys, not (B, 1, Tk, 1), "
                             f"which would mask whole query rows (at {user_source()})")
    if bias is not None and not np.issubdtype(as_node(bias).dtype, np.floating):
        raise DTypeError(f"an attention bias must be a float tensor, not {as_node(bias).dtype}; pass a boolean mask "
                         f"as mask= (at {user_source()})")
    shapes = [as_node(x).shape for x in (q, k, v)]
    if min(map(len, shapes)) < 2 or not packable(shapes[0][-2], shapes[1][-2]):
        return unfused.scaled_dot_product_attention(q, k, v, mask, bias, causal)
    try:
        batch = broadcast(*(s[:-2] for s in shapes))
    except ValueError as e:
        raise ShapeError(f"attention at {user_source()}: batch axes of q, k, v do not broadcast: {e}") from None
    q, k, v = (F.broadcast_to(x, batch + s[-2:]) for x, s in zip((q, k, v), shapes))
    return F.emit("attention", q, k, v, *(x for x in (mask, bias) if x is not None), causal=causal,
                scale=1 / math.sqrt(d))
