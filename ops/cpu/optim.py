"""Optimizer updates, fused: one pass over a parameter, its gradient and its state per step.

With g = s·∇ + λθ (s scales the raw gradient ∇: the clipping factor, or 1/N over N accumulated
micro-batches; λ is L2 weight decay folded into the gradient, as PyTorch's ``weight_decay``):

  sgd    b ← μ·b + g;  θ ← θ − η·(g + μ·b) with Nesterov, θ ← θ − η·b without
         (Sutskever et al. 2013, in PyTorch's form; μ = 0 is plain SGD and keeps no buffer)
  adam   m ← β₁·m + (1 − β₁)·g;  v ← β₂·v + (1 − β₂)·g²;
         θ ← θ − η/(1 − β₁ᵗ) · m / (√v / √(1 − β₂ᵗ) + ε)            (Kingma & Ba 2015, PyTorch's ε placement)
  adamw  θ ← θ·(1 − ηλ), then adam with g = s·∇                       (Loshchilov & Hutter 2019)
  accumulate  G ← G + ∇;   scale  G ← c·G      (summing micro-batches' gradients, clipping them in place)

Each function updates ``param`` and its state arrays in place (they must be C-contiguous and of the
parameter's dtype) and reads ``grad`` without writing it: a gradient may be an array the caller still
uses. The arithmetic runs in the parameter's dtype. ``zeros_like(param)`` allocates a state array.

``Updates`` holds the argument handling of these functions once, for any device: this module instantiates it
with NumPy arrays and the @njit loops below, ops/cuda/optim.py with device arrays and their CUDA twins.

The loops are serial and without fastmath. They are memory-bound: one fused pass beats NumPy's unfused
expression several times over, a second thread gains nothing and loses when the other core is busy, and
fastmath gains nothing. Without fastmath every element is computed the same way whatever the array's size or
alignment, so a resumed run repeats an uninterrupted one bit for bit.
"""
from types import SimpleNamespace

import numpy as np
from numba import njit


class Updates:
    """The optimizer functions of one device, written once: the host-side argument handling lives here, and a
    device supplies its pieces. ``zeros(shape, dtype)`` allocates there; ``flat(a, param)`` checks an array
    updated in place and returns its 1-D view; ``grad(g, param)`` gives the gradient as a flat array of the
    parameter's dtype there; ``sgd``, ``adam``, ``add`` and ``scale`` run the element loops below over the flat
    arrays (this module calls them; ops/cuda/optim.py launches their CUDA twins)."""

    def __init__(self, zeros, flat, grad, sgd, adam, add, scale):
        self.zeros, self.flat, self.grad = zeros, flat, grad
        self.kernels = SimpleNamespace(sgd=sgd, adam=adam, add=add, scale=scale)

    def sgd(self, param, grad, momentum_buffer, lr, momentum=0.0, weight_decay=0.0, nesterov=False, scale=1.0):
        """One SGD step; ``momentum_buffer`` is b (shape of param), or None when momentum is 0."""
        if momentum and momentum_buffer is None:
            raise ValueError("SGD with momentum needs a momentum buffer")
        dt = param.dtype.type
        buffer = self.zeros((0,), param.dtype) if momentum_buffer is None else self.flat(momentum_buffer, param)
        self.kernels.sgd(self.flat(param, param), self.grad(grad, param), buffer, dt(lr), dt(momentum),
                         dt(weight_decay), nesterov, dt(scale))

    def adam(self, param, grad, m, v, lr, step, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, scale=1.0):
        """One Adam step, the ``step``-th (1-based: it sets the bias corrections), with L2 weight decay."""
        self._adam_step(param, grad, m, v, lr, step, betas, eps, weight_decay, 1.0, scale)

    def adamw(self, param, grad, m, v, lr, step, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, scale=1.0):
        """One AdamW step: Adam whose weight decay shrinks θ by (1 − η·λ) instead of entering the moments."""
        self._adam_step(param, grad, m, v, lr, step, betas, eps, 0.0, 1.0 - lr * weight_decay, scale)

    def accumulate(self, total, grad):
        """total ← total + grad, in place: gradient accumulation."""
        self.kernels.add(self.flat(total, total), self.grad(grad, total))

    def scale(self, x, factor):
        """x ← factor·x, in place: gradient clipping."""
        self.kernels.scale(self.flat(x, x), x.dtype.type(factor))

    def zeros_like(self, param):
        """A state array for ``param``: zeros of its shape and dtype, where it lives."""
        return self.zeros(param.shape, param.dtype)

    def _adam_step(self, param, grad, m, v, lr, step, betas, eps, l2, decay, scale):
        if step < 1:
            raise ValueError(f"Adam's step count starts at 1, got {step}")
        dt = param.dtype.type
        beta1, beta2 = betas
        step_size = lr / (1 - beta1 ** step)
        inverse_root_bc2 = 1 / np.sqrt(1 - beta2 ** step)
        self.kernels.adam(self.flat(param, param), self.grad(grad, param), self.flat(m, param), self.flat(v, param),
                          dt(scale), dt(l2), dt(decay), dt(beta1), dt(beta2), dt(step_size), dt(inverse_root_bc2),
                          dt(eps))


