"""Coattention (Xiong et al. 2016) against the paper's formulas, written in its own layout (positions in
columns), with padded document and question words."""
import numpy as np

import attngraph as ag
from attngraph.attention import Coattention
from attngraph.inspect import gradcheck
from tests.attention.numpy_reference import assert_close, recorded, run, softmax

DIM = 3
DOCUMENT_MASK = np.array([[True, True, True, True], [True, True, False, False]])
QUESTION_MASK = np.array([[True, True, False], [True, True, True]])


def paper(document, question, document_mask, question_mask):
    """One example, D (ℓ × m) and Q (ℓ × n): L = DᵀQ, A^Q = softmax(L) and A^D = softmax(Lᵀ) column-wise,
    C^Q = D A^Q, C^D = [Q; C^Q] A^D."""
    d, q = document.T, question.T
    affinity = d.T @ q
    a_q = softmax(affinity, document_mask[:, None], axis=0)
    a_d = softmax(affinity.T, question_mask[:, None], axis=0)
    c_q = d @ a_q
    c_d = np.concatenate([q, c_q], 0) @ a_d
    return c_d.T, c_q.T, a_d.T, a_q.T


def inputs(rng, dtype=np.float32):
    return rng.standard_normal((2, 4, DIM)).astype(dtype), rng.standard_normal((2, 3, DIM)).astype(dtype)


def test_contexts_and_weights_match_the_paper(rng):
    document, question = inputs(rng)
    arguments = dict(document=document, question=question, document_mask=DOCUMENT_MASK,
                     question_mask=QUESTION_MASK)
    document_context, question_context = run(Coattention(), **arguments)
    names = recorded(Coattention(), **arguments)
    assert document_context.shape == (2, 4, 2 * DIM) and question_context.shape == (2, 3, DIM)
    for b in range(2):
        expected = paper(document[b].astype(np.float64), question[b].astype(np.float64), DOCUMENT_MASK[b],
                         QUESTION_MASK[b])
        for actual, wanted in zip([document_context[b], question_context[b], names["attention"][b],
                                   names["question_attention"][b]], expected):
            assert_close(actual, wanted)
    assert not names["question_attention"][1, :, 2:].any()        # padded document words get no weight
    assert not names["attention"][0, :, 2].any()                  # nor padded question words


def test_padded_question_words_do_not_reach_the_document_context(rng):
    document, question = inputs(rng)
    changed = question.copy()
    changed[0, 2] = 100.0
    coattention = ag.trace(lambda d, q: Coattention()(d, q, DOCUMENT_MASK, QUESTION_MASK)[0], d=document,
                           q=question).compile()
    np.testing.assert_array_equal(coattention(d=document, q=changed), coattention(d=document, q=question))


def test_gradients_with_padding(rng):
    document, question = inputs(rng, np.float64)

    def loss(document, question):
        """Rows of padded words are left out, as a model would."""
        document_context, question_context = Coattention()(document, question, DOCUMENT_MASK, QUESTION_MASK)
        return (ag.sum(ag.tanh(document_context) * DOCUMENT_MASK[..., None].astype(np.float64))
                + ag.sum(ag.tanh(question_context) * QUESTION_MASK[..., None].astype(np.float64)))

    _, (d_document, d_question) = ag.value_and_grad(loss, argnums=(0, 1))(document, question)
    assert not d_document[1, 2:].any() and not d_question[0, 2].any()
    gradcheck(loss, document, question).raise_if_failed()
