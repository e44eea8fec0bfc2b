"""Fused softmax cross-entropy on every device: value, ignored rows, bad targets, gradient."""
import numpy as np
import pytest


def loss_of(device, logits, targets, ignore_index=None):
    return device.get(device.kernels["cross_entropy"](device.put(logits), device.put(targets), ignore_index))


def gradient(device, g, logits, targets, ignore_index=None):
    return device.get(device.kernels["cross_entropy_grad"](device.put(np.asarray(g, logits.dtype)),
                                                           device.put(logits), device.put(targets), ignore_index))


def reference(logits, targets, ignore_index):
    keep = np.ones(len(targets), bool) if ignore_index is None else targets != ignore_index
    if not keep.any():
        return 0.0
    m = logits.max(1, keepdims=True)
    lse = (m + np.log(np.exp(logits - m).sum(1, keepdims=True)))[:, 0]
    return (lse[keep] - logits[keep, targets[keep]]).mean()


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 1e-5), (np.float64, 1e-12)], ids=["f32", "f64"])
@pytest.mark.parametrize("ignore_index", [None, 2, -100, -1])
def test_forward(dtype, rtol, ignore_index, device, rng):
    logits = (rng.standard_normal((9, 11)) * 4).astype(dtype)     # 11 classes: a row over the simulator's 8 threads
    targets = rng.integers(0, 11, 9)
    targets[[1, 4]] = ignore_index if ignore_index is not None else 10
    loss = loss_of(device, logits, targets, ignore_index)
    assert isinstance(loss, np.ndarray) and loss.shape == () and loss.dtype == dtype
    np.testing.assert_allclose(loss, reference(logits.astype(np.float64), targets, ignore_index), rtol=rtol)


def test_every_row_ignored_gives_zero_not_nan(device, rng):
    logits = rng.standard_normal((3, 4)).astype(np.float32)
    targets = np.full(3, -100, np.int32)
    assert loss_of(device, logits, targets, -100) == 0
    np.testing.assert_array_equal(gradient(device, 1, logits, targets, -100), 0)


@pytest.mark.parametrize("bad", [5, -1, 99])
def test_out_of_range_target_raises_naming_it(bad, device, rng):
    logits = rng.standard_normal((4, 5))
    targets = np.array([0, bad, 2, 3])
    with pytest.raises(IndexError, match=f"target {bad} \\(row 1\\) is out of range for 5 classes"):
        loss_of(device, logits, targets, None)
    with pytest.raises(IndexError, match=f"target {bad} \\(row 1\\) is out of range for 5 classes"):
        gradient(device, 1, logits, targets, -100)


@pytest.mark.parametrize("ignore_index", [None, 1])
def test_backward_matches_finite_differences(ignore_index, device, rng, numeric_grad):
    logits = rng.standard_normal((6, 4)) * 2
    targets = np.array([0, 1, 3, 1, 2, 2])
    dlogits = gradient(device, 2.5, logits, targets, ignore_index)
    expected = numeric_grad(lambda v: 2.5 * reference(v, targets, ignore_index), logits)
    np.testing.assert_allclose(dlogits, expected, atol=1e-8)
    if ignore_index is not None:
        np.testing.assert_array_equal(dlogits[targets == ignore_index], 0)


@pytest.mark.parametrize("ignore_index", [None, -1])
def test_float32_backward(ignore_index, device, rng):
    logits = rng.normal(0, 3, (7, 11)).astype(np.float32)
    targets = rng.integers(0, 11, 7)
    if ignore_index is not None:
        targets[[2, 4]] = ignore_index
    kept = targets != ignore_index
    d = gradient(device, 0.7, logits, targets, ignore_index)
    assert d.dtype == np.float32
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(7)[kept], targets[kept]] -= 1
    np.testing.assert_allclose(d, np.where(kept[:, None], p * 0.7 / kept.sum(), 0), rtol=1e-5, atol=1e-7)


def test_large_logits_keep_their_precision_in_float32(device):
    """log Σ e^(x - m) - (x_t - m): torch's cross_entropy of float32 [[1e6, 1e6, 1e6 - 1]] against [0] is
    log(2 + e^-1) = 0.8619948 (m + log Σ - x_t gave 0.875)."""
    logits = np.array([[1e6, 1e6, 1e6 - 1]], np.float32)
    np.testing.assert_allclose(loss_of(device, logits, np.array([0])), 0.8619948040582511, rtol=1e-7)
