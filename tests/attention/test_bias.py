"""The additive attention bias, softmax(q kᵀ/√d + bias, mask) v: the fused kernel and primitive against PyTorch's
scaled_dot_product_attention with a float attn_mask (numbers stored here, computed by torch 2.13 in float64), a
NumPy reference for causal Tq ≠ Tk and broadcast biases, −inf biases, the compiler's fusion of the composed
biased attention, ALiBi's slopes and biases (Press et al. 2022), and the errors for a bias or mask of the wrong
kind."""
import math

import numpy as np
import pytest

import attngraph as ag
from attngraph.attention import MultiHeadAttention
from attngraph.attention.multihead import alibi_slopes
from attngraph.core import passes, unfused
from ops.cpu import attention as kernels

# torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias), output gradient G; inputs from
# np.random.default_rng(14): q (1, 2, 2, 2), k and v (1, 2, 3, 2), bias (2, 1, 3), G (1, 2, 2, 2), in this order.
TORCH_OUT = np.array([[[[0.055683997709, 0.34673338024], [1.133272266089, 0.258041227705]],
                       [[0.649343988163, -0.908946581888], [0.645085465686, -0.965747124021]]]])
TORCH_DQ = np.array([[[[0.36387509285, -0.014955447441], [0.190108117245, 0.000759949884]],
                      [[0.420826554261, 0.141690403958], [0.214878996076, 0.072520912938]]]])
TORCH_DK = np.array([[[[0.032688205793, 0.554193829362], [-0.029528684133, -0.558432273437],
                       [-0.00315952166, 0.004238444075]],
                      [[-0.083066033486, 0.372417026636], [0.015866829602, -0.070877482806],
                       [0.067199203884, -0.30153954383]]]])
TORCH_DV = np.array([[[[-0.381042491069, 1.21212860486], [-1.025022780072, 1.757204767361],
                       [-0.010052100634, 0.015349807268]],
                      [[0.551242768578, -0.773657818655], [0.245649359568, -0.340545532158],
                       [0.380313701778, -0.529192108496]]]])
TORCH_DBIAS = np.array([[[-0.472203716328, 0.478438679833, -0.006234963506]],
                        [[0.526996774103, -0.100025370723, -0.42697140338]]])


def torch_inputs():
    rng = np.random.default_rng(14)
    return (rng.standard_normal((1, 2, 2, 2)), rng.standard_normal((1, 2, 3, 2)), rng.standard_normal((1, 2, 3, 2)),
            rng.standard_normal((2, 1, 3)), rng.standard_normal((1, 2, 2, 2)))


def loss_of(attention, g):
    return lambda q, k, v, bias: ag.sum(attention(q, k, v, bias=bias) * g)


@pytest.mark.parametrize("attention", [ag.scaled_dot_product_attention, unfused.scaled_dot_product_attention],
                         ids=["fused", "composed"])
def test_values_and_every_gradient_match_torch(attention):
    q, k, v, bias, g = torch_inputs()
    out = ag.trace(lambda q, k, v, bias: attention(q, k, v, bias=bias), q=q, k=k, v=v, bias=bias).compile()(
        q=q, k=k, v=v, bias=bias)
    np.testing.assert_allclose(out, TORCH_OUT, atol=1e-11)
    _, grads = ag.value_and_grad(loss_of(attention, g), argnums=(0, 1, 2, 3))(q, k, v, bias)
    for got, expected in zip(grads, (TORCH_DQ, TORCH_DK, TORCH_DV, TORCH_DBIAS)):
        np.testing.assert_allclose(got, expected, atol=1e-11)


def reference(q, k, v, bias, causal, g):
    """o, dq, dk, dv and the full-shape score gradient in float64, causal bottom-right aligned."""
    (tq, d), tk = q.shape[-2:], k.shape[-2]
    sees = np.arange(tk) <= np.arange(tq)[:, None] + tk - tq if causal else np.ones((tq, tk), bool)
    z = np.where(sees, q @ k.swapaxes(-1, -2) / math.sqrt(d) + bias, -np.inf)
    p = np.exp(z - np.where(sees.any(-1, keepdims=True), z.max(-1, keepdims=True), 0))
    p /= np.maximum(p.sum(-1, keepdims=True), 1e-300)          # 0 for a query that sees no key
    dp = g @ v.swapaxes(-1, -2)
    dz = p * (dp - (dp * p).sum(-1, keepdims=True))
    return p @ v, dz @ k / math.sqrt(d), dz.swapaxes(-1, -2) @ q / math.sqrt(d), p.swapaxes(-1, -2) @ g, dz


