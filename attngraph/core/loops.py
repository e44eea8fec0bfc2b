"""``ag.scan``: a loop over time traced as one ``scan`` node (core/prims/recurrence.py) instead of unrolled.

    final, ys = ag.scan(step, init, xs)          step(carry, x_t) -> (carry, y_t)

``init`` is the carry: a tensor (B, …) or a tuple of them (an LSTM's (h, c)); ``xs`` a sequence (B, T, …) or a tuple of
them, read one time step x_t = x[:, t] at a time (a tuple of steps for a tuple); ``y_t`` a tensor, a tuple of them, or
None. ``ys`` holds the y_t stacked on axis 1 (B, T, …) and ``final`` the carry after the last step. ``reverse=True``
runs t from T−1 down to 0 (ys stay in time order). As in JAX, the step reads any tensor of the enclosing trace and any
parameter (they become the loop's constants) and is traced once, so T may be symbolic.

The carry and the y_t share one floating dtype and have concrete sizes past the batch: a step's carry and outputs are
packed into one row per example, (B, C + …), the scan's output, and unpacked outside. A y_t that is a part of the new
carry (a GRU's h) is read from the carry, not stored twice. Work in the step that depends on neither the carry nor
x_t (an attention's projection of the encoder's memory) is hoisted out of the loop: computed once, before it.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Sequence

import numpy as np

from ..errors import DTypeError, ShapeError, TracingError
from . import tensor as F
from .dims import divide, format_shape, multiply, symbols
from .graph import Graph, Node
from .body import ROWS, Body, packed, rows_as
from .tracing import STATE, current_graph, owns, parameter_node, scope, user_source

__all__ = ["scan"]


def scan(step: Callable, init, xs, reverse: bool = False):
    """``final, ys`` of ``step`` run over the time axis (1) of ``xs`` from ``init`` (see the module docstring)."""
    if not callable(step):
        raise TracingError(f"scan's step must be a function step(carry, x_t) -> (new carry, y_t), got "
                           f"{type(step).__name__} (at {user_source()})")
    carry_leaves, carry_tree = _leaves("init", init)
    x_leaves, x_tree = _leaves("xs", xs)
    if not x_leaves:
        raise ShapeError(f"scan needs at least one sequence in xs (at {user_source()})")
    batch, dtype = carry_leaves[0].shape[0] if carry_leaves[0].shape else None, carry_leaves[0].dtype
    for what, leaves, rank in (("init", carry_leaves, 1), ("xs", x_leaves, 2)):
        for leaf in leaves:
            if len(leaf.shape) < rank or leaf.shape[0] != batch:
                raise ShapeError(f"scan's {what} must be {'(B, …)' if rank == 1 else '(B, T, …)'} of one batch B; "
                                 f"got {format_shape(leaf.shape)} beside {format_shape(carry_leaves[0].shape)} "
                                 f"(at {user_source()})")
    if len({x.shape[1] for x in x_leaves}) != 1:
        raise ShapeError(f"scan's sequences must have one length: {', '.join(format_shape(x.shape) for x in x_leaves)}"
                         f" (at {user_source()})")
    if x_leaves[0].shape[1] == 0:
        raise ShapeError(f"scan runs at least one time step; its sequences are empty: "
                         f"{', '.join(format_shape(x.shape) for x in x_leaves)} (at {user_source()})")
    carry_shapes = [_row_shape("scan's init", leaf, dtype) for leaf in carry_leaves]
    layout = {}

    def step_row(carry, *x_t):
        parts, start = [], 0
        for shape in carry_shapes:
            size = int(np.prod(shape))
            parts.append(F.reshape(F.index(carry, (slice(None), slice(start, start + size))), (ROWS, *shape)))
            start += size
        result = step(carry_tree(parts), x_tree(list(x_t)))
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise TracingError(f"scan's step must return a pair (new carry, y_t), y_t a tensor, a tuple of them or "
                               f"None; got {_kind(result)} (at {user_source()})")
        new, y = result
        new_leaves = _in_body("its new carry", _leaves("the step's new carry", new)[0])
        if [(n.shape[1:], n.dtype) for n in new_leaves] != [(s, dtype) for s in carry_shapes]:
            raise ShapeError(f"scan's step must return a carry like init ({_describe(carry_shapes, dtype)}), got "
                             f"{', '.join(f'{format_shape(n.shape)} {n.dtype}' for n in new_leaves)} "
                             f"(at {user_source()})")
        y_leaves, layout["ys"] = _leaves("the step's output", y) if y is not None else ([], None)
        y_leaves = _in_body("an output", y_leaves)
        columns, pieces = _columns(new_leaves, y_leaves, dtype)
        layout["columns"] = columns
        return packed(map(F.Tensor, pieces))

    body, consts = trace_body(step_row, (sum(int(np.prod(s)) for s in carry_shapes),), dtype,
                              [(x.shape[2:], x.dtype) for x in x_leaves], batch=batch)
    flat_init = F.concat([F.reshape(F.Tensor(leaf), (batch, -1)) for leaf in carry_leaves], axis=1)
    out = F.emit("scan", flat_init, *map(F.Tensor, x_leaves), *consts, body=body, reverse=bool(reverse))
    length = x_leaves[0].shape[1]
    last = out[:, 0] if reverse else out[:, -1]
    finals = [F.reshape(F.index(last, (slice(None), slice(a, b))), (batch, *shape))
              for (a, b), shape in zip(layout["columns"][:len(carry_shapes)], carry_shapes)]
    ys = [F.reshape(F.index(out, (slice(None), slice(None), slice(a, b))), (batch, length, *shape))
          for (a, b), shape in layout["columns"][len(carry_shapes):]]
    return carry_tree(finals), (layout["ys"](ys) if layout["ys"] is not None else None)


def _leaves(what: str, tree) -> tuple[list[Node], Callable]:
    """The nodes of a tensor or a tuple/list of tensors, and the function rebuilding that structure from a list."""
    if isinstance(tree, (tuple, list)):
        nodes = [F.as_node(x) for x in tree]
        return nodes, (lambda items: tuple(F.Tensor(x) if isinstance(x, Node) else x for x in items))
    if tree is None:
        raise TracingError(f"scan's {what} is None; give a tensor or a tuple of tensors")
    return [F.as_node(tree)], (lambda items: F.Tensor(items[0]) if isinstance(items[0], Node) else items[0])


def _kind(value) -> str:
    """What a step returned, for an error."""
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return F.as_node(value).describe() if isinstance(value, (F.Tensor, Node)) else type(value).__name__


def _in_body(what: str, nodes: list[Node]) -> list[Node]:
    """The step's returned tensors as nodes of the body: one of the enclosing trace returned as it is (the initial
    state, a memory) becomes the body's input for it; each must have the loop's batch first."""
    graph, inside = current_graph(), []
    for node in nodes:
        if not owns(graph, node):
            node = STATE.lift.lift(node) or node
        if not node.shape or node.shape[0] != ROWS:
            raise ShapeError(f"scan's step returned {node.describe()} as {what}: it must be (B, …), the batch of "
                             f"init first (at {user_source()})")
        inside.append(node)
    return inside


def _row_shape(what: str, node: Node, dtype) -> tuple:
    """``node``'s shape past the batch, refused when the row that packs the carry and outputs cannot hold it."""
    shape = node.shape[1:]
    if dtype.kind != "f" or node.dtype != dtype:
        raise DTypeError(f"{what} must be floating point, of the dtype of init ({dtype}): the carry is "
                         f"differentiated and packed with the outputs into one row per example; got "
                         f"{format_shape(node.shape)} {node.dtype} (at {user_source()})")
    if any(isinstance(d, str) for d in shape):
        raise ShapeError(f"{what} must have concrete sizes past the batch (packed into one row per example); "
                         f"got {format_shape(node.shape)} (at {user_source()})")
    return shape


