"""Batched matrix products against np.matmul: broadcasting, both threading strategies, empty shapes."""
import numpy as np
import pytest

from ops.cpu.matmul import matmul

SHAPES = [
    ((3, 4), (4, 5)),
    ((2, 3, 4), (4, 5)),            # b is a matrix: a's batch folds into rows
    ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 6)),      # batch dims broadcast
    ((3, 4), (2, 4, 5)),
    ((1, 1), (1, 1)),
    ((2, 70, 71), (2, 71, 72)),     # large enough for BLAS's own threads
    ((3, 40, 30), (3, 30, 40)),     # numba's threads, a product each
    ((4, 6, 1), (4, 1, 5)),         # outer products
    ((3, 0), (0, 5)),               # K = 0: zeros
    ((2, 3, 0), (2, 0, 4)),
    ((0, 3, 4), (4, 5)),            # empty batches
    ((0, 3, 4), (1, 4, 5)),
    ((2, 0, 4), (2, 4, 3)),
]
TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("a_shape, b_shape", SHAPES)
def test_matches_numpy(a_shape, b_shape, dtype, rng):
    a = rng.standard_normal(a_shape).astype(dtype)
    b = rng.standard_normal(b_shape).astype(dtype)
    c = matmul(a, b)
    expected = np.matmul(a, b)
    assert c.shape == expected.shape and c.dtype == dtype and c.flags.c_contiguous
    np.testing.assert_allclose(c, expected, **TOL[dtype])


@pytest.mark.parametrize("a_shape, b_shape", [((2, 1, 3, 4), (5, 4, 6)), ((3, 40, 30), (3, 30, 40)),
                                              ((2, 70, 71), (2, 71, 72))])
def test_transposed_operands_are_read_in_place(a_shape, b_shape, rng):
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    at, bt = (np.ascontiguousarray(x.swapaxes(-1, -2)) for x in (a, b))
    for flags, operands in (((True, False), (at, b)), ((False, True), (a, bt)), ((True, True), (at, bt))):
        np.testing.assert_allclose(matmul(*operands, *flags), np.matmul(a, b), rtol=1e-12)


def test_non_contiguous_operands(rng):
    a = rng.standard_normal((5, 4)).T
    b = rng.standard_normal((2, 6, 5)).transpose(0, 2, 1)
    np.testing.assert_allclose(matmul(a, b), np.matmul(a, b), rtol=1e-12)


@pytest.mark.parametrize("n", [8, 512])      # NumPy's BLAS, SciPy's through numba when NumPy's threads spin
def test_nan_and_inf_propagate_without_warnings(n, recwarn):
    a = np.full((n, n), np.inf, np.float32)
    a[0, 0] = np.nan
    out = matmul(a, np.zeros((n, n), np.float32))
    assert np.isnan(out).all() and not recwarn.list
