"""Batched matrix products on every device against np.matmul: broadcasting, tiles' edges, transposed operands
read in place, empty shapes, NaN and Inf; on the CPU also both threading strategies and strided operands."""
import numpy as np
import pytest

from ops.cpu import matmul as cpu_matmul_module
from ops.cpu.matmul import matmul as cpu_matmul

SHAPES = [
    ((3, 4), (4, 5)),
    ((5, 7), (7, 9)),               # every dimension crosses a tile's edge (4 in the simulator, 16 on a GPU)
    ((2, 4), (4, 3)), ((2, 16), (16, 3)),       # exactly one tile of K
    ((2, 3, 4), (4, 5)),            # b is a matrix: a's batch folds into rows
    ((2, 5, 7), (7, 3)),
    ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 6)),      # batch dims broadcast
    ((2, 1, 3, 5), (3, 5, 6)),
    ((1, 3, 5), (2, 5, 2)),
    ((3, 4), (2, 4, 5)),
    ((2, 3, 5), (2, 5, 1)),
    ((1, 1), (1, 1)),
    ((1, 1, 3, 4), (1, 4, 5)),      # a batch of one: a 2-D product
    ((4, 6, 1), (4, 1, 5)),         # outer products
    ((3, 0), (0, 5)),               # K = 0: zeros
    ((2, 3, 0), (2, 0, 4)),
    ((0, 3, 4), (4, 5)),            # empty batches
    ((0, 3, 4), (1, 4, 5)),
    ((2, 0, 4), (2, 4, 3)),
]
THREADED = [((2, 70, 71), (2, 71, 72)),     # large enough for BLAS's own threads
            ((3, 40, 30), (3, 30, 40))]     # numba's threads, a product each (minutes in the CUDA simulator)
TRANSPOSED = [((5, 7), (7, 9)), ((2, 5, 7), (7, 3)), ((2, 1, 5, 7), (3, 7, 6)), ((2, 1, 3, 4), (5, 4, 6)),
              ((1, 5, 7), (1, 7, 9))]
TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}


def matmul(device, a, b, *transposed):
    return device.get(device.kernels["matmul"](device.put(a), device.put(b), *transposed))


def check(product, a, b, dtype):
    expected = np.matmul(a, b)
    assert product.shape == expected.shape and product.dtype == dtype and product.flags.c_contiguous
    np.testing.assert_allclose(product, expected, **TOL[dtype])


