"""Dropout on the device draws the CPU's masks: the same (seed, key) drops the same elements."""
import numpy as np
import pytest

from ops.cpu import dropout as cpu
from ops.cuda import dropout as cuda
from tests.cuda.conftest import host, on_device


@pytest.mark.parametrize("seed, key", [(3, 0), (-5, 2 ** 63 + 7), (2 ** 64 - 1, 11)])
def test_masks_are_the_cpus(seed, key, rng):
    x = rng.standard_normal((7, 13)).astype(np.float32)
    np.testing.assert_array_equal(host(cuda.dropout(on_device(x), 0.3, seed, key)), cpu.dropout(x, 0.3, seed, key))


def test_the_seed_may_stay_on_the_device(rng):
    x = rng.standard_normal(50)
    seed = on_device(np.asarray(-5, np.int64))
    np.testing.assert_array_equal(host(cuda.dropout(on_device(x), 0.5, seed, 4)), cpu.dropout(x, 0.5, -5, 4))


def test_p_zero_copies_and_bad_p_raises():
    x = on_device(np.arange(6.0))
    y = cuda.dropout(x, 0.0, 1, 1)
    assert y is not x
    np.testing.assert_array_equal(host(y), np.arange(6.0))
    with pytest.raises(ValueError, match="probability"):
        cuda.dropout(x, 1.0, 1, 1)
