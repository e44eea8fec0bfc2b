"""An interactive viewer in one self-contained HTML file: ``to_html(graph, "model.html", inputs=batch)``.

The page holds, with no link to the network (its script and style are inlined from ``assets/``):

- the graph as ``render`` draws it (the same picture and options: ``view``, ``depth``, ``roll``, ``budget``
  (by default ``VIEW_BUDGET``, larger than a static drawing's), ``parameter_nodes``, sizes such as ``T=128``),
  in a pane that zooms and pans; a click on a module's name folds its frame into one box (and back), a search
  box finds boxes by name, op or scope, and a click on a box shows its details: op, shape, dtype, FLOPs,
  scope, source line, parameters, inputs and attributes;
- given ``inputs`` (a value for every input of the graph), the attention weights of that run
  (``inspect.attention_maps``) in a view after bertviz's: a selector per attention module, a toggle per
  head, the query tokens on the left joined to the key tokens on the right by lines as opaque as the
  weight, and hovering a token keeps only its lines.

Attention weights are shown for the first example of the batch: a map of shape (B, H, Tq, Tk) shows its
H heads, (B, Tq, Tk) and (Tq, Tk) one head; the maps of a module called once per step (a decoder) are
stacked as the rows of one map, zero-padded on the right where later steps see more keys. An axis of
length L is labelled with the tokens of the one integer input of length L (last axis, first row) that the
weights depend on, and with positions 0 … L-1 when there is none or more than one. A token shows as its id,
or as its name in ``vocabulary`` (a mapping from ids to names, or a sequence of names indexed by id).

Without ``inputs`` the symbolic dimensions count as 1 for FLOPs (as in ``render``); with them, as in the
example, unless given (``T=128``).
"""
from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

import numpy as np

from ..core.graph import Graph, Node, graph_method
from ..errors import RenderError
from ..inspect.attention import attention_maps
from ..inspect.calls import is_within
from ..inspect.flops import binding, describe_binding, format_count, node_flops
from ..inspect.summary import shape_text, summary
from .graph import attribute_text, to_svg
from .picture import BUDGET, Box, picture

VIEW_BUDGET = 3 * BUDGET    # boxes; more than a static drawing holds, since the page folds and zooms

ASSETS = resources.files(__package__) / "assets"
PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
{css}</style>
</head>
<body>
<header><h1>{title}</h1><span class="stats">{stats}</span></header>
<main>
<section id="graph-pane" aria-label="graph">{svg}</section>
<aside>
<section id="details" aria-label="details"></section>
<section id="attention" aria-label="attention"></section>
</aside>
</main>
<script type="application/json" id="attngraph-data">{data}</script>
<script>
{js}</script>
</body>
</html>
"""


@graph_method("to_html")
def to_html(graph: Graph, path=None, *, inputs: dict | None = None,
            vocabulary: Mapping[int, str] | Sequence[str] | None = None, title: str = "attngraph",
            view: str = "forward", depth: int | None = None, roll: bool | None = None, budget: int = VIEW_BUDGET,
            parameter_nodes: bool = False, **sizes) -> str:
    """The viewer's page for ``graph`` (see the module's docstring), also written to ``path`` when given."""
    if path is not None:
        check_path(Path(path))
    names = dict(vocabulary) if isinstance(vocabulary, Mapping) else dict(enumerate(vocabulary or ()))
    attention = _attention(graph, inputs, names) if inputs is not None else []
    bindings = binding(graph, **{**_example_sizes(graph, inputs or {}), **sizes})
    drawing = {"view": view, "depth": depth, "roll": roll, "budget": budget, "parameter_nodes": parameter_nodes}
    svg = to_svg(graph, **drawing, **bindings)
    pic = picture(graph, **drawing)
    parameters = [n for n in graph.nodes if n.kind == "parameter"]
    data = {"boxes": {box.id: _details(box, parameters, bindings) for box in pic.boxes},
            "attention": attention,
            "note": "" if inputs is not None else "No example inputs were given: to_html(graph, inputs={...}) "
                                                  "shows the attention weights of a run."}
    s = summary(graph, **bindings)
    stats = f"{s.parameters:,} parameters · {format_count(s.flops, 'FLOPs')} forward" + (
        f" at {describe_binding(bindings)}" if bindings else "")
    page = PAGE.format(title=html.escape(title), stats=html.escape(stats), svg=svg[svg.index("<svg"):],
                       data=json.dumps(data, separators=(",", ":")).replace("</", "<\\/"),
                       css=(ASSETS / "viewer.css").read_text(encoding="utf-8"),
                       js=(ASSETS / "viewer.js").read_text(encoding="utf-8"))
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(page, encoding="utf-8")
    return page


def check_path(path: Path) -> None:
    """RenderError unless ``path`` names an HTML file (.html or .htm)."""
    if path.suffix.lower() not in (".html", ".htm"):
        raise RenderError(f"cannot write the viewer to {path.name!r}: give a file name ending in .html")


def _details(box: Box, parameters: list[Node], bindings: dict[str, int]) -> dict:
    """What the details panel lists for a box, and the fields the search reads (title, op, name, scope)."""
    flops = sum(node_flops(n, bindings) for n in box.nodes)
    if box.module:
        scope = box.module.scope
        ops = Counter(n.op for n in box.nodes if n.kind == "call")
        return {"title": scope, "kind": "module", "op": "module", "name": "", "scope": scope,
                "ops": ", ".join(f"{op} ×{count}" for op, count in sorted(ops.items())),
                "FLOPs": format_count(flops, "FLOPs"),
                "parameters": [_parameter(p) for p in parameters if is_within(p.scope, scope)]}
    node = box.node
    return {"title": node.name if node.kind in ("input", "parameter", "output") else node.op, "kind": node.kind,
            "op": node.op, "name": node.name or "", "scope": node.scope, "shape": shape_text(node),
            "dtype": node.dtype.name, "FLOPs": format_count(flops, "FLOPs"), "source": node.source,
            "parameters": [_parameter(p) for p in (node, *node.inputs) if p.kind == "parameter"],
            "inputs": [f"{x.name or x.label} ({x.op}) {shape_text(x)} {x.dtype.name}" for x in node.inputs],
            "attributes": [f"{k}={attribute_text(v, None)}" for k, v in node.attrs.items()],
            "gradient of": node.grad_of.describe() if node.grad_of is not None else ""}


def _parameter(p: Node) -> str:
    return f"{p.name}  {shape_text(p)}  ({p.value.size:,})"


def _example_sizes(graph: Graph, inputs: dict) -> dict[str, int]:
    """The sizes of the symbolic dimensions of the graph's inputs in ``inputs``: ``{"B": 2, "T": 8}``."""
    return {dim: size for name, node in graph.inputs.items() if name in inputs
            for dim, size in zip(node.shape, np.shape(inputs[name])) if isinstance(dim, str) and dim.isidentifier()}


