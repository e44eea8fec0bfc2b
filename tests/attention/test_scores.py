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


def unit(x, eps):
    """x / max(‖x‖, ε): torch.nn.functional.cosine_similarity normalizes each vector so."""
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), eps)


def cosine(s, q, k):
    """β q̂ · k̂, β a parameter or a fixed number."""
    return getattr(s.beta, "data", s.beta) * unit(q, s.eps) @ unit(k, s.eps).swapaxes(-1, -2)


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


def zero_rows(rng):
    """Queries (2, 3, Q_DIM) and keys (2, 5, Q_DIM) in float64 with zero vectors among them, and a tiny one
    (norm below ε) among the keys."""
    q, k = inputs(rng, Q_DIM, np.float64)
    q[0, 1] = 0
    q[1, :] = 0
    k[0, 2] = 0
    k[1, 4] = 1e-10
    return q, k


def test_cosine_score_of_zero_vectors_is_zero_with_the_gradients_of_pytorch(rng):
    """d/dq_i Σ_j P_ij β q̂_i·k̂_j is β Σ_j P_ij k̂_j / max(‖q_i‖, ε) plus, where ‖q_i‖ > ε, the term through
    the norm; for a zero (or tiny) vector that term is 0, as in PyTorch."""
    score = CosineScore(beta=1.5, eps=1e-8).astype(np.float64)
    q, k = zero_rows(rng)
    projection = rng.standard_normal((2, 3, 5))
    value, (dq, dk) = ag.value_and_grad(lambda q, k: ag.sum(score(q, k) * projection), argnums=(0, 1))(q, k)
    scores = run(score, q=q, k=k)
    np.testing.assert_allclose(scores, cosine(score, q, k), rtol=1e-12, atol=1e-15)
    assert not scores[0, 1].any() and not scores[1].any() and not scores[0, :, 2].any()
    assert np.isfinite(dq).all() and np.isfinite(dk).all()
    np.testing.assert_allclose(value, np.sum(cosine(score, q, k) * projection), rtol=1e-12)
    # a zero query: only the direct term, k̂ / ε
    np.testing.assert_allclose(dq[1], 1.5 * projection[1] @ unit(k[1], 1e-8) / 1e-8, rtol=1e-10)
    np.testing.assert_allclose(dq[0, 1], 1.5 * projection[0, 1] @ unit(k[0], 1e-8) / 1e-8, rtol=1e-10)
    # the zero key gets the queries' direct term alone
    np.testing.assert_allclose(dk[0, 2], 1.5 * projection[0, :, 2] @ unit(q[0], 1e-8) / 1e-8, rtol=1e-10)


def test_cosine_score_matches_pytorch_values_and_gradients(rng):
    torch = pytest.importorskip("torch")
    score = CosineScore(beta=1.5, eps=1e-8).astype(np.float64)
    q, k = zero_rows(rng)
    projection = rng.standard_normal((2, 3, 5))
    value, grads = ag.value_and_grad(lambda q, k: ag.sum(score(q, k) * projection), argnums=(0, 1))(q, k)
    tq, tk = torch.tensor(q, requires_grad=True), torch.tensor(k, requires_grad=True)
    expected = 1.5 * torch.nn.functional.cosine_similarity(tq[:, :, None], tk[:, None], dim=-1, eps=1e-8)
    (expected * torch.tensor(projection)).sum().backward()
    np.testing.assert_allclose(run(score, q=q, k=k), expected.detach().numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(grads[0], tq.grad.numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(grads[1], tk.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_cosine_score_is_finite_in_float32_for_zero_vectors(rng):
    score = CosineScore(beta=2.0, learn_beta=True)
    q, k = (x.astype(np.float32) for x in zero_rows(rng))
    _, grads = ag.value_and_grad(lambda q, k: ag.sum(score(q, k) ** 2), argnums=(0, 1))(q, k)
    assert_close(run(score, q=q, k=k), cosine(score, q.astype(np.float64), k.astype(np.float64)))
    assert all(np.isfinite(g).all() for g in grads)
