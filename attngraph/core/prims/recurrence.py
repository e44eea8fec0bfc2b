"""``recurrence``: a time loop as one node, its step one subgraph (the ``scan`` of JAX's ``lax.scan``, torch.fx's
higher-order ops). Named so as not to be confused with ``cumsum`` (prims/scan.py), a running sum.

    h_t = body(h_{t−1}, x_t, c)        t = 0 … T−1 (T−1 … 0 when ``reverse``),  h_{−1} = init
    recurrence(init, x¹ … xᵏ, c¹ … cᵐ) = [h_0, …, h_{T−1}]  stacked on axis 1: (B, T, …)

``init`` (B, …) is the carry, each sequence xⁱ (B, T, …) is read one time step x_t = xⁱ[:, t] at a time and each
constant cʲ (a parameter) whole. ``body`` is a ``Body``: the step function traced once into its own graph
(inputs ``carry``, ``x0`` …, ``c0`` …; one output), its batch the symbol ``rows``, so that the same body runs any
batch and is drawable on its own. The node's one output is every carry: a cell's outputs (masked) and its final
state are read from it outside the loop, and the backward pass finds there each step's input carry.

Running (ops/<device>/recurrence.py, ``Body.run``): the body is compiled once per device through the same
pipeline as any graph (optimized; traced op for op in debug mode, where a NaN is reported with its body node and
its time step) and its prepared executable is called once per step, without the outer graph's dispatch.

Gradient (``recurrence_vjp``), in two parts, each derived by autodiff from the body graph:
- the carry's gradient is itself a recurrence, run in the other direction: with a_t = g_t + c_{t+1} (g the
  gradient of the stacked output, c_{t+1} what step t+1 sends back), step t sends back
  c_t = (∂h_t/∂h_{t−1})ᵀ a_t. Its body reads h_{t−1} and g_t as sequences: it keeps nothing but the forward
  output, and recomputes the step's forward inside (as rematerialization does);
- the sequences' and constants' gradients need no loop once every a_t is known: the body's VJP runs once on all
  steps together, time folded into the batch (B·T rows): one large product per weight instead of T small ones,
  as cuDNN computes a GRU's weight gradients. The constants' gradients are thereby summed over t in another order
  than the unrolled graph sums them (equal to rounding); the forward values and the carries' gradients are the
  unrolled graph's bit for bit. A constant must therefore not depend on the batch (parameters do not); a body
  that reads a batch-shaped tensor whole is refused when traced.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Sequence


from ...errors import NonFiniteError, TracingError
from .. import debug
from .. import functional as F
from ..device import backend
from ..dims import divide, multiply, resolve_shape, symbols
from ..graph import Graph, Node
from ..primitive import define, lookup
from ..tracing import STATE, add_output, no_grad

ROWS = "rows"           # the body's batch: a symbol of its own, bound to B in the loop and to B·T in the VJP


class Body:
    """A step function as a graph: inputs ``carry`` (rows, …), ``x0`` … (one time step of each sequence), ``c0`` …
    (the constants); one output, the next carry. Compiled once per device and debug mode (``executable``)."""

    def __init__(self, graph: Graph, sequences: int, consts: int, parameters: Sequence = ()):
        self.graph, self.sequences, self.consts, self.parameters = graph, sequences, consts, list(parameters)
        self._executables: dict = {}
        self._carry_vjp: Body | None = None

    def __repr__(self) -> str:
        calls = sum(n.kind == "call" for n in self.graph.nodes)
        return f"Body({calls} ops, {self.sequences} sequences, {self.consts} constants)"

    @property
    def names(self) -> list[str]:
        return ["carry", *(f"x{i}" for i in range(self.sequences)), *(f"c{j}" for j in range(self.consts))]

    def executable(self, device: str):
        from ..executor import compile
        key = device, debug.enabled()
        if key not in self._executables:
            self._executables[key] = compile(self.graph, device)
        return self._executables[key]

    def run(self, device: str, init, *inputs, sequences: int, reverse: bool):
        """The loop on ``device``'s arrays: the carries stacked on axis 1."""
        step, kernels = self.executable(device), backend(device).kernels
        seqs, feeds = inputs[:sequences], dict(zip(self.names[1 + sequences:], inputs[sequences:]))
        length = seqs[0].shape[1]
        carry, carries = init, [None] * length
        for t in reversed(range(length)) if reverse else range(length):
            feeds.update((f"x{i}", kernels["getitem"](x, index=(slice(None), t))) for i, x in enumerate(seqs))
            try:
                carry = step.run_on_device(carry=carry, **feeds)
            except NonFiniteError as error:
                raise NonFiniteError(f"time step {t} of {length}: {error}") from error
            carries[t] = kernels["reshape"](carry, shape=(carry.shape[0], 1, *carry.shape[1:]))
        return kernels["concat"](*carries, axis=1)

    def carry_vjp(self) -> "Body":
        """The body of the carry's gradient: carry c_{t+1}, sequences h_{t−1}, g_t and this body's; constants this
        body's. Returns c_t = (∂h_t/∂h_{t−1})ᵀ (g_t + c_{t+1})."""
        if self._carry_vjp is None:
            carry, *rest = [n for n in self.graph.nodes if n.op == "input"]
            seqs, consts = rest[:self.sequences], rest[self.sequences:]

            def step(later, previous, g, *xs):
                from ..autodiff import gradients
                h = inline(self, previous, xs[:self.sequences], xs[self.sequences:])
                return gradients(F.sum(h * (g + later)), [previous])[0]
            spec = _spec(carry, 1)
            self._carry_vjp = trace_body(step, spec, [spec, spec, *(_spec(x, 1) for x in seqs)],
                                         [_spec(c, 0) for c in consts])
        return self._carry_vjp


