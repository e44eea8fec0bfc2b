"""Algebraic simplification: data movement chains composed, broadcasts left to the kernels, identities dropped.

  transpose(transpose(x, p), q)  →  transpose(x, (p[q[0]], p[q[1]], ...)), or x when that is the identity
  reshape(reshape(x, s), t)      →  reshape(x, t), or x when t is x's shape
  f(broadcast_to(x), y)          →  f(x, y)   for an elementwise f whose result keeps its shape
  x · 1, 1 · x, x / 1, x + 0, 0 + x, x − 0  →  x   (a constant 1 or 0 of any shape that x's covers)
  Σᵢ scatter_slice(gᵢ, x[..., aᵢ:bᵢ])  →  concat(g₁, g₂, ...)   when the slices tile their axis
  Σₜ scatter_slice(gₜ, x[:, t])          →  concat(g₀[:, None], g₁[:, None], ...)   (every t, any order)
  x[:, 0], scatter_slice(g, x[:, 0])     →  reshape   when the index takes all of x (an axis of size 1)

Autodiff makes all of these: the gradient of ``x @ kᵀ`` with respect to k transposes the transposed k
back; split and merged attention heads transpose twice in a row; the gradient of a sum is its output
gradient broadcast to the input's shape, which a loss Σ f(x) ∘ g then multiplies by g — a full-size copy
of the constant 1 and a multiplication by it, a large share of a layer norm's training step; the gradient
of a ``split`` (a GRU's three gates, an LSTM's four) is one zero-filled array per part, each written into
and added to the others, where one concatenation of the parts' gradients does; so is that of a recurrent
layer's time steps ``x[:, t]``, T arrays of x's full size each. Each transpose or broadcast
is a copy; a reshape is free but still a step of the schedule.
"""
from functools import reduce

import numpy as np

from ..dims import broadcast
from ..graph import Graph
from ..primitive import lookup
from .rewrite import rewrite

NEUTRAL = {("mul", 0): 1, ("mul", 1): 1, ("div", 1): 1, ("add", 0): 0, ("add", 1): 0, ("sub", 1): 0}
"""(op, operand slot that may be the constant) → the constant that leaves the other operand unchanged"""


def simplify(graph: Graph) -> Graph:
    def visit(node, inputs, copy):
        if node.op == "transpose":
            (x,) = inputs
            perm = tuple(int(p) for p in node.attrs["perm"])
            if x.op == "transpose":
                perm, x = tuple(int(x.attrs["perm"][p]) for p in perm), x.inputs[0]
            return x if perm == tuple(range(len(perm))) else copy(node, (x,), attrs={"perm": perm})
        if node.op == "reshape":
            (x,) = inputs
            if x.op == "reshape":
                x = x.inputs[0]
            return x if x.shape == node.shape else copy(node, (x,))
        if node.op in ("getitem", "scatter_slice") and _whole(node.attrs["index"], inputs[0].shape if
                                                               node.op == "getitem" else node.shape):
            return copy(node, inputs, op="reshape", attrs={"shape": node.shape})
        if node.op == "add":
            parts = _tiling(node, inputs)
            if parts is not None:
                axis, grads = parts
                grads = [g if len(g.shape) == len(node.shape) else
                         copy(node, (g,), op="reshape", attrs={"shape": shape}, shape=shape)
                         for g in grads for shape in [g.shape[:axis] + (1,) + g.shape[axis:]]]
                return copy(node, grads, op="concat", attrs={"axis": axis})
        if node.kind == "call" and lookup(node.op).elementwise:
            inputs = _unbroadcast(node, inputs)
            if len(inputs) == 2:
                for slot in (0, 1):
                    other = inputs[1 - slot]
                    if _is_constant(inputs[slot], NEUTRAL.get((node.op, slot))) and other.shape == node.shape \
                            and other.dtype == node.dtype:
                        return other
        return copy(node, inputs)

    return rewrite(graph, visit)


def _whole(index: tuple, shape: tuple) -> bool:
    """Whether ``x[index]``, x of ``shape``, holds every element of x: full slices, ints on axes of size 1 and
    new axes (None) only, so that it is x reshaped."""
    axes = iter(shape)
    for item in index:
        if item is None:
            continue
        dim = next(axes)
        if isinstance(item, slice):
            if item not in (slice(None), slice(None, None, 1)) and (
                    isinstance(dim, str) or item.indices(dim) != (0, dim, 1)):
                return False
        elif dim != 1:
            return False
    return True


def _tiling(node, inputs: tuple) -> tuple[int, tuple] | None:
    """(axis, the parts' gradients in order) when ``node`` adds up scatter_slices (directly or through adds)
    of slices along one axis that cover it exactly once, else None."""
    slices = _added_slices(node, inputs)
    if slices is None or len({axis for axis, *_ in slices}) != 1 or any(g.dtype != node.dtype for *_, g in slices):
        return None
    slices.sort(key=lambda piece: piece[1])
    axis = slices[0][0]
    bounds = [0] + [b for _, a, b, _ in slices]
    if [a for _, a, _, _ in slices] != bounds[:-1] or bounds[-1] != node.shape[axis]:
        return None
    return axis, tuple(g for *_, g in slices)


def _added_slices(add, terms) -> list | None:
    """The ``_slices`` of the terms that ``add`` sums without broadcasting, together; None if one has none."""
    if any(x.shape != add.shape for x in terms):
        return None
    pieces = [_slices(x) for x in terms]
    return None if None in pieces else [piece for part in pieces for piece in part]


def _slices(node) -> list | None:
    """[(axis, start, stop, g)] of the scatter_slices ``node`` adds up, each of a slice along one axis (or of one
    index along it: g lacks the axis), or None."""
    if node.op == "add":
        return _added_slices(node, node.inputs)
    if node.op != "scatter_slice":
        return None
    index = node.attrs["index"]
    cut = [i for i, item in enumerate(index) if item != slice(None)]
    if len(cut) != 1 or None in index or (isinstance(index[cut[0]], slice) and index[cut[0]].step not in (None, 1)):
        return None
    axis, item = cut[0], index[cut[0]]
    start, stop, _ = item.indices(node.shape[axis]) if isinstance(item, slice) else (item, item + 1, 1)
    return [(axis, start, stop, node.inputs[0])]


def _unbroadcast(node, inputs: tuple) -> tuple:
    """The inputs with each broadcast_to bypassed where the others still broadcast to the node's shape."""
    inputs = list(inputs)
    for i, x in enumerate(inputs):
        if x.op == "broadcast_to":
            trial = inputs[:i] + [x.inputs[0]] + inputs[i + 1:]
            if reduce(lambda shape, y: broadcast(shape, y.shape), trial, ()) == node.shape:
                inputs = trial
    return tuple(inputs)


def _is_constant(node, value) -> bool:
    return value is not None and node.op == "constant" and bool(np.all(node.value == value))
