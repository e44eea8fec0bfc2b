"""Encoder-decoders: one decoder step of Bahdanau and of Luong against NumPy, greedy decoding consistent with
teacher forcing, and attention weights that respect the source padding."""
import numpy as np
import pytest

import attngraph as ag
from attngraph import models
from attngraph.inspect.attention import attention_maps
from attngraph.models.tokens import BOS, EOS, PAD, greedy
from tests.nn.reference import gru_cell, linear, softmax

SRC = np.array([[5, 6, 7, 0, 0], [4, 9, 8, 6, 5]])
MASK = SRC != PAD


def step_inputs(hidden, memory_width, rng):
    return dict(y=np.array([BOS, 6]), state=rng.standard_normal((2, hidden)).astype(np.float32),
                memory=rng.standard_normal((2, 5, memory_width)).astype(np.float32), mask=MASK)


def run_step(model, inputs):
    return ag.trace(model.step, y_prev=inputs["y"], state=inputs["state"], memory=inputs["memory"],
                    mask=inputs["mask"]).compile()(y_prev=inputs["y"], state=inputs["state"],
                                                   memory=inputs["memory"], mask=inputs["mask"])


def test_bahdanau_attends_with_the_previous_state_before_the_update(rng):
    model = models.get("seq2seq-bahdanau", tiny=True)
    inputs = step_inputs(model.cell.hidden_size, 2 * model.cell.hidden_size, rng)     # bidirectional memory
    s, memory, embedded = inputs["state"], inputs["memory"], model.tgt_embed.weight.data[inputs["y"]]
    score = model.attention.score
    e = np.tanh(linear(score.w_query, s)[:, None] + linear(score.w_key, memory)) @ score.v.data
    alpha = softmax(e, MASK)
    context = np.einsum("bs,bsd->bd", alpha, memory)
    s_new = gru_cell(model.cell, np.concatenate([embedded, context], -1), s)
    logits = linear(model.out, np.tanh(linear(model.readout, np.concatenate([s_new, context, embedded], -1))))
    for got, expected in zip(run_step(model, inputs), [logits, s_new, alpha]):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("score", ["general", "dot"])
def test_luong_attends_with_the_new_state_and_combines_it_with_the_context(score, rng):
    model = models.get("seq2seq-luong", tiny=True, score=score)
    inputs = step_inputs(model.cell.hidden_size, model.cell.hidden_size, rng)
    h = gru_cell(model.cell, model.tgt_embed.weight.data[inputs["y"]], inputs["state"])
    memory = inputs["memory"]
    query = h @ model.attention.score.weight.data if score == "general" else h
    alpha = softmax(np.einsum("bd,bsd->bs", query, memory), MASK)
    context = np.einsum("bs,bsd->bd", alpha, memory)
    logits = linear(model.out, np.tanh(linear(model.attentional, np.concatenate([context, h], -1))))
    for got, expected in zip(run_step(model, inputs), [logits, h, alpha]):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["seq2seq-bahdanau", "seq2seq-luong", "transformer"])
def test_greedy_decoding_picks_what_teacher_forcing_rates_best(name):
    model = models.get(name, tiny=True)
    decoded = model.greedy_decode(SRC, 6)
    tokens = decoded[0] if isinstance(decoded, tuple) else decoded
    assert tokens.shape[0] == 2 and 1 <= tokens.shape[1] <= 6
    again = model.greedy_decode(SRC, 6)
    np.testing.assert_array_equal(tokens, again[0] if isinstance(again, tuple) else again)
    tgt_in = np.concatenate([np.full((2, 1), BOS), tokens[:, :-1]], axis=1)
    logits = ag.trace(model, src=SRC, tgt_in=tgt_in).compile()(src=SRC, tgt_in=tgt_in)
    best = logits.argmax(-1)
    for row in range(2):
        ended = np.flatnonzero(tokens[row] == EOS)
        length = ended[0] + 1 if len(ended) else tokens.shape[1]
        np.testing.assert_array_equal(best[row, :length], tokens[row, :length])
        assert np.all(tokens[row, length:] == PAD)


