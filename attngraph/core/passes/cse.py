"""Common-subexpression elimination: one node for each distinct computation.

Two op calls are the same when they apply the same op with the same attributes to the same input nodes
(and agree on shape, dtype and stop_gradient); two constants when they hold the same small array. Merging
constants first lets calls on equal constants merge too. Inputs and parameters are never merged. A
typical catch: ``transpose(W)`` of a tied embedding in the forward pass and again in the backward pass,
or the layer norm recomputed for dγ next to the forward one.
"""
from __future__ import annotations


from ..graph import Graph
from .rewrite import rewrite

MAX_CONSTANT = 4096     # elements: larger constants are compared by identity, not content


def cse(graph: Graph) -> Graph:
    seen = {}

    def visit(node, inputs, copy):
        key = computation_key(node, inputs)
        if key is None:
            return copy(node, inputs)
        if key not in seen:
            seen[key] = copy(node, inputs)
        return seen[key]

    return rewrite(graph, visit)


def same_computations(order) -> dict:
    """For nodes in a topological ``order``: each node that computes what an earlier one does → that earlier
    node (the first of its kind), judged as ``cse`` judges, with inputs already mapped."""
    first, same = {}, {}
    for node in order:
        key = computation_key(node, tuple(same.get(x, x) for x in node.inputs))
        if key is not None and node.op != "constant":
            twin = first.setdefault(key, node)
            if twin is not node:
                same[node] = twin
    return same


def computation_key(node, inputs):
    """What makes ``node`` the same computation as another, or None when it must stay on its own."""
    if node.op == "constant" and node.value.size <= MAX_CONSTANT:
        return "constant", node.dtype, node.shape, node.value.tobytes()
    if node.kind != "call":
        return None
    try:
        attrs = _frozen(node.attrs)
        hash(attrs)
    except TypeError:           # an attribute we cannot compare: keep the node
        return None
    return node.op, inputs, attrs, node.shape, node.dtype, node.stop_gradient


def _frozen(value):
    """A hashable stand-in for an attribute value: tuples, lists, dicts and slices (unhashable before
    Python 3.12) spelled out; anything else as it is."""
    if isinstance(value, dict):
        return tuple(sorted((key, _frozen(v)) for key, v in value.items()))
    if isinstance(value, (tuple, list)):
        return type(value).__name__, tuple(_frozen(v) for v in value)
    if isinstance(value, slice):
        return "slice", value.start, value.stop, value.step
    return value
