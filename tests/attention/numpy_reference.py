"""Shared by the attention tests: a NumPy softmax to write the references with, and helpers that run a module
and read back what it recorded."""
import numpy as np

import attngraph as ag


def softmax(x, mask=None, axis=-1):
    """Softmax in float64 over the entries ``mask`` allows; a row with none allowed is all zeros."""
    x = np.asarray(x, np.float64)
    allowed = np.ones(x.shape, bool) if mask is None else np.broadcast_to(mask, x.shape)
    shifted = np.where(allowed, x, -np.inf)
    peak = shifted.max(axis, keepdims=True)
    e = np.exp(shifted - np.where(np.isfinite(peak), peak, 0))
    total = e.sum(axis, keepdims=True)
    return e / np.where(total > 0, total, 1)


class Host(ag.Module):
    """Calls the module under test as its sub-module ``inner`` (whose scope is therefore "inner"), with
    ``options`` added to the traced inputs."""

    def __init__(self, inner, **options):
        super().__init__()
        self.inner, self.options = inner, options

    def forward(self, **inputs):
        return self.inner(**inputs, **self.options)


def trace(module, **arguments):
    """The graph of ``module`` called with ``arguments``: arrays become inputs, other values (``causal=True``,
    ``step=2``) are passed as they are. Returns the graph and the arrays to run it on."""
    arrays = {name: x for name, x in arguments.items() if isinstance(x, np.ndarray)}
    options = {name: x for name, x in arguments.items() if name not in arrays}
    return ag.trace(Host(module, **options), **arrays), arrays


def run(module, **arguments):
    """``module(**arguments)`` run on arrays; see ``trace``."""
    graph, arrays = trace(module, **arguments)
    return graph.compile()(**arrays)


def recorded(module, **arguments) -> dict[str, np.ndarray]:
    """The values of the named nodes (not parameters) that ``module`` creates in its own scope, by name."""
    graph, arrays = trace(module, **arguments)
    named = {n.name: n for n in graph.nodes if n.scope == "inner" and n.kind == "call" and n.name}
    values = graph.with_outputs(named).compile()(**arrays)
    return dict(zip(named, values[len(graph.outputs):]))


def assert_close(actual, expected):
    """A float32 result against a float64 reference."""
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
