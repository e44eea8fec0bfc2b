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


def by_example(value: np.ndarray | list[np.ndarray]) -> np.ndarray:
    """A map of ``attention_maps`` as one array (examples, heads, queries, keys).

    (B, H, Tq, Tk) stays; (B, Tq, Tk) has one head; (Tq, Tk) one example and one head. The steps of a module
    called once per step (a list) are the query rows, in order: a step of shape (B, Tk), (B, Tq, Tk) or
    (B, H, Tq, Tk) adds its Tq rows (1 for (B, Tk)), zero-padded on the right where later steps see more keys."""
    if not isinstance(value, list):
        return _four_axes(np.asarray(value))
    steps = [_four_axes(v[:, None] if v.ndim == 2 else v) for v in map(np.asarray, value)]
    keys = max(s.shape[-1] for s in steps)
    return np.concatenate([np.pad(s, [(0, 0)] * 3 + [(0, keys - s.shape[-1])]) for s in steps], axis=2)


def _four_axes(value: np.ndarray) -> np.ndarray:
    """(B, H, Tq, Tk) from itself, (B, Tq, Tk) or (Tq, Tk)."""
    if value.ndim == 2:
        return value[None, None]
    return value[:, None] if value.ndim == 3 else value
