"""Generation and decoding refuse bad arguments before anything is traced, and sample without NaN."""
import numpy as np
import pytest

import attngraph as ag
from attngraph import models
from attngraph.models import gpt as gpt_module
from attngraph.models import seq2seq, transformer
from attngraph.models.bert import mask_tokens
from attngraph.models.gpt import sample

VOCAB = 12          # the tiny configurations' vocabulary; the tiny GPT and transformer have 16 positions
PROMPT = np.array([[4, 5, 6]])


@pytest.fixture(scope="module")
def gpt():
    return models.get("gpt", tiny=True).eval()


@pytest.fixture
def untraceable(monkeypatch):
    """Make tracing fail: a check that passes would reach it, so a test sees that checks come first."""
    def trace(*args, **kwargs):
        raise AssertionError("traced before the arguments were checked")
    for module in (gpt_module, transformer, seq2seq):
        monkeypatch.setattr(module, "trace", trace)


# id: (generate's arguments besides the prompt, the error, a pattern its message must match)
BAD_PROMPTS = {
    "float tokens": (np.array([[4.0, 5.0]]), ag.DTypeError, r"prompt must hold integer token ids, got dtype float64"),
    "bool tokens": (np.array([[True, False]]), ag.DTypeError, r"got dtype bool"),
    "string tokens": (np.array([["a", "b"]]), ag.DTypeError, r"got dtype <U1"),
    "one token id": (np.int64(4), ag.ShapeError, r"prompt must be a non-empty 1 or 2-d array .*got shape \(\)"),
    "3-d": (np.zeros((1, 2, 3), np.int64), ag.ShapeError, r"got shape \(1, 2, 3\)"),
    "empty list": ([], ag.ShapeError, r"non-empty .* got shape \(0,\)"),
    "no tokens": (np.zeros((2, 0), np.int64), ag.ShapeError, r"got shape \(2, 0\)"),
    "no rows": (np.zeros((0, 3), np.int64), ag.ShapeError, r"got shape \(0, 3\)"),
    "ragged rows": ([[4, 5], [6]], ag.ShapeError, r"prompt must be an array of token ids"),
    "negative id": (np.array([[4, -1]]), ag.BindingError, r"token id -1, outside the model's vocabulary \[0, 12\)"),
    "id = vocab": (np.array([[4, 12]]), ag.BindingError, r"token id 12, outside .*\[0, 12\)"),
    "huge unsigned id": (np.array([[2 ** 63 + 5]], np.uint64), ag.BindingError, r"token id 9223372036854775813"),
}


@pytest.mark.parametrize("case", BAD_PROMPTS)
def test_a_bad_prompt_is_refused_before_tracing(case, gpt, untraceable):
    prompt, error, message = BAD_PROMPTS[case]
    with pytest.raises(error, match=message):
        gpt.generate(prompt, 3)


BAD_SETTINGS = {
    "new_tokens -1": (dict(new_tokens=-1), ValueError, r"new_tokens must be an int >= 0, got -1"),
    "new_tokens 2.0": (dict(new_tokens=2.0), TypeError, r"new_tokens must be an int, got 2\.0"),
    "new_tokens None": (dict(new_tokens=None), TypeError, r"new_tokens must be an int, got None"),
    "temperature -1": (dict(temperature=-1.0), ValueError, r"temperature must be a finite number >= 0, got -1\.0"),
    "temperature nan": (dict(temperature=float("nan")), ValueError, r"temperature must be .*, got nan"),
    "temperature inf": (dict(temperature=float("inf")), ValueError, r"temperature must be .*, got inf"),
    "temperature str": (dict(temperature="hot"), TypeError, r"temperature must be a number, got 'hot'"),
    "temperature None": (dict(temperature=None), TypeError, r"temperature must be a number, got None"),
    "top_k 0": (dict(top_k=0), ValueError, r"top_k must be an int in \[1, 12\], got 0"),
    "top_k -3": (dict(top_k=-3), ValueError, r"top_k must be an int in \[1, 12\], got -3"),
    "top_k beyond vocab": (dict(top_k=13), ValueError, r"top_k must be an int in \[1, 12\], got 13"),
    "top_k 2.0": (dict(top_k=2.0), TypeError, r"top_k must be an int, got 2\.0"),
    "top_k True": (dict(top_k=True), TypeError, r"top_k must be an int, got True"),
    "seed -1": (dict(seed=-1), ValueError, r"seed must be an int >= 0, got -1"),
    "seed 1.5": (dict(seed=1.5), TypeError, r"seed must be an int, got 1\.5"),
    "seed str": (dict(seed="0"), TypeError, r"seed must be an int, got '0'"),
}


@pytest.mark.parametrize("case", BAD_SETTINGS)
def test_a_bad_setting_is_refused_before_tracing(case, gpt, untraceable):
    settings, error, message = BAD_SETTINGS[case]
    with pytest.raises(error, match=message):
        gpt.generate(PROMPT, **{"new_tokens": 3, **settings})


