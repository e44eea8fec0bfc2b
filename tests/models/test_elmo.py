"""ELMo: the scalar mix is γ Σ softmax(w)_j h_j, each LM direction sees only its own side of the target, padding
does not reach the real tokens, and the biLM learns counting sequences in both directions."""
import numpy as np
import pytest

import attngraph as ag
from attngraph import models
from attngraph.models.elmo import bidirectional_loss
from attngraph.train import Adam


def run(fn, **inputs):
    return ag.trace(fn, **inputs).compile()(**inputs)


@pytest.mark.parametrize("layer_norm", [False, True])
def test_scalar_mix_is_gamma_times_the_softmax_weighted_sum_of_the_layers(rng, layer_norm):
    layers = [rng.standard_normal((2, 3, 5)).astype(np.float32) * (j + 1) + j for j in range(3)]
    mix = ag.nn.ScalarMix(3, layer_norm=layer_norm)
    mix.weights.data = np.array([0.5, -1.0, 2.0], np.float32)
    mix.gamma.data = np.array([1.5], np.float32)
    got = run(lambda h0, h1, h2: mix([h0, h1, h2]), h0=layers[0], h1=layers[1], h2=layers[2])

    if layer_norm:
        layers = [(h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5) for h in layers]
    s = np.exp([0.5, -1.0, 2.0]) / np.exp([0.5, -1.0, 2.0]).sum()
    np.testing.assert_allclose(got, 1.5 * sum(s_j * h for s_j, h in zip(s, layers)), rtol=1e-5, atol=1e-6)


def test_scalar_mix_starts_as_the_mean_and_refuses_a_wrong_number_of_layers(rng):
    layers = rng.standard_normal((2, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(run(lambda a, b: ag.nn.ScalarMix(2)([a, b]), a=layers[0], b=layers[1]),
                               layers.mean(0), rtol=1e-6)
    with pytest.raises(ag.ShapeError, match="got 1 layers"):
        ag.trace(lambda a: ag.nn.ScalarMix(2)([a]), a=layers[0])


def logits(model, tokens):
    return run(model, tokens=tokens)


def test_each_direction_sees_only_its_side_of_the_target(rng):
    model = models.get("elmo", tiny=True)
    logits_of = ag.trace(model, tokens=ag.Input((2, 8), "int64")).compile()
    tokens = rng.integers(4, 12, (2, 8))
    forward, backward = logits_of(tokens=tokens)
    for k in range(1, 7):
        left, right = tokens.copy(), tokens.copy()
        left[:, :k] = 15 - tokens[:, :k]
        right[:, k + 1:] = 15 - tokens[:, k + 1:]
        # backward_logits[:, j] predicts token j − 1 from tokens j …: unchanged for j ≥ k, changed at k − 1
        changed = logits_of(tokens=left)[1]
        np.testing.assert_allclose(changed[:, k:], backward[:, k:], rtol=1e-6)
        assert not np.allclose(changed[:, k - 1], backward[:, k - 1])
        # forward_logits[:, j] predicts token j + 1 from tokens … j: unchanged for j ≤ k, changed at k + 1
        changed = logits_of(tokens=right)[0]
        np.testing.assert_allclose(changed[:, :k + 1], forward[:, :k + 1], rtol=1e-6)
        assert not np.allclose(changed[:, k + 1], forward[:, k + 1])


def test_padding_at_the_end_leaves_the_real_positions_as_without_it():
    model = models.get("elmo", tiny=True)
    short = np.array([[5, 6, 7, 8, 9]])
    padded = np.pad(short, [(0, 0), (0, 3)])
    for got, expected in zip(logits(model, padded), logits(model, short)):
        np.testing.assert_allclose(got[:, :5], expected, rtol=1e-5, atol=1e-6)


def test_representations_are_the_embedding_twice_then_both_directions_of_each_layer(rng):
    model = models.get("elmo", tiny=True)
    tokens = rng.integers(4, 12, (2, 8))
    layers = run(model.representations, tokens=tokens)
    assert len(layers) == 3 and all(h.shape == (2, 8, 16) for h in layers)
    embedded = model.embed.weight.data[tokens]
    np.testing.assert_array_equal(layers[0], np.concatenate([embedded, embedded], -1))
    w, b = model.softmax.weight.data, model.softmax.bias.data
    forward, backward = logits(model, tokens)
    np.testing.assert_allclose(layers[-1][..., :8] @ w + b, forward, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(layers[-1][..., 8:] @ w + b, backward, rtol=1e-5, atol=1e-5)


def test_the_bidirectional_lm_learns_counting_in_both_directions():
    spec = models.spec("elmo")
    model = models.get("elmo", tiny=True, dim=16)
    train, held_out = spec.batch(model, np.random.default_rng(0), 32), spec.batch(model, np.random.default_rng(1), 32)
    loss = ag.trace(lambda tokens: bidirectional_loss(model, tokens), **train)
    step, evaluate = loss.grad().compile(), loss.compile()
    before = float(evaluate(**held_out))
    optimizer = Adam([node.value for node in loss.parameters.values()], lr=5e-2)
    for _ in range(60):
        _, *grads = step(**train)
        optimizer.step(grads)
    after = float(evaluate(**held_out))
    assert before > 2 * np.log(7)            # two near-uniform guesses among the 8 ordinary tokens
    assert after < 0.3 * before, (before, after)


class Tagger(ag.Module):
    """The module docstring's downstream model: its own mix of the frozen biLM's layers, and a linear head."""

    def __init__(self, elmo, tags):
        super().__init__()
        self.elmo, self.mix = elmo, ag.nn.ScalarMix(elmo.layers + 1)
        self.out = ag.nn.Linear(2 * elmo.dim, tags)

    def forward(self, tokens):
        return self.out(self.mix(ag.stop_gradient(h) for h in self.elmo.representations(tokens)))


def test_a_downstream_heads_gradients_reach_its_mix_and_not_the_frozen_bilm(rng):
    tagger = Tagger(models.get("elmo", tiny=True), 2)
    tokens = rng.integers(4, 12, (4, 8))
    loss = ag.trace(lambda tokens, tags: ag.cross_entropy(tagger(tokens), tags), tokens=tokens, tags=tokens % 2)
    _, *grads = loss.grad().compile()(tokens=tokens, tags=tokens % 2)
    moved = {name for name, g in zip(loss.parameters, grads) if np.any(g != 0)}
    assert moved == {"mix.weights", "mix.gamma", "out.weight", "out.bias"}


def test_a_symbolic_length_gives_the_logits_of_a_concrete_one(rng):
    model = models.get("elmo", tiny=True)
    tokens = rng.integers(4, 12, (2, 8))
    graph = ag.trace(model, tokens=ag.Input(("B", "T"), "int64"))
    assert sum(node.op == "scan" for node in graph.nodes) == 2 * model.layers
    for got, expected in zip(graph.compile()(tokens=tokens), logits(model, tokens)):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    for got, expected in zip(graph.compile()(tokens=tokens[:, :5]), logits(model, tokens[:, :5])):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