def _describe(shapes, dtype) -> str:
    return ", ".join(f"{format_shape((ROWS, *s))} {dtype}" for s in shapes)


def _columns(carry: list[Node], ys: list[Node], dtype) -> tuple[list, list[Node]]:
    """Where each carry part and y_t lies in the packed row, (start, stop) and the shape past the batch for the y_t,
    and the nodes to pack: a y_t that is a carry part is read from the carry's columns."""
    columns, pieces, start, where = [], [], 0, {}
    for node in carry:
        size = int(np.prod(node.shape[1:]))
        where.setdefault(node, (start, start + size))
        columns.append((start, start + size))
        pieces.append(node)
        start += size
    for node in ys:
        shape = _row_shape("an output y_t of scan's step", node, dtype)
        if node not in where:
            size = int(np.prod(shape))
            where[node] = (start, start + size)
            pieces.append(node)
            start += size
        columns.append((where[node], shape))
    return columns, pieces


class Lifting:
    """While a body is traced: each tensor of the enclosing trace it reads becomes one of its inputs (``lift``; a
    tensor of ``batch`` rows computed from an input is batched: its rows become ``rows``), and a shape read from such
    a tensor names the batch ``rows`` too (``rows``), so that the step's code may mix them."""

    def __init__(self, outer: Graph, graph: Graph, batch, enclosing: "Lifting | None"):
        self.outer, self.graph, self.batch, self.enclosing = outer, graph, batch, enclosing
        self.inputs: dict[Node, Node] = {}          # the enclosing trace's node -> the body's input standing for it

    def lift(self, node: Node) -> Node | None:
        if not owns(self.outer, node):
            node = self.enclosing.lift(node) if self.enclosing is not None else None
            if node is None:
                return None
        if node not in self.inputs:
            batched = self.batch is not None and node.shape[:1] == (self.batch,) and _from_inputs(node)
            self.inputs[node] = self.graph.add("input", (), {}, (ROWS, *node.shape[1:]) if batched else node.shape,
                                               node.dtype, name=f"l{len(self.inputs)}", scope=node.scope)
        return self.inputs[node]

    @property
    def sources(self) -> dict[Node, Node]:
        """Each body input made so far -> the enclosing trace's node it stands for."""
        return {lifted: node for node, lifted in self.inputs.items()}

    def rows(self, shape, source=None) -> tuple:
        """``shape`` with the enclosing batch as ``rows``: a symbolic batch wherever it is a factor, a concrete one as
        the first dimension, unless ``source``, the shape of a reshape's input (whose size the result keeps), holds
        no rows: a parameter (64,) reshaped to (64, 1) in a batch of 64 stays (64, 1)."""
        if isinstance(self.batch, str):
            return tuple(multiply(divide(d, self.batch), ROWS) if isinstance(d, str) and self.batch in symbols(d)
                         else d for d in shape)
        if source is not None and not any(isinstance(d, str) and ROWS in symbols(d) for d in source):
            return tuple(shape)
        if self.batch is not None and shape and shape[0] == self.batch:
            return (ROWS, *shape[1:])
        return tuple(shape)


