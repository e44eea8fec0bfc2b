"""Tracing: the graph being built, and the context its nodes are made in.

Every op of the functional API ends in ``add_call(op, inputs, attrs)``, which looks up the primitive, infers the
output's shape and dtype, and appends the node with the current module scope, the user's source line and the
gradient context. Python loops therefore unroll. The symbolic values users hold are ``Tensor``s
(core/tensor.py), each wrapping one of these nodes.
"""
from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from functools import lru_cache
from typing import Iterator

import numpy as np

from ..errors import DTypeError, ShapeError, TracingError
from .dims import format_shape, normalize
from .graph import DTYPES, Graph, Node, unsupported_dtype
from .primitive import lookup

_ENGINE_DIR = os.path.dirname(os.path.abspath(__file__))


class _TraceState(threading.local):
    def __init__(self):
        self.graph: Graph | None = None
        self.scopes: list[str] = []
        self.call_path: tuple[tuple[str, int], ...] = ()     # the module calls under way: (scope, call id)
        self.calls_made = 0
        self.no_grad = 0
        self.grad_of: Node | None = None
        self.parameters: dict[int, Node] = {}
        self.parameter_names: dict[int, str] = {}
        self.module_names: dict[int, str] = {}
        self.updates: dict[int, tuple] = {}         # buffer id: (buffer, the node of its new value)
        self.lift = None        # while tracing a loop's body: core/loops.py's Lifting of the enclosing trace's tensors


STATE = _TraceState()


class Input:
    """A symbolic input of a traced function: ``Input(("B", "T", 64), dtype="float32", name=None)``."""

    def __init__(self, shape, dtype="float32", name: str | None = None):
        try:
            self.shape = tuple(normalize(d) for d in shape)
        except (TypeError, ValueError) as e:
            raise ShapeError(f"Input shape {shape!r}: {e}") from None
        if any(isinstance(d, str) and not d.isidentifier() for d in self.shape):
            raise ShapeError(f"Input shape {shape!r}: an input's symbolic dimensions are single names")
        what = f"Input {name!r}" if name else f"the Input {format_shape(self.shape)}"
        try:
            self.dtype = np.dtype(dtype)
        except TypeError:
            raise unsupported_dtype(dtype, what) from None
        if self.dtype not in DTYPES:
            raise unsupported_dtype(self.dtype, what)
        self.name = name

    def __repr__(self):
        return f"Input({format_shape(self.shape)}, dtype={self.dtype.name!r}, name={self.name!r})"


def current_graph() -> Graph:
    if STATE.graph is None:
        raise TracingError("this op builds a graph node and needs a trace: call it inside ag.trace(...) "
                           "or a function given to ag.value_and_grad(...)")
    return STATE.graph


@contextmanager
def building(graph: Graph, parameters: dict[int, Node] | None = None, root=None) -> Iterator[Graph]:
    """Make ``graph`` the target of emitted nodes for the duration of the block. ``parameters`` maps
    parameter objects (by id) to nodes already in the graph; ``root`` is the module being traced, whose
    attribute paths name the scopes and parameters."""
    saved = (STATE.graph, STATE.scopes, STATE.call_path, STATE.parameters, STATE.grad_of, STATE.parameter_names,
             STATE.module_names, STATE.updates, STATE.lift)
    STATE.graph, STATE.scopes, STATE.call_path, STATE.grad_of, STATE.updates, STATE.lift = graph, [], (), None, {}, None
    STATE.parameters = {} if parameters is None else parameters
    STATE.parameter_names = {id(p): name for name, p in _named_state(root)} if root is not None else {}
    STATE.module_names = {id(m): name for name, m in root.named_modules()} if root is not None else {}
    try:
        yield graph
        for buffer, node in STATE.updates.values():     # after the caller's outputs: update:<buffer>
            name = UPDATE_PREFIX + parameter_node(buffer).name
            add_node("output", (node,), {}, node.shape, node.dtype, name=name, scope="", stop_gradient=True,
                     value=buffer)
    finally:
        (STATE.graph, STATE.scopes, STATE.call_path, STATE.parameters, STATE.grad_of, STATE.parameter_names,
         STATE.module_names, STATE.updates, STATE.lift) = saved


