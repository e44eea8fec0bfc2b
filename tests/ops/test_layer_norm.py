"""Layer norm forward against NumPy and backward against finite differences."""
import numpy as np
import pytest

from ops.cpu.layer_norm import layer_norm, layer_norm_backward

TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}


def reference(x, weight, bias, eps):
    x = x.astype(np.float64)
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return y * (1 if weight is None else weight) + (0 if bias is None else bias)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("shape", [(3, 7), (2, 3, 5), (1, 1), (6,), (0, 4)])
@pytest.mark.parametrize("affine", [True, False])
def test_forward(shape, affine, dtype, rng):
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    weight, bias = (rng.standard_normal((2, shape[-1])).astype(dtype) if affine else (None, None))
    y = layer_norm(x, weight, bias, 1e-5)
    assert y.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(y, reference(x, weight, bias, 1e-5), **TOL[dtype])


@pytest.mark.parametrize("affine", [True, False])
def test_backward_matches_finite_differences(affine, rng, numeric_grad):
    x = rng.standard_normal((2, 3, 6))
    weight = rng.standard_normal(6) if affine else None
    g = rng.standard_normal(x.shape)
    expected = numeric_grad(lambda v: (reference(v, weight, None, 1e-3) * g).sum(), x)
    np.testing.assert_allclose(layer_norm_backward(g, x, weight, 1e-3), expected, atol=1e-7)


def test_float32_backward_and_constant_rows(rng):
    x = np.vstack([np.full(5, 3.0), rng.standard_normal(5)]).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    y, dx = layer_norm(x, None, None, 1e-5), layer_norm_backward(g, x, None, 1e-5)
    assert dx.dtype == np.float32 and np.all(np.isfinite(y)) and np.all(np.isfinite(dx))
    np.testing.assert_array_equal(y[0], 0)
    dx64 = layer_norm_backward(g.astype(np.float64), x.astype(np.float64), None, 1e-5)
    np.testing.assert_allclose(dx, dx64, rtol=1e-4, atol=1e-4)


def test_a_finite_row_whose_squares_overflow_float32_is_normalized():
    """[3e19, -3e19, 1, 1]: its variance 4.5e38 overflows float32, where the row was NaN. The values are the
    float64 formula's (torch 2.13's CPU kernel gives 0 here, its float32 variance inf: see the README), ±√2 on
    the large entries; dx = rstd (g - mean g - x^ mean(g x^)) likewise finite."""
    x = np.array([[3e19, -3e19, 1, 1], [1, 2, 3, 4]], np.float32)
    g = np.array([[1, 2, 3, 4], [4, -1, 0.5, 2]], np.float32)
    x64 = x.astype(np.float64)
    rstd = 1 / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
    normal = (x64 - x64.mean(1, keepdims=True)) * rstd
    want_dx = rstd * (g - g.mean(1, keepdims=True) - normal * (g * normal).mean(1, keepdims=True))
    np.testing.assert_allclose(layer_norm(x), normal, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(layer_norm(x)[0, :2], [2 ** 0.5, -(2 ** 0.5)], rtol=1e-6)
    np.testing.assert_allclose(layer_norm_backward(g, x), want_dx, rtol=1e-5, atol=1e-12)
