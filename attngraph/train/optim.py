"""Optimizers (SGD, Adam, AdamW), gradient clipping by global norm, and gradient accumulation.

An optimizer holds named parameters in a fixed order and updates ``Parameter.data`` in place, one fused
Numba kernel per parameter (``ops/cpu/optim.py`` gives the formulas); every compiled graph reads the new
values on its next call::

    optimizer = AdamW(model, lr=3e-4)                 # a Module, (name, Parameter) pairs or Parameters
    loss, *grads = step(**batch)                      # grads in the order of optimizer.names
    norm = clip_grad_norm(grads, max_norm=1.0)
    optimizer.step(grads)

``step(grads, scale=s)`` applies the update to s·grads without writing the gradients: the ``Trainer``
passes the clipping factor and the 1/N of gradient accumulation that way. A gradient given as ``None``
(a parameter the loss does not use) leaves its parameter and state alone.

Gradient accumulation: run N micro-batches, sum their gradients, and step once with scale 1/N. With a
mean loss over equal-sized micro-batches, that is the gradient of the mean loss over all N·B examples —
a batch N times larger than fits at once::

    accumulator = GradientAccumulator()
    for micro_batch in micro_batches:                 # N of them
        loss, *grads = step(**micro_batch)
        accumulator.add(grads)
    optimizer.step(accumulator.grads, scale=1 / accumulator.count)
    accumulator.reset()

The hyper-parameters are the constructor's arguments, checked as PyTorch checks them (``ValueError``), and
``config()`` lists them. ``state_dict()`` holds them, the step count and every state array (momenta, moments)
keyed by parameter name, and ``load_state_dict`` restores all of it, as PyTorch's restores its param_groups.

Devices: everything happens where each parameter lives (``Parameter.device``), as in Chainer: its state arrays
are allocated there (and follow it when it moves, ``Module.to``), and its update, the accumulation and clipping
of its gradient and the gradient's share of the norm run there, by ops/cpu/optim.py's kernels for NumPy arrays
and ops/cuda/optim.py's for CUDA device arrays (imported on first use, so that importing attngraph never
imports numba.cuda). A gradient must live where its parameter does. Only the norm (a float) and
``state_dict()`` (NumPy copies) cross to the host.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ..core.device import backend, backend_of, host
from ..core.parameter import Parameter
from ..errors import CheckpointError, DTypeError
from ..nn.checks import flag, non_negative, probability


def _kernel(name: str, array):
    """The optimizer kernel ``name`` (ops/cpu/optim.py) of the device where ``array`` lives."""
    return backend_of(array).kernels[name]


def _betas(name: str, value) -> tuple[float, float]:
    """Adam's two decay rates, each in [0, 1)."""
    try:
        first, second = value
        return probability(f"{name}[0]", first), probability(f"{name}[1]", second)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be two numbers in [0, 1), got {value!r}") from None


