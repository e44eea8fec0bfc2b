"""Fused elementwise kernels on device arrays: the program's scalar function — ``scalar_source`` of
ops/cpu/fused.py, the one definition — compiled as a CUDA device function that calls the CUDA elementwise ops'
scalar functions, and mapped over the broadcast output as those ops are (one element per thread, grid-stride,
each input read through its strides, 0 along the axes it is broadcast on). One kernel per program and arity,
compiled at its first call; ``reads`` is for the CPU's loop nest and is not needed here.
"""
import functools

import numpy as np

from ops._cuda import device_function, empty
from ops.cpu.fused import conversions, ops_of, scalar_source
from ops.cuda import elementwise


def fused(*xs, program: tuple, views: tuple, shape: tuple, **_):
    """The program's output, a new device array of ``shape``, for the device arrays ``xs`` (each read through its
    view, where it has one)."""
    return elementwise.launch(_kernel(program, len(xs)), empty(tuple(shape), np.dtype(program[-1][2])), *xs,
                              views=views)


@functools.cache
def _kernel(program: tuple, arity: int):
    namespace = conversions(program)
    exec(scalar_source(program, arity), namespace)
    scalars = {op: elementwise.KERNELS[op].scalar for op in ops_of(program)}
    return elementwise.map_kernel(device_function(namespace["fused"], **scalars), arity)


KERNELS = {"fused": fused}
