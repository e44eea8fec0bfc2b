"""Graphs drawn with graphviz: one box per node, one cluster per module scope, edges labelled with shapes.

The ``graphviz`` package builds the DOT text; the system ``dot`` lays it out as SVG, PNG or PDF. The
``.dot`` file is always written first, so a machine without ``dot`` still gets the description.
"""
from __future__ import annotations

import html
import shutil
import subprocess
from pathlib import Path

import graphviz

from ..core.dims import format_shape
from ..core.graph import Graph, Node
from ..errors import AttnGraphError

FORMATS = ("svg", "png", "pdf", "dot")
INSTALL_DOT = ("graphviz's 'dot' program is needed to lay out {fmt}; the .dot file was written to {dot}. "
               "Install it with: apt-get install graphviz (Debian/Ubuntu), brew install graphviz (macOS), "
               "conda install -c conda-forge graphviz, or choco install graphviz (Windows).")
STYLE = {
    "input": dict(shape="box", style="rounded,filled", fillcolor="#cfe8ff"),
    "parameter": dict(shape="box", style="filled", fillcolor="#fff2b3"),
    "constant": dict(shape="box", style="filled", fillcolor="#eeeeee", fontsize="9"),
    "output": dict(shape="box", style="rounded,filled", fillcolor="#c9f2c9"),
    "call": dict(shape="box", style="rounded,filled", fillcolor="#ffffff"),
    "backward": dict(shape="box", style="rounded,filled", fillcolor="#ffe0e0"),
}


class RenderError(AttnGraphError):
    """The graph could not be laid out (e.g. graphviz's ``dot`` is missing)."""


def shape_text(node: Node) -> str:
    """``B×T×64 float32``."""
    return ("×".join(str(d) for d in node.shape) or "scalar") + f" {node.dtype}"


def node_label(node: Node) -> str:
    title = node.name if node.kind in ("input", "parameter", "output") and node.name else node.op
    if node.kind == "parameter":
        title = node.name.rpartition(".")[2]
    return f"{html.escape(title)}\n{shape_text(node)}"


def to_dot(graph: Graph) -> graphviz.Digraph:
    """The DOT description: nodes in graph order (stable ids ``n17``), clusters nested by scope."""
    dot = graphviz.Digraph("attngraph", graph_attr=dict(rankdir="TB", fontname="Helvetica", fontsize="11"),
                           node_attr=dict(fontname="Helvetica", fontsize="10"),
                           edge_attr=dict(fontname="Helvetica", fontsize="8", color="#666666"))
    clusters: dict[str, list[Node]] = {}
    for node in graph.nodes:
        clusters.setdefault(node.scope, []).append(node)
    _add_clusters(dot, "", clusters)
    for node in graph.nodes:
        for x in node.inputs:
            dot.edge(x.label, node.label, label=format_shape(x.shape) if x.kind == "call" else "")
    return dot


def _add_clusters(parent: graphviz.Digraph, scope: str, clusters: dict[str, list[Node]]) -> None:
    for node in clusters.get(scope, []):
        style = STYLE["backward" if node.grad_of is not None and node.kind == "call" else node.kind]
        parent.node(node.label, node_label(node), tooltip=f"{node.describe()}", **style)
    children = sorted(s for s in clusters if s and s != scope and s.rpartition(".")[0] == scope)
    missing = sorted({_child_of(s, scope) for s in clusters if _is_below(s, scope)} - set(children))
    for child in sorted(set(children) | set(missing)):
        with parent.subgraph(name=f"cluster_{child}") as sub:
            sub.attr(label=child, style="rounded", color="#9999bb", fontcolor="#333366")
            _add_clusters(sub, child, clusters)


def _is_below(s: str, scope: str) -> bool:
    return bool(s) and s != scope and (not scope or s.startswith(scope + "."))


def _child_of(s: str, scope: str) -> str:
    rest = s[len(scope) + 1:] if scope else s
    return (f"{scope}." if scope else "") + rest.split(".")[0]


def render_graph(graph: Graph, path) -> Path:
    """Write ``graph`` to ``path``; the format comes from the suffix (.svg, .png, .pdf, .dot)."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise RenderError(f"cannot render to {path.name!r}: use one of {', '.join('.' + f for f in FORMATS)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    source = to_dot(graph).source
    dot_path = path if fmt == "dot" else path.with_suffix(".dot")
    dot_path.write_text(source)
    if fmt == "dot":
        return path
    if shutil.which("dot") is None:
        raise RenderError(INSTALL_DOT.format(fmt=fmt, dot=dot_path))
    subprocess.run(["dot", f"-T{fmt}", str(dot_path), "-o", str(path)], check=True, capture_output=True)
    return path
