"""How boxes and edges look: a colour per op family (the module of core/prims that defines the op), a style per
node kind, and the legend that explains them. Colours are soft fills (ColorBrewer pastels) so that the text on
them stays the thing to read; the many elementwise and data-movement ops are the quietest."""
from __future__ import annotations

import html
import math

from ..core.primitive import lookup

FAMILIES = {         # a primitive's family (the core/prims module defining it): its legend and its colour
    "linalg": ("linear algebra", "#c6dbef"),
    "attention": ("attention", "#9ecae1"),
    "elementwise": ("elementwise", "#c7e9c0"),
    "nn": ("normalization, loss, dropout", "#fdd0a2"),
    "reduce": ("reduction", "#dadaeb"),
    "fused": ("fused elementwise", "#fff7bc"),
    "movement": ("data movement", "#ffffff"),
    "positions": ("positions", "#f2f0f7"),
    "conv": ("convolution & pooling", "#a1d99b"),
    "sort": ("ordering", "#e7d4e8"),
    "scan": ("scans", "#fde0dd"),
    "recurrence": ("time loop (scan)", "#f6e8c3"),
}
COMMUTATIVE = {"add", "mul", "maximum", "minimum", "equal", "not_equal", "logical_and", "logical_or"}

BORDER = "#666666"
BACKWARD = "#b2182b"
KINDS = {
    "input": dict(shape="box", style="rounded,filled,bold", fillcolor="#deebf7", color="#3182bd"),
    "parameter": dict(shape="box", style="filled", fillcolor="#ffeda0", color="#b8860b"),
    "output": dict(shape="box", style="rounded,filled,bold", fillcolor="#e5f5e0", color="#31a354", peripheries="2"),
    "module": dict(shape="box3d", style="filled", fillcolor="#ebe7f5", color="#54278f", margin="0.12,0.08"),
}
FOLDED = {"parameter": "#7a5c00", "constant": "#777777", "input": "#3182bd"}    # text of sources drawn in a box
GRAPH = dict(rankdir="TB", newrank="true", fontname="Helvetica", fontsize="10", nodesep="0.25", ranksep="0.3",
             labelloc="b", labeljust="l")
NODE = dict(fontname="Helvetica", fontsize="9", margin="0.06,0.03", penwidth="0.8")
EDGE = dict(fontname="Helvetica", fontsize="7", fontcolor="#555555", color="#555555", arrowsize="0.5")
CLUSTER = dict(style="rounded", color="#9e9ac8", fontcolor="#3f007d", fontsize="9", labeljust="l")
BODY_CLUSTER = dict(style="rounded,filled", color="#bf812d", fillcolor="#fdfaf2", fontcolor="#8c510a", fontsize="9",
                    labeljust="l", labelloc="t")       # a scan's body drawn beside its box
BODY_EDGE = dict(style="dashed", color="#bf812d", fontcolor="#8c510a")      # the loop feeding its step, and back
BACKWARD_CLUSTER = dict(style="rounded,dashed", color="#f4a582", fontcolor=BACKWARD, fontsize="9", labeljust="l")
BACKWARD_EDGE = dict(color="#d6604d")
READS = "#888888"       # text of the forward values a backward box reads (drawn in it, not as edges)


def node_style(kind: str, op: str, backward: bool) -> dict:
    """Graphviz attributes of a box: by kind for inputs, parameters, outputs and modules, by op family
    for op calls; the backward pass gets a dashed red outline."""
    style = dict(KINDS.get(kind) or dict(shape="box", style="rounded,filled", color=BORDER,
                                         fillcolor=family_style(family_of(op))[1] if kind == "call" else "#ffffff"))
    if backward:
        style.update(color=BACKWARD, style=style["style"] + ",dashed")
    return style


def family_of(op: str) -> str:
    """The family of primitive ``op``."""
    return lookup(op).family


def family_style(family: str) -> tuple[str, str]:
    """(legend label, fill colour) of a family; a family without a colour of its own is white."""
    return FAMILIES.get(family, (family, "#ffffff"))


def edge_style(backward: bool) -> dict:
    """Edges of the backward pass are red."""
    return BACKWARD_EDGE if backward else {}


def edge_width(elements: int) -> str:
    """Pen width growing with the logarithm of the tensor's size: 0.6 for a scalar, 3.6 for 10⁶ elements."""
    return f"{min(0.6 + 0.5 * math.log10(max(elements, 1)), 4.0):.2f}"


def legend(kinds: list[str], folded: list[str], families: list[str], backward: bool, reads: bool) -> str:
    """An HTML-table label explaining the styles in use: box kinds, sources folded into their users' boxes,
    op families, the backward pass and the forward values it reads."""
    rows = [f'<TR><TD BGCOLOR="{KINDS[k]["fillcolor"]}" COLOR="{KINDS[k]["color"]}">{k}</TD></TR>' for k in kinds]
    rows += [f'<TR><TD><FONT COLOR="{FOLDED[k]}">{k} (inside its user)</FONT></TD></TR>' for k in folded]
    rows += [f'<TR><TD BGCOLOR="{colour}">{html.escape(label)}</TD></TR>' for label, colour in map(family_style,
                                                                                                     families)]
    if backward:
        rows.append(f'<TR><TD COLOR="{BACKWARD}"><FONT COLOR="{BACKWARD}">∇ backward pass</FONT></TD></TR>')
    if reads:
        rows.append(f'<TR><TD><FONT COLOR="{READS}">reads: forward boxes it uses</FONT></TD></TR>')
    return ('<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="2" CELLPADDING="3" COLOR="#999999">'
            '<TR><TD BORDER="0"><B>legend</B></TD></TR>' + "".join(rows) + "</TABLE>>")
