"""``fused``: a chain of elementwise ops run as one generated kernel (ops/cpu/fused.py), made by the fusion pass
(core/passes/fuse_elementwise.py) from the ops it replaces, never by user code.

Attributes: ``program``, the ops as instructions ``(op, args, dtype)`` (args index the node's inputs, then the
results of earlier instructions; the last is the output); ``views``, for each input, None or the basic index
through which the program reads it (a slice of it, read in place: a recurrent cell's gates, a time step);
``reads``, the output axis each (viewed) input axis follows (see ops/cpu/fused.py); ``shape``, the output's.
The node's ``value`` holds the nodes it stands for, one per instruction, with their names, scopes and source
lines: debug mode (core/interpreter.py) names the one that first makes a NaN or Inf.
Its FLOPs are those of the ops, and its gradient is theirs: the VJP expands the program into them and
differentiates that.
"""
import numpy as np

from .. import tensor as F
from ..primitive import define, lookup
from .movement import sliced_shape


def viewed(inputs, views: tuple, index) -> list:
    """What a fused node's program reads: each input, or ``index(input, view)`` where it has a view (a basic
    index: the input is a slice, read in place)."""
    return [x if view is None else index(x, view) for x, view in zip(inputs, views)]


def run_program(program: tuple, inputs: list, step) -> list:
    """The inputs, then ``step(k, op, operands, dtype)`` for each instruction k in order, its operands taken
    from the values before it: the one walk through a program that expanding, naming, checking and unfusing
    it share."""
    values = list(inputs)
    for k, (op, args, dtype) in enumerate(program):
        values.append(step(k, op, [values[a] for a in args], dtype))
    return values


def expand(inputs, program: tuple, views: tuple) -> list:
    """The values of the program computed by the ops it stands for, as graph tensors: the inputs (sliced by
    their views), then each instruction's result (the last is the fused node's value)."""
    return run_program(program, viewed(inputs, views, lambda x, view: F.emit("getitem", x, index=view)),
                       lambda k, op, xs, dtype: F.emit("astype", *xs, dtype=dtype) if op == "astype" else
                       F.emit(op, *xs))


def formula(program: tuple, names: list[str]) -> str:
    """The program as one expression of the inputs ``names``, e.g. ``tanh(add(x0, x1))``."""
    return run_program(program, names, lambda k, op, xs, dtype: f"{dtype}({xs[0]})" if op == "astype" else
                       f"{op}({', '.join(xs)})")[-1]


def fused_vjp(g, y, *inputs, program, views, **_):
    """∂/∂inputs of Σ g ∘ y, y computed by the ops the program stands for."""
    from ..autodiff import gradients
    floats = [x for x in inputs if x.dtype.kind == "f"]
    grads = iter(gradients(F.sum(expand(inputs, program, views)[-1] * g), floats))
    return tuple(next(grads) if x.dtype.kind == "f" else None for x in inputs)


def fused_flops(out, *ins, program, views, **_):
    """The FLOPs of the ops the program stands for; every value it computes has the output's shape."""
    shapes = viewed(ins, views, sliced_shape) + [out] * len(program)
    return sum(lookup(op).flops(out, *(shapes[a] for a in args), **({"dtype": dtype} if op == "astype" else {}))
               for op, args, dtype in program)


define("fused", lambda *inputs, program, reads, views, shape: (tuple(shape), np.dtype(program[-1][2])),
       vjp=fused_vjp, flops=fused_flops,
       doc="elementwise ops run as one generated kernel: one pass over the output, no intermediate arrays")
