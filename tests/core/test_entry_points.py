"""Every way into execution runs the optimized graph (``executor.compile``), and the graph as traced in debug mode:
the same loss through ``graph.compile``, ``value_and_grad``, the Trainer and gradcheck makes executables of the
same kernel calls."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.core import passes
from attngraph.core.executor import Executable
from attngraph.inspect import gradcheck, gradcheck_parameters
from attngraph.train import Trainer
from attngraph.train.optim import SGD


class Layer(ag.Module):
    """gelu(x Wᵀ + b): the optimizer absorbs the transpose into the product and the bias add into the GELU."""

    def __init__(self, rng):
        super().__init__()
        self.w = ag.Parameter(rng.standard_normal((4, 3)))
        self.b = ag.Parameter(rng.standard_normal(4))

    def forward(self, x):
        return ag.gelu(x @ ag.transpose(self.w) + self.b)


def loss(x, w, b):
    return ag.sum(ag.gelu(x @ ag.transpose(w) + b))


@pytest.fixture
def made(monkeypatch):
    """The kernel calls of each executable made while the test runs, in order."""
    calls, init = [], Executable.__init__

    def recording(self, graph, *args, **kwargs):
        init(self, graph, *args, **kwargs)
        calls.append(len(self._steps))
    monkeypatch.setattr(Executable, "__init__", recording)
    return calls


def kernel_calls(graph, optimized: bool) -> int:
    return len(Executable(passes.optimize(graph) if optimized else graph)._steps)


@pytest.mark.parametrize("debugging", [False, True])
def test_every_entry_point_runs_the_same_schedule(rng, made, debugging):
    layer = Layer(rng)
    x = rng.standard_normal((5, 3))
    w, b = layer.w.data, layer.b.data
    graph = ag.trace(lambda x: ag.sum(layer(x)), x=x)
    gradient, forward = kernel_calls(graph.grad(), not debugging), kernel_calls(graph, not debugging)
    assert kernel_calls(graph.grad(), True) < kernel_calls(graph.grad(), False)      # the passes change it
    made.clear()
    with ag.debug(debugging):
        graph.grad().compile()
        ag.value_and_grad(loss, argnums=(1, 2))(x, w, b)
        Trainer(layer, lambda model, x: ag.sum(model(x)), SGD(layer, lr=0.1)).fit(lambda rng: {"x": x}, 1)
        gradcheck(loss, x, w, b, argnums=(1, 2)).raise_if_failed()
        gradcheck_parameters(lambda x: ag.sum(layer(x)), layer, x).raise_if_failed()
    assert made == [gradient] * 3 + [gradient, forward] * 2


def test_value_and_grad_compiles_again_in_debug_mode(rng, made):
    """An executable made outside debug mode is not the one debug mode runs (which names the user's nodes), nor
    the other way round; each is made once."""
    x, w, b = rng.standard_normal((5, 3)), rng.standard_normal((4, 3)), rng.standard_normal(4)
    graph = ag.trace(lambda x, w, b: loss(x, w, b), x=x, w=w, b=b).grad(wrt=["w", "b"])
    expected = [kernel_calls(graph, True), kernel_calls(graph, False)]
    made.clear()
    step = ag.value_and_grad(loss, argnums=(1, 2))
    value, grads = step(x, w, b)
    with ag.debug():
        checked, checked_grads = step(x, w, b)
    step(x, w, b)
    assert made == expected
    np.testing.assert_allclose(checked, value, rtol=1e-12)
    for a, c in zip(grads, checked_grads):
        np.testing.assert_allclose(c, a, rtol=1e-12, atol=1e-15)
