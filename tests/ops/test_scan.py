"""cumsum: the kernel on every device against NumPy (NaN, integers, booleans, both directions), the op against
torch 2.13's numbers, dtypes, accuracy on long rows, the reversed running sum as its gradient, and the errors of
bad axes."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import ShapeError
from attngraph.inspect import gradcheck
from ops.cpu import scan

NAN, INF = np.nan, np.inf


def run(f, **feeds):
    return ag.trace(f, **feeds).compile()(**feeds)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_running_sums_along_any_axis_as_torch(axis):
    x = np.arange(24.0).reshape(2, 3, 4) % 5 - 2
    got = run(lambda x: ag.cumsum(x, axis), x=x.astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.cumsum(x, axis))
    # torch.cumsum(torch.tensor([3, nan, 1, inf]), 0), torch.cumsum(torch.tensor(2.5), 0)
    np.testing.assert_array_equal(run(lambda x: ag.cumsum(x, 0), x=np.array([3.0, NAN, 1.0, INF])), [3, NAN, NAN, NAN])
    assert run(lambda s: ag.cumsum(s, -1), s=np.float64(2.5)) == 2.5


def test_bool_and_integers_are_summed_in_int64_as_torch():
    out = run(lambda b, i: (ag.cumsum(b, 0), ag.cumsum(i, 0)), b=np.array([True, False, True]),
              i=np.array([2**31 - 1, 1], np.int32))
    assert [o.dtype for o in out] == [np.int64, np.int64]
    np.testing.assert_array_equal(out[0], [1, 1, 2])
    np.testing.assert_array_equal(out[1], [2**31 - 1, 2**31])         # no int32 overflow


@pytest.mark.parametrize("x", [np.array([[3.0, NAN, 1.0, 3.0, NAN]], np.float32),
                               np.array([[2, 0, 2, 1, 0], [1, 1, 1, 1, 1]], np.int32),
                               np.array([[True, False, True, True, False]])], ids=["nan", "ties", "bool"])
def test_the_kernel_sums_floats_in_their_dtype_and_the_others_in_int64_both_ways(x, device):
    wide = x.astype(np.float64 if x.dtype.kind == "f" else np.int64)
    for reverse in (False, True):
        got = device.get(device.kernels["cumsum"](device.put(x), reverse))
        assert got.dtype == (x.dtype if x.dtype.kind == "f" else np.int64)
        want = np.cumsum(wide[:, ::-1], -1)[:, ::-1] if reverse else np.cumsum(wide, -1)
        np.testing.assert_array_equal(got, want)


def test_the_kernel_runs_backwards_and_float32_rows_keep_their_accuracy(rng):
    x = rng.standard_normal((3, 5))
    np.testing.assert_allclose(scan.cumsum(x, True), np.cumsum(x[:, ::-1], 1)[:, ::-1], rtol=1e-14)
    long = rng.random(100_000).astype(np.float32)
    exact = np.cumsum(long.astype(np.float64))
    assert np.max(np.abs(scan.cumsum(long, False) - exact) / exact) < 1e-7      # float32 accumulation: ~1e-5
    assert scan.cumsum(np.zeros((2, 0), np.float32), False).shape == (2, 0)


def test_the_gradient_is_the_running_sum_from_the_end(rng):
    x, w = rng.standard_normal((2, 5)), rng.standard_normal((2, 5))
    _, grad = ag.value_and_grad(lambda x: ag.sum(ag.cumsum(x, 1) * w))(x)
    np.testing.assert_allclose(grad, np.cumsum(w[:, ::-1], 1)[:, ::-1], rtol=1e-14)
    gradcheck(lambda x: ag.sum(ag.cumsum(x * x, 0) * w), x).raise_if_failed()


def test_symbolic_lengths_take_any_size(rng):
    graph = ag.trace(lambda x: ag.cumsum(x, 1), x=ag.Input((2, "T")))
    for t in (1, 7):
        x = rng.standard_normal((2, t)).astype(np.float32)
        np.testing.assert_allclose(graph.compile()(x=x), np.cumsum(x, 1), rtol=1e-6)


@pytest.mark.parametrize("shape, axis", [((3, 5), 2), ((3, 5), -3), ((3, 5), 1.0), ((3, 5), None), ((), 1)])
def test_a_bad_axis_raises_a_shape_error(shape, axis):
    with pytest.raises(ShapeError, match="out of range"):
        ag.trace(lambda x: ag.cumsum(x, axis), x=ag.Input(shape))
