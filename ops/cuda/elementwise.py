"""Elementwise ops on device arrays: the scalar functions of ops/cpu/elementwise.py, compiled for CUDA.

Each op is the CPU op's own scalar definition compiled as a CUDA device function, with CUDA's exp, tanh and
erf in place of the CPU polynomials (ops/cuda/mathfn.py), and mapped over the broadcast output shape, one
element per thread (grid-stride). Inputs are read through strides over the output's shape, 0 along broadcast
axes, so no broadcast copy is made. Each op returns a new C-contiguous device array of the inputs' common dtype
(NumPy's result_type, as on the CPU: int32 arithmetic stays int32), or of bool for comparisons and logical ops.
"""
import numpy as np

from ops._cuda import cuda, device_function, empty
from ops.cpu import elementwise as cpu
from ops.cuda import mathfn
from ops.cuda.launch import THREADS, blocks
from ops.cuda.layout import broadcast_strides, flat, offset, sliced_broadcast


def map_kernel(f, arity: int):
    """A kernel writing ``out[i] = f(x0[...], x1[...], ...)`` for the ``arity`` operands, each a flat device array
    with the position of its first element and its strides over the output's ``shape`` (a stride may be negative:
    a step −1 slice reads backwards from its start; generated for the arity: numba.cuda takes no ``*args``)."""
    operands = ", ".join(f"x{k}, b{k}, s{k}" for k in range(arity))
    loads = ", ".join(f"x{k}[b{k} + offset(i, shape, s{k})]" for k in range(arity))
    namespace = {"cuda": cuda, "offset": offset, "f": f}
    exec(f"def map{arity}(out, shape, {operands}):\n"
         f"    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):\n"
         f"        out[i] = f({loads})\n", namespace)
    return cuda.jit(namespace[f"map{arity}"])


def launch(kernel, out, *xs, views=()):
    """Run a ``map_kernel`` writing ``out`` from the device arrays ``xs`` (broadcast to its shape), each read
    through its view (``views[i]``, a basic index, or None) where given; returns out."""
    shape = tuple(out.shape) or (1,)        # kernels take at least one axis: a 0-d output is one element
    operands = []
    for x, view in zip(xs, views or (None,) * len(xs)):
        start, strides = (0, broadcast_strides(x.shape, shape)) if view is None else \
            sliced_broadcast(x.shape, view, shape)
        operands += [flat(x), start, strides]
    kernel[blocks(out.size), THREADS](flat(out), shape, *operands)
    return out


class Elementwise:
    """A scalar function (a CPU elementwise op's own, or one written against ``mathfn``), compiled for CUDA and
    applied with broadcasting; a predicate (the CPU op's ``boolean``) gives bool."""

    def __init__(self, fn):
        scalar = getattr(fn, "__wrapped__", fn)
        self.__name__, self.__doc__ = scalar.__name__, scalar.__doc__
        self.boolean = getattr(fn, "boolean", False)
        self.scalar = device_function(scalar, mathfn=mathfn)       # also called by the fused kernels
        self.kernel = map_kernel(self.scalar, scalar.__code__.co_argcount)

    def __call__(self, *xs):
        shape = np.broadcast_shapes(*(x.shape for x in xs))
        dtype = np.bool_ if self.boolean else np.result_type(*(x.dtype for x in xs))
        return launch(self.kernel, empty(shape, dtype), *xs)


_copy = map_kernel(cuda.jit(device=True)(lambda v: v), 1)


def astype(x, dtype):
    """x converted to ``dtype`` (a new array, as NumPy's astype)."""
    return launch(_copy, empty(x.shape, dtype), x)


@cuda.jit
def _fill(out, value):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = value


def full(shape, value, dtype):
    """A new device array of ``shape`` and ``dtype`` filled with ``value``."""
    out = empty(shape, dtype)
    _fill[blocks(out.size), THREADS](flat(out), out.dtype.type(value))
    return out


def bitcast(x, dtype):
    """x's bits read as ``dtype`` of the same itemsize: a view of the same device memory."""
    return x.view(dtype)


KERNELS = {**{name: Elementwise(op) for name, op in cpu.KERNELS.items() if isinstance(op, cpu.Elementwise)},
           "astype": astype, "bitcast": bitcast}
