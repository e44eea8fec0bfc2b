"""GRU and LSTM cells against their equations; recurrent encoders with padding, in both directions."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.inspect import gradcheck, gradcheck_parameters
from attngraph.nn import GRU, LSTM, GRUCell, LSTMCell
from tests.nn import reference

IN, HIDDEN = 3, 4
PADDED = np.array([[True, True, True, False, False], [True] * 5])   # lengths 3 and 5


def run(module, **inputs):
    return ag.trace(module, **inputs).compile()(**inputs)


def test_gru_cell_matches_its_equations(rng):
    cell = GRUCell(IN, HIDDEN, rng)
    x, h = rng.standard_normal((2, IN)).astype(np.float32), rng.standard_normal((2, HIDDEN)).astype(np.float32)
    np.testing.assert_allclose(run(cell, x=x, h=h), reference.gru_cell(cell, x, h), rtol=1e-5, atol=1e-6)


def test_lstm_cell_matches_its_equations(rng):
    cell = LSTMCell(IN, HIDDEN, rng)
    x = rng.standard_normal((2, IN)).astype(np.float32)
    h, c = rng.standard_normal((2, 2, HIDDEN)).astype(np.float32)
    got = run(lambda x, h, c: cell(x, (h, c)), x=x, h=h, c=c)
    for actual, expected in zip(got, reference.lstm_cell(cell, x, h, c)):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cell_type", [GRUCell, LSTMCell])
def test_cell_gradients_match_central_differences(cell_type, rng):
    cell = cell_type(2, 3, rng).astype(np.float64)
    x, h = rng.standard_normal((2, 2)), rng.standard_normal((2, 3))

    def loss(x, h):
        if cell_type is GRUCell:
            return ag.sum(ag.tanh(cell(x, h)))
        h, c = cell(x, (h, ag.tanh(h)))
        return ag.sum(ag.tanh(h * c))

    gradcheck_parameters(loss, cell, x, h).raise_if_failed()
    gradcheck(loss, x, h).raise_if_failed()


def numpy_bidirectional_gru(encoder, x, length):
    """One sequence x (T, in) read over its first ``length`` steps, each direction by the cell equations."""
    forward, backward = [np.zeros(HIDDEN)], [np.zeros(HIDDEN)]
    for t in range(length):
        forward.append(reference.gru_cell(encoder.cell, x[t], forward[-1]))
        backward.append(reference.gru_cell(encoder.backward_cell, x[length - 1 - t], backward[-1]))
    states = np.concatenate([forward[1:], backward[:0:-1]], axis=-1)
    return states, np.concatenate([forward[-1], backward[-1]])


def test_bidirectional_gru_with_padding_matches_each_sequence_read_alone(rng):
    encoder = GRU(IN, HIDDEN, bidirectional=True, rng=rng)
    x = rng.standard_normal((2, 5, IN)).astype(np.float32)
    states, final = run(encoder, x=x, mask=PADDED)
    assert states.shape == (2, 5, 2 * HIDDEN) and final.shape == (2, 2 * HIDDEN)
    for row, length in enumerate(PADDED.sum(1)):
        expected_states, expected_final = numpy_bidirectional_gru(encoder, x[row], length)
        np.testing.assert_allclose(states[row, :length], expected_states, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(final[row], expected_final, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(states[0, 3:], 0)


def encode(encoder, **inputs):
    """The states and the parts of the final state — [h] for a GRU, [h, c] for an LSTM — as arrays."""
    def flat(**xs):
        states, final = encoder(**xs)
        return (states, *final) if isinstance(final, tuple) else (states, final)

    states, *final = ag.trace(flat, **inputs).compile()(**inputs)
    return states, final


@pytest.mark.parametrize("encoder_type", [GRU, LSTM])
def test_a_padded_sequence_ends_in_the_states_of_the_unpadded_one(encoder_type, rng):
    encoder = encoder_type(IN, HIDDEN, bidirectional=True, rng=rng)
    x = rng.standard_normal((2, 5, IN)).astype(np.float32)
    states, final = encode(encoder, x=x, mask=PADDED)
    alone_states, alone_final = encode(encoder, x=x[:1, :3])
    np.testing.assert_allclose(states[:1, :3], alone_states, rtol=1e-6, atol=1e-7)
    for padded, alone in zip(final, alone_final, strict=True):
        np.testing.assert_allclose(padded[:1], alone, rtol=1e-6, atol=1e-7)


def test_unidirectional_final_state_is_the_last_real_state(rng):
    encoder = GRU(IN, HIDDEN, rng=rng)
    x = rng.standard_normal((2, 5, IN)).astype(np.float32)
    states, final = run(encoder, x=x, mask=PADDED)
    np.testing.assert_allclose(final, states[[0, 1], [2, 4]], rtol=1e-7)
    assert states.shape == (2, 5, HIDDEN)


def test_gradients_through_a_masked_bidirectional_encoder(rng):
    encoder = GRU(2, 2, bidirectional=True, rng=rng).astype(np.float64)
    x = rng.standard_normal((2, 3, 2))
    mask = np.array([[True, True, False], [True, True, True]])

    def loss(x, mask):
        states, final = encoder(x, mask)
        return ag.sum(ag.tanh(states)) + ag.sum(final * final)

    gradcheck_parameters(loss, encoder, x, mask).raise_if_failed()


def test_one_graph_runs_any_length(rng):
    """The time loop is one scan node: T stays symbolic, and each length gives the loop's values."""
    encoder = GRU(IN, HIDDEN, rng=rng)
    run = ag.trace(encoder, x=ag.Input(("B", "T", IN))).compile()
    assert sum(n.op == "scan" for n in run.graph.nodes) == 1
    for length in (1, 3, 7):
        x = rng.standard_normal((2, length, IN)).astype(np.float32)
        states, final = run(x=x)
        h = np.zeros((2, HIDDEN), np.float32)
        for t in range(length):
            h = ag.trace(encoder.cell, x=x[:, t], h=h).compile()(x=x[:, t], h=h)
            np.testing.assert_allclose(states[:, t], h, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(final, states[:, -1])
