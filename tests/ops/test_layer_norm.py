"""Layer norm on every device: forward against NumPy, dx against finite differences, the parameters' gradients
against their sums, float32 against float64, constant rows and rows whose squares overflow float32."""
import numpy as np
import pytest

from tests.conftest import on_device

TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}
SHAPES = [(3, 7), (2, 3, 5), (2, 3, 11), (2, 3, 1), (1, 1), (6,), (0, 4)]   # 11: a row over the simulator's 8 threads


def reference(x, weight, bias, eps):
    x = x.astype(np.float64)
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return y * (1 if weight is None else weight) + (0 if bias is None else bias)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("eps", [1e-5, 0.1])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("affine", [True, False])
def test_forward(shape, affine, eps, dtype, device, rng):
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    weight, bias = (rng.standard_normal((2, shape[-1])).astype(dtype) if affine else (None, None))
    y = on_device(device, "layer_norm", x, weight, bias, eps)
    assert y.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(y, reference(x, weight, bias, eps), **TOL[dtype])


@pytest.mark.parametrize("shape", [(2, 3, 6), (2, 3, 11), (2, 3, 1)])
@pytest.mark.parametrize("affine", [True, False])
def test_backward_matches_finite_differences(shape, affine, device, rng, numeric_grad):
    x = rng.standard_normal(shape)
    weight = rng.standard_normal(shape[-1]) if affine else None
    g = rng.standard_normal(x.shape)
    expected = numeric_grad(lambda v: (reference(v, weight, None, 1e-3) * g).sum(), x)
    np.testing.assert_allclose(on_device(device, "layer_norm_grad", g, x, weight, 1e-3), expected, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("width", [1, 11])
def test_parameter_gradients_are_the_row_sums_of_g_times_the_normalized_x_and_of_g(width, dtype, device, rng):
    x, g = (rng.normal(3, 2, (2, 3, width)).astype(dtype) for _ in range(2))
    normal = reference(x, None, None, 1e-5).reshape(-1, width)
    got = on_device(device, "layer_norm_params_grad", g, x)
    assert got.dtype == dtype and got.shape == (2, width)
    g = g.astype(np.float64).reshape(-1, width)
    np.testing.assert_allclose(got, [(g * normal).sum(0), g.sum(0)], **TOL[dtype])


@pytest.mark.parametrize("width", [1, 11])
def test_float32_backward_agrees_with_float64(width, device, rng):
    x, g = rng.normal(3, 2, (2, 2, 3, width))
    weight = rng.standard_normal(width)
    dx = on_device(device, "layer_norm_grad", *(a.astype(np.float32) for a in (g, x, weight)))
    assert dx.dtype == np.float32
    # width 1: x - mean is 0 up to rounding, which rstd = 1/sqrt(eps) ~ 316 would amplify in float32
    np.testing.assert_allclose(dx, on_device(device, "layer_norm_grad", g, x, weight), rtol=1e-4, atol=1e-4)


def test_float32_backward_and_constant_rows(device, rng):
    x = np.vstack([np.full(5, 3.0), rng.standard_normal(5)]).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    y, dx = on_device(device, "layer_norm", x, None, None, 1e-5), on_device(device, "layer_norm_grad", g, x, None, 1e-5)
    assert dx.dtype == np.float32 and np.all(np.isfinite(y)) and np.all(np.isfinite(dx))
    np.testing.assert_array_equal(y[0], 0)
    dx64 = on_device(device, "layer_norm_grad", g.astype(np.float64), x.astype(np.float64), None, 1e-5)
    np.testing.assert_allclose(dx, dx64, rtol=1e-4, atol=1e-4)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator's NumPy scalars warn as the squares overflow
def test_a_finite_row_whose_squares_overflow_float32_is_normalized(device):
    """[3e19, -3e19, 1, 1]: its variance 4.5e38 overflows float32, where the row was NaN. The values are the
    float64 formula's (torch 2.13's CPU kernel gives 0 here, its float32 variance inf: see the README), ±√2 on
    the large entries; dx = rstd (g - mean g - x^ mean(g x^)) likewise finite."""
    x = np.array([[3e19, -3e19, 1, 1], [1, 2, 3, 4]], np.float32)
    g = np.array([[1, 2, 3, 4], [4, -1, 0.5, 2]], np.float32)
    x64 = x.astype(np.float64)
    rstd = 1 / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
    normal = (x64 - x64.mean(1, keepdims=True)) * rstd
    want_dx = rstd * (g - g.mean(1, keepdims=True) - normal * (g * normal).mean(1, keepdims=True))
    y = on_device(device, "layer_norm", x)
    np.testing.assert_allclose(y, normal, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(y[0, :2], [2 ** 0.5, -(2 ** 0.5)], rtol=1e-6)
    np.testing.assert_allclose(on_device(device, "layer_norm_grad", g, x), want_dx, rtol=1e-5, atol=1e-12)
