"""The fused optimizer kernels on every device against updates worked out by hand and against float64 NumPy
references: SGD (plain, momentum, Nesterov), Adam and AdamW over steps, accumulation and scaling in place, the
float64 sum of squares, and the arrays an update refuses."""
import numpy as np
import pytest

from ops.cpu import optim


def scalars(device, *values, dtype=np.float64):
    return [device.put(np.array([v], dtype)) for v in values]


def values(device, *arrays):
    return tuple(device.get(a)[0] for a in arrays)


def test_sgd_plain_with_weight_decay_and_scale(device):
    p, g = scalars(device, 1.0, 0.5)
    device.kernels["sgd"](p, g, None, lr=0.1, weight_decay=0.2, scale=2.0)      # d = 2·0.5 + 0.2·1 = 1.2
    assert values(device, p)[0] == pytest.approx(1 - 0.1 * 1.2, abs=1e-15)
    assert values(device, g)[0] == 0.5                                            # read, never written


def test_sgd_momentum_two_steps_by_hand(device):
    p, g, b = scalars(device, 1.0, 1.0, 0.0)
    device.kernels["sgd"](p, g, b, lr=0.1, momentum=0.9)        # b = 1,   θ = 1 − 0.1
    device.kernels["sgd"](p, g, b, lr=0.1, momentum=0.9)        # b = 1.9, θ = 0.9 − 0.19
    assert values(device, p, b) == pytest.approx((0.71, 1.9), abs=1e-15)


def test_sgd_nesterov_two_steps_by_hand(device):
    p, g, b = scalars(device, 1.0, 1.0, 0.0)
    device.kernels["sgd"](p, g, b, lr=0.1, momentum=0.9, nesterov=True)     # b = 1,   d = 1 + 0.9,  θ = 0.81
    device.kernels["sgd"](p, g, b, lr=0.1, momentum=0.9, nesterov=True)     # b = 1.9, d = 1 + 1.71, θ = 0.539
    assert values(device, p, b) == pytest.approx((0.539, 1.9), abs=1e-15)


def test_adam_two_steps_by_hand(device):
    p, m, v = scalars(device, 1.0, 0.0, 0.0)
    device.kernels["adam"](p, np.array([0.5]), m, v, lr=0.1, step=1)
    # m = 0.05, v = 0.00025; m̂ = 0.5, v̂ = 0.25: the first step is lr · sign(g)
    assert values(device, p, m, v) == pytest.approx((0.9, 0.05, 0.00025), rel=1e-7)
    device.kernels["adam"](p, np.array([-0.5]), m, v, lr=0.1, step=2)
    # m = −0.005, v = 0.00049975; m̂ = −0.005 / 0.19, v̂ = 0.00049975 / 0.001999 = 0.25
    assert values(device, m, v) == pytest.approx((-0.005, 0.00049975), rel=1e-12)
    assert values(device, p)[0] == pytest.approx(0.9 + 0.1 * (0.005 / 0.19) / 0.5, rel=1e-7)


def test_adam_l2_and_adamw_decoupled_weight_decay_differ_by_hand(device):
    p, m, v = scalars(device, 1.0, 0.0, 0.0)
    device.kernels["adam"](p, np.array([0.5]), m, v, lr=0.1, step=1, weight_decay=0.1)    # g = 0.6: still θ − lr
    assert values(device, p, m) == pytest.approx((0.9, 0.06), rel=1e-7)
    p, m, v = scalars(device, 1.0, 0.0, 0.0)
    device.kernels["adamw"](p, np.array([0.5]), m, v, lr=0.1, step=1, weight_decay=0.1)   # θ·(1 − 0.01) − lr
    assert values(device, p, m) == pytest.approx((0.89, 0.05), rel=1e-7)


def sgd_reference(p, grads, lr, momentum, weight_decay, nesterov, scale):
    """SGD with momentum in float64 NumPy, step by step: θ and the momentum buffer."""
    p, b = p.astype(np.float64), np.zeros(p.shape)
    for g in grads:
        d = scale * g.astype(np.float64) + weight_decay * p
        b = momentum * b + d
        p = p - lr * (d + momentum * b if nesterov else b)
    return p, b


def adam_reference(p, grads, lr, betas, eps, weight_decay, decoupled, scale):
    """Adam / AdamW in float64 NumPy, step by step: θ and the first moment."""
    p, m, v = p.astype(np.float64), np.zeros(p.shape), np.zeros(p.shape)
    for t, g in enumerate(grads, 1):
        g = scale * g.astype(np.float64)
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        p = p - lr / (1 - betas[0] ** t) * m / (np.sqrt(v) / np.sqrt(1 - betas[1] ** t) + eps)
    return p, m


DTYPES = pytest.mark.parametrize("dtype, rtol", [(np.float32, 2e-6), (np.float64, 1e-12)], ids=["f32", "f64"])


def run_steps(device, kernel, p0, grads, n_state, **hyper):
    """``kernel`` over ``grads`` from a copy of ``p0`` (the CPU's ``put`` keeps the array itself) on the device: θ
    and its first state array, back on the host."""
    p, state = device.put(p0.copy()), [device.put(np.zeros_like(p0)) for _ in range(n_state)]
    for t, g in enumerate(grads, 1):
        device.kernels[kernel](p, device.put(g), *state, **hyper, **({} if kernel == "sgd" else {"step": t}))
    return device.get(p), device.get(state[0])


