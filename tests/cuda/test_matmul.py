"""Tiled matrix products against the CPU: sizes that do not divide the tile, batching and broadcasting."""
import numpy as np
import pytest

from ops.cpu.matmul import matmul as cpu_matmul
from ops.cuda.launch import TILE
from ops.cuda.matmul import matmul
from tests.cuda.conftest import host, on_device

CASES = [((5, 7), (7, 9)),                  # every dimension crosses a tile edge (TILE is 4 in the simulator)
         ((2, TILE), (TILE, 3)),
         ((2, 5, 7), (7, 3)),               # a batch folded into rows
         ((2, 1, 3, 5), (3, 5, 6)),         # broadcast batch dims
         ((1, 3, 5), (2, 5, 2)),
         ((2, 3, 5), (2, 5, 1)),
         ((0, 3, 4), (4, 2)), ((3, 0), (0, 2))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", CASES, ids=str)
def test_matmul_matches_the_cpu(shapes, dtype, rng):
    a, b = (rng.standard_normal(s).astype(dtype) for s in shapes)
    got, want = host(matmul(*on_device(a, b))), cpu_matmul(a, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("shapes", [((5, 7), (7, 9)), ((2, 5, 7), (7, 3)), ((2, 1, 5, 7), (3, 7, 6))], ids=str)
def test_transposed_operands_are_read_in_place(shapes, transpose_a, transpose_b, rng):
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    a = np.ascontiguousarray(a.swapaxes(-1, -2)) if transpose_a else a
    b = np.ascontiguousarray(b.swapaxes(-1, -2)) if transpose_b else b
    got = host(matmul(*on_device(a, b), transpose_a=transpose_a, transpose_b=transpose_b))
    np.testing.assert_allclose(got, cpu_matmul(a, b, transpose_a, transpose_b), rtol=1e-5, atol=1e-6)
