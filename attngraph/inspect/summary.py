"""``summary(graph)``: the module tree with output shapes, parameters, FLOPs and memory, as data and as text.

    >>> s = graph.summary(B=32, T=128)      # bind the symbolic dimensions (unbound ones count as 1)
    >>> print(s)                           # the table
    >>> s.rows[0]["parameters"], s.flops   # the same numbers as data

One row per module scope, in tree order (children under their parent, siblings in the order they first
ran). A module's parameters, trainable parameters and FLOPs include its sub-modules'; its FLOPs add up all
its calls; its output shape is that of its first call (see ``calls`` for what a call is). FLOPs count the
forward pass; a graph holding a backward pass (``graph.grad()``) reports it separately in
``backward_flops``. Memory estimates: parameters, and activations = every forward intermediate at once (what
training keeps for the backward pass), at the binding used.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..core.graph import Graph, Node
from .calls import Call, ancestors, call_paths, is_backward, short_name
from .flops import binding, describe_binding, format_bytes, format_count, node_bytes, node_flops

COLUMNS = ("module", "calls", "output", "parameters", "% params", "FLOPs", "trainable")


@dataclass
class Summary:
    rows: list[dict]
    parameters: int
    trainable: int
    flops: int
    backward_flops: int
    parameter_bytes: int
    activation_bytes: int
    bindings: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        cells = [COLUMNS] + [("  " * (r["depth"] - 1) + short_name(r["module"]), str(r["calls"]),
                              r["output"], f"{r['parameters']:,}", f"{r['percent']:.1f}",
                              format_count(r["flops"]), f"{r['trainable']:,}") for r in self.rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
        lines = ["  ".join(c.ljust(w) if i in (0, 2) else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                 for row in cells]
        at = f" at {describe_binding(self.bindings)}" if self.bindings else ""
        rule = "─" * len(lines[0])
        lines[1:1] = [rule]
        lines += [rule,
                  f"parameters   {self.parameters:,} ({self.trainable:,} trainable), {format_bytes(self.parameter_bytes)}",
                  f"FLOPs        {format_count(self.flops, 'FLOPs')} per forward pass{at} (a multiply-add is 2)"]
        if self.backward_flops:
            lines.append(f"             {format_count(self.backward_flops, 'FLOPs')} for the backward pass")
        lines.append(f"activations  {format_bytes(self.activation_bytes)} for every forward intermediate{at}")
        return "\n".join(lines)

    __repr__ = __str__


def summary(graph: Graph, depth: int | None = None, **sizes: int) -> Summary:
    """The module tree of ``graph`` down to ``depth`` (default: all), symbolic dimensions bound by ``sizes``."""
    bindings = binding(graph, **sizes)
    forward = [n for n in graph.nodes if n.kind == "call" and not is_backward(n)]
    params = list(graph.parameters.values())
    flops = {n: node_flops(n, bindings) for n in forward}
    calls: dict[Call, list[Node]] = {}
    for node, path in call_paths(forward).items():
        for call in path:
            calls.setdefault(call, []).append(node)
    first: dict[str, int] = {}
    module_flops: Counter = Counter()
    for call, members in calls.items():
        first[call.scope] = min(first.get(call.scope, members[0].id), members[0].id)
        module_flops[call.scope] += sum(flops[n] for n in members)
    module_params: Counter = Counter()
    module_trainable: Counter = Counter()
    for p in params:
        for scope in ancestors(p.scope):
            first[scope] = min(first.get(scope, p.id), p.id)
            module_params[scope] += p.value.size
            module_trainable[scope] += 0 if p.stop_gradient else p.value.size
    total = sum(p.value.size for p in params)
    users = graph.users()
    rows = []
    for scope in sorted(first, key=lambda s: tuple(first[a] for a in ancestors(s))):
        if depth is not None and scope.count(".") >= depth:
            continue
        mine = [c for c in calls if c.scope == scope]
        rows.append(dict(module=scope, depth=scope.count(".") + 1, calls=len(mine),
                         output=_outputs(calls[mine[0]], users) if mine else "",
                         parameters=module_params[scope],
                         percent=100 * module_params[scope] / total if total else 0.0,
                         flops=module_flops[scope], trainable=module_trainable[scope]))
    backward = [n for n in graph.nodes if is_backward(n)]
    return Summary(rows, total, sum(p.value.size for p in params if not p.stop_gradient), sum(flops.values()),
                   sum(node_flops(n, bindings) for n in backward), sum(node_bytes(p, bindings) for p in params),
                   sum(node_bytes(n, bindings) for n in forward), bindings)


def _outputs(members: list[Node], users: dict[Node, list[Node]]) -> str:
    """The shapes of the values a call hands out: its nodes used outside it by the forward pass."""
    inside = set(members)
    return ", ".join(shape_text(n) for n in members
                     if any(u not in inside and not is_backward(u) for u in users[n]))


def shape_text(node: Node) -> str:
    """``B×T×64`` (symbolic dimensions kept); ``scalar`` for a 0-d value."""
    return "×".join(str(d) for d in node.shape) or "scalar"
