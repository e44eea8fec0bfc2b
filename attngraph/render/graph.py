"""Graphs drawn with graphviz: ``render_graph(graph, "model.svg", depth=2)``, ``to_svg``, ``to_dot``.

The picture (``picture.py``) decides what is drawn; this file writes it as DOT: one HTML-table label per
box (title, key attributes, folded parameters and constants, output shape × dtype, parameter count),
nested clusters per module call, edges labelled with the shape they carry (and the input slot of a
non-commutative op) and as wide as the logarithm of its size, a legend of the styles in use, and a footer
with the parameter totals and FLOPs (``attngraph.inspect.summary``'s numbers). In the ``both`` view no edge
crosses from one pass to the other: a backward box lists the forward boxes it reads (``reads: n12 softmax,
layers.0.attn``), so the backward pass is laid out beside the forward one, as in the viewer, instead of
below it with a fan of long edges.

Options, shared by all three entry points:

- ``view="forward" | "backward" | "both"``, ``depth``, ``roll``, ``budget``, ``parameter_nodes``: see
  ``picture``;
- ``gradients={name: array}``: gradient norms ‖∇‖ shown on the parameters (``grad:`` prefixes allowed, so
  a training step's outputs can be passed as they are);
- ``direction="down" | "right"``: the data flows top to bottom (default) or left to right, which suits a deep
  model on a wide screen; ``dpi``: the resolution of a .png (graphviz's default is 96);
- ``bodies=True``: each ``scan`` (a time loop as one node, core/prims/recurrence.py) is drawn with its body, the
  step's graph, in a cluster beside its box (dashed edges: the loop feeding the step its carry and x_t, the step's
  row going back); a body's inputs say what feeds them (``= cell.hidden.weight``);
- any other keyword binds a symbolic dimension (``T=128``) for FLOPs and edge widths; unbound ones are 1.

A ``scan`` is one box: ``scan ×T``, the number of its body's ops and the modules its body calls, its FLOPs (the
body's × T) and ``reversed: t = T−1 … 0`` when it runs backwards; its tooltip counts the body's ops. Its body is a
graph of its own, drawable as any: ``render_graph(node.attrs["body"].graph, "step.svg")``.

A fused node (the compiler's, in a graph from ``core.passes.optimize``) shows its ops as one formula of its
inputs ``[0]``, ``[1]``, …, and lists them with their source lines in its tooltip; ``core.passes.unfuse``
expands it into them. Node ids are the graph's (``n17``); a collapsed call takes its first node's (``m17``). The same graph and
options give byte-identical DOT, hence identical SVG from the same graphviz. A machine without ``dot`` still gets
the description: the ``.dot`` file is written beside the picture asked for when laying it out fails.
"""
from __future__ import annotations

import html
import math
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import graphviz
import numpy as np

from ..core.dims import resolve_shape
from ..core.graph import Graph, Node, gradient_target, graph_method, is_gradient_output
from ..core.prims.fused import formula
from ..core.prims.recurrence import step_bindings
from ..errors import RenderError
from ..inspect.calls import Call, is_backward, is_within, short_name
from ..inspect.flops import binding, describe_binding, format_count, node_flops
from ..inspect.summary import dims_text, shape_text, summary
from . import style
from .picture import BUDGET, Box, Edge, Picture, picture

FORMATS = ("svg", "png", "pdf", "dot")
INSTALL_DOT = ("graphviz's 'dot' program is needed to lay out {what}. Install it with: apt-get install graphviz "
               "(Debian/Ubuntu), brew install graphviz (macOS), conda install -c conda-forge graphviz, or "
               "choco install graphviz (Windows).")
DIRECTIONS = {"down": "TB", "right": "LR"}      # where the data flows: graphviz's rankdir
FORMULA_LIMIT = 60      # characters of a fused node's formula in its box (the tooltip lists every op)
DTYPES = {"float32": "f32", "float64": "f64", "float16": "f16", "int64": "i64", "int32": "i32", "bool": "bool"}