class Optimizer:
    """The shared machinery: named parameters, per-parameter state arrays, the step count, checkpoints.

    A subclass names its hyper-parameters besides ``lr``, each with its check from ``nn.checks``
    (``hyperparameters``), passes their values to ``__init__`` (checked and kept as attributes), names the state
    arrays each parameter needs under given settings (``state_names``), and defines ``update``, which applies
    one step to one parameter."""

    hyperparameters: dict[str, Callable] = {}

    def __init__(self, params, **settings):
        settings = self._checked(settings)
        self.named = _named_parameters(params)
        for name, value in settings.items():
            setattr(self, name, value)
        self.steps = 0
        self.state = {key: [backend_of(p.data).zeros_like(p.data) for _, p in self.named] for key in self.state_names(settings)}
        if self.update_kernel is not None:
            compile_ahead(*self.update_kernel, (p for _, p in self.named))

    update_kernel: tuple[str, int, dict] | None = None      # the update's kernel, for ``compile_ahead``

    @staticmethod
    def state_names(settings: dict) -> tuple[str, ...]:
        """The state arrays that each parameter has under ``settings`` (the hyper-parameters)."""
        return ()

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.named]

    def step(self, grads: Sequence[np.ndarray | None], scale: float = 1.0) -> None:
        """Update every parameter from its gradient (``None``: leave it alone), the gradients aligned
        with ``names``, living where their parameters do, and multiplied by ``scale`` on the fly."""
        if len(grads) != len(self.named):
            raise ValueError(f"{len(grads)} gradients for {len(self.named)} parameters ({', '.join(self.names)})")
        for (name, p), g in zip(self.named, grads):
            if g is not None and np.shape(g) != p.shape:
                raise ValueError(f"gradient of shape {np.shape(g)} for parameter {name!r} of shape {p.shape}")
            if g is not None and backend_of(g).name != p.device:
                raise ValueError(f"the gradient of parameter {name!r} is on {backend_of(g).name!r} but the parameter is "
                                 f"on {p.device!r}: compute it on the parameter's device")
        self.steps += 1
        for i, ((_, p), g) in enumerate(zip(self.named, grads)):
            if g is not None:
                self.update(p.data, g, self._state_of(i), scale)

    def _state_of(self, i: int) -> list:
        """The state arrays of parameter i, moved to where it lives when it has moved since they were made."""
        device = self.named[i][1].device
        for arrays in self.state.values():
            if backend_of(arrays[i]).name != device:
                arrays[i] = backend(device).put(arrays[i])
        return [arrays[i] for arrays in self.state.values()]

    def update(self, param, grad, state: list, scale: float) -> None:
        """One step of one parameter (its device's kernels run it)."""
        raise NotImplementedError

    @classmethod
    def _checked(cls, settings: dict) -> dict:
        """``settings`` as the optimizer keeps them (numbers as floats, ``betas`` a pair, ``nesterov`` a bool), or
        ValueError naming the first one out of range, as PyTorch checks them: lr, momentum, eps and weight_decay
        finite and >= 0, each beta in [0, 1) (NaN is out of every range)."""
        checks = {"lr": non_negative, **cls.hyperparameters}
        try:
            return {name: checks[name](name, value) for name, value in settings.items()}
        except TypeError as e:
            raise ValueError(str(e)) from None

    def config(self) -> dict:
        """The optimizer's type and hyper-parameters (JSON-able), for checkpoints and logs."""
        return {"type": type(self).__name__, **self._settings()}

    def _settings(self) -> dict:
        return {name: getattr(self, name) for name in ("lr", *self.hyperparameters)}

    def state_dict(self) -> dict[str, np.ndarray]:
        """NumPy copies of the hyper-parameters (``lr``, ``betas``, ...), the step count (``steps``) and the
        state arrays (``<state>/<parameter name>``), wherever they live."""
        state = {name: np.asarray(value) for name, value in self._settings().items()}
        state["steps"] = np.asarray(self.steps, np.int64)
        for key, arrays in self.state.items():
            state.update({f"{key}/{name}": _host_copy(a) for (name, _), a in zip(self.named, arrays)})
        return state

    def check_state_dict(self, state: dict[str, np.ndarray]) -> dict:
        """Raise ``CheckpointError`` listing every difference between ``state`` and what ``load_state_dict``
        needs: each hyper-parameter, in its range; the step count; the state arrays that those settings call
        for, with each parameter's shape and dtype; nothing else. Returns the hyper-parameters it holds."""
        settings = self._settings()
        problems = [f"missing: {name}" for name in settings if name not in state]
        try:
            settings.update(self._checked({name: np.asarray(state[name]).tolist() for name in settings
                                           if name in state}))
        except ValueError as e:
            problems.append(str(e))
        layout = {"steps": ((), np.dtype(np.int64))}
        for key in self.state_names(settings):
            layout.update({f"{key}/{name}": (p.shape, p.dtype) for name, p in self.named})
        problems += [f"missing: {key}" for key in layout if key not in state]
        problems += [f"unexpected: {key}" for key in state if key not in layout and key not in settings]
        for key in layout.keys() & state.keys():
            value, (shape, dtype) = np.asarray(state[key]), layout[key]
            if value.shape != shape or value.dtype != dtype:
                problems.append(f"{key}: expected {shape} {dtype}, got {value.shape} {value.dtype}")
        if not problems and state["steps"] < 0:
            problems.append(f"steps: expected a count >= 0, got {int(state['steps'])}")
        if problems:
            raise CheckpointError("optimizer state does not fit the optimizer:\n  " + "\n  ".join(sorted(problems)))
        return settings

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restore ``state_dict()``'s content: the hyper-parameters (as PyTorch's ``load_state_dict`` restores
        its param_groups: an SGD made with ``momentum=0`` gets the saved momentum and its buffers), the step count
        and the state arrays, each put where its parameter lives. Everything is checked first
        (``check_state_dict``): a difference raises ``CheckpointError`` and leaves the optimizer unchanged."""
        settings = self.check_state_dict(state)
        arrays = {key: [backend(p.device).put(np.array(state[f"{key}/{name}"], copy=True, order="C"))
                        for name, p in self.named] for key in self.state_names(settings)}
        for name, value in settings.items():
            setattr(self, name, value)
        self.steps, self.state = int(state["steps"]), arrays

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in self.config().items() if k != "type")
        return f"{type(self).__name__}({len(self.named)} parameters, {settings})"


class SGD(Optimizer):
    """Stochastic gradient descent with momentum μ, Nesterov momentum and L2 weight decay λ (PyTorch's
    form, Sutskever et al. 2013): b ← μ·b + g, θ ← θ − η·(g + μ·b) with Nesterov, else θ ← θ − η·b."""

    hyperparameters = {"momentum": non_negative, "nesterov": flag, "weight_decay": non_negative}

    def __init__(self, params, lr: float, momentum: float = 0.0, nesterov: bool = False, weight_decay: float = 0.0):
        super().__init__(params, lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay)

    @classmethod
    def _checked(cls, settings: dict) -> dict:
        checked = super()._checked(settings)
        if checked.get("nesterov") and not checked.get("momentum"):
            raise ValueError("Nesterov momentum needs momentum > 0")
        return checked

    @staticmethod
    def state_names(settings):
        return ("momentum_buffer",) if settings["momentum"] else ()

    update_kernel = ("sgd", 3, {"lr": 0.0})

    def update(self, param, grad, state, scale):
        _kernel("sgd", param)(param, grad, state[0] if state else None, self.lr, self.momentum, self.weight_decay,
                              self.nesterov, scale)


class Adam(Optimizer):
    """Adam (Kingma & Ba 2015) with bias-corrected moments; ``weight_decay`` λ adds λθ to the gradient
    (L2 regularization, as PyTorch's Adam): m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g²,
    θ ← θ − η/(1−β₁ᵗ) · m / (√v/√(1−β₂ᵗ) + ε)."""

    hyperparameters = {"betas": _betas, "eps": non_negative, "weight_decay": non_negative}
    rule = "adam"

    def kernel(self, param, *args):
        """Update ``param`` by the rule ``self.rule`` (ops/cpu/optim.py's arguments), on its device."""
        _kernel(self.rule, param)(param, *args)

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)

    @staticmethod
    def state_names(settings):
        return ("m", "v")

    @property
    def update_kernel(self):
        return self.rule, 4, {"lr": 0.0, "step": 1}

    def update(self, param, grad, state, scale):
        m, v = state
        self.kernel(param, grad, m, v, self.lr, self.steps, self.betas, self.eps, self.weight_decay, scale)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019): θ ← θ·(1 − ηλ) before the Adam step,
    so the decay is not rescaled by the moments. PyTorch's default λ = 0.01."""

    rule = "adamw"

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01):
        super().__init__(params, lr, betas, eps, weight_decay)


