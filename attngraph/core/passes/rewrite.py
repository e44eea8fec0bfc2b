"""The loop every pass is: rebuild the graph node by node, in order (torch.fx's Transformer, in small).

``rewrite(graph, visit)`` calls ``visit(node, inputs, copy)`` for each node of ``graph`` in creation order
(a topological order), ``inputs`` being the nodes that already stand for the node's inputs in the new
graph. ``visit`` returns the node that stands for ``node``: usually ``copy(node, inputs)``, a node like
``node`` on the new inputs, with changes (``op=``, ``attrs=``, ``value=`` ...) where the pass rewrites it;
or a node already in the new graph, to merge ``node`` into it or drop it.

``copy`` gives every new node the scope, module calls, name, source line and stop_gradient of the node it is
made from, and its ``grad_of`` (mapped into the new graph): a fused or folded node names the user's code as
the node it replaces did, in error messages and drawings. A pass that needs the new node of any earlier node passes its
own ``env`` dictionary, which the loop fills (old node → new node) and ``visit`` may read and update.
"""
from __future__ import annotations

from typing import Callable

from ..graph import Graph, Node


def rewrite(graph: Graph, visit: Callable, env: dict | None = None) -> Graph:
    result, made_from = Graph(), {}
    env = {} if env is None else env

    def copy(node: Node, inputs, **changes) -> Node:
        fields = dict(op=node.op, attrs=dict(node.attrs), shape=node.shape, dtype=node.dtype, value=node.value)
        fields.update(changes)
        new = result.add(fields.pop("op"), inputs, fields.pop("attrs"), fields.pop("shape"), fields.pop("dtype"),
                         scope=node.scope, name=node.name, source=node.source, stop_gradient=node.stop_gradient,
                         calls=node.calls,
                         **fields)
        made_from[new] = node
        return new

    for node in graph.nodes:
        env[node] = visit(node, tuple(env[x] for x in node.inputs), copy)
    for new, old in made_from.items():
        new.grad_of = env.get(old.grad_of)
    return result
