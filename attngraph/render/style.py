"""How boxes and edges look: a colour per op family, a style per node kind, and the legend that explains
them. Colours are soft fills (ColorBrewer pastels) so that the text on them stays the thing to read; the
many elementwise and data-movement ops are the quietest."""
from __future__ import annotations

import html
import math

FAMILIES = {
    "linear algebra": ("#c6dbef", "matmul"),
    "attention": ("#9ecae1", "attention attention_grad attention_bias_grad"),
    "convolution & pooling": ("#a1d99b", ("conv2d conv2d_input_grad conv2d_weight_grad max_pool2d max_pool2d_grad "
                                          "avg_pool2d avg_pool2d_grad")),
    "activation": ("#c7e9c0", "exp log sqrt rsqrt tanh sigmoid silu relu erf gelu gelu_grad sin cos"),
    "normalization": ("#fdd0a2", ("softmax softmax_grad log_softmax log_softmax_grad layer_norm layer_norm_grad "
                                  "layer_norm_params_grad")),
    "loss": ("#fcbba1", "cross_entropy cross_entropy_grad"),
    "reduction": ("#dadaeb", "sum max min logsumexp size"),
    "ordering & scans": ("#e7d4e8", "argmax argmin argsort cumsum"),
    "random": ("#d0ece7", "dropout"),
    "arithmetic": ("#f0f0f0", "add sub mul div neg pow maximum minimum where abs clip"),
    "fused elementwise": ("#fff7bc", "fused"),
    "data movement": ("#ffffff", ("reshape transpose broadcast_to getitem scatter_slice concat gather scatter_add "
                                  "astype stop_gradient")),
    "masks & positions": ("#f2f0f7", ("equal not_equal less less_equal greater greater_equal logical_and "
                                      "logical_or logical_not arange relative_distance")),
}
FAMILY_OF = {op: family for family, (_, ops) in FAMILIES.items() for op in ops.split()}
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
BACKWARD_CLUSTER = dict(style="rounded,dashed", color="#f4a582", fontcolor=BACKWARD, fontsize="9", labeljust="l")
BACKWARD_EDGE = dict(color="#d6604d")
SAVED = dict(color="#bbbbbb", fontcolor="#aaaaaa")
TIE = dict(style="dotted", color="#999999", arrowhead="none", constraint="false")


def node_style(kind: str, op: str, backward: bool) -> dict:
    """Graphviz attributes of a box: by kind for inputs, parameters, outputs and modules, by op family
    for op calls; the backward pass gets a dashed red outline."""
    style = dict(KINDS.get(kind) or dict(shape="box", style="rounded,filled", color=BORDER,
                                         fillcolor=FAMILIES.get(FAMILY_OF.get(op, ""), ("#ffffff",))[0]))
    if backward:
        style.update(color=BACKWARD, style=style["style"] + ",dashed")
    return style


def edge_style(backward: bool, saved: bool) -> dict:
    """Edges of the backward pass are red; forward values it reads (``saved``) are faint, so that the two
    passes stay apart."""
    return SAVED if saved else BACKWARD_EDGE if backward else {}


def edge_width(elements: int) -> str:
    """Pen width growing with the logarithm of the tensor's size: 0.6 for a scalar, 3.6 for 10⁶ elements."""
    return f"{min(0.6 + 0.5 * math.log10(max(elements, 1)), 4.0):.2f}"


def legend(kinds: list[str], folded: list[str], families: list[str], backward: bool) -> str:
    """An HTML-table label explaining the styles in use: box kinds, sources folded into their users' boxes,
    op families and the backward pass."""
    rows = [f'<TR><TD BGCOLOR="{KINDS[k]["fillcolor"]}" COLOR="{KINDS[k]["color"]}">{k}</TD></TR>' for k in kinds]
    rows += [f'<TR><TD><FONT COLOR="{FOLDED[k]}">{k} (inside its user)</FONT></TD></TR>' for k in folded]
    rows += [f'<TR><TD BGCOLOR="{FAMILIES[f][0]}">{html.escape(f)}</TD></TR>' for f in families]
    if backward:
        rows.append(f'<TR><TD COLOR="{BACKWARD}"><FONT COLOR="{BACKWARD}">∇ backward pass</FONT></TD></TR>')
    return ('<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="2" CELLPADDING="3" COLOR="#999999">'
            '<TR><TD BORDER="0"><B>legend</B></TD></TR>' + "".join(rows) + "</TABLE>>")
