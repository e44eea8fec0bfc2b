"""The core functions older than issue 26's tables, at their edges, in one table run on every device (tiny shapes: the
CUDA simulator): values against NumPy in float32 and float64, gradients against central differences of the NumPy
reference in float64 on every device and by gradcheck on the CPU; 0-d tensors, size-0 axes, negative axes and
broadcasting where the function takes them. Comparisons and logical ops (no gradient) give NumPy's booleans at NaN
and ±0; ``stop_gradient`` and ``dropout`` have tests of their own below."""
import math

import numpy as np
import pytest

import attngraph as ag
from attngraph.core import functional
from attngraph.inspect import gradcheck
from tests.conftest import run, value_and_grad_on

rng = np.random.default_rng(26)


def normal(*shape):
    return rng.standard_normal(shape)


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def np_layer_norm(x, w=1.0, b=0.0, eps=1e-5):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * w + b


# name: (the function, its NumPy reference, its inputs in float64); a name starts with the function's
ROWS = {
    "sum_negative_axes": (lambda x: ag.sum(x, axis=(-1, -3)), lambda x: x.sum((-1, -3)), [normal(2, 3, 2)]),
    "sum_0d": (ag.sum, np.sum, [np.array(1.7)]),
    "sum_size_0_axis": (lambda x: ag.sum(x, axis=-1), lambda x: x.sum(-1), [normal(3, 0)]),
    "sum_keepdims_broadcast": (lambda x, y: ag.sum(x * y, axis=0, keepdims=True),
                               lambda x, y: (x * y).sum(0, keepdims=True), [normal(3, 1), normal(4)]),
    "mean_negative_keepdims": (lambda x: ag.mean(x, axis=-2, keepdims=True), lambda x: x.mean(-2, keepdims=True),
                               [normal(2, 3, 2)]),
    "mean_0d": (ag.mean, np.mean, [np.array(-0.4)]),
    "max_negative_axis": (lambda x: ag.max(x, axis=-1), lambda x: x.max(-1), [normal(3, 4)]),
    "reshape_inferred": (lambda x: ag.reshape(x, (-1, 2)), lambda x: x.reshape(-1, 2), [normal(2, 3, 2)]),
    "reshape_0d": (lambda x: ag.reshape(x, (1, 1)), lambda x: x.reshape(1, 1), [np.array(2.5)]),
    "reshape_size_0": (lambda x: ag.reshape(x, (3, 0)), lambda x: x.reshape(3, 0), [normal(0, 3)]),
    "transpose_reversed": (ag.transpose, np.transpose, [normal(2, 3, 2)]),
    "broadcast_to_from_0d": (lambda x: ag.broadcast_to(x, (2, 3)), lambda x: np.broadcast_to(x, (2, 3)),
                             [np.array(0.3)]),
    "concat_negative_axis": (lambda x, y: ag.concat([x, y, x], axis=-1), lambda x, y: np.concatenate([x, y, x], -1),
                             [normal(2, 2), normal(2, 1)]),
    "concat_size_0_piece": (lambda x, y: ag.concat([x, y], axis=0), lambda x, y: np.concatenate([x, y], 0),
                            [normal(0, 3), normal(2, 3)]),
    "split_negative_axis": (lambda x: ag.split(x, [1, 2], axis=-1)[1], lambda x: x[..., 1:], [normal(2, 3)]),
    "softmax_negative_axis": (lambda x: ag.softmax(x, axis=-2), lambda x: np_softmax(x, -2), [normal(2, 3, 2)]),
    "softmax_size_0_batch": (ag.softmax, np_softmax, [normal(0, 3)]),
    "log_softmax_axis_0": (lambda x: ag.log_softmax(x, axis=0), lambda x: np.log(np_softmax(x, 0)), [normal(3, 2)]),
    "layer_norm_weight_and_bias": (ag.layer_norm, np_layer_norm, [normal(2, 3), normal(3), normal(3)]),
    "layer_norm_size_0_batch": (lambda x: ag.layer_norm(x), np_layer_norm, [normal(0, 4)]),
    "matmul_broadcast_batches": (ag.matmul, np.matmul, [normal(2, 1, 2, 3), normal(3, 3, 2)]),
    "matmul_size_0_inner": (ag.matmul, np.matmul, [normal(2, 0), normal(0, 3)]),
    "matmul_vector_vector": (ag.matmul, np.matmul, [normal(3), normal(3)]),
    "where_0d_branch": (lambda x, y: ag.where(x > 0, x, y), lambda x, y: np.where(x > 0, x, y),
                        [np.array([[-1.0, 0.5], [2.0, -0.3]]), np.array(0.7)]),
}
EDGES = np.array([-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan])
COMPARISONS = {"equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
               "greater": np.greater, "greater_equal": np.greater_equal}
LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or, "logical_not": np.logical_not}
COVERS = ({max((f for f in functional.__all__ if row.startswith(f + "_")), key=len) for row in ROWS}
          | set(COMPARISONS) | set(LOGICAL) | {"stop_gradient", "dropout"})


def inputs(name, dtype):
    return [x.astype(dtype) for x in ROWS[name][2]]


def weights_for(name):
    """Weights of the objective Σ weights · f(xs): distinct, of the result's shape."""
    _, ref, xs = ROWS[name]
    shape = np.shape(ref(*xs))
    return np.linspace(-1.0, 1.5, math.prod(shape)).reshape(shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ROWS)
def test_values_are_numpys(name, dtype, device):
    fn, ref, _ = ROWS[name]
    got = run(fn, *inputs(name, dtype), device=device)
    want = ref(*inputs(name, np.float64))
    assert isinstance(got, np.ndarray) and got.shape == np.shape(want) and got.dtype == dtype
    np.testing.assert_allclose(got, want, **({"rtol": 1e-12, "atol": 1e-14} if dtype == np.float64 else
                                             {"rtol": 2e-6, "atol": 1e-6}))


def central_differences(objective, xs, i, h=1e-6):
    """∂objective/∂xs[i] by central differences."""
    grad = np.zeros_like(xs[i])
    for index in np.ndindex(xs[i].shape):
        def at(step):
            shifted = [x.copy() for x in xs]
            shifted[i][index] += step
            return objective(*shifted)
        grad[index] = (at(h) - at(-h)) / (2 * h)
    return grad


@pytest.mark.parametrize("name", ROWS)
def test_gradients_are_the_references_slopes(name, device):
    fn, ref, _ = ROWS[name]
    xs, weights = inputs(name, np.float64), weights_for(name)
    _, grads = value_and_grad_on(device, lambda *a: ag.sum(fn(*a) * weights), *xs)
    for i, grad in enumerate(grads):
        want = central_differences(lambda *a: float(np.sum(ref(*a) * weights)), xs, i)
        np.testing.assert_allclose(grad, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", [name for name in ROWS if all(np.size(x) for x in ROWS[name][2])])
def test_gradients_pass_gradcheck_in_float64(name):
    fn, _, xs = ROWS[name]
    weights = weights_for(name)
    gradcheck(lambda *a: ag.sum(fn(*a) * weights), *xs).raise_if_failed()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("name", COMPARISONS)
def test_comparisons_broadcast_over_every_pair_of_edge_values(name, dtype, device):
    values = EDGES if dtype != np.int32 else np.array([-2**31, -1, 0, 1, 2**31 - 1])
    a, b = values.astype(dtype)[:, None], values.astype(dtype)
    got = run(getattr(ag, name), a, b, device=device)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, COMPARISONS[name](a, b))
    assert run(getattr(ag, name), np.array(1.0, dtype), np.array(1.0, dtype), device=device).shape == ()


@pytest.mark.parametrize("name", LOGICAL)
def test_logical_ops_broadcast_0_d_and_empty(name, device):
    p, q = np.array([[True], [False]]), np.array([True, False, True])
    args = (p, q)[:1 if name == "logical_not" else 2]
    np.testing.assert_array_equal(run(getattr(ag, name), *args, device=device), LOGICAL[name](*args))
    empty = (np.zeros((0, 2), bool),) * len(args)
    assert run(getattr(ag, name), *empty, device=device).shape == (0, 2)
    assert run(getattr(ag, name), *(np.array(True),) * len(args), device=device).shape == ()


def test_stop_gradient_passes_the_value_and_no_gradient(device):
    x = np.array([[0.5, -2.0], [3.0, 0.0]])
    value, (grad,) = value_and_grad_on(device, lambda a: ag.sum(a * ag.stop_gradient(a)), x)
    assert value == pytest.approx(float(np.sum(x * x)))
    np.testing.assert_array_equal(grad, x)             # d/dx (x · c) with c = x held constant


@pytest.mark.parametrize("p", [0.0, 0.5])
def test_dropout_keeps_or_zeros_each_entry_and_scales_its_gradient_alike(p, device):
    x = np.linspace(1.0, 2.0, 24).reshape(4, 6)
    graph = ag.trace(lambda x: ag.sum(ag.dropout(x, p) * x), x=x).grad(wrt=["x"])
    (value, grad), again = graph.compile(device.name, seed=3)(x=x), graph.compile(device.name, seed=3)(x=x)
    kept = grad != 0                               # dropped entries get 0; kept ones 2x / (1 − p)
    np.testing.assert_allclose(grad[kept], 2 * x[kept] / (1 - p), rtol=1e-12)
    assert value == pytest.approx(float(np.sum(x[kept] ** 2 / (1 - p))))
    assert kept.all() if p == 0 else 0 < kept.sum() < kept.size
    np.testing.assert_array_equal(again[1], grad)   # one seed, one mask
