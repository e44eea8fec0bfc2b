"""float16 is a storage dtype: a node that reads or makes float16 runs its op's float32 kernel.

NumPy has few half-precision loops and Numba none (it cannot even load a float16 array on the CPU; numba.cuda's
half arithmetic covers a few operators), so the kernel of a node touching float16 is resolved for float32: its
float16 inputs are converted to float32 by the device's ``astype`` kernel, its float16 attributes (a cast's
``dtype``, a fused program's) read as float32, and its result, when the node is float16, rounded back to float16.
Each op's value is its float32 value rounded once, as PyTorch's CPU kernels compute float16 (in float32, rounded per
op); a chain of ops rounds after each, as there, so results are within float16's precision (2⁻¹¹ relative per op)
of the float32 computation. Gradients of float16 values are float16, each op's rounded the same way. A chain of
elementwise ops that the compiler fuses into one kernel rounds once, at its end (closer to float32, and not bit for
bit the unfused graph, which debug mode runs).

The conversion sits at the kernel's dispatch (``Interpreter.kernel``), not in the graph: every way of running a
node (the executor, debug mode, constant folding, the profiler) gets it, on every device, and the graph keeps the
dtypes the user wrote."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

HALF, SINGLE = np.dtype(np.float16), np.dtype(np.float32)


STORAGE_OPS = ("astype", "bitcast")
"""The ops whose kernels take float16 as it is: they convert it, or read its bits."""


def touches_half(node) -> bool:
    """Whether ``node`` reads or makes float16, and its op computes on values."""
    return node.op not in STORAGE_OPS and (node.dtype == HALF or any(x.dtype == HALF for x in node.inputs))


def single(value: Any) -> Any:
    """``value`` (a dtype, its name, or a tuple of them as in a fused program) with float16 read as float32."""
    if isinstance(value, tuple):
        return tuple(map(single, value))
    if value is np.float16 or (isinstance(value, (str, np.dtype)) and value in ("float16", HALF)):
        return SINGLE if isinstance(value, np.dtype) or value is np.float16 else SINGLE.name
    return value


def in_float32(kernel: Callable, node, backend) -> Callable:
    """``kernel`` of ``node`` (which touches float16) running in float32 on ``backend``'s arrays."""
    cast = backend.kernels["astype"]
    if hasattr(kernel, "for_dtypes"):
        kernel = kernel.for_dtypes(*(single(x.dtype) for x in node.inputs),
                                   **{name: single(v) for name, v in node.attrs.items()})
    rounded = node.dtype == HALF

    def computed_in_float32(*args, **attrs):
        wide = [cast(a, SINGLE) if getattr(a, "dtype", None) == HALF else a for a in args]
        out = kernel(*wide, **{name: single(v) for name, v in attrs.items()})
        return cast(out, HALF) if rounded else out
    computed_in_float32.__name__ = f"{getattr(kernel, '__name__', node.op)}_in_float32"
    return computed_in_float32
