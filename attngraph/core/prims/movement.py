"""Primitives that move data without arithmetic: reshape, transpose, broadcast, slicing, concatenation,
row gathers and their scatter-add, and the gathers and scatters along an axis of torch.gather / torch.scatter
(take_along_axis, put_along_axis). Their kernels are NumPy copies (there is nothing for Numba to compile),
except the scatter-add, which Numba accumulates in place."""
from math import prod

import numpy as np


from .. import tensor as F
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


REDUCTIONS = ("assign", "sum", "prod", "amax", "amin")


def along_axis_rule(x, index, axis, op):
    """torch.gather's and torch.scatter's shapes: ``index`` of ``x``'s rank, no longer than ``x`` on the other
    axes, of an integer dtype."""
    if not 0 <= axis < len(x.shape):
        raise ValueError(f"{op} along axis {axis} of a {len(x.shape)}-d tensor")
    if index.dtype.kind not in "iu":
        raise TypeError(f"{op}'s index must be integers, not {index.dtype}")
    if len(index.shape) != len(x.shape):
        raise ValueError(f"{op}'s index {format_shape(index.shape)} must have the {len(x.shape)} dimensions of "
                         f"{format_shape(x.shape)}")
    longer = [a for a, (n, m) in enumerate(zip(index.shape, x.shape)) if a != axis and not (
        n == m or isinstance(n, int) and isinstance(m, int) and n <= m)]
    if longer:
        raise ValueError(f"{op}'s index {format_shape(index.shape)} is longer than {format_shape(x.shape)} on axis "
                         f"{longer[0]} (only axis {axis} may be)")


def take_along_axis_rule(x, index, axis):
    along_axis_rule(x, index, axis, "gather")
    return index.shape, x.dtype


def put_along_axis_rule(x, index, src, axis, reduce):
    along_axis_rule(x, index, axis, "scatter")
    if reduce not in REDUCTIONS:
        raise ValueError(f"reduce must be one of {', '.join(REDUCTIONS)}, not {reduce!r}")
    if src.shape != index.shape:
        raise ValueError(f"scatter's src {format_shape(src.shape)} must have the shape of its index "
                         f"{format_shape(index.shape)}")
    return x.shape, same_dtype(x, src)


def put_along_axis_vjp(g, y, x, index, src, axis, reduce):
    """Gradients of out = x with src reduced in at index (torch's scatter_reduce backward, include_self): x's
    where it survives, src's gathered back. Product: the product of the others, divisions by 0 avoided as torch
    does (a lone 0 gets the product of the rest, two or more give 0). amax/amin: shared evenly between x and the
    src entries equal to the result."""
    def take(t, i):
        return F.emit("take_along_axis", t, i, axis=axis)
    if reduce == "assign":
        return F.emit("put_along_axis", g, index, F.zeros_like(src), axis=axis, reduce="assign"), None, take(g, index)
    if reduce == "sum":
        return g, None, take(g, index)
    if reduce == "prod":
        nonzero_x = F.where(F.equal(x, 0), 1.0, x)
        dx = g * F.emit("put_along_axis", nonzero_x, index, src, axis=axis, reduce="prod") / nonzero_x
        zero = F.equal(src, 0)
        zeros = take(F.emit("put_along_axis", F.zeros_like(x), index, zero.astype(x.dtype), axis=axis,
                            reduce="sum"), index)
        lone = F.logical_and(zero, F.equal(zeros, 1))
        others = F.emit("put_along_axis", x, index, F.where(lone, 1.0, src), axis=axis, reduce="prod")
        dsrc = F.where(lone, take(g * others, index), take(g * y, index) / F.where(zero, 1.0, src))
        return dx, None, dsrc
    x_wins, src_wins = F.equal(x, y).astype(x.dtype), F.equal(src, take(y, index)).astype(x.dtype)
    share = g / F.emit("put_along_axis", x_wins, index, src_wins, axis=axis, reduce="sum")
    return x_wins * share, None, src_wins * take(share, index)


define("take_along_axis", take_along_axis_rule,
       vjp=lambda g, y, x, index, axis: (
           F.emit("put_along_axis", F.zeros_like(x), index, g, axis=axis, reduce="sum"), None))
define("put_along_axis", put_along_axis_rule, vjp=put_along_axis_vjp,
       flops=lambda out, x, index, src, axis, reduce: 0 if reduce == "assign" else prod(index))