UPDATE_PREFIX = "update:"       # the outputs holding a buffer's new value, which each run writes back


def _named_state(module):
    """A module's parameters and buffers (a module of attngraph.nn has both) with their dotted paths."""
    return [*module.named_parameters(), *getattr(module, "named_buffers", list)()]


def update_buffer(buffer, value) -> None:
    """Make ``value`` (a tensor of ``buffer``'s shape and dtype) the new value of ``buffer`` (a module's buffer)
    after each run of the graph being traced; a later update of the same buffer replaces it (build it from
    ``buffer_value``)."""
    node = value.node
    if node.shape != buffer.shape or node.dtype != buffer.dtype:
        raise ShapeError(f"the update of buffer {buffer.name!r} {format_shape(buffer.shape)} {buffer.dtype} is "
                         f"{format_shape(node.shape)} {node.dtype} (at {user_source()})")
    STATE.updates[id(buffer)] = (buffer, node)


def buffer_value(buffer) -> Node:
    """The node of ``buffer``'s value in the graph being traced: its latest update there, else the buffer."""
    update = STATE.updates.get(id(buffer))
    return parameter_node(buffer) if update is None else update[1]


@contextmanager
def scope(name: str) -> Iterator[None]:
    """Nodes created inside carry ``name`` as their module path (absolute, dotted)."""
    STATE.scopes.append(name)
    try:
        yield
    finally:
        STATE.scopes.pop()


@contextmanager
def module_call(module) -> Iterator[None]:
    """One call of ``module``: nodes created inside carry its scope, and the call in ``Node.calls``, so that
    two calls of one module in a row stay two calls."""
    path = module_scope(module)
    saved = STATE.call_path
    STATE.calls_made += 1
    STATE.call_path = saved + ((path, STATE.calls_made),)
    try:
        with scope(path):
            yield
    finally:
        STATE.call_path = saved


def module_scope(module) -> str:
    """The scope of a module call: its path in the traced root module. A module met outside that tree (one
    used from a plain traced function, such as a loss) becomes the root if it is the first called at top
    level — so a loss graph names parameters as ``state_dict()`` does — and is otherwise named after its
    class under the current scope; its whole sub-tree and its parameters are named from there."""
    path = STATE.module_names.get(id(module))
    if path is None:
        parent = STATE.scopes[-1] if STATE.scopes else ""
        taken = set(STATE.module_names.values())
        base = (f"{parent}." if parent else "") + type(module).__name__.lower()
        path, n = ("" if not STATE.scopes and "" not in taken else base), 1
        while path in taken:
            path, n = f"{base}_{n}", n + 1
        for sub, m in module.named_modules(path):
            STATE.module_names.setdefault(id(m), sub)
        for name, p in _named_state(module):
            STATE.parameter_names.setdefault(id(p), f"{path}.{name}" if path else name)
    return path


@contextmanager
def no_grad() -> Iterator[None]:
    """Nodes created inside are constants to autodiff: no gradient flows through them."""
    STATE.no_grad += 1
    try:
        yield
    finally:
        STATE.no_grad -= 1


@contextmanager
def gradient_of(node: Node) -> Iterator[None]:
    """Autodiff's context: nodes emitted inside belong to the backward pass of ``node``."""
    saved = STATE.grad_of
    STATE.grad_of = node
    try:
        with scope(node.scope):
            yield
    finally:
        STATE.grad_of = saved


def user_source() -> str:
    """``file:line`` of the innermost caller outside the engine (``attngraph/core``)."""
    frame = sys._getframe(1)
    while frame is not None and _in_engine(frame.f_code.co_filename):
        frame = frame.f_back
    return "" if frame is None else f"{_display_path(frame.f_code.co_filename)}:{frame.f_lineno}"


@lru_cache(maxsize=None)
def _in_engine(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_ENGINE_DIR + os.sep)


@lru_cache(maxsize=None)
def _display_path(filename: str) -> str:
    """Relative to the working directory when below it, else as given (``<stdin>`` stays)."""
    if filename.startswith("<"):
        return filename
    relative = os.path.relpath(filename)
    return relative if not relative.startswith("..") else filename


