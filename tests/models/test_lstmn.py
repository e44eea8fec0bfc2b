"""LSTMN: its recurrence equals a NumPy transcription of the paper's equations, its intra-attention weights sum to
one over the tape of earlier real steps (and are read back as "attention"), padding is invisible, and the
classifier learns the keyword task."""
import numpy as np
import pytest

import attngraph as ag
from attngraph import models
from attngraph.inspect.attention import attention_maps
from attngraph.models.lstmn import LSTMN
from attngraph.train import Adam


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def reference(layer: LSTMN, x: np.ndarray):
    """States h_t, c_t and weights s^t of Cheng et al. (2016), section 3.1, step by step over a growing tape."""
    p = {name: value.astype(np.float64) for name, value in layer.state_dict().items()}
    batch, length, _ = x.shape
    hs, cs, weights = [], [], np.zeros((batch, length, length))
    summary = c_summary = np.zeros((batch, layer.hidden_size))
    for t in range(length):
        if t:
            tape_h, tape_c = np.stack(hs, 1), np.stack(cs, 1)                      # h_i, c_i for i < t
            a = np.tanh(tape_h @ p["w_h.weight"] + p["w_h.bias"]
                        + (x[:, t] @ p["w_x.weight"] + summary @ p["w_summary.weight"])[:, None]) @ p["v"]
            s = np.exp(a - a.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            weights[:, t, :t] = s
            summary, c_summary = np.einsum("bi,bih->bh", s, tape_h), np.einsum("bi,bih->bh", s, tape_c)
        gates = x[:, t] @ p["cell.input.weight"] + p["cell.input.bias"] + summary @ p["cell.hidden.weight"]
        i, f, g, o = np.split(gates, 4, axis=-1)
        cs.append(sigmoid(f) * c_summary + sigmoid(i) * np.tanh(g))
        hs.append(sigmoid(o) * np.tanh(cs[-1]))
    return np.stack(hs, 1), (hs[-1], cs[-1]), weights


@pytest.fixture
def layer():
    return LSTMN(3, 4, 5, rng=np.random.default_rng(0))


def run(layer, x, mask=None):
    inputs = dict(x=x) if mask is None else dict(x=x, mask=mask)
    graph = ag.trace(layer, **inputs)
    return graph.compile()(**inputs), attention_maps(graph, **inputs)


def test_the_recurrence_equals_the_papers_equations(layer, rng):
    x = rng.standard_normal((2, 6, 3)).astype(np.float32)
    (states, h, c, weights), _ = run(layer, x)
    expected_states, (expected_h, expected_c), expected_weights = reference(layer, x.astype(np.float64))
    np.testing.assert_allclose(states, expected_states, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h, expected_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c, expected_c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-5, atol=1e-6)


def test_weights_sum_to_one_over_the_earlier_steps_and_are_read_back_as_attention(layer, rng):
    x = rng.standard_normal((2, 6, 3)).astype(np.float32)
    (states, _, _, weights), maps = run(layer, x)
    np.testing.assert_array_equal(weights[np.broadcast_to(~np.tri(6, k=-1, dtype=bool), weights.shape)], 0)
    np.testing.assert_allclose(weights.sum(-1), np.broadcast_to([0, 1, 1, 1, 1, 1], (2, 6)), rtol=1e-6)
    np.testing.assert_array_equal(maps[""], weights)                 # one map: the scan's (B, T, T) rows

    later = x.copy()
    later[:, 3:] += 1                                                  # steps 3 … change: 0 … 2 do not
    (changed, *_), _ = run(layer, later)
    np.testing.assert_allclose(changed[:, :3], states[:, :3], rtol=1e-6)
    assert not np.allclose(changed[:, 3], states[:, 3])


def test_padded_steps_are_neither_read_nor_attended_to(layer, rng):
    x = rng.standard_normal((1, 6, 3)).astype(np.float32)
    (states, h, c, weights), _ = run(layer, x[:, :4])
    padded = x.copy()
    padded[:, 4:] = 100                                                # garbage at the padded steps
    mask = np.array([[True] * 4 + [False] * 2])
    (padded_states, padded_h, padded_c, padded_weights), _ = run(layer, padded, mask)
    np.testing.assert_allclose(padded_states[:, :4], states, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(padded_states[:, 4:], 0)
    np.testing.assert_allclose(padded_h, h, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(padded_c, c, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(padded_weights[:, :4, :4], weights, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(padded_weights[:, 4:], 0)
    np.testing.assert_array_equal(padded_weights[:, :, 4:], 0)


def test_a_symbolic_length_is_refused(layer):
    with pytest.raises(ag.ShapeError, match="concrete length"):
        ag.trace(layer, x=ag.Input(("B", "T", 3)))


def test_the_classifier_learns_to_find_the_keyword():
    spec = models.spec("lstmn")
    model = models.get("lstmn", tiny=True, embed_dim=16, hidden=16, attention_dim=16)
    rng = np.random.default_rng(0)
    held_out = spec.batch(model, np.random.default_rng(1), 64)
    loss = ag.trace(lambda **b: spec.loss(model, **b), **spec.batch(model, rng, 32))
    step = loss.grad().compile()
    predict = ag.trace(model, tokens=held_out["tokens"]).compile()
    assert (predict(tokens=held_out["tokens"]).argmax(-1) == held_out["labels"]).mean() < 0.75
    optimizer = Adam([node.value for node in loss.parameters.values()], lr=3e-2)
    for _ in range(30):         # a fresh batch each step: it generalizes from any initialization (six tried)
        _, *grads = step(**spec.batch(model, rng, 32))
        optimizer.step(grads)
    assert (predict(tokens=held_out["tokens"]).argmax(-1) == held_out["labels"]).mean() >= 0.9
