"""The fused optimizer kernels against updates worked out by hand and against NumPy references."""
import numpy as np
import pytest

from ops.cpu import optim


def scalars(*values, dtype=np.float64):
    return [np.array([v], dtype) for v in values]


def test_sgd_plain_with_weight_decay_and_scale():
    p, g = scalars(1.0, 0.5)
    optim.sgd(p, g, None, lr=0.1, weight_decay=0.2, scale=2.0)      # d = 2·0.5 + 0.2·1 = 1.2
    assert p[0] == pytest.approx(1 - 0.1 * 1.2, abs=1e-15)
    assert g[0] == 0.5                                                # the gradient is read, never written


def test_sgd_momentum_two_steps_by_hand():
    p, g, b = scalars(1.0, 1.0, 0.0)
    optim.sgd(p, g, b, lr=0.1, momentum=0.9)        # b = 1,   θ = 1 − 0.1
    optim.sgd(p, g, b, lr=0.1, momentum=0.9)        # b = 1.9, θ = 0.9 − 0.19
    assert (p[0], b[0]) == pytest.approx((0.71, 1.9), abs=1e-15)


def test_sgd_nesterov_two_steps_by_hand():
    p, g, b = scalars(1.0, 1.0, 0.0)
    optim.sgd(p, g, b, lr=0.1, momentum=0.9, nesterov=True)     # b = 1,   d = 1 + 0.9,  θ = 0.81
    optim.sgd(p, g, b, lr=0.1, momentum=0.9, nesterov=True)     # b = 1.9, d = 1 + 1.71, θ = 0.539
    assert (p[0], b[0]) == pytest.approx((0.539, 1.9), abs=1e-15)


def test_sgd_with_momentum_needs_a_buffer():
    p, g = scalars(1.0, 1.0)
    with pytest.raises(ValueError, match="momentum buffer"):
        optim.sgd(p, g, None, lr=0.1, momentum=0.9)


def test_adam_two_steps_by_hand():
    p, m, v = scalars(1.0, 0.0, 0.0)
    optim.adam(p, np.array([0.5]), m, v, lr=0.1, step=1)
    # m = 0.05, v = 0.00025; m̂ = 0.5, v̂ = 0.25: the first step is lr · sign(g)
    assert (p[0], m[0], v[0]) == pytest.approx((0.9, 0.05, 0.00025), rel=1e-7)
    optim.adam(p, np.array([-0.5]), m, v, lr=0.1, step=2)
    # m = −0.005, v = 0.00049975; m̂ = −0.005 / 0.19, v̂ = 0.00049975 / 0.001999 = 0.25
    assert m[0] == pytest.approx(-0.005, rel=1e-12) and v[0] == pytest.approx(0.00049975, rel=1e-12)
    assert p[0] == pytest.approx(0.9 + 0.1 * (0.005 / 0.19) / 0.5, rel=1e-7)


def test_adam_l2_and_adamw_decoupled_weight_decay_differ_by_hand():
    p, m, v = scalars(1.0, 0.0, 0.0)
    optim.adam(p, np.array([0.5]), m, v, lr=0.1, step=1, weight_decay=0.1)    # g = 0.6: still θ − lr
    assert p[0] == pytest.approx(0.9, rel=1e-7) and m[0] == pytest.approx(0.06)
    p, m, v = scalars(1.0, 0.0, 0.0)
    optim.adamw(p, np.array([0.5]), m, v, lr=0.1, step=1, weight_decay=0.1)   # θ·(1 − 0.01) − lr
    assert p[0] == pytest.approx(0.89, rel=1e-7) and m[0] == pytest.approx(0.05)


def adam_reference(p, grads, lr, betas, eps, weight_decay, decoupled, scale):
    """Adam / AdamW in float64 NumPy, step by step."""
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
    return p


@pytest.mark.parametrize("kernel, decoupled", [(optim.adam, False), (optim.adamw, True)])
@pytest.mark.parametrize("dtype, rtol", [(np.float32, 2e-6), (np.float64, 1e-12)])
def test_adam_matches_the_reference_over_steps(rng, kernel, decoupled, dtype, rtol):
    p0 = rng.standard_normal((3, 5)).astype(dtype)
    grads = [rng.standard_normal((3, 5)).astype(dtype) for _ in range(4)]
    p, m, v = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
    for t, g in enumerate(grads, 1):
        kernel(p, g, m, v, lr=0.01, step=t, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05, scale=0.5)
    expected = adam_reference(p0, grads, 0.01, (0.8, 0.99), 1e-6, 0.05, decoupled, 0.5)
    assert p.dtype == dtype
    np.testing.assert_allclose(p, expected, rtol=rtol)


def test_a_copy_is_refused_because_the_update_would_be_lost():
    p = np.zeros((4, 4), np.float32).T[:2]                  # not C-contiguous
    with pytest.raises(ValueError, match="C-contiguous"):
        optim.sgd(p, np.ones(p.shape, np.float32), None, lr=0.1)
    p = np.zeros(3, np.float32)
    with pytest.raises(ValueError, match="dtype"):
        optim.adam(p, np.ones(3, np.float32), np.zeros(3, np.float64), np.zeros(3, np.float32), lr=0.1, step=1)
    with pytest.raises(ValueError, match="shape"):
        optim.sgd(p, np.ones(4, np.float32), None, lr=0.1)
    with pytest.raises(ValueError, match="starts at 1"):
        optim.adam(p, np.ones(3, np.float32), np.zeros(3, np.float32), np.zeros(3, np.float32), lr=0.1, step=0)


def test_sum_of_squares_accumulates_in_float64():
    x = np.full(10 ** 6, 0.1, np.float32)
    exact = 10 ** 6 * float(np.float32(0.1)) ** 2
    assert optim.sum_of_squares(x) == pytest.approx(exact, rel=1e-12)
    assert optim.sum_of_squares(np.arange(6.0).reshape(2, 3)) == 55.0