def add_node(op: str, inputs=(), attrs=None, shape=(), dtype="float32", **fields) -> Node:
    """Append a node to the current graph with the current scope, source line and gradient context; an input
    that is not the graph's own (a tensor kept from another trace) is a TracingError at the user's line."""
    graph = current_graph()
    inputs = [node if owns(graph, node) else _foreign(op, node) for node in inputs]
    fields.setdefault("scope", STATE.scopes[-1] if STATE.scopes else "")
    fields.setdefault("source", user_source())
    fields.setdefault("stop_gradient", STATE.no_grad > 0)
    fields.setdefault("grad_of", STATE.grad_of)
    fields.setdefault("calls", STATE.grad_of.calls if STATE.grad_of is not None else STATE.call_path)
    return graph.add(op, inputs, attrs or {}, shape, dtype, **fields)


def owns(graph: Graph, node: Node) -> bool:
    return node.id < len(graph.nodes) and graph.nodes[node.id] is node


def _foreign(op: str, node: Node) -> Node:
    """The node standing for ``node`` of another graph: inside a loop's body, the body's input that the enclosing
    trace's tensor becomes (``STATE.lift``); anywhere else a TracingError at the user's line."""
    lifted = STATE.lift.lift(node) if STATE.lift is not None else None
    if lifted is None:
        raise TracingError(f"{op} at {user_source()} takes {node.describe()}, a tensor of another trace (kept "
                           "from an earlier ag.trace or value_and_grad): pass its value in as an input, or "
                           "compute it inside this trace")
    return lifted


def add_call(op: str, inputs: list[Node], attrs: dict) -> Node:
    """Append a call of primitive ``op`` on ``inputs``, its shape and dtype inferred; a shape rule's ValueError or
    TypeError becomes a ShapeError or DTypeError naming the op, the scope and the user's source line."""
    prim = lookup(op)
    graph = current_graph()
    inputs = [node if owns(graph, node) else _foreign(op, node) for node in inputs]
    if STATE.lift is not None and "shape" in attrs:         # a shape read from the enclosing trace's tensors
        attrs = {**attrs, "shape": STATE.lift.rows(attrs["shape"], inputs[0].shape if op == "reshape" else None)}
    try:
        shape, dtype = prim.infer(*inputs, **attrs)
    except (ValueError, TypeError) as e:
        error = DTypeError if isinstance(e, TypeError) else ShapeError
        where = f" in scope '{STATE.scopes[-1]}'" if STATE.scopes else ""
        shapes = ", ".join(f"{format_shape(n.shape)} {n.dtype}" for n in inputs)
        raise error(f"{op}{where} at {user_source()}: {e} (inputs: {shapes})") from None
    return add_node(op, inputs, attrs, shape, dtype)


def add_output(node: Node, name: str) -> Node:
    """Mark ``node`` as an output of the current graph under ``name``."""
    graph = current_graph()
    if name in graph.output_names:
        raise TracingError(f"two outputs are named {name!r}: rename one (Graph.grad names its outputs "
                           "'grad:<input or parameter>')")
    return add_node("output", (node,), {}, node.shape, node.dtype, name=name, scope="", stop_gradient=True)


def parameter_node(param) -> Node:
    """The node of ``param`` in the current graph; the same parameter object always maps to one node."""
    node = STATE.parameters.get(id(param))
    if node is None:
        name = STATE.parameter_names.get(id(param)) or _unique_parameter_name(param.name or "param")
        node = add_node("parameter", (), {}, param.data.shape, param.data.dtype, name=name, value=param,
                        stop_gradient=not param.trainable, scope=name.rpartition(".")[0])
        STATE.parameters[id(param)] = node
    return node


def _unique_parameter_name(attribute: str) -> str:
    """``scope.attribute`` for a parameter outside the traced root module, numbered if the name of a parameter
    or an input already."""
    base = f"{STATE.scopes[-1]}.{attribute}" if STATE.scopes and STATE.scopes[-1] else attribute
    graph = current_graph()
    taken = set(graph.parameters) | set(graph.inputs)
    name, n = base, 1
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name
