"""Gradient checking: autodiff's gradients against central differences in float64.

    report = gradcheck(lambda x, w: ag.sum(ag.tanh(x @ w)), x, w)
    print(report)            # one row per input: max absolute and relative error
    report.raise_if_failed()

An element passes when |analytic − numeric| ≤ atol + rtol·|numeric|; the numeric derivative is
(f(x + ε) − f(x − ε)) / 2ε, exact to O(ε²) for smooth functions. Both sides run compiled as a training step
does (``executor.compile``: optimized, or as traced in debug mode), so that the check covers the passes too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..core.api import _grad_graph, _input
from ..core.executor import compile
from ..core.graph import Graph, gradient_name
from ..core.functional import as_node
from ..core.tracing import add_output, building
from .table import table


@dataclass
class GradcheckEntry:
    name: str
    shape: tuple
    max_abs_error: float
    max_rel_error: float
    ok: bool


@dataclass
class GradcheckReport:
    entries: list[GradcheckEntry]

    @property
    def ok(self) -> bool:
        return all(e.ok for e in self.entries)

    def raise_if_failed(self) -> None:
        if not self.ok:
            raise AssertionError(f"gradient check failed:\n{self}")

    def __str__(self) -> str:
        return "\n".join(table(("input", "shape", "max abs err", "max rel err", "ok"), [
            (e.name, str(e.shape), f"{e.max_abs_error:.3e}", f"{e.max_rel_error:.3e}", "yes" if e.ok else "NO")
            for e in self.entries], left=("input", "shape", "ok")))


def gradcheck(fn: Callable, *args, argnums: Sequence[int] | None = None, eps: float = 1e-6,
              atol: float = 1e-6, rtol: float = 1e-5) -> GradcheckReport:
    """Check d fn / d args[i] for every floating-point argument (or those in ``argnums``). Floating-point
    arguments are cast to float64; ``fn`` must return a scalar."""
    arrays = [np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else np.asarray(a) for a in args]
    nums = tuple(i for i, a in enumerate(arrays) if a.dtype.kind == "f") if argnums is None else tuple(argnums)
    feeds = {f"arg{i}": a for i, a in enumerate(arrays)}
    value_and_grads = compile(_grad_graph(fn, arrays, nums))
    _, *analytic = value_and_grads(**feeds)
    forward = compile(_forward_graph(fn, arrays))
    entries = []
    for i, exact in zip(nums, analytic):
        numeric = _central_differences(lambda: float(forward(**feeds)), arrays[i], eps)
        entries.append(_compare(f"arg{i}", exact, numeric, atol, rtol))
    return GradcheckReport(entries)


def gradcheck_parameters(loss: Callable, module, *args, eps: float = 1e-6, atol: float = 1e-6,
                         rtol: float = 1e-5) -> GradcheckReport:
    """Check the gradient of ``loss(*args)`` (a function using ``module``) for every trainable parameter of
    ``module``, which should hold float64 parameters (``module.astype(np.float64)``)."""
    arrays = [np.asarray(a) for a in args]
    feeds = {f"arg{i}": a for i, a in enumerate(arrays)}
    graph = _forward_graph(loss, arrays, root=module)
    with_grads = compile(graph.grad())
    exact = dict(zip(with_grads.output_names, with_grads(**feeds)))
    forward = compile(graph)
    return GradcheckReport([
        _compare(name, exact[gradient_name(name)],
                 _central_differences(lambda: float(forward(**feeds)), node.value.data, eps), atol, rtol)
        for name, node in graph.parameters.items() if not node.stop_gradient])


def _forward_graph(fn: Callable, arrays: list[np.ndarray], root=None) -> Graph:
    graph = Graph()
    with building(graph, root=root):
        add_output(as_node(fn(*[_input(f"arg{i}", a) for i, a in enumerate(arrays)])), "value")
    return graph


def _central_differences(f: Callable[[], float], x: np.ndarray, eps: float) -> np.ndarray:
    """∂f/∂x by perturbing ``x`` in place, one element at a time (restored afterwards)."""
    grad = np.zeros(x.shape)
    flat, out = x.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        saved = flat[i]
        flat[i] = saved + eps
        up = f()
        flat[i] = saved - eps
        down = f()
        flat[i] = saved
        out[i] = (up - down) / (2 * eps)
    return grad


def _compare(name: str, exact, numeric: np.ndarray, atol: float, rtol: float) -> GradcheckEntry:
    exact = np.asarray(exact, np.float64)
    error = np.abs(exact - numeric)
    rel = error / np.maximum(np.abs(numeric), 1e-12)
    ok = bool(np.all(error <= atol + rtol * np.abs(numeric)))
    return GradcheckEntry(name, exact.shape, float(error.max(initial=0)), float(rel.max(initial=0)), ok)
