"""Optimizers on the device against the CPU: ops/cuda/optim.py's fused updates, accumulation and scaling against
ops/cpu/optim.py's, and attngraph.train's optimizers, accumulator and clipping on device arrays against NumPy."""
import numpy as np
import pytest

from attngraph.core.parameter import Parameter
from attngraph.train import SGD, GradientAccumulator, clip_grad_norm, global_norm
from ops import _cuda
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


def test_accumulate_and_scale_match_the_cpu_in_place(rng):
    total, grad = rng.standard_normal((2, 3, 5)).astype(np.float32), rng.standard_normal((2, 3, 5))
    device_total, device_grad = on_device(total), on_device(grad)
    cpu.accumulate(total, grad)                     # a float64 gradient into a float32 total: cast, as on the CPU
    cuda.accumulate(device_total, device_grad)
    cpu.scale(total, 0.3)
    cuda.scale(device_total, 0.3)
    np.testing.assert_array_equal(host(device_total), total)
    np.testing.assert_array_equal(host(device_grad), grad)
    zeros = cuda.zeros_like(device_total)
    assert zeros.dtype == np.float32 and host(zeros).shape == (2, 3, 5) and not host(zeros).any()


def test_the_accumulator_sums_device_gradients_on_the_device(rng):
    sets = [[rng.standard_normal((3, 4)).astype(np.float32), None, rng.standard_normal(4).astype(np.float32)]
            for _ in range(3)]
    accumulator = GradientAccumulator()
    for grads in sets:
        accumulator.add([None if g is None else on_device(g) for g in grads])
    first = accumulator.grads
    assert accumulator.count == 3 and first[1] is None
    for i in (0, 2):
        np.testing.assert_allclose(host(first[i]), sum(grads[i] for grads in sets), rtol=1e-6)


def test_the_callers_first_gradients_are_not_written(rng):
    grads = [on_device(rng.standard_normal(5).astype(np.float32))]
    before = host(grads[0])
    accumulator = GradientAccumulator()
    accumulator.add(grads)
    accumulator.add(grads)
    np.testing.assert_array_equal(host(grads[0]), before)
    np.testing.assert_array_equal(host(accumulator.grads[0]), 2 * before)


def test_global_norm_and_clipping_of_device_gradients_match_numpy(rng):
    grads = [rng.standard_normal((3, 4)).astype(np.float32), None, rng.standard_normal(6).astype(np.float32)]
    device = [None if g is None else on_device(g) for g in grads]
    norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads if g is not None))
    assert global_norm(device) == pytest.approx(norm, rel=1e-12)
    assert clip_grad_norm(device, max_norm=1.0) == pytest.approx(norm, rel=1e-12)
    assert global_norm(device) == pytest.approx(1.0, rel=1e-5)
    for g, d in zip(grads, device):
        if g is not None:
            assert _cuda.is_device_array(d)
            np.testing.assert_allclose(host(d), g * np.float32(1 / (norm + 1e-6)), rtol=1e-6)


def test_optimizer_state_follows_its_parameter_to_the_device_and_back(rng):
    p = Parameter(rng.standard_normal(4).astype(np.float32), name="w")
    optimizer = SGD([("w", p)], lr=0.1, momentum=0.9)
    p.to("cuda")
    optimizer.step([on_device(np.ones(4, np.float32))])
    buffer = optimizer.state["momentum_buffer"][0]
    assert _cuda.is_device_array(buffer)
    state = optimizer.state_dict()
    assert isinstance(state["momentum_buffer/w"], np.ndarray)
    np.testing.assert_array_equal(state["momentum_buffer/w"], np.ones(4, np.float32))
    p.to("cpu")
    optimizer.step([np.ones(4, np.float32)])
    assert isinstance(optimizer.state["momentum_buffer"][0], np.ndarray)
    np.testing.assert_allclose(optimizer.state["momentum_buffer"][0], 1.9)
