"""The fused (flash) attention kernels against their CPU twins, and against composed attention: NumPy for
the output, attngraph's autodiff of the softmax-and-matmul graph on the CPU for the gradients. Sizes cross
tile edges (tiles of 4 queries and keys in the simulator), Tq != Tk for bottom-right causal masking, and a
query sees no key at all."""
import math

import numpy as np
import pytest

import attngraph as ag
from ops.cpu import attention as cpu
from ops.cuda import attention as fused
from ops.cuda.launch import HEAD_DIM_MAX
from tests.cuda.conftest import host, on_device

B, H, TQ, TK, D, DV = 2, 1, 5, 7, 3, 2


def composed(q, k, v, mask, causal):
    """softmax(q kᵀ / √d) v over the keys each query sees (none: output 0), in NumPy."""
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    sees = np.broadcast_to(True if mask is None else mask, s.shape)
    if causal:
        sees = sees & np.tril(np.ones(s.shape[-2:], bool), s.shape[-1] - s.shape[-2])
    z = np.where(sees, s, -np.inf)
    m = z.max(-1, keepdims=True)
    e = np.exp(z - np.where(np.isfinite(m), m, 0))
    total = e.sum(-1, keepdims=True)
    return (e / np.where(total > 0, total, 1)) @ v


def test_the_tokens_first_layout_matches_the_cpu_kernels(rng):
    q, k, v, g = (rng.standard_normal(s) for s in ((B, TQ, 2, D), (B, TK, 2, D), (B, TK, 2, DV), (B, TQ, 2, DV)))
    out = fused.attention(*on_device(q, k, v), None, True, layout="bthd")
    np.testing.assert_allclose(host(out), cpu.attention(q, k, v, None, True, layout="bthd"), rtol=1e-12, atol=1e-14)
    grads = host(fused.attention_backward(*on_device(g, host(out), q, k, v), None, True, layout="bthd"))
    np.testing.assert_allclose(grads, cpu.attention_backward(g, host(out), q, k, v, None, True, layout="bthd"),
                               rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="layout"):
        fused.attention(*on_device(q, k, v), None, True, layout="tbhd")


def padding_mask(rng):
    mask = rng.random((B, 1, 1, TK)) > 0.3
    mask[0, 0, 0, :] = False            # batch entry 0 sees no key at all
    return mask


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_forward_and_backward_match_the_cpu_kernels(masked, causal, rng):
    q, k, v, g = (rng.standard_normal(s) for s in ((B, H, TQ, D), (B, H, TK, D), (B, H, TK, DV), (B, H, TQ, DV)))
    mask = padding_mask(rng) if masked else None
    device_mask = None if mask is None else on_device(mask)
    out = fused.attention(*on_device(q, k, v), device_mask, causal)
    np.testing.assert_allclose(host(out), cpu.attention(q, k, v, mask, causal), rtol=1e-12, atol=1e-14)
    grads = host(fused.attention_backward(*on_device(g, host(out), q, k, v), device_mask, causal))
    np.testing.assert_allclose(grads, cpu.attention_backward(g, host(out), q, k, v, mask, causal), rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_forward_and_backward_match_composed_attention(causal, rng):
    q, k, v, g = (rng.standard_normal(s) for s in ((B, H, TQ, D), (B, H, TK, D), (B, H, TK, DV), (B, H, TQ, DV)))
    mask = padding_mask(rng)
    out = fused.attention(*on_device(q, k, v, mask), causal)
    np.testing.assert_allclose(host(out), composed(q, k, v, mask, causal), rtol=1e-12, atol=1e-14)
    grads = host(fused.attention_backward(*on_device(g, host(out), q, k, v, mask), causal))

    def objective(q, k, v):
        return ag.sum(unfused_attention(q, k, v, mask, causal) * g)
    _, want = ag.value_and_grad(objective, argnums=(0, 1, 2))(q, k, v)
    for got, expected, name in zip((grads[0, ..., :TQ, :D], grads[1, ..., :TK, :D], grads[2, ..., :TK, :DV]), want,
                                   ("dq", "dk", "dv")):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12, err_msg=name)


def unfused_attention(q, k, v, mask, causal):
    scores = q @ ag.swapaxes(k, -1, -2) * (1 / math.sqrt(D))
    return ag.softmax(scores, mask=mask, causal=causal) @ v