class GradientAccumulator:
    """Sums the gradients of successive micro-batches (see the module's docstring), each on its device. The
    first gradients are kept as given and copied only when a second set is added, so a single micro-batch
    costs nothing; the caller's arrays are never written."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.grads: list[np.ndarray | None] | None = None
        self.count = 0

    def add(self, grads: Sequence[np.ndarray | None]) -> None:
        if self.grads is None:
            self.grads = list(grads)
        else:
            if self.count == 1:
                self.grads = [None if g is None else _copy(g) for g in self.grads]
            for total, g in zip(self.grads, grads):
                if total is not None:
                    _kernel("accumulate", total)(total, g)
        self.count += 1


def compile_ahead(kernel: str, arrays: int, attrs: dict, params: Iterable[Parameter]) -> None:
    """Have the helper process that compiles the first step's kernels on a cold cache (ops/cpu/ahead.py) compile
    first the optimizer kernel ``kernel``, which runs after the step, for the dtype of each CPU parameter among
    ``params``, by calling it on ``arrays`` flat arrays of zeros with the keyword arguments ``attrs``."""
    dtypes = sorted({p.dtype.name for p in params if p.device == "cpu"})
    if dtypes:
        from ops.cpu import ahead
        ahead.expect([ahead.job(kernel, attrs, [((1,), dtype)] * arrays) for dtype in dtypes])


def global_norm(grads: Iterable[np.ndarray | None]) -> float:
    """‖g‖ = √(Σᵢ ‖gᵢ‖²) over every gradient array (None skipped), accumulated in float64."""
    return math.sqrt(sum(_kernel("sum_of_squares", g)(g) for g in grads if g is not None))


def clip_factor(norm: float, max_norm: float) -> float:
    """The factor that brings a gradient of norm ``norm`` down to ``max_norm``: min(1, max_norm / (norm + 1e-6)),
    PyTorch's ``clip_grad_norm_`` rule (Pascanu et al. 2013)."""
    return min(1.0, max_norm / (norm + 1e-6))


