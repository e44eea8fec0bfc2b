"""MultiHeadAttention against NumPy; h = 1 is single-head scaled dot attention; heads split and merge; causal
and padding masks; gradients; grouped-query and multi-query attention."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.attention import Attention, MultiHeadAttention, ScaledDotScore, merge_heads, split_heads
from attngraph.inspect import gradcheck, gradcheck_parameters
from tests.attention.numpy_reference import assert_close, recorded, run, softmax

D_MODEL = 4


def multihead(heads, dtype=np.float32, kv_heads=None):
    return MultiHeadAttention(D_MODEL, heads, rng=np.random.default_rng(0), kv_heads=kv_heads).astype(dtype)


def reference(mha, query, key, value, mask=None):
    """Each head i attends with q W_i^Q, k W_g^K, v W_g^V, the (d/h)-column blocks of the projections, g = i for
    multi-head attention and the group i // (h / kv_heads) of grouped-query attention."""
    def project(linear, x):
        return x @ linear.weight.data + linear.bias.data

    q, k, v = (project(w, x.astype(np.float64)) for w, x in [(mha.w_q, query), (mha.w_k, key), (mha.w_v, value)])
    width = D_MODEL // mha.heads
    heads, weights = [], []
    for i in range(mha.heads):
        block = slice(i * width, (i + 1) * width)
        group = i // (mha.heads // mha.kv_heads)
        shared = slice(group * width, (group + 1) * width)
        w = softmax(q[..., block] @ k[..., shared].swapaxes(-1, -2) / np.sqrt(width), mask)
        heads.append(w @ v[..., shared])
        weights.append(w)
    return project(mha.w_o, np.concatenate(heads, -1)), np.stack(weights, 1)


def test_two_heads_of_cross_attention_with_padding_match_numpy(rng):
    mha = multihead(2)
    query = rng.standard_normal((2, 3, D_MODEL)).astype(np.float32)
    key, value = rng.standard_normal((2, 2, 5, D_MODEL)).astype(np.float32)
    padding = np.array([[True, True, False, False, False], [True] * 5])
    out = run(mha, query=query, key=key, value=value, mask=padding)
    weights = recorded(mha, query=query, key=key, value=value, mask=padding)["attention"]
    expected_out, expected_weights = reference(mha, query, key, value, padding[:, None])
    assert out.shape == (2, 3, D_MODEL) and weights.shape == (2, 2, 3, 5)
    assert_close(weights, expected_weights)
    assert_close(out, expected_out)


def test_one_head_is_single_head_scaled_dot_attention_with_the_same_projections(rng):
    mha = multihead(1)
    single = Attention(ScaledDotScore())

    def single_head(x):
        context, _ = single(mha.w_q(x), mha.w_k(x), mha.w_v(x), causal=True)
        return mha.w_o(context)

    x = rng.standard_normal((2, 5, D_MODEL)).astype(np.float32)
    np.testing.assert_allclose(run(lambda x: mha(x, x, x, causal=True), x=x), run(single_head, x=x), rtol=1e-6,
                               atol=1e-7)


def test_split_and_merge_heads_round_trip(rng):
    x = rng.standard_normal((2, 3, 6)).astype(np.float32)
    heads = run(lambda x: split_heads(x, 3), x=x)
    assert heads.shape == (2, 3, 3, 2)
    np.testing.assert_array_equal(heads[:, 1, 2], x[:, 2, 2:4])      # head 1 at position 2: columns 2..3
    np.testing.assert_array_equal(run(lambda x: merge_heads(split_heads(x, 3)), x=x), x)


def test_causal_position_i_sees_exactly_positions_0_to_i(rng):
    mha = multihead(2)
    x = rng.standard_normal((1, 5, D_MODEL)).astype(np.float32)
    weights = recorded(mha, query=x, key=x, value=x, causal=True)["attention"]
    np.testing.assert_array_equal(weights[0, 0] > 0, np.tril(np.ones((5, 5), bool)))
    np.testing.assert_array_equal(weights[0, 1] > 0, np.tril(np.ones((5, 5), bool)))
    causal = ag.trace(lambda x: mha(x, x, x, causal=True), x=x).compile()
    out = causal(x=x)
    for j in range(5):
        changed = x.copy()
        changed[0, j] += 1.0
        moved = np.abs(causal(x=changed) - out).max(-1)[0] > 0
        np.testing.assert_array_equal(moved, np.arange(5) >= j)      # changing x_j moves outputs j, j + 1, ...


def test_a_padding_mask_on_the_query_axis_is_refused():
    with pytest.raises(ag.ShapeError, match="key axis"):
        ag.trace(multihead(2), query=ag.Input((2, 5, D_MODEL)), key=ag.Input((2, 5, D_MODEL)),
                 value=ag.Input((2, 5, D_MODEL)), mask=ag.Input((2, 5, 1), "bool"))


def test_gradients_with_a_fully_masked_batch_row(rng):
    mha = multihead(2, np.float64)
    x, memory = rng.standard_normal((2, 2, D_MODEL)), rng.standard_normal((2, 3, D_MODEL))
    padding = np.array([[True, True, False], [False] * 3])

    def loss(x, memory):
        return ag.sum(ag.tanh(mha(x, memory, memory, mask=padding)))

    _, (dx, dmemory) = ag.value_and_grad(loss, argnums=(0, 1))(x, memory)
    assert np.isfinite(dx).all() and np.isfinite(dmemory).all()
    assert not dmemory[1].any() and not dmemory[0, 2].any()
    gradcheck(loss, x, memory).raise_if_failed()
    gradcheck_parameters(loss, mha, x, memory).raise_if_failed()


@pytest.mark.parametrize("kv_heads", [1, 2], ids=["multi-query", "grouped-query"])
def test_grouped_query_attention_matches_numpy(rng, kv_heads):
    mha = multihead(4, kv_heads=kv_heads)
    assert mha.w_k.weight.shape == mha.w_v.weight.shape == (D_MODEL, kv_heads * D_MODEL // 4)
    query = rng.standard_normal((2, 3, D_MODEL)).astype(np.float32)
    key = rng.standard_normal((2, 5, D_MODEL)).astype(np.float32)
    padding = np.array([[True, True, True, False, False], [True] * 5])
    out = run(mha, query=query, key=key, value=key, mask=padding)
    weights = recorded(mha, query=query, key=key, value=key, mask=padding)["attention"]
    expected_out, expected_weights = reference(mha, query, key, key, padding[:, None])
    assert_close(weights, expected_weights)
    assert_close(out, expected_out)


def test_grouped_query_gradients(rng):
    mha = multihead(4, np.float64, kv_heads=2)
    x = rng.standard_normal((2, 3, D_MODEL))

    def loss(x):
        return ag.sum(ag.tanh(mha(x, x, x, causal=True)))

    gradcheck(loss, x).raise_if_failed()
    gradcheck_parameters(loss, mha, x).raise_if_failed()


def test_kv_heads_must_divide_heads():
    with pytest.raises(ValueError, match="kv_heads"):
        MultiHeadAttention(D_MODEL, 4, kv_heads=3)
