"""Layer norm forward and backward (input and parameter gradients) against the CPU kernels."""
import numpy as np
import pytest

from ops.cpu import layer_norm as cpu
from ops.cuda import layer_norm as cuda
from tests.cuda.conftest import host, on_device


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("width", [1, 11])
def test_layer_norm_matches_the_cpu(width, dtype, rng):
    x, g = (rng.normal(3, 2, (2, 3, width)).astype(dtype) for _ in range(2))
    w, b = (rng.standard_normal(width).astype(dtype) for _ in range(2))
    # width 1: x - mean is 0 up to rounding, which rstd = 1/sqrt(eps) ~ 316 amplifies in float32
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-11}
    np.testing.assert_allclose(host(cuda.layer_norm(*on_device(x, w, b))), cpu.layer_norm(x, w, b), **tol)
    np.testing.assert_allclose(host(cuda.layer_norm(on_device(x), eps=0.1)), cpu.layer_norm(x, eps=0.1), **tol)
    np.testing.assert_allclose(host(cuda.layer_norm_backward(*on_device(g, x, w))), cpu.layer_norm_backward(g, x, w),
                               **tol)
    np.testing.assert_allclose(host(cuda.layer_norm_params_backward(*on_device(g, x))),
                               cpu.layer_norm_params_backward(g, x), **tol)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator's NumPy scalars warn as the squares overflow
def test_a_finite_row_whose_squares_overflow_float32_as_the_cpu():
    x = np.array([[3e19, -3e19, 1, 1]], np.float32)
    np.testing.assert_allclose(host(cuda.layer_norm(on_device(x))), cpu.layer_norm(x), rtol=1e-6, atol=1e-6)
