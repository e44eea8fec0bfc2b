"""Questions asked of a graph through networkx: ``graph.to_networkx()`` keys vertices by ``n17`` and
carries op, kind, shape, dtype, scope, name, source and parameter size (see ``Graph.to_networkx``).

    g = graph.to_networkx()
    nodes_by_op(g, "softmax")                  # ["n25", "n72"]
    module_subgraph(g, "layers.0.attn")        # the attention of the first layer, as a DiGraph
    path_between(g, "n0", "n101")              # a shortest chain of ops from one value to another
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .calls import is_within

if TYPE_CHECKING:       # networkx is imported where a path is asked for: it costs ~70 ms of importing attngraph
    import networkx as nx


def nodes_by_scope(g: nx.DiGraph, scope: str) -> list[str]:
    """Vertices created in module ``scope`` or in its sub-modules, in graph order."""
    return [v for v, scope_of in g.nodes(data="scope") if is_within(scope_of, scope)]


def nodes_by_op(g: nx.DiGraph, op: str) -> list[str]:
    """Vertices whose op is ``op`` (a primitive's name, or input/parameter/constant/output)."""
    return [v for v, op_of in g.nodes(data="op") if op_of == op]


def module_subgraph(g: nx.DiGraph, scope: str) -> nx.DiGraph:
    """The vertices of module ``scope`` (sub-modules included) and the edges among them, as a copy."""
    return g.subgraph(nodes_by_scope(g, scope)).copy()


def path_between(g: nx.DiGraph, source: str, target: str) -> list[str]:
    """A shortest directed path from ``source`` to ``target`` (both included); empty when ``target`` does
    not depend on ``source``."""
    import networkx as nx
    try:
        return nx.shortest_path(g, source, target)
    except nx.NetworkXNoPath:
        return []
