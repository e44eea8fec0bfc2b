"""Fused optimizer updates on the device against ops/cpu/optim.py: the same steps give the same parameters."""
import numpy as np
import pytest

from ops.cpu import optim as cpu
from ops.cuda import optim as cuda
from tests.cuda.conftest import host, on_device

STEPS = {
    "sgd": lambda k, p, g, s, step: k.sgd(p, g, None, 0.1, weight_decay=0.01, scale=0.5),
    "momentum": lambda k, p, g, s, step: k.sgd(p, g, s[0], 0.1, 0.9, 0.01),
    "nesterov": lambda k, p, g, s, step: k.sgd(p, g, s[0], 0.1, 0.9, 0.01, nesterov=True),
    "adam": lambda k, p, g, s, step: k.adam(p, g, s[0], s[1], 0.01, step, weight_decay=0.1, scale=0.5),
    "adamw": lambda k, p, g, s, step: k.adamw(p, g, s[0], s[1], 0.01, step, weight_decay=0.1),
}


@pytest.mark.parametrize("name", STEPS)
def test_updates_match_the_cpu(name, rng):
    param, grad = (rng.standard_normal((5, 7)).astype(np.float32) for _ in range(2))
    state = [np.zeros_like(param), np.zeros_like(param)]
    device_param, device_grad, device_state = on_device(param), on_device(grad), [on_device(s) for s in state]
    for step in (1, 2, 3):
        STEPS[name](cpu, param, grad, state, step)
        STEPS[name](cuda, device_param, device_grad, device_state, step)
    np.testing.assert_allclose(host(device_param), param, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(host(device_state[0]), state[0], rtol=1e-6, atol=1e-7)


def test_a_host_gradient_is_accepted_and_not_written(rng):
    param, grad = rng.standard_normal(4), rng.standard_normal(4)
    device_param = on_device(param)
    cuda.sgd(device_param, grad, None, 1.0)
    np.testing.assert_allclose(host(device_param), param - grad)


def test_sum_of_squares_accumulates_in_float64(rng):
    x = rng.standard_normal((3, 50)).astype(np.float32)
    assert cuda.sum_of_squares(on_device(x)) == pytest.approx(cpu.sum_of_squares(x), rel=1e-12)


def test_arrays_that_cannot_be_updated_in_place_are_refused(rng):
    param = on_device(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="C-contiguous device arrays"):
        cuda.adam(param, np.ones(3, np.float32), np.zeros(3, np.float32), on_device(np.zeros(3, np.float32)), 0.1, 1)
    with pytest.raises(ValueError, match="momentum buffer"):
        cuda.sgd(param, np.ones(3, np.float32), None, 0.1, momentum=0.9)
    with pytest.raises(ValueError, match="step count starts at 1"):
        cuda.adam(param, np.ones(3, np.float32), *on_device(np.zeros(3, np.float32), np.zeros(3, np.float32)), 0.1, 0)
