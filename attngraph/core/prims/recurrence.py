"""``scan``: a time loop as one node, its step one subgraph (JAX's ``lax.scan``). Named apart from ``cumsum``
(prims/scan.py, a running sum); the API that traces it is ``ag.scan`` (core/loops.py).

    out_t = body(carry_{t−1}, x_t, c)      carry_t = out_t[:, :C]      carry_{−1} = init
    scan(init, x¹ … xᵏ, c¹ … cᵐ) = [out_0, …, out_{T−1}] stacked on axis 1: (B, T, P)

t runs 0 … T−1, or T−1 … 0 when ``reverse``. ``init`` (B, C) is the carry, each sequence xⁱ (B, T, …) is read one
time step x_t = xⁱ[:, t] at a time, each constant cʲ whole: a parameter, or a tensor of the batch (B, …), the
encoder's memory an attention step reads (``Body.batched``). ``body`` is a ``Body``: the step traced into a graph of
its own whose batch is the symbol ``rows``, so that one body runs any batch, and is drawable on its own. An output
row holds the next carry (its first C columns) and what the step emits for that time step (core/loops.py packs a
cell's state and outputs into it and unpacks them outside).

Running (``Body.run``): a device's kernel passes its code generator, which compiles the body and its time loop into
one function (ops/cpu/recurrence.py); without one, or in debug mode, the body's executable runs once per step, and
a NaN is reported with its body node and its time step.

Gradient (``scan_vjp``), in two parts, each derived by autodiff from the body graph:
- the carry's gradient is a scan in the other direction: with a_t = g_t + [c_{t+1}; 0] (g the gradient of the
  stacked output, c_{t+1} what step t+1 sends back), step t sends back c_t = (∂out_t/∂carry_{t−1})ᵀ a_t. Its body
  reads carry_{t−1} and g_t as sequences: nothing is kept but the forward output, and the step's forward is
  recomputed inside (rematerialization);
- the sequences' and constants' gradients need no loop once every a_t is known: the body's VJP runs once on all
  steps together, time folded into the batch (B·T rows): one large product per weight instead of T small ones, as
  cuDNN computes a GRU's weight gradients (sums over t taken in another order than the unrolled graph's: equal to
  rounding). A batched constant is repeated over t for it, and its gradient summed back.
"""
from __future__ import annotations

from typing import Callable

from ...errors import BindingError, NonFiniteError
from .. import debug
from .. import tensor as F
from ..dims import divide, multiply, resolve_shape, symbols
from ..graph import Graph
from ..primitive import define, lookup

ROWS = "rows"           # the body's batch: bound to B in the loop and to B·T in the VJP


class Body:
    """A step as a graph: inputs ``carry`` (rows, C), ``x0`` … (one time step of each sequence), ``c0`` … (the
    constants, ``batched[j]`` when cʲ is (rows, …)); one output (rows, P), whose first C columns are the next carry.
    Compiled once per device and mode. ``trace`` is how bodies are traced (core/loops.py's ``trace_body``, given here so
    that this module does not import the API built on it): the carry's gradient is a body traced from this one."""

    def __init__(self, graph: Graph, sequences: int, batched: tuple[bool, ...], trace: Callable):
        self.graph, self.sequences, self.batched, self.trace = graph, sequences, tuple(batched), trace
        self.carry_size = graph.inputs["carry"].shape[1]
        self.width = graph.outputs[0].shape[1]
        self._programs: dict = {}
        self._carry_vjp: Body | None = None

    def __repr__(self) -> str:
        calls = sum(n.kind == "call" for n in self.graph.nodes)
        return f"Body({calls} ops, carry {self.carry_size}, width {self.width}, {self.sequences} sequences, " \
               f"{len(self.batched)} constants)"

    @property
    def names(self) -> list[str]:
        return ["carry", *(f"x{i}" for i in range(self.sequences)), *(f"c{j}" for j in range(len(self.batched)))]

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
        from ..passes import optimize
        return optimize(self.graph)

    def _stepper(self, device: str) -> Callable:
        """The loop as Python calling the body's executable at each step."""
        from ..device import backend
        from ..executor import compile
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

    def carry_vjp(self) -> "Body":
        """The body of the carry's gradient: carry c_{t+1}, sequences carry_{t−1}, g_t and this body's; constants
        this body's. Returns c_t = (∂out_t/∂carry_{t−1})ᵀ a_t (see the module docstring)."""
        if self._carry_vjp is None:
            from ..autodiff import gradients
            inputs = [self.graph.inputs[name] for name in self.names]
            carry, seqs, consts = inputs[0], inputs[1:1 + self.sequences], inputs[1 + self.sequences:]

            def step(later, previous, g, *rest):
                out = inline(self, previous, rest[:self.sequences], rest[self.sequences:])
                return gradients(F.sum(out * with_carry(g, later)), [previous])[0]
            self._carry_vjp = self.trace(step, carry.shape[1:], carry.dtype,
                                         [(carry.shape[1:], carry.dtype), (self.graph.outputs[0].shape[1:], carry.dtype),
                                          *((x.shape[1:], x.dtype) for x in seqs)],
                                         [(c.shape, c.dtype) for c in consts], self.batched)
        return self._carry_vjp


def with_carry(g, carry):
    """g (…, P) with ``carry`` (…, C) added to its first C columns."""
    width, size = F.as_node(g).shape[-1], F.as_node(carry).shape[-1]
    first = F.index(g, (Ellipsis, slice(0, size))) + carry
    return first if width == size else F.concat([first, F.index(g, (Ellipsis, slice(size, width)))], axis=-1)


