"""Position tensors and element counts on the device."""
import numpy as np

from ops.cpu.positions import relative_distance as cpu_relative_distance
from ops.cuda import positions
from tests.cuda.conftest import host, on_device


def test_arange_and_size_read_the_running_shape():
    x = on_device(np.zeros((2, 7, 3), np.float32))
    np.testing.assert_array_equal(host(positions.arange(x, 1)), np.arange(7))
    count = host(positions.size(x, (0, 2), np.float32))
    assert count.shape == () and count.dtype == np.float32 and count == 6


def test_relative_distance_matches_the_cpu():
    q, k = np.zeros((1, 3, 2)), np.zeros((1, 6, 2))
    np.testing.assert_array_equal(host(positions.relative_distance(*on_device(q, k), 2)),
                                  cpu_relative_distance(q, k, 2))
