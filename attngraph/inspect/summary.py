"""``summary(graph)``: the module tree with output shapes, parameters, FLOPs and memory, as data and as text.

    >>> s = graph.summary(B=32, T=128)      # bind the symbolic dimensions (unbound ones count as 1)
    >>> print(s)                           # the table
    >>> s.rows[0]["parameters"], s.flops   # the same numbers as data
    >>> model.summary(tokens=ag.Input(("B", "T"), "int64"))    # with each module's class

One row per module scope, in tree order (children under their parent, siblings in the order they first
ran). A module's type is its class, when the traced ``model`` is given. A module's parameters, trainable
parameters and FLOPs include its sub-modules'; its FLOPs add up all its calls; its input and output shapes
are those of its first call (see ``calls`` for what a call is): the values it takes from outside it (not
parameters or constants) and those it hands out. A module's calls are counted as those that run ops of its
own; a module none of whose calls does (a container, or a recurrent cell whose gates its layer computes) counts
as many calls as its most called sub-module: a GRUCell unrolled over 4 words, its ``input`` Linear run once for
every step at once and its ``hidden`` Linear once per step, shows 4 calls, not the 5 runs of its sub-modules. The traced model's own ops that use a sub-module's parameter (a tied
output head: GPT's logits h @ token_embed.weightᵀ) get a row of their own, as torchinfo lists a tied head,
named by the op and the parameter, whose parameters are counted in their module's row. A ``scan`` (a time
loop as one node, core/prims/recurrence.py) counts its body's FLOPs × its T steps where it runs, and each module
called in its body counts its ops there × T and T calls (per call in the step), as the unrolled loop would; the
parameters its body reads are the outer graph's, counted once in their modules. The rows' shapes show
the sizes given (``B=2`` makes B×T×64 2×T×64; the footer's inputs keep the names that the sizes bind); the
graph's ``rng_seed`` input, which the executor feeds dropout by itself, is not listed. FLOPs count the forward pass; a graph holding a backward
pass (``graph.grad()``) reports it separately in ``backward_flops``. Memory estimates: parameters, and
activations = every forward intermediate at once (what training keeps for the backward pass), at the binding
used. The footer gives the graph's inputs and the size of each symbolic dimension, saying which were not
given.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..core.dims import resolve, symbols
from ..core.graph import Graph, Node, graph_method
from ..core.body import rows_as
from .calls import Call, ancestors, call_paths, is_backward, short_name
from .flops import binding, describe_binding, format_bytes, format_count, loop_flops, node_bytes, node_flops
from .table import table

COLUMNS = ("module", "type", "calls", "input", "output", "parameters", "% params", "FLOPs", "trainable")
LEFT = ("module", "type", "input", "output")        # the columns aligned left
RNG_SEED = "rng_seed"       # the input that the executor feeds dropout by itself (core/executor.py): not listed


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
    inputs: dict[str, str] = field(default_factory=dict)     # the graph's inputs: name -> "B×T int64"
    defaulted: list[str] = field(default_factory=list)       # the symbolic dimensions not given (bound to 1)

    def __str__(self) -> str:
        lines = table(COLUMNS, [("  " * (r["depth"] - 1) + r.get("label", short_name(r["module"])), r["type"],
                                 str(r["calls"]), r["input"], r["output"], f"{r['parameters']:,}",
                                 f"{r['percent']:.1f}", format_count(r["flops"]), f"{r['trainable']:,}")
                                for r in self.rows], LEFT)
        at = f" at {describe_binding(self.bindings)}" if self.bindings else ""
        rule = "─" * max(map(len, lines))
        lines[1:1] = [rule]
        lines += [rule, "inputs       " + ", ".join(f"{name} {shape}" for name, shape in self.inputs.items())]
        if self.bindings:
            given = {k: v for k, v in self.bindings.items() if k not in self.defaulted}
            lines.append("sizes        " + "; ".join(
                ([describe_binding(given)] if given else [])
                + ([f"{', '.join(self.defaulted)} not given: counted as 1"] if self.defaulted else [])))
        lines += [f"parameters   {self.parameters:,} ({self.trainable:,} trainable), {format_bytes(self.parameter_bytes)}",
                  f"FLOPs        {format_count(self.flops, 'FLOPs')} per forward pass{at} (a multiply-add is 2)"]
        if self.backward_flops:
            lines.append(f"             {format_count(self.backward_flops, 'FLOPs')} for the backward pass")
        lines.append(f"activations  {format_bytes(self.activation_bytes)} for every forward intermediate{at}")
        return "\n".join(lines)

    __repr__ = __str__


@graph_method("summary")
def summary(graph: Graph, depth: int | None = None, model=None, **sizes: int) -> Summary:
    """The module tree of ``graph`` down to ``depth`` (default: all), symbolic dimensions bound by ``sizes``;
    ``model``, the module traced, gives each row's type (else left empty)."""
    bindings = binding(graph, **sizes)
    types = {} if model is None else {path: type(m).__name__ for path, m in model.named_modules()}
    forward = [n for n in graph.nodes if n.kind == "call" and not is_backward(n)]
    params = list(graph.parameters.values())
    flops = {n: node_flops(n, bindings) for n in forward}
    calls = _calls(call_paths(forward))
    first: dict[str, int] = {}
    module_flops: Counter = Counter()
    for call, members in calls.items():
        first[call.scope] = min(first.get(call.scope, members[0].id), members[0].id)
        module_flops[call.scope] += sum(flops[n] for n in members)
    looped = [_Loop(node, bindings) for node in forward if node.op == "scan"]
    looped_calls: Counter = Counter()
    for loop in looped:
        for scope in [*loop.flops, *loop.members]:
            first.setdefault(scope, loop.node.id)
        module_flops.update(loop.flops)
        looped_calls.update(loop.calls)
    module_params: Counter = Counter()
    module_trainable: Counter = Counter()
    for p in params:
        for scope in ancestors(p.scope):
            first[scope] = min(first.get(scope, p.id), p.id)
            module_params[scope] += p.value.size
            module_trainable[scope] += 0 if p.stop_gradient else p.value.size
    total = sum(p.value.size for p in params)
    users = graph.users()
    given = {k: v for k, v in bindings.items() if k in sizes}
    counts = _call_counts(first, calls, looped_calls)
    inner = {scope: loop for loop in reversed(looped) for scope in loop.members}
    rows = []
    for scope in sorted(first, key=lambda s: tuple(first[a] for a in ancestors(s))):
        if depth is not None and scope.count(".") >= depth:
            continue
        mine = [c for c in calls if c.scope == scope]
        shapes = (_inputs(calls[mine[0]], given), _outputs(calls[mine[0]], users, given)) if mine else \
            inner[scope].shapes(scope, given) if scope in inner else ("", "")
        rows.append(dict(module=scope, type=types.get(scope, ""), depth=scope.count(".") + 1, calls=counts[scope],
                         input=shapes[0], output=shapes[1],
                         parameters=module_params[scope],
                         percent=100 * module_params[scope] / total if total else 0.0,
                         flops=module_flops[scope], trainable=module_trainable[scope]))
    for node, names in _tied(forward, flops).items():
        top = min((i for i, row in enumerate(rows) if row["depth"] == 1 and first.get(row["module"], -1) > node.id),
                  default=len(rows))
        rows.insert(top, dict(module="", label=f"{node.op}({', '.join(names)})", type="tied", depth=1, calls=1,
                              input=_inputs([node], given), output=shape_text(node, given), parameters=0,
                              percent=0.0, flops=flops[node], trainable=0))
    backward = [n for n in graph.nodes if is_backward(n)]
    return Summary(rows, total, sum(p.value.size for p in params if not p.stop_gradient), sum(flops.values()),
                   sum(node_flops(n, bindings) for n in backward), sum(node_bytes(p, bindings) for p in params),
                   sum(node_bytes(n, bindings) for n in forward), bindings,
                   {name: f"{shape_text(n)} {n.dtype}" for name, n in graph.inputs.items()
                    if name != RNG_SEED},
                   [name for name in bindings if name not in sizes])


