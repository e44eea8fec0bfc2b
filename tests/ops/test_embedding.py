"""gather and scatter_add against NumPy indexing and np.add.at; bad indices raise."""
import numpy as np
import pytest

from ops.cpu.embedding import gather, scatter_add

INDICES = [np.array([[1, 2, 9], [0, 0, 4]]), np.array(3), np.zeros(0, np.int64),
           np.array([5, 5, 5, 1], np.int32)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("idx", INDICES, ids=["2d", "0d", "empty", "repeated"])
def test_gather_and_scatter_add(idx, dtype, rng):
    table = rng.standard_normal((10, 3)).astype(dtype)
    out = gather(table, idx)
    assert out.dtype == dtype and out.shape == idx.shape + (3,)
    np.testing.assert_array_equal(out, table[idx])
    g = rng.standard_normal(idx.shape + (3,)).astype(dtype)
    expected = np.zeros((10, 3), dtype)
    np.add.at(expected, idx, g)
    got = scatter_add(g, idx, 10)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_scatter_add_spreads_over_threads(rng):
    idx = rng.integers(0, 7, 50)
    g = rng.standard_normal((50, 130))
    expected = np.zeros((7, 130))
    np.add.at(expected, idx, g)
    np.testing.assert_allclose(scatter_add(g, idx, 7), expected, rtol=1e-12)


@pytest.mark.parametrize("bad", [10, -1])
def test_bad_index_raises(bad):
    with pytest.raises(IndexError, match=f"index {bad} "):
        gather(np.ones((10, 3)), np.array([1, bad]))
    with pytest.raises(IndexError, match=f"index {bad} "):
        scatter_add(np.ones((2, 3)), np.array([1, bad]), 10)
