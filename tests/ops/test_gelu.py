"""GELU with a fused bias, forward and backward, on every device against float64 formulas: exact x Φ(x) and the
tanh approximation (Hendrycks & Gimpel, 2016)."""
import numpy as np
import pytest
from scipy import special

C = np.sqrt(2 / np.pi)
TOL = {np.float32: dict(rtol=1e-6, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def reference(x, exact):
    """GELU(x) and GELU'(x) in float64."""
    x = x.astype(np.float64)
    if exact:
        return x * special.ndtr(x), special.ndtr(x) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi)
    t = np.tanh(C * (x + 0.044715 * x ** 3))
    return 0.5 * x * (1 + t), 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * C * (1 + 3 * 0.044715 * x * x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("exact", [False, True])
def test_forward_and_backward_match_the_formulas(exact, with_bias, dtype, device, rng):
    x, g = rng.normal(0, 2, (2, 3, 5)).astype(dtype), rng.standard_normal((2, 3, 5)).astype(dtype)
    bias = rng.standard_normal(5).astype(dtype) if with_bias else None
    on_device_bias = None if bias is None else device.put(bias)
    approximate = "none" if exact else "tanh"
    y = device.get(device.kernels["gelu"](device.put(x), on_device_bias, approximate=approximate))
    dx = device.get(device.kernels["gelu_grad"](device.put(g), device.put(x), on_device_bias,
                                                approximate=approximate))
    value, slope = reference(x if bias is None else x + bias, exact)
    # float32: the CPU's polynomials are accurate to a few 1e-7 (ops/cpu/mathfn.py), CUDA's functions to ~1 ulp
    assert y.dtype == dx.dtype == dtype
    np.testing.assert_allclose(y, value, **TOL[dtype])
    np.testing.assert_allclose(dx, g * slope, **TOL[dtype])