class _Loop:
    """What a ``scan`` node's body adds to the rows of the modules it calls that the scan does not run in: FLOPs
    (the body's op by op × T), calls (each call in the step × T) and, per module, its first call in the step."""

    def __init__(self, node: Node, bindings: dict[str, int]):
        self.node, self.batch = node, node.shape[0]
        body = node.attrs["body"].graph
        steps = resolve(node.shape[1], bindings)
        around = set(ancestors(node.scope))         # the scopes whose rows count the scan node whole
        self.flops: Counter = Counter()
        for op, work in loop_flops(node, bindings).items():
            self.flops.update({scope: work for scope in ancestors(op.scope) if scope not in around})
        self.members: dict[str, list[Node]] = {}
        self.calls: Counter = Counter()
        for call, members in _calls(call_paths(n for n in body.nodes if n.kind == "call")).items():
            if call.scope not in around:
                self.members.setdefault(call.scope, members)
                self.calls[call.scope] += steps if any(n.scope == call.scope for n in members) else 0
        self.users = body.users()
        self.weights = {body.inputs[name] for name, x in zip(node.attrs["body"].names, node.inputs)
                        if x.op in ("parameter", "constant")}

    def shapes(self, scope: str, given: dict[str, int]) -> tuple[str, str]:
        """The input and output shapes of the module's first call in the step, ``rows`` shown as the batch."""
        def shape_of(node):
            return rows_as(node.shape, self.batch)
        members = self.members[scope]
        return _inputs(members, given, shape_of, self.weights), _outputs(members, self.users, given, shape_of)


