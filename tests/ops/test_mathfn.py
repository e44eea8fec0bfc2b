"""The scalar helpers on their own: float32 and float64 accuracy and edges, with and without fastmath.

The test kernels are not cached on disk: ops.cpu clears its own cache when mathfn.py changes, not this
folder's.
"""
import math

import numpy as np
import pytest
from numba import njit
from scipy import special

from ops.cpu import mathfn

F32 = np.float32


@njit(inline="always")
def _evaluate(x):
    out = np.empty((4, x.size), x.dtype)
    for i in range(x.size):
        out[0, i] = mathfn.exp(x[i])
        out[1, i] = mathfn.tanh(x[i])
        out[2, i] = mathfn.sigmoid(x[i])
        out[3, i] = mathfn.erf(x[i])
    return out


@njit(error_model="numpy")
def evaluate(x):
    """exp, tanh, sigmoid and erf of the 1-D x, as the rows of a (4, x.size) array."""
    return _evaluate(x)


@njit(error_model="numpy", fastmath=True)
def evaluate_fastmath(x):
    """evaluate compiled with fastmath, as the softmax kernels are."""
    return _evaluate(x)


@njit
def max_reduce(x):
    m = x[0]
    for v in x[1:]:
        m = mathfn.maximum(m, v)
    return m


@pytest.mark.parametrize("kernel", [evaluate, evaluate_fastmath], ids=["plain", "fastmath"])
def test_float32_accuracy(kernel):
    x = np.concatenate([np.linspace(-87, 88.72, 350_001, dtype=F32), np.geomspace(1e-30, 1, 1000, dtype=F32)])
    exp, tanh, sigmoid, erf = kernel(x)
    assert exp.dtype == F32
    x64 = x.astype(np.float64)
    assert np.max(np.abs(exp / np.exp(x64) - 1)) < 2e-7
    assert np.max(np.abs(tanh - np.tanh(x64))) < 3e-7
    assert np.max(np.abs(sigmoid - special.expit(x64))) < 3e-7
    assert np.max(np.abs(erf - special.erf(x64))) < 5e-7


def test_float32_edges():
    x = np.array([0, -np.inf, -200, -104.5, -100, -88, 88.7, 88.8, 89, 1e4, np.inf, np.nan, -0.0], F32)
    exp, tanh, sigmoid, erf = evaluate(x)
    assert exp[0] == 1 and np.all(exp[1:4] == 0)
    np.testing.assert_allclose(exp[4:7], np.exp(x[4:7].astype(np.float64)), rtol=1e-5, atol=2e-45)  # denormal
    assert exp[6] < np.finfo(F32).max and np.all(np.isposinf(exp[7:11]))
    np.testing.assert_array_equal(tanh[[1, 2, 4, 5]], -1)
    np.testing.assert_array_equal(tanh[6:11], 1)
    np.testing.assert_array_equal(erf[[1, 2, 4, 5]], -1)
    np.testing.assert_array_equal(erf[6:11], 1)
    assert sigmoid[1] == sigmoid[2] == 0 and 0 < sigmoid[4] < 1e-43 and np.all(sigmoid[6:11] == 1)
    assert sigmoid[0] == 0.5 and tanh[12] == 0 and np.signbit(tanh[12])
    assert np.all(np.isnan([exp[11], tanh[11], sigmoid[11], erf[11]]))


def ulps(got, reference):
    """|got − reference| in units of the reference's last place."""
    return np.abs(got - reference) / np.spacing(np.abs(reference))


