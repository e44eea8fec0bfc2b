"""Structured self-attention (Lin et al. 2017): A, M and the penalty against NumPy; padding; gradients."""
import numpy as np

import attngraph as ag
from attngraph.attention import StructuredSelfAttention, redundancy_penalty
from attngraph.inspect import gradcheck, gradcheck_parameters
from tests.attention.numpy_reference import assert_close, recorded, run, softmax

DIM, ATTENTION_DIM, HOPS = 3, 2, 2
# sentence 0 has 2 words and 2 padding positions, sentence 1 has 4 words, sentence 2 is all padding
PADDING = np.array([[True, True, False, False], [True] * 4, [False] * 4])


def structured(dtype=np.float32):
    return StructuredSelfAttention(DIM, ATTENTION_DIM, HOPS, rng=np.random.default_rng(0)).astype(dtype)


def penalty(a):
    """mean over sentences of ‖A Aᵀ − I‖²_F."""
    return np.mean([np.linalg.norm(w @ w.T - np.eye(len(w)), "fro") ** 2 for w in a])


def test_embedding_and_weights_match_the_formula(rng):
    attention = structured()
    h = rng.standard_normal((3, 4, DIM)).astype(np.float32)
    embedding, weights = run(attention, hidden=h, mask=PADDING)
    h64 = h.astype(np.float64)
    scores = np.tanh(h64 @ attention.w_s1.weight.data) @ attention.w_s2.weight.data      # (W_s2 tanh(W_s1 Hᵀ))ᵀ
    expected = softmax(scores.swapaxes(-1, -2), PADDING[:, None, :])
    assert weights.shape == (3, HOPS, 4) and embedding.shape == (3, HOPS, DIM)
    assert_close(weights, expected)
    assert_close(embedding, expected @ h64)
    assert not weights[2].any() and not embedding[2].any()


def test_penalty_is_the_batch_mean_of_the_squared_frobenius_norm(rng):
    weights = softmax(rng.standard_normal((3, HOPS, 5)))
    np.testing.assert_allclose(run(redundancy_penalty, weights=weights), penalty(weights), rtol=1e-12)
    disjoint = np.array([[[1.0, 0, 0], [0, 0, 1.0]]])               # hops on different words: no penalty
    same = np.array([[[0.5, 0.5, 0], [0.5, 0.5, 0]]])                # A Aᵀ − I = ±0.5 everywhere: 4 · 0.25
    for a, expected in [(disjoint, 0.0), (same, 1.0), (np.zeros((4, HOPS, 3)), HOPS)]:
        np.testing.assert_allclose(run(redundancy_penalty, weights=a), expected, rtol=1e-12)


def test_gradients_of_a_loss_with_the_penalty(rng):
    attention = structured(np.float64)
    h = rng.standard_normal((3, 4, DIM))

    def loss(h):
        embedding, weights = attention(h, mask=PADDING)
        return ag.sum(ag.tanh(embedding)) + 0.5 * redundancy_penalty(weights)

    _, grad = ag.value_and_grad(loss)(h)
    assert np.isfinite(grad).all() and not grad[2].any() and not grad[0, 2:].any()
    gradcheck(loss, h).raise_if_failed()
    gradcheck_parameters(loss, attention, h).raise_if_failed()


def test_weights_are_recorded_under_the_module_scope(rng):
    attention = structured()
    h = rng.standard_normal((3, 4, DIM)).astype(np.float32)
    names = recorded(attention, hidden=h, mask=PADDING)
    assert list(names) == ["attention"]
    np.testing.assert_array_equal(names["attention"], run(attention, hidden=h, mask=PADDING)[1])
