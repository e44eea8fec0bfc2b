"""Shape and dtype rules shared by the primitive families."""
from __future__ import annotations

import numpy as np

from ..dims import broadcast


def require_float(*nodes) -> None:
    for n in nodes:
        if n.dtype.kind != "f":
            raise TypeError(f"expects floating-point inputs, got {n.dtype}")


def same_dtype(*nodes) -> np.dtype:
    dtypes = {n.dtype for n in nodes}
    if len(dtypes) > 1:
        raise TypeError("operands have different dtypes " + " and ".join(sorted(map(str, dtypes))) +
                        "; cast one with .astype(...)")
    return nodes[0].dtype


def elementwise(*nodes):
    """Broadcast shapes, one common dtype."""
    return broadcast(*(n.shape for n in nodes)), same_dtype(*nodes)


def float_elementwise(*nodes):
    require_float(*nodes)
    return elementwise(*nodes)


def comparison(*nodes):
    shape, _ = elementwise(*nodes)
    return shape, np.dtype(bool)


def logical(*nodes):
    if any(n.dtype != np.bool_ for n in nodes):
        raise TypeError("logical ops take boolean inputs")
    return broadcast(*(n.shape for n in nodes)), np.dtype(bool)
