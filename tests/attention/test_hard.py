"""Hard attention (Xu et al. 2015): seeded sampling, the REINFORCE surrogate and its expectation, the
moving-average baseline, and the module's sampled context."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.attention import GeneralScore, HardAttention, MovingAverageBaseline, reinforce_loss, sample
from attngraph.inspect import gradcheck, gradcheck_parameters
from tests.attention.numpy_reference import assert_close, recorded, run, softmax

PADDING = np.array([[True, True, True, False, False], [True] * 5])[:, None, :]


def test_sampling_is_reproducible_and_follows_the_weights():
    weights = np.tile([0.1, 0.0, 0.6, 0.3], (20000, 1))
    locations = sample(weights, np.random.default_rng(7))
    np.testing.assert_array_equal(locations, sample(weights, np.random.default_rng(7)))
    assert not np.array_equal(locations, sample(weights, np.random.default_rng(8)))
    np.testing.assert_allclose(np.bincount(locations, minlength=4) / len(locations), weights[0], atol=0.01)
    assert sample(np.ones((2, 3, 5)) / 5, np.random.default_rng(0)).shape == (2, 3)


def test_a_fully_masked_row_cannot_be_sampled():
    with pytest.raises(ValueError, match="sums to 0"):
        sample(np.array([[0.5, 0.5], [0.0, 0.0]]), np.random.default_rng(0))


@pytest.mark.parametrize("baseline", [0.0, 0.5])
def test_the_reinforce_gradient_is_the_gradient_of_the_expected_reward_on_average(baseline):
    """E[R] = Σ_k p_k R_k with p = softmax(θ) has gradient p ∘ (R − E[R]); the surrogate's gradient, averaged
    over 20000 samples, is its Monte Carlo estimate (standard error 0.0025), with or without a baseline."""
    logits, reward = np.array([0.5, -1.0, 0.0, 1.0]), np.array([1.0, 0.2, -0.5, 0.3])
    p = softmax(logits)
    n = 20000
    locations = sample(np.broadcast_to(p, (n, 4)), np.random.default_rng(0))

    def surrogate(logits, locations, reward):
        return reinforce_loss(ag.softmax(ag.broadcast_to(logits, (n, 4))), locations, reward, baseline)

    _, grad = ag.value_and_grad(surrogate)(logits, locations, reward[locations])
    np.testing.assert_allclose(-grad, p * (reward - p @ reward), atol=0.012)


def test_the_surrogate_loss_matches_its_formula_with_masked_locations(rng):
    scores = rng.standard_normal((3, 4))
    mask = np.array([[True, True, True, False], [True] * 4, [False, True, True, False]])
    locations, reward, baseline, entropy_weight = np.array([0, 3, 2]), np.array([1.0, -0.5, 2.0]), 0.3, 0.1

    def surrogate(scores, reward):
        return reinforce_loss(ag.softmax(scores, mask=mask), locations, reward, baseline, entropy_weight)

    weights = softmax(scores, mask)
    entropy = -np.sum(weights * np.log(np.where(mask, weights, 1)), -1)
    expected = np.mean(-(reward - baseline) * np.log(weights[range(3), locations]) - entropy_weight * entropy)
    value, (grad, reward_grad) = ag.value_and_grad(surrogate, argnums=(0, 1))(scores, reward)
    np.testing.assert_allclose(value, expected, rtol=1e-12)
    assert np.isfinite(grad).all() and not grad[~mask].any()
    assert not reward_grad.any()                                      # the reward is held constant
    gradcheck(surrogate, scores, reward, argnums=[0]).raise_if_failed()


def test_moving_average_baseline():
    baseline = MovingAverageBaseline()
    assert baseline.update(1.0) == pytest.approx(0.1)
    assert baseline.update(np.array([1.0, 3.0])) == pytest.approx(0.9 * 0.1 + 0.1 * 2.0)
    assert baseline.value == pytest.approx(0.29)


def test_a_training_loop_learns_to_attend_to_the_rewarded_location():
    """Sample from α, reward location 2, step down the surrogate's gradient, update the baseline."""
    n, rng, baseline = 64, np.random.default_rng(0), MovingAverageBaseline()

    def surrogate(logits, locations, reward, b):
        weights = ag.softmax(ag.broadcast_to(logits, (n, 4)))
        return reinforce_loss(weights, locations, reward, b, entropy_weight=0.01)

    step, logits = ag.value_and_grad(surrogate), np.zeros(4)
    for _ in range(30):
        locations = sample(np.broadcast_to(softmax(logits), (n, 4)), rng)
        reward = (locations == 2).astype(np.float64)
        _, grad = step(logits, locations, reward, np.float64(baseline.value))
        logits -= 5.0 * grad
        baseline.update(reward)
    assert softmax(logits)[2] > 0.9 and 0.5 < baseline.value < 1


def hard_attention(dtype=np.float32):
    return HardAttention(GeneralScore(3, 2, rng=np.random.default_rng(0))).astype(dtype)


def inputs(rng, dtype=np.float32):
    """Queries (2, 3, 3), keys (2, 5, 2), values (2, 5, 4)."""
    return [rng.standard_normal(s).astype(dtype) for s in [(2, 3, 3), (2, 5, 2), (2, 5, 4)]]


def test_the_context_is_the_sampled_value_or_the_expectation(rng):
    attention = hard_attention()
    q, k, v = inputs(rng)
    expected_context, weights = run(attention, query=q, keys=k, values=v, mask=PADDING)
    scores = q.astype(np.float64) @ attention.score.weight.data @ k.swapaxes(-1, -2)
    assert_close(weights, softmax(scores, PADDING))
    assert_close(expected_context, weights @ v)
    locations = sample(weights, np.random.default_rng(0))
    context, _ = run(attention, query=q, keys=k, values=v, mask=PADDING, locations=locations)
    np.testing.assert_array_equal(context, np.take_along_axis(v, locations[..., None], 1))
    assert (locations[0] < 3).all()
    np.testing.assert_array_equal(recorded(attention, query=q, keys=k, mask=PADDING)["attention"], weights)


def test_gradients_of_the_sampled_context_and_the_surrogate(rng):
    attention = hard_attention(np.float64)
    q, k, v = inputs(rng, np.float64)
    locations, reward = np.array([[0, 2, 2], [4, 1, 0]]), rng.standard_normal((2, 3))
    projection = rng.standard_normal((2, 3, 4))

    def loss(q, k, v):
        """A reward computed in the graph would be held constant by the surrogate, which central
        differences cannot do: here it is a given array."""
        context, weights = attention(q, k, v, mask=PADDING, locations=locations)
        return ag.sum(context * projection) + reinforce_loss(weights, locations, reward, 0.2, entropy_weight=0.1)

    _, dv = ag.value_and_grad(loss, argnums=2)(q, k, v)
    assert not dv[0, [1, 3, 4]].any() and not dv[1, [2, 3]].any()     # only the sampled values are read
    gradcheck(loss, q, k, v).raise_if_failed()
    gradcheck_parameters(loss, attention, q, k, v).raise_if_failed()
