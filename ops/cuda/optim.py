"""Optimizer updates on the device, fused: the formulas, contract and argument handling of ops/cpu/optim.py.

With g = s·∇ + λθ (s scales the raw gradient, λ is L2 weight decay):

  sgd    b ← μ·b + g;  θ ← θ − η·(g + μ·b) with Nesterov, θ ← θ − η·b without
  adam   m ← β₁·m + (1 − β₁)·g;  v ← β₂·v + (1 − β₂)·g²;  θ ← θ − η/(1 − β₁ᵗ) · m / (√v / √(1 − β₂ᵗ) + ε)
  adamw  θ ← θ·(1 − ηλ), then adam with g = s·∇
  accumulate  G ← G + ∇;   scale  G ← c·G

Each function updates ``param`` (or G) and its state (device arrays of the parameter's shape and dtype) in
place; the gradient may be a device or a host array and is not written. ``zeros_like(param)`` allocates a state
array on the device. The functions are ops/cpu/optim.py's ``Updates``, given this module's pieces: device arrays
and kernels in which a thread per element runs the CPU's own update loop on its one-element slice of the arrays,
so the arithmetic is the CPU's, compiled for the GPU. ``sum_of_squares`` accumulates in float64 and returns a
Python float (a copy to the host).
"""
import numpy as np

from ops._cuda import cuda, device_function, empty, is_device_array, to_device, to_host
from ops.cpu import optim as cpu
from ops.cuda import mathfn
from ops.cuda import reduce as red
from ops.cuda.elementwise import astype, full
from ops.cuda.launch import ROW_THREADS, THREADS, blocks
from ops.cuda.layout import flat
from ops.cuda.reduce import block_sum

_sgd_element = device_function(cpu._sgd)
_adam_element = device_function(cpu._adam, np=mathfn)          # its np.sqrt is CUDA's sqrt
_add_element = device_function(cpu._add)
_scale_element = device_function(cpu._scale)


def sum_of_squares(x):
    """Σ x², accumulated in float64 whatever x's dtype."""
    partial = empty((blocks(x.size, ROW_THREADS),), np.float64)      # one sum per block
    _sum_of_squares[partial.size, ROW_THREADS](partial, flat(x))
    return float(to_host(red.sum(partial, (0,), False)))


def _flat(a, param):
    """A 1-D view of a device array updated in place; a copy would silently drop the update."""
    if not is_device_array(a) or tuple(a.shape) != tuple(param.shape) or a.dtype != param.dtype \
            or not a.is_c_contiguous():
        raise ValueError(f"an optimizer on the GPU updates C-contiguous device arrays of the parameter's shape and "
                         f"dtype {tuple(param.shape)} {param.dtype}; got {type(a).__name__} "
                         f"{getattr(a, 'shape', None)} {getattr(a, 'dtype', None)}")
    return flat(a)


def _grad(grad, param):
    grad = to_device(grad)
    if tuple(grad.shape) != tuple(param.shape):
        raise ValueError(f"gradient of shape {tuple(grad.shape)} for a parameter of shape {tuple(param.shape)}")
    return flat(grad if grad.dtype == param.dtype else astype(grad, param.dtype))


def _launched(kernel):
    """``kernel`` called as its CPU twin is: a grid-stride launch over its first (flat) array."""
    return lambda p, *args: kernel[blocks(p.size), THREADS](p, *args)


@cuda.jit
def _sgd(p, g, b, lr, mu, l2, nesterov, scale):
    """b.size == 0 means no momentum"""
    for i in range(cuda.grid(1), p.size, cuda.gridsize(1)):
        _sgd_element(p[i:i + 1], g[i:i + 1], b[i:i + 1], lr, mu, l2, nesterov, scale)


@cuda.jit
def _adam(p, g, m, v, scale, l2, decay, beta1, beta2, step_size, inverse_root_bc2, eps):
    for i in range(cuda.grid(1), p.size, cuda.gridsize(1)):
        _adam_element(p[i:i + 1], g[i:i + 1], m[i:i + 1], v[i:i + 1], scale, l2, decay, beta1, beta2, step_size,
                      inverse_root_bc2, eps)


@cuda.jit
def _add(total, g):
    for i in range(cuda.grid(1), total.size, cuda.gridsize(1)):
        _add_element(total[i:i + 1], g[i:i + 1])


@cuda.jit
def _scale(x, factor):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        _scale_element(x[i:i + 1], factor)


@cuda.jit
def _sum_of_squares(partial, x):
    shared = cuda.shared.array(ROW_THREADS, np.float64)
    s = np.float64(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        s += np.float64(x[i]) * np.float64(x[i])
    s = block_sum(shared, s)
    if cuda.threadIdx.x == 0:
        partial[cuda.blockIdx.x] = s


_UPDATES = cpu.Updates(lambda shape, dtype: full(shape, 0, dtype), _flat, _grad,
                       *map(_launched, (_sgd, _adam, _add, _scale)))
sgd, adam, adamw = _UPDATES.sgd, _UPDATES.adam, _UPDATES.adamw
accumulate, scale, zeros_like = _UPDATES.accumulate, _UPDATES.scale, _UPDATES.zeros_like


KERNELS = {"sgd": sgd, "adam": adam, "adamw": adamw, "accumulate": accumulate, "scale": scale,
           "sum_of_squares": sum_of_squares}