def format_of(path: Path) -> str:
    """The format that ``path``'s suffix names (``svg``, ``png``, ``pdf``, ``dot``; any case), or RenderError."""
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise RenderError(f"cannot render to {path.name!r}: the suffix gives the format, one of "
                          f"{', '.join('.' + f for f in FORMATS)}")
    return fmt


@graph_method("render")
def render_graph(graph: Graph, path, **options) -> Path:
    """Write ``graph`` to ``path``; the format comes from the suffix (.svg, .png, .pdf, .dot). Only that file is
    written, unless laying it out fails (no ``dot``): then the ``.dot`` beside it is, and the error says where.
    A path that cannot be written (under a file, without permission) raises ``RenderError``."""
    path = Path(path)
    fmt = format_of(path)
    source = to_dot(graph, **options).source
    if fmt == "dot":
        _write(path, source.encode())
        return path
    dot_path = path.with_suffix(".dot")
    try:
        picture = _layout(source, fmt, f"{fmt.upper()} (the .dot file was written to {dot_path})")
    except RenderError:
        _write(dot_path, source.encode())
        raise
    _write(path, picture)
    return path


def _write(path: Path, data: bytes) -> None:
    """``data`` into ``path``, its folder made if need be; the file system's refusal as ``RenderError``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as e:
        blocker = next((p for p in path.parents if p.is_file()), None)
        raise RenderError(f"cannot write {path}: " + (f"{blocker} is a file, not a folder" if blocker else
                                                      e.strerror or str(e))) from None


@graph_method("_repr_svg_")
def to_svg(graph: Graph, **options) -> str:
    """The SVG drawing as text (what notebooks show for ``graph._repr_svg_()``)."""
    return _layout(to_dot(graph, **options).source, "svg", "SVG").decode()


def _layout(source: str, fmt: str, what: str) -> bytes:
    """``source`` laid out by graphviz's ``dot`` in format ``fmt``."""
    if shutil.which("dot") is None:
        raise RenderError(INSTALL_DOT.format(what=what))
    done = subprocess.run(["dot", f"-T{fmt}"], input=source.encode(), capture_output=True, check=False)
    if done.returncode:
        raise RenderError(f"dot failed to lay out the graph: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def to_dot(graph: Graph, view: str = "forward", depth: int | None = None, roll: bool | None = None, budget: int = BUDGET,
           parameter_nodes: bool = False, gradients: dict | None = None, direction: str = "down",
           dpi: int | None = None, bodies: bool = False, **sizes) -> graphviz.Digraph:
    """The DOT description of ``graph`` (see the module's docstring for the options)."""
    if direction not in DIRECTIONS:
        raise RenderError(f"direction must be one of {', '.join(map(repr, DIRECTIONS))}, got {direction!r}")
    if dpi is not None and (isinstance(dpi, bool) or not isinstance(dpi, int) or not 1 <= dpi <= 2400):
        raise RenderError(f"dpi must be an int from 1 to 2400, got {dpi!r}")
    pic = picture(graph, view, depth, roll, budget, parameter_nodes)
    bindings = binding(graph, **sizes)
    norms = {gradient_target(name): float(np.linalg.norm(g)) for name, g in (gradients or {}).items()}
    draw = _Drawing(pic, list(graph.parameters.values()), bindings, norms, bodies=bodies)
    layout = {"rankdir": DIRECTIONS[direction], **({"dpi": str(dpi)} if dpi else {})}
    dot = graphviz.Digraph("attngraph", graph_attr=dict(style.GRAPH, label=_footer(graph, view, bindings, pic), **layout),
                           node_attr=style.NODE, edge_attr=style.EDGE)
    draw.cluster(dot, ())
    draw.edges(dot)
    dot.node("legend", draw.legend(), shape="plaintext", margin="0")
    return dot


