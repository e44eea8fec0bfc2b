"""Pointer networks (Vinyals et al. 2015): distributions over the input positions that respect the mask, the
teacher-forced loss against NumPy, and greedy decoding that sorts after a short training."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.models import PointerNetwork, tasks
from attngraph.models.pointer import pointer_loss
from attngraph.train import Adam
from tests.nn.reference import linear, lstm_cell, softmax

LENGTH = 5


def tiny(seed=0):
    return PointerNetwork(embed_dim=3, hidden=4, attention_dim=5, rng=np.random.default_rng(seed))


def reference_loss(model, numbers, order):
    """−mean log p(C_i = order_i): encoder LSTM over z_j = W x_j + b, decoder LSTM from its final state fed
    the start vector then z_{order_{i−1}}, u_ij = vᵀ tanh(W1 d_i + W2 e_j + b) over the positions not yet
    pointed at."""
    z = linear(model.embed, numbers[..., None].astype(np.float64))
    h = c = np.zeros((len(numbers), 4))
    encoded = []
    for j in range(numbers.shape[1]):
        h, c = lstm_cell(model.encoder.cell, z[:, j], h, c)
        encoded.append(h)
    encoded = np.stack(encoded, 1)
    score, rows = model.pointer, np.arange(len(numbers))
    allowed, z_prev, losses = np.ones(numbers.shape, bool), np.broadcast_to(model.start.data, z[:, 0].shape), []
    for i in range(numbers.shape[1]):
        h, c = lstm_cell(model.decoder, z_prev, h, c)
        u = np.tanh(linear(score.w_query, h)[:, None] + linear(score.w_key, encoded)) @ score.v.data
        losses.append(-np.log(softmax(u, allowed)[rows, order[:, i]]))
        allowed[rows, order[:, i]] = False
        z_prev = z[rows, order[:, i]]
    return np.mean(losses)


def test_loss_matches_numpy_on_a_tiny_case():
    model = tiny()
    batch = tasks.sorting(np.random.default_rng(0), 3, LENGTH)
    loss = ag.trace(lambda numbers, order: pointer_loss(model, numbers, order), **batch).compile()(**batch)
    np.testing.assert_allclose(loss, reference_loss(model, **batch), rtol=1e-5)


def test_teacher_forced_pointers_are_distributions_over_the_positions_not_yet_pointed_at():
    model = tiny()
    batch = tasks.sorting(np.random.default_rng(0), 3, LENGTH)
    log_p = ag.trace(model, **batch).compile()(**batch)
    assert log_p.shape == (3, LENGTH, LENGTH)
    for b, order in enumerate(batch["order"]):
        for i in range(LENGTH):
            allowed = np.ones(LENGTH, bool)
            allowed[order[:i]] = False
            np.testing.assert_allclose(np.exp(log_p[b, i][allowed]).sum(), 1, rtol=1e-5)
            assert (log_p[b, i][~allowed] == 0).all()          # masked entries of log_softmax are 0


def test_greedy_decoding_gives_a_permutation_and_distributions_that_exclude_pointed_positions():
    numbers = tasks.sorting(np.random.default_rng(0), 3, LENGTH)["numbers"]
    order, p = tiny().decode(numbers)
    assert (np.sort(order, axis=1) == np.arange(LENGTH)).all()
    np.testing.assert_allclose(p.sum(-1), 1, rtol=1e-5)
    for b in range(3):
        for i in range(1, LENGTH):
            assert (p[b, i, order[b, :i]] == 0).all()
            assert p[b, i].argmax() == order[b, i]


def test_greedy_decoding_sorts_held_out_sequences_after_a_short_training():
    model = PointerNetwork(embed_dim=8, hidden=16, attention_dim=16, rng=np.random.default_rng(0))
    rng = np.random.default_rng(1)
    loss = ag.trace(lambda **b: pointer_loss(model, **b), **tasks.sorting(rng, 32, LENGTH))
    step = loss.grad().compile()
    optimizer = Adam([node.value for node in loss.parameters.values()], lr=3e-2)
    for _ in range(100):
        _, *grads = step(**tasks.sorting(rng, 32, LENGTH))
        optimizer.step(grads)
    test = tasks.sorting(np.random.default_rng(99), 200, LENGTH)
    order, _ = model.decode(test["numbers"])
    assert (order == test["order"]).all(axis=1).mean() >= 0.8


def test_teacher_forcing_is_two_scans_for_any_length():
    model = tiny()
    graph = ag.trace(model, numbers=ag.Input(("B", "n")), order=ag.Input(("B", "n"), "int64"))
    assert sum(node.op == "scan" for node in graph.nodes) == 2                  # the encoder and the decoder
    for length in (LENGTH, 3):
        batch = tasks.sorting(np.random.default_rng(length), 3, length)
        np.testing.assert_allclose(graph.compile()(**batch), ag.trace(model, **batch).compile()(**batch),
                                   rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(ag.trace(lambda **b: pointer_loss(model, **b), **batch).compile()(**batch),
                                   reference_loss(model, **batch), rtol=1e-5)


def test_bad_inputs_are_refused():
    with pytest.raises(ag.ShapeError, match="batch, length"):
        tiny().decode(np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="hidden"):
        PointerNetwork(hidden=0)