def clip_grad_norm(grads: Sequence[np.ndarray | None], max_norm: float) -> float:
    """Scale the gradients in place (on their devices) so that their global norm is at most ``max_norm``;
    returns the norm before clipping. (``optimizer.step(grads, scale=clip_factor(global_norm(grads), max_norm))``
    does the same without writing the gradients.)"""
    norm = global_norm(grads)
    factor = clip_factor(norm, max_norm)
    if factor < 1:
        for g in grads:
            if g is not None:
                _kernel("scale", g)(g, factor)
    return norm


def _host_copy(a) -> np.ndarray:
    return np.array(host(a), copy=True)


def _copy(g):
    """A new array holding ``g``'s values, on its device."""
    total = backend_of(g).zeros_like(g)
    _kernel("accumulate", g)(total, g)
    return total


def _named_parameters(params) -> list[tuple[str, Parameter]]:
    """The trainable parameters of a Module, or a list of (name, Parameter) pairs, or of Parameters
    (named by position, "0", "1", ...), checked to be distinct and distinctly named."""
    if hasattr(params, "named_parameters"):
        named = [(name, p) for name, p in params.named_parameters() if p.trainable]
    else:
        named = [item if isinstance(item, tuple) else (str(i), item) for i, item in enumerate(params)]
    for name, p in named:
        if not isinstance(p, Parameter):
            raise TypeError(f"an optimizer takes Parameters, got {type(p).__name__} for {name!r}")
        if p.dtype == np.float16:           # its kernels update in place, and Numba has no float16
            raise DTypeError(f"parameter {name!r} is float16, which optimizers do not update: train in float32 (or "
                             "float64) and cast a copy with Module.astype('float16') for inference")
    if len({name for name, _ in named}) != len(named) or len({id(p) for _, p in named}) != len(named):
        raise ValueError("an optimizer's parameters must be distinct and distinctly named")
    if not named:
        raise ValueError("an optimizer needs at least one trainable parameter")
    return named
