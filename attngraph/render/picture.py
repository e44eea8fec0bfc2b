"""What a drawing of a graph shows: boxes, the module clusters they sit in, and the edges between them.

Each node becomes a box, except the sources folded into their consumers' boxes: constants, the
``rng_seed`` input that the executor feeds to dropout by itself, and parameters unless ``parameter_nodes``.
Nodes sit in nested clusters, one per module *call* (see ``attngraph.inspect.calls``); inputs and
parameters sit with their first consumer, outputs with their producer.

``depth=N`` collapses every module call nested deeper than N scope components into one box at depth N.
Since a call is a run of consecutive nodes in creation order (a topological order), collapsed boxes are
disjoint intervals of that order and every edge between them points forward: the picture stays acyclic.

``roll=True`` also draws the steps of a recurrent loop once: where a cluster's children (its boxes and
module calls, in creation order) repeat a unit holding a module call N times back to back (``step_runs``), the
first step sits in a cluster ``step ×N`` and the others are not drawn: edges between steps are dropped, edges
of a later step go to its twin in the first one (so a source read by every step has one edge to it).

``roll=True`` draws N identical consecutive blocks (``layers.0`` … ``layers.N-1``: siblings whose names end
in a number, with the same ops, shapes and wiring, and nothing drawn between them) once, marked ×N; the
edges chaining one copy to the next are dropped, every other edge goes to the first copy. By default
(``roll=None``) blocks are rolled when the picture would otherwise be over the budget.

The ``view`` picks the forward pass, the backward pass (the nodes autodiff emitted and the ``grad:``
outputs; the forward values they read are not drawn) or both, the backward pass in clusters of its own
(``∇ scope``) and tied to the forward boxes whose gradient it computes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..core.graph import Graph, Node
from ..inspect.calls import Call, call_paths, is_backward, is_within

VIEWS = ("forward", "backward", "both")
BUDGET = 80         # boxes; above it, depth=None rolls and collapses the picture
STEPS_OF_OPS = 4    # ops repeated back to back (a step's outputs reshaped one by one) rolled from this many


@dataclass(eq=False)
class Box:
    id: str                                 # "n17" for a node, "m17" for a collapsed call (its first node)
    nodes: list[Node]                       # the nodes it stands for: one, unless it is a collapsed call
    cluster: tuple[Call, ...]               # the nested module calls it is drawn in
    module: Call | None = None              # the collapsed call
    folded: list[tuple[int, Node]] = field(default_factory=list)   # (input slot, source) drawn inside

    @property
    def node(self) -> Node:
        return self.nodes[0]


@dataclass(frozen=True, eq=False)
class Edge:
    tail: Box
    head: Box
    value: Node                             # the tensor it carries
    slot: int | None                        # the head's input slot, when the head is a single node


@dataclass
class Picture:
    boxes: list[Box]
    edges: list[Edge]
    ties: list[tuple[Box, Box]]             # forward box -> backward box computing its gradient
    clusters: list[tuple[Call, ...]]        # every cluster, as the path of calls leading to it
    copies: dict[Call, list[Call]]          # a rolled block -> the calls it stands for (itself first)
    steps: dict[Call, str]                  # the cluster around a rolled loop's first step -> "step ×10"
    calls: dict[tuple[str, bool], int]      # (scope, backward) -> how many calls the pass makes
    depth: int | None


def picture(graph: Graph, view: str = "forward", depth: int | None = None, roll: bool | None = None,
            budget: int = BUDGET, parameter_nodes: bool = False) -> Picture:
    """The picture of ``graph``. ``depth=None`` takes the deepest depth (all modules expanded first) whose
    picture holds at most ``budget`` boxes, or depth 1; at each depth, ``roll=None`` rolls repeated blocks
    only when the unrolled picture is over the budget."""
    if view not in VIEWS:
        raise ValueError(f"view must be one of {', '.join(VIEWS)}, not {view!r}")
    if depth is not None and depth < 1:
        raise ValueError(f"depth counts module levels and must be at least 1, not {depth}")
    layout = _Layout(graph, view, parameter_nodes)
    deepest = max((len(p) for p in layout.paths.values()), default=0)
    for d in [depth] if depth is not None else [None, *range(deepest, 0, -1)]:
        for rolled in [roll] if roll is not None else [False, True]:
            drawn = layout.collapse(d, rolled)
            if len(drawn.boxes) <= budget:
                return drawn
    return drawn


class _Layout:
    """The depth-independent part: which nodes are drawn or folded, and the calls each one sits in."""

    def __init__(self, graph: Graph, view: str, parameter_nodes: bool):
        shown = [n for n in graph.nodes if view == "both" or is_backward(n) == (view == "backward")]
        consumers = {}
        for node in shown:
            for x in node.inputs:
                consumers.setdefault(x, node)
        sources = [n for n in graph.nodes if n.kind in ("input", "parameter", "constant") and
                   (n in consumers or (n.kind == "input" and view != "backward"))]
        self.folded = {n for n in sources if n.kind == "constant" or n.name == "rng_seed"
                       or (n.kind == "parameter" and not parameter_nodes)}
        calls = [n for n in shown if n.kind == "call"]
        self.paths = {**call_paths([n for n in calls if not is_backward(n)]),
                      **call_paths([n for n in calls if is_backward(n)], backward=True)}
        for source in sources:
            if source not in self.folded:
                path = self.paths.get(consumers.get(source), ())
                self.paths[source] = tuple(c for c in path if is_within(source.scope, c.scope))
        for out in (n for n in shown if n.kind == "output"):
            self.paths[out] = self.paths.get(out.inputs[0], ())
        self.order = sorted(self.paths, key=lambda n: n.id)          # every node drawn, alone or collapsed
        self.calls: dict[tuple[str, bool], int] = {}
        for path in self.paths.values():
            for call in path:
                key = (call.scope, call.backward)
                self.calls[key] = max(self.calls.get(key, 0), call.index + 1)

    def collapse(self, depth: int | None, roll: bool) -> Picture:
        twin, copy, copies = self._roll(depth) if roll else ({}, {}, {})
        boxes: dict[object, Box] = {}
        box_of: dict[Node, Box] = {}
        for node in self.order:
            path = self.paths[twin.get(node, node)]
            if depth is not None and len(path) >= depth:
                key, module, cluster = path[depth - 1], path[depth - 1], path[:depth - 1]
            else:
                key, module, cluster = twin.get(node, node), None, path
            box = boxes.get(key)
            if box is None:
                box = boxes[key] = Box(node.label if module is None else f"m{node.id}", [], cluster, module)
            if node not in twin:
                box.nodes.append(node)
            box_of[node] = box
        step_of, steps = self._roll_steps(box_of) if roll else ({}, {})
        edges, seen = [], set()
        for node in sorted(box_of, key=lambda n: n.id):
            head = box_of[node]
            for slot, x in enumerate(node.inputs):
                if x in self.folded:
                    if head.module is None and node not in twin and step_of.get(node, (0, 0))[1] == 0:
                        head.folded.append((slot, x))
                    continue
                tail, value = box_of.get(x), twin.get(x, x)
                chained = any(x in c and node in c and c[x][0] == c[node][0] and c[x][1] != c[node][1]
                              for c in (copy, step_of))
                later = max(step_of.get(x, (0, 0))[1], step_of.get(node, (0, 0))[1]) > 0
                if tail is None or tail is head or chained or (tail, head, value) in seen or \
                        (later and (tail, head) in seen):
                    continue
                seen.update([(tail, head, value), (tail, head)])
                edges.append(Edge(tail, head, value, slot if head.module is None else None))
        ties, linked = [], {(e.tail, e.head) for e in edges}
        for node in self.order:
            tie = (box_of.get(node.grad_of), box_of[node])
            if tie[0] is not None and tie not in linked:
                linked.add(tie)
                ties.append(tie)
        drawn = list(dict.fromkeys(box_of.values()))
        clusters = list(dict.fromkeys(b.cluster[:i] for b in drawn for i in range(1, len(b.cluster) + 1)))
        return Picture(drawn, edges, ties, clusters, copies, steps, self.calls, depth)

    def _roll_steps(self, box_of: dict[Node, Box]) -> tuple[dict[Node, tuple[int, int]], dict[Call, str]]:
        """The steps of recurrent loops among each cluster's children, outermost first: each node of a later step
        goes to its twin box in the first step (``box_of`` is changed), whose boxes move into a step cluster.
        Returns each stepped node's (run, step number) and the step clusters with their labels."""
        step_of, steps, elided = {}, {}, set()
        boxes = list(dict.fromkeys(box_of.values()))
        for parent in sorted({b.cluster[:i] for b in boxes for i in range(len(b.cluster) + 1)}, key=len):
            items: dict[object, list[Box]] = {}
            for box in (b for b in boxes if b.cluster[:len(parent)] == parent and b not in elided):
                items.setdefault(box if len(box.cluster) == len(parent) else box.cluster[len(parent)], []).append(box)
            keys = list(items)
            signatures = [(("op", k.node.op, k.node.shape) if k.module is None else ("call", k.module.scope))
                          if isinstance(k, Box) else ("call", k.scope) for k in keys]
            for start, period, count in step_runs(signatures):
                runs = [[b for k in keys[start + i * period:start + (i + 1) * period] for b in items[k]]
                        for i in range(count)]
                if len({len(r) for r in runs}) > 1:
                    continue
                run = len(steps)
                step = Call(f"{parent[-1].scope if parent else ''}[step {run}]", 0, parent[-1].backward if parent
                            else is_backward(runs[0][0].node))
                steps[step] = f"{step_name(signatures[start:start + period])} ×{count}"
                for box in runs[0]:
                    box.cluster = parent + (step,) + box.cluster[len(parent):]
                for number, boxes_of_step in enumerate(runs):
                    twins = dict(zip(boxes_of_step, runs[0]))
                    for node, box in box_of.items():
                        if box in twins:
                            step_of[node] = (run, number)
                            box_of[node] = twins[box]
                    elided.update(boxes_of_step if number else ())
        return step_of, steps

    def _roll(self, depth: int | None):
        """The outermost chains of identical consecutive sibling blocks shown at this depth. Returns the map
        from each node of a later copy to its twin in the first copy, each rolled node's (first call, copy
        number), and the chains."""
        members: dict[Call, list[Node]] = {}
        parent: dict[Call, tuple[Call, ...]] = {}
        for node in self.order:
            path = self.paths[node]
            for i, call in enumerate(path):
                members.setdefault(call, []).append(node)
                parent[call] = path[:i]
        position = {n: i for i, n in enumerate(n for n in self.order if n.kind == "call")}
        span = {c: (min(position[n] for n in ns if n in position), max(position[n] for n in ns if n in position))
                for c, ns in members.items()}
        blocks = sorted((c for c in members if re.search(r"\.\d+$", c.scope)
                         and (depth is None or c.scope.count(".") < depth)), key=lambda c: (span[c][0], -span[c][1]))
        signatures = {c: _signature(c, members[c]) for c in blocks}
        twin, copy, copies = {}, {}, {}
        for call in blocks:
            if members[call][0] in copy:
                continue
            chain = [call]
            for other in blocks:
                last = chain[-1]
                if span[other][0] == span[last][1] + 1 and parent[other] == parent[last] \
                        and other.scope.rpartition(".")[0] == last.scope.rpartition(".")[0] \
                        and signatures[other] == signatures[call]:
                    chain.append(other)
            if len(chain) > 1:
                copies[call] = chain
                for number, block in enumerate(chain):
                    for node, first in zip(members[block], members[call]):
                        copy[node] = (call, number)
                        if number:
                            twin[node] = first
        return twin, copy, copies