class _Drawing:
    """Labels and tooltips of one picture; a scan's body drawn in the picture of its graph is another, its ids
    prefixed with the scan box's (``n11_n8``), its inputs labelled with what ``feeds`` them."""

    def __init__(self, pic: Picture, parameters: list[Node], bindings: dict[str, int], norms: dict[str, float],
                 bodies: bool = False, prefix: str = "", feeds: dict[Node, str] | None = None):
        self.pic, self.parameters, self.bindings, self.norms = pic, parameters, bindings, norms
        self.bodies, self.prefix, self.feeds = bodies, prefix, feeds or {}
        self.inner: list[_Drawing] = []        # the bodies drawn
        self.children: dict[tuple, list[tuple]] = {}
        for path in pic.clusters:
            self.children.setdefault(path[:-1], []).append(path)
        self.boxes: dict[tuple, list[Box]] = {}
        for box in pic.boxes:
            self.boxes.setdefault(box.cluster, []).append(box)
        self.reads: dict[Box, list[Box]] = {}      # backward box -> the forward boxes whose values it reads
        for e in filter(_crosses, pic.edges):
            self.reads.setdefault(e.head, []).append(e.tail)
        self.in_step = {path[-1] for path in [*pic.clusters, *(b.cluster + (b.module,) for b in pic.boxes if b.module)]
                        if any(c in pic.steps for c in path[:-1])}     # calls drawn inside a rolled loop's step

    def size(self, node: Node) -> int:
        return math.prod(resolve_shape(node.shape, self.bindings))

    def id(self, box: Box) -> str:
        return self.prefix + box.id

    def cluster(self, parent: graphviz.Digraph, path: tuple[Call, ...]) -> None:
        for box in self.boxes.get(path, []):
            if self.bodies and not box.module and box.node.op == "scan":
                self.body(parent, box)
            else:
                self.box(parent, box)
        for child in self.children.get(path, []):
            call = child[-1]
            name = f"cluster_{self.prefix}{'grad_' if call.backward else ''}{call.scope}" + (
                f"#{call.index}" if call.index else "")
            with parent.subgraph(name=_plain(name)) as sub:
                sub.attr(label=_plain(self.title(call)), tooltip=_plain(call.scope), labelloc="t",
                         **(style.BACKWARD_CLUSTER if call.backward else style.CLUSTER))
                self.cluster(sub, child)

    def box(self, parent: graphviz.Digraph, box: Box) -> None:
        kind = "module" if box.module else box.node.kind
        parent.node(self.id(box), self.label(box), tooltip=_escape(self.tooltip(box)),
                    **style.node_style(kind, box.node.op, _is_backward(box)))

    def edges(self, parent: graphviz.Digraph) -> None:
        for e in self.pic.edges:
            if not _crosses(e):
                parent.edge(self.id(e.tail), self.id(e.head), label=self.edge_label(e),
                            penwidth=style.edge_width(self.size(e.value)), **style.edge_style(_is_backward(e.head)))

    def body(self, parent: graphviz.Digraph, box: Box) -> None:
        """A scan's box in a cluster with the picture of its body; dashed edges from the box to the body's carry
        and x_t, and from its output row back."""
        node, body = box.node, box.node.attrs["body"]
        feeds = {body.graph.inputs[name]: "init, then the previous step's carry" if name == "carry" else
                 _source_name(x) + ("[:, t]" if name.startswith("x") else "")
                 for name, x in zip(body.names, node.inputs)}
        shapes = [resolve_shape(x.shape, self.bindings) for x in node.inputs]
        inner = _Drawing(picture(body.graph), [], step_bindings(body, *shapes), {}, self.bodies,
                         f"{self.id(box)}_", feeds)
        self.inner.append(inner)
        with parent.subgraph(name=f"cluster_body_{self.id(box)}") as sub:
            sub.attr(label=_plain(f"{node.label} {scan_title(node)}: its body, one step"), **style.BODY_CLUSTER)
            self.box(sub, box)
            inner.cluster(sub, ())
            inner.edges(sub)
            drawn = {n: b for b in inner.pic.boxes for n in b.nodes}
            for name in body.names[:1 + body.sequences]:
                if body.graph.inputs[name] in drawn:
                    sub.edge(self.id(box), inner.id(drawn[body.graph.inputs[name]]), **style.BODY_EDGE)
            sub.edge(inner.id(drawn[body.graph.outputs[0]]), self.id(box), label="row t", constraint="false",
                     **style.BODY_EDGE)

    def scan_rows(self, node: Node) -> list[str]:
        """A scan's box: its body's ops and the modules they belong to, its FLOPs and direction."""
        ops = [n for n in node.attrs["body"].graph.nodes if n.kind == "call"]
        modules = list(dict.fromkeys(_module_called(node.scope, n.scope) for n in ops if n.scope != node.scope))
        length = node.shape[1]
        last = length - 1 if isinstance(length, int) else f"{length}−1"
        return [_small(f"body: {len(ops)} ops" + (_listed(", calls ", modules) if modules else "")),
                _small(format_count(node_flops(node, self.bindings), "FLOPs")
                       + (f", reversed: t = {last} … 0" if node.attrs["reverse"] else ""))]

    def title(self, call: Call) -> str:
        """The call's name inside its parent's cluster: ``attn``, ``layers.0``, ``∇ norm1``, ``cell (call 3
        of 9)`` (but ``cell`` inside a ``step ×9``), ``layers.0 … layers.5 ×6``, ``step ×10`` (a loop's first
        step; the others are not drawn)."""
        if call in self.pic.steps:
            return ("∇ " if call.backward else "") + self.pic.steps[call]
        chain = self.pic.copies.get(call, [call])
        text = " … ".join(dict.fromkeys(short_name(c.scope) for c in (chain[0], chain[-1])))
        if len(chain) > 1:
            text += f" ×{len(chain)}"
        calls = self.pic.calls[(call.scope, call.backward)]
        if calls > 1 and call not in self.in_step:
            text += f" (call {call.index + 1} of {calls})"
        return ("∇ " if call.backward else "") + text

    def label(self, box: Box) -> str:
        if box.module:
            return self.module_label(box)
        node = box.node
        title = {"call": node.op, "parameter": node.name, "input": node.name, "output": node.name}[node.kind]
        if node.op == "scan":
            title = scan_title(node)
        rows = [f"<B>{_h(title)}</B>" + (f" <I>{_h(node.name)}</I>" if node.kind == "call" and node.name else "")]
        if node in self.feeds:
            rows.append(_small(f"= {self.feeds[node]}", style.FOLDED["input"]))
        if node.op == "scan":
            rows += self.scan_rows(node)
        elif node.op == "fused":
            names = [f"[{i}]" + ("" if view is None else f"[{attribute_text(view, None)[1:-1]}]")
                     for i, view in enumerate(node.attrs["views"])]
            rows.append(_small(attribute_text(formula(node.attrs["program"], names), FORMULA_LIMIT)))
        elif node.kind == "call":
            rows.append(_small(" ".join(f"{k}={attribute_text(v)}" for k, v in node.attrs.items()
                                        if v is not None and v is not False and k != "key" and
                                        not (k == "shape" and tuple(v) == node.shape))))
        rows += [_small((f"[{slot}] " if _slots(node) else "") + self.source_text(x), style.FOLDED[x.kind])
                 for slot, x in box.folded]
        rows.append(_small(self.value_text(node)))
        if node.kind == "parameter":
            rows.append(_small(f"{node.value.size:,} parameters" + self.norm_text(node.name)))
        elif is_gradient_output(node):
            rows.append(_small(self.norm_text(gradient_target(node.name)).strip()))
        if node.grad_of is not None:
            rows.append(_small(f"∂ {node.grad_of.label} {node.grad_of.op}", style.BACKWARD))
        rows.append(self.reads_text(box))
        return _table(r for r in rows if r)

    def module_label(self, box: Box) -> str:
        """Title; the op (or the number of ops) and FLOPs; the module's parameters (and the norm of their
        gradients, when given); the shapes handed out; the outputs held inside (a gradient named after the
        parameter's path inside the module). A rolled block counts one copy."""
        scope, each = box.module.scope, " each" if box.module in self.pic.copies else ""
        ops = [n for n in box.nodes if n.kind == "call"]
        params = [p for p in self.parameters if is_within(p.scope, scope)]
        norms = [self.norms[p.name] for p in params if p.name in self.norms]
        outputs = [n for n in box.nodes if n.kind == "output"]
        shapes = list(dict.fromkeys([self.value_text(e.value) for e in self.pic.edges if e.tail is box]
                                    + [self.value_text(n) for n in outputs]))
        held = [n.name.replace(f":{scope}.", ":", 1) for n in outputs]
        rows = [f"<B>{_h(self.title(box.module))}</B>",
                _small(f"{ops[0].op if len(ops) == 1 else f'{len(ops)} ops'} · "
                       f"{format_count(sum(node_flops(n, self.bindings) for n in ops), 'FLOPs')}{each}"),
                _small(f"{sum(p.value.size for p in params):,} parameters{each}"
                       + (f"  ‖∇‖={math.hypot(*norms):.3g}" if norms else "")) if params else "",
                _small(", ".join(shapes[:2]) + (" …" if len(shapes) > 2 else ""))]
        if held:
            rows.append(_small(_listed("→ ", held), "#31a354"))
        rows.append(self.reads_text(box))
        return _table(r for r in rows if r)

    def reads_text(self, box: Box) -> str:
        """The forward boxes whose values a backward box reads: ``reads: n12 softmax, layers.0.attn``."""
        names = [b.module.scope if b.module else f"{b.node.label} {b.node.op}" if b.node.kind == "call"
                 else b.node.name for b in self.reads.get(box, [])]
        return _small(_listed("reads: ", list(dict.fromkeys(names))), style.READS) if names else ""

    def source_text(self, x: Node) -> str:
        """A folded input: ``weight 16×16 f32  ‖∇‖=0.031``, ``0.125``, ``const 16 f32`` or ``rng_seed``."""
        if x.kind == "input":
            return x.name
        if x.kind == "constant":
            return f"{x.value.item():.4g}" if x.value.size == 1 else f"const {self.value_text(x)}"
        return f"{x.name.rpartition('.')[2]} {self.value_text(x)}{self.norm_text(x.name)}"

    def value_text(self, node: Node) -> str:
        return f"{shape_text(node)} {_dtype(node)}"

    def norm_text(self, name: str) -> str:
        return f"  ‖∇‖={self.norms[name]:.3g}" if name in self.norms else ""

    def edge_label(self, e: Edge) -> str:
        return (f"[{e.slot}] " if e.slot is not None and _slots(e.head.node) else "") + shape_text(e.value)

    def tooltip(self, box: Box) -> str:
        if box.module:
            ops = Counter(n.op for n in box.nodes if n.kind == "call")
            return "\n".join([box.module.scope, ", ".join(f"{k} ×{v}" for k, v in sorted(ops.items()))])
        node = box.node
        lines = [node.describe()]
        if node.op == "fused":
            lines += ["fused ops:", *(f"  {member.op} ({member.source or member.label})" for member in node.value)]
        if node.op == "scan":
            ops = Counter(n.op for n in node.attrs["body"].graph.nodes if n.kind == "call")
            lines.append("body: " + ", ".join(f"{op} ×{count}" for op, count in sorted(ops.items())))
        if node.attrs:
            lines.append("attributes: " + ", ".join(f"{k}={attribute_text(v, None)}" for k, v in node.attrs.items()))
        if node.inputs:
            lines.append("inputs: " + ", ".join(f"{x.name or x.label} {self.value_text(x)}" for x in node.inputs))
        if node.kind == "call":
            lines.append(f"{format_count(node_flops(node, self.bindings), 'FLOPs')}")
        return "\n".join(lines)

    def legend(self) -> str:
        boxes = [b for drawing in self.drawings() for b in drawing.pic.boxes]
        kinds = {"module" if b.module else b.node.kind for b in boxes}
        folded = {x.kind for b in boxes for _, x in b.folded}
        families = {style.family_of(n.op) for b in boxes if not b.module for n in b.nodes if n.kind == "call"}
        return style.legend([k for k in style.KINDS if k in kinds], [k for k in style.FOLDED if k in folded],
                            [f for f in style.FAMILIES if f in families] + sorted(families - set(style.FAMILIES)),
                            any(map(_is_backward, boxes)), bool(self.reads))

    def drawings(self) -> list[_Drawing]:
        """This drawing and the bodies drawn in it, and theirs."""
        return [self, *(d for inner in self.inner for d in inner.drawings())]


