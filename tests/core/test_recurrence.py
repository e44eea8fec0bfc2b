"""The ``recurrence`` primitive (a time loop as one node, its step a subgraph) against the loop unrolled in the
graph: the same values bit for bit, gradients equal to rounding and to central differences, FLOPs, debug mode."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.core import functional as F
from attngraph.core.prims.recurrence import recurrence
from attngraph.inspect import gradcheck_parameters
from attngraph.inspect.flops import total_flops
from attngraph.nn import GRU, LSTM
from attngraph.nn.recurrent import hidden, map_state

IN, HIDDEN = 3, 4
MASK = np.array([[True] * 5, [True] * 3 + [False] * 2, [True] + [False] * 4])


def unrolled(encoder, x, mask):
    """The encoder's loop written out in the graph, one copy of the cell per step (what ``Recurrent`` traced
    before it made a recurrence): each direction's outputs and final state."""
    def direction(cell, steps):
        state, projected, outputs = cell.initial_state(x), cell.project(x), {}
        for t in steps:
            real = F.expand_dims(mask[:, t], -1)
            state = map_state(lambda n, old: F.where(real, n, old), cell.step(projected[:, t], state), state)
            outputs[t] = F.where(real, hidden(state), 0.0)
        return F.stack([outputs[t] for t in sorted(outputs)], axis=1), state
    length = x.shape[1]
    (ahead, last), (back, first) = direction(encoder.cell, range(length)), \
        direction(encoder.backward_cell, reversed(range(length)))
    return F.concat([ahead, back], -1), map_state(lambda a, b: F.concat([a, b], -1), last, first)


def flat(states, final):
    return (states, *final) if isinstance(final, tuple) else (states, final)


@pytest.fixture(params=[GRU, LSTM])
def encoder(request):
    return request.param(IN, HIDDEN, bidirectional=True, rng=np.random.default_rng(0))


@pytest.fixture
def x():
    return np.random.default_rng(1).standard_normal((3, 5, IN)).astype(np.float32)


def test_an_encoder_traces_one_recurrence_per_direction(encoder, x):
    graph = ag.trace(lambda x, mask: encoder(x, mask)[0], x=x, mask=MASK)
    loops = [n for n in graph.nodes if n.op == "recurrence"]
    assert [n.attrs["reverse"] for n in loops] == [False, True]
    assert all(n.shape == (3, 5, HIDDEN * (2 if isinstance(encoder, LSTM) else 1)) for n in loops)


def test_values_equal_the_unrolled_loop_bit_for_bit(encoder, x):
    scanned = ag.trace(lambda x, mask: flat(*encoder(x, mask)), x=x, mask=MASK).compile()(x=x, mask=MASK)
    loop = ag.trace(lambda x, mask: flat(*unrolled(encoder, x, mask)), x=x, mask=MASK).compile()(x=x, mask=MASK)
    for a, b in zip(scanned, loop, strict=True):
        np.testing.assert_array_equal(a, b)


def test_gradients_equal_the_unrolled_loop(encoder, x):
    names = ["x", *dict(encoder.named_parameters())]

    def gradients(forward):
        loss = lambda x, mask: sum(ag.sum(ag.tanh(part)) for part in flat(*forward(x, mask)))
        graph = ag.trace(loss, x=x, mask=MASK)
        nodes = {id(node.value): node for node in graph.parameters.values()}
        wrt = [graph.inputs["x"], *(nodes[id(p)] for p in encoder.parameters())]
        return graph.grad(wrt=wrt).compile()(x=x, mask=MASK)
    scanned, loop = gradients(encoder), gradients(lambda x, mask: unrolled(encoder, x, mask))
    for name, a, b in zip(["loss", *names], scanned, loop, strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6, err_msg=name)


def test_gradients_match_central_differences(encoder):
    encoder.astype(np.float64)
    x = np.random.default_rng(2).standard_normal((3, 5, IN))

    def loss(x, mask):
        states, final = encoder(x, mask)
        return ag.sum(ag.tanh(states)) + sum(ag.sum(part * part) for part in flat(states, final)[1:])
    gradcheck_parameters(loss, encoder, x, MASK).raise_if_failed()
    report = ag.inspect.gradcheck(loss, x, MASK, argnums=[0])
    report.raise_if_failed()


def test_flops_count_the_body_once_per_step(encoder, x):
    scanned = ag.trace(lambda x, mask: flat(*encoder(x, mask)), x=x, mask=MASK)
    loop = ag.trace(lambda x, mask: flat(*unrolled(encoder, x, mask)), x=x, mask=MASK)
    assert total_flops(scanned) == total_flops(loop) > 0


def test_debug_mode_names_the_body_op_and_the_time_step():
    graph = ag.trace(lambda x: recurrence(lambda h, x_t: ag.log(h + x_t), x[:, 0], [x]), x=ag.Input((2, 4, 3)))
    x = np.ones((2, 4, 3), np.float32)
    x[1, 2, 0] = -5.0                                   # log(h + x) of step 1 is ~0.69; step 2 takes log(< 0)
    with ag.debug(), pytest.raises(ag.NonFiniteError, match=r"time step 2 of 4: NaN in the output of .*\(log"):
        graph.compile()(x=x)


def test_a_step_must_return_its_carry_and_read_only_the_parameters_given(x):
    with pytest.raises(ag.TracingError, match="carry's shape"):
        ag.trace(lambda x: recurrence(lambda h, x_t: ag.sum(h), x[:, 0], [x]), x=x)
    weight = ag.nn.Linear(IN, IN).weight
    with pytest.raises(ag.TracingError, match="not among the parameters"):
        ag.trace(lambda x: recurrence(lambda h, x_t: h @ weight, x[:, 0], [x]), x=x)
