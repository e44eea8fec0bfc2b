"""SNAIL (Mishra et al. 2018): its blocks against NumPy references of the paper's equations, causality, and
few-shot classification learnt from episodes."""
import numpy as np

import attngraph as ag
from attngraph import models
from attngraph.models.snail import SNAIL, AttentionBlock, DenseBlock, TCBlock, episodes
from attngraph.train import Adam


def run(module, x):
    return ag.trace(module, x=ag.Input(x.shape)).compile()(x=x)


def causal_conv(x, w, b, dilation):
    """x (B, T, C), w (O, C, 2): y[t] = b + w[:, :, 0] x[t − d] + w[:, :, 1] x[t], x[t − d] = 0 before the start."""
    past = np.concatenate([np.zeros_like(x[:, :dilation]), x[:, :-dilation]], axis=1)
    return b + past @ w[:, :, 0].T + x @ w[:, :, 1].T


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def test_dense_block_is_the_gated_causal_convolution_concatenated_to_its_input():
    x = np.random.default_rng(0).standard_normal((2, 7, 3)).astype(np.float32)
    block = DenseBlock(3, 4, dilation=2)
    f, g = block.filter, block.gate
    z = np.tanh(causal_conv(x, f.weight.data, f.bias.data, 2)) * sigmoid(causal_conv(x, g.weight.data, g.bias.data, 2))
    np.testing.assert_allclose(run(block, x), np.concatenate([x, z], axis=2), rtol=1e-5, atol=1e-6)


def test_attention_block_reads_the_past_with_causal_softmax_attention():
    x = np.random.default_rng(1).standard_normal((2, 5, 3)).astype(np.float32)
    block = AttentionBlock(3, key_size=4, value_size=2)
    q, k, v = (x @ m.weight.data + m.bias.data for m in (block.query, block.key, block.value))
    scores = q @ k.transpose(0, 2, 1) / 2 + np.triu(np.full((5, 5), -np.inf), 1)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    read = weights / weights.sum(-1, keepdims=True) @ v
    np.testing.assert_allclose(run(block, x), np.concatenate([x, read], axis=2), rtol=1e-5, atol=1e-6)


def test_tc_block_dilations_double_until_the_last_step_sees_the_first():
    block = TCBlock(3, length=9, filters=2)
    assert [b.filter.dilation for b in block.blocks] == [(1,), (2,), (4,), (8,)] and block.out_channels == 3 + 4 * 2
    _, dx = ag.value_and_grad(lambda x: ag.sum(block(x)[:, -1]))(np.ones((1, 9, 3), np.float32))
    assert np.abs(dx[0, 0]).sum() > 0            # the receptive field spans the whole sequence


def test_the_logits_at_a_step_depend_on_no_later_step():
    model = models.get("snail", tiny=True)
    x = episodes(np.random.default_rng(2), 2, model.features, model.ways, model.shots)["x"]
    later = x.copy()
    later[:, 3:] += 1.0
    logits, changed = run(model, x), run(model, later)
    np.testing.assert_array_equal(changed[:, :3], logits[:, :3])
    assert not np.allclose(changed[:, 3:], logits[:, 3:])


def test_episodes_show_labelled_support_examples_then_an_unlabelled_query():
    data = episodes(np.random.default_rng(3), 4, features=3, ways=2, shots=2)
    x, labels = data["x"], data["labels"]
    assert x.shape == (4, 5, 5) and labels.shape == (4,)
    np.testing.assert_array_equal(x[:, :4, 3:].sum(-1), 1)      # one-hot labels, each class shown twice
    np.testing.assert_array_equal(x[:, :4, 3:].sum(1), 2)
    np.testing.assert_array_equal(x[:, 4, 3:], 0)


def test_snail_learns_few_shot_classification_from_episodes():
    """Which label names which class is drawn anew per episode: only looking back at the support set helps
    (chance is 1/2)."""
    model = SNAIL(features=8, ways=2, shots=2, key_size=8, value_size=8, filters=8, rng=np.random.default_rng(4))
    rng = np.random.default_rng(5)
    batch = episodes(rng, 32, 8, 2, 2)
    loss = ag.trace(lambda **b: models.snail.loss(model, **b), **batch)
    step = loss.grad().compile()
    optimizer = Adam([node.value for node in loss.parameters.values()], lr=1e-2)
    for _ in range(60):
        _, *grads = step(**episodes(rng, 32, 8, 2, 2))
        optimizer.step(grads)
    test = episodes(np.random.default_rng(6), 400, 8, 2, 2)
    accuracy = (run(model, test["x"])[:, -1].argmax(-1) == test["labels"]).mean()
    assert accuracy > 0.9, accuracy
