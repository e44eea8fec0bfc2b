"""NTM content addressing (Graves et al. 2014) against its equations in NumPy, its limits (hard argmax read,
uniform read, identity sharpening), masking, and gradients."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.attention import ContentAddressing, ContentReadHead, sharpen
from attngraph.inspect import gradcheck
from tests.attention.numpy_reference import assert_close, recorded, run, softmax
from tests.conftest import run as run_fn

B, N, M = 2, 5, 3
MASK = np.array([[True, True, True, False, False], [True] * N])


def memory_inputs(rng, dtype=np.float32):
    key = rng.standard_normal((B, M)).astype(dtype)
    memory = rng.standard_normal((B, N, M)).astype(dtype)
    return key, memory


def cosine(key, memory):
    """K(k, M_i) = k·M_i / (‖k‖ ‖M_i‖), in float64."""
    key, memory = np.float64(key), np.float64(memory)
    return np.einsum("bm,bnm->bn", key, memory) / (
        np.linalg.norm(key, axis=-1)[:, None] * np.linalg.norm(memory, axis=-1))


def reference(key, memory, beta, gamma, mask=None):
    """w = softmax(β K(k, M)), w̃ = w^γ / Σ w^γ, r = Σ w̃_i M_i."""
    w = softmax(beta[:, None] * cosine(key, memory), mask)
    w = w ** gamma[:, None]
    w = w / w.sum(-1, keepdims=True)
    return np.einsum("bn,bnm->bm", w, memory), w


def test_read_and_weights_match_the_ntm_equations_with_masked_slots(rng):
    key, memory = memory_inputs(rng)
    beta, gamma = np.array([0.7, 4.0], np.float32), np.array([1.5, 3.0], np.float32)
    read, weights = run(ContentAddressing(), key=key, memory=memory, beta=beta, gamma=gamma, mask=MASK)
    expected_read, expected_weights = reference(key, memory, beta, gamma, MASK)
    assert_close(weights, expected_weights)
    assert_close(read, expected_read)
    assert (weights[0, 3:] == 0).all()
    np.testing.assert_allclose(weights.sum(-1), 1, rtol=1e-6)


def test_weights_are_recorded_for_heatmaps(rng):
    key, memory = memory_inputs(rng)
    beta = np.ones(B, np.float32)
    _, weights = run(ContentAddressing(), key=key, memory=memory, beta=beta)
    np.testing.assert_array_equal(recorded(ContentAddressing(), key=key, memory=memory, beta=beta)["attention"],
                                  weights)


def test_a_large_key_strength_reads_the_most_similar_row_and_zero_reads_the_mean(rng):
    key, memory = memory_inputs(rng)
    hard, weights = run(ContentAddressing(), key=key, memory=memory, beta=np.full(B, 1e4, np.float32))
    best = cosine(key, memory).argmax(-1)
    np.testing.assert_array_equal(weights.argmax(-1), best)
    assert_close(hard, memory[np.arange(B), best])
    uniform, _ = run(ContentAddressing(), key=key, memory=memory, beta=np.zeros(B, np.float32))
    assert_close(uniform, memory.mean(1))


def test_sharpening_with_gamma_one_is_the_identity(rng):
    weights = softmax(rng.standard_normal((B, N))).astype(np.float32)
    np.testing.assert_allclose(run_fn(sharpen, weights, np.ones(B, np.float32)), weights, rtol=1e-6, atol=1e-7)


def test_sharpening_matches_its_formula_and_survives_a_huge_exponent():
    weights = np.array([[0.5, 0.3, 0.2, 0.0], [0.1, 0.2, 0.3, 0.4]], np.float32)
    gamma = np.array([2.0, 3.0], np.float32)
    expected = weights.astype(np.float64) ** gamma[:, None]
    assert_close(run_fn(sharpen, weights, gamma), expected / expected.sum(-1, keepdims=True))
    # 0.5^500 underflows: the ratio computed as such would be 0/0, in log space it is the argmax
    np.testing.assert_array_equal(run_fn(sharpen, weights, np.full(2, 500, np.float32)), [[1, 0, 0, 0], [0, 0, 0, 1]])


def test_a_fully_masked_memory_reads_zeros_with_finite_gradients(rng):
    key, memory = memory_inputs(rng, np.float64)
    mask = np.array([[False] * N, [True] * N])
    args = key, memory, np.ones(B), np.full(B, 2.0), mask
    read, weights = run(ContentAddressing(), **dict(zip(["key", "memory", "beta", "gamma", "mask"], args)))
    assert (read[0] == 0).all() and (weights[0] == 0).all()
    report = gradcheck(lambda k, m, b, g, mask: ag.sum(ContentAddressing()(k, m, b, g, mask)[0] ** 2), *args)
    assert report.ok, report


def test_gradients_of_key_memory_strength_and_sharpening(rng):
    key, memory = memory_inputs(rng, np.float64)
    args = key, memory, np.array([0.5, 2.0]), np.array([1.0, 2.5])
    report = gradcheck(lambda k, m, b, g: ag.sum(ContentAddressing()(k, m, b, g)[0] * np.arange(1.0, M + 1)), *args)
    assert report.ok, report


def test_the_read_head_turns_controller_outputs_into_a_key_a_strength_and_a_sharpening(rng):
    head = ContentReadHead(4, M, rng=np.random.default_rng(0))
    h = rng.standard_normal((B, 4)).astype(np.float32)
    _, memory = memory_inputs(rng)
    read, weights = run(head, h=h, memory=memory)
    raw = h.astype(np.float64) @ head.params.weight.data + head.params.bias.data
    beta, gamma = np.log1p(np.exp(raw[:, M])), 1 + np.log1p(np.exp(raw[:, M + 1]))
    expected_read, expected_weights = reference(raw[:, :M], memory, beta, gamma)
    assert_close(weights, expected_weights)
    assert_close(read, expected_read)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="eps"):
        ContentAddressing(eps=0)
    with pytest.raises(ValueError, match="memory_dim"):
        ContentReadHead(4, 0)