@contextmanager
def _tracing_into(graph: Graph, lift: Lifting):
    """Emit into ``graph``, keeping the enclosing trace's scopes and names; tensors of the enclosing trace become
    inputs of ``graph`` through ``lift``, parameters become parameter nodes of ``graph`` (made constants after)."""
    saved = STATE.graph, STATE.parameters, STATE.grad_of, STATE.lift
    STATE.graph, STATE.parameters, STATE.grad_of, STATE.lift = graph, {}, None, lift
    try:
        yield
    finally:
        STATE.graph, STATE.parameters, STATE.grad_of, STATE.lift = saved


def trace_body(step: Callable, carry: tuple, dtype, slices: Sequence[tuple], batch=None) -> tuple[Body, list]:
    """``step(carry, *slices)`` traced into a ``Body``. ``carry`` is the carry's shape past the batch and ``slices``
    (shape past the batch, dtype) of one step of each sequence. The body's constants are what the step reads of the
    enclosing trace (a tensor of ``batch`` rows computed from an input is batched) and its parameters, the work on them
    alone hoisted out of the loop; returns (Body, their tensors in the enclosing trace)."""
    graph, outer = Graph(), current_graph()
    carry_node = graph.add("input", (), {}, (ROWS, *carry), dtype, name="carry")
    slice_nodes = [graph.add("input", (), {}, (ROWS, *shape), dt, name=f"x{i}") for i, (shape, dt) in enumerate(slices)]
    lifting = Lifting(outer, graph, batch, STATE.lift)
    with _tracing_into(graph, lifting):
        out = F.as_node(step(*map(F.Tensor, [carry_node, *slice_nodes])))
    if len(out.shape) != 2 or out.shape[0] != ROWS or out.shape[1] < carry[0]:
        raise TracingError(f"a scan's step must return rows (B, ≥ {carry[0]}), got {out.describe()}")
    sources = {**lifting.sources, **{node: node.value for node in graph.nodes if node.op == "parameter"}}
    varying = {carry_node, *slice_nodes}
    for node in graph.nodes:
        if node.kind == "call" and any(x in varying for x in node.inputs):
            varying.add(node)
    if out not in varying:
        raise TracingError("a scan's step returned something that depends on neither the carry nor the time step")
    consts = list(dict.fromkeys(x for n in graph.nodes if n in varying and n.kind == "call"
                                for x in n.inputs if x not in varying and x.op != "constant"))
    body = Body(_rebuilt(graph, out, [carry_node, *slice_nodes], consts, varying), len(slices),
                [c.shape[:1] == (ROWS,) for c in consts])
    return body, _outer_values(graph, consts, sources, batch)


