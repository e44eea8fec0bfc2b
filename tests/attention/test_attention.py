"""``Attention(score)``: weights and context against NumPy, masks, single queries, cross-attention, gradients."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.attention import Attention, DotScore, GeneralScore
from attngraph.inspect import gradcheck, gradcheck_parameters
from tests.attention.numpy_reference import assert_close, recorded, run, softmax

# batch row 0 may attend to its first three keys, batch row 1 to none
PADDING = np.array([[True, True, True, False, False], [False] * 5])[:, None, :]


def general_attention(dtype=np.float32):
    return Attention(GeneralScore(4, 3, rng=np.random.default_rng(0))).astype(dtype)


def reference(attention, q, k, v, mask=None):
    weights = softmax(q @ attention.score.weight.data @ k.swapaxes(-1, -2), mask)
    return weights @ v, weights


def test_context_and_weights_match_numpy_for_cross_attention_with_padding(rng):
    attention = general_attention()
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in [(2, 2, 4), (2, 5, 3), (2, 5, 6)])
    context, weights = run(attention, query=q, keys=k, values=v, mask=PADDING)
    expected_context, expected_weights = reference(attention, q, k, v, PADDING)
    assert context.shape == (2, 2, 6) and weights.shape == (2, 2, 5)
    assert_close(weights, expected_weights)
    assert_close(context, expected_context)
    np.testing.assert_allclose(weights[0].sum(-1), 1, rtol=1e-6)
    assert not weights[1].any() and not context[1].any() and not weights[0, :, 3:].any()


def test_single_query_drops_the_query_axis_and_values_default_to_keys(rng):
    attention = general_attention()
    q, k = rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal((2, 5, 3)).astype(np.float32)
    context, weights = run(attention, query=q, keys=k, mask=PADDING[:, 0])
    expected_context, expected_weights = reference(attention, q[:, None], k, k, PADDING)
    assert context.shape == (2, 3) and weights.shape == (2, 5)
    assert_close(weights, expected_weights[:, 0])
    assert_close(context, expected_context[:, 0])


def test_fully_masked_rows_give_zero_and_finite_gradients(rng):
    attention = general_attention(np.float64)
    q, k, v = (rng.standard_normal(s) for s in [(2, 2, 4), (2, 5, 3), (2, 5, 6)])

    def loss(q, k, v):
        return ag.sum(ag.tanh(attention(q, k, v, mask=PADDING)[0]))

    _, (dq, dk, dv) = ag.value_and_grad(loss, argnums=(0, 1, 2))(q, k, v)
    assert all(np.isfinite(g).all() for g in (dq, dk, dv))
    assert not dq[1].any() and not dk[1].any() and not dv[1].any()   # nothing is read from batch row 1
    assert not dk[0, 3:].any() and not dv[0, 3:].any()               # nor from padded keys
    gradcheck(loss, q, k, v).raise_if_failed()
    gradcheck_parameters(loss, attention, q, k, v).raise_if_failed()


def test_a_padding_mask_on_the_query_axis_is_refused():
    attention = general_attention()
    with pytest.raises(ag.ShapeError, match="key axis"):
        ag.trace(attention, query=ag.Input((2, 5, 4)), keys=ag.Input((2, 5, 3)),
                 mask=ag.Input((2, 5, 1), "bool"))


def test_weights_are_recorded_under_the_module_scope(rng):
    q, k = rng.standard_normal((2, 2, 4)).astype(np.float32), rng.standard_normal((2, 5, 3)).astype(np.float32)
    attention = general_attention()
    names = recorded(attention, query=q, keys=k, mask=PADDING)
    assert list(names) == ["attention"]
    np.testing.assert_array_equal(names["attention"], run(attention, query=q, keys=k, mask=PADDING)[1])


def test_a_two_dimensional_padding_mask_masks_keys_even_when_batch_equals_query_length():
    q, k = np.ones((2, 2, 3), np.float32), np.ones((2, 4, 3), np.float32)
    padding = np.array([[True, True, False, False], [True] * 4])
    graph = ag.trace(Attention(DotScore()), query=q, keys=k, mask=padding)
    _, weights = graph.compile()(query=q, keys=k, mask=padding)
    np.testing.assert_allclose(weights[0], [[0.5, 0.5, 0, 0]] * 2)
    np.testing.assert_allclose(weights[1], [[0.25] * 4] * 2)
