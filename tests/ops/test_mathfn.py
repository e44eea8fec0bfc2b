"""The scalar helpers on their own: float32 accuracy and edges (with and without fastmath), float64 = libm."""
import functools
import math

import numpy as np
import pytest
from numba import njit
from scipy import special

from ops.cpu import mathfn

F32 = np.float32


@functools.cache
def mapped(fn, fastmath=False):
    """A compiled loop applying the helper `fn` to every element of a 1-D array."""
    @njit(fastmath=fastmath, error_model="numpy")
    def apply(x):
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = fn(x[i])
        return out
    return apply


def f64(fn, x):
    return np.array([fn(float(v)) for v in x])


def sigmoid64(v):
    return 1 / (1 + math.exp(-v)) if v >= 0 else math.exp(v) / (1 + math.exp(v))


@pytest.mark.parametrize("fastmath", [False, True])
def test_float32_exp_relative_error(fastmath):
    x = np.linspace(-87, 88, 400_001, dtype=F32)
    y = mapped(mathfn.exp, fastmath)(x)
    assert y.dtype == F32
    assert np.max(np.abs(y / np.exp(x.astype(np.float64)) - 1)) < 2e-7


@pytest.mark.parametrize("fn, reference, lo, hi, tol", [
    (mathfn.tanh, np.tanh, -12, 12, 3e-7),
    (mathfn.sigmoid, special.expit, -30, 30, 3e-7),
    (mathfn.erf, special.erf, -6, 6, 5e-7),
])
@pytest.mark.parametrize("fastmath", [False, True])
def test_float32_absolute_error(fn, reference, lo, hi, tol, fastmath):
    x = np.concatenate([np.linspace(lo, hi, 200_001, dtype=F32), np.geomspace(1e-30, 1, 1000, dtype=F32)])
    y = mapped(fn, fastmath)(x)
    assert y.dtype == F32
    assert np.max(np.abs(y - reference(x.astype(np.float64)))) < tol


def test_float32_exp_edges():
    exp = mapped(mathfn.exp)
    x = np.array([0, -np.inf, -200, -104.5, -100, -88, 88.7, 88.8, 89, 1e4, np.inf, np.nan], F32)
    y = exp(x)
    assert y[0] == 1 and np.all(y[1:4] == 0)
    np.testing.assert_allclose(y[4:7], np.exp(x[4:7].astype(np.float64)), rtol=1e-5, atol=2e-45)  # denormals
    assert y[6] < np.finfo(F32).max and np.all(np.isposinf(y[7:11])) and np.isnan(y[11])


def test_float32_saturation_and_nan():
    x = np.array([-np.inf, -100, -20, -0.0, 20, 100, np.inf, np.nan], F32)
    t, s, e = (mapped(fn)(x) for fn in (mathfn.tanh, mathfn.sigmoid, mathfn.erf))
    np.testing.assert_array_equal(t[:3], -1)
    np.testing.assert_array_equal(t[4:7], 1)
    assert np.signbit(t[3]) and t[3] == 0
    assert s[0] == 0 and 0 < s[1] < 1e-43 and s[5] == s[6] == 1 and s[3] == 0.5
    np.testing.assert_array_equal(e[[0, 1, 2, 4, 5, 6]], [-1, -1, -1, 1, 1, 1])
    assert np.isnan(t[7]) and np.isnan(s[7]) and np.isnan(e[7])


@pytest.mark.parametrize("fn, reference", [(mathfn.exp, math.exp), (mathfn.tanh, math.tanh),
                                           (mathfn.erf, math.erf), (mathfn.sigmoid, sigmoid64)])
def test_float64_is_accurate(fn, reference):
    x = np.concatenate([np.linspace(-30, 30, 10_001), [-700.0, 700.0]])
    y = mapped(fn)(x)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, f64(reference, x), rtol=1e-15, atol=1e-300)


def test_python_calls_give_the_accurate_definitions():
    assert mathfn.exp(1.5) == math.exp(1.5) and mathfn.tanh(0.3) == math.tanh(0.3)
    assert mathfn.erf(0.3) == math.erf(0.3) and mathfn.sigmoid(0.0) == 0.5
    assert np.isnan(mathfn.maximum(1.0, np.nan))


@njit
def max_reduce(x):
    m = x[0]
    for v in x[1:]:
        m = mathfn.maximum(m, v)
    return m


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_maximum_reduction_propagates_nan(dtype):
    x = np.random.default_rng(0).standard_normal(1001).astype(dtype)
    assert max_reduce(x) == x.max()
    x[500] = np.nan
    assert np.isnan(max_reduce(x))
    assert max_reduce(np.array([-np.inf, -np.inf], dtype)) == -np.inf