def check_transposed(product, a, b):
    at, bt = (np.ascontiguousarray(x.swapaxes(-1, -2)) for x in (a, b))
    for flags, operands in (((True, False), (at, b)), ((False, True), (a, bt)), ((True, True), (at, bt))):
        np.testing.assert_allclose(product(*operands, *flags), np.matmul(a, b), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("a_shape, b_shape", SHAPES)
def test_matches_numpy(a_shape, b_shape, dtype, device, rng):
    a, b = (rng.standard_normal(s).astype(dtype) for s in (a_shape, b_shape))
    check(matmul(device, a, b), a, b, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("a_shape, b_shape", THREADED)
def test_both_threading_strategies_match_numpy(a_shape, b_shape, dtype, rng):
    a, b = (rng.standard_normal(s).astype(dtype) for s in (a_shape, b_shape))
    check(cpu_matmul(a, b), a, b, dtype)


@pytest.mark.parametrize("a_shape, b_shape", TRANSPOSED)
def test_transposed_operands_are_read_in_place(a_shape, b_shape, device, rng):
    check_transposed(lambda *args: matmul(device, *args), rng.standard_normal(a_shape), rng.standard_normal(b_shape))


@pytest.mark.parametrize("a_shape, b_shape", THREADED)
def test_transposed_operands_are_read_in_place_by_both_threading_strategies(a_shape, b_shape, rng):
    check_transposed(cpu_matmul, rng.standard_normal(a_shape), rng.standard_normal(b_shape))


def test_non_contiguous_operands(rng):
    a = rng.standard_normal((5, 4)).T
    b = rng.standard_normal((2, 6, 5)).transpose(0, 2, 1)
    np.testing.assert_allclose(cpu_matmul(a, b), np.matmul(a, b), rtol=1e-12)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")     # the CUDA simulator's Python arithmetic
def test_nan_and_inf_propagate(device):
    a = np.full((8, 8), np.inf, np.float32)
    a[0, 0] = np.nan
    assert np.isnan(matmul(device, a, np.zeros((8, 8), np.float32))).all()


@pytest.mark.parametrize("n", [8, 512])      # NumPy's BLAS, SciPy's through numba when NumPy's threads spin
def test_nan_and_inf_propagate_without_warnings_on_the_cpu(n, recwarn):
    a = np.full((n, n), np.inf, np.float32)
    a[0, 0] = np.nan
    out = cpu_matmul(a, np.zeros((n, n), np.float32))
    assert np.isnan(out).all() and not recwarn.list


def test_a_small_product_runs_numpys_blas_on_one_thread_and_gives_its_threads_back():
    """Products up to SERIAL_2D_MAX multiply-adds hold NumPy's OpenBLAS to the calling thread for the call only:
    the thread count NumPy's own products see afterwards is the one before."""
    from ops.cpu import matmul as module
    if module._set_numpy_blas_threads is None:
        pytest.skip("NumPy's BLAS is not an OpenBLAS with openblas_set_num_threads_local")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 64), np.float32), rng.standard_normal((64, 192), np.float32)
    assert 64 * 64 * 192 <= module.SERIAL_2D_MAX
    before = module._set_numpy_blas_threads(3)
    try:
        np.testing.assert_allclose(cpu_matmul(a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
        assert module._set_numpy_blas_threads(3) == 3
    finally:
        module._set_numpy_blas_threads(before)


@pytest.mark.parametrize("numpy_max", [None, 0])  # NumPy's BLAS; past _NUMPY_MAX, numba's np.dot on a copy
@pytest.mark.parametrize("rows", [6, 700])
@pytest.mark.parametrize("transposed", [(False, False), (True, False), (False, True)])
def test_column_slices_are_read_as_their_copies(numpy_max, rows, transposed, rng, monkeypatch):
    if numpy_max is not None:
        monkeypatch.setattr(cpu_matmul_module, "_NUMPY_MAX", numpy_max)

    def column_slice(r, c):         # rows strided, entries of a row adjacent: read in place, as BLAS's leading dim
        return rng.standard_normal((r, c + 50)).astype(np.float32)[:, 7:7 + c]

    a = column_slice(400, rows) if transposed[0] else column_slice(rows, 400)
    b = column_slice(200, 400) if transposed[1] else column_slice(400, 200)
    product = cpu_matmul(a, b, *transposed)
    assert np.array_equal(product, cpu_matmul(np.ascontiguousarray(a), np.ascontiguousarray(b), *transposed))


@pytest.mark.parametrize("rows", [6, 700])
@pytest.mark.parametrize("folds", [True, False])
def test_a_batch_of_rows_that_folds_into_a_column_slice_is_read_in_place(rows, folds, rng, monkeypatch):
    """HAN's gate gradients, a (192, 10, 192) column slice of the scan's (192, 10, 448) output, times a weight:
    one 2-D product that reads them in place; a batch whose rows do not fold into one matrix (its middle axis
    sliced too) is copied. Either way the product is the copy's."""
    seen = []
    monkeypatch.setattr(cpu_matmul_module, "numpy_matmul", lambda x, y: seen.append(x) or np.matmul(x, y))
    wide = rng.standard_normal((4, rows, 60)).astype(np.float32)
    a = wide[:, :, 5:45] if folds else wide[:, 1:, 5:45]
    b = rng.standard_normal((30, 40)).astype(np.float32)
    product = cpu_matmul(a, b, False, True)
    assert np.shares_memory(seen[0], wide) == folds
    assert np.array_equal(product, cpu_matmul(np.ascontiguousarray(a), b, False, True))


@pytest.mark.parametrize("transpose_a", [True, False])
def test_a_column_of_one_read_at_a_stride_is_the_copys(transpose_a, rng):
    """Show-Attend-Tell's (320, 64)ᵀ @ (320, 1), the column cut from a (320, 810) array: NumPy's matrix-vector
    product of the strided column differed from the copy's by an ulp, so a row or column alone is copied."""
    a = rng.standard_normal((320, 64) if transpose_a else (64, 320)).astype(np.float32)
    column = rng.standard_normal((320, 810)).astype(np.float32)[:, 416:417]
    product = cpu_matmul(a, column, transpose_a, False)
    assert np.array_equal(product, cpu_matmul(a, np.ascontiguousarray(column), transpose_a, False))


def test_one_thread_holds_blas_while_any_caller_is_inside_and_restores_the_count_found():
    """Two callers on two threads overlap: the count stays 1 until the last one leaves, then is what it was (each
    caller setting and restoring it on its own gave 2 back while the other's products still ran)."""
    from ops.cpu.matmul import OneThread
    count = [4]

    def set_threads(n):
        count[0], found = n, count[0]
        return found
    hold = OneThread(set_threads)
    hold.__enter__()                # the first caller
    hold.__enter__()                # the second, on another thread
    assert count == [1]
    hold.__exit__(None, None, None)
    assert count == [1]
    hold.__exit__(None, None, None)
    assert count == [4]
