"""Attention-over-attention (Cui et al. 2017) against its formula in NumPy, with padding on both sides."""
import numpy as np

import attngraph as ag
from attngraph.attention import AttentionOverAttention
from attngraph.inspect import gradcheck
from tests.attention.numpy_reference import assert_close, recorded, run, softmax

DIM = 3
DOCUMENT_MASK = np.array([[True, True, True, True, True], [True, True, True, False, False]])
QUERY_MASK = np.array([[True, True, False], [True, True, True]])


def reference(document, query, document_mask, query_mask):
    """One example: M = D Qᵀ, α column-wise and β row-wise softmax, β̄ = mean of β's real rows, s = α β̄."""
    m = document @ query.T
    alpha = softmax(m, document_mask[:, None], axis=0)
    beta = softmax(m, query_mask[None, :], axis=1)
    return alpha @ beta[document_mask].mean(0)


def inputs(rng, dtype=np.float32):
    return rng.standard_normal((2, 5, DIM)).astype(dtype), rng.standard_normal((2, 3, DIM)).astype(dtype)


def test_attended_attention_matches_the_formula(rng):
    document, query = inputs(rng)
    arguments = dict(document=document, query=query, document_mask=DOCUMENT_MASK, query_mask=QUERY_MASK)
    s = run(AttentionOverAttention(), **arguments)
    assert s.shape == (2, 5)
    for b in range(2):
        assert_close(s[b], reference(document[b].astype(np.float64), query[b].astype(np.float64), DOCUMENT_MASK[b],
                                     QUERY_MASK[b]))
    np.testing.assert_allclose(s.sum(-1), 1, rtol=1e-6)
    assert not s[1, 3:].any()
    np.testing.assert_array_equal(recorded(AttentionOverAttention(), **arguments)["attention"], s)


def test_without_masks_every_word_counts(rng):
    document, query = inputs(rng)
    s = run(AttentionOverAttention(), document=document, query=query)
    everything = np.ones(5, bool), np.ones(3, bool)
    for b in range(2):
        assert_close(s[b], reference(document[b].astype(np.float64), query[b].astype(np.float64), *everything))


def test_gradients_with_padding(rng):
    document, query = inputs(rng, np.float64)
    projection = rng.standard_normal((2, 5))

    def loss(document, query):
        return ag.sum(AttentionOverAttention()(document, query, DOCUMENT_MASK, QUERY_MASK) * projection)

    _, (d_document, d_query) = ag.value_and_grad(loss, argnums=(0, 1))(document, query)
    assert not d_document[1, 3:].any() and not d_query[0, 2].any()
    gradcheck(loss, document, query).raise_if_failed()
