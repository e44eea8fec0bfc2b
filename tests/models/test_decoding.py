"""Cached decoding for GPT.generate: the step graph's logits are the full graph's, and greedy decoding gives
today's uncached tokens (every position recomputed from the window of the last max_length tokens) over several
prompts and lengths, past max_length too, with learned positions, ALiBi and grouped-query attention."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.models import GPT


def uncached(model, prompt, new_tokens):
    """Greedy decoding as generate did before the cache: the whole window through the full graph per token."""
    tokens = np.atleast_2d(prompt)
    logits_of = ag.trace(model, tokens=ag.Input((len(tokens), "T"), "int64")).compile()
    for _ in range(new_tokens):
        logits = logits_of(tokens=tokens[:, -model.max_length:])[:, -1]
        tokens = np.concatenate([tokens, logits.argmax(-1)[:, None]], axis=1)
    return tokens if np.ndim(prompt) == 2 else tokens[0]


SETTINGS = {"learned": {}, "alibi": {"positions": "alibi"}, "gqa": {"heads": 4, "kv_heads": 2},
            "mqa_alibi": {"heads": 4, "kv_heads": 1, "positions": "alibi"}}


@pytest.fixture(scope="module", params=list(SETTINGS))
def model(request):
    settings = {"heads": 2, **SETTINGS[request.param]}
    return GPT(vocab=11, d_model=16, layers=2, d_ff=32, max_length=8, dropout=0.0, rng=np.random.default_rng(1),
               **settings).eval()


@pytest.mark.parametrize("length, new_tokens", [(1, 4), (3, 5), (6, 2), (5, 7), (8, 3)])
def test_greedy_tokens_are_the_uncached_ones(model, length, new_tokens):
    """(6, 2) ends at max_length; (5, 7), (8, 3) go past it and slide the window."""
    prompt = np.random.default_rng(length).integers(0, 11, (2, length))
    expected = uncached(model, prompt, new_tokens)
    np.testing.assert_array_equal(model.generate(prompt, new_tokens, temperature=0), expected)


def test_one_prompt_and_sampling_are_as_before(model):
    prompt = np.array([3, 1, 4])
    np.testing.assert_array_equal(model.generate(prompt, 4, temperature=0), uncached(model, prompt, 4))
    assert model.generate(prompt, 5, seed=3).tolist() == model.generate(prompt, 5, seed=3).tolist()


def test_the_step_gives_the_full_graphs_logits_and_caches(model):
    tokens = np.random.default_rng(0).integers(0, 11, (2, 6))
    prefill, step = model.decoders(2)
    full_logits, *full_caches = prefill(tokens=tokens)
    _, *caches = prefill(tokens=tokens[:, :5])
    grown = [np.concatenate([c, np.zeros_like(c[:, :, :1])], axis=2) for c in caches]
    names = [f"{kind}{i}" for i in range(2) for kind in "kv"]
    logits, *updated = step(tokens=tokens[:, 5:], **dict(zip(names, grown)))
    np.testing.assert_allclose(logits[:, 0], full_logits[:, 5], rtol=1e-5, atol=1e-5)
    attention = model.transformer.layers[0].self_attn
    assert updated[0].shape == (2, attention.kv_heads, 6, 16 // attention.heads)
    for got, expected in zip(updated, full_caches):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_bad_input_raises_what_it_raised_before():
    model = GPT(vocab=11, d_model=16, heads=2, layers=1, d_ff=32, max_length=8, dropout=0.0).eval()
    with pytest.raises(ag.errors.BindingError, match="vocabulary"):
        model.generate(np.array([[3, 11]]), 2)
    with pytest.raises(ValueError):
        model.generate(np.array([[3, 1]]), -1)
    with pytest.raises(ValueError):
        GPT(vocab=11, d_model=16, heads=4, kv_heads=3)
    with pytest.raises(ValueError):
        GPT(vocab=11, positions="rotary")
