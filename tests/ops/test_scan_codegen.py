"""The CPU code generator of ``scan`` bodies (ops/cpu/recurrence.py): the generated loop computes what the body's
executable computes step by step, bit for bit, forward and backward; a body it cannot write runs step by step."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.attention import AdditiveScore, Attention, GeneralScore
from attngraph.nn import GRU, LSTM, GRUCell
from ops.cpu import recurrence
from ops.cpu.threads import IN_THREADS_MIN_WORK, in_threads
from tests.conftest import numba_threads

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


def pairs_loss():
    """A step scoring every memory slot, moved by the state, against every slot: additive scores with Tq = Tk, the
    fused primitive and its gradient inside the bodies."""
    rng = np.random.default_rng(5)
    score, cell = AdditiveScore(H, H, H, rng=rng), GRUCell(IN + H, H, rng=rng)
    mixing = (rng.standard_normal((S * H, H)) / S).astype(np.float32)

    def loss(x, mask):
        memory = ag.tanh(x[:, :S, :1] * np.ones(H, np.float32))

        def step(s, x_t):
            weights = ag.softmax(score(memory + ag.expand_dims(s, 1), memory))
            context = ag.reshape(weights @ memory, (-1, S * H)) @ mixing
            return cell(ag.concat([x_t, context], axis=-1), s), weights
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


def test_additive_scores_of_every_pair_generated_equal_stepped(monkeypatch):
    generated, stepped, gradient = generated_and_stepped(pairs_loss(), monkeypatch)
    bodies = [n.attrs["body"].graph for n in gradient.compile().graph.nodes if n.op == "scan"]
    assert {"additive_scores", "additive_scores_grad"} <= {n.op for body in bodies for n in body.nodes}
    for a, b in zip(generated, stepped):
        np.testing.assert_array_equal(a, b)
    assert all(np.abs(g).max() > 0 for g in generated[1:])


def test_the_output_row_is_written_from_its_pieces_and_theirs(monkeypatch):
    """The forward loop of a gradient emits its row and then its residuals: the row's own concatenation, read by
    nothing else, is not made and then copied into the output; each of its pieces is written into its columns."""
    import re
    sources, source = [], recurrence._source
    monkeypatch.setattr(recurrence, "_source", lambda graph: sources.append(source(graph)) or sources[-1])
    generated, stepped, _ = generated_and_stepped(attention_loss("additive"), monkeypatch)
    for a, b in zip(generated, stepped):
        np.testing.assert_array_equal(a, b)
    widest = max((text for text, _, _ in sources), key=lambda text: text.count("put(out"))
    written = set(re.findall(r"put\(out, t, [^,]+, (v\d+)\)", widest))
    made = set(re.findall(r"put\((v\d+)\.reshape", widest))        # concatenations made in a row of their own
    read = {name for line in widest.splitlines() if "put(" not in line and "np.empty" not in line
            for name in re.findall(r"v\d+", line)}
    assert len(written) > 3 and written & made <= read      # made to be read by the step, not to be copied to out


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
    for loss in (encoder_loss("gru", True, True), encoder_loss("lstm", False, False), attention_loss("additive"),
                 pairs_loss()):
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


def test_blocks_of_rows_are_the_same_on_any_number_of_threads(monkeypatch):
    """A batch of 70 runs as blocks of 32, 32 and 6 rows, each all its steps, on one thread as on two: the loss and
    gradients are the same bit for bit, and those of one block of 70 up to rounding (BLAS computes a product's rows
    in tiles, and a row's tile depends on its block)."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((70, 8, IN)).astype(np.float32)
    mask = np.arange(8)[None, :] < rng.integers(1, 9, (70, 1))
    gradient = ag.trace(attention_loss("additive"), x=x, mask=mask).grad()
    blocks = []

    def recorded(kernel, count, *args, work):
        blocks.append((count, work >= IN_THREADS_MIN_WORK))
        in_threads(kernel, count, *args, work=work)
    monkeypatch.setattr(recurrence, "in_threads", recorded)
    monkeypatch.setattr(recurrence, "SPLIT_MIN_SIZE", 0)
    runs = []
    for threads in (1, 2):
        with numba_threads(threads):
            runs.append(gradient.compile()(x=x, mask=mask))
    assert blocks and all(block == (3, True) for block in blocks)
    monkeypatch.setattr(recurrence, "ROWS_PER_PART", 70)
    whole = gradient.compile()(x=x, mask=mask)
    for one, two, one_block in zip(*runs, whole):
        np.testing.assert_array_equal(one, two)
        np.testing.assert_allclose(one, one_block, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("step, apart", [
    (lambda c, x_t: (ag.tanh(c + x_t), c), True),
    (lambda c, x_t: (ag.tanh(c + x_t * ag.sum(x_t * c) * 1e-3), c), False),         # a sum over the batch
    (lambda c, x_t: (ag.tanh(c + ag.softmax(x_t, axis=0)), c), False),              # a softmax over it
    (lambda c, x_t: (ag.tanh(c + ag.transpose(ag.matmul(ag.transpose(x_t), x_t))[:1]), c), False),
])
def test_a_body_mixing_the_rows_of_its_batch_runs_as_one_block(step, apart, monkeypatch):
    """Each body's states over a batch of 70 (blocks of 32 rows where they are apart) equal the stepped body's."""
    rng = np.random.default_rng(7)
    h, x = rng.standard_normal((70, 64)).astype(np.float32), rng.standard_normal((70, 8, 64)).astype(np.float32)
    graph = ag.trace(lambda h, x: ag.scan(step, h, x)[1], h=ag.Input(("B", 64)), x=ag.Input(("B", 8, 64)))
    body = next(n.attrs["body"] for n in graph.nodes if n.op == "scan")
    assert recurrence._rows_apart(body.optimized()) is apart
    monkeypatch.setattr(recurrence, "SPLIT_MIN_SIZE", 0)
    generated = graph.compile()(h=h, x=x)
    monkeypatch.setattr(recurrence, "generate", lambda body_graph: None)
    np.testing.assert_allclose(generated, ag.trace(lambda h, x: ag.scan(step, h, x)[1], h=h, x=x).compile()(h=h, x=x),
                               rtol=1e-6, atol=1e-6)
