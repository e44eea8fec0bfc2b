"""The min and logsumexp reductions on every device: values and gradients against PyTorch's with ties, infinities,
NaN and huge values, the kernels over axes against NumPy, integer dtypes, an empty axis; on the CPU float64 gradient
checks and the errors of bad inputs."""
import warnings

import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import DTypeError, ShapeError
from attngraph.inspect import gradcheck
from ops.cpu import reduce
from tests.conftest import on_device, run, value_and_grad_on

INF, NAN = np.inf, np.nan
TOL = {np.float32: dict(rtol=2e-6, atol=1e-6), np.float64: dict(rtol=1e-13, atol=1e-15)}
ROWS = [[1.0, -2.0, -2.0, 3.0], [-INF, -INF, -INF, -INF], [INF, 1.0, 2.0, 3.0], [1000.0, 1000.0, -1000.0, 5.0],
        [NAN, 1.0, 2.0, 3.0], [-INF, 0.0, 1.0, -INF]]
# torch 2.13 in float64 on ROWS: torch.amin(x, 1) and torch.logsumexp(x, 1), and the gradients of their sums
TORCH_REDUCTIONS = {
    "min": ([-2.0, -INF, 1.0, -1000.0, NAN, -INF],
            [[0.0, 0.5, 0.5, 0.0], [0.25, 0.25, 0.25, 0.25], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0],
             [NAN, NAN, NAN, NAN], [0.5, 0.0, 0.0, 0.5]]),
    "logsumexp": ([3.138727648751594, -INF, INF, 1000.6931471805599, NAN, 1.3132616875182228],
                  [[0.11780463658298314, 0.005865147495608347, 0.005865147495608347, 0.8704650684258004],
                   [NAN, NAN, NAN, NAN], [NAN, 0.0, 0.0, 0.0], [0.5000000000000275, 0.5000000000000275, 0.0, 0.0],
                   [NAN, NAN, NAN, NAN], [0.0, 0.2689414213699951, 0.7310585786300049, 0.0]]),
}
REDUCTIONS = {"min": ag.min, "logsumexp": ag.logsumexp}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions_and_gradients_are_pytorchs_with_ties_infinities_nan_and_huge_values(name, dtype, device):
    """Ties share min's gradient evenly; logsumexp neither overflows (1000) nor underflows (−1000)."""
    x = np.array(ROWS, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        y = run(lambda x: REDUCTIONS[name](x, 1), x, device=device)
        _, (dx,) = value_and_grad_on(device, lambda x: ag.sum(REDUCTIONS[name](x, 1)), x)
    # float32's ulp at 1000.69 (6e-5) makes exp(x − logsumexp) 0.4999855 for the row [1000, 1000, ...], in torch too
    tolerance = {"rtol": 3e-5} if dtype == np.float32 else TOL[dtype]
    for got, want in zip((y, dx), TORCH_REDUCTIONS[name]):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, np.array(want, dtype), **tolerance)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_gradients_match_central_differences_in_float64(name, rng):
    x = rng.standard_normal((2, 3, 4))
    weights = rng.standard_normal((2, 1, 4))
    gradcheck(lambda x: ag.sum(REDUCTIONS[name](x, 1, keepdims=True) * weights), x).raise_if_failed()
    gradcheck(lambda x: REDUCTIONS[name](x * x), x).raise_if_failed()


@pytest.mark.parametrize("axes, keepdims", [((1,), False), ((0, 2), True), ((0, 1, 2), False), ((2,), True)])
def test_reduction_kernels_over_axes_match_numpy(axes, keepdims, device, rng):
    """A NaN reaches its reductions, a huge entry overflows none."""
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    x[0, 0, 0], x[1, 2, 3] = NAN, 1000.0
    np.testing.assert_array_equal(on_device(device, "min", x, axes, keepdims), np.min(x, axis=axes, keepdims=keepdims))
    x64 = x.astype(np.float64)
    shift = np.max(x64, axis=axes, keepdims=True)
    want = np.log(np.sum(np.exp(x64 - shift), axis=axes, keepdims=True)) + shift
    got = on_device(device, "logsumexp", x, axes, keepdims)
    assert got.shape == np.min(x, axis=axes, keepdims=keepdims).shape and got.dtype == np.float32
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-6)


def test_min_keeps_integer_and_boolean_dtypes_without_overflow(device):
    ints = np.array([[3, np.iinfo(np.int32).min, 7], [2**31 - 1, 0, -1]], np.int32)
    low = on_device(device, "min", ints, (1,), False)
    assert low.dtype == np.int32 and low.tolist() == [np.iinfo(np.int32).min, -1]
    flags = np.array([[True, False], [True, True]])
    y = run(lambda f: ag.min(f, -1), flags, device=device)
    assert y.dtype == np.bool_ and y.tolist() == [False, True]


def test_min_of_every_element_is_a_0d_array_as_max_is():
    """The kernel's 0-d result stays an array (numba's kernels index it with ()); torch.min(x) * 0.5 of
    [3, 1, 2, 1] is 0.5, its gradient shared by the tied minima: [0, 0.25, 0, 0.25]."""
    for x in (np.array(1.5, np.float32), np.array([3, 1, 2], np.int32)):
        low = reduce.min(x, tuple(range(x.ndim)), False)
        assert isinstance(low, np.ndarray) and low.shape == () and low.dtype == x.dtype
    y, grad = ag.value_and_grad(lambda x: ag.min(x) * 0.5)(np.array([3.0, 1.0, 2.0, 1.0]))
    assert y == 0.5 and grad.tolist() == [0.0, 0.25, 0.0, 0.25]
    assert ag.trace(lambda x: ag.min(x) + 1.0, x=ag.Input(())).compile()(x=np.float32(1.5)) == 2.5


def test_logsumexp_over_an_empty_axis_is_minus_infinity_and_min_has_no_value(device):
    assert run(lambda x: ag.logsumexp(x, 1), np.zeros((2, 0), np.float32), device=device).tolist() == [-INF, -INF]
    with pytest.raises(ShapeError, match="min over axis 1, of size 0"):
        ag.trace(lambda x: ag.min(x, 1), x=ag.Input((2, 0)))


def test_logsumexp_refuses_integers_and_bad_axes():
    with pytest.raises(DTypeError, match="floating-point"):
        ag.trace(lambda x: ag.logsumexp(x), x=ag.Input((3,), "int64"))
    with pytest.raises(ShapeError, match="axis 2 is out of range"):
        ag.trace(lambda x: x.logsumexp(2), x=ag.Input((3, 4)))