@contextmanager
def _tracing_into(graph: Graph, parameters: dict[int, Node]):
    """Emit into ``graph``, keeping the outer trace's scopes and module names (the body's nodes are named as the
    unrolled ones were); ``parameters`` maps the parameters the body reads to its constant inputs."""
    saved = STATE.graph, STATE.parameters, STATE.grad_of
    STATE.graph, STATE.parameters, STATE.grad_of = graph, parameters, None
    try:
        yield
    finally:
        STATE.graph, STATE.parameters, STATE.grad_of = saved


def trace_body(step: Callable, carry: tuple, slices: Sequence[tuple], consts: Sequence[tuple] = (),
               parameters: Sequence = ()) -> Body:
    """``step(carry, *slices, *consts)`` traced into a ``Body``. ``carry`` and ``slices`` are (shape without the
    batch, dtype) of the carry and of one time step of each sequence, ``consts`` (shape, dtype) of each constant.
    ``parameters``, the ``Parameter``s ``step`` may read, become constant inputs after ``consts``; those it does not
    read are left out (``Body.parameters`` lists the others)."""
    graph = Graph()
    carry_node = graph.add("input", (), {}, (ROWS, *carry[0]), carry[1], name="carry")
    slice_nodes = [graph.add("input", (), {}, (ROWS, *shape), dtype, name=f"x{i}")
                   for i, (shape, dtype) in enumerate(slices)]
    const_nodes = [graph.add("input", (), {}, shape, dtype, name=f"c{j}")
                   for j, (shape, dtype) in enumerate([*consts, *((p.data.shape, p.data.dtype) for p in parameters)])]
    lifted = const_nodes[len(consts):]
    with _tracing_into(graph, {id(p): node for p, node in zip(parameters, lifted)}):
        out = F.as_node(step(*map(F.Tensor, [carry_node, *slice_nodes, *const_nodes[:len(consts)]])))
        add_output(out, "carry")
    if out.shape != carry_node.shape or out.dtype != carry_node.dtype:
        raise TracingError(f"a recurrence's step must return its carry's shape and dtype {carry_node.shape} "
                           f"{carry_node.dtype}, got {out.describe()}")
    stray = next((n for n in graph.nodes if n.op == "parameter"), None)
    if stray is not None:
        raise TracingError(f"a recurrence's step read {stray.describe()}, which is not among the parameters "
                           "given to it: pass every parameter the step reads")
    used = {x for n in graph.nodes for x in n.inputs}
    unread = {n for n in lifted if n not in used}
    graph.nodes = [n for n in graph.nodes if n not in unread]
    kept = [n for n in const_nodes if n not in unread]
    for node in const_nodes:
        del graph.inputs[node.name]
    for j, node in enumerate(kept):
        node.name = f"c{j}"
        graph.inputs[node.name] = node
    return Body(graph, len(slices), len(kept), [p for p, n in zip(parameters, lifted) if n not in unread])


def _spec(x, skip: int) -> tuple:
    """(shape without its first ``skip`` axes, dtype) of a tensor or node."""
    node = x if isinstance(x, Node) else F.as_node(x)
    return node.shape[skip:], node.dtype


