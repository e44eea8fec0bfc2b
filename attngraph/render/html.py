"""An interactive viewer in one self-contained HTML file: ``to_html(graph, "model.html", inputs=batch)``.

The page holds, with no link to the network (its script and style are inlined from ``assets/``):

- the graph as nested module frames that the page lays out itself, so that folding a module into one box
  (a click on its name) or unfolding it lays the page out again. Every module call can be unfolded, down to
  the ops: the page carries the whole nesting (``picture`` at full depth), and starts folded at the depth
  ``render`` would draw (``depth``, or the deepest within ``budget`` boxes: ``VIEW_BUDGET`` by default).
  Repeated structure is rolled up into one box that a click unrolls (``outline.py``): the steps of a
  recurrent loop (``step ×10``), and chains of identical blocks (``layers.0 … layers.5 ×6``; rolled at first
  when ``render`` would roll them, or ``roll=True``). Zoom (wheel), pan (drag, arrows),
  fit (f), an overview map, a search box over names, ops and scopes, and a click on a box for its details:
  op, shape, dtype, FLOPs, scope, source line, parameters, inputs and attributes; in the ``both`` view, the
  backward pass sits right of the forward one, and a forward box lists (and marks) those of its gradient;
- given ``inputs`` (a value for every input of the graph), the attention weights of that run
  (``inspect.attention_maps``) for every example of the batch (a selector picks one): bertviz's head view
  (queries joined to keys by lines as opaque as the weight, a toggle per head), its model view (every module
  × head as a small map, a click enlarges one), and, where the keys are the cells of an image input (ViT's
  patches and CLS token, Show-Attend-Tell's feature grid), the weights of each query drawn over the picture.

Maps are read as (examples, heads, queries, keys) by ``inspect.attention.by_example``: the steps of a decoder are
the query rows. An axis of length L is labelled with the tokens of the one integer input of length L (last axis)
that the weights depend on, row ``b`` of it for example ``b`` when the input has as many rows as the map has
examples (HAN's sentences), and with positions 0 … L-1 otherwise. A token shows as its id, or as its name in
``vocabulary`` (a mapping from ids to names, or a sequence of names indexed by id). Keys are image cells when
the weights depend on one float input of shape (B, C, H, W) or (B, H, W, C) and there are g_h × g_w of them,
or one more (the CLS token, first), for a grid of the image's proportions.

Without ``inputs`` the symbolic dimensions count as 1 for FLOPs (as in ``render``); with them, as in the
example, unless given (``T=128``), each a positive int.
"""
from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

import numpy as np

from ..core.graph import Graph, Node, graph_method
from ..errors import RenderError
from ..inspect.attention import attention_maps, by_example
from ..inspect.flops import binding, describe_binding, format_count
from ..inspect.summary import summary
from .outline import outline
from .picture import BUDGET, picture

VIEW_BUDGET = 3 * BUDGET    # boxes shown at first; more than a static drawing holds, since the page folds and zooms

ASSETS = resources.files(__package__) / "assets"
DOCUMENT = """<!DOCTYPE html>
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
{body}
</body>
</html>
"""
VIEWER = """<main>
<section id="graph-pane" aria-label="graph" tabindex="0"></section>
<aside>
<section id="details" aria-label="details"></section>
<section id="attention" aria-label="attention"></section>
</aside>
</main>
<script type="application/json" id="attngraph-data">{data}</script>
<script>
{js}</script>"""



@graph_method("to_html")
def to_html(graph: Graph, path=None, *, inputs: dict | None = None,
            vocabulary: Mapping[int, str] | Sequence[str] | None = None, title: str = "attngraph",
            view: str = "forward", depth: int | None = None, roll: bool | None = None, budget: int = VIEW_BUDGET,
            parameter_nodes: bool = False, **sizes) -> str:
    """The viewer's page for ``graph`` (see the module's docstring), also written to ``path`` when given."""
    if path is not None:
        check_path(Path(path))
    for name, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise RenderError(f"the size of dimension {name} must be a positive int, got {size!r}")
    names = dict(vocabulary) if isinstance(vocabulary, Mapping) else dict(enumerate(vocabulary or ()))
    bindings = binding(graph, **{**_example_sizes(graph, inputs or {}), **sizes})
    shown = picture(graph, view, depth, roll, budget, parameter_nodes)
    data = {**outline(graph, view, shown, bindings, parameter_nodes),
            "attention": _attention(graph, inputs, names) if inputs is not None else [],
            "note": "" if inputs is not None else "No example inputs were given: to_html(graph, inputs={...}) "
                                                  "shows the attention weights of a run."}
    s = summary(graph, **bindings)
    stats = f"{s.parameters:,} parameters · {format_count(s.flops, 'FLOPs')} forward" + (
        f" at {describe_binding(bindings)}" if bindings else "")
    page = DOCUMENT.format(title=html.escape(title), stats=html.escape(stats),
                           css=(ASSETS / "viewer.css").read_text(encoding="utf-8"),
                           body=VIEWER.format(data=script_json(data),
                                              js=(ASSETS / "viewer.js").read_text(encoding="utf-8")))
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(page, encoding="utf-8")
    return page


