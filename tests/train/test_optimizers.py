"""Optimizer classes: parameters and their order, skipped gradients, state for checkpoints, clipping and
gradient accumulation."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.nn import Linear, Parameter
from attngraph.train import SGD, Adam, AdamW, GradientAccumulator, clip_factor, clip_grad_norm, global_norm


def params(*arrays):
    return [Parameter(np.array(a, np.float32)) for a in arrays]


def test_parameters_come_from_a_module_pairs_or_a_list(regression):
    model = regression.model()
    model[0].bias.trainable = False
    assert Adam(model).names == ["0.weight", "2.weight", "2.bias"]
    a, b = params([1.0], [2.0])
    assert SGD([("a", a), ("b", b)], lr=0.1).names == ["a", "b"]
    assert SGD([a, b], lr=0.1).names == ["0", "1"]
    with pytest.raises(ValueError, match="distinct"):
        SGD([a, a], lr=0.1)
    with pytest.raises(TypeError, match="Parameters"):
        SGD([np.zeros(2)], lr=0.1)


def test_step_updates_in_place_and_skips_missing_gradients():
    a, b = params([1.0, 2.0], [3.0])
    optimizer = SGD([a, b], lr=0.5, momentum=0.9)
    buffer_b = optimizer.state["momentum_buffer"][1]
    optimizer.step([np.array([1.0, -1.0], np.float32), None])
    np.testing.assert_array_equal(a.data, [0.5, 2.5])
    np.testing.assert_array_equal(b.data, [3.0])
    np.testing.assert_array_equal(buffer_b, [0.0])
    assert optimizer.steps == 1
    with pytest.raises(ValueError, match="2 gradients for 1|1 gradients for 2"):
        optimizer.step([None])
    with pytest.raises(ValueError, match="shape"):
        optimizer.step([np.zeros(3, np.float32), None])
    assert optimizer.steps == 1


def test_scale_multiplies_the_gradient_without_writing_it():
    a, b = params([1.0, 2.0], [1.0, 2.0])
    g = np.array([0.5, -0.25], np.float32)
    Adam([a], lr=0.1, weight_decay=0.1).step([g], scale=0.5)
    Adam([b], lr=0.1, weight_decay=0.1).step([0.5 * g])
    np.testing.assert_array_equal(a.data, b.data)
    np.testing.assert_array_equal(g, [0.5, -0.25])


def test_state_dict_round_trip_continues_exactly(rng):
    grads = [[rng.standard_normal(3).astype(np.float32)] for _ in range(4)]
    (a,) = params([1.0, 2.0, 3.0])
    whole = AdamW([("w", a)], lr=0.1)
    for g in grads:
        whole.step(g)
    (b,) = params([1.0, 2.0, 3.0])
    first = AdamW([("w", b)], lr=0.1)
    for g in grads[:2]:
        first.step(g)
    state = first.state_dict()
    assert sorted(state) == ["betas", "eps", "lr", "m/w", "steps", "v/w", "weight_decay"] and int(state["steps"]) == 2
    second = AdamW([("w", b)], lr=5.0, betas=(0.5, 0.5), eps=1.0, weight_decay=0.0)
    second.load_state_dict(state)           # the hyper-parameters too, as PyTorch restores its param_groups
    assert second.config() == first.config()
    for g in grads[2:]:
        second.step(g)
    np.testing.assert_array_equal(a.data, b.data)


def test_load_state_dict_lists_every_difference_and_changes_nothing():
    (a,) = params([1.0, 2.0])
    optimizer = Adam([("w", a)])
    before = optimizer.state_dict()
    bad = {"steps": np.asarray(5), "m/w": np.zeros(3, np.float32), "momentum_buffer/w": np.zeros(2, np.float32)}
    with pytest.raises(ag.CheckpointError) as error:
        optimizer.load_state_dict(bad)
    message = str(error.value)
    assert "missing: v/w" in message and "unexpected: momentum_buffer/w" in message and "missing: lr" in message
    assert "m/w: expected (2,) float32, got (3,) float32" in message
    assert optimizer.steps == 0
    for key, value in optimizer.state_dict().items():
        np.testing.assert_array_equal(value, before[key])


def test_config_and_repr():
    (a,) = params([1.0])
    optimizer = SGD([a], lr=0.1, momentum=0.9, nesterov=True)
    assert optimizer.config() == {"type": "SGD", "lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.0}
    assert repr(optimizer) == "SGD(1 parameters, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.0)"
    assert AdamW([a]).config()["weight_decay"] == 0.01
    with pytest.raises(ValueError, match="Nesterov"):
        SGD([a], lr=0.1, nesterov=True)


def test_clip_grad_norm_scales_down_to_the_maximum_only():
    grads = [np.array([3.0], np.float32), None, np.array([[4.0]], np.float32)]
    assert global_norm(grads) == 5.0
    assert clip_grad_norm(grads, max_norm=10.0) == 5.0
    assert grads[0][0] == 3.0
    assert clip_grad_norm(grads, max_norm=1.0) == 5.0
    np.testing.assert_allclose([grads[0][0], grads[2][0, 0]], [0.6, 0.8], rtol=1e-6)
    assert global_norm(grads) == pytest.approx(1.0, rel=1e-6)
    assert clip_factor(0.5, 1.0) == 1.0 and clip_factor(4.0, 1.0) == pytest.approx(0.25)


def test_gradient_accumulation_equals_one_step_on_the_whole_batch(rng):
    layer = Linear(3, 2)
    x = ag.Input(("B", 3))
    graph = ag.trace(lambda x, y: ag.mean((layer(x) - y) ** 2), x=x, y=ag.Input(("B", 2))).grad()
    step = graph.compile()
    xs, ys = rng.standard_normal((8, 3)).astype(np.float32), rng.standard_normal((8, 2)).astype(np.float32)
    start = {name: p.data.copy() for name, p in layer.named_parameters()}
    names = [name.removeprefix("grad:") for name in graph.output_names[1:]]

    _, *whole = step(x=xs, y=ys)
    SGD([(n, getattr(layer, n)) for n in names], lr=0.1).step(whole)
    after_whole = {name: p.data.copy() for name, p in layer.named_parameters()}

    layer.load_state_dict(start)
    accumulator = GradientAccumulator()
    _, *first = step(x=xs[:4], y=ys[:4])
    kept = [g.copy() for g in first]
    accumulator.add(first)
    accumulator.add(step(x=xs[4:], y=ys[4:])[1:])
    SGD([(n, getattr(layer, n)) for n in names], lr=0.1).step(accumulator.grads, scale=1 / accumulator.count)
    for name, p in layer.named_parameters():
        np.testing.assert_allclose(p.data, after_whole[name], rtol=1e-6, atol=1e-7)
    for g, copy in zip(first, kept):            # the first micro-batch's arrays are copied, not summed into
        np.testing.assert_array_equal(g, copy)
    accumulator.reset()
    assert accumulator.grads is None and accumulator.count == 0
