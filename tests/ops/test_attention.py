"""Fused (flash-style) attention: the kernels against a float64 NumPy reference, and the ``attention``
primitive behind ``ag.scaled_dot_product_attention`` against the composed attention of ``core/unfused.py``,
values and gradients: masks, causal with Tq ≠ Tk, fully masked rows, tile and key-chunk edges."""
import math
import re

import numpy as np
import pytest

import attngraph as ag
from attngraph.core import unfused
from ops.cpu import attention as kernels


def reference(q, k, v, mask, causal, g):
    """o, dq, dk, dv in float64; a query that sees no key gets 0."""
    q, k, v, g = (a.astype(np.float64) for a in (q, k, v, g))
    (tq, d), tk = q.shape[-2:], k.shape[-2]
    sees = np.broadcast_to(True if mask is None else mask, q.shape[:-1] + (tk,))
    if causal:
        sees = sees & (np.arange(tk) <= np.arange(tq)[:, None] + tk - tq)
    s = np.where(sees, q @ k.swapaxes(-1, -2) / math.sqrt(d), -np.inf)
    m = s.max(-1, keepdims=True, initial=-np.inf)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    total = e.sum(-1, keepdims=True)
    p = e / np.where(total > 0, total, 1)
    dp = g @ v.swapaxes(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) / math.sqrt(d)
    return p @ v, ds @ k, ds.swapaxes(-1, -2) @ q, p.swapaxes(-1, -2) @ g


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


def make(case, dtype, rng):
    batch, tq, tk, d, dv, mask_shape, causal = CASES[case]
    q, k, g = (rng.standard_normal(batch + shape).astype(dtype) for shape in ((tq, d), (tk, d), (tq, dv)))
    v = rng.standard_normal(batch + (tk, dv)).astype(dtype)
    mask = None
    if mask_shape is not None:
        mask = rng.random(mask_shape) > 0.3
        mask.reshape(-1, mask_shape[-1])[0] = False            # a fully masked row
    return q, k, v, mask, causal, g


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", CASES)
def test_kernels_match_the_reference(case, dtype, rng):
    q, k, v, mask, causal, g = make(case, dtype, rng)
    o = kernels.attention(q, k, v, mask, causal)
    grads = kernels.attention_backward(g, o, q, k, v, mask, causal)
    (tq, d), (tk, dv) = q.shape[-2:], v.shape[-2:]
    assert o.dtype == grads.dtype == dtype
    assert grads.shape == (3,) + q.shape[:-2] + (max(tq, tk), max(d, dv))
    got = o, grads[0, ..., :tq, :d], grads[1, ..., :tk, :d], grads[2, ..., :tk, :dv]
    tol = dict(rtol=1e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    for a, b in zip(got, reference(q, k, v, mask, causal, g)):
        np.testing.assert_allclose(a, b, **tol)
    padding = grads.copy()
    padding[0, ..., :tq, :d] = padding[1, ..., :tk, :d] = padding[2, ..., :tk, :dv] = 0
    assert not padding.any()


@pytest.mark.parametrize("case", CASES)
def test_the_log_sum_exp_of_every_row(case, rng):
    """attention_lse: the output of ``attention`` bit for bit, and L = log Σ_j exp(z_j) over the keys a query sees,
    −inf for a query that sees none (masked, causal with Tq > Tk, or no keys)."""
    q, k, v, mask, causal, _ = make(case, np.float64, rng)
    o, lse = kernels.attention_lse(q, k, v, mask, causal)
    assert np.array_equal(o, kernels.attention(q, k, v, mask, causal)) and lse.shape == q.shape[:-1]
    (tq, d), tk = q.shape[-2:], k.shape[-2]
    sees = np.broadcast_to(True if mask is None else mask, q.shape[:-1] + (tk,))
    if causal:
        sees = sees & (np.arange(tk) <= np.arange(tq)[:, None] + tk - tq)
    z = np.where(sees, q @ k.swapaxes(-1, -2) / math.sqrt(d), -np.inf)
    peak = z.max(-1, initial=-np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):      # a query that sees nothing: −inf − (−inf), log 0
        expected = peak + np.log(np.exp(z - peak[..., None]).sum(-1))
    np.testing.assert_array_equal(np.isneginf(lse), ~sees.any(-1))
    np.testing.assert_allclose(lse[sees.any(-1)], expected[sees.any(-1)], rtol=1e-12)


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


def test_queries_that_see_nothing_get_zeros_not_nan(rng):
    q, k, v = (rng.standard_normal((1, 4, 3)) for _ in range(3))
    mask = np.array([True, False, True, False])[:, None] & np.array([True, False, True, True])
    o = kernels.attention(q, k, v, mask)
    grads = kernels.attention_backward(np.ones_like(o), o, q, k, v, mask)
    assert np.isfinite(grads).all()
    np.testing.assert_array_equal(o[:, 1::2], 0)
    np.testing.assert_array_equal(grads[0][:, 1::2], 0)
    dq, _, dv = kernels.attention_backward(np.ones_like(o), o, q, k, v, mask[[0, 2, 0, 2]])
    assert np.abs(dq).max() > 0 and np.abs(dv).max() > 0


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
