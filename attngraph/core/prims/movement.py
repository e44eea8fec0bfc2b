"""Primitives that move data without arithmetic: reshape, transpose, broadcast, slicing, concatenation,
row gathers and their scatter-add. Their kernels are NumPy copies (there is nothing for Numba to compile),
except the scatter-add, which Numba accumulates in place."""
from math import prod

import numpy as np


from .. import functional as F
from ..dims import broadcast, format_shape, multiply
from ..primitive import define
from ._infer import same_dtype


def reshape_rule(x, shape):
    if multiply(*x.shape) != multiply(*shape):
        raise ValueError(f"cannot reshape {format_shape(x.shape)} to {format_shape(shape)}: sizes differ")
    return tuple(shape), x.dtype


def transpose_rule(x, perm):
    if sorted(perm) != list(range(len(x.shape))):
        raise ValueError(f"{perm} is not a permutation of the {len(x.shape)} axes")
    return tuple(x.shape[p] for p in perm), x.dtype


def broadcast_rule(x, shape):
    if broadcast(x.shape, shape) != tuple(shape):
        raise ValueError(f"cannot broadcast {format_shape(x.shape)} to {format_shape(shape)}")
    return tuple(shape), x.dtype


def sliced_shape(shape, index) -> tuple:
    """Shape of ``x[index]`` for a normalized index (ints, slices and None; one entry per axis used)."""
    out, axis = [], 0
    for item in index:
        if item is None:
            out.append(1)
            continue
        dim, axis = shape[axis], axis + 1
        if isinstance(item, slice):
            out.append(dim if isinstance(dim, str) else len(range(*item.indices(dim))))
    return tuple(out) + tuple(shape[axis:])


def concat_rule(*xs, axis):
    dtype = same_dtype(*xs)
    rest = {x.shape[:axis] + x.shape[axis + 1:] for x in xs}
    if len(rest) > 1 or len({len(x.shape) for x in xs}) > 1:
        raise ValueError(f"shapes differ outside axis {axis}")
    if any(isinstance(x.shape[axis], str) for x in xs):
        raise ValueError(f"cannot concatenate along symbolic axis {axis}")
    first = xs[0].shape
    return first[:axis] + (sum(x.shape[axis] for x in xs),) + first[axis + 1:], dtype


def concat_vjp(g, y, *xs, axis):
    """Each input gets back its own slice of the gradient."""
    grads, start = [], 0
    for x in xs:
        index = (slice(None),) * axis + (slice(start, start + x.shape[axis]),)
        grads.append(F.emit("getitem", g, index=index))
        start += x.shape[axis]
    return tuple(grads)


def gather_rule(table, idx):
    if len(table.shape) != 2:
        raise ValueError("gather takes a 2-D table (rows, features)")
    if idx.dtype.kind not in "iu":
        raise TypeError(f"indices must be integers, not {idx.dtype}")
    return idx.shape + table.shape[1:], table.dtype


def scatter_add_rule(g, idx, num_rows):
    if g.shape[:-1] != idx.shape:
        raise ValueError(f"gradient {format_shape(g.shape)} does not match indices {format_shape(idx.shape)}")
    return (num_rows, g.shape[-1]), g.dtype


define("reshape", reshape_rule, vjp=lambda g, y, x, shape: (F.reshape(g, x.shape),))
define("transpose", transpose_rule, vjp=lambda g, y, x, perm: (F.transpose(g, tuple(np.argsort(perm))),))
define("broadcast_to", broadcast_rule, vjp=lambda g, y, x, shape: (g,))
define("getitem", lambda x, index: (sliced_shape(x.shape, index), x.dtype),
       vjp=lambda g, y, x, index: (F.emit("scatter_slice", g, shape=x.shape, index=index),))
define("scatter_slice", lambda g, shape, index: (tuple(shape), g.dtype),
       vjp=lambda g, y, x, shape, index: (F.emit("getitem", g, index=index),))
define("concat", concat_rule, vjp=concat_vjp)
define("gather", gather_rule,
       vjp=lambda g, y, table, idx: (F.emit("scatter_add", g, idx, num_rows=table.shape[0]), None))
define("scatter_add", scatter_add_rule, flops=lambda out, g, idx, num_rows: prod(g),
       vjp=lambda g, y, x, idx, num_rows: (F.emit("gather", g, idx), None))
