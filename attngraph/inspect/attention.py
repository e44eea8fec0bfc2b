"""Attention weights read back from a run, for heatmaps.

Attention modules name their weights ``"attention"`` (``F.name(weights, "attention")``); that name and the
node's scope are all this needs, so it works for every mechanism of the zoo and for user code that follows
the convention.
"""
from __future__ import annotations

import numpy as np

from ..core.graph import Graph


def attention_maps(graph: Graph, **inputs) -> dict[str, np.ndarray | list[np.ndarray]]:
    """Run ``graph`` on ``inputs`` (all of its inputs) and return every node named ``"attention"``, keyed by
    its scope (e.g. ``"layers.0.attn"``; ``""`` for the traced root module), in graph order.

    A scope that produced one map gives an array. A scope that produced several (a module called once per
    decoder step) gives a list of arrays in call order: their shapes may differ from step to step, so
    stacking is left to the caller (``np.stack`` when they agree). A graph without attention gives ``{}``."""
    nodes = [n for n in graph.nodes if n.name == "attention"]
    if not nodes:
        return {}
    values = graph.with_outputs({f"attention@{n.label}": n for n in nodes}).compile()(**inputs)
    values = values[-len(nodes):]     # the graph's own outputs come first; there is at least one
    maps: dict[str, list[np.ndarray]] = {}
    for node, value in zip(nodes, values):
        maps.setdefault(node.scope, []).append(value)
    return {scope: found[0] if len(found) == 1 else found for scope, found in maps.items()}
