"""A loop run once where the gradient extends it: a ``scan`` and the same scan whose body emits more columns after
its own (``Body.base``: the forward loop of its gradient, which keeps the residuals the backward reads,
core/scan_gradient.py), on the same inputs, become the wider one, the user's loop reading its first columns.
Extensions of extensions (a second derivative's) resolve to the widest.
"""
from __future__ import annotations

from ..graph import Graph, Node
from .rewrite import rewrite


def share_scans(graph: Graph) -> Graph:
    wider: dict[tuple, Node] = {}
    for node in graph.nodes:
        if node.op == "scan" and node.attrs["body"].base is not None:
            wider[key(node, node.attrs["body"].base)] = node
    if not wider:
        return graph
    made: dict[Node, Node] = {}

    def visit(node, inputs, copy):
        widest = node
        while node.op == "scan" and key(widest, widest.attrs["body"]) in wider:
            widest = wider[key(widest, widest.attrs["body"])]
        if widest is node:
            return made[node] if node in made else copy(node, inputs)
        if widest not in made:
            made[widest] = copy(widest, inputs)
        width = node.attrs["body"].width
        return copy(node, (made[widest],), op="getitem", shape=node.shape,
                    attrs={"index": (slice(None), slice(None), slice(0, width))})

    return rewrite(graph, visit)


def key(node: Node, body) -> tuple:
    return id(body), node.inputs, node.attrs["reverse"]