def test_rnn_decoding_returns_attention_that_ignores_source_padding():
    model = models.get("seq2seq-luong", tiny=True)
    tokens, weights = model.greedy_decode(SRC, 4)
    assert weights.shape == (2, tokens.shape[1], 5)
    np.testing.assert_allclose(weights.sum(-1), 1, rtol=1e-5)
    np.testing.assert_array_equal(weights[0, :, 3:], 0)


def test_transformer_cross_attention_is_read_back_by_module_path():
    model = models.get("transformer", tiny=True, layers=2)
    tgt_in = np.array([[BOS, 7, 6], [BOS, 5, 6]])
    maps = attention_maps(ag.trace(model, src=SRC, tgt_in=tgt_in), src=SRC, tgt_in=tgt_in)
    assert {"encoder.layers.1.self_attn", "decoder.layers.1.self_attn", "decoder.layers.1.cross_attn"} <= set(maps)
    cross = maps["decoder.layers.1.cross_attn"]
    assert cross.shape == (2, 2, 3, 5)                                  # (B, heads, T, S)
    np.testing.assert_array_equal(cross[0, :, :, 3:], 0)
    np.testing.assert_array_equal(np.triu(maps["decoder.layers.0.self_attn"][0, 0], 1), 0)


def test_greedy_decoding_pads_after_eos_and_stops_when_every_row_has_ended():
    script = iter([[5, EOS], [EOS, 6], [7, 7]])
    tokens = greedy(lambda prefix: np.eye(8)[next(script)], 2, max_length=10)
    np.testing.assert_array_equal(tokens, [[5, EOS], [EOS, PAD]])


@pytest.mark.parametrize("name", ["seq2seq-bahdanau", "seq2seq-luong"])
@pytest.mark.parametrize("lengths", [("S", "T"), SRC.shape[1:] + (4,)], ids=["symbolic", "concrete"])
def test_teacher_forcing_is_one_scan_equal_to_the_step_run_over_the_targets(name, lengths):
    model = models.get(name, tiny=True)
    tgt_in = np.array([[BOS, 7, 6, 5], [BOS, 5, 6, PAD]])
    graph = ag.trace(model, src=ag.Input(("B", lengths[0]), "int64"), tgt_in=ag.Input(("B", lengths[1]), "int64"))
    assert sum(node.op == "scan" for node in graph.nodes) == (3 if name == "seq2seq-bahdanau" else 2)  # + encoder's
    logits = graph.compile()(src=SRC, tgt_in=tgt_in)
    maps = attention_maps(graph, src=SRC, tgt_in=tgt_in)
    memory, state = ag.trace(lambda src: model.encode(src, SRC != PAD), src=SRC).compile()(src=SRC)
    step = ag.trace(lambda y, state, memory: model.step(y, state, memory, MASK), y=tgt_in[:, 0], state=state,
                    memory=memory).compile()
    recorded = name == "seq2seq-luong" or lengths[0] != "S"     # Bahdanau's α is a scan output: S concrete
    assert set(maps) == ({"attention"} if recorded else set())
    for t in range(tgt_in.shape[1]):
        step_logits, state, alpha = step(y=tgt_in[:, t], state=state, memory=memory)
        np.testing.assert_allclose(logits[:, t], step_logits, rtol=1e-5, atol=1e-6)
        if recorded:
            np.testing.assert_allclose(maps["attention"][:, t], alpha, rtol=1e-5, atol=1e-7)
    if recorded:
        np.testing.assert_array_equal(maps["attention"][0, :, 3:], 0)


def test_a_concrete_batch_equal_to_a_model_size_traces(rng):
    """A concrete batch names the step's rows; the attention's v (hidden,) reshaped inside the step is no batch
    when hidden equals it (the benchmarks' B = hidden = 64)."""
    model = models.get("seq2seq-bahdanau", tiny=True)
    src = rng.integers(1, 10, (model.cell.hidden_size, 5))
    tgt_in = rng.integers(1, 10, (model.cell.hidden_size, 4))
    logits = ag.trace(model, src=src, tgt_in=tgt_in).compile()(src=src, tgt_in=tgt_in)
    symbolic = ag.trace(model, src=ag.Input(("B", 5), "int64"), tgt_in=ag.Input(("B", 4), "int64"))
    np.testing.assert_allclose(logits, symbolic.compile()(src=src, tgt_in=tgt_in), rtol=1e-5, atol=1e-6)
