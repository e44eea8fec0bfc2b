"""Array layout helpers for the kernels' Python wrappers (plain NumPy: nothing here is compiled)."""
import math

import numpy as np


def rows(a):
    """a as a C-contiguous (R, T) array of its rows along the last axis (a view when a is contiguous); a 0-d
    array is one row of one value."""
    a = np.asarray(a)
    return np.ascontiguousarray(a).reshape(math.prod(a.shape[:-1]), a.shape[-1] if a.ndim else 1)


def mask_rows(mask, shape):
    """A boolean mask (None: all True) broadcasting to ``shape`` (..., T) as its distinct rows and an index.

    Returns ``(mask_rows, mask_index)``: the C-contiguous (Rm, T) rows of the mask itself, and for each of
    the prod(shape[:-1]) rows of ``shape`` the index of its mask row. A (B, 1, 1, T) padding mask costs
    B·H·Tq indices, never a B·H·Tq·T array. Raises ValueError when the mask does not broadcast."""
    return broadcast_rows(np.ones(shape[-1:], bool) if mask is None else np.asarray(mask, bool), shape, "mask")


def broadcast_rows(a, shape, what="array"):
    """An array broadcasting to ``shape`` (..., T) as its distinct rows and, for each of the prod(shape[:-1])
    rows of ``shape``, the index of its row (``mask_rows``, for masks and attention biases alike)."""
    try:
        np.broadcast_to(a, shape)
    except ValueError:
        raise ValueError(f"{what} of shape {a.shape} does not broadcast to shape {tuple(shape)}") from None
    a = a.reshape((1,) * (len(shape) - a.ndim) + a.shape)
    distinct = rows(np.broadcast_to(a, a.shape[:-1] + tuple(shape[-1:])))
    index = np.arange(len(distinct)).reshape(a.shape[:-1])
    return readonly(distinct), readonly(np.broadcast_to(index, tuple(shape[:-1])).ravel())


def readonly(a):
    """A read-only view of the array a. Numba compiles a kernel once per writability of its array arguments,
    and views made by np.broadcast_to are read-only while copies are not: the arrays built here from
    broadcasting are passed read-only always, so that their kernels compile once."""
    view = a.view()
    view.flags.writeable = False
    return view
