"""What the viewer's page lays out: the graph's boxes in nested frames, every one of which folds into a box.

``outline(graph, shown, ...)`` gives every box of the full-depth ``picture`` and a frame per module call
(``c0``, ``c1``, …; the parent ``""`` is the top), and two kinds of frames that roll repeated structure up:

- a chain of identical blocks (``layers.0`` … ``layers.5``, as ``picture(roll=True)`` finds them) sits in a
  frame ``layers.0 … layers.5 ×6`` (``r0``, …);
- the steps of a recurrent loop: where a frame's children (its ops and module calls, in the order they were
  traced) repeat a unit holding a module call N times back to back (``repeated_runs``), each unit is a frame
  ``step k of N`` (``s0``, …) inside a frame ``step ×N`` (``t0``, …); so are ops repeated ``STEPS_OF_OPS``
  times or more (``reshape ×10``).

A ``scan`` (a time loop as one node) is one box, ``scan ×T``, whose details list its body's ops one per line
(``%8 = matmul(%4, %2) rows×48 · cell.hidden``: the step's graph, its batch ``rows``).

Frames start folded where ``shown`` (the picture ``render`` would draw) has a box for them, and the frames
of repeated structure start rolled, a chain of blocks when ``shown`` rolls it. Each box and frame has the
details the page lists on a click (op, shape, dtype, FLOPs, scope, source line, parameters, …).
"""
from __future__ import annotations

import math
from collections import Counter

from ..core.graph import Graph, Node
from ..inspect.calls import Call, is_backward, short_name
from ..inspect.flops import format_count, node_flops
from ..inspect.summary import shape_text
from . import style
from .graph import DTYPES, attribute_text, scan_title
from .picture import Picture, picture, step_name, step_runs


def outline(graph: Graph, view: str, shown: Picture, bindings: dict[str, int], parameter_nodes: bool) -> dict:
    """``{"boxes": [...], "frames": [...], "edges": [[tail, head, shape]], "ties": [[forward, backward]],
    "details": {id: fields}}``: see the module's docstring."""
    full = picture(graph, view, None, False, math.inf, parameter_nodes)
    chains = picture(graph, view, None, True, math.inf, parameter_nodes).copies
    frames = _Frames(full, shown, bindings)
    for number, (first, chain) in enumerate(chains.items()):
        frames.chain(f"r{number}", first, chain)
    for parent in list(frames.children):
        frames.steps(parent)
    return {"boxes": [_box(box, frames.parent[box.id], bindings) for box in full.boxes],
            "frames": [{**frame, "parent": frames.parent[frame["id"]]} for frame in frames.frames],
            "edges": [[e.tail.id, e.head.id, shape_text(e.value)] for e in full.edges],
            "ties": [[forward.id, backward.id] for forward, backward in full.ties],
            "details": frames.details}


class _Frames:
    """The frames (without their parents), the parent of every box and frame, the nodes each stands for, and
    their details."""

    def __init__(self, full: Picture, shown: Picture, bindings: dict[str, int]):
        self.bindings = bindings
        ids = {path: f"c{i}" for i, path in enumerate(full.clusters)}
        self.call = {ids[path]: path[-1] for path in full.clusters}
        self.parent = {ids[path]: ids.get(path[:-1], "") for path in full.clusters}
        self.parent.update({box.id: ids.get(box.cluster, "") for box in full.boxes})
        self.nodes = {box.id: box.nodes for box in full.boxes}
        self.order = {box.id: i for i, box in enumerate(full.boxes)}
        self.signature = {box.id: ("op", box.node.op) for box in full.boxes}
        for box in full.boxes:
            for i in range(len(box.cluster), 0, -1):
                frame = ids[box.cluster[:i]]
                self.nodes[frame] = self.nodes.get(frame, []) + box.nodes
                self.order.setdefault(frame, self.order[box.id])
        self.frames = [{"id": frame, "kind": "module", "label": _label(call, shown),
                        "folded": len(path) >= (shown.depth or math.inf), "backward": call.backward}
                       for path, frame in ids.items() for call in [path[-1]]]
        self.details = {box.id: _node_details(box.node, bindings) for box in full.boxes}
        for frame, call in self.call.items():
            self.signature[frame] = ("call", call.scope, call.backward)
            self.details[frame] = self._details(call.scope, call.scope, self.nodes[frame])
        self.children: dict[str, list[str]] = {}
        for child, parent in self.parent.items():
            self.children.setdefault(parent, []).append(child)
        self.rolled = set(shown.copies)

    def add(self, frame: str, parent: str, members: list[str], kind: str, label: str, folded: bool,
            scope: str, title: str) -> None:
        """A frame ``frame`` in ``parent`` around ``members`` (children of ``parent``)."""
        self.children[parent] = [c for c in self.children[parent] if c not in members] + [frame]
        self.children[frame] = list(members)
        self.parent[frame] = parent
        self.parent.update({member: frame for member in members})
        self.nodes[frame] = [n for member in members for n in self.nodes[member]]
        self.order[frame] = min(self.order[member] for member in members)
        self.signature[frame] = (kind, label)
        backward = any(is_backward(n) for n in self.nodes[frame])
        self.frames.append({"id": frame, "kind": kind, "label": label, "folded": folded, "backward": backward})
        self.details[frame] = self._details(title, scope, self.nodes[frame])

    def chain(self, frame: str, first: Call, chain: list[Call]) -> None:
        """The frame around a chain of identical blocks."""
        members = [f for f, call in self.call.items() if call in chain]
        parent = self.parent[members[0]]
        label = f"{short_name(first.scope)} … {short_name(chain[-1].scope)} ×{len(chain)}"
        self.add(frame, parent, members, "repeat", label, first in self.rolled, first.scope.rpartition(".")[0],
                 f"{first.scope} … {chain[-1].scope}: {len(chain)} identical blocks")

    def steps(self, parent: str) -> None:
        """Frames around the steps of the recurrent loops among ``parent``'s children."""
        items = sorted(self.children[parent], key=self.order.get)
        signatures = [self.signature[item] for item in items]
        scope = self.call[parent].scope if parent in self.call else ""
        for start, period, count in step_runs(signatures):
            name = step_name(signatures[start:start + period])
            run, steps = self.new_id("t"), []
            for k in range(count):
                step = self.new_id("s")
                self.add(step, parent, items[start + k * period:start + (k + 1) * period], "step",
                         f"{name} {k + 1} of {count}", True, scope, f"{scope or '(root)'}: {name} {k + 1} of {count}")
                steps.append(step)
            calls = list(dict.fromkeys(short_name(self.call[i].scope) for i in items[start:start + period]
                                       if i in self.call))
            self.add(run, parent, steps, "repeat", f"{name} ×{count}", True, scope,
                     f"{scope or '(root)'}: {count} × {', '.join(calls) or name}")

    def new_id(self, prefix: str) -> str:
        """The next unused id of a kind of frame: ``s0``, ``s1``, …"""
        return f"{prefix}{sum(f['id'].startswith(prefix) for f in self.frames)}"

    def _details(self, title: str, scope: str, nodes: list[Node]) -> dict:
        """What the details panel lists for a frame (the parameters its ops read), and the fields the search
        reads."""
        ops = Counter(n.op for n in nodes if n.kind == "call")
        return {"title": title or "(root)", "kind": "module", "op": "module", "name": "", "scope": scope,
                "ops": ", ".join(f"{op} ×{count}" for op, count in sorted(ops.items())),
                "FLOPs": format_count(sum(node_flops(n, self.bindings) for n in nodes), "FLOPs"),
                "parameters": [_parameter(p) for p in dict.fromkeys(x for n in nodes for x in (n, *n.inputs)
                                                                      if x.kind == "parameter")]}


