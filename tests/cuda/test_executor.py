"""Graphs compiled for "cuda" against the same graphs on "cpu": every primitive forward and backward,
device-resident parameters, outputs left on the device, debug mode."""
import numpy as np
import pytest

import attngraph as ag
from ops import _cuda
from ops.cuda import optim as cuda_optim
from tests.core.test_primitives import CASES, inputs
from tests.cuda.conftest import host

TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}          # float32, accumulated in different orders


def graph_of(fn, arrays):
    return ag.trace(lambda **xs: fn(*xs.values()), **{f"x{i}": a for i, a in enumerate(arrays)})


def feeds(arrays):
    return {f"x{i}": a for i, a in enumerate(arrays)}


def assert_same_on_both(graph, **inputs):
    cpu, cuda = graph.compile("cpu")(**inputs), graph.compile("cuda")(**inputs)
    for want, got in zip(*((x,) if len(graph.outputs) == 1 else x for x in (cpu, cuda))):
        assert isinstance(got, np.ndarray) and got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, **TOLERANCE)


@pytest.mark.parametrize("case", CASES)
def test_every_primitive_case_forward_and_backward(case, rng):
    fn = CASES[case][0]
    arrays = inputs(case, rng, np.float32)
    assert_same_on_both(graph_of(fn, arrays), **feeds(arrays))
    weights = np.random.default_rng(7).standard_normal(np.shape(graph_of(fn, arrays).compile()(**feeds(arrays))))
    objective = graph_of(lambda *xs: ag.sum(fn(*xs) * weights.astype(np.float32)), arrays)
    assert_same_on_both(objective.grad(wrt=list(feeds(arrays))), **feeds(arrays))


def test_integer_and_boolean_primitives(rng):
    tokens, targets = rng.integers(0, 5, (2, 3)), np.array([[0, 4, -1], [2, -1, 1]])

    def fn(table, logits, tokens, targets):
        positions = ag.arange(tokens, axis=1)
        distance = ag.relative_distance(logits, logits, 1)
        picked = ag.embedding(table, tokens) + ag.embedding(table, positions)
        keep = ag.logical_and(ag.greater(logits, 0.0), ag.logical_not(ag.less_equal(logits, -1.0)))
        return (ag.cross_entropy(logits, targets, ignore_index=-1), picked, keep, distance,
                ag.where(keep, logits, 0.0).astype("float64"))
    arrays = [rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((2, 3, 5)).astype(np.float32),
              tokens, targets]
    assert_same_on_both(graph_of(fn, arrays), **feeds(arrays))


def test_dropout_draws_the_same_masks_on_both_devices():
    x = np.ones((20, 30), np.float32)
    graph = ag.trace(lambda x: ag.dropout(ag.dropout(x, 0.5), 0.25), x=x)
    cpu, cuda = graph.compile("cpu", seed=4), graph.compile("cuda", seed=4)
    for _ in range(2):                      # successive calls draw fresh masks, the same on both
        np.testing.assert_array_equal(cuda(x=x), cpu(x=x))


def test_parameters_moved_to_the_device_are_used_and_updated_in_place(rng):
    layer = ag.nn.Linear(3, 2, rng=rng)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    graph = ag.trace(lambda x: ag.sum(layer(x) ** 2), x=x).grad()
    step_cpu, step_cuda = graph.compile("cpu"), graph.compile("cuda")
    loss_cpu, grad_cpu, _ = step_cpu(x=x)
    expected_weight = layer.weight.data - 0.01 * grad_cpu

    assert layer.to("cuda") is layer and layer.weight.device == "cuda"
    loss, *grads = step_cuda.run_on_device(x=x)
    assert all(_cuda.is_device_array(a) for a in (loss, *grads))
    np.testing.assert_allclose(host(loss), loss_cpu, **TOLERANCE)
    weight = layer.weight.data
    cuda_optim.sgd(weight, grads[0], None, lr=0.01)                     # on the device, in place
    assert layer.weight.data is weight
    np.testing.assert_allclose(layer.weight.numpy(), expected_weight, **TOLERANCE)

    loss_after = step_cuda(x=x)[0]                                      # every graph sees the update
    layer.to("cpu")
    assert isinstance(layer.weight.data, np.ndarray)
    np.testing.assert_allclose(loss_after, step_cpu(x=x)[0], **TOLERANCE)
    assert loss_after < loss_cpu


def test_state_dict_and_astype_keep_parameters_on_the_device(rng):
    layer = ag.nn.Linear(3, 2, rng=rng).to("cuda")
    state = layer.state_dict()
    assert all(isinstance(a, np.ndarray) for a in state.values())
    layer.load_state_dict({name: a + 1 for name, a in state.items()})
    assert layer.weight.device == "cuda"
    np.testing.assert_allclose(layer.weight.numpy(), state["weight"] + 1)
    layer.astype(np.float64)
    assert layer.weight.device == "cuda" and layer.weight.dtype == np.float64
    assert "device='cuda'" in repr(layer.weight)


def test_debug_mode_names_the_first_non_finite_node_on_the_device():
    graph = ag.trace(lambda x: ag.sqrt(x - 2.0) * 3.0, x=np.ones(3, np.float32))
    with ag.debug(), pytest.raises(ag.NonFiniteError, match="sqrt"):
        graph.compile("cuda")(x=np.full(3, 3.0, np.float32) - np.array([0, 0, 2], np.float32))