def _footer(graph: Graph, view: str, bindings: dict[str, int], pic: Picture) -> str:
    s = summary(graph, **bindings)
    flops = f"{format_count(s.flops, 'FLOPs')} forward"
    if s.backward_flops and view != "forward":
        flops += f" + {format_count(s.backward_flops, 'FLOPs')} backward"
    at = f" at {describe_binding(bindings)}" if bindings else ""
    shown = f"{view} view" + (f", depth {pic.depth}" if pic.depth else "") + (", rolled" if pic.copies or pic.steps else "")
    return (f"{s.parameters:,} parameters ({s.trainable:,} trainable)   ·   {flops}{at} (a multiply-add is 2)   ·   "
            f"{shown}\\l")


def _slots(node: Node) -> bool:
    """Whether the order of the node's inputs matters and so is shown: ``[0]``, ``[1]``, ... (a fused node's
    formula names its inputs so)."""
    return node.kind == "call" and node.op not in style.COMMUTATIVE and len(node.inputs) > 1


def scan_title(node: Node) -> str:
    """A scan's box: ``scan ×T``, T its number of steps."""
    return f"scan ×{dims_text(node.shape[1:2])}"


def _source_name(x: Node) -> str:
    """What feeds a body's input: a parameter's name, an input's, else the node and its op."""
    return x.name if x.kind in ("parameter", "input") else f"{x.label} {x.op}"