def _label(call: Call, shown: Picture) -> str:
    """``attn``, ``∇ norm1``, ``cell (call 3 of 9)``."""
    calls = shown.calls[(call.scope, call.backward)]
    return ("∇ " if call.backward else "") + short_name(call.scope) + (
        f" (call {call.index + 1} of {calls})" if calls > 1 else "")


def _box(box, frame: str, bindings: dict[str, int]) -> dict:
    """A box as the page draws it: its title and the shape it makes, its frame, colours and FLOPs."""
    node = box.node
    backward = is_backward(node)
    look = style.node_style(node.kind, node.op, backward)
    return {"id": box.id, "frame": frame, "title": _title(node), "kind": node.kind, "backward": backward,
            "text": f"{shape_text(node)} {DTYPES.get(node.dtype.name, node.dtype.name)}",
            "fill": look["fillcolor"], "stroke": look["color"], "flops": node_flops(node, bindings)}


def _title(node: Node) -> str:
    if node.op == "scan":
        return scan_title(node)
    return node.name if node.kind in ("input", "parameter", "output") else node.op


def _node_details(node: Node, bindings: dict[str, int]) -> dict:
    """What the details panel lists for a box: op, shape, dtype, FLOPs, scope, source line, parameters, inputs,
    attributes and the forward node of a gradient."""
    return {"title": _title(node), "kind": node.kind, "op": node.op, "name": node.name or "", "scope": node.scope,
            "shape": shape_text(node), "dtype": node.dtype.name,
            "FLOPs": format_count(node_flops(node, bindings), "FLOPs"), "source": node.source,
            "parameters": [_parameter(p) for p in (node, *node.inputs) if p.kind == "parameter"],
            "inputs": [f"{x.name or x.label} ({x.op}) {shape_text(x)} {x.dtype.name}" for x in node.inputs],
            "attributes": [f"{k}={attribute_text(v, None)}" for k, v in node.attrs.items()],
            "gradient of": node.grad_of.describe() if node.grad_of is not None else "",
            "body": _body(node) if node.op == "scan" else []}


def _body(node: Node) -> list[str]:
    """A scan's body, one line per node, numbered within the body: ``%2 = c0 16×48 ← cell.hidden.weight`` (an input
    and what feeds it), ``%8 = matmul(%4, %2) rows×48 · cell.hidden`` (an op, its operands and scope),
    ``out = %24``."""
    body = node.attrs["body"]
    feeds = dict(zip(body.names, node.inputs))

    def operand(x: Node) -> str:
        return f"{x.value.item():.4g}" if x.kind == "constant" and x.value.size == 1 else f"%{x.id}"
    lines = []
    for n in body.graph.nodes:
        if n.kind == "input":
            fed = feeds[n.name]
            lines.append(f"%{n.id} = {n.name} {shape_text(n)} ← {fed.name or f'{fed.label} {fed.op}'}")
        elif n.kind == "call":
            lines.append(f"%{n.id} = {n.op}({', '.join(map(operand, n.inputs))}) {shape_text(n)}"
                         + (f" · {n.scope}" if n.scope else ""))
        elif n.kind == "output":
            lines.append(f"{n.name} = {operand(n.inputs[0])}")
    return lines


def _parameter(p: Node) -> str:
    return f"{p.name}  {shape_text(p)}  ({p.value.size:,})"
