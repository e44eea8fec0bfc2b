"""The registry of primitives: each op's shape inference, VJP rule, FLOP count and traits.

A primitive is defined once, in one of the family files of ``core/prims/``, with everything about it side
by side::

    define("tanh", infer=same_shape, flops=per_element(4), elementwise=True,
           vjp=lambda g, y, x: (g * (1 - y * y),))

Its kernels are the devices' business: each Backend (ops/backend.py) has one under the primitive's name.

``infer(*inputs, **attrs)`` receives the input nodes (shape, dtype) and returns ``(shape, dtype)``; it
raises ``ValueError`` / ``TypeError`` with a short reason, which the tracer turns into a ``ShapeError`` or
``DTypeError`` that names the op, the scope and the user's source line.

``vjp(g, out, *inputs, **attrs)`` receives symbolic tensors and returns one gradient (or None) per input; it
emits graph nodes with the same functional API as user code, so the backward pass is a graph too.

``flops(out_shape, *input_shapes, **attrs)`` counts floating-point operations on concrete shapes.

Traits, read by the passes:
- ``elementwise=True``: computed element by element from broadcast inputs by one scalar function of
  ops/cpu/elementwise.py of the same name (or a conversion, ``astype``): simplification bypasses broadcasts
  into it, and the fusion pass merges chains of them into one generated kernel (``fused``);
- ``shape_only=True``: reads only its inputs' shapes (``size``, ``arange``): folded to a constant when those
  are concrete;
- ``differentiable=False``: no gradient (comparisons, indices).

A kernel may offer ``for_dtypes(*input_dtypes, **attrs)``, returning the kernel specialized to those dtypes
(and to the attributes it reads; the symbolic ``shape`` is bound later, per call): the executor then resolves
it once per node instead of on every call (the elementwise ufuncs and the fused kernels do).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from math import prod
from typing import Callable

from ..errors import AttnGraphError


@dataclass(frozen=True)
class Primitive:
    name: str
    infer: Callable
    vjp: Callable | None = None
    flops: Callable = lambda out, *ins, **attrs: 0
    differentiable: bool = True
    elementwise: bool = False
    shape_only: bool = False
    doc: str = ""
    family: str = ""


REGISTRY: dict[str, Primitive] = {}


def define(name: str, infer: Callable, *, vjp: Callable | None = None, flops: Callable | None = None,
           differentiable: bool = True, elementwise: bool = False, shape_only: bool = False,
           doc: str = "") -> Primitive:
    """Register a primitive; a differentiable one needs its ``vjp``. Its ``family`` is the module that defines it
    (``core/prims/<family>.py``): drawings colour ops by it."""
    if name in REGISTRY:
        raise AttnGraphError(f"primitive {name!r} is defined twice")
    if differentiable and vjp is None:
        raise AttnGraphError(f"primitive {name!r} is differentiable but has no VJP (or say differentiable=False)")
    family = sys._getframe(1).f_globals["__name__"].rpartition(".")[2]
    prim = Primitive(name, infer, vjp, flops or (lambda out, *ins, **attrs: 0), differentiable, elementwise,
                     shape_only, doc, family)
    REGISTRY[name] = prim
    return prim


def lookup(name: str) -> Primitive:
    try:
        return REGISTRY[name]
    except KeyError:
        raise AttnGraphError(f"unknown op {name!r}; registered primitives: {', '.join(sorted(REGISTRY))}") \
            from None


def first_order_only(advice: str) -> Callable:
    """The VJP rule of a fused backward kernel, which has no gradient of its own: it raises, naming the op, then
    ``advice`` (what to use for second-order gradients)."""
    def vjp(g, y, *inputs, **attrs):
        raise AttnGraphError(f"{y.node.op} is a fused backward kernel and has no gradient of its own: {advice}")
    return vjp


def per_element(cost: int) -> Callable:
    """FLOP counter for elementwise ops: ``cost`` operations per output element."""
    return lambda out, *ins, **attrs: cost * prod(out)
