"""Padding and masks (True = a real token, which may be attended to)."""
import numpy as np

from attngraph.train.data import pad_documents, pad_sequences


def test_pad_sequences_to_the_longest_row():
    ids, mask = pad_sequences([[5, 6, 7], [8], []])
    np.testing.assert_array_equal(ids, [[5, 6, 7], [8, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(mask, [[1, 1, 1], [1, 0, 0], [0, 0, 0]])
    assert ids.dtype == np.int64 and mask.dtype == bool


def test_pad_sequences_to_a_length_cuts_and_fills_with_a_value():
    ids, mask = pad_sequences([np.array([1, 2, 3, 4]), [9]], length=3, value=-100)
    np.testing.assert_array_equal(ids, [[1, 2, 3], [9, -100, -100]])
    np.testing.assert_array_equal(mask.sum(axis=1), [3, 1])
    assert pad_sequences([])[0].shape == (0, 0)


def test_pad_documents_gives_word_and_sentence_masks():
    documents = [[[1, 2], [3, 4, 5]], [[6]]]
    ids, words, sentences = pad_documents(documents)
    assert ids.shape == (2, 2, 3)
    np.testing.assert_array_equal(ids[0], [[1, 2, 0], [3, 4, 5]])
    np.testing.assert_array_equal(ids[1], [[6, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(words[1], [[1, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(sentences, [[1, 1], [1, 0]])
    ids, words, sentences = pad_documents(documents, sentences=1, words=2)
    np.testing.assert_array_equal(ids, [[[1, 2]], [[6, 0]]])
    np.testing.assert_array_equal(sentences, [[1], [1]])