def _module_called(caller: str, scope: str) -> str:
    """The module that ``caller``'s code calls for an op of ``scope``: ``cell`` for ``encoder.cell.hidden`` called
    from ``encoder``, ``layers.0`` for ``layers.0.attn`` called from the root; a scope outside ``caller`` whole."""
    if not is_within(scope, caller):
        return scope
    parts = scope[len(caller) + 1 if caller else 0:].split(".")
    return ".".join(parts[:2] if len(parts) > 1 and parts[1].isdigit() else parts[:1])


def _listed(prefix: str, names: list[str], shown: int = 3) -> str:
    """``→ a, b, c +2 more``: the first ``shown`` names."""
    return prefix + ", ".join(names[:shown]) + (f" +{len(names) - shown} more" if len(names) > shown else "")


def _crosses(e: Edge) -> bool:
    """Whether the edge carries a forward value into the backward pass (drawn as a ``reads:`` row, not a line)."""
    return _is_backward(e.head) and not _is_backward(e.tail)


def _is_backward(box: Box) -> bool:
    return box.module.backward if box.module else is_backward(box.node)


def _table(rows) -> str:
    cells = "".join(f"<TR><TD>{r}</TD></TR>" for r in rows)
    return f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="1">{cells}</TABLE>>'


def _small(text: str, color: str = "#444444") -> str:
    return f'<FONT POINT-SIZE="7" COLOR="{color}">{_h(text)}</FONT>' if text else ""


def _h(text: str) -> str:
    return html.escape(str(text))


def _dtype(node: Node) -> str:
    return DTYPES.get(node.dtype.name, node.dtype.name)


def attribute_text(value, limit: int | None = 24) -> str:
    """Attribute values, short: slices as ``1:4``, dtypes by name, values cut at ``limit`` characters."""
    if isinstance(value, tuple):
        text = "(" + ", ".join(attribute_text(v, None) for v in value) + ")"
    elif isinstance(value, slice):
        text = ":".join("" if v is None else str(v) for v in (value.start, value.stop, value.step)).rstrip(":") or ":"
    elif isinstance(value, np.dtype):
        text = value.name
    else:
        text = str(value)
    return text if limit is None or len(text) <= limit else text[:limit - 1] + "…"


def _escape(text: str) -> str:
    """Graphviz reads backslashes in strings as escapes (``\\n``, ``\\l``)."""
    return text.replace("\\", "\\\\")


def _plain(text: str) -> str:
    """A module's name or path as DOT text, as it is: backslashes escaped, and never read as an HTML-like label
    (``<b>``)."""
    return graphviz.nohtml(_escape(text))