def test_queries_that_see_no_key_get_zeros_and_zero_gradients(rng):
    q, k, v, g = (rng.standard_normal(s).astype(np.float32) for s in ((1, 3, 2), (1, 4, 2), (1, 4, 2), (1, 3, 2)))
    mask = on_device(np.array([[[True, False, True, False], [False] * 4, [True] * 4]]))
    out = fused.attention(*on_device(q, k, v), mask)
    grads = host(fused.attention_backward(on_device(g), out, *on_device(q, k, v), mask))
    assert np.all(host(out)[0, 1] == 0) and np.all(grads[0, 0, 1] == 0)
    assert np.all(np.isfinite(host(out))) and np.all(np.isfinite(grads))
    np.testing.assert_allclose(host(out)[0, 2], composed(q, k, v, None, False)[0, 2], rtol=1e-5)


def test_a_given_scale_and_float32(rng):
    q, k, v = (rng.standard_normal((2, 6, 3)).astype(np.float32) for _ in range(3))
    out = fused.attention(*on_device(q, k, v), scale=0.5)
    assert host(out).dtype == np.float32
    np.testing.assert_allclose(host(out), composed(q * 0.5 * math.sqrt(3), k, v, None, False), rtol=1e-5, atol=1e-6)


def test_shapes_the_kernels_do_not_take_are_refused():
    with pytest.raises(ValueError, match="one batch shape"):
        fused.attention(*on_device(np.zeros((2, 3, 4)), np.zeros((1, 3, 4)), np.zeros((1, 3, 4))))
    wide = np.zeros((1, 2, HEAD_DIM_MAX + 1))
    with pytest.raises(ValueError, match=f"up to {HEAD_DIM_MAX} features"):
        fused.attention(*on_device(wide, wide, wide))


@pytest.mark.parametrize("causal", [False, True])
def test_a_bias_matches_the_cpu_kernels_values_and_gradients(causal, rng):
    """A per-head bias with −inf entries and a row of them (that query sees nothing: zeros, never NaN)."""
    q, k, v, g = (rng.standard_normal(s) for s in ((B, H, TQ, D), (B, H, TK, D), (B, H, TK, DV), (B, H, TQ, DV)))
    bias = rng.standard_normal((H, TQ, TK))
    bias[0, 1, ::2], bias[0, 2] = -np.inf, -np.inf
    out = fused.attention(*on_device(q, k, v), None, causal, None, on_device(bias))
    np.testing.assert_allclose(host(out), cpu.attention(q, k, v, None, causal, None, bias), rtol=1e-12, atol=1e-14)
    for device, host_kernel in ((fused.attention_backward, cpu.attention_backward),
                                (fused.attention_bias_backward, cpu.attention_bias_backward)):
        got = host(device(*on_device(g, host(out), q, k, v), None, causal, None, on_device(bias)))
        np.testing.assert_allclose(got, host_kernel(g, host(out), q, k, v, None, causal, None, bias), rtol=1e-10,
                                   atol=1e-12)
        assert np.isfinite(got).all()


@pytest.mark.parametrize("layout", ["bhtd", "bthd"])
def test_log_sum_exp_and_block_backward_match_the_cpu_kernels(layout, rng):
    """attention_lse (−inf for the query that sees nothing) and one key block's backward given L and D."""
    shapes = ((B, H, TQ, D), (B, H, TK, D), (B, H, TK, DV), (B, H, TQ, DV)) if layout == "bhtd" else \
        ((B, TQ, H, D), (B, TK, H, D), (B, TK, H, DV), (B, TQ, H, DV))
    q, k, v, g = (rng.standard_normal(s) for s in shapes)
    mask = padding_mask(rng)
    out, lse = fused.attention_lse(*on_device(q, k, v), on_device(mask), True, layout=layout)
    expected_out, expected_lse = cpu.attention_lse(q, k, v, mask, True, layout=layout)
    np.testing.assert_allclose(host(out), expected_out, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(np.isneginf(host(lse)), np.isneginf(expected_lse))
    assert np.isneginf(expected_lse).any()
    np.testing.assert_allclose(host(lse), expected_lse, rtol=1e-12)
    delta = rng.standard_normal(expected_lse.shape)
    grads = fused.attention_block_backward(*on_device(g, q, k, v, expected_lse, delta), on_device(mask), True,
                                           layout=layout)
    np.testing.assert_allclose(host(grads), cpu.attention_block_backward(g, q, k, v, expected_lse, delta, mask, True,
                                                                         layout=layout), rtol=1e-10, atol=1e-12)
