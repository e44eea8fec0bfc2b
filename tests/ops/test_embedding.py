"""gather and scatter_add on every device against NumPy indexing and np.add.at (repeated indices summed, on the
GPU through atomics); an index out of range raises, naming it."""
import numpy as np
import pytest

INDICES = [np.array([[1, 2, 9], [0, 0, 4]]), np.array(3), np.zeros(0, np.int64),
           np.array([5, 5, 5, 1], np.int32)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("idx", INDICES, ids=["2d", "0d", "empty", "repeated"])
def test_gather_and_scatter_add(idx, dtype, device, rng):
    gather, scatter_add = device.kernels["gather"], device.kernels["scatter_add"]
    table = rng.standard_normal((10, 3)).astype(dtype)
    out = device.get(gather(device.put(table), device.put(idx)))
    assert out.dtype == dtype and out.shape == idx.shape + (3,)
    np.testing.assert_array_equal(out, table[idx])
    g = rng.standard_normal(idx.shape + (3,)).astype(dtype)
    expected = np.zeros((10, 3), dtype)
    np.add.at(expected, idx, g)
    got = device.get(scatter_add(device.put(g), device.put(idx), 10))
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_scatter_add_spreads_over_threads(device, rng):
    idx = rng.integers(0, 7, 50)
    g = rng.standard_normal((50, 130))
    expected = np.zeros((7, 130))
    np.add.at(expected, idx, g)
    got = device.kernels["scatter_add"](device.put(g), device.put(idx), 7)
    np.testing.assert_allclose(device.get(got), expected, rtol=1e-12)


@pytest.mark.parametrize("bad", [10, -1])
def test_an_index_out_of_range_raises_naming_it(bad, device):
    idx = device.put(np.array([[1, bad, 4], [bad, 1, 2]]))
    with pytest.raises(IndexError, match=f"index {bad} is out of range for 10 rows"):
        device.kernels["gather"](device.put(np.ones((10, 3))), idx)
    with pytest.raises(IndexError, match=f"index {bad} is out of range for 10 rows"):
        device.kernels["scatter_add"](device.put(np.ones((2, 3, 3))), idx, 10)
