"""GPT: causality, weight tying, and sampling (temperature, top-k, greedy) reproducible from a seed."""
import numpy as np
import pytest

import attngraph as ag
from attngraph import models
from attngraph.models.gpt import sample


@pytest.fixture(scope="module")
def gpt():
    return models.get("gpt", tiny=True)


def test_changing_a_future_token_leaves_earlier_logits_unchanged(gpt):
    logits_of = ag.trace(gpt, tokens=ag.Input(("B", "T"), "int64")).compile()
    tokens = np.array([[4, 5, 6, 7, 8, 9]])
    changed = tokens.copy()
    changed[0, 3] = 11
    before, after = logits_of(tokens=tokens), logits_of(tokens=changed)
    np.testing.assert_array_equal(before[:, :3], after[:, :3])
    assert not np.allclose(before[:, 3], after[:, 3])


def test_tied_weights_reuse_the_token_embedding_as_output_map():
    tied, untied = models.get("gpt", tiny=True), models.get("gpt", tiny=True, tie_weights=False)
    names = {name for name, _ in tied.named_parameters()}
    assert "out.weight" not in names and "out.weight" in {name for name, _ in untied.named_parameters()}
    assert untied.num_parameters() - tied.num_parameters() == 12 * 16
    tokens = np.array([[4, 5, 6]])
    hidden = ag.trace(lambda tokens: tied.transformer(tied.positions(tied.token_embed(tokens)), causal=True),
                      tokens=tokens).compile()(tokens=tokens)
    logits = ag.trace(tied, tokens=tokens).compile()(tokens=tokens)
    np.testing.assert_allclose(logits, hidden @ tied.token_embed.weight.data.T, rtol=1e-5, atol=1e-6)


def test_generation_is_reproducible_from_its_seed_and_greedy_is_top_1(gpt):
    prompt = np.array([[4, 5], [7, 9]])
    first = gpt.generate(prompt, 20, temperature=2.0, seed=3)
    assert first.shape == (2, 22) and np.array_equal(first[:, :2], prompt)     # beyond max_length = 16
    np.testing.assert_array_equal(first, gpt.generate(prompt, 20, temperature=2.0, seed=3))
    assert not np.array_equal(first, gpt.generate(prompt, 20, temperature=2.0, seed=4))
    greedy = gpt.generate(prompt, 6, temperature=0)
    np.testing.assert_array_equal(greedy, gpt.generate(prompt, 6, top_k=1, seed=5))


def test_sampling_follows_the_tempered_softmax_over_the_top_k(rng):
    logits = np.log(np.array([[0.1, 0.2, 0.3, 0.4]] * 20000))
    draws = sample(logits, rng, temperature=0.5, top_k=3)
    kept = np.array([0.2, 0.3, 0.4]) ** 2                                     # p^(1/T), renormalized
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / len(draws), [0, *kept / kept.sum()], atol=0.01)


def test_alibi_replaces_the_position_table_and_stays_causal():
    model = models.get("gpt", tiny=True, positions="alibi")
    assert model.positions is None and not any("positions" in name for name, _ in model.named_parameters())
    logits_of = ag.trace(model, tokens=ag.Input(("B", "T"), "int64")).compile()
    tokens = np.array([[4, 5, 6, 7, 8]])
    changed = tokens.copy()
    changed[0, 2] = 9
    before, after = logits_of(tokens=tokens), logits_of(tokens=changed)
    np.testing.assert_array_equal(before[:, :2], after[:, :2])
    assert not np.allclose(before[:, 2:], after[:, 2:])


def test_grouped_query_gpt_shares_keys_and_values_between_heads():
    model = models.get("gpt", tiny=True, heads=4, kv_heads=2)
    attention = model.transformer.layers[0].self_attn
    assert (attention.heads, attention.kv_heads) == (4, 2)
    assert attention.w_k.weight.shape == attention.w_v.weight.shape == (16, 8)      # 2 heads of 16 / 4
    assert model.generate(np.array([3, 4]), 3, temperature=0).shape == (5,)