def _calls(paths: dict[Node, tuple[Call, ...]]) -> dict[Call, list[Node]]:
    """Each call's nodes, from every node's path of calls."""
    calls: dict[Call, list[Node]] = {}
    for node, path in paths.items():
        for call in path:
            calls.setdefault(call, []).append(node)
    return calls


def _call_counts(scopes, calls: dict[Call, list[Node]], looped: Counter) -> dict[str, int]:
    """The calls of each module of ``scopes`` (module docstring), the deepest first; ``looped`` the calls each
    makes in the steps of loops (scan bodies)."""
    counts: dict[str, int] = {}
    for scope in sorted(scopes, key=lambda s: -s.count(".")):
        own = looped[scope] + sum(c.scope == scope and any(n.scope == scope for n in members)
                                  for c, members in calls.items())
        children = [n for child, n in counts.items() if child.rpartition(".")[0] == scope]
        counts[scope] = own or max(children, default=sum(c.scope == scope for c in calls))
    return counts


def _tied(forward: list[Node], flops: dict[Node, int]) -> dict[Node, list[str]]:
    """The traced model's own ops (scope "") with FLOPs that read a sub-module's parameter, directly or through
    its own ops without FLOPs (a transpose): each with the parameters' names."""
    reached: dict[Node, list[str]] = {}
    for node in forward:
        if node.scope or node.op == "scan":         # a scan's body counts its ops in the modules it calls
            continue
        names = [x.name for x in node.inputs if x.op == "parameter" and x.scope]
        names += [name for x in node.inputs if flops.get(x) == 0 for name in reached.get(x, [])]
        reached[node] = list(dict.fromkeys(names))
    return {n: names for n, names in reached.items() if names and flops[n] > 0}


def _inputs(members: list[Node], given: dict[str, int] | None = None, shape_of=None, weights=frozenset()) -> str:
    """The shapes of the values a call takes: its nodes' inputs made outside it, other than parameters, constants
    and ``weights`` (a body's inputs that parameters feed), each once (``shape_of(node)``: a node's shape as shown,
    its own by default)."""
    inside = set(members)
    taken = dict.fromkeys(x for n in members for x in n.inputs if x not in inside and x not in weights
                          and x.op not in ("parameter", "constant") and x.name != RNG_SEED)
    return ", ".join(dims_text(shape_of(x) if shape_of else x.shape, given) for x in taken)


def _outputs(members: list[Node], users: dict[Node, list[Node]], given: dict[str, int] | None = None,
             shape_of=None) -> str:
    """The shapes of the values a call hands out: its nodes used outside it by the forward pass."""
    inside = set(members)
    return ", ".join(dims_text(shape_of(n) if shape_of else n.shape, given) for n in members
                     if any(u not in inside and not is_backward(u) for u in users[n]))


def shape_text(node: Node, given: dict[str, int] | None = None) -> str:
    """``B×T×64``, with the dimensions whose symbols ``given`` binds as numbers (``B=2``: ``2×T×64``); ``scalar``
    for a 0-d value."""
    return dims_text(node.shape, given)


def dims_text(shape: tuple, given: dict[str, int] | None = None) -> str:
    """``shape_text`` of a shape."""
    given = given or {}
    return "×".join(str(resolve(d, given) if symbols(d) <= given.keys() else d) for d in shape) or "scalar"
