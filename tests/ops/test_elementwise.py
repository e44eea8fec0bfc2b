"""Elementwise ufuncs: values against NumPy, broadcasting, 0-d and empty inputs, dtypes kept."""

import numpy as np
import pytest
from scipy import special

from ops.cpu import elementwise as ew
from ops.cpu import gelu

TOL = {np.float32: dict(rtol=2e-6, atol=1e-6), np.float64: dict(rtol=1e-13, atol=1e-15)}


UNARY = {
    "neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh,
    "sigmoid": special.expit, "erf": special.erf, "relu": lambda x: np.maximum(x, 0),
}
BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum,
}
COMPARE = {
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
    "greater": np.greater, "greater_equal": np.greater_equal,
}


@pytest.fixture(params=[np.float32, np.float64], ids=["f32", "f64"])
def dtype(request):
    return request.param


@pytest.mark.parametrize("name", UNARY)
def test_unary(name, dtype, rng):
    x = (rng.standard_normal((3, 7)) * 3).astype(dtype)
    if name in ("log", "sqrt"):
        x = np.abs(x) + dtype(0.1)
    y = getattr(ew, name)(x)
    assert y.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(y, UNARY[name](x.astype(np.float64)), **TOL[dtype])


@pytest.mark.parametrize("name", BINARY)
def test_binary_broadcasts(name, dtype, rng):
    a = rng.uniform(0.5, 2, (3, 1, 5)).astype(dtype)
    b = rng.uniform(-2, 2, (4, 5)).astype(dtype)
    y = getattr(ew, name)(a, b)
    assert y.dtype == dtype and y.shape == (3, 4, 5) and y.flags.c_contiguous
    np.testing.assert_allclose(y, BINARY[name](a.astype(np.float64), b.astype(np.float64)), **TOL[dtype])


@pytest.mark.parametrize("name", COMPARE)
def test_comparisons_give_bool(name, dtype):
    a = np.array([[1, 2, 3], [3, 2, 1]], dtype)
    b = np.array([2, 2, np.nan], dtype)
    y = getattr(ew, name)(a, b)
    assert y.dtype == np.bool_
    np.testing.assert_array_equal(y, COMPARE[name](a, b))


def test_logical_and_where():
    a = np.array([[True], [False]])
    b = np.array([True, False, True])
    np.testing.assert_array_equal(ew.logical_and(a, b), a & b)
    np.testing.assert_array_equal(ew.logical_or(a, b), a | b)
    np.testing.assert_array_equal(ew.logical_not(b), ~b)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = ew.where(b, x, np.asarray(np.float32(-1)))
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, np.where(b, x, -1))


def test_float32_stays_float32_after_float64_was_compiled():
    ew.mul(np.ones(2), np.ones(2))
    x = np.ones(4, np.float32)
    assert ew.mul(x, x).dtype == np.float32
    assert ew.mul(x, np.asarray(np.float32(2))).dtype == np.float32
    assert ew.mul(x, x.astype(np.float64)).dtype == np.float64


def test_0d_inputs_give_0d_arrays(dtype):
    a = np.asarray(dtype(2))
    for y in (ew.add(a, a), ew.exp(a), ew.less(a, a)):
        assert isinstance(y, np.ndarray) and y.shape == ()
    assert ew.add(a, a).dtype == dtype and ew.add(a, a) == 4


def test_empty_and_transposed_inputs(dtype):
    assert ew.add(np.ones((0, 3), dtype), np.ones(3, dtype)).shape == (0, 3)
    x = np.arange(12, dtype=dtype).reshape(3, 4).T
    y = ew.tanh(x)
    assert y.flags.c_contiguous
    np.testing.assert_allclose(y, np.tanh(x), **TOL[dtype])


def test_nan_propagates_quietly(dtype):
    x = np.array([np.nan, -np.inf, -0.0, -1, 2, np.inf], dtype)
    with np.errstate(invalid="raise"):
        np.testing.assert_array_equal(ew.relu(x), [np.nan, 0, 0, 0, 2, np.inf])
        np.testing.assert_array_equal(ew.maximum(x, np.zeros(1, dtype)), [np.nan, 0, 0, 0, 2, np.inf])
        np.testing.assert_array_equal(ew.minimum(x, np.zeros(1, dtype)), [np.nan, -np.inf, -0.0, -1, 0, 0])
        assert not ew.less(x, np.zeros(1, dtype))[0] and not ew.greater_equal(x, np.zeros(1, dtype))[0]


def test_ieee_edges(dtype):
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        assert np.isposinf(ew.div(np.ones(1, dtype), np.zeros(1, dtype)))[0]
        assert np.isneginf(ew.log(np.zeros(1, dtype)))[0]
        assert np.isnan(ew.sqrt(-np.ones(1, dtype)))[0]
        np.testing.assert_array_equal(ew.exp(np.array([-1e4, 1e4], dtype)), [0, np.inf])
        np.testing.assert_array_equal(ew.sigmoid(np.array([-1e4, 1e4], dtype)), [0, 1])
        np.testing.assert_array_equal(gelu.gelu(np.array([-1e4, 1e4], dtype), exact=True), [0, 1e4])
        np.testing.assert_array_equal(gelu.gelu(np.array([-50, 50], dtype)), [0, 50])


@pytest.mark.parametrize("int_dtype", [np.int8, np.int32, np.uint8, np.bool_], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "maximum", "minimum", "neg"])
def test_integer_and_bool_results_keep_their_dtype(name, int_dtype):
    """The inputs' dtype, wrapping around in it as NumPy does, not Numba's widening to int64 (for bool, add is
    or and mul is and)."""
    a, b = np.array([0, 1, 1, 120], int_dtype), np.array([1, 1, 0, 100], int_dtype)
    args = (a,) if name == "neg" else (a, b)
    numpy_name = {"sub": "subtract", "mul": "multiply", "neg": "negative"}.get(name, name)
    y = getattr(ew, name)(*args)
    assert y.dtype == int_dtype
    np.testing.assert_array_equal(y, getattr(np, numpy_name)(*(x.astype(np.int64) for x in args)).astype(int_dtype))


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "silu", "gelu_tanh", "gelu_erf", "relu", "maximum"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exact_results_raise_no_floating_point_warnings(name, dtype, recwarn):
    """NaN stays NaN and huge inputs give ±1, 0 or x, as NumPy's own functions do, without its warnings (the
    polynomials compute both sides of their branches)."""
    x = np.array([np.nan, 1e30, -1e30, np.inf, -np.inf, 0.5], dtype)
    functions = {"maximum": lambda x: ew.maximum(x, x), "gelu_tanh": gelu.gelu,
                 "gelu_erf": lambda x: gelu.gelu(x, exact=True)}
    y = functions[name](x) if name in functions else getattr(ew, name)(x)
    assert np.isnan(y[0]) and np.isfinite(y[5]) and not recwarn.list


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exp_warns_as_numpy_s_exp_does_only_on_overflow(dtype, recwarn):
    """A NaN row (long enough for the vectorized loop) gives NaN quietly; a huge input overflows with NumPy's
    warning."""
    assert np.isnan(ew.exp(np.full(16, np.nan, dtype))).all() and not recwarn.list
    with pytest.warns(RuntimeWarning, match="overflow"):
        assert np.isposinf(ew.exp(np.full(16, 1000, dtype))).all()