def _signature(call: Call, nodes: list[Node]) -> list:
    """Ops, relative scopes, shapes, attributes and wiring of a block's nodes."""
    index = {n: i for i, n in enumerate(nodes)}
    start = len(call.scope)
    return [(n.op, n.scope[start:], n.shape, n.dtype,
             sorted((k, repr(v)) for k, v in n.attrs.items() if k != "key"),    # dropout's key numbers the node
             [index.get(x, (x.kind, x.shape)) for x in n.inputs]) for n in nodes]


def step_runs(signatures: list) -> list[tuple[int, int, int]]:
    """The steps of recurrent loops among a cluster's children: units holding a module call repeated back to
    back, or ops repeated ``STEPS_OF_OPS`` times or more (``repeated_runs``)."""
    return repeated_runs(signatures, keep=lambda unit, count: count >= STEPS_OF_OPS or
                         any(kind != "op" for kind, *_ in unit))


def step_name(unit: list) -> str:
    """``step`` for a unit holding a module call, else its ops: ``reshape``."""
    return "step" if any(kind != "op" for kind, *_ in unit) else " ".join(op for _, op, *_ in unit)


def repeated_runs(signatures: list, keep=lambda unit, count: True) -> list[tuple[int, int, int]]:
    """Runs of a unit repeated back to back in ``signatures`` (the steps of a recurrent loop among a module's
    calls and ops): ``(start, period, count)`` with count ≥ 2 and ``keep(unit, count)``, disjoint, in order. The run
    covering the most items is taken first (the shorter unit, then the earlier start, on a tie), then the
    runs in what lies before and after it."""
    best = None
    for period in range(1, len(signatures) // 2 + 1):
        for start in range(len(signatures) - 2 * period + 1):
            unit = signatures[start:start + period]
            count = 1
            while signatures[start + count * period:start + (count + 1) * period] == unit:
                count += 1
            if count > 1 and (best is None or count * period > best[1] * best[2]) and keep(unit, count):
                best = (start, period, count)
    if best is None:
        return []
    start, period, count = best
    end = start + period * count
    return [*repeated_runs(signatures[:start], keep), best,
            *((s + end, p, c) for s, p, c in repeated_runs(signatures[end:], keep))]
