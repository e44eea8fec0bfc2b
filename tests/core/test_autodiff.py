"""Autodiff: fan-out, shared parameters, broadcasting, stop_gradient / no_grad, second order, deep graphs."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.inspect import gradcheck, gradcheck_parameters


def test_a_node_used_several_times_sums_its_gradients(rng):
    x = rng.standard_normal(5)
    _, grad = ag.value_and_grad(lambda x: ag.sum(x * x + x * 3 + ag.tanh(x)))(x)
    np.testing.assert_allclose(grad, 2 * x + 3 + 1 - np.tanh(x) ** 2, rtol=1e-12)


def test_broadcast_inputs_get_gradients_of_their_own_shape(rng):
    a, b = rng.standard_normal((4, 1, 3)), rng.standard_normal((5, 1))
    _, (ga, gb) = ag.value_and_grad(lambda a, b: ag.sum(a * b), argnums=(0, 1))(a, b)
    assert ga.shape == a.shape and gb.shape == b.shape
    np.testing.assert_allclose(gb, np.full((5, 1), a.sum()), rtol=1e-12)


def test_a_parameter_shared_between_modules_gets_the_sum_of_both_uses(rng):
    first = ag.nn.Linear(3, 3, bias=False)
    second = ag.nn.Linear(3, 3, bias=False)
    second.weight = first.weight

    class Twice(ag.Module):
        def __init__(self):
            super().__init__()
            self.first, self.second = first, second

        def forward(self, x):
            return ag.sum(ag.tanh(self.second(self.first(x))))

    model = Twice().astype(np.float64)
    graph = ag.trace(model, x=np.zeros((2, 3)))
    assert list(graph.parameters) == ["first.weight"]
    gradcheck_parameters(model, model, rng.standard_normal((2, 3))).raise_if_failed()


def test_stop_gradient_and_no_grad_block_the_gradient(rng):
    x = rng.standard_normal(4)

    def f(x):
        with ag.no_grad():
            frozen = x * 10
        return ag.sum(x * ag.stop_gradient(x) + frozen)

    _, grad = ag.value_and_grad(f)(x)
    np.testing.assert_allclose(grad, x, rtol=1e-12)


def test_second_order_gradients_of_tanh_mul_matmul(rng):
    x, w = rng.standard_normal((2, 3)), rng.standard_normal((3, 3))

    def grad_norm(x, w):
        y = ag.sum(ag.tanh(x @ w) * x)
        (gw,) = ag.gradients(y, [w])
        return ag.sum(gw * gw)

    gradcheck(grad_norm, x, w).raise_if_failed()


def test_third_order_of_a_scalar_polynomial():
    def third(x):
        (d1,) = ag.gradients(ag.sum(x * x * x * x), [x])
        (d2,) = ag.gradients(ag.sum(d1), [x])
        (d3,) = ag.gradients(ag.sum(d2), [x])
        return ag.sum(d3)

    _, d4 = ag.value_and_grad(third)(np.array([0.5, -2.0]))
    np.testing.assert_allclose(d4, [24.0, 24.0])


@pytest.mark.parametrize("op", ["getitem", "concat", "gather", "maximum", "where", "max", "gelu", "pow"])
def test_second_order_through_linear_and_piecewise_ops(op, rng):
    x = rng.standard_normal((3, 4)) + 0.1
    body = {"getitem": lambda x: x[1:, ::2] ** 3,
            "concat": lambda x: ag.concat([x, x * x], axis=0) ** 2,
            "gather": lambda x: ag.take(x, np.array([0, 2, 2]), axis=0) ** 3,
            "maximum": lambda x: ag.maximum(x, 0.0) ** 3,
            "where": lambda x: ag.where(x > 0, x * x * x, -x),
            "max": lambda x: ag.max(x * x * x, axis=1),
            "gelu": lambda x: ag.gelu(x) + ag.gelu(x, approximate="none"),
            "pow": lambda x: (x * x + 1) ** 1.5}[op]

    def grad_norm(x):
        (g,) = ag.gradients(ag.sum(body(x)), [x])
        return ag.sum(g * g)

    gradcheck(grad_norm, x).raise_if_failed()


def test_gradient_of_a_graph_of_twenty_thousand_nodes():
    def deep(x):
        for _ in range(10_000):
            x = x * 1.0001 + 0.0
        return ag.sum(x)

    graph = ag.trace(deep, x=np.ones(3))
    assert len(graph.nodes) > 20_000
    backward = graph.grad(wrt=["x"])
    value, grad = backward.compile()(x=np.ones(3))
    np.testing.assert_allclose(grad, np.full(3, 1.0001 ** 10_000), rtol=1e-9)


def test_grad_of_a_non_scalar_is_refused():
    with pytest.raises(ag.AttnGraphError, match="scalar"):
        ag.value_and_grad(lambda x: x * 2)(np.ones(3))


def test_grad_graph_ties_backward_nodes_to_forward_nodes():
    graph = ag.trace(lambda x: ag.sum(ag.tanh(x)), x=ag.Input((3,), "float64"))
    backward = graph.grad(wrt=["x"])
    tanh = next(n for n in backward.nodes if n.op == "tanh")
    assert any(n.grad_of is tanh for n in backward.nodes)
    assert backward.output_names == ["output", "grad:x"]


def test_a_computation_repeated_on_the_same_inputs_is_differentiated_once(rng):
    """A key projection applied at every decoder step (as an attention module does) gets its gradient summed
    over the steps before its VJP: one product for dW, not one per step; the values are unchanged."""
    k, w = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))

    def f(k, w):
        return ag.sum(ag.stack([ag.tanh(ag.matmul(k, w) * t) for t in (0.5, 1.0, 2.0)]))
    graph = ag.trace(f, k=k, w=w).grad(["k", "w"])
    products = [n for n in graph.nodes if n.op == "matmul"]
    assert len(products) == 3 + 2            # the 3 traced copies, then dK and dW once each
    value, dk, dw = graph.compile()(k=k, w=w)
    slope = sum(t * (1 - np.tanh(k @ w * t) ** 2) for t in (0.5, 1.0, 2.0))
    np.testing.assert_allclose(dw, k.T @ slope, rtol=1e-12)
    np.testing.assert_allclose(dk, slope @ w.T, rtol=1e-12)



def test_the_gradient_with_respect_to_one_of_two_equal_computations_takes_only_its_own_paths(rng):
    x = rng.standard_normal(3)

    def f(x):
        a, b = ag.tanh(x), ag.tanh(x)
        return ag.gradients(ag.sum(a * 2.0 + b * 3.0), [a, b])
    da, db = ag.trace(f, x=x).compile()(x=x)
    np.testing.assert_array_equal(da, np.full(3, 2.0))
    np.testing.assert_array_equal(db, np.full(3, 3.0))
