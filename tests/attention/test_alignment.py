"""Alignment biases (Cohn et al. 2016): the biased additive score written out per (query, key) in NumPy."""
import numpy as np

import attngraph as ag
from attngraph.attention import AlignmentAttention, AlignmentBiasedScore, Attention
from attngraph.inspect import gradcheck, gradcheck_parameters
from tests.attention.numpy_reference import assert_close, recorded, run, softmax

Q_DIM, K_DIM, HIDDEN, WIDTH = 3, 2, 4, 2
# source sentences of 3 and 5 words
PADDING = np.array([[True, True, True, False, False], [True] * 5])[:, None, :]


def alignment(dtype=np.float32):
    return AlignmentAttention(Q_DIM, K_DIM, HIDDEN, WIDTH, rng=np.random.default_rng(0)).astype(dtype)


def reference(score, q, k, mask, previous, step):
    """e_ij = vᵀ tanh(W_1 s_i + W_2 h_j + b + W_3 [log(1+j), log(1+i), log(1+I)] + W_4 [α_{i−1, j−k..j+k}])."""
    tk = k.shape[1]
    scores = np.zeros((len(q), q.shape[1], tk))
    for b, t, j in np.ndindex(scores.shape):
        psi = np.log1p([j, step + t, mask[b, 0].sum()])
        xi = [previous[b, t, j + m] if 0 <= j + m < tk else 0.0 for m in range(-WIDTH, WIDTH + 1)]
        hidden = (q[b, t] @ score.w_query.weight.data + k[b, j] @ score.w_key.weight.data + score.w_key.bias.data
                  + psi @ score.w_position.data + np.array(xi) @ score.w_markov.data)
        scores[b, t, j] = np.tanh(hidden) @ score.v.data
    return scores


def inputs(rng, tq, dtype=np.float32):
    """Queries (2, tq, Q_DIM), keys (2, 5, K_DIM), values (2, 5, 3) and a previous alignment (2, tq, 5)."""
    q, k, v = (rng.standard_normal(s).astype(dtype) for s in [(2, tq, Q_DIM), (2, 5, K_DIM), (2, 5, 3)])
    return q, k, v, softmax(rng.standard_normal((2, tq, 5)), PADDING).astype(dtype)


def test_biased_scores_and_attention_match_the_formula(rng):
    attention = alignment()
    q, k, v, previous = inputs(rng, tq=3)
    scores = run(attention.score, q=q, k=k, mask=PADDING, previous=previous, step=2)
    expected = reference(attention.score, q.astype(np.float64), k.astype(np.float64), PADDING, previous, step=2)
    assert_close(scores, expected)
    context, weights = run(attention, query=q, keys=k, values=v, mask=PADDING, previous=previous, step=2)
    assert_close(weights, softmax(expected, PADDING))
    assert_close(context, softmax(expected, PADDING) @ v)


def test_decoding_step_by_step_feeds_each_alignment_to_the_next_step(rng):
    attention = alignment()
    q, k, v, _ = inputs(rng, tq=3)
    previous, expected_previous = None, np.zeros((2, 1, 5))
    for i in range(3):
        arguments = dict(query=q[:, i:i + 1], keys=k, values=v, mask=PADDING, step=i)
        _, previous = run(attention, **arguments, **({} if previous is None else dict(previous=previous)))
        expected = reference(attention.score, q[:, i:i + 1].astype(np.float64), k.astype(np.float64), PADDING,
                             expected_previous, step=i)
        expected_previous = softmax(expected, PADDING)
        assert_close(previous, expected_previous)


def test_inside_attention_the_score_sees_positions_only(rng):
    score = AlignmentBiasedScore(Q_DIM, K_DIM, HIDDEN, WIDTH, rng=np.random.default_rng(0))
    q, k, _, _ = inputs(rng, tq=3)
    _, weights = run(Attention(score), query=q, keys=k)
    everything, no_alignment = np.ones((2, 1, 5), bool), np.zeros((2, 3, 5))
    assert_close(weights, softmax(reference(score, q.astype(np.float64), k.astype(np.float64), everything,
                                            no_alignment, step=0)))


def test_gradients_through_scores_positions_and_previous_alignment(rng):
    attention = alignment(np.float64)
    q, k, v, previous = inputs(rng, tq=2, dtype=np.float64)

    def loss(q, k, previous):
        return ag.sum(ag.tanh(attention(q, k, v, mask=PADDING, previous=previous, step=1)[0]))

    gradcheck(loss, q, k, previous).raise_if_failed()
    gradcheck_parameters(loss, attention, q, k, previous).raise_if_failed()


def test_weights_are_recorded_under_the_module_scope(rng):
    attention = alignment()
    q, k, _, previous = inputs(rng, tq=2)
    names = recorded(attention, query=q, keys=k, mask=PADDING, previous=previous)
    assert list(names) == ["attention"]
    np.testing.assert_array_equal(names["attention"], run(attention, query=q, keys=k, mask=PADDING,
                                                          previous=previous)[1])
