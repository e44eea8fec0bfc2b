"""Elementwise kernels against their CPU twins: broadcasting, odd sizes, 0-d operands, both float types."""
import numpy as np
import pytest

from ops.cpu import elementwise as cpu
from ops.cuda import elementwise as cuda
from tests.cuda.conftest import host, on_device

UNARY = ["neg", "exp", "log", "sqrt", "tanh", "sigmoid", "erf", "relu", "logical_not"]
BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "equal", "not_equal", "less", "less_equal",
          "greater", "greater_equal", "logical_and", "logical_or"]
SHAPES = [((3, 1, 5), (4, 1)), ((7,), (7,)), ((), (2, 3)), ((2, 3), ()), ((0, 3), (3,))]


def operand(rng, name, shape, dtype):
    if name.startswith("logical"):
        return rng.random(shape) > 0.5
    if name in ("log", "sqrt", "pow"):
        return rng.uniform(0.5, 2.0, shape).astype(dtype)
    if name in BINARY:      # small nonzero integers: ties for the comparisons, no division by zero
        return rng.choice([-2, -1, 1, 2], shape).astype(dtype)
    return rng.normal(0, 2, shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", UNARY)
def test_unary_ops_match_the_cpu(name, dtype, rng):
    x = operand(rng, name, (3, 7), dtype)
    got, want = host(cuda.KERNELS[name](on_device(x))), getattr(cpu, name)(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    # float32: the CPU's polynomials are accurate to a few 1e-7 (ops/cpu/mathfn.py), CUDA's functions to ~1 ulp
    np.testing.assert_allclose(got, want, **({"rtol": 1e-6, "atol": 2e-6} if dtype == np.float32 else {"rtol": 1e-13}))


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("name", BINARY)
def test_binary_ops_broadcast_like_the_cpu(name, shapes, rng):
    a, b = (operand(rng, name, s, np.float32) for s in shapes)
    got, want = host(cuda.KERNELS[name](*on_device(a, b))), getattr(cpu, name)(a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_where_takes_a_boolean_condition_and_broadcasts(rng):
    cond, a, b = rng.random((2, 1, 5)) > 0.5, rng.standard_normal((3, 1)), rng.standard_normal(())
    got = host(cuda.KERNELS["where"](*on_device(cond, a, b)))
    np.testing.assert_array_equal(got, np.where(cond, a, b))
    assert got.dtype == np.float64


def test_nan_propagates_through_maximum_and_relu():
    x = np.array([np.nan, 1.0, -1.0], np.float32)
    np.testing.assert_array_equal(host(cuda.KERNELS["maximum"](*on_device(x, np.zeros(3, np.float32)))), [np.nan, 1, 0])
    np.testing.assert_array_equal(host(cuda.KERNELS["relu"](on_device(x))), [np.nan, 1, 0])


def test_astype_and_full(rng):
    x = rng.normal(0, 3, (2, 5)).astype(np.float32)
    np.testing.assert_array_equal(host(cuda.astype(on_device(x), np.int64)), x.astype(np.int64))
    np.testing.assert_array_equal(host(cuda.astype(on_device(x > 0), np.float32)), (x > 0).astype(np.float32))
    filled = host(cuda.full((3, 2), 1.5, np.float64))
    assert filled.dtype == np.float64 and filled.shape == (3, 2) and np.all(filled == 1.5)
    assert host(cuda.full((), 7, np.int64)).shape == ()
