"""Position tensors and element counts on every device, read from the running shape, against exact values."""
import numpy as np


def test_arange_and_size_read_the_running_shape(device):
    x = device.put(np.zeros((2, 7, 3), np.float32))
    positions = device.get(device.kernels["arange"](x, 1))
    np.testing.assert_array_equal(positions, np.arange(7))
    assert positions.dtype == np.int64
    count = device.get(device.kernels["size"](x, (0, 2), np.float32))
    assert count.shape == () and count.dtype == np.float32 and count == 6


def test_relative_distance_clips_key_minus_query_and_shifts_it(device):
    q, k = (device.put(np.zeros((1, t, 2))) for t in (3, 6))
    distance = device.get(device.kernels["relative_distance"](q, k, 2))
    np.testing.assert_array_equal(distance, [[2, 3, 4, 4, 4, 4],
                                             [1, 2, 3, 4, 4, 4],
                                             [0, 1, 2, 3, 4, 4]])
    assert distance.dtype == np.int64
