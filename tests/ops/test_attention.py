"""Fused (flash-style) attention: the kernels of every device against a float64 NumPy reference (tiny shapes on
cuda: the simulator runs a Python thread per CUDA thread), the CPU's at tile and key-chunk edges, and the
``attention`` primitive behind ``ag.scaled_dot_product_attention`` against the composed attention of
``core/unfused.py``, values and gradients: masks, biases, causal with Tq ≠ Tk, fully masked rows."""
import importlib
import math
import re

import numpy as np
import pytest

import attngraph as ag
from attngraph.core import unfused
from ops.cpu import attention as kernels
from tests.conftest import on_device

TOL = {np.float32: dict(rtol=1e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def scores(q, k, mask, causal, scale=None, bias=None):
    """z = scale · q kᵀ + bias in float64 (scale 1/√d by default), −inf where a query does not see a key."""
    q, k = (a.astype(np.float64) for a in (q, k))
    (tq, d), tk = q.shape[-2:], k.shape[-2]
    sees = np.broadcast_to(True if mask is None else mask, q.shape[:-1] + (tk,))
    if causal:
        sees = sees & (np.arange(tk) <= np.arange(tq)[:, None] + tk - tq)
    z = q @ k.swapaxes(-1, -2) * (1 / math.sqrt(d) if scale is None else scale) + (0 if bias is None else bias)
    return np.where(sees, z, -np.inf)


def log_sum_exp(z):
    """L = log Σ_j exp(z_j) of each row; −inf for a row that sees nothing."""
    peak = z.max(-1, initial=-np.inf)
    finite = np.where(np.isfinite(peak), peak, 0)
    with np.errstate(divide="ignore"):                          # log 0 for a row that sees nothing
        return finite + np.log(np.exp(z - finite[..., None]).sum(-1))


def block_gradients(q, k, v, g, z, lse, delta, scale=None):
    """dq, dk, dv and dZ of the keys of z given the rows' L and D: P = exp(z − L), dV = Pᵀ g,
    dZ = P ∘ (g vᵀ − D), dQ = scale · dZ k, dK = scale · dZᵀ q (FlashAttention-2, Dao 2023); in float64."""
    q, k, v, g = (a.astype(np.float64) for a in (q, k, v, g))
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    p = np.exp(z - np.where(np.isfinite(lse), lse, 0)[..., None])
    dz = p * (g @ v.swapaxes(-1, -2) - delta[..., None])
    return scale * dz @ k, scale * dz.swapaxes(-1, -2) @ q, p.swapaxes(-1, -2) @ g, dz


def reference(q, k, v, mask, causal, g, scale=None, bias=None):
    """o, dq, dk, dv and the bias gradient dZ in float64; a query that sees no key gets 0."""
    z = scores(q, k, mask, causal, scale, bias)
    lse = log_sum_exp(z)
    o = np.exp(z - np.where(np.isfinite(lse), lse, 0)[..., None]) @ v.astype(np.float64)
    return (o, *block_gradients(q, k, v, g, z, lse, (g * o).sum(-1), scale))


def assert_matches_the_reference(o, grads, q, k, v, mask, causal, g, tol, scale=None):
    """o and the stacked gradients (``attention_backward``) against ``reference``, 0 outside dq, dk and dv."""
    (tq, d), (tk, dv) = q.shape[-2:], v.shape[-2:]
    assert o.dtype == grads.dtype == q.dtype
    assert grads.shape == (3,) + q.shape[:-2] + (max(tq, tk), max(d, dv))
    got = o, grads[0, ..., :tq, :d], grads[1, ..., :tk, :d], grads[2, ..., :tk, :dv]
    for a, b, name in zip(got, reference(q, k, v, mask, causal, g, scale), ("o", "dq", "dk", "dv")):
        np.testing.assert_allclose(a, b, **tol, err_msg=name)
    padding = grads.copy()
    padding[0, ..., :tq, :d] = padding[1, ..., :tk, :d] = padding[2, ..., :tk, :dv] = 0
    assert not padding.any()


def family(device):
    """The attention kernels of ``device``: ops.cpu.attention or ops.cuda.attention."""
    return importlib.import_module(f"ops.{device.name}.attention")


def in_layout(layout, x, rows=False):
    """x of heads first, (..., H, T, f), in ``layout`` ("bthd": (..., T, H, f)); rows (..., H, T) as (..., T, H).
    Its own inverse."""
    if layout == "bhtd":
        return x
    return np.ascontiguousarray(np.swapaxes(x, -2, -1) if rows else np.swapaxes(x, -3, -2))


# batch, Tq, Tk, d, dv, mask shape (None: no mask), causal. 64-query tiles; key chunks of 2**18 / (64 d).
CASES = {
    "tile_edge": ((2, 3), 70, 70, 16, 16, None, True),
    "causal_chunks": ((2,), 300, 300, 32, 32, None, True),        # tiles end inside key chunks of 128
    "tq_below_tk": ((2,), 5, 200, 8, 4, (2, 1, 200), True),          # bottom-right: several key chunks
    "tq_above_tk": ((2,), 130, 40, 8, 8, (2, 130, 40), True),        # the first 90 queries see nothing
    "padding": ((2, 2), 65, 300, 32, 16, (2, 1, 1, 300), False),
    "single": ((1,), 1, 1, 4, 4, None, False),
    "no_queries": ((2,), 0, 5, 4, 4, None, True),
    "no_keys": ((2,), 3, 0, 4, 4, None, False),
}
# the cases every device runs: batch, heads, Tq ≠ Tk (bottom-right causal), d ≠ dv, across the simulator's tiles of 4
B, H, TQ, TK, D, DV = 2, 2, 5, 7, 3, 2


def make(case, dtype, rng):
    batch, tq, tk, d, dv, mask_shape, causal = CASES[case]
    q, k, g = (rng.standard_normal(batch + shape).astype(dtype) for shape in ((tq, d), (tk, d), (tq, dv)))
    v = rng.standard_normal(batch + (tk, dv)).astype(dtype)
    mask = None
    if mask_shape is not None:
        mask = rng.random(mask_shape) > 0.3
        mask.reshape(-1, mask_shape[-1])[0] = False            # a fully masked row
    return q, k, v, mask, causal, g


def make_small(rng):
    """q, k, v, g of (B, H, T, features) and a padding mask under which batch entry 0 sees no key at all."""
    q, k, v, g = (rng.standard_normal((B, H) + s) for s in ((TQ, D), (TK, D), (TK, DV), (TQ, DV)))
    mask = rng.random((B, 1, 1, TK)) > 0.3
    mask[0] = False
    return q, k, v, g, mask


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", CASES)
def test_kernels_match_the_reference(case, dtype, rng):
    q, k, v, mask, causal, g = make(case, dtype, rng)
    o = kernels.attention(q, k, v, mask, causal)
    assert_matches_the_reference(o, kernels.attention_backward(g, o, q, k, v, mask, causal), q, k, v, mask, causal, g,
                                 TOL[dtype])


@pytest.mark.parametrize("layout", ["bhtd", "bthd"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_every_devices_kernels_match_the_reference(masked, causal, layout, device, rng):
    q, k, v, g, mask = make_small(rng)
    mask = mask if masked else None
    attend = family(device)
    o = on_device(device, attend.attention, *(in_layout(layout, x) for x in (q, k, v)), mask, causal, layout=layout)
    grads = on_device(device, attend.attention_backward, in_layout(layout, g), o, *(in_layout(layout, x) for x in (q, k, v)),
               mask, causal, layout=layout)
    assert_matches_the_reference(in_layout(layout, o), in_layout(layout, grads), q, k, v, mask, causal, g,
                                 TOL[np.float64])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_queries_that_see_nothing_get_zeros_not_nan(dtype, device, rng):
    q, k, v = (rng.standard_normal((1, 4, 3)).astype(dtype) for _ in range(3))
    mask = np.array([True, False, True, False])[:, None] & np.array([True, False, True, True])
    attend = family(device)
    o = on_device(device, attend.attention, q, k, v, mask)
    grads = on_device(device, attend.attention_backward, np.ones_like(o), o, q, k, v, mask)
    assert np.isfinite(o).all() and np.isfinite(grads).all()
    np.testing.assert_array_equal(o[:, 1::2], 0)
    np.testing.assert_array_equal(grads[0][:, 1::2], 0)
    assert_matches_the_reference(o, grads, q, k, v, mask, False, np.ones_like(o), TOL[dtype])
    dq, _, dv = on_device(device, attend.attention_backward, np.ones_like(o), o, q, k, v, mask[[0, 2, 0, 2]])
    assert np.abs(dq).max() > 0 and np.abs(dv).max() > 0


def test_a_given_scale_in_float32(device, rng):
    q, k, v, g = (rng.standard_normal((2, 6, 3)).astype(np.float32) for _ in range(4))
    attend = family(device)
    o = on_device(device, attend.attention, q, k, v, scale=0.5)
    grads = on_device(device, attend.attention_backward, g, o, q, k, v, scale=0.5)
    assert_matches_the_reference(o, grads, q, k, v, None, False, g, TOL[np.float32], scale=0.5)


@pytest.mark.parametrize("causal", [False, True])
def test_a_bias_with_minus_infinities_on_every_device(causal, device, rng):
    """A per-head bias with −inf entries and a row of them (that query sees nothing: zeros, never NaN): the output,
    the gradients and the bias gradient dZ, 0 where a key takes no part."""
    q, k, v, g, _ = make_small(rng)
    bias = rng.standard_normal((H, TQ, TK))
    bias[0, 1, ::2], bias[1, 2] = -np.inf, -np.inf
    attend = family(device)
    o = on_device(device, attend.attention, q, k, v, None, causal, bias=bias)
    grads = on_device(device, attend.attention_backward, g, o, q, k, v, None, causal, bias=bias)
    dz = on_device(device, attend.attention_bias_backward, g, o, q, k, v, None, causal, bias=bias)
    expected = reference(q, k, v, None, causal, g, bias=bias)
    got = o, grads[0, ..., :TQ, :D], grads[1, ..., :TK, :D], grads[2, ..., :TK, :DV], dz
    for a, b, name in zip(got, expected, ("o", "dq", "dk", "dv", "dz")):
        assert np.isfinite(a).all(), name
        np.testing.assert_allclose(a, b, **TOL[np.float64], err_msg=name)
    assert np.all(o[:, 1, 2] == 0) and np.all(dz[:, 1, 2] == 0) and np.all(dz[:, 0, 1, ::2] == 0)


@pytest.mark.parametrize("layout", ["bhtd", "bthd"])
def test_log_sum_exp_and_block_backward_on_every_device(layout, device, rng):
    """attention_lse (−inf for the queries of batch entry 0, which see nothing) and one key block's backward given
    L and D."""
    q, k, v, g, mask = make_small(rng)
    attend = family(device)
    o, lse = on_device(device, attend.attention_lse, *(in_layout(layout, x) for x in (q, k, v)), mask, True, layout=layout)
    z = scores(q, k, mask, True)
    expected = log_sum_exp(z)
    o, lse = in_layout(layout, o), in_layout(layout, lse, rows=True)
    np.testing.assert_allclose(o, reference(q, k, v, mask, True, g)[0], **TOL[np.float64])
    np.testing.assert_array_equal(np.isneginf(lse), np.isneginf(expected))
    assert np.isneginf(expected[0]).all() and np.isfinite(expected[1]).all()
    np.testing.assert_allclose(lse, expected, rtol=1e-12)
    delta = rng.standard_normal(expected.shape)
    grads = in_layout(layout, on_device(device, attend.attention_block_backward,
                                 *(in_layout(layout, x) for x in (g, q, k, v)),
                                 *(in_layout(layout, x, rows=True) for x in (expected, delta)), mask, True,
                                 layout=layout))
    got = grads[0, ..., :TQ, :D], grads[1, ..., :TK, :D], grads[2, ..., :TK, :DV]
    for a, b, name in zip(got, block_gradients(q, k, v, g, z, expected, delta), ("dq", "dk", "dv")):
        np.testing.assert_allclose(a, b, **TOL[np.float64], err_msg=name)


def test_shapes_and_layouts_the_kernels_do_not_take_are_refused(device):
    attend = family(device)
    with pytest.raises(ValueError, match="one batch shape"):
        on_device(device, attend.attention, np.zeros((2, 3, 4)), np.zeros((1, 3, 4)), np.zeros((1, 3, 4)))
    with pytest.raises(ValueError, match="layout"):
        on_device(device, attend.attention, *(np.zeros((1, 3, 2, 4)),) * 3, layout="tbhd")


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.cuda)], indirect=True)
def test_cuda_refuses_heads_wider_than_it_holds(device):
    """A CUDA thread holds a row of q: up to HEAD_DIM_MAX features (the CPU kernels take any width)."""
    from ops.cuda.launch import HEAD_DIM_MAX
    wide = np.zeros((1, 2, HEAD_DIM_MAX + 1))
    with pytest.raises(ValueError, match=f"up to {HEAD_DIM_MAX} features"):
        on_device(device, family(device).attention, wide, wide, wide)


@pytest.mark.parametrize("case", CASES)
def test_the_log_sum_exp_of_every_row(case, rng):
    """attention_lse: the output of ``attention`` bit for bit, and L = log Σ_j exp(z_j) over the keys a query sees,
    −inf for a query that sees none (masked, causal with Tq > Tk, or no keys)."""
    q, k, v, mask, causal, _ = make(case, np.float64, rng)
    o, lse = kernels.attention_lse(q, k, v, mask, causal)
    assert np.array_equal(o, kernels.attention(q, k, v, mask, causal)) and lse.shape == q.shape[:-1]
    expected = log_sum_exp(scores(q, k, mask, causal))
    np.testing.assert_array_equal(np.isneginf(lse), np.isneginf(expected))
    np.testing.assert_allclose(lse, expected, rtol=1e-12)


@pytest.mark.parametrize("case", [c for c in CASES if len(CASES[c][0]) == 2 and CASES[c][1]])
def test_the_tokens_first_layout_computes_the_same_bits(case, rng):
    """layout="bthd" reads q (B, T, H, d) as the heads-first kernels read (B, H, T, d), the last batch axis being
    the heads: the same output, gradients and bias gradient, bit for bit."""
    q, k, v, mask, causal, g = make(case, np.float64, rng)
    bias = rng.standard_normal(q.shape[-3:-1] + k.shape[-2:-1])
    first, last = (lambda x: x), (lambda x: np.ascontiguousarray(x.swapaxes(-3, -2)))
    runs = [(layout, [order(x) for x in (q, k, v, g)]) for layout, order in (("bhtd", first), ("bthd", last))]
    (o1, o2), (grads1, grads2), (dz1, dz2) = zip(*(
        (o, kernels.attention_backward(gx, o, qx, kx, vx, mask, causal, None, bias, layout),
         kernels.attention_bias_backward(gx, o, qx, kx, vx, mask, causal, None, bias, layout))
        for layout, (qx, kx, vx, gx) in runs
        for o in [kernels.attention(qx, kx, vx, mask, causal, None, bias, layout)]))
    assert np.array_equal(o2, last(o1)) and np.array_equal(grads2, last(grads1)) and np.array_equal(dz1, dz2)
    with pytest.raises(ValueError, match="layout"):
        kernels.attention(q, k, v, layout="tbhd")
    with pytest.raises(ValueError, match="bthd"):
        kernels.attention(q, k[..., :1, :], v, layout="bthd")


def test_memory_is_linear_in_length(rng):
    """T = 4096: one T × T float32 matrix would be 64 MiB; the kernels hold (64 · T) scores per thread."""
    def reset_peak():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")

    def resident(key):
        with open("/proc/self/status") as f:
            return int(re.search(rf"{key}:\s+(\d+) kB", f.read()).group(1)) * 1024

    try:
        reset_peak()
    except OSError:
        pytest.skip("needs Linux's /proc to read peak memory")
    q, k, v = (rng.standard_normal((1, 4096, 16)).astype(np.float32) for _ in range(3))
    kernels.attention_backward(q, kernels.attention(q, k, v, causal=True), q, k, v, causal=True)   # compile
    reset_peak()
    before = resident("VmRSS")
    kernels.attention_backward(q, kernels.attention(q, k, v, causal=True), q, k, v, causal=True)
    assert resident("VmHWM") - before < 16 * 2 ** 20


def composed_and_fused(case, rng):
    q, k, v, mask, causal, g = make(case, np.float64, rng)
    weights = g

    def loss(attend):
        return lambda q, k, v: ag.sum(attend(q, k, v, mask=mask, causal=causal) * weights)
    return (q, k, v), loss(ag.scaled_dot_product_attention), loss(unfused.scaled_dot_product_attention)


@pytest.mark.parametrize("case", [c for c in CASES if c not in ("no_queries", "no_keys")])
def test_fused_primitive_matches_the_composition(case, rng):
    arrays, fused, composed = composed_and_fused(case, rng)
    value_f, grads_f = ag.value_and_grad(fused, argnums=(0, 1, 2))(*arrays)
    with ag.debug():                        # the graph as traced: the optimizer would fuse the composition too
        value_c, grads_c = ag.value_and_grad(composed, argnums=(0, 1, 2))(*arrays)
    np.testing.assert_allclose(value_f, value_c, rtol=1e-12)
    for a, b in zip(grads_f, grads_c):
        assert np.isfinite(a).all()
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_gradient_graph_holds_no_score_matrix():
    graph = ag.trace(lambda q, k, v: ag.sum(ag.scaled_dot_product_attention(q, k, v, causal=True)),
                     q=ag.Input((2, 96, 8)), k=ag.Input((2, 128, 8)), v=ag.Input((2, 128, 4))).grad(["q", "k", "v"])
    assert {n.op for n in graph.nodes} >= {"attention", "attention_grad"}
    assert not any(n.shape[-2:] == (96, 128) for n in graph.nodes)


def test_batch_axes_broadcast(rng):
    """Keys and values shared by every head: the fused path broadcasts them, and autodiff sums back."""
    q = rng.standard_normal((2, 3, 5, 4))
    k, v = rng.standard_normal((2, 1, 6, 4)), rng.standard_normal((6, 2))

    def loss(attend):
        return lambda q, k, v: ag.sum(attend(q, k, v, causal=True) ** 2)
    value_f, grads_f = ag.value_and_grad(loss(ag.scaled_dot_product_attention), argnums=(0, 1, 2))(q, k, v)
    value_c, grads_c = ag.value_and_grad(loss(unfused.scaled_dot_product_attention), argnums=(0, 1, 2))(q, k, v)
    np.testing.assert_allclose(value_f, value_c, rtol=1e-12)
    for a, b in zip(grads_f, grads_c):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_different_symbolic_lengths_run_the_composition():
    """The fused gradient cannot hold queries of length T and keys of length S: the graph composes."""
    graph = ag.trace(lambda q, k: ag.scaled_dot_product_attention(q, k, k), q=ag.Input(("B", "T", 4)),
                     k=ag.Input(("B", "S", 4)))
    ops = {n.op for n in graph.nodes}
    assert "softmax" in ops and "attention" not in ops
    symmetric = ag.trace(lambda q, k: ag.scaled_dot_product_attention(q, k, k), q=ag.Input(("B", "T", 4)),
                         k=ag.Input(("B", "T", 4)))
    assert "attention" in {n.op for n in symmetric.nodes}
