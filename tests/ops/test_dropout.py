"""Counter-based dropout on every device: reproducible masks (the same (seed, key) drops the same elements on every
device and dtype), the kept fraction, scaling, argument checks. A device's kernel takes the graph's arguments:
(x, seed, p, key)."""
import numpy as np
import pytest

from ops.cpu import dropout as cpu


def dropout(device, x, p, seed, key) -> np.ndarray:
    """The device's dropout of the host array ``x``, back on the host."""
    return device.get(device.kernels["dropout"](device.put(x), seed, p, key))


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_kept_fraction_and_scale(p, device):
    y = dropout(device, np.ones((200, 500), np.float32), p, 7, 3)
    assert y.dtype == np.float32
    assert abs((y != 0).mean() - (1 - p)) < 0.005         # 5+ standard deviations
    np.testing.assert_allclose(y[y != 0], 1 / (1 - p), rtol=1e-7)


def test_same_seed_and_key_give_the_same_mask_across_dtypes_and_calls(device, rng):
    x = rng.standard_normal((30, 40)) + 10
    a = dropout(device, x, 0.5, 1, 2)
    np.testing.assert_array_equal(a, dropout(device, x, 0.5, 1, 2))
    np.testing.assert_array_equal(a != 0, dropout(device, x.astype(np.float32), 0.5, 1, 2) != 0)
    assert 0.4 < ((a != 0) != (dropout(device, x, 0.5, 1, 3) != 0)).mean() < 0.6     # another key: independent
    assert 0.4 < ((a != 0) != (dropout(device, x, 0.5, 2, 2) != 0)).mean() < 0.6     # another seed too


def test_backward_is_dropout_of_the_gradient(device, rng):
    x, g = rng.standard_normal((2, 50, 20))
    y, dx = dropout(device, x, 0.3, 5, 9), dropout(device, g, 0.3, 5, 9)
    np.testing.assert_array_equal(y == 0, dx == 0)
    np.testing.assert_allclose(dx[dx != 0], g[dx != 0] / 0.7)


def test_p_zero_copies_and_bad_p_raises(device):
    x = device.put(np.arange(6.0))
    y = device.kernels["dropout"](x, 1, 0.0, 1)
    assert y is not x
    np.testing.assert_array_equal(device.get(y), np.arange(6.0))
    for p in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match="probability"):
            device.kernels["dropout"](x, 1, p, 1)
    assert dropout(device, np.ones((0, 3)), 0.5, 1, 1).shape == (0, 3)
    assert dropout(device, np.ones((2, 3)), 0.5, np.int64(-1), 2 ** 70).shape == (2, 3)     # any integers


def test_p_zero_on_a_strided_array_gives_a_contiguous_copy():
    x = np.arange(6.0).reshape(2, 3).T
    y = cpu.dropout(x, 0.0, 1, 1)
    assert not np.shares_memory(x, y) and y.flags.c_contiguous
    np.testing.assert_array_equal(y, x)


def test_the_seed_may_be_an_array_on_the_device(device, rng):
    x = rng.standard_normal(50)
    np.testing.assert_array_equal(dropout(device, x, 0.5, device.put(np.asarray(-5, np.int64)), 4),
                                  cpu.dropout(x, 0.5, -5, 4))


@pytest.mark.parametrize("device", ["cuda"], indirect=True)
@pytest.mark.parametrize("seed, key", [(3, 0), (-5, 2 ** 63 + 7), (2 ** 64 - 1, 11)])
def test_the_device_draws_the_cpus_masks(seed, key, device, rng):
    x = rng.standard_normal((7, 13)).astype(np.float32)
    np.testing.assert_array_equal(dropout(device, x, 0.3, seed, key), cpu.dropout(x, 0.3, seed, key))
