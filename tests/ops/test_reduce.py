"""sum and max over axes against NumPy: every layout (trailing, leading, middle, scattered axes)."""
import numpy as np
import pytest

from ops.cpu import reduce

TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}
CASES = [
    ((3, 4, 5), (2,)),          # trailing: rows
    ((3, 4, 5), (0,)),          # leading: columns
    ((3, 4, 5), (1,)),          # middle
    ((3, 4, 5), (0, 2)),        # scattered: moved last
    ((2, 3, 4, 5), (1, 2)),
    ((3, 4, 5), (0, 1, 2)),     # all: 0-d
    ((3, 4, 5), ()),            # none: a copy
    ((7,), (0,)),
    ((1, 1), (0,)),
    ((2, 600, 3), (1,)),        # more columns than a thread's block
    ((3, 1100), (0,)),
    ((0, 4), (1,)),             # empty output
]


@pytest.fixture(params=[np.float32, np.float64], ids=["f32", "f64"])
def dtype(request):
    return request.param


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape, axes", CASES)
def test_sum_and_max_match_numpy(shape, axes, keepdims, dtype, rng):
    x = rng.standard_normal(shape).astype(dtype)
    s = reduce.sum(x, axes, keepdims)
    assert isinstance(s, np.ndarray) and s.dtype == dtype and s.flags.c_contiguous
    np.testing.assert_allclose(s, x.sum(axis=axes, keepdims=keepdims), **TOL[dtype])
    m = reduce.max(x, axes, keepdims)
    assert m.dtype == dtype
    np.testing.assert_array_equal(m, x.max(axis=axes, keepdims=keepdims) if axes else x)


def test_identity_is_a_copy():
    x = np.ones((2, 3), np.float32)
    assert reduce.sum(x, (), False) is not x and not np.shares_memory(reduce.max(x, (), False), x)


def test_empty_axis(dtype):
    x = np.ones((3, 0, 2), dtype)
    np.testing.assert_array_equal(reduce.sum(x, (1,), False), np.zeros((3, 2)))
    assert reduce.sum(np.ones(0, dtype), (0,), False).shape == ()
    with pytest.raises(ValueError, match="empty axis"):
        reduce.max(x, (1,), False)


@pytest.mark.parametrize("axes", [(0,), (1,)])
def test_max_propagates_nan(axes, dtype):
    x = np.arange(12, dtype=dtype).reshape(3, 4)
    x[1, 2] = np.nan
    np.testing.assert_array_equal(reduce.max(x, axes, False), x.max(axis=axes))


def test_non_contiguous_input(rng):
    x = rng.standard_normal((6, 5)).T
    np.testing.assert_allclose(reduce.sum(x, (1,), False), x.sum(1), rtol=1e-12)


@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1), ()], ids=str)
@pytest.mark.parametrize("int_dtype", [np.int8, np.int32, np.uint8, np.bool_], ids=lambda d: np.dtype(d).name)
def test_integers_and_bools(int_dtype, axes):
    """max keeps the dtype (the extremes included); sums are int64, as torch.sum and np.sum on 64-bit Linux."""
    x = np.array([[0, 1, 5], [3, 2, 1]], int_dtype)
    if int_dtype != np.bool_:
        x[0, 0], x[1, 2] = np.iinfo(int_dtype).min, np.iinfo(int_dtype).max
    m, s = reduce.max(x, axes, False), reduce.sum(x, axes, False)
    assert m.dtype == int_dtype and s.dtype == np.int64
    np.testing.assert_array_equal(m, x.max(axis=axes) if axes else x)
    np.testing.assert_array_equal(s, x.sum(axis=axes, dtype=np.int64))