@pytest.mark.parametrize("kernel", [evaluate, evaluate_fastmath], ids=["plain", "fastmath"])
def test_float64_accuracy(kernel):
    """exp within 1 ulp of libm's wherever it is normal, tanh within 2 (denormal results within one denormal),
    sigmoid to 1e-15; erf is libm's."""
    rng = np.random.default_rng(0)
    x = np.concatenate([np.linspace(-745.1, 709.7, 1_000_001), rng.uniform(-25, 25, 500_000),
                        np.geomspace(1e-300, 1, 2000), -np.geomspace(1e-300, 1, 2000)])
    exp, tanh, sigmoid, erf = kernel(x)
    assert exp.dtype == np.float64
    reference = np.exp(x)
    normal = reference >= np.finfo(np.float64).tiny
    assert ulps(exp[normal], reference[normal]).max() <= 1
    assert np.abs(exp[~normal] - reference[~normal]).max() <= 5e-324
    assert ulps(tanh, np.tanh(x)).max() <= 2
    np.testing.assert_allclose(sigmoid, special.expit(x), rtol=1e-15, atol=1e-300)
    np.testing.assert_array_equal(erf, [math.erf(v) for v in x])


def test_float64_edges():
    x = np.array([0, -0.0, -np.inf, -1000, -746, -745.2, -745.1, 709.78, 709.79, 710, 1e300, np.inf, np.nan, 19.1,
                  -30])
    exp, tanh, sigmoid, erf = evaluate(x)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(exp, np.exp(x))        # 1, 1, 0, 0, 0, 0, 5e-324, 1.8e308, inf, …, nan
    np.testing.assert_array_equal(tanh, np.tanh(x))           # ±0 keep their sign, ±1 beyond 19.1
    assert np.signbit(tanh[1]) and not np.signbit(tanh[0])
    assert sigmoid[0] == 0.5 and sigmoid[2] == 0 and sigmoid[11] == 1 and np.isnan(sigmoid[12])


def test_python_calls_give_the_accurate_definitions():
    assert mathfn.exp(1.5) == math.exp(1.5) and mathfn.tanh(0.3) == math.tanh(0.3)
    assert mathfn.erf(0.3) == math.erf(0.3) and mathfn.sigmoid(0.0) == 0.5
    assert np.isnan(mathfn.maximum(1.0, np.nan))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_maximum_reduction_propagates_nan(dtype):
    x = np.random.default_rng(0).standard_normal(1001).astype(dtype)
    assert max_reduce(x) == x.max()
    x[500] = np.nan
    assert np.isnan(max_reduce(x))
    assert max_reduce(np.array([-np.inf, -np.inf], dtype)) == -np.inf


@njit(fastmath=mathfn.FASTMATH)
def _max_sum_isnan(x):
    m, s = x[0], x.dtype.type(0)
    for v in x:
        m = mathfn.maximum(m, v)
        s += v
    return m, s, np.isnan(s), mathfn.softmax_shift(m)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fastmath_flags_keep_nan_and_inf(dtype):
    """Vectorized max and sum reductions under mathfn.FASTMATH still see a NaN or inf, and isnan works."""
    x = np.random.default_rng(0).standard_normal(1001).astype(dtype)
    m, s, s_is_nan, shift = _max_sum_isnan(x)
    assert m == x.max() and not s_is_nan and shift == m
    x[700] = np.nan
    m, s, s_is_nan, shift = _max_sum_isnan(x)
    assert np.isnan(m) and np.isnan(s) and s_is_nan and np.isnan(shift)
    x[700] = np.inf
    m, s, s_is_nan, shift = _max_sum_isnan(x)
    assert m == s == np.inf and not s_is_nan and np.isnan(shift)


@pytest.mark.parametrize("exact", [True, False], ids=["erf", "tanh"])
def test_gelu_cut_off_changes_less_than_1e_15(exact):
    """Just inside the cut-off the formulas already give 0 or x, and gradient 0 or 1, to within 1e-15 (1e-21
    for the exact GELU)."""
    x = np.array([-10.0, 10.0]) if exact else np.array([-7.345, 7.345])
    gelu = special.ndtr(x) * x if exact else 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    assert abs(gelu[0]) < (1e-21 if exact else 1e-15) and abs(gelu[1] - x[1]) < 1e-15
    grad = [mathfn.gelu_erf_derivative(v) if exact else mathfn.gelu_tanh_derivative(v) for v in x]
    np.testing.assert_allclose(grad, [0, 1], atol=1e-21 if exact else 1e-15)
