"""The step of a time loop as a graph of its own (``Body``), run over all the steps of a ``scan`` node
(core/prims/recurrence.py), and ``replay``, which emits a body's computation, or a part of it, into another trace.

A body's batch is the symbol ``rows``: bound to B when the loop runs, to B·T where its work is done for every step at
once (the gradient's pass over the whole sequence, core/scan_gradient.py), so one body serves any batch.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Callable, Iterable

from ..errors import BindingError, NonFiniteError
from . import debug
from . import tensor as F
from .dims import divide, multiply, symbols
from .graph import Graph, Node
from .tracing import no_grad, scope

ROWS = "rows"


class Body:
    """A step as a graph: inputs ``carry`` (rows, C), ``x0`` … (one time step of each sequence), ``c0`` … (the
    constants, ``batched[j]`` when cʲ is (rows, …)); one output (rows, P), whose first C columns are the next carry.
    ``base``: the body this one extends (the same step, emitting more columns after the base's P, as the forward
    loop of a gradient does, core/scan_gradient.py). Compiled once per device and mode; its gradient's plan
    (``gradient``, core/scan_gradient.py) made once, on first use."""

    def __init__(self, graph: Graph, sequences: int, batched: Iterable[bool], base: "Body | None" = None):
        self.graph, self.sequences, self.batched, self.base = graph, sequences, tuple(batched), base
        self.carry_size = graph.inputs["carry"].shape[1]
        self.width = graph.outputs[0].shape[1]
        self._programs: dict = {}
        self.gradient = None

    def __repr__(self) -> str:
        calls = sum(n.kind == "call" for n in self.graph.nodes)
        return f"Body({calls} ops, carry {self.carry_size}, width {self.width}, {self.sequences} sequences, " \
               f"{len(self.batched)} constants)"

    @property
    def names(self) -> list[str]:
        return ["carry", *(f"x{i}" for i in range(self.sequences)), *(f"c{j}" for j in range(len(self.batched)))]

    @property
    def inputs(self) -> list[Node]:
        """The graph's inputs in the order of ``names``: the carry, the sequences' steps, the constants."""
        return [self.graph.inputs[name] for name in self.names]

    def run(self, device: str, generate: Callable | None, init, *inputs, reverse: bool):
        """The loop on ``device``'s arrays, (B, T, P): ``generate(body graph)``'s compiled loop when the device has
        a generator and it compiles this body (None if not), else the body's executable once per step."""
        if inputs[0].shape[1] == 0:
            raise BindingError("a scan runs at least one time step; its sequences were fed with length T = 0")
        key = device, debug.enabled()
        if key not in self._programs:
            self._programs[key] = (generate(self.optimized()) if generate is not None and not key[1] else None) \
                or self._stepper(device)
        return self._programs[key](init, *inputs, reverse=reverse)

    def optimized(self) -> Graph:
        from .passes import optimize
        return optimize(self.graph)

    def _stepper(self, device: str) -> Callable:
        """The loop as Python calling the body's executable at each step."""
        from .device import backend
        from .executor import compile
        step, kernels = compile(self.graph, device), backend(device).kernels
        names, sequences = self.names, self.sequences

        def loop(init, *inputs, reverse):
            seqs, feeds = inputs[:sequences], dict(zip(names[1 + sequences:], inputs[sequences:]))
            length = seqs[0].shape[1]
            carry, rows = init, [None] * length
            for t in reversed(range(length)) if reverse else range(length):
                feeds.update((f"x{i}", kernels["getitem"](x, index=(slice(None), t))) for i, x in enumerate(seqs))
                try:
                    out = step.run_on_device(carry=carry, **feeds)
                except NonFiniteError as error:
                    raise NonFiniteError(f"time step {t} of {length}: {error}") from error
                carry = kernels["getitem"](out, index=(slice(None), slice(0, self.carry_size)))
                rows[t] = kernels["reshape"](out, shape=(out.shape[0], 1, out.shape[1]))
            return kernels["concat"](*rows, axis=1)
        return loop


def replay(wanted: list[Node], env: dict, rows=None) -> list:
    """Emit into the graph being traced what computes ``wanted`` (nodes of another graph) from ``env`` (that graph's
    nodes → tensors of this trace, filled in as nodes are emitted): each node ``wanted`` depends on that ``env`` lacks,
    in its scope, and a stop-gradient node as one. ``rows`` (a size) takes the place of the symbol ``rows`` in shape
    attributes: the step's work done for a batch of B, or of B·T rows at once."""
    order, done, stack = [], set(env), [(node, False) for node in reversed(wanted)]
    while stack:                                # depth first, each node after its inputs, stopping at ``env``
        node, expanded = stack.pop()
        if node in done:
            continue
        if expanded:
            done.add(node)
            order.append(node)
        else:
            stack.append((node, True))
            stack.extend((x, False) for x in reversed(node.inputs) if x not in done)
    for node in order:
        if node.op == "constant":
            env[node] = F.constant(node.value)
        elif node.kind != "call":
            raise ValueError(f"replay reached {node.describe()}, which it was not given")
        else:
            attrs = {k: rows_as(v, rows) if k == "shape" and rows is not None else v for k, v in node.attrs.items()}
            with scope(node.scope), no_grad() if node.stop_gradient else nullcontext():
                env[node] = F.emit(node.op, *(env[x] for x in node.inputs), **attrs)
    return [env[node] for node in wanted]


def packed(values) -> F.Tensor:
    """Tensors (rows, …) side by side as one row per example, (rows, Σ sizes): how a step's carry, outputs and
    residuals travel through a scan's output."""
    return F.concat([F.reshape(v, (F.as_node(v).shape[0], -1)) for v in values], axis=1)


def rows_as(shape, rows) -> tuple:
    """A shape of the body with ``rows`` replaced by the actual batch."""
    return tuple(multiply(divide(d, ROWS), rows) if isinstance(d, str) and ROWS in symbols(d) else d for d in shape)
