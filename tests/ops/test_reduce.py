"""sum, max and var over axes on every device against NumPy: every layout (trailing, leading, middle, scattered
axes), rows longer than a block, empty axes, NaN, integers and booleans; on the CPU also copies and strided input."""
import numpy as np
import pytest

from ops.cpu import reduce

TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}
CASES = [
    ((3, 4, 5), (2,)),          # trailing: rows
    ((3, 4, 5), (0,)),          # leading: columns
    ((3, 4, 5), (1,)),          # middle
    ((3, 4, 5), (0, 2)),        # scattered: moved last (a sum: a run at a time)
    ((2, 3, 4, 5), (0, 2, 3)),  # a convolution's bias gradient
    ((2, 3, 4, 5, 2), (0, 2, 4)),
    ((2, 3, 4, 5), (1, 2)),
    ((3, 4, 5), (0, 1, 2)),     # all: 0-d
    ((3, 4, 5), ()),            # none: a copy
    *(((3, 5, 11), axes) for axes in [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2), ()]),   # rows of 11 > 8 threads
    ((7,), (0,)),
    ((1, 1), (0,)),
    ((2, 600, 3), (1,)),        # more columns than a thread's block
    ((3, 1100), (0,)),
    ((0, 4), (1,)),             # empty output
]


@pytest.fixture(params=[np.float32, np.float64], ids=["f32", "f64"])
def dtype(request):
    return request.param


def reduced(device, name, x, *args):
    """The device's reduction ``name`` of the host array ``x``, back on the host."""
    return device.get(device.kernels[name](device.put(x), *args))


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape, axes", CASES)
def test_sum_and_max_match_numpy(shape, axes, keepdims, dtype, device, rng):
    x = rng.standard_normal(shape).astype(dtype)
    s = reduced(device, "sum", x, axes, keepdims)
    assert isinstance(s, np.ndarray) and s.dtype == dtype and s.flags.c_contiguous
    np.testing.assert_allclose(s, x.sum(axis=axes, keepdims=keepdims), **TOL[dtype])
    m = reduced(device, "max", x, axes, keepdims)
    assert m.dtype == dtype
    np.testing.assert_array_equal(m, x.max(axis=axes, keepdims=keepdims) if axes else x)


def test_identity_is_a_copy():
    x = np.ones((2, 3), np.float32)
    assert reduce.sum(x, (), False) is not x and not np.shares_memory(reduce.max(x, (), False), x)


def test_empty_axis(dtype, device):
    x = np.ones((3, 0, 2), dtype)
    np.testing.assert_array_equal(reduced(device, "sum", x, (1,), False), np.zeros((3, 2)))
    np.testing.assert_array_equal(reduced(device, "sum", np.ones((0, 3), dtype), (0,), False), np.zeros(3))
    assert reduced(device, "sum", np.ones(0, dtype), (0,), False).shape == ()
    with pytest.raises(ValueError, match="empty axis"):
        device.kernels["max"](device.put(x), (1,), False)


@pytest.mark.parametrize("axes", [(0,), (1,)])
def test_max_propagates_nan(axes, dtype, device):
    x = np.arange(12, dtype=dtype).reshape(3, 4)
    x[1, 2] = np.nan
    np.testing.assert_array_equal(reduced(device, "max", x, axes, False), x.max(axis=axes))


def test_max_propagates_nan_and_finds_negative_maxima(device):
    x = np.full((2, 9), -5.0)
    x[0, 7], x[1, 3] = np.nan, -1.0
    np.testing.assert_array_equal(reduced(device, "max", x, (1,), False), [np.nan, -1.0])
    np.testing.assert_array_equal(reduced(device, "max", x, (0,), False)[[3, 7]], [-1.0, np.nan])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the CUDA simulator's NumPy scalars warn at s / 0
@pytest.mark.parametrize("axes, correction", [((1,), 1), ((0, 2), 0), ((1,), 5), ((), 1)], ids=str)
def test_var_divides_by_n_minus_the_correction_with_inf_where_n_is_at_most_it(axes, correction, dtype, device, rng):
    x = rng.standard_normal((3, 5, 4)).astype(dtype)
    n = int(np.prod([x.shape[a] for a in axes]))
    squares = ((x.astype(np.float64) - x.mean(axes, keepdims=True)) ** 2).sum(axes)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = squares / max(0, n - correction)
    got = reduced(device, "var", x, axes, correction, False)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, **TOL[dtype])


def test_non_contiguous_input(rng):
    x = rng.standard_normal((6, 5)).T
    np.testing.assert_allclose(reduce.sum(x, (1,), False), x.sum(1), rtol=1e-12)


@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1), ()], ids=str)
@pytest.mark.parametrize("int_dtype", [np.int8, np.int32, np.uint8, np.bool_], ids=lambda d: np.dtype(d).name)
def test_integers_and_bools(int_dtype, axes, device):
    """max keeps the dtype (the extremes included); sums are int64, as torch.sum and np.sum on 64-bit Linux."""
    x = np.array([[0, 1, 5], [3, 2, 1]], int_dtype)
    if int_dtype != np.bool_:
        x[0, 0], x[1, 2] = np.iinfo(int_dtype).min, np.iinfo(int_dtype).max
    m, s = reduced(device, "max", x, axes, False), reduced(device, "sum", x, axes, False)
    assert m.dtype == int_dtype and s.dtype == np.int64
    np.testing.assert_array_equal(m, x.max(axis=axes) if axes else x)
    np.testing.assert_array_equal(s, x.sum(axis=axes, dtype=np.int64))


def test_integer_sums_of_rows_longer_than_a_block(device, rng):
    x = rng.integers(-5, 5, (4, 13))
    np.testing.assert_array_equal(reduced(device, "sum", x, (1,), False), x.sum(1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("view, axes", [
    (lambda x: x[:, 7:300], (0,)),                              # a bias's gradient read from a column slice
    (lambda x: x[:, 40:232].reshape(600, 3, 64), (1,)),          # the slice's columns split: a sum over the middle
    (lambda x: x[:, 40:232].reshape(30, 20, 192), (1,)),         # its rows split
    (lambda x: x[:, 40:232].reshape(30, 20, 3, 64), (0, 1)),
    (lambda x: x[::2, 5:100], (0,)),                             # every other row
    (lambda x: x[:, 5:100].T, (1,)),                             # transposed: copied
    (lambda x: x[::-1, 5:100], (0,)),                            # negative strides: copied
    (lambda x: x[:0, 5:100], (0,)),
])
def test_a_strided_view_sums_as_its_contiguous_copy_bit_for_bit(view, axes, dtype, rng):
    x = (rng.standard_normal((600, 320)) * 100).astype(dtype)
    v = view(x)
    got, want = reduce.sum(v, axes, False), reduce.sum(np.ascontiguousarray(v), axes, False)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, np.sum(v.astype(np.float64), axis=axes), rtol=1e-4, atol=1e-2)