def recurrence(step: Callable, init, sequences: Sequence, parameters: Sequence = (), reverse: bool = False):
    """Every carry of ``step`` run over the time axis (1) of ``sequences``, stacked on axis 1 (see the module
    docstring): ``step(carry (B, …), *slices (B, …)) -> carry``, reading only ``parameters`` besides them."""
    body = trace_body(step, _spec(init, 1), [_spec(x, 2) for x in sequences], parameters=parameters)
    return F.emit("recurrence", init, *sequences, *body.parameters, body=body, sequences=len(sequences),
                  reverse=bool(reverse))


def inline(body: Body, carry, sequences: Sequence, consts: Sequence):
    """The body's computation emitted into the graph being traced, on these tensors (any batch: ``rows`` becomes
    the carry's first dimension): the step unrolled once."""
    rows = F.as_node(carry).shape[0]
    env = dict(zip([n for n in body.graph.nodes if n.op == "input"], [carry, *sequences, *consts]))
    for node in body.graph.nodes:
        if node.op == "constant":
            env[node] = F.constant(node.value)
        elif node.kind == "call":
            attrs = {k: _rows(v, rows) if k == "shape" else v for k, v in node.attrs.items()}
            env[node] = F.emit(node.op, *(env[x] for x in node.inputs), **attrs)
    return env[body.graph.outputs[0].inputs[0]]


def _rows(shape, rows) -> tuple:
    """A shape attribute of the body with ``rows`` replaced by the actual batch."""
    return tuple(multiply(divide(d, ROWS), rows) if isinstance(d, str) and ROWS in symbols(d) else d for d in shape)


def recurrence_rule(init, *inputs, body: Body, sequences: int, reverse: bool):
    if not 1 <= sequences <= len(inputs) or len(inputs) - sequences != body.consts or body.sequences != sequences:
        raise ValueError(f"a recurrence takes its carry, {body.sequences} sequences and {body.consts} constants")
    lengths = {x.shape[1] if len(x.shape) > 1 else None for x in inputs[:sequences]}
    if len(lengths) != 1 or None in lengths or any(x.shape[0] != init.shape[0] for x in inputs[:sequences]):
        raise ValueError("the sequences of a recurrence must be (B, T, ...) of the carry's batch and one length T")
    return (init.shape[0], lengths.pop(), *init.shape[1:]), init.dtype


def recurrence_vjp(g, y, init, *inputs, body: Body, sequences: int, reverse: bool):
    """∂/∂(init, sequences, constants) of Σ g ∘ y (see the module docstring)."""
    from ..autodiff import gradients
    seqs, consts = inputs[:sequences], inputs[sequences:]
    first, zero = F.expand_dims(init, 1), F.expand_dims(F.zeros_like(init), 1)
    previous = F.concat([y[:, 1:], first] if reverse else [first, y[:, :-1]], axis=1)        # h_{t−1}
    sent = F.emit("recurrence", F.zeros_like(init), previous, g, *seqs, *consts, body=body.carry_vjp(),
                  sequences=2 + sequences, reverse=not reverse)                                # c_t
    later = F.concat([zero, sent[:, :-1]] if reverse else [sent[:, 1:], zero], axis=1)        # c_{t+1}
    d_init = sent[:, -1] if reverse else sent[:, 0]
    flat = [_flat(x) for x in seqs]
    with no_grad():                 # h_{t−1} and a_t are given here, not functions of the constants to differentiate
        previous, total = _flat(previous), _flat(g + later)
    h = inline(body, previous, flat, consts)
    grads = iter(gradients(F.sum(h * total), [x for x in flat if x.dtype.kind == "f"]
                           + list(consts)))
    d_seqs = [F.reshape(next(grads), x.shape) if x.dtype.kind == "f" else None for x in seqs]
    return (d_init, *d_seqs, *grads)


def _flat(x):
    """(B, T, …) → (B·T, …): every time step a row of one batch."""
    return F.reshape(x, (-1, *x.shape[2:]))


def recurrence_flops(out, init, *inputs, body: Body, sequences: int, reverse: bool):
    """The body's FLOPs for a batch of B, times T."""
    bindings = {ROWS: out[0]}
    step = sum(lookup(n.op).flops(resolve_shape(n.shape, bindings), *(resolve_shape(x.shape, bindings)
                                                                       for x in n.inputs), **n.attrs)
               for n in body.graph.nodes if n.kind == "call")
    return out[1] * step


define("recurrence", recurrence_rule, vjp=recurrence_vjp, flops=recurrence_flops,
       doc="a time loop as one node: its step a subgraph (body), run once per time step inside one call")
