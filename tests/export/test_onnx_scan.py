"""ONNX export of ``scan`` (a time loop whose step is a subgraph) as ONNX's Scan: GRU and LSTM encoders, a
bidirectional GRU over padded sequences (its backward direction a reverse Scan), a step reading a batched tensor of
the enclosing graph (attention over a memory), a scan inside a step, and a model of the zoo holding four scans. Each is
run by onnxruntime at two batch sizes and lengths, one file serving both, and compared with attngraph within 1e-5."""
import numpy as np
import pytest

import attngraph as ag
from attngraph import models
from attngraph.core.passes import optimize
from attngraph.export import to_onnx

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

rng = np.random.default_rng(0)
SIZES = [(2, 5), (3, 2)]        # (B, T) of the two runs


def normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def padding(batch: int, length: int) -> np.ndarray:
    """A (B, T) mask, True at real steps: row b holds T − b of them (at least one)."""
    return np.arange(length) < np.maximum(length - np.arange(batch), 1)[:, None]


def scans(graph) -> list:
    """The Scan nodes of ``graph`` exported."""
    return [n for n in to_onnx(graph).graph.node if n.op_type == "Scan"]


def directions(node) -> tuple[list[int], list[int]]:
    attributes = {a.name: list(a.ints) for a in node.attribute}
    return attributes["scan_input_directions"], attributes["scan_output_directions"]