def test_a_prompt_of_one_row_gives_one_row_and_zero_new_tokens_give_the_prompt(gpt):
    one = gpt.generate(PROMPT[0], 4, seed=2)
    assert one.shape == (7,) and one.dtype == np.int64
    np.testing.assert_array_equal(one, gpt.generate(PROMPT, 4, seed=2)[0])
    np.testing.assert_array_equal(gpt.generate([4, 5, 6], 0), [4, 5, 6])
    assert ((one >= 0) & (one < VOCAB)).all()


def test_a_prompt_longer_than_the_positions_slides_the_window(gpt):
    prompt = np.arange(20)[None] % (VOCAB - 4) + 4                         # 20 tokens, 16 positions
    out = gpt.generate(prompt, 3, temperature=0)
    window = ag.trace(gpt, tokens=prompt[:, -16:]).compile()(tokens=prompt[:, -16:])
    assert out.shape == (1, 23) and out[0, 20] == window[0, -1].argmax()


def test_a_tiny_temperature_is_greedy_not_nan(gpt):
    greedy = gpt.generate(PROMPT, 5, temperature=0)
    np.testing.assert_array_equal(gpt.generate(PROMPT, 5, temperature=1e-300, seed=1), greedy)


def test_top_k_of_the_whole_vocabulary_is_plain_sampling(gpt):
    np.testing.assert_array_equal(gpt.generate(PROMPT, 6, top_k=VOCAB, seed=9), gpt.generate(PROMPT, 6, seed=9))


@pytest.mark.parametrize("row", [[np.nan, 1.0, 2.0], [np.inf, 1.0, 2.0], [-np.inf] * 3],
                         ids=["nan", "+inf", "all -inf"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_sampling_logits_that_are_not_a_distribution_is_refused(row, temperature):
    logits = np.array([[0.0, 1.0, 2.0], row])
    with pytest.raises(ag.NonFiniteError, match="nothing to sample from"):
        sample(logits, np.random.default_rng(0), temperature)


def test_masked_logits_are_never_drawn():
    logits = np.array([[-np.inf, 0.0, -np.inf, 0.5]] * 2000)
    draws = sample(logits, np.random.default_rng(0), temperature=3.0)
    assert set(np.unique(draws)) == {1, 3}


@pytest.mark.parametrize("name", ["transformer", "seq2seq-bahdanau", "seq2seq-luong"])
@pytest.mark.parametrize("src, max_length, error, message", [
    (np.array([[4.5, 5.0]]), 4, ag.DTypeError, r"src must hold integer token ids"),
    (np.array([4, 5]), 4, ag.ShapeError, r"src must be a non-empty 2-d array of token ids, got shape \(2,\)"),
    (np.array([[4, 12]]), 4, ag.BindingError, r"src holds token id 12, outside the model's vocabulary \[0, 1[02]\)"),
    (np.array([[4, 5]]), 0, ValueError, r"max_length must be an int"),
    (np.array([[4, 5]]), 3.0, TypeError, r"max_length must be an int, got 3\.0"),
], ids=["float", "1-d", "out of vocabulary", "max_length 0", "max_length 3.0"])
def test_greedy_decoding_refuses_bad_arguments_before_tracing(name, src, max_length, error, message, untraceable):
    with pytest.raises(error, match=message):
        models.get(name, tiny=True).greedy_decode(src, max_length)


def test_the_transformer_decodes_at_most_as_many_tokens_as_it_has_positions(untraceable):
    with pytest.raises(ValueError, match=r"max_length must be an int in \[1, 16\], got 17"):
        models.get("transformer", tiny=True).greedy_decode(np.array([[4, 5]]), 17)


@pytest.mark.parametrize("probability, vocab, error, message", [
    (1.5, VOCAB, ValueError, r"probability must be a probability in \[0, 1\], got 1\.5"),
    (-0.1, VOCAB, ValueError, r"probability must be a probability in \[0, 1\], got -0\.1"),
    (float("nan"), VOCAB, ValueError, r"got nan"),
    ("0.15", VOCAB, TypeError, r"probability must be a number, got '0\.15'"),
    (0.15, 4, ValueError, r"vocab must be an int >= 5, got 4"),
], ids=["1.5", "-0.1", "nan", "str", "vocab 4"])
def test_masking_for_bert_refuses_bad_settings(probability, vocab, error, message):
    with pytest.raises(error, match=message):
        mask_tokens(np.array([[4, 5, 6]]), np.random.default_rng(0), vocab, probability)


def test_masking_every_token_selects_every_ordinary_token():
    tokens = np.array([[0, 1, 4, 5, 6, 7, 2, 0]])
    inputs, targets = mask_tokens(tokens, np.random.default_rng(0), VOCAB, probability=1.0)
    ordinary = tokens >= 4
    np.testing.assert_array_equal(targets, np.where(ordinary, tokens, -100))
    np.testing.assert_array_equal(inputs[~ordinary], tokens[~ordinary])
