"""Embedding gather and scatter-add (atomics) against the CPU kernels."""
import numpy as np
import pytest

from ops.cpu import embedding as cpu
from ops.cuda import embedding as cuda
from tests.cuda.conftest import host, on_device


def test_gather_and_scatter_add_with_repeated_indices(rng):
    table, idx = rng.standard_normal((5, 3)).astype(np.float32), np.array([[1, 1, 4], [0, 1, 2]])
    g = rng.standard_normal((2, 3, 3)).astype(np.float32)
    np.testing.assert_array_equal(host(cuda.gather(*on_device(table, idx))), cpu.gather(table, idx))
    np.testing.assert_allclose(host(cuda.scatter_add(*on_device(g, idx), 5)), cpu.scatter_add(g, idx, 5), rtol=1e-6)


@pytest.mark.parametrize("bad", [5, -1])
def test_an_index_out_of_range_raises_naming_it(bad, rng):
    table, idx = on_device(rng.standard_normal((5, 3)), np.array([[1, bad, 4], [bad, 1, 2]]))
    with pytest.raises(IndexError, match=f"index {bad} is out of range for 5 rows"):
        cuda.gather(table, idx)
    with pytest.raises(IndexError, match=f"index {bad} is out of range for 5 rows"):
        cuda.scatter_add(on_device(np.ones((2, 3, 3))), idx, 5)
