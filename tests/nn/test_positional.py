"""Positional encodings: sinusoidal and learned tables read at run time, relative position representations
(Shaw et al. 2018) and multi-head attention with them, against NumPy and central differences."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.attention import LearnedPositions, RelativeMultiHeadAttention, RelativePositions, SinusoidalPositions
from attngraph.inspect import gradcheck_parameters
from tests.nn import reference

K = 2          # max_distance
T = 6          # long enough for distances beyond ±K


def test_sinusoidal_positions_follow_the_formula_for_any_length():
    d = 6
    graph = ag.trace(SinusoidalPositions(d, max_length=16), x=ag.Input(("B", "T", d))).compile()
    for length in (3, 7):
        got = graph(x=np.zeros((2, length, d), np.float32))
        for p in range(length):
            for i in range(d // 2):
                angle = p / 10000 ** (2 * i / d)
                np.testing.assert_allclose(got[:, p, 2 * i], np.sin(angle), atol=1e-6)
                np.testing.assert_allclose(got[:, p, 2 * i + 1], np.cos(angle), atol=1e-6)


def test_learned_positions_add_one_trained_row_per_position(rng):
    positions = LearnedPositions(8, 3, rng)
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    graph = ag.trace(lambda x: ag.sum(positions(x) * x), x=ag.Input(("B", "T", 3)))
    np.testing.assert_allclose(graph.compile()(x=x), np.sum((x + positions.weight.data[:5]) * x), rtol=1e-5)
    _, grad = graph.grad().compile()(x=x)
    np.testing.assert_allclose(grad[:5], x.sum(0), rtol=1e-6)
    np.testing.assert_array_equal(grad[5:], 0)


def test_a_concrete_length_beyond_the_table_is_refused():
    with pytest.raises(ag.ShapeError, match="exceeds the 4 positions"):
        ag.trace(SinusoidalPositions(2, max_length=4), x=ag.Input((1, 5, 2)))


def test_distances_beyond_k_share_one_row_which_collects_their_gradients(rng):
    relative = RelativePositions(K, 3, rng)
    q = np.zeros((1, T, 3), np.float32)
    upstream = rng.standard_normal((T, T)).astype(np.float32)

    def loss(q, upstream):
        a_k, a_v = relative(q, q)
        return ag.sum(a_k * ag.expand_dims(upstream, -1)) + ag.sum(a_v)

    graph = ag.trace(loss, q=q, upstream=upstream).grad()
    _, key_grad, value_grad = graph.compile()(q=q, upstream=upstream)
    assert graph.output_names[1:] == ["grad:key", "grad:value"]
    distance = np.subtract.outer(np.arange(T), np.arange(T)).T              # j − i at [i, j]
    index = np.clip(distance, -K, K) + K
    a_k, a_v = ag.trace(lambda q: relative(q, q), q=q).compile()(q=q)
    np.testing.assert_array_equal(a_k, relative.key.data[index])
    np.testing.assert_array_equal(a_v, relative.value.data[index])
    assert np.all(a_k[distance <= -K] == relative.key.data[0]) and np.count_nonzero(distance <= -K) > 1
    for row in range(2 * K + 1):
        np.testing.assert_allclose(key_grad[row], upstream[index == row].sum() * np.ones(3), rtol=1e-5)
        np.testing.assert_allclose(value_grad[row], np.count_nonzero(index == row) * np.ones(3))


@pytest.mark.parametrize("causal", [False, True])
def test_relative_multi_head_attention_matches_shaws_equations(causal, rng):
    mha = RelativeMultiHeadAttention(4, 2, K, rng=rng)
    query = rng.standard_normal((2, T - 2, 4)).astype(np.float32)
    memory = rng.standard_normal((2, T, 4)).astype(np.float32)
    padding = np.array([[True] * 4 + [False] * 2, [True] * T])
    out = ag.trace(lambda q, m, mask: mha(q, m, m, mask=mask, causal=causal), q=query, m=memory, mask=padding) \
        .compile()(q=query, m=memory, mask=padding)
    index = np.clip(np.subtract.outer(np.arange(T), np.arange(T - 2)).T, -K, K) + K
    mask = padding[:, None, None, :]
    if causal:
        mask = mask & (np.arange(T)[None, :] <= np.arange(T - 2)[:, None] + 2)
    expected = reference.multi_head_attention(mha, query, memory, memory, mask,
                                              relative=(mha.relative.key.data[index], mha.relative.value.data[index]))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_relative_multi_head_attention_gradients(rng):
    mha = RelativeMultiHeadAttention(4, 2, 1, rng=rng).astype(np.float64)
    x = rng.standard_normal((1, 3, 4))
    gradcheck_parameters(lambda x: ag.sum(ag.tanh(mha(x, x, x, causal=True))), mha, x).raise_if_failed()
