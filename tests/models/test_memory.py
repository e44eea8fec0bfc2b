"""The NTM reader and end-to-end memory networks against NumPy references of their papers' equations, their
weight tying and masking, and their learning of the synthetic tasks."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.models import MemN2N, NTMReader, tasks
from attngraph.models.memory import position_encoding, recall_batch, story_batch
from attngraph.train import Adam
from tests.nn.reference import linear, softmax

PAD = 0


def run(model, **inputs):
    return ag.trace(model, **inputs).compile()(**inputs)


def learn(model, batch, steps, size=32, lr=2e-2):
    """``steps`` Adam steps on fresh seeded batches of the model's task (a dict of the inputs, then the
    target); returns the accuracy on 200 new examples."""
    rng = np.random.default_rng(1)
    first = batch(model, rng, size)
    *inputs, target = first
    loss = ag.trace(lambda **b: ag.cross_entropy(model(*(b[k] for k in inputs)), b[target]), **first)
    step = loss.grad().compile()
    optimizer = Adam([node.value for node in loss.parameters.values()], lr=lr)
    for _ in range(steps):
        _, *grads = step(**batch(model, rng, size))
        optimizer.step(grads)
    test = batch(model, np.random.default_rng(99), 200)
    logits = run(model, **{k: test[k] for k in inputs})
    return (logits.argmax(-1) == test[target]).mean()


def test_ntm_reader_matches_its_equations():
    model = NTMReader(vocab=12, embed_dim=4, memory_dim=6, hidden=5, rng=np.random.default_rng(0))
    batch = recall_batch(model, np.random.default_rng(0), 3)
    E = model.embed.weight.data.astype(np.float64)
    memory = linear(model.write, np.concatenate([E[batch["keys"]], E[batch["values"]]], -1))
    h = np.tanh(linear(model.controller, E[batch["query"]]))
    raw = linear(model.head.params, h)
    key, beta, gamma = raw[:, :6], np.log1p(np.exp(raw[:, 6])), 1 + np.log1p(np.exp(raw[:, 7]))
    cos = np.einsum("bm,bnm->bn", key, memory) / (
        np.linalg.norm(key, axis=-1)[:, None] * np.linalg.norm(memory, axis=-1))
    w = softmax(beta[:, None] * cos) ** gamma[:, None]
    w /= w.sum(-1, keepdims=True)
    read = np.einsum("bn,bnm->bm", w, memory)
    expected = linear(model.out, np.concatenate([h, read], -1))
    actual = run(model, keys=batch["keys"], values=batch["values"], query=batch["query"])
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


def test_ntm_reader_learns_associative_recall():
    model = NTMReader(vocab=12, embed_dim=8, memory_dim=16, hidden=16, rng=np.random.default_rng(0))
    assert learn(model, recall_batch, 120) >= 0.95


def test_position_encoding_is_the_papers():
    # l_kj = (1 − j/J) − (k/d)(1 − 2j/J), j and k from 1: J = 2, d = 2
    np.testing.assert_allclose(position_encoding(2, 2), [[0.5 - 0.5 * 0, 0.5 - 1 * 0], [0 - 0.5 * -1, 0 - 1 * -1]])
    np.testing.assert_allclose(position_encoding(4, 3)[:, 0], (1 - np.arange(1, 5) / 4) - (1 / 3) * (
        1 - 2 * np.arange(1, 5) / 4), rtol=1e-6)


def memn2n_reference(model, story, question):
    """The hop equations of Sukhbaatar et al. 2015 with adjacent tying, in float64, written per example."""
    tables = [e.weight.data.astype(np.float64) for e in model.embeddings]
    times = [t.weight.data.astype(np.float64) for t in model.temporal]
    J, d = story.shape[-1], model.dim
    l = position_encoding(J, d)

    def bag(E, words):
        return sum(l[j] * E[w] for j, w in enumerate(words) if w != PAD)

    logits = []
    for sentences, q in zip(story, question):
        real = [s for s in sentences if s[0] != PAD]
        n = len(real)
        u = bag(tables[0], q)                                           # B = A_1
        for k in range(1, model.hops + 1):
            m = np.array([bag(tables[k - 1], s) + times[k - 1][n - 1 - i] for i, s in enumerate(real)])
            c = np.array([bag(tables[k], s) + times[k][n - 1 - i] for i, s in enumerate(real)])
            p = softmax(m @ u)
            u = (u if model.map is None else u @ model.map.weight.data) + p @ c
        logits.append(tables[-1] @ u)                                   # W = C_Kᵀ
    return np.array(logits)


@pytest.mark.parametrize("linear_map", [False, True])
def test_memn2n_hops_match_the_papers_equations(linear_map):
    model = MemN2N(vocab=16, dim=6, hops=3, memory_size=8, linear_map=linear_map, rng=np.random.default_rng(0))
    batch = story_batch(model, np.random.default_rng(0), 4)
    batch["story"][0, 0, 3] = PAD                                     # a padded word inside a real sentence
    assert (batch["story"][:, -1, 0] == PAD).any(), "the example needs padded sentences"
    actual = run(model, story=batch["story"], question=batch["question"])
    np.testing.assert_allclose(actual, memn2n_reference(model, batch["story"], batch["question"]),
                               rtol=1e-4, atol=1e-5)


def test_memn2n_ties_adjacent_embeddings():
    model = MemN2N(vocab=16, dim=4, hops=3)
    for k in range(1, 3):
        assert model.memory_in(k + 1)[0].weight is model.memory_out(k)[0].weight        # A_{k+1} = C_k
        assert model.memory_in(k + 1)[1].weight is model.memory_out(k)[1].weight        # T_A^{k+1} = T_C^k
    assert model.memory_in(1)[0] is model.embeddings[0]                                 # B = A_1
    assert model.memory_out(3)[0] is model.embeddings[3]                                # W = C_3ᵀ
    assert len(list(model.parameters())) == 2 * (3 + 1)


def test_memn2n_ignores_padded_memory_slots():
    model = MemN2N(vocab=16, dim=6, hops=2, rng=np.random.default_rng(0))
    batch = tasks.whereabouts(np.random.default_rng(3), 4, 6, 3, 4)
    padded = batch["story"][:, :, 0] == PAD
    assert padded.any()
    graph = ag.trace(model, story=batch["story"], question=batch["question"])
    weights = graph.with_outputs({n.scope: n for n in graph.nodes if n.name == "attention"})
    logits, *attention = weights.compile()(story=batch["story"], question=batch["question"])
    assert len(attention) == 2
    for w in attention:
        assert (w[:, 0][padded] == 0).all()
        np.testing.assert_allclose(w.sum(-1), 1, rtol=1e-6)
    noisy = batch["story"].copy()
    noisy[:, :, 1:][padded] = 7                                       # words after a padded sentence's PAD
    np.testing.assert_array_equal(graph.compile()(story=noisy, question=batch["question"]), logits)


def test_memn2n_learns_the_whereabouts_task():
    model = MemN2N(vocab=16, dim=16, hops=2, rng=np.random.default_rng(0))
    assert learn(model, story_batch, 120) >= 0.95


def test_bad_settings_and_inputs_are_refused():
    with pytest.raises(ValueError, match="hops"):
        MemN2N(vocab=16, hops=0)
    model = MemN2N(vocab=16, dim=4, memory_size=3)
    with pytest.raises(ag.ShapeError, match="memory of 3"):
        ag.trace(model, story=ag.Input(("B", 6, 4), "int64"), question=ag.Input(("B", 4), "int64"))
    with pytest.raises(ag.DataError, match="at least 14"):
        story_batch(MemN2N(vocab=10), np.random.default_rng(0), 2)


def test_the_tasks_answer_their_questions():
    recall = tasks.associative_recall(np.random.default_rng(0), 50, 4, 12)
    for keys, values, query, target in zip(*recall.values()):
        assert len(set(keys)) == 4 and (keys >= tasks.FIRST).all()
        assert target == values[list(keys).index(query)]
    stories = tasks.whereabouts(np.random.default_rng(0), 50, 6, 3, 4)
    for story, question, answer in zip(*stories.values()):
        facts = [s for s in story if s[0] != PAD]
        assert question[2] in [s[0] for s in facts]
        assert answer == [s[3] for s in facts if s[0] == question[2]][-1]