def inline(body: Body, carry, sequences, consts):
    """The body's computation emitted into the graph being traced, on these tensors, for any batch (``rows``
    becomes the carry's first dimension): the step unrolled once."""
    rows = F.as_node(carry).shape[0]
    env = dict(zip([body.graph.inputs[name] for name in body.names], [carry, *sequences, *consts]))
    for node in body.graph.nodes:
        if node.op == "constant":
            env[node] = F.constant(node.value)
        elif node.kind == "call":
            attrs = {k: rows_as(v, rows) if k == "shape" else v for k, v in node.attrs.items()}
            env[node] = F.emit(node.op, *(env[x] for x in node.inputs), **attrs)
    return env[body.graph.outputs[0].inputs[0]]


def rows_as(shape, rows) -> tuple:
    """A shape of the body with ``rows`` replaced by the actual batch."""
    return tuple(multiply(divide(d, ROWS), rows) if isinstance(d, str) and ROWS in symbols(d) else d for d in shape)


def scan_rule(init, *inputs, body: Body, reverse: bool):
    sequences, consts = inputs[:body.sequences], inputs[body.sequences:]
    if len(consts) != len(body.batched) or body.sequences < 1:
        raise ValueError(f"a scan takes its carry, {body.sequences} (≥ 1) sequences and {len(body.batched)} "
                         f"constants, got {len(inputs)} inputs after the carry")
    batch = init.shape[0]
    if len(init.shape) != 2 or init.shape[1] != body.carry_size:
        raise ValueError(f"the carry must be (B, {body.carry_size})")
    lengths = {x.shape[1] if len(x.shape) > 1 else None for x in sequences}
    if len(lengths) != 1 or None in lengths or any(x.shape[0] != batch for x in sequences):
        raise ValueError("the sequences of a scan must be (B, T, …), of the carry's batch and one length T")
    if any(flag and c.shape[:1] != (batch,) for c, flag in zip(consts, body.batched)):
        raise ValueError("a batched constant of a scan must be (B, …), of the carry's batch")
    return (batch, lengths.pop(), body.width), init.dtype


def scan_vjp(g, y, init, *inputs, body: Body, reverse: bool):
    """∂/∂(init, sequences, constants) of Σ g ∘ y (see the module docstring)."""
    from ..autodiff import gradients
    seqs, consts = inputs[:body.sequences], inputs[body.sequences:]
    size = body.carry_size
    carries = F.index(y, (slice(None), slice(None), slice(0, size)))
    first, zero = F.expand_dims(init, 1), F.expand_dims(F.zeros_like(init), 1)
    previous = F.concat([carries[:, 1:], first] if reverse else [first, carries[:, :-1]], axis=1)    # carry_{t−1}
    sent = F.emit("scan", F.zeros_like(init), previous, g, *seqs, *consts, body=body.carry_vjp(),
                  reverse=not reverse)                                                                 # c_t
    later = F.concat([zero, sent[:, :-1]] if reverse else [sent[:, 1:], zero], axis=1)               # c_{t+1}
    d_init = sent[:, -1] if reverse else sent[:, 0]
    length = F.as_node(y).shape[1]
    # each input's partial derivative alone: taken at a node of its own, which neither another input (a constant
    # computed from a sequence or from another constant) nor carry_{t−1} and a_t (computed from y) depend on
    alone = [F.emit("reshape", x, shape=F.as_node(x).shape) for x in inputs]
    flat_seqs = [flat(x) for x in alone[:body.sequences]]
    flat_consts = [flat(F.broadcast_to(F.expand_dims(c, 1), (c.shape[0], length, *c.shape[1:]))) if batched else c
                   for c, batched in zip(alone[body.sequences:], body.batched)]
    out = inline(body, flat(previous), flat_seqs, flat_consts)
    wanted = [x for x in alone if x.dtype.kind == "f"]
    grads = dict(zip(map(F.as_node, wanted), gradients(F.sum(out * flat(with_carry(g, later))), wanted)))
    return (d_init, *(grads.get(F.as_node(x)) for x in alone))


def flat(x):
    """(B, T, …) → (B·T, …): every time step a row of one batch."""
    return F.reshape(x, (-1, *F.as_node(x).shape[2:]))


def step_bindings(body: Body, init, *inputs) -> dict[str, int]:
    """The body's symbolic dimensions for a scan of these concrete input shapes: ``rows`` is the batch B, any other
    (the length S of a memory read whole) is read from the input that holds it; one held by none counts as 1."""
    one_step = [init, *((x[0], *x[2:]) for x in inputs[:body.sequences]), *inputs[body.sequences:]]
    bindings = dict.fromkeys({s for n in body.graph.nodes for d in n.shape for s in symbols(d)}, 1)
    for name, shape in zip(body.names, one_step):
        bindings.update((d, size) for d, size in zip(body.graph.inputs[name].shape, shape)
                        if isinstance(d, str) and d.isidentifier())
    return bindings


def scan_flops(out, init, *inputs, body: Body, reverse: bool):
    """The body's FLOPs for a batch of B, times T."""
    bindings = step_bindings(body, init, *inputs)
    step = sum(lookup(n.op).flops(resolve_shape(n.shape, bindings),
                                  *(resolve_shape(x.shape, bindings) for x in n.inputs), **n.attrs)
               for n in body.graph.nodes if n.kind == "call")
    return out[1] * step


define("scan", scan_rule, vjp=scan_vjp, flops=scan_flops,
       doc="a time loop as one node: its step a subgraph (body), compiled with the loop into one function")