@DTYPES
@pytest.mark.parametrize("momentum, nesterov", [(0.9, False), (0.9, True)], ids=["momentum", "nesterov"])
def test_sgd_matches_the_reference_over_steps(device, rng, momentum, nesterov, dtype, rtol):
    p0 = rng.standard_normal((5, 7)).astype(dtype)
    grads = [rng.standard_normal((5, 7)).astype(dtype) for _ in range(3)]
    p, buffer = run_steps(device, "sgd", p0, grads, 1, lr=0.1, momentum=momentum, weight_decay=0.01,
                          nesterov=nesterov, scale=0.5)
    expected_p, expected_buffer = sgd_reference(p0, grads, 0.1, momentum, 0.01, nesterov, 0.5)
    assert p.dtype == dtype and buffer.dtype == dtype
    np.testing.assert_allclose(p, expected_p, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(buffer, expected_buffer, rtol=rtol, atol=rtol)


@DTYPES
def test_plain_sgd_matches_the_reference_over_steps(device, rng, dtype, rtol):
    p0 = rng.standard_normal((5, 7)).astype(dtype)
    grads = [rng.standard_normal((5, 7)).astype(dtype) for _ in range(3)]
    p = device.put(p0.copy())
    for g in grads:
        device.kernels["sgd"](p, device.put(g), None, 0.1, weight_decay=0.01, scale=0.5)
    expected, _ = sgd_reference(p0, grads, 0.1, 0.0, 0.01, False, 0.5)
    np.testing.assert_allclose(device.get(p), expected, rtol=rtol, atol=rtol)


@DTYPES
@pytest.mark.parametrize("kernel, decoupled", [("adam", False), ("adamw", True)])
def test_adam_matches_the_reference_over_steps(device, rng, kernel, decoupled, dtype, rtol):
    p0 = rng.standard_normal((3, 5)).astype(dtype)
    grads = [rng.standard_normal((3, 5)).astype(dtype) for _ in range(4)]
    p, m = run_steps(device, kernel, p0, grads, 2, lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05,
                     scale=0.5)
    expected_p, expected_m = adam_reference(p0, grads, 0.01, (0.8, 0.99), 1e-6, 0.05, decoupled, 0.5)
    assert p.dtype == dtype
    np.testing.assert_allclose(p, expected_p, rtol=rtol)
    np.testing.assert_allclose(m, expected_m, rtol=rtol, atol=rtol)


def test_a_host_gradient_of_another_dtype_is_accepted_and_not_written(device, rng):
    param, grad = rng.standard_normal(4), rng.standard_normal(4).astype(np.float32)
    before = grad.copy()
    device_param = device.put(param.copy())
    device.kernels["sgd"](device_param, grad, None, 1.0)
    np.testing.assert_array_equal(device.get(device_param), param - grad.astype(np.float64))
    np.testing.assert_array_equal(grad, before)


def test_accumulate_and_scale_work_in_place_in_the_totals_dtype(device, rng):
    total, grad = rng.standard_normal((2, 3, 5)).astype(np.float32), rng.standard_normal((2, 3, 5))
    device_total, device_grad = device.put(total.copy()), device.put(grad.copy())
    device.kernels["accumulate"](device_total, device_grad)     # a float64 gradient into a float32 total: cast
    device.kernels["scale"](device_total, 0.3)
    np.testing.assert_array_equal(device.get(device_total), (total + grad.astype(np.float32)) * np.float32(0.3))
    np.testing.assert_array_equal(device.get(device_grad), grad)
    zeros = device.get(device.zeros_like(device_total))
    assert zeros.dtype == np.float32 and zeros.shape == (2, 3, 5) and not zeros.any()


def unreachable_state(device):
    """A state array that an update could reach only through a copy, the update then lost: a strided view on the
    CPU, a host array for the GPU."""
    return np.zeros((3, 2), np.float32)[:, 0] if device.name == "cpu" else np.zeros(3, np.float32)


def test_arrays_that_cannot_be_updated_in_place_are_refused(device):
    p, g, m, v = (device.put(np.zeros(3, np.float32)) for _ in range(4))
    with pytest.raises(ValueError, match="C-contiguous"):
        device.kernels["adam"](p, g, m, unreachable_state(device), lr=0.1, step=1)
    with pytest.raises(ValueError, match="dtype"):
        device.kernels["adam"](p, g, device.put(np.zeros(3, np.float64)), v, lr=0.1, step=1)
    with pytest.raises(ValueError, match="shape"):
        device.kernels["sgd"](p, np.ones(4, np.float32), None, lr=0.1)
    with pytest.raises(ValueError, match="momentum buffer"):
        device.kernels["sgd"](p, g, None, lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="starts at 1"):
        device.kernels["adam"](p, g, m, v, lr=0.1, step=0)
    np.testing.assert_array_equal(device.get(p), np.zeros(3, np.float32))


def test_a_strided_parameter_is_refused_on_the_cpu():
    p = np.zeros((4, 4), np.float32).T[:2]                  # not C-contiguous
    with pytest.raises(ValueError, match="C-contiguous"):
        optim.sgd(p, np.ones(p.shape, np.float32), None, lr=0.1)


def test_sum_of_squares_accumulates_in_float64(device, rng):
    x = rng.standard_normal((3, 50)).astype(np.float32)
    assert device.kernels["sum_of_squares"](device.put(x)) == pytest.approx(np.sum(x.astype(np.float64) ** 2),
                                                                           rel=1e-12)
    assert device.kernels["sum_of_squares"](device.put(np.arange(6.0).reshape(2, 3))) == 55.0


def test_sum_of_squares_of_a_million_float32_on_the_cpu():
    x = np.full(10 ** 6, 0.1, np.float32)
    exact = 10 ** 6 * float(np.float32(0.1)) ** 2
    assert optim.sum_of_squares(x) == pytest.approx(exact, rel=1e-12)
