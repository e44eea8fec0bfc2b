"""Labelled text from a zip or a folder, in its two layouts, and the shared polarity corpora."""
import zipfile

import numpy as np
import pytest

import attngraph as ag
from attngraph.train.data import Vocabulary, read_labelled_text, sentences, tokenize


def write_files(root, files):
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


LINES = {"corpus/README.txt": b"about\n", "corpus/rt.pos": b"good film\n\nfine\n",
         "corpus/rt.neg": "caf\xe9 was bad\n".encode("latin-1")}
FOLDERS = {"reviews/README": b"about\n", "reviews/pos/a.txt": b"great .\nloved it .\n",
           "reviews/neg/b.txt": b"dull .\n", "reviews/neg/c.txt": b"bad .\n", "reviews/neg/.hidden": b"x"}


@pytest.mark.parametrize("as_zip", [False, True])
def test_one_file_per_class_gives_one_example_per_line(tmp_path, as_zip):
    write_files(tmp_path, LINES)
    path = tmp_path / "corpus"
    if as_zip:
        path = tmp_path / "corpus.zip"
        with zipfile.ZipFile(path, "w") as archive:
            for name, data in LINES.items():
                archive.writestr(name, data)
    data = read_labelled_text(path)
    assert data.classes == ["neg", "pos"]
    assert data.texts == ["café was bad", "good film", "fine"]
    np.testing.assert_array_equal(data.labels, [0, 1, 1])


def test_one_folder_per_class_gives_one_document_per_file(tmp_path):
    write_files(tmp_path, FOLDERS)
    data = read_labelled_text(tmp_path / "reviews")
    assert data.classes == ["neg", "pos"] and len(data) == 3
    np.testing.assert_array_equal(data.labels, [0, 0, 1])
    assert sentences(data.texts[2]) == ["great .", "loved it ."]


def test_unreadable_or_single_class_sources(tmp_path):
    with pytest.raises(ag.DataError, match="cannot read"):
        read_labelled_text(tmp_path / "missing.zip")
    write_files(tmp_path, {"one/only.pos": b"a\n"})
    with pytest.raises(ag.DataError, match="single class"):
        read_labelled_text(tmp_path / "one")


def test_split_is_seeded_and_disjoint(tmp_path):
    write_files(tmp_path, {"c/x.pos": b"".join(b"p%d\n" % i for i in range(50)),
                           "c/x.neg": b"".join(b"n%d\n" % i for i in range(50))})
    data = read_labelled_text(tmp_path / "c")
    train, test = data.split(heldout=0.1, seed=0)
    assert (len(train), len(test)) == (90, 10)
    assert not set(train.texts) & set(test.texts)
    assert test.texts == data.split(heldout=0.1, seed=0)[1].texts != data.split(heldout=0.1, seed=1)[1].texts
    assert [data.classes[label][0] for label in test.labels] == [text[0] for text in test.texts]


def test_tokenize_and_sentences():
    assert tokenize("It's a [garbus] film, isn't it?") == ["it's", "a", "[", "garbus", "]", "film", ",", "isn't",
                                                           "it", "?"]
    assert sentences("One. Two! Three? four") == ["One.", "Two!", "Three?", "four"]
    assert sentences("first line\n\nsecond line. still second\n") == ["first line", "second line. still second"]
    assert sentences("  \n") == []


def test_sentence_polarity_corpus(shared_data):
    data = read_labelled_text(shared_data("sentence_polarity.zip"))
    assert data.classes == ["neg", "pos"] and len(data) == 10_662
    assert np.bincount(data.labels).tolist() == [5331, 5331]
    vocab = Vocabulary.build((tokenize(t) for t in data.texts), min_count=2)
    assert vocab.symbols[:4] == ["<pad>", "<unk>", ".", "the"]
    assert len(vocab) == 10_305


def test_movie_review_corpus_splits_into_sentences(shared_data):
    data = read_labelled_text(shared_data("movie_reviews.zip"))
    assert data.classes == ["neg", "pos"] and np.bincount(data.labels).tolist() == [1000, 1000]
    counts = [len(sentences(doc)) for doc in data.texts]
    assert np.mean(counts) == pytest.approx(32.36) and (min(counts), max(counts)) == (1, 112)
