"""Running reductions along the last axis: the twins of ops/cpu/scan.py (cumsum and cumprod accumulated in
float64 for floats and in int64 for bool and integers, logcumsumexp by the CPU's ``log_add``, cumarg by its
``takes_over``), a thread per row scanning it in order."""
import numpy as np

from ops._cuda import cuda, device_function, empty
from ops.cpu import scan as cpu
from ops.cuda.elementwise import astype
from ops.cuda.launch import THREADS, blocks
from ops.cuda.layout import rows

log_add = device_function(cpu.log_add)
takes_over = device_function(cpu.takes_over)


def cumsum(x, reverse):
    """The running sums of each row along the last axis, forwards or (``reverse``) backwards."""
    return _running(x, reverse, False)


def cumprod(x):
    """The running products of each row along the last axis."""
    return _running(x, False, True)


def _running(x, reverse, product):
    if x.dtype.kind != "f":
        x = astype(x, np.int64)
    start = (np.float64 if x.dtype.kind == "f" else np.int64)(product)
    return _launch(_running_rows, x, x.dtype, reverse, start, product)


def logcumsumexp(x, reverse):
    """log Σ exp over the elements up to each one (from each one to the end when ``reverse``) of a float x."""
    return _launch(_logcumsumexp_rows, x, x.dtype, reverse)


def cumarg(x, largest):
    """The int64 index of the running maximum (``largest``) or minimum of each row along the last axis."""
    return _launch(_cumarg_rows, x, np.int64, largest)


def _launch(kernel, x, dtype, *args):
    """``kernel``(out rows, x rows, *args) with a thread per row; out of x's shape and ``dtype``."""
    out = empty(x.shape, dtype)
    r = rows(x)
    kernel[blocks(r.shape[0]), THREADS](rows(out), r, *args)
    return out


@cuda.jit
def _running_rows(out, x, reverse, start, product):
    n = x.shape[1]
    for r in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        total = start
        for i in range(n):
            j = n - 1 - i if reverse else i
            total = total * x[r, j] if product else total + x[r, j]
            out[r, j] = total


@cuda.jit
def _logcumsumexp_rows(out, x, reverse):
    n = x.shape[1]
    for r in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        total = -np.inf
        for i in range(n):
            j = n - 1 - i if reverse else i
            total = log_add(total, np.float64(x[r, j]))
            out[r, j] = total


@cuda.jit
def _cumarg_rows(out, x, largest):
    for r in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        at = 0
        for j in range(x.shape[1]):
            if takes_over(x[r, j], x[r, at], largest) or j == 0:
                at = j
            out[r, j] = at


KERNELS = {"cumsum": cumsum, "cumprod": cumprod, "logcumsumexp": logcumsumexp, "cumarg": cumarg}