def _from_inputs(node: Node) -> bool:
    """Whether ``node`` is computed from an input of its graph (so that its rows are examples of the batch)."""
    from .graph import topological_order
    return any(n.op == "input" for n in topological_order([node]))


def _rebuilt(graph: Graph, out: Node, inputs: list[Node], consts: list[Node], varying: set) -> Graph:
    """The body's graph: inputs ``carry``, ``x0`` …, then ``c0`` … for ``consts``, and the ``varying`` work."""
    body, env = Graph(), {}
    for node, name in zip(inputs + consts, ["carry", *(f"x{i}" for i in range(len(inputs) - 1)),
                                             *(f"c{j}" for j in range(len(consts)))]):
        env[node] = body.add("input", (), {}, node.shape, node.dtype, name=name, scope=node.scope)
    for node in graph.nodes:
        if node in env:
            continue
        if node.op == "constant":
            env[node] = body.add("constant", (), {}, node.shape, node.dtype, value=node.value, scope=node.scope,
                                 stop_gradient=True)
        elif node in varying and node.kind == "call":
            env[node] = body.add(node.op, [env[x] for x in node.inputs], dict(node.attrs), node.shape, node.dtype,
                                 scope=node.scope, name=node.name, source=node.source,
                                 stop_gradient=node.stop_gradient, calls=node.calls)
    body.add("output", (env[out],), {}, out.shape, out.dtype, name="out", stop_gradient=True)
    return body


def _outer_values(graph: Graph, consts: list[Node], sources: dict, batch) -> list[F.Tensor]:
    """The tensors of the enclosing trace the constants stand for: a source's, or the invariant work on sources
    emitted there (``rows`` become the enclosing batch)."""
    env = {}
    for node in graph.nodes:
        if node in sources:
            source = sources[node]
            env[node] = F.Tensor(source) if isinstance(source, Node) else F.Tensor(parameter_node(source))
        elif node.op == "constant":
            env[node] = F.constant(node.value)
        elif node.kind == "call" and all(x in env for x in node.inputs):
            attrs = {k: rows_as(v, batch) if k == "shape" else v for k, v in node.attrs.items()}
            with scope(node.scope):         # the module that does the work, not the loop's caller
                env[node] = F.emit(node.op, *(env[x] for x in node.inputs), **attrs)
    return [env[c] for c in consts]
