"""Cross-entropy from logits, forward and backward, against the CPU kernels: ignored and out-of-range targets."""
import numpy as np
import pytest

from ops.cpu import cross_entropy as cpu
from ops.cuda import cross_entropy as cuda
from tests.cuda.conftest import host, on_device


@pytest.mark.parametrize("ignore_index", [None, -1])
def test_cross_entropy_matches_the_cpu(ignore_index, rng):
    logits = rng.normal(0, 3, (7, 11)).astype(np.float32)
    targets = np.array([0, 10, -1, 3, -1, 5, 2]) if ignore_index is not None else np.array([0, 10, 1, 3, 4, 5, 2])
    g = np.asarray(0.7, np.float32)
    loss = host(cuda.cross_entropy(*on_device(logits, targets), ignore_index))
    assert loss.shape == () and loss.dtype == np.float32
    np.testing.assert_allclose(loss, cpu.cross_entropy(logits, targets, ignore_index), rtol=1e-5)
    np.testing.assert_allclose(host(cuda.cross_entropy_backward(*on_device(g, logits, targets), ignore_index)),
                               cpu.cross_entropy_backward(g, logits, targets, ignore_index), rtol=1e-5, atol=1e-7)


def test_large_logits_keep_their_precision_in_float32():
    """torch: 0.8619948 (log(2 + e^-1)) for [[1e6, 1e6, 1e6 - 1]] against [0]."""
    loss = host(cuda.cross_entropy(*on_device(np.array([[1e6, 1e6, 1e6 - 1]], np.float32), np.array([0])), None))
    np.testing.assert_allclose(loss, 0.8619948040582511, rtol=1e-7)


def test_every_target_ignored_gives_zero_loss_and_gradient(rng):
    logits, targets = on_device(rng.standard_normal((3, 4)), np.full(3, -100))
    assert host(cuda.cross_entropy(logits, targets, -100)) == 0
    assert np.all(host(cuda.cross_entropy_backward(on_device(np.asarray(1.0)), logits, targets, -100)) == 0)


@pytest.mark.parametrize("bad", [4, -2])
def test_a_target_out_of_range_raises_naming_it(bad, rng):
    logits, targets = on_device(rng.standard_normal((3, 4)), np.array([0, bad, 1]))
    with pytest.raises(IndexError, match=f"target {bad} \\(row 1\\) is out of range for 4 classes"):
        cuda.cross_entropy(logits, targets, -1)
    with pytest.raises(IndexError, match=f"target {bad}"):
        cuda.cross_entropy_backward(on_device(np.asarray(1.0)), logits, targets, -1)
