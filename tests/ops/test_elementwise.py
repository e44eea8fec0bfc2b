"""Elementwise kernels on every device against NumPy in float64: values, broadcasting (0-d, empty, equal shapes),
comparisons with ties and NaN, logical ops, where, astype, dtypes kept; on the CPU also Numba's dtype dispatch,
integer wrap-around, IEEE edges and warnings."""

import numpy as np
import pytest
from scipy import special

from ops.cpu import elementwise as ew
from ops.cpu import gelu
from tests.conftest import on_device

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


SHAPES = [((3, 1, 5), (4, 5)), ((7,), (7,)), ((), (2, 3)), ((2, 3), ()), ((0, 3), (3,))]
LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or}


@pytest.mark.parametrize("name", UNARY)
def test_unary(name, dtype, device, rng):
    x = (rng.standard_normal((3, 7)) * 3).astype(dtype)
    if name in ("log", "sqrt"):
        x = np.abs(x) + dtype(0.1)
    y = on_device(device, name, x)
    assert y.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(y, UNARY[name](x.astype(np.float64)), **TOL[dtype])


def operands(rng, name, shapes, dtype):
    """Booleans for the logical ops; small nonzero integers for comparisons, maximum and minimum (ties); else
    magnitudes in [0.5, 2] (no division by zero), the exponent of either sign."""
    if name in LOGICAL:
        return [rng.random(s) > 0.5 for s in shapes]
    if name in COMPARE or name in ("maximum", "minimum"):
        return [rng.choice([-2, -1, 1, 2], s).astype(dtype) for s in shapes]
    a, b = (rng.uniform(0.5, 2, s).astype(dtype) for s in shapes)
    return [a, b * rng.choice([-1, 1], b.shape).astype(dtype)]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("name", [*BINARY, *COMPARE, *LOGICAL])
def test_binary_broadcasts(name, shapes, dtype, device, rng):
    a, b = operands(rng, name, shapes, dtype)
    y = on_device(device, name, a, b)
    assert y.shape == np.broadcast_shapes(*shapes) and y.flags.c_contiguous
    if name in BINARY:
        assert y.dtype == dtype
        np.testing.assert_allclose(y, BINARY[name](a.astype(np.float64), b.astype(np.float64)), **TOL[dtype])
    else:
        assert y.dtype == np.bool_
        np.testing.assert_array_equal(y, {**COMPARE, **LOGICAL}[name](a, b))


@pytest.mark.parametrize("name", COMPARE)
def test_comparisons_give_bool(name, dtype, device):
    a = np.array([[1, 2, 3], [3, 2, 1]], dtype)
    b = np.array([2, 2, np.nan], dtype)
    y = on_device(device, name, a, b)
    assert y.dtype == np.bool_
    np.testing.assert_array_equal(y, COMPARE[name](a, b))


def test_logical_and_where(device):
    a = np.array([[True], [False]])
    b = np.array([True, False, True])
    np.testing.assert_array_equal(on_device(device, "logical_and", a, b), a & b)
    np.testing.assert_array_equal(on_device(device, "logical_or", a, b), a | b)
    np.testing.assert_array_equal(on_device(device, "logical_not", b), ~b)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = on_device(device, "where", b, x, np.asarray(np.float32(-1)))
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, np.where(b, x, -1))


def test_where_takes_a_boolean_condition_and_broadcasts(device, rng):
    cond, a, b = rng.random((2, 1, 5)) > 0.5, rng.standard_normal((3, 1)), rng.standard_normal(())
    y = on_device(device, "where", cond, a, b)
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, np.where(cond, a, b))


def test_astype(device, rng):
    x = rng.normal(0, 3, (2, 5)).astype(np.float32)
    np.testing.assert_array_equal(device.get(device.kernels["astype"](device.put(x), np.int64)), x.astype(np.int64))
    as_float = device.get(device.kernels["astype"](device.put(x > 0), np.float32))
    assert as_float.dtype == np.float32
    np.testing.assert_array_equal(as_float, (x > 0).astype(np.float32))


@pytest.mark.parametrize("device", ["cuda"], indirect=True)
def test_full_allocates_on_the_gpu(device):
    from ops.cuda.elementwise import full
    filled = device.get(full((3, 2), 1.5, np.float64))
    assert filled.dtype == np.float64 and filled.shape == (3, 2) and np.all(filled == 1.5)
    zero_d = device.get(full((), 7, np.int64))
    assert zero_d.shape == () and zero_d == 7


def test_float32_stays_float32_after_float64_was_compiled():
    ew.mul(np.ones(2), np.ones(2))
    x = np.ones(4, np.float32)
    assert ew.mul(x, x).dtype == np.float32
    assert ew.mul(x, np.asarray(np.float32(2))).dtype == np.float32
    assert ew.mul(x, x.astype(np.float64)).dtype == np.float64


def test_0d_inputs_give_0d_arrays(dtype, device):
    a = np.asarray(dtype(2))
    for name in ("add", "exp", "less"):
        y = on_device(device, name, a) if name == "exp" else on_device(device, name, a, a)
        assert isinstance(y, np.ndarray) and y.shape == ()
    total = on_device(device, "add", a, a)
    assert total.dtype == dtype and total == 4


def test_empty_and_transposed_inputs(dtype, device):
    assert on_device(device, "add", np.ones((0, 3), dtype), np.ones(3, dtype)).shape == (0, 3)
    x = np.arange(12, dtype=dtype).reshape(3, 4).T
    y = on_device(device, "tanh", x)
    assert y.flags.c_contiguous
    np.testing.assert_allclose(y, np.tanh(x.astype(np.float64)), **TOL[dtype])


def test_nan_propagates_quietly(dtype, device):
    x = np.array([np.nan, -np.inf, -0.0, -1, 2, np.inf], dtype)
    zero = np.zeros(1, dtype)
    with np.errstate(invalid="raise"):
        np.testing.assert_array_equal(on_device(device, "relu", x), [np.nan, 0, 0, 0, 2, np.inf])
        np.testing.assert_array_equal(on_device(device, "maximum", x, zero), [np.nan, 0, 0, 0, 2, np.inf])
        np.testing.assert_array_equal(on_device(device, "minimum", x, zero), [np.nan, -np.inf, -0.0, -1, 0, 0])
        assert not on_device(device, "less", x, zero)[0] and not on_device(device, "greater_equal", x, zero)[0]


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
