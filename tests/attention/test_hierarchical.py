"""Attention pooling (Yang et al. 2016) against NumPy, at word and sentence level with padding at both."""
import numpy as np

import attngraph as ag
from attngraph.attention import AttentionPooling
from attngraph.inspect import gradcheck, gradcheck_parameters
from tests.attention.numpy_reference import assert_close, recorded, run, softmax

DIM = 2
# 2 documents of up to 2 sentences of up to 3 words; the second sentence of document 1 is all padding
WORDS = np.array([[[1, 1, 1], [1, 0, 0]],
                  [[1, 1, 0], [0, 0, 0]]], bool)
SENTENCES = WORDS.any(-1)


def pooling(dtype=np.float32, seed=0):
    return AttentionPooling(DIM, 3, rng=np.random.default_rng(seed)).astype(dtype)


def reference(pool, h, mask):
    """u = tanh(W h + b), α = softmax(uᵀ u_w) over the unpadded words, s = Σ α h."""
    u = np.tanh(h @ pool.w_s1.weight.data + pool.w_s1.bias.data)
    alpha = softmax(u @ pool.w_s2.weight.data[:, 0], mask)
    return (alpha[..., None] * h).sum(-2), alpha


def test_pooling_matches_the_formula(rng):
    pool = pooling()
    h = rng.standard_normal((4, 3, DIM)).astype(np.float32)
    mask = WORDS.reshape(4, 3)
    pooled, weights = run(pool, hidden=h, mask=mask)
    expected_pooled, expected_weights = reference(pool, h.astype(np.float64), mask)
    assert pooled.shape == (4, DIM) and weights.shape == (4, 3)
    assert_close(weights, expected_weights)
    assert_close(pooled, expected_pooled)
    assert not pooled[3].any() and not weights[3].any()               # an all-padding sentence pools to zero


def test_word_then_sentence_attention_builds_the_document_vector(rng):
    words, sentences = pooling(seed=0), pooling(seed=1)

    def document(h):
        sentence_vectors, _ = words(h, mask=WORDS)
        return sentences(sentence_vectors, mask=SENTENCES)[0]

    h = rng.standard_normal((2, 2, 3, DIM)).astype(np.float32)
    expected_sentences, _ = reference(words, h.astype(np.float64), WORDS)
    expected, _ = reference(sentences, expected_sentences, SENTENCES)
    assert_close(run(document, h=h), expected)


def test_gradients_with_padding_at_both_levels(rng):
    words, sentences = pooling(np.float64, seed=0), pooling(np.float64, seed=1)
    h = rng.standard_normal((2, 2, 3, DIM))

    def loss(h):
        return ag.sum(ag.tanh(sentences(words(h, mask=WORDS)[0], mask=SENTENCES)[0]))

    _, grad = ag.value_and_grad(loss)(h)
    assert np.isfinite(grad).all() and not grad[~WORDS].any()
    gradcheck(loss, h).raise_if_failed()
    gradcheck_parameters(loss, words, h).raise_if_failed()
    gradcheck_parameters(loss, sentences, h).raise_if_failed()


def test_weights_are_recorded_under_the_module_scope(rng):
    pool = pooling()
    h = rng.standard_normal((4, 3, DIM)).astype(np.float32)
    names = recorded(pool, hidden=h, mask=WORDS.reshape(4, 3))
    assert list(names) == ["attention"]
    np.testing.assert_array_equal(names["attention"][:, 0], run(pool, hidden=h, mask=WORDS.reshape(4, 3))[1])
