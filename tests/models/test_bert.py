"""BERT: the 15% / 80-10-10 masking recipe, and a loss over the masked positions only."""
import numpy as np
import pytest

import attngraph as ag
from attngraph import models
from attngraph.models.bert import loss, mask_tokens
from attngraph.models.tokens import FIRST, IGNORE, MASK, PAD

VOCAB = 12


def test_masking_recipe_proportions_on_a_large_sample():
    rng = np.random.default_rng(0)
    tokens = rng.integers(FIRST, VOCAB, (400, 250))
    tokens[:, 200:] = PAD
    inputs, targets = mask_tokens(tokens, np.random.default_rng(1), VOCAB)
    selected = targets != IGNORE
    ordinary = tokens != PAD
    assert not selected[~ordinary].any() and np.array_equal(inputs[~ordinary], tokens[~ordinary])
    np.testing.assert_array_equal(targets[selected], tokens[selected])
    np.testing.assert_array_equal(inputs[~selected], tokens[~selected])
    assert abs(selected.sum() / ordinary.sum() - 0.15) < 0.005
    chosen, original = inputs[selected], tokens[selected]
    span = VOCAB - FIRST                       # a random replacement is the original token 1/span of the time
    assert abs(np.mean(chosen == MASK) - 0.8) < 0.01
    assert abs(np.mean(chosen == original) - (0.1 + 0.1 / span)) < 0.01
    replaced = (chosen != MASK) & (chosen != original)
    assert abs(np.mean(replaced) - 0.1 * (1 - 1 / span)) < 0.01 and chosen[replaced].min() >= FIRST
    again = mask_tokens(tokens, np.random.default_rng(1), VOCAB)
    np.testing.assert_array_equal(again[0], inputs)


def test_the_loss_averages_over_the_selected_positions_only(rng):
    bert = models.get("bert", tiny=True, vocab=VOCAB)
    tokens = rng.integers(FIRST, VOCAB, (2, 6))
    targets = np.full_like(tokens, IGNORE)
    targets[0, 1], targets[1, 4] = 5, 9
    logits = ag.trace(bert, tokens=tokens).compile()(tokens=tokens).astype(np.float64)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -(log_p[0, 1, 5] + log_p[1, 4, 9]) / 2
    got = ag.trace(lambda tokens, targets: loss(bert, tokens, targets), tokens=tokens, targets=targets) \
        .compile()(tokens=tokens, targets=targets)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_a_batch_without_masked_tokens_gives_zero_loss_and_gradients_not_nan(rng):
    bert = models.get("bert", tiny=True, vocab=VOCAB)
    tokens = rng.integers(FIRST, VOCAB, (2, 6))
    targets = np.full_like(tokens, IGNORE)
    graph = ag.trace(lambda tokens, targets: loss(bert, tokens, targets), tokens=tokens, targets=targets).grad()
    value, *grads = graph.compile()(tokens=tokens, targets=targets)
    assert value == 0
    assert all(np.array_equal(g, np.zeros_like(g)) for g in grads)


def test_segment_embeddings_add_each_positions_segment_and_default_to_segment_0(rng):
    bert = models.BERT(VOCAB, d_model=16, heads=2, layers=1, d_ff=32, max_length=16, dropout=0.0, segments=2)
    tokens, segments = rng.integers(FIRST, VOCAB, (2, 5)), np.zeros((2, 5), np.int64)
    logits = ag.trace(bert, tokens=tokens, segment_ids=segments).compile()
    unsegmented = ag.trace(bert, tokens=tokens).compile()(tokens=tokens)
    np.testing.assert_allclose(logits(tokens=tokens, segment_ids=segments), unsegmented, rtol=1e-6, atol=1e-6)
    segments[0, 2] = 1
    assert not np.allclose(logits(tokens=tokens, segment_ids=segments)[0], unsegmented[0])
    np.testing.assert_allclose(logits(tokens=tokens, segment_ids=segments)[1], unsegmented[1], rtol=1e-6, atol=1e-6)
    with pytest.raises(ag.BindingError, match="build it with segments > 0"):
        ag.trace(models.get("bert", tiny=True, vocab=VOCAB), tokens=tokens, segment_ids=segments)
