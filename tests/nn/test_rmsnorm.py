"""RMSNorm (Zhang & Sennrich 2019) against its formula, torch.nn.RMSNorm's numbers, and central differences."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import DTypeError
from attngraph.inspect import gradcheck, gradcheck_parameters

X = np.random.default_rng(3).standard_normal((2, 3, 4))
WEIGHT = np.array([0.5, 1.0, -2.0, 3.0])
OBJECTIVE = np.arange(24.0).reshape(2, 3, 4)


def norm(dtype=np.float64, eps=None):
    layer = ag.nn.RMSNorm(4, eps=eps, dtype=dtype)
    layer.weight.assign(WEIGHT.astype(dtype))
    return layer


def test_matches_the_formula_and_takes_the_dtypes_epsilon_as_torch():
    layer = norm(np.float32)
    assert layer.eps == np.finfo(np.float32).eps and norm(eps=1e-6).eps == 1e-6
    y = ag.trace(layer, x=ag.Input(("B", "T", 4))).compile()(x=X.astype(np.float32))
    want = X / np.sqrt(np.mean(X * X, -1, keepdims=True) + np.finfo(np.float32).eps) * WEIGHT
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_value_and_gradients_are_torch_nn_rmsnorms():
    """torch 2.13: torch.nn.RMSNorm(4, dtype=float64) with weight WEIGHT, objective Σ y ∘ OBJECTIVE."""
    layer = norm()
    graph = ag.trace(lambda x: ag.sum(layer(x) * OBJECTIVE), x=ag.Input((2, 3, 4), "float64"))
    y = ag.trace(layer, x=ag.Input((2, 3, 4), "float64")).compile()(x=X)
    _, dx, dweight = graph.grad(wrt=["x", "weight"]).compile()(x=X)
    np.testing.assert_allclose(y[0, 0], [0.61000618, -1.52771509, -0.49985887, -1.01819705], rtol=1e-7)
    np.testing.assert_allclose(dx[0, 0], [1.01773422, -0.67664386, -2.18261269, 5.09685692], rtol=1e-7)
    np.testing.assert_allclose(dweight, [3.60482763, 32.34024358, 13.0228237, -33.91972282], rtol=1e-7)


def test_gradients_match_central_differences():
    layer = norm(eps=1e-6)
    gradcheck(lambda x: ag.sum(layer(x) * OBJECTIVE), X).raise_if_failed()
    gradcheck_parameters(lambda x: ag.sum(layer(x) * OBJECTIVE), layer, X).raise_if_failed()


@pytest.mark.parametrize("kwargs, error", [({"dim": 0}, ValueError), ({"dim": 4, "eps": -1.0}, ValueError),
                                           ({"dim": 4, "dtype": "int32"}, DTypeError)])
def test_refuses_bad_arguments(kwargs, error):
    with pytest.raises(error):
        ag.nn.RMSNorm(**kwargs)
