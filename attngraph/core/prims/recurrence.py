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

Gradient (``scan_vjp``): a loop in the other direction for the carry's gradient, reading what the forward loop kept,
and the rest done for all B·T rows at once (core/scan_gradient.py).
"""
from __future__ import annotations

from ..body import Body
from ..dims import resolve_shape, symbols
from ..primitive import define, lookup
from ..scan_gradient import gradient


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
    """∂/∂(init, sequences, constants) of Σ g ∘ y."""
    return gradient(body).emit(g, init, list(inputs), reverse)


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