def sum_of_squares(x):
    """Σ x², accumulated in float64 whatever x's dtype: the building block of a global gradient norm."""
    return _sum_of_squares(np.ascontiguousarray(x).reshape(-1))


def _flat(a, param):
    """A 1-D view of an array updated in place; a copy would silently drop the update."""
    if not isinstance(a, np.ndarray) or a.shape != param.shape or a.dtype != param.dtype \
            or not a.flags.c_contiguous or not a.flags.writeable:
        raise ValueError(f"an optimizer updates C-contiguous, writeable arrays of the parameter's shape and dtype "
                         f"{param.shape} {param.dtype}; got {getattr(a, 'shape', None)} {getattr(a, 'dtype', type(a))}")
    return a.reshape(-1)


def _grad(grad, param):
    grad = np.asarray(grad)
    if grad.shape != param.shape:
        raise ValueError(f"gradient of shape {grad.shape} for a parameter of shape {param.shape}")
    return np.ascontiguousarray(grad, param.dtype).reshape(-1)


@njit(cache=True, error_model="numpy")
def _sgd(p, g, b, lr, mu, l2, nesterov, scale):
    """b.size == 0 means no momentum"""
    for i in range(p.size):
        d = scale * g[i] + l2 * p[i]
        if b.size:
            b[i] = mu * b[i] + d
            d = d + mu * b[i] if nesterov else b[i]
        p[i] -= lr * d


@njit(cache=True, error_model="numpy")
def _adam(p, g, m, v, scale, l2, decay, beta1, beta2, step_size, inverse_root_bc2, eps):
    one = p.dtype.type(1)
    for i in range(p.size):
        d = scale * g[i] + l2 * p[i]
        m[i] = beta1 * m[i] + (one - beta1) * d
        v[i] = beta2 * v[i] + (one - beta2) * d * d
        p[i] = decay * p[i] - step_size * m[i] / (np.sqrt(v[i]) * inverse_root_bc2 + eps)


@njit(cache=True)
def _add(total, g):
    for i in range(total.size):
        total[i] += g[i]


@njit(cache=True)
def _scale(x, factor):
    for i in range(x.size):
        x[i] *= factor


@njit(cache=True, fastmath=True)
def _sum_of_squares(x):
    total = 0.0
    for i in range(x.size):
        total += np.float64(x[i]) * np.float64(x[i])
    return total


_UPDATES = Updates(np.zeros, _flat, _grad, _sgd, _adam, _add, _scale)
sgd, adam, adamw = _UPDATES.sgd, _UPDATES.adam, _UPDATES.adamw
accumulate, scale, zeros_like = _UPDATES.accumulate, _UPDATES.scale, _UPDATES.zeros_like


KERNELS = {"sgd": sgd, "adam": adam, "adamw": adamw, "accumulate": accumulate, "scale": scale,
           "sum_of_squares": sum_of_squares}
