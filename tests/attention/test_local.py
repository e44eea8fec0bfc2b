"""Luong's local attention, local-m and local-p, against the paper's formula written per query in NumPy."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.attention import GeneralScore, LocalAttention, PredictiveLocalAttention
from attngraph.inspect import gradcheck, gradcheck_parameters
from tests.attention.numpy_reference import assert_close, recorded, run, softmax

Q_DIM, K_DIM = 3, 2
# batch row 0 has a source of 3 words and one padding position; row 1 has 4 words
PADDING = np.array([[True, True, True, False], [True] * 4])[:, None, :]


def monotonic(window=1, dtype=np.float32):
    return LocalAttention(GeneralScore(Q_DIM, K_DIM, rng=np.random.default_rng(0)), window).astype(dtype)


def predictive(window=1, dtype=np.float32):
    rng = np.random.default_rng(0)
    return PredictiveLocalAttention(GeneralScore(Q_DIM, K_DIM, rng=rng), window, Q_DIM, 4, rng=rng).astype(dtype)


def inputs(rng, tq, dtype=np.float32):
    """Queries (2, tq, Q_DIM), keys (2, 4, K_DIM), values (2, 4, 5)."""
    return [rng.standard_normal(s).astype(dtype) for s in [(2, tq, Q_DIM), (2, 4, K_DIM), (2, 4, 5)]]


def reference(local, q, k, centres, mask):
    """a_t(s) = softmax(scores over the window [p_t − D, p_t + D] ∩ allowed) · exp(−(s − p_t)² / 2(D/2)²)."""
    scores = q @ local.score.weight.data @ k.swapaxes(-1, -2)
    positions, window = np.arange(k.shape[-2]), local.window
    weights = np.zeros(scores.shape)
    for b, t in np.ndindex(scores.shape[:2]):
        inside = (np.abs(positions - centres[b, t]) <= window) & mask[b, 0]
        gaussian = np.exp(-(positions - centres[b, t]) ** 2 / (2 * (window / 2) ** 2))
        weights[b, t] = softmax(scores[b, t], inside) * gaussian
    return weights


def test_local_m_centres_on_the_query_position_and_cuts_the_window_at_the_edges(rng):
    local = monotonic(window=1)
    q, k, v = inputs(rng, tq=6)
    context, weights = run(local, query=q, keys=k, values=v, mask=PADDING)
    expected = reference(local, *(x.astype(np.float64) for x in (q, k)), np.tile(np.arange(6.0), (2, 1)), PADDING)
    assert_close(weights, expected)
    assert_close(context, expected @ v)
    # row 1 (no padding): query t sees the existing positions of [t − 1, t + 1]; t = 5 sees nothing
    np.testing.assert_array_equal(weights[1] > 0, np.abs(np.arange(4) - np.arange(6)[:, None]) <= 1)
    # row 0: position 3 is padding, so t = 4 and t = 5 see nothing: zero weights and context
    assert not weights[0, 4:].any() and not context[0, 4:].any()
    # the Gaussian is not renormalized: a full window of 3 sums to less than 1
    assert np.all(weights[1, 1:3].sum(-1) < 1)


def test_local_p_predicts_the_centre_within_the_unpadded_source(rng):
    local = predictive(window=1)
    q, k, v = inputs(rng, tq=3)
    context, weights = run(local, query=q, keys=k, values=v, mask=PADDING)
    q64 = q.astype(np.float64)
    lengths = PADDING.sum(-1)
    centres = lengths / (1 + np.exp(-np.tanh(q64 @ local.w_p.weight.data) @ local.v_p.data))
    expected = reference(local, q64, k.astype(np.float64), centres, PADDING)
    assert_close(weights, expected)
    assert_close(context, expected @ v)


def test_decoding_one_step_at_a_time_gives_the_whole_sequence(rng):
    local = monotonic(window=1)
    q, k, _ = inputs(rng, tq=6)
    _, weights = run(local, query=q, keys=k, mask=PADDING)
    step = ag.trace(lambda q, k: local(q, k, mask=PADDING, step=3)[1], q=q[:, 3:4], k=k).compile()
    # Same window and zeros exactly, values to a few float32 ulps: the score's product of one query row and
    # the same row inside a 6-row product round differently in OpenBLAS (NumPy's own q[3:4] @ W differs from
    # (q @ W)[3:4] in the last bit as well), so the two paths cannot be bit-identical.
    np.testing.assert_allclose(step(q=q[:, 3:4], k=k), weights[:, 3:4], rtol=1e-6, atol=0)


@pytest.mark.parametrize("make", [monotonic, predictive])
def test_gradients_with_fully_masked_windows(make, rng):
    local = make(window=2, dtype=np.float64)
    q, k, v = inputs(rng, tq=6, dtype=np.float64)

    def loss(q, k, v):
        return ag.sum(ag.tanh(local(q, k, v, mask=PADDING)[0]))

    _, grads = ag.value_and_grad(loss, argnums=(0, 1, 2))(q, k, v)
    assert all(np.isfinite(g).all() for g in grads)
    gradcheck(loss, q, k, v).raise_if_failed()
    gradcheck_parameters(loss, local, q, k, v).raise_if_failed()


def test_weights_are_recorded_under_the_module_scope(rng):
    local = predictive()
    q, k, _ = inputs(rng, tq=3)
    names = recorded(local, query=q, keys=k, mask=PADDING)
    assert list(names) == ["attention"]
    np.testing.assert_array_equal(names["attention"], run(local, query=q, keys=k, mask=PADDING)[1])
