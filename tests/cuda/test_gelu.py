"""GELU with a fused bias, forward and backward, against the CPU kernels."""
import numpy as np
import pytest

from ops.cpu import gelu as cpu
from ops.cuda import gelu as cuda
from tests.cuda.conftest import host, on_device


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("exact", [False, True])
def test_gelu_matches_the_cpu(exact, with_bias, rng):
    x, g = rng.normal(0, 2, (2, 3, 5)).astype(np.float32), rng.standard_normal((2, 3, 5)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32) if with_bias else None
    device_bias = None if bias is None else on_device(bias)
    # float32: the CPU's polynomials are accurate to a few 1e-7 (ops/cpu/mathfn.py), CUDA's functions to ~1 ulp
    np.testing.assert_allclose(host(cuda.gelu(on_device(x), device_bias, exact)), cpu.gelu(x, bias, exact),
                               rtol=1e-6, atol=2e-6)
    np.testing.assert_allclose(host(cuda.gelu_backward(*on_device(g, x), device_bias, exact)),
                               cpu.gelu_backward(g, x, bias, exact), rtol=1e-6, atol=2e-6)