def _attention(graph: Graph, inputs: dict, vocabulary: dict[int, str]) -> list[dict]:
    """One entry per attention module: its scope, the labels of its query and key axes, and its weights
    (heads × queries × keys, 4 decimals; NaN and Inf as null)."""
    feeds = _sources(graph)
    depends = {}
    for node in graph.nodes:
        if node.name == "attention":
            depends[node.scope] = depends.get(node.scope, frozenset()) | feeds[node]
    maps = attention_maps(graph, **inputs)
    labels = {name: _tokens(np.asarray(value), vocabulary) for name, value in inputs.items()}
    shown = []
    for scope, value in maps.items():
        weights = _heads(value)
        known = [labels[name] for name in depends[scope] if labels.get(name)]
        shown.append({"scope": scope or "(root)",
                      "queries": _axis(weights.shape[1], known), "keys": _axis(weights.shape[2], known),
                      "weights": np.where(np.isfinite(weights), weights.round(4), None).tolist()})
    return shown


def _tokens(array: np.ndarray, vocabulary: dict[int, str]) -> list[str]:
    """The tokens of an integer input (last axis, first row) by name, or none for any other input."""
    if array.dtype.kind not in "iu" or not array.ndim or not array.size:
        return []
    return [vocabulary.get(t, str(t)) for t in array.reshape(-1, array.shape[-1])[0].tolist()]


def _sources(graph: Graph) -> dict[Node, frozenset[str]]:
    """The names of the graph's inputs that each node depends on."""
    names = {node: name for name, node in graph.inputs.items()}
    found: dict[Node, frozenset[str]] = {}
    for node in graph.nodes:            # creation order is a topological order
        found[node] = frozenset({names[node]} if node in names else ()).union(*(found[x] for x in node.inputs))
    return found


def _heads(value) -> np.ndarray:
    """The first example's weights as (heads, queries, keys): see the module's docstring."""
    if isinstance(value, list):
        keys = max(v.shape[-1] for v in value)
        value = np.concatenate([np.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, keys - v.shape[-1])]) for v in value],
                               axis=-2)
    weights = np.asarray(value, dtype=np.float64)
    if weights.ndim >= 3:
        weights = weights[0]
    return weights.reshape((-1, *weights.shape[-2:])) if weights.ndim >= 2 else weights.reshape(1, 1, -1)


def _axis(length: int, known: list[list[str]]) -> list[str]:
    """The labels of an axis: those of the one known sequence of this length, else the positions."""
    matching = [labels for labels in known if len(labels) == length]
    return matching[0] if len(matching) == 1 else [str(i) for i in range(length)]
