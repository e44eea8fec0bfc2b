"""The graph IR: an ordered list of nodes, each an input, parameter, constant, op call or output.

Nodes are appended in creation order, which is already a topological order; passes that reorder use
``Graph.topological_order()``, computed iteratively so that graphs of any depth work.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Any, Iterable

import numpy as np

from ..errors import DTypeError, TracingError
from .dims import Shape, format_shape

SOURCE_KINDS = ("input", "parameter", "constant")
KINDS = SOURCE_KINDS + ("call", "output")
GRADIENT_PREFIX = "grad:"       # Graph.grad's outputs: grad:<input or parameter> (gradient_name)
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16))
DTYPES = FLOAT_DTYPES + tuple(map(np.dtype, (bool, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                             np.uint32, np.uint64)))
"""The dtypes of values (NumPy's native byte order; float16 is stored, and computed in float32: core/half.py):
bfloat16, float128, complex, strings, dates and objects are refused when a node is made, not deep inside a kernel."""


def unsupported_dtype(dtype, what: str, allowed: tuple[np.dtype, ...] = DTYPES) -> DTypeError:
    """The error for ``what`` having ``dtype``, which is not one of ``allowed``."""
    if str(dtype) == "bfloat16":        # ml_dtypes' (JAX's), or the name: NumPy has no bfloat16 arithmetic
        return DTypeError(f"{what} has dtype bfloat16, which attngraph does not store or compute in (NumPy has no "
                          "bfloat16): use float16 to halve memory, or float32 (x.astype(np.float32) converts it "
                          "exactly)")
    return DTypeError(f"{what} has dtype {dtype}, which attngraph does not compute in; use one of "
                      f"{', '.join(map(str, allowed))} (cast with .astype(...))")


@dataclass(eq=False)
class Node:
    """One value of the graph.

    ``op`` is ``"input"``, ``"parameter"``, ``"constant"``, ``"output"`` or the name of a registered
    primitive. ``value`` holds a constant's array or a parameter's ``Parameter``. ``grad_of`` links a node
    of the backward pass to the forward node whose gradient it helps compute. ``calls`` are the module calls
    the node was made in, outermost first, as (scope, call id) pairs (a backward node has its forward
    node's): drawings tell two calls of one module apart by them.
    """

    id: int
    op: str
    inputs: tuple["Node", ...]
    attrs: dict[str, Any]
    shape: Shape
    dtype: np.dtype
    scope: str = ""
    name: str | None = None
    source: str = ""
    value: Any = None
    stop_gradient: bool = False
    grad_of: "Node | None" = None
    calls: tuple[tuple[str, int], ...] = ()

    @property
    def kind(self) -> str:
        return self.op if self.op in SOURCE_KINDS or self.op == "output" else "call"

    @property
    def label(self) -> str:
        return f"n{self.id}"

    @property
    def size(self) -> int | None:
        """Number of elements, or None when the shape is symbolic."""
        return prod(self.shape) if all(isinstance(d, int) for d in self.shape) else None

    def describe(self) -> str:
        """One line for error messages: id, op, name, scope, shape and source."""
        parts = [f"node {self.label} ({self.op}"]
        if self.name:
            parts.append(f" '{self.name}'")
        parts.append(f", shape {format_shape(self.shape)} {self.dtype})")
        if self.grad_of is not None:
            parts.append(f", gradient of {self.grad_of.label} ({self.grad_of.op})")
        if self.scope:
            parts.append(f" in scope '{self.scope}'")
        if self.source:
            parts.append(f" created at {self.source}")
        return "".join(parts)

    def __repr__(self) -> str:
        """One line, its inputs by id (the dataclass's repr would recurse into the whole graph above it):
        ``Node(n17 matmul(n9, n12) (B, T, 64) float32 'scores' gradient of n5 in scope 'attn')``."""
        args = f"({', '.join(x.label for x in self.inputs)})" if self.inputs else ""
        name = f" '{self.name}'" if self.name else ""
        grad = f" gradient of {self.grad_of.label}" if self.grad_of is not None else ""
        scope = f" in scope '{self.scope}'" if self.scope else ""
        return f"Node({self.label} {self.op}{args} {format_shape(self.shape)} {self.dtype}{name}{grad}{scope})"


def gradient_name(name: str) -> str:
    """The name of the output holding the gradient with respect to the input or parameter ``name``."""
    return GRADIENT_PREFIX + name


def gradient_target(name: str) -> str:
    """The input or parameter that the gradient output ``name`` (``gradient_name``'s) is taken with respect to."""
    return name.removeprefix(GRADIENT_PREFIX)


def is_gradient_output(node: Node) -> bool:
    """An output holding a gradient: named by ``gradient_name``, or reading a node that autodiff emitted."""
    return node.op == "output" and (node.name.startswith(GRADIENT_PREFIX) or node.inputs[0].grad_of is not None)


def topological_order(roots: Iterable[Node]) -> list[Node]:
    """Every node the roots depend on, each after its inputs; an iterative depth-first search."""
    order, done, on_stack = [], set(), set()
    for root in roots:
        if root in done:
            continue
        stack = [(root, iter(root.inputs))]
        on_stack.add(root)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                on_stack.discard(node)
                done.add(node)
                order.append(node)
            elif child not in done:
                if child in on_stack:
                    raise ValueError(f"graph has a cycle through {child.describe()}")
                on_stack.add(child)
                stack.append((child, iter(child.inputs)))
    return order


@dataclass(eq=False)
class Graph:
    """Nodes in creation order, with the named inputs and the outputs of the computation.

    The layers above the IR give it their methods (``graph_method``), so that this module imports none of them:
    ``compile`` (core/executor.py), ``grad`` (core/autodiff.py), ``render``, ``to_html`` and the notebook's SVG
    (render/), ``summary`` (inspect/), ``export_onnx`` (export/)."""

    nodes: list[Node] = field(default_factory=list)
    inputs: dict[str, Node] = field(default_factory=dict)
    outputs: list[Node] = field(default_factory=list)

    def add(self, op: str, inputs: Iterable[Node], attrs: dict, shape: Shape, dtype, **fields) -> Node:
        """Append a node. Its dtype must be one of ``DTYPES``; the names of inputs and parameters are unique
        among both (``grad(wrt=[name])`` and the executor's feeds select them by name)."""
        node = Node(len(self.nodes), op, tuple(inputs), attrs, tuple(shape), np.dtype(dtype), **fields)
        if node.dtype not in DTYPES:
            raise unsupported_dtype(node.dtype, node.describe())
        if op in ("input", "parameter"):
            self._check_name(node)
        self.nodes.append(node)
        if op == "input":
            self.inputs[node.name] = node
        elif op == "output":
            self.outputs.append(node)
        return node

    def _check_name(self, node: Node) -> None:
        taken = self.inputs.get(node.name) or next(
            (n for n in self.nodes if n.op == "parameter" and n.name == node.name), None)
        if taken is not None:
            raise TracingError(f"{node.describe()}: {node.name!r} already names {taken.describe()}; inputs and "
                               "parameters need distinct names (Graph.grad and the feeds select them by name)")

    @property
    def parameters(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes if n.op == "parameter"}

    @property
    def output_names(self) -> list[str]:
        return [n.name for n in self.outputs]

    def output(self, name: str) -> Node:
        for node in self.outputs:
            if node.name == name:
                return node
        raise KeyError(f"graph has no output {name!r}; outputs: {self.output_names}")

    def topological_order(self, roots: Iterable[Node] | None = None) -> list[Node]:
        """The nodes that ``roots`` (default: the outputs) depend on, inputs before users."""
        return topological_order(self.outputs if roots is None else roots)

    def copy(self, roots: Iterable[Node] | None = None) -> tuple["Graph", dict[Node, Node]]:
        """A copy holding the nodes ``roots`` (default: the outputs) depend on, in their original order
        (renumbered), and the map from old nodes to new. Parameters keep pointing at the same ``Parameter`` objects."""
        result, mapping = Graph(), {}
        live = set(self.topological_order(roots))
        for node in (n for n in self.nodes if n in live):
            mapping[node] = result.add(
                node.op, [mapping[x] for x in node.inputs], dict(node.attrs), node.shape, node.dtype,
                scope=node.scope, name=node.name, source=node.source, value=node.value,
                stop_gradient=node.stop_gradient, calls=node.calls)
        for old, new in mapping.items():
            new.grad_of = mapping.get(old.grad_of)
        for name, node in self.inputs.items():
            if node not in mapping:
                mapping[node] = result.add("input", (), {}, node.shape, node.dtype, name=name, scope=node.scope,
                                           source=node.source, stop_gradient=node.stop_gradient)
        return result, mapping

    def users(self) -> dict[Node, list[Node]]:
        """For every node, the nodes that take it as an input."""
        users: dict[Node, list[Node]] = {n: [] for n in self.nodes}
        for node in self.nodes:
            for x in node.inputs:
                users[x].append(node)
        return users

    def to_networkx(self):
        """A ``networkx.DiGraph`` with one vertex per node (keyed ``n17``) and an edge per input slot."""
        import networkx as nx

        g = nx.DiGraph()
        for n in self.nodes:
            param = n.value.data.size if n.op == "parameter" else 0
            g.add_node(n.label, op=n.op, kind=n.kind, shape=n.shape, dtype=str(n.dtype), scope=n.scope,
                       name=n.name, source=n.source, parameter_size=param,
                       grad_of=n.grad_of.label if n.grad_of is not None else None)
        for n in self.nodes:
            for slot, x in enumerate(n.inputs):
                g.add_edge(x.label, n.label, slot=slot, shape=x.shape)
        return g

    def with_outputs(self, extra: dict[str, Node]) -> "Graph":
        """A copy of this graph that also outputs the given nodes of it (e.g. attention weights to plot), those that
        feed none of its outputs included."""
        result, mapping = self.copy([*self.outputs, *extra.values()])
        for name, node in extra.items():
            if node not in mapping:
                raise KeyError(f"{node.describe()} is not a node of this graph")
            result.add("output", (mapping[node],), {}, node.shape, node.dtype, name=name, stop_gradient=True)
        return result

    def __repr__(self) -> str:
        calls = sum(n.kind == "call" for n in self.nodes)
        return (f"Graph({len(self.nodes)} nodes, {calls} op calls, inputs {list(self.inputs)}, "
                f"outputs {self.output_names})")


def graph_method(name: str):
    """Decorator: make ``function(graph, ...)`` callable as ``graph.<name>(...)`` as well. The layers above the
    IR define Graph's methods this way, each beside the function it stands for."""
    def attach(function):
        setattr(Graph, name, function)
        return function
    return attach
