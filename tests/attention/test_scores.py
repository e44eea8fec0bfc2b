"""Every score function against its formula in NumPy, and its gradients against central differences."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.attention import (AdditiveScore, ConcatScore, CosineScore, DotScore, GeneralScore, LocationScore,
                                 ScaledDotScore)
from attngraph.inspect import gradcheck, gradcheck_parameters
from tests.attention.numpy_reference import assert_close, run

Q_DIM, K_DIM, HIDDEN = 4, 3, 5


def additive(s, q, k):
    w1, w2, b, v = s.w_query.weight.data, s.w_key.weight.data, s.w_key.bias.data, s.v.data
    return np.tanh((q @ w1)[..., :, None, :] + (k @ w2 + b)[..., None, :, :]) @ v


def concat(s, q, k):
    """vᵀ tanh(W[q; k] + b), building every concatenation."""
    tq, tk = q.shape[-2], k.shape[-2]
    pairs = np.concatenate([np.repeat(q[..., :, None, :], tk, -2), np.repeat(k[..., None, :, :], tq, -3)], -1)
    return np.tanh(pairs @ s.w.weight.data + s.w.bias.data) @ s.v.data


def cosine(s, q, k):
    norms = np.linalg.norm(q, axis=-1)[..., :, None] * np.linalg.norm(k, axis=-1)[..., None, :]
    return s.beta.data * (q @ k.swapaxes(-1, -2)) / (norms + s.eps)


# name: (make the score, its key dimension, its formula in NumPy)
SCORES = {
    "dot": (lambda: DotScore(), Q_DIM, lambda s, q, k: q @ k.swapaxes(-1, -2)),
    "scaled_dot": (lambda: ScaledDotScore(), Q_DIM, lambda s, q, k: q @ k.swapaxes(-1, -2) / np.sqrt(Q_DIM)),
    "general": (lambda: GeneralScore(Q_DIM, K_DIM, rng=np.random.default_rng(0)), K_DIM,
                lambda s, q, k: q @ s.weight.data @ k.swapaxes(-1, -2)),
    "additive": (lambda: AdditiveScore(Q_DIM, K_DIM, HIDDEN, rng=np.random.default_rng(0)), K_DIM, additive),
    "concat": (lambda: ConcatScore(Q_DIM, K_DIM, HIDDEN, rng=np.random.default_rng(0)), K_DIM, concat),
    "cosine": (lambda: CosineScore(beta=2.5, learn_beta=True), Q_DIM, cosine),
    "location": (lambda: LocationScore(Q_DIM, max_length=7, rng=np.random.default_rng(0)), K_DIM,
                 lambda s, q, k: (q @ s.w.weight.data + s.w.bias.data)[..., : k.shape[-2]]),
}


def inputs(rng, key_dim, dtype=np.float32):
    """Queries (2, 3, Q_DIM) and keys (2, 5, key_dim): Tq ≠ Tk."""
    return rng.standard_normal((2, 3, Q_DIM)).astype(dtype), rng.standard_normal((2, 5, key_dim)).astype(dtype)


@pytest.mark.parametrize("name", SCORES)
def test_score_matches_its_formula(name, rng):
    make, key_dim, formula = SCORES[name]
    score = make()
    q, k = inputs(rng, key_dim)
    out = run(score, q=q, k=k)
    assert out.shape == (2, 3, 5)
    assert_close(out, formula(score, q.astype(np.float64), k.astype(np.float64)))


@pytest.mark.parametrize("name", SCORES)
def test_score_gradients(name, rng):
    make, key_dim, _ = SCORES[name]
    score = make().astype(np.float64)
    q, k = inputs(rng, key_dim, np.float64)
    projection = rng.standard_normal((2, 3, 5))

    def loss(q, k):
        return ag.sum(score(q, k) * projection)

    gradcheck(loss, q, k).raise_if_failed()
    if score.parameters():
        gradcheck_parameters(loss, score, q, k).raise_if_failed()


def test_location_score_needs_a_concrete_length_within_its_range():
    with pytest.raises(ValueError, match="concrete key length <= 7"):
        ag.trace(LocationScore(Q_DIM, max_length=7), q=ag.Input(("B", 1, Q_DIM)), k=ag.Input(("B", "T", K_DIM)))
    with pytest.raises(ValueError, match="<= 7"):
        ag.trace(LocationScore(Q_DIM, max_length=7), q=ag.Input((1, 1, Q_DIM)), k=ag.Input((1, 8, K_DIM)))
