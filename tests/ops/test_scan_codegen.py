"""The CPU code generator of ``scan`` bodies (ops/cpu/recurrence.py): the generated loop computes what the body's
executable computes step by step, bit for bit, forward and backward; a body it cannot write runs step by step."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.attention import AdditiveScore, Attention, GeneralScore
from attngraph.nn import GRU, LSTM, GRUCell
from ops.cpu import recurrence

B, T, S, IN, H = 3, 4, 5, 6, 8
COVERS = {"scan"}       # on every device: test_a_masked_encoder_on_every_device_is_the_cpus


def encoder_loss(kind, bidirectional, masked):
    rng = np.random.default_rng(0)
    encoder = {"gru": GRU, "lstm": LSTM}[kind](IN, H, bidirectional=bidirectional, rng=rng)

    def loss(x, mask):
        states, final = encoder(x, mask if masked else None)
        final = final[0] if isinstance(final, tuple) else final
        return ag.sum(ag.tanh(states) * states) + ag.sum(final * final)
    return loss


def attention_loss(score):
    rng = np.random.default_rng(1)
    attention = Attention({"additive": lambda: AdditiveScore(H, H, H, rng=rng),
                           "general": lambda: GeneralScore(H, H, rng=rng)}[score]())
    cell = GRUCell(IN + H, H, rng=rng)

    def loss(x, mask):
        memory = ag.tanh(x[:, :S, :1] * np.ones(H, np.float32))

        def step(s, x_t):
            context, alpha = attention(s, memory, mask=mask[:, :S])
            return cell(ag.concat([x_t, context], axis=-1), s), alpha
        final, weights = ag.scan(step, memory[:, 0], x)
        return ag.sum(final * final) + ag.sum(weights * weights)
    return loss


def generated_and_stepped(loss, monkeypatch):
    """The loss and its gradients computed with generated loops, then with the body's executable per step."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((B, max(T, S), IN)).astype(np.float32)
    mask = np.arange(max(T, S))[None, :] < np.array([[max(T, S)], [2], [3]])
    graph = ag.trace(loss, x=ag.Input(("B", max(T, S), IN)), mask=ag.Input(("B", max(T, S)), "bool"))
    gradient = graph.grad()
    generated = gradient.compile()(x=x, mask=mask)
    monkeypatch.setattr(recurrence, "generate", lambda body_graph: None)
    stepped = gradient.compile()(x=x, mask=mask)
    return generated, stepped, gradient


@pytest.mark.parametrize("kind", ["gru", "lstm"])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_encoders_generated_equal_stepped(kind, bidirectional, masked, monkeypatch):
    generated, stepped, _ = generated_and_stepped(encoder_loss(kind, bidirectional, masked), monkeypatch)
    for a, b in zip(generated, stepped):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("score", ["additive", "general"])
def test_attention_steps_generated_equal_stepped(score, monkeypatch):
    generated, stepped, gradient = generated_and_stepped(attention_loss(score), monkeypatch)
    for a, b in zip(generated, stepped):
        np.testing.assert_array_equal(a, b)
    assert all(np.abs(g).max() > 0 for g in generated[1:])


def test_a_symbolic_size_named_like_the_loops_own_variables():
    """A memory of symbolic length ``t`` (the generated loop's time index is ``t`` too) is read at its length."""
    rng = np.random.default_rng(5)
    attention = Attention(GeneralScore(H, H, rng=rng))

    def run(h, x, memory):
        return ag.scan(lambda s, x_t: (ag.tanh(attention(s, memory)[0] + x_t), None), h, x)[0]
    h, x = rng.standard_normal((B, H)).astype(np.float32), rng.standard_normal((B, T, H)).astype(np.float32)
    memory = rng.standard_normal((B, S, H)).astype(np.float32)
    graph = ag.trace(run, h=ag.Input(("B", H)), x=ag.Input(("B", T, H)), memory=ag.Input(("B", "t", H)))
    expected = h
    for step in range(T):
        expected = ag.trace(lambda s, x_t: ag.tanh(attention(s, memory)[0] + x_t), s=expected, x_t=x[:, step]) \
            .compile()(s=expected, x_t=x[:, step])
    np.testing.assert_allclose(graph.compile()(h=h, x=x, memory=memory), expected, rtol=1e-5, atol=1e-6)


def test_every_body_of_the_models_is_generated():
    """The bodies of a GRU/LSTM encoder and of an attention step, and of their gradients, are all written."""
    for loss in (encoder_loss("gru", True, True), encoder_loss("lstm", False, False), attention_loss("additive")):
        graph = ag.trace(loss, x=ag.Input(("B", max(T, S), IN)), mask=ag.Input(("B", max(T, S)), "bool")).grad()
        bodies = [n.attrs["body"] for n in graph.compile().graph.nodes if n.op == "scan"]
        assert len(bodies) >= 2
        for body in bodies:
            assert recurrence.generate(body.optimized()) is not None, body


def test_a_body_with_an_op_it_cannot_write_runs_step_by_step():
    rng = np.random.default_rng(3)
    table = rng.standard_normal((10, H)).astype(np.float32)

    def run(x, ids):
        final, _ = ag.scan(lambda h, i: (ag.tanh(h + ag.embedding(table, i)), None), x, ids)
        return final
    ids = rng.integers(0, 10, (B, T))
    x = rng.standard_normal((B, H)).astype(np.float32)
    graph = ag.trace(run, x=x, ids=ids)
    body = next(n.attrs["body"] for n in graph.nodes if n.op == "scan")
    assert recurrence.generate(body.optimized()) is None
    h = x
    for t in range(T):
        h = np.tanh(h + table[ids[:, t]])
    np.testing.assert_allclose(graph.compile()(x=x, ids=ids), h, rtol=1e-6)


def test_a_masked_encoder_on_every_device_is_the_cpus(device):
    """The loss and gradients of a masked bidirectional GRU: the CPU's generated loops, the body per step elsewhere."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, IN)).astype(np.float32)
    mask = np.array([[True, True, False], [True, True, True]])
    graph = ag.trace(encoder_loss("gru", True, True), x=x, mask=mask).grad()
    for a, b in zip(graph.compile(device.name)(x=x, mask=mask), graph.compile("cpu")(x=x, mask=mask)):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-6)
