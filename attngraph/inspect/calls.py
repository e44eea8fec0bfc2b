"""Module calls: which call of which module each node belongs to.

A module called once per time step leaves many nodes with the same scope, and drawing them as one box
would tie every step to every other (a cycle). The tracer records on each node the module calls it was
made in (``Node.calls``: scope and call id, a backward node carrying its forward node's), and calls are
recovered from them and from the order of creation, which is the order of tracing:

    a call of module S is a maximal run of consecutive nodes whose scope is S or lies below S, made in
    the same calls of S and of the modules around it.

So two calls of one module in a row (``block(block(x))``) are two calls. The k-th run is call k of S. A run that
comes back to a call that S's own record names (the compiler's passes place a fused or merged node of another
module between the nodes of one call) continues that call: a module called once is one call in an optimized
graph too. A module never called itself (only its sub-modules, from a method of its own: a recurrent cell's
``step``) has no record of its own, and each of its runs is a call. Only
op calls take part (``call_paths`` is given them); inputs, parameters, constants and outputs are placed by
their users. The forward and the backward pass are numbered separately; the backward pass revisits the
calls in reverse, so its runs are numbered from the last to the first: ∇ call k is the backward of call k
where each call's backward is one run.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

from ..core.graph import Node, is_gradient_output


class Call(NamedTuple):
    scope: str
    index: int
    backward: bool = False


def ancestors(scope: str) -> list[str]:
    """``"a.b.c"`` -> ``["a", "a.b", "a.b.c"]``; the root scope ``""`` has none."""
    parts = scope.split(".") if scope else []
    return [".".join(parts[:i + 1]) for i in range(len(parts))]


def short_name(scope: str) -> str:
    """A scope's own name, without its parent's path: ``attn`` for ``layers.0.attn``; a bare number keeps
    its parent's name (``layers.0``)."""
    parent, _, name = scope.rpartition(".")
    return f"{parent.rpartition('.')[2]}.{name}" if name.isdigit() and parent else name


def is_within(scope: str, module: str) -> bool:
    """Whether ``scope`` is ``module`` or lies below it (every scope lies within the root ``""``)."""
    return not module or scope == module or scope.startswith(module + ".")


def is_backward(node: Node) -> bool:
    """Nodes of the backward pass: those autodiff emitted, and the ``grad:<name>`` outputs."""
    return node.grad_of is not None or is_gradient_output(node)


def call_paths(nodes: Iterable[Node], backward: bool = False) -> dict[Node, tuple[Call, ...]]:
    """For each node (in creation order), the chain of module calls it runs in, outermost first."""
    counts: Counter = Counter()
    recorded: dict[tuple[str, tuple], Call] = {}     # (scope, made_in) -> its call, where S's own call is recorded
    paths: dict[Node, tuple[Call, ...]] = {}
    previous: tuple[Call, ...] = ()
    previous_ids: list[tuple] = []
    for node in nodes:
        chain, ids = [], []
        for depth, scope in enumerate(ancestors(node.scope)):
            made_in = tuple(call for module, call in node.calls if is_within(scope, module))
            own = any(module == scope for module, _ in node.calls)
            if depth < len(previous) and previous[depth].scope == scope and previous_ids[depth] == made_in:
                chain.append(previous[depth])
            elif own and (scope, made_in) in recorded:
                chain.append(recorded[(scope, made_in)])
            else:
                chain.append(Call(scope, counts[scope], backward))
                counts[scope] += 1
                if own:
                    recorded[(scope, made_in)] = chain[-1]
            ids.append(made_in)
        paths[node], previous, previous_ids = tuple(chain), tuple(chain), ids
    if backward:
        paths = {node: tuple(c._replace(index=counts[c.scope] - 1 - c.index) for c in path)
                 for node, path in paths.items()}
    return paths