def check_path(path: Path) -> None:
    """RenderError unless ``path`` names an HTML file (.html or .htm)."""
    if path.suffix.lower() not in (".html", ".htm"):
        raise RenderError(f"cannot write the viewer to {path.name!r}: give a file name ending in .html")


def script_json(data) -> str:
    """``data`` as JSON that a <script> element holds as it is: every ``<`` escaped (``\\u003c``), so that no
    text (a token ``</script>`` or ``<!--``) ends or changes the element."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c")


def _example_sizes(graph: Graph, inputs: dict) -> dict[str, int]:
    """The sizes of the symbolic dimensions of the graph's inputs in ``inputs``: ``{"B": 2, "T": 8}``."""
    return {dim: size for name, node in graph.inputs.items() if name in inputs
            for dim, size in zip(node.shape, np.shape(inputs[name])) if isinstance(dim, str) and dim.isidentifier()}


def _attention(graph: Graph, inputs: dict, vocabulary: dict[int, str]) -> list[dict]:
    """One entry per attention module: its scope, the labels of its query and key axes per example, its
    weights (examples × heads × queries × keys, 4 decimals; NaN and Inf as null), and the image its keys
    are the cells of, if any."""
    feeds = _sources(graph)
    depends: dict[str, frozenset[str]] = {}
    for node in graph.nodes:
        if node.name == "attention":
            depends[node.scope] = depends.get(node.scope, frozenset()) | feeds[node]
    shown = []
    for scope, value in attention_maps(graph, **inputs).items():
        weights = by_example(value).astype(np.float64)
        examples, _, queries, keys = weights.shape
        used = {name: np.asarray(inputs[name]) for name in sorted(depends[scope]) if name in inputs}
        tokens = [_tokens(array, examples, vocabulary) for array in used.values() if array.dtype.kind in "iu"]
        pictures = [array for array in used.values() if array.dtype.kind == "f" and array.ndim == 4
                    and len(array) == examples]
        shown.append({"scope": scope or "(root)",
                      "queries": [_axis(queries, tokens, b) for b in range(examples)],
                      "keys": [_axis(keys, tokens, b) for b in range(examples)],
                      "weights": np.where(np.isfinite(weights), weights.round(4), None).tolist(),
                      "image": _image(pictures[0], keys) if len(pictures) == 1 else None})
    return shown


def _tokens(array: np.ndarray, examples: int, vocabulary: dict[int, str]) -> list[list[str]]:
    """An integer input's rows of tokens by name, one per example: its rows when there are as many as
    examples, else its first row for every example."""
    if not array.ndim or not array.size:
        return []
    rows = array.reshape(-1, array.shape[-1])
    rows = rows if len(rows) == examples else rows[:1].repeat(examples, axis=0)
    return [[vocabulary.get(t, str(t)) for t in row] for row in rows.tolist()]


def _axis(length: int, tokens: list[list[list[str]]], example: int) -> list[str]:
    """Example ``example``'s labels of an axis: those of the one token input of this length, else positions."""
    matching = [rows[example] for rows in tokens if rows and len(rows[example]) == length]
    return matching[0] if len(matching) == 1 else [str(i) for i in range(length)]


def _image(pictures: np.ndarray, keys: int) -> dict | None:
    """The pictures whose cells the keys are, as 8-bit RGB rows per example, and the grid: ``rows`` × ``columns``
    cells (in reading order) after ``cls`` leading keys (0 or 1); None when no grid of the picture's proportions
    (within a factor of 2) has ``keys`` or ``keys - 1`` cells."""
    channels_first = pictures.shape[1] in (1, 3) and pictures.shape[3] not in (1, 3)
    rgb = pictures.transpose(0, 2, 3, 1) if channels_first else pictures
    height, width = rgb.shape[1:3]
    for cls in (0, 1):
        grids = [(r, (keys - cls) // r) for r in range(1, keys - cls + 1) if (keys - cls) % r == 0]
        fitting = [g for g in grids if g[0] > 1 and g[1] > 1 and abs(math.log(g[0] / g[1] * width / height)) < 0.7]
        if fitting:
            rows, columns = min(fitting, key=lambda g: abs(math.log(g[0] / g[1] * width / height)))
            break
    else:
        return None
    low, high = rgb.min(axis=(1, 2, 3), keepdims=True), rgb.max(axis=(1, 2, 3), keepdims=True)
    scaled = np.round(255 * (rgb - low) / np.where(high > low, high - low, 1)).astype(np.uint8)
    if scaled.shape[-1] == 1:
        scaled = scaled.repeat(3, axis=-1)
    return {"height": int(height), "width": int(width), "rows": rows, "columns": columns, "cls": cls,
            "pixels": [example.reshape(-1).tolist() for example in scaled]}


def _sources(graph: Graph) -> dict[Node, frozenset[str]]:
    """The names of the graph's inputs that each node depends on."""
    names = {node: name for name, node in graph.inputs.items()}
    found: dict[Node, frozenset[str]] = {}
    for node in graph.nodes:            # creation order is a topological order
        found[node] = frozenset({names[node]} if node in names else ()).union(*(found[x] for x in node.inputs))
    return found
