"""Reverse-mode autodiff as a graph transform.

``gradients(y, wrt)`` walks the nodes between ``wrt`` and the scalar ``y`` in reverse topological order,
calls each primitive's VJP rule — which emits ordinary graph nodes — sums the contributions of a node used
several times, and sums a gradient back over the axes its input was broadcast along. A node computing what an
earlier one does (the same op on the same inputs: a module applied to the same tensor at every step, as an
attention's key projection in a decoder's loop) counts as a use of that earlier node, so the contributions are
summed before its VJP, which runs once instead of once per copy. Because the backward
pass is made of the same primitives as the forward one, it can be differentiated again.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import AttnGraphError
from . import tensor as F
from .graph import Graph, Node, gradient_name, graph_method, topological_order
from .passes.cse import same_computations
from .primitive import lookup
from .tensor import Tensor, as_node, constant
from .tracing import add_output, building, gradient_of


def gradients(y, wrt: Sequence) -> list[Tensor]:
    """d y / d w for each ``w`` in ``wrt``, as tensors of the graph being traced (``y`` must be a scalar).
    Called on a gradient, it gives second derivatives."""
    y, wrt = as_node(y), [as_node(w) for w in wrt]
    if y.shape != () or y.dtype.kind != "f":
        raise AttnGraphError(f"gradients need a floating-point scalar to differentiate, got {y.describe()}; "
                             "reduce it first, e.g. with ag.sum or ag.mean")
    order = _between(wrt, y)
    on_path = set(order)
    targets = set(wrt)          # a gradient asked for takes only its own node's paths: never merged
    same = {node: twin for node, twin in same_computations(order).items() if not {node, twin} & targets}
    pending: dict[Node, list[Tensor]] = {y: [constant(np.ones((), y.dtype))]}
    totals: dict[Node, Tensor] = {}
    for node in reversed(order):
        if node not in pending:
            continue
        with gradient_of(node):
            g = totals[node] = _total(pending.pop(node))
            if node.kind != "call":
                continue
            in_grads = lookup(node.op).vjp(g, Tensor(node), *map(Tensor, node.inputs), **node.attrs)
            for x, gx in zip(node.inputs, in_grads):
                if gx is not None and x in on_path:
                    pending.setdefault(same.get(x, x), []).append(_sum_to(gx, x.shape))
    return [totals[w] if w in totals else F.zeros_like(Tensor(w)) for w in wrt]


def _between(wrt: list[Node], y: Node) -> list[Node]:
    """Nodes that ``y`` depends on and that depend on some ``wrt`` node through differentiable,
    floating-point ops not marked ``stop_gradient``; in topological order."""
    live = set(wrt)
    for node in topological_order([y]):
        if node not in live and node.kind == "call" and not node.stop_gradient and node.dtype.kind == "f" \
                and lookup(node.op).differentiable and any(x in live for x in node.inputs):
            live.add(node)
    return [n for n in topological_order([y]) if n in live]


def _total(contributions: list[Tensor]) -> Tensor:
    total = contributions[0]
    for g in contributions[1:]:
        total = total + g
    return total


def _sum_to(g: Tensor, shape) -> Tensor:
    """Undo broadcasting: sum ``g`` over the axes that were added or stretched from size 1."""
    if g.shape == tuple(shape):
        return g
    lead = len(g.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and g.shape[lead + i] != 1)
    return F.reshape(F.sum(g, axes), shape)


@graph_method("grad")
def grad(graph: Graph, wrt: Sequence[str | Node] | None = None, output: str | None = None) -> Graph:
    """A new graph computing ``graph``'s outputs and then the gradient of one scalar output (default: the
    first) with respect to ``wrt`` — names of inputs or parameters, or nodes (default: every trainable
    parameter). The gradients are added as outputs named ``grad:<name>``."""
    result, mapping = graph.copy()
    target = mapping[graph.output(output) if output else graph.outputs[0]].inputs[0]
    named = {**result.inputs, **result.parameters}
    if wrt is None:
        nodes = [n for n in result.parameters.values() if not n.stop_gradient]
    else:
        nodes = [mapping[w] if isinstance(w, Node) else _named(named, w) for w in wrt]
    parameters = {id(n.value): n for n in result.parameters.values()}
    with building(result, parameters):
        for node, g in zip(nodes, gradients(Tensor(target), [Tensor(n) for n in nodes])):
            add_output(as_node(g), gradient_name(node.name))
    return result


def _named(named: dict[str, Node], name: str) -> Node:
    try:
        return named[name]
    except KeyError:
        raise AttnGraphError(f"no input or parameter named {name!r}; the graph has {sorted(named)}") from None
