"""The registry of primitives: each op's shape inference, kernels per device, VJP rule and FLOP count.

A primitive is defined once, in one of the family files of ``core/prims/``, with everything about it side
by side::

    define("tanh", infer=same_shape, cpu=ew.tanh, flops=per_element(4),
           vjp=lambda g, y, x: (g * (1 - y * y),))

``infer(*inputs, **attrs)`` receives the input nodes (shape, dtype) and returns ``(shape, dtype)``; it
raises ``ValueError`` / ``TypeError`` with a short reason, which the tracer turns into a ``ShapeError`` or
``DTypeError`` that names the op, the scope and the user's source line.

``vjp(g, out, *inputs, **attrs)`` receives symbolic tensors and returns one gradient (or None) per input; it
emits graph nodes with the same functional API as user code, so the backward pass is a graph too.

``flops(out_shape, *input_shapes, **attrs)`` counts floating-point operations on concrete shapes.

``elementwise=True`` marks an op computed element by element from broadcast inputs by one scalar function of
ops/cpu/elementwise.py of the same name (or a conversion, ``astype``): the fusion pass merges chains of them
into one generated kernel (``fused``).

A kernel may offer ``for_dtypes(*input_dtypes, **attrs)``, returning the kernel specialized to those dtypes
(and to the attributes it reads; the symbolic ``shape`` is bound later, per call): the executor then resolves
it once per node instead of on every call (the elementwise ufuncs and the fused kernels do).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Callable

from ..errors import AttnGraphError


@dataclass(frozen=True)
class Primitive:
    name: str
    infer: Callable
    kernels: dict[str, Callable] = field(default_factory=dict)
    vjp: Callable | None = None
    flops: Callable = lambda out, *ins, **attrs: 0
    differentiable: bool = True
    elementwise: bool = False
    doc: str = ""


REGISTRY: dict[str, Primitive] = {}


def define(name: str, infer: Callable, *, cpu: Callable | None = None, vjp: Callable | None = None,
           flops: Callable | None = None, differentiable: bool = True, elementwise: bool = False,
           doc: str = "") -> Primitive:
    """Register a primitive. ``differentiable=False`` marks ops with no gradient (comparisons, indices)."""
    if name in REGISTRY:
        raise AttnGraphError(f"primitive {name!r} is defined twice")
    kernels = {"cpu": cpu} if cpu is not None else {}
    prim = Primitive(name, infer, kernels, vjp, flops or (lambda out, *ins, **attrs: 0), differentiable, elementwise,
                     doc)
    REGISTRY[name] = prim
    return prim


def lookup(name: str) -> Primitive:
    try:
        return REGISTRY[name]
    except KeyError:
        raise AttnGraphError(f"unknown op {name!r}; registered primitives: {', '.join(sorted(REGISTRY))}") \
            from None


def add_kernel(name: str, device: str, kernel: Callable) -> None:
    """Attach a device's kernel to an existing primitive (the CUDA backend uses this)."""
    lookup(name).kernels[device] = kernel


def check_registry() -> None:
    """Fail loudly at import time when a differentiable primitive has no VJP or any primitive no CPU kernel."""
    missing_vjp = [p.name for p in REGISTRY.values() if p.differentiable and p.vjp is None]
    missing_cpu = [p.name for p in REGISTRY.values() if "cpu" not in p.kernels]
    if missing_vjp or missing_cpu:
        raise AttnGraphError(f"primitives without a VJP: {missing_vjp}; without a CPU kernel: {missing_cpu}")


def per_element(cost: int) -> Callable:
    """FLOP counter for elementwise ops: ``cost`` operations per output element."""
    return lambda out, *ins, **attrs: cost * prod(out)
