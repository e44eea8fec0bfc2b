"""Sum and max over axes against the CPU: consecutive and scattered axes, keepdims, rows longer than a block."""
import numpy as np
import pytest

from ops.cpu import reduce as cpu
from ops.cuda import reduce as cuda
from tests.cuda.conftest import host, on_device

AXES = [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2), ()]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("name", ["sum", "max"])
def test_reductions_match_the_cpu(name, axes, keepdims, rng):
    x = rng.standard_normal((3, 5, 11)).astype(np.float32)          # rows of 11 > the simulator's 8 threads
    got, want = host(getattr(cuda, name)(on_device(x), axes, keepdims)), getattr(cpu, name)(x, axes, keepdims)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator's NumPy scalars warn at s / 0
@pytest.mark.parametrize("axes, correction", [((1,), 1), ((0, 2), 0), ((1,), 5), ((), 1)], ids=str)
def test_var_matches_the_cpu_with_inf_where_n_is_at_most_the_correction(axes, correction, rng):
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)
    np.testing.assert_allclose(host(cuda.var(on_device(x), axes, correction, False)),
                               cpu.var(x, axes, correction, False), rtol=1e-5, atol=1e-6)


def test_max_propagates_nan_and_finds_negative_maxima():
    x = np.full((2, 9), -5.0)
    x[0, 7], x[1, 3] = np.nan, -1.0
    np.testing.assert_array_equal(host(cuda.max(on_device(x), (1,), False)), [np.nan, -1.0])
    np.testing.assert_array_equal(host(cuda.max(on_device(x), (0,), False))[[3, 7]], [-1.0, np.nan])


def test_empty_axes_sum_to_zero_and_max_refuses_them():
    x = np.ones((0, 3), np.float32)
    np.testing.assert_array_equal(host(cuda.sum(on_device(x), (0,), False)), np.zeros(3))
    with pytest.raises(ValueError, match="empty axis"):
        cuda.max(on_device(x), (0,), False)


def test_integer_sums(rng):
    x = rng.integers(-5, 5, (4, 13))
    np.testing.assert_array_equal(host(cuda.sum(on_device(x), (1,), False)), x.sum(1))
