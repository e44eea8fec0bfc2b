"""Masked and causal softmax / log-softmax, forward and backward, against the CPU kernels."""
import numpy as np
import pytest

from ops.cpu import softmax as cpu
from ops.cuda import softmax as cuda
from tests.cuda.conftest import host, on_device


def masks(rng):
    """No mask, a padding mask (B, 1, Tk) with a fully masked row, and a full mask."""
    padding = rng.random((2, 1, 11)) > 0.3
    padding[1] = False
    full = rng.random((2, 3, 11)) > 0.5
    return {"none": None, "padding": padding, "full": full}


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mask_name", ["none", "padding", "full"])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_forward_and_backward_match_the_cpu(name, mask_name, causal, rng):
    x, g = rng.standard_normal((2, 2, 3, 11)).astype(np.float32)      # Tq 3 != Tk 11: bottom-right causal
    mask = masks(rng)[mask_name]
    device_mask = None if mask is None else on_device(mask)
    y = getattr(cuda, name)(on_device(x), device_mask, causal)
    want = getattr(cpu, name)(x, mask, causal)
    np.testing.assert_allclose(host(y), want, rtol=1e-5, atol=1e-6)
    if name == "softmax":
        dx, want_dx = cuda.softmax_backward(on_device(g), y), cpu.softmax_backward(g, want)
    else:
        dx, want_dx = cuda.log_softmax_backward(on_device(g), y, device_mask, causal), \
            cpu.log_softmax_backward(g, want, mask, causal)
    np.testing.assert_allclose(host(dx), want_dx, rtol=1e-5, atol=1e-6)


def test_fully_masked_rows_are_zero_with_zero_gradient():
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = on_device(np.array([[True, False, True], [False, False, False]]))
    for forward in (cuda.softmax, cuda.log_softmax):
        y = host(forward(on_device(x), mask))
        assert np.all(np.isfinite(y)) and np.all(y[1] == 0) and y[0, 1] == 0
    g = on_device(np.ones_like(x))
    dx = host(cuda.log_softmax_backward(g, cuda.log_softmax(on_device(x), mask), mask))
    assert np.all(dx[1] == 0) and dx[0, 1] == 0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator's NumPy scalars warn at -inf + inf
def test_large_logits_and_rows_of_minus_inf_as_the_cpu():
    """(x - m) - log Σ in float32 at 1e4 (ops/cpu's test has torch's numbers); an all -inf row's log-softmax is NaN."""
    x = np.array([[1e4, 1e4, 1e4 - 1], [-np.inf, -np.inf, -np.inf]], np.float32)
    np.testing.assert_array_equal(host(cuda.log_softmax(on_device(x))), cpu.log_softmax(x))


def test_a_mask_that_does_not_broadcast_is_refused():
    with pytest.raises(ValueError, match="does not broadcast"):
        cuda.softmax(on_device(np.zeros((2, 3))), on_device(np.ones((3, 1), bool)))
