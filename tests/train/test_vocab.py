"""Vocabularies: specials first, frequency order, limits, unknown symbols."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.train.data import Vocabulary


def test_build_ranks_by_count_then_symbol_and_applies_limits():
    sentences = [["b", "a", "c"], ["a", "c", "a"], ["d"]]
    vocab = Vocabulary.build(sentences)
    assert vocab.symbols == ["<pad>", "<unk>", "a", "c", "b", "d"]
    assert Vocabulary.build(sentences, min_count=2).symbols == ["<pad>", "<unk>", "a", "c"]
    assert Vocabulary.build(sentences, max_size=3).symbols == ["<pad>", "<unk>", "a"]


def test_encode_maps_unknown_symbols_to_unk_and_decode_skips():
    vocab = Vocabulary(["the", "cat"])
    ids = vocab.encode(["the", "dog", "cat"])
    np.testing.assert_array_equal(ids, [2, 1, 3])
    assert ids.dtype == np.int64
    assert vocab.decode([2, 1, 3, 0, 0], skip=["<pad>"]) == ["the", "<unk>", "cat"]
    assert len(vocab) == 4 and "cat" in vocab and "dog" not in vocab


def test_without_unk_an_unknown_symbol_is_an_error():
    vocab = Vocabulary("ab", specials=())
    np.testing.assert_array_equal(vocab.encode("abba"), [0, 1, 1, 0])
    with pytest.raises(ag.DataError, match="'z' is not in the vocabulary"):
        vocab.encode("abz")


def test_config_rebuilds_the_vocabulary_and_duplicates_are_refused():
    vocab = Vocabulary(["x", "y"], specials=("<pad>", "<s>"))
    assert Vocabulary(**vocab.config()).symbols == vocab.symbols
    with pytest.raises(ValueError, match="distinct"):
        Vocabulary(["<pad>"])
