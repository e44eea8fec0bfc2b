"""Synthetic tasks: what each generator produces, determinism, disjoint splits, and their batches."""
import numpy as np
import pytest

from attngraph.models import tokens
from attngraph.train.data import IGNORE, TASKS, Addition, Copy, Dates, Reverse, Sort


@pytest.mark.parametrize("task, check", [
    (Copy(), lambda s, t: t == s),
    (Reverse(), lambda s, t: t == s[::-1]),
    (Sort(), lambda s, t: t == "".join(sorted(s)) and sorted(s) == sorted(t)),
    (Addition(), lambda s, t: int(t) == sum(int(n) for n in s.split("+"))),
])
def test_each_target_follows_from_its_source(task, check):
    pairs = task.sample(300, seed=0)
    assert all(check(s, t) for s, t in pairs)
    assert all(set(s + t) <= set(task.alphabet) for s, t in pairs)


def test_symbol_sequences_have_the_asked_lengths_and_symbols():
    pairs = Sort(symbols=5, min_length=3, max_length=6).sample(500, seed=1)
    assert {len(s) for s, _ in pairs} == {3, 4, 5, 6}
    assert set("".join(s for s, _ in pairs)) == set("01234")
    assert Sort(symbols=12).sample(1, seed=2)[0][1] <= "bbbbbbbbbbbb"          # 0-9 sort before a, b
    with pytest.raises(ValueError, match="min_length"):
        Copy(min_length=5, max_length=4)


@pytest.mark.parametrize("task", [Copy(), Addition()])
def test_a_smaller_sample_is_the_start_of_a_larger_one(task):
    """Pairs are drawn in blocks (symbol tasks at once, others pair by pair): asking for more extends a sample."""
    assert task.sample(5, seed=7) == task.sample(3000, seed=7)[:5]
    assert task.sample(1500, "heldout", seed=7) == task.sample(1600, "heldout", seed=7)[:1500]
    lengths = np.bincount([len(s) for s, _ in Copy(max_length=4).sample(4000, seed=0)])
    assert lengths[0] == 0 and lengths[1:].min() > 0.2 * 4000


def test_addition_operands_have_one_to_digits_digits_without_leading_zeros():
    operands = [n for s, _ in Addition(digits=4).sample(2000, seed=0) for n in s.split("+")]
    lengths = np.bincount([len(n) for n in operands])
    assert list(np.nonzero(lengths)[0]) == [1, 2, 3, 4] and lengths[1:].min() > 0.2 * len(operands)
    assert not [n for n in operands if len(n) > 1 and n[0] == "0"]


@pytest.mark.parametrize("name", sorted(TASKS))
def test_sampling_is_deterministic_and_the_splits_disjoint(name):
    task = TASKS[name]()
    assert task.sample(50, seed=3) == task.sample(50, seed=3)
    assert task.sample(50, seed=3) != task.sample(50, seed=4)
    train = {task.key(*p) for p in task.sample(3000, "train", seed=0)}
    heldout = {task.key(*p) for p in task.sample(300, "heldout", seed=0)}
    assert not train & heldout


def test_the_heldout_fraction_and_distinct_samples():
    task = Reverse(symbols=10, max_length=6, heldout=0.2)
    rng = np.random.default_rng(0)
    splits = [task.split_of(*task.pair(rng)) for _ in range(5000)]
    assert 0.18 < splits.count("heldout") / 5000 < 0.22
    pairs = task.sample(400, "heldout", seed=1, distinct=True)
    assert len(set(pairs)) == 400
    with pytest.raises(ValueError, match="too few"):
        Copy(symbols=2, max_length=2).sample(7, distinct=True)      # 6 sources exist, fewer in train
    with pytest.raises(ValueError, match="split"):
        Copy().sample(1, "test")


def test_specials_are_the_models_token_ids():
    vocab = Copy().vocab
    assert [vocab.index[s] for s in ("<pad>", "<s>", "</s>", "<mask>")] == [tokens.PAD, tokens.BOS, tokens.EOS,
                                                                            tokens.MASK]
    assert vocab.index["0"] == tokens.FIRST and IGNORE == tokens.IGNORE


def test_encoder_decoder_batch_round_trips():
    task = Reverse()
    pairs = [("123", "321"), ("45", "54")]
    batch = task.batch(pairs)
    one, two, three = (task.vocab.index[c] for c in "123")
    np.testing.assert_array_equal(batch["src"][0], [one, two, three])
    np.testing.assert_array_equal(batch["tgt_in"][0], [tokens.BOS, three, two, one])
    np.testing.assert_array_equal(batch["tgt_out"][0], [three, two, one, tokens.EOS])
    np.testing.assert_array_equal(batch["tgt_out"][1][-1:], [tokens.PAD])
    assert [task.decode(row) for row in batch["tgt_out"]] == ["321", "54"]
    assert task.decode(batch["tgt_in"][1]) == "54"


def test_decoder_only_batch_asks_only_for_the_target():
    task = Sort()
    batch = task.decoder_batch([("31", "13"), ("2", "2")])
    ids = {c: task.vocab.index[c] for c in "123"}
    np.testing.assert_array_equal(batch["tokens"], [[ids["3"], ids["1"], tokens.BOS, ids["1"], ids["3"]],
                                                    [ids["2"], tokens.BOS, ids["2"], 0, 0]])
    np.testing.assert_array_equal(batch["targets"], [[IGNORE, IGNORE, ids["1"], ids["3"], tokens.EOS],
                                                     [IGNORE, ids["2"], tokens.EOS, IGNORE, IGNORE]])


def test_config_names_the_task_and_its_settings():
    assert Copy(symbols=8).config() == {"task": "copy", "heldout": 0.1, "symbols": 8, "min_length": 1,
                                        "max_length": 10}
    assert Dates().config()["start"] == "1950-01-01"
