"""attngraph.train's gradient accumulator, global norm and clipping, and optimizer state on device arrays, against
NumPy (the update kernels themselves run on every device in tests/ops/test_optim.py)."""
import numpy as np
import pytest

from attngraph.core.parameter import Parameter
from attngraph.train import SGD, GradientAccumulator, clip_grad_norm, global_norm
from ops import _cuda
from tests.cuda.conftest import host, on_device


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