def test_reverse_scan_keeps_its_outputs_in_time_order(matches, run_onnx):
    """carry_t = carry_{t+1} + x_t from the end: the outputs are the suffix sums, ys[:, t] = Σ_{s ≥ t} x_s, and the
    final carry the whole sum."""
    graph = ag.trace(lambda x, c0: ag.scan(lambda c, x_t: (c + x_t, c + x_t), c0, x, reverse=True),
                     x=ag.Input(("B", "T", 3)), c0=ag.Input(("B", 3)))
    [scan] = scans(graph)
    assert directions(scan) == ([1], [1])
    feeds = [dict(x=normal(b, t, 3), c0=np.zeros((b, 3), np.float32)) for b, t in SIZES]
    matches(graph, *feeds)
    final, ys = run_onnx(graph, feeds[0])
    np.testing.assert_allclose(ys, np.cumsum(feeds[0]["x"][:, ::-1], axis=1)[:, ::-1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(final, feeds[0]["x"].sum(1), rtol=1e-5, atol=1e-6)


def test_gru_encoder(matches):
    gru = ag.nn.GRU(3, 4, rng=rng)
    graph = ag.trace(gru, x=ag.Input(("B", "T", 3)))
    [scan] = scans(graph)
    assert directions(scan) == ([0], [0])
    matches(graph, *[dict(x=normal(b, t, 3)) for b, t in SIZES])


def test_bidirectional_gru_over_padded_sequences(matches, run_onnx):
    """The forward direction a Scan from t = 0, the backward one a Scan from the end of each input (the states and
    the mask); padded steps give zero states and keep the final state of the last real step."""
    gru = ag.nn.GRU(3, 4, bidirectional=True, rng=rng)
    graph = ag.trace(gru, x=ag.Input(("B", "T", 3)), mask=ag.Input(("B", "T"), bool))
    assert sorted(directions(n) for n in scans(graph)) == [([0, 0], [0]), ([1, 1], [1])]
    feeds = [dict(x=normal(b, t, 3), mask=padding(b, t)) for b, t in SIZES]
    matches(graph, *feeds)
    states, final = run_onnx(graph, feeds[0])
    assert (states[1, 4] == 0).all() and not (states[1, :4] == 0).any()
    np.testing.assert_allclose(final[1, :4], states[1, 3, :4], rtol=1e-6)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["forward", "bidirectional"])
def test_lstm_encoder_with_its_two_part_state(bidirectional, matches):
    """The carry is (h, c) packed in one row of 2H; the final state is both."""
    lstm = ag.nn.LSTM(3, 5, bidirectional=bidirectional, rng=rng)
    graph = ag.trace(lambda x, mask: lstm(x, mask), x=ag.Input(("B", "T", 3)), mask=ag.Input(("B", "T"), bool))
    assert len(scans(graph)) == 1 + bidirectional
    matches(graph, *[dict(x=normal(b, t, 3), mask=padding(b, t)) for b, t in SIZES])


def test_a_step_attending_over_a_memory_of_the_enclosing_graph(matches):
    """The step reads the memory (B, S, 4) and its mask (B, S), inputs of the graph, whole at every step, and a
    parameter: they are read by the Scan's body from the enclosing graph by name. Its reshape's sizes are the body's
    batch (read from the carry) and S (read from the memory)."""
    cell = ag.nn.GRUCell(4 + 3, 4, rng=rng)

    def decode(x, memory, memory_mask):
        def step(h, x_t):
            scores = ag.reshape(ag.sum(memory * h[:, None, :], axis=-1), (h.shape[0], memory.shape[1]))
            weights = ag.softmax(scores, mask=memory_mask)
            context = ag.sum(weights[:, :, None] * memory, axis=1)
            h = cell(ag.concat([x_t, context], axis=-1), h)
            return h, (h, context)
        _, (states, contexts) = ag.scan(step, ag.zeros_like(memory[:, 0]), x)
        return states, contexts

    graph = ag.trace(decode, x=ag.Input(("B", "T", 3)), memory=ag.Input(("B", "S", 4)),
                     memory_mask=ag.Input(("B", "S"), bool))
    [node] = [n for n in graph.nodes if n.op == "scan"]
    assert node.attrs["body"].batched.count(True) == 2
    feeds = [dict(x=normal(b, t, 3), memory=normal(b, s, 4), memory_mask=padding(b, s))
             for (b, t), s in zip(SIZES, (4, 6))]
    matches(graph, *feeds)


@pytest.mark.parametrize("optimized", [False, True], ids=["traced", "optimized"])
def test_the_hierarchical_attention_network_end_to_end(optimized, matches):
    """HAN (models/han.py): a bidirectional GRU over the words of every sentence, then one over the sentences: four
    Scans, run at two batch sizes."""
    spec = models.spec("han")
    model = models.get("han", tiny=True).eval()
    graph = ag.trace(model, **spec.inputs(model))
    exported = optimize(graph) if optimized else graph
    assert len(scans(exported)) == 4
    feeds = [{"documents": spec.batch(model, np.random.default_rng(seed), size)["documents"]}
             for seed, size in ((0, 2), (1, 5))]
    matches(exported, *feeds)


def test_a_scan_inside_a_step_reads_the_outer_steps_carry(matches, run_onnx):
    """The inner Scan's body reads the outer body's carry c by name: from d = c, d += x_ts · c over the 3 features
    of x_t gives c_t = c_{t−1} (1 + Σ_s x_ts), so from ones ys[:, t] = Π_{u ≤ t} (1 + Σ_s x_us) in every column."""
    def outer(x, c0):
        def step(c, x_t):
            features = x_t[:, :, None] * ag.ones_like(c)[:, None, :]
            inner, _ = ag.scan(lambda d, y: (d + y * c, None), c, features)
            return inner, inner
        return ag.scan(step, c0, x)[1]

    graph = ag.trace(outer, x=ag.Input(("B", "T", 3)), c0=ag.Input(("B", 3)))
    [scan] = scans(graph)
    assert [n.op_type for a in scan.attribute if a.name == "body" for n in a.g.node].count("Scan") == 1
    feeds = [dict(x=normal(b, t, 3) / 4, c0=np.ones((b, 3), np.float32)) for b, t in SIZES]
    matches(graph, *feeds)
    [ys] = run_onnx(graph, feeds[0])
    want = np.cumprod(1 + feeds[0]["x"].sum(-1), axis=1)[:, :, None].repeat(3, axis=2)
    np.testing.assert_allclose(ys, want, rtol=1e-5)