@pytest.mark.parametrize("tq, tk, bias_shape, causal", [
    (5, 200, (3, 5, 200), True),        # ALiBi-like per head, bottom-right causal over several key chunks
    (70, 40, (2, 1, 1, 40), True),      # a padding bias; the first 30 queries see no key
    (3, 3, (), False),                  # a scalar bias changes nothing
])
def test_kernels_match_numpy(tq, tk, bias_shape, causal):
    rng = np.random.default_rng(0)
    q, g = rng.standard_normal((2, 3, tq, 8)), rng.standard_normal((2, 3, tq, 8))
    k, v = rng.standard_normal((2, 3, tk, 8)), rng.standard_normal((2, 3, tk, 8))
    bias = rng.standard_normal(bias_shape)
    o = kernels.attention(q, k, v, causal=causal, bias=bias)
    grads = kernels.attention_backward(g, o, q, k, v, causal=causal, bias=bias)
    dz = kernels.attention_bias_backward(g, o, q, k, v, causal=causal, bias=bias)
    expected = reference(q, k, v, bias, causal, g)
    got = [o, grads[0, ..., :tq, :], grads[1, ..., :tk, :], grads[2, ..., :tk, :], dz]
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_minus_inf_biases_mask_keys_and_a_row_of_them_gives_zeros():
    rng = np.random.default_rng(1)
    q, g = rng.standard_normal((1, 3, 4)), rng.standard_normal((1, 3, 4))
    k, v = rng.standard_normal((1, 4, 4)), rng.standard_normal((1, 4, 4))
    bias = np.zeros((3, 4))
    bias[0, 2:] = -np.inf                                   # row 0 sees keys 0 and 1 only
    bias[1] = -np.inf                                       # row 1 sees nothing
    mask = np.isfinite(bias)
    o = kernels.attention(q, k, v, bias=bias)
    grads = kernels.attention_backward(g, o, q, k, v, bias=bias)
    dz = kernels.attention_bias_backward(g, o, q, k, v, bias=bias)
    masked = kernels.attention(q, k, v, mask)
    np.testing.assert_array_equal(o, masked)
    np.testing.assert_array_equal(grads, kernels.attention_backward(g, masked, q, k, v, mask))
    assert not o[0, 1].any() and not grads[0, 0, 1].any() and not dz[0, 1].any() and np.isfinite(dz).all()
    assert not dz[0, 0, 2:].any() and dz[0, 0, :2].any()


def test_the_compiler_fuses_composed_biased_attention_with_its_gradients():
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((2, 2, 6, 4)), rng.standard_normal((2, 2, 9, 4)), rng.standard_normal((2, 2, 9, 4))
    bias = rng.standard_normal((2, 6, 9))

    def loss(q, k, v, b):
        return ag.sum(unfused.scaled_dot_product_attention(q, k, v, bias=b, causal=True) ** 2)
    composed = ag.trace(loss, q=q, k=k, v=v, b=bias).grad(["q", "k", "v", "b"])
    optimized = passes.optimize(composed, elementwise=False)
    ops = {n.op for n in optimized.nodes}
    assert {"attention", "attention_grad", "attention_bias_grad"} <= ops and "softmax" not in ops
    for fused, reference_value in zip(optimized.compile()(q=q, k=k, v=v, b=bias), composed.compile()(
            q=q, k=k, v=v, b=bias)):
        np.testing.assert_allclose(fused, reference_value, atol=1e-12)


def test_alibi_slopes_are_the_papers():
    np.testing.assert_array_equal(alibi_slopes(8), 2.0 ** -np.arange(1, 9))
    np.testing.assert_array_equal(alibi_slopes(4), 2.0 ** -np.arange(2, 9, 2))
    # not a power of 2: the 4 slopes of 4 heads, then every other one of 8 heads' (the paper's code)
    np.testing.assert_array_equal(alibi_slopes(6), [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3])


def test_alibi_attention_matches_numpy():
    mha = MultiHeadAttention(8, 2, alibi=True, rng=np.random.default_rng(3)).astype(np.float64)
    x = np.random.default_rng(4).standard_normal((2, 5, 8))
    out = ag.trace(lambda x: mha(x, x, x, causal=True), x=x).compile()(x=x)
    q, k, v = (x @ w.weight.data + w.bias.data for w in (mha.w_q, mha.w_k, mha.w_v))
    distance = np.arange(5)[:, None] - np.arange(5)
    heads = []
    for h, slope in enumerate([2 ** -4, 2 ** -8]):
        cols = slice(4 * h, 4 * h + 4)
        z = q[..., cols] @ k[..., cols].swapaxes(-1, -2) / 2 - slope * distance
        p = np.exp(np.where(distance >= 0, z, -np.inf))
        heads.append(p / p.sum(-1, keepdims=True) @ v[..., cols])
    np.testing.assert_allclose(out, np.concatenate(heads, -1) @ mha.w_o.weight.data + mha.w_o.bias.data, atol=1e-12)


def test_a_float_mask_or_a_boolean_bias_is_refused():
    q = ag.Input((2, 3, 4))
    with pytest.raises(ag.errors.DTypeError, match="bias="):
        ag.trace(lambda q, m: ag.scaled_dot_product_attention(q, q, q, mask=m), q=q, m=ag.Input((3, 3)))
    with pytest.raises(ag.errors.DTypeError, match="mask="):
        ag.trace(lambda q, b: ag.scaled_dot_product_attention(q, q, q, bias=b), q=q, b=ag.Input((3, 3), "bool"))
    with pytest.raises(ag.errors.ShapeError, match="bias"):
        ag.trace(lambda q, b: ag.scaled_dot_product_attention(q, q, q, bias=b), q=q, b=ag.Input((4, 3)))


def test_biased_alibi_and_grouped_query_attention_export_to_onnx():
    onnx, ort = pytest.importorskip("onnx"), pytest.importorskip("onnxruntime")
    from attngraph.export import to_onnx

    mha = MultiHeadAttention(8, 4, kv_heads=2, alibi=True, rng=np.random.default_rng(5))

    def f(x, bias):
        return mha(x, x, x, causal=True), ag.scaled_dot_product_attention(x, x, x, bias=bias)

    graph = ag.trace(f, x=ag.Input(("B", "T", 8)), bias=ag.Input(("T", "T")))
    assert "attention" in {n.op for n in graph.nodes}
    rng = np.random.default_rng(6)
    for b, t in [(2, 5), (1, 3)]:
        feeds = {"x": rng.standard_normal((b, t, 8)).astype(np.float32),
                 "bias": rng.standard_normal((t, t)).astype(np.float32)}
        model = to_onnx(graph)
        onnx.checker.check_model(model, full_check=True)
        got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        for g, w in zip(got, graph.compile()(**feeds)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
