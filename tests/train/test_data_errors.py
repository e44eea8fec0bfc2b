"""Hostile inputs to the data loaders: every bad corpus, fraction, id or download raises DataError
with a message naming what is wrong, and good data around the bad cases is read as before."""
import http.client
import zipfile

import numpy as np
import pytest

from attngraph.errors import DataError
from attngraph.train.data import (Addition, CharCorpus, Copy, Dates, LabelledText, Sort, Vocabulary, pad_documents,
                                  pad_sequences, read_labelled_text, tinyshakespeare)
from attngraph.train.data import text as text_module


def write_files(root, files: dict) -> None:
    for name, data in files.items():
        path = root / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def zip_files(path, files: dict):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


GOOD_FOLDERS = {"reviews/pos/a.txt": b"great .\n", "reviews/neg/b.txt": b"dull .\n"}
GOOD_LINES = {"corpus/rt.pos": b"good\nfine\n", "corpus/rt.neg": b"bad\nworse\n"}


@pytest.mark.parametrize("extra, match", [
    ({"reviews/notes.txt": b"my notes\n"}, "notes.txt lies beside the class folders"),
    ({"reviews/pos/more/c.txt": b"deep .\n"}, "pos/a.txt lies beside the class folders"),
    ({"reviews/neutral/": b""}, "class folder neutral holds no text files"),
    ({"reviews/pos/empty.txt": b" \n\n"}, "pos/empty.txt holds no text"),
    ({"reviews/pos/photo.txt": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"}, "photo.txt is not a text file"),
    ({"reviews/neg/utf16.txt": "bad .\n".encode("utf-16")}, "utf16.txt is not a text file"),
    ({"other/pos/c.txt": b"x\n"}, "two class folders are named 'pos'"),
])
def test_a_bad_folder_corpus_names_the_culprit(tmp_path, extra, match):
    write_files(tmp_path, {**GOOD_FOLDERS, **extra})
    root = tmp_path if extra.keys() & {"other/pos/c.txt"} else tmp_path / "reviews"
    with pytest.raises(DataError, match=match):
        read_labelled_text(root)


@pytest.mark.parametrize("extra, match", [
    ({"corpus/rt.neutral": b"\n  \n"}, "rt.neutral holds no text"),
    ({"corpus/rt.neg": b""}, "rt.neg holds no text"),
    ({"corpus/image.png": b"\x89PNG\x00"}, "image.png is not a text file"),
])
def test_a_bad_line_corpus_names_the_culprit(tmp_path, extra, match):
    write_files(tmp_path, {**GOOD_LINES, **extra})
    with pytest.raises(DataError, match=match):
        read_labelled_text(tmp_path / "corpus")


def test_what_is_skipped_and_how_text_is_decoded(tmp_path):
    write_files(tmp_path, {**GOOD_FOLDERS, "reviews/README.md": b"about", "reviews/.DS_Store": b"\x00\x01",
                           "reviews/__MACOSX/pos/._a.txt": b"\x00", "reviews/.git/": b"",
                           "reviews/pos/bom.txt": "\ufeffcafé\n".encode("utf-8"),
                           "reviews/neg/latin.txt": "naïve\n".encode("latin-1")})
    data = read_labelled_text(tmp_path / "reviews")
    assert data.classes == ["neg", "pos"]
    assert data.texts == ["dull .\n", "naïve\n", "great .\n", "café\n"]


def test_the_movie_review_layout_in_a_zip_with_folder_entries(tmp_path):
    path = zip_files(tmp_path / "m.zip", {"m/": b"", "m/neg/": b"", "m/pos/": b"", "m/README": b"x",
                                          "m/neg/a.txt": b"bad\n", "m/pos/b.txt": b"good\n"})
    np.testing.assert_array_equal(read_labelled_text(path).labels, [0, 1])
    path = zip_files(tmp_path / "e.zip", {"m/neg/a.txt": b"bad\n", "m/pos/b.txt": b"good\n", "m/neutral/": b""})
    with pytest.raises(DataError, match="m/neutral holds no text files"):
        read_labelled_text(path)


def encrypt(path):
    """Mark every member of the zip at ``path`` encrypted (zipfile cannot write encrypted archives)."""
    data = bytearray(path.read_bytes())
    for signature, flags in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(signature)
        while at >= 0:
            data[at + flags] |= 1
            at = data.find(signature, at + 1)
    path.write_bytes(bytes(data))
    return path


def test_an_encrypted_zip(tmp_path):
    path = encrypt(zip_files(tmp_path / "c.zip", GOOD_LINES))
    assert all(info.flag_bits & 1 for info in zipfile.ZipFile(path).infolist())
    with pytest.raises(DataError, match="c.zip is encrypted .*extract it"):
        read_labelled_text(path)


@pytest.mark.parametrize("damage", ["truncated", "corrupt member", "not a zip", "empty file", "missing", "folder"])
def test_an_unreadable_archive(tmp_path, damage):
    path = zip_files(tmp_path / "c.zip", {name: data * 200 for name, data in GOOD_LINES.items()})
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif damage == "corrupt member":
        at = data.find(b"PK\x03\x04") + 30 + len("corpus/rt.pos") + 5     # inside the first compressed member
        path.write_bytes(data[:at] + bytes(b ^ 0xFF for b in data[at:at + 8]) + data[at + 8:])
    elif damage == "not a zip":
        path.write_text("good film\n")
    elif damage == "empty file":
        path.write_bytes(b"")
    elif damage == "missing":
        path.unlink()
    else:
        path.unlink()
        path.mkdir()
    with pytest.raises(DataError, match="c.zip"):
        read_labelled_text(path)


@pytest.mark.parametrize("texts, labels, classes, match", [
    (["a", "b"], [0], ["x", "y"], "2 texts need as many integer labels"),
    (["a", "b"], [0.0, 1.0], ["x", "y"], "integer labels"),
    (["a", "b"], [[0, 1]], ["x", "y"], "integer labels"),
    (["a", "b"], [0, 2], ["x", "y"], "labels must index the 2 classes"),
    (["a", "b"], [-1, 0], ["x", "y"], "labels must index the 2 classes"),
])
def test_labelled_text_checks_its_labels(texts, labels, classes, match):
    with pytest.raises(DataError, match=match):
        LabelledText(texts, np.array(labels), classes)


@pytest.fixture
def ten():
    return LabelledText([f"t{i}" for i in range(10)], np.arange(10) % 2, ["even", "odd"])


@pytest.mark.parametrize("heldout, match", [
    (0, "strictly between 0 and 1"), (1, "strictly between 0 and 1"), (-0.1, "strictly between 0 and 1"),
    (1.5, "strictly between 0 and 1"), (float("nan"), "strictly between 0 and 1"),
    (0.01, "leaves a part empty"), (0.97, "leaves a part empty"),
])
def test_bad_split_fractions(ten, heldout, match):
    with pytest.raises(DataError, match=match):
        ten.split(heldout)


@pytest.mark.parametrize("heldout, sizes", [(0.1, (9, 1)), (0.5, (5, 5)), (0.9, (1, 9))])
def test_good_split_fractions(ten, heldout, sizes):
    train, test = ten.split(heldout, seed=3)
    assert (len(train), len(test)) == sizes and sorted(train.texts + test.texts) == sorted(ten.texts)


def test_a_single_example_cannot_be_split():
    with pytest.raises(DataError, match="holding out 0.5 of 1 examples leaves a part empty"):
        LabelledText(["only"], np.array([0]), ["a", "b"]).split(0.5)


@pytest.mark.parametrize("ids", [[5], [-1], [0, 1, 99], np.array([[4]])])
def test_decode_rejects_ids_outside_the_vocabulary(ids):
    vocab = Vocabulary(["a", "b"])           # ids 0..3
    with pytest.raises(DataError, match="ids run from 0 to 3"):
        vocab.decode(ids)


@pytest.mark.parametrize("ids", [[2.7, 3.9], np.array([1.0]), ["1"]])
def test_decode_rejects_ids_that_are_not_integers(ids):
    with pytest.raises(DataError, match="ids must be integers"):
        Vocabulary(["a", "b"]).decode(ids)


def test_decode_accepts_every_id_in_range():
    vocab = Vocabulary(["a", "b"])
    assert vocab.decode(np.array([3, 2, 1, 0])) == ["b", "a", "<unk>", "<pad>"]
    assert vocab.decode(iter([2, 0]), skip=["<pad>"]) == ["a"]


@pytest.mark.parametrize("options, match", [
    (dict(min_count=0), "min_count must be at least 1"), (dict(min_count=-2), "min_count must be at least 1"),
    (dict(max_size=1), "max_size 1 leaves no room for the 2 specials"),
])
def test_vocabulary_limits(options, match):
    with pytest.raises(DataError, match=match):
        Vocabulary.build([["a", "b"]], **options)


def test_vocabulary_max_size_counts_the_specials():
    assert len(Vocabulary.build([["a", "b", "b"]], max_size=2)) == 2
    assert Vocabulary.build([["a", "b", "b"]], max_size=3).symbols == ["<pad>", "<unk>", "b"]
    with pytest.raises(DataError, match="must be distinct"):
        Vocabulary(["a", "<pad>"])


@pytest.mark.parametrize("text, fraction, match", [
    ("", 0.9, "0 characters"), ("abc", 0.2, "3 characters split at 0.2 leaves a split empty"),
    ("abcdef", 0.0, "strictly between 0 and 1"), ("abcdef", 1.0, "strictly between 0 and 1"),
    ("abcdef", -0.5, "strictly between 0 and 1"), ("abcdef", 2, "strictly between 0 and 1"),
])
def test_char_corpus_needs_both_splits(text, fraction, match):
    with pytest.raises(DataError, match=match):
        CharCorpus.from_text(text, fraction)


@pytest.mark.parametrize("content, match", [
    (b"", "empty.txt: a text of 0 characters"), (b"\xff\xfe\x00a", "cannot read a UTF-8 text"),
    (None, "cannot read a UTF-8 text"),
])
def test_char_corpus_files(tmp_path, content, match):
    path = tmp_path / "empty.txt"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(DataError, match=match):
        CharCorpus.from_file(path)


def test_a_bom_is_not_a_character(tmp_path):
    (tmp_path / "t.txt").write_bytes("\ufeffab".encode("utf-8") + b"ab" * 20)
    assert CharCorpus.from_file(tmp_path / "t.txt").vocab.symbols == ["a", "b"]


@pytest.mark.parametrize("block, split, match", [
    (10, "val", "the val split has 10 characters, too few for windows of 10 \\+ 1"),
    (95, "train", "the train split has 90 characters"), (0, "train", "at least 1 character"),
    (4, "test", "split must be 'train' or 'val'"),
])
def test_windows_that_do_not_fit(block, split, match):
    with pytest.raises(DataError, match=match):
        CharCorpus.from_text("abcdefghij" * 10).batch(np.random.default_rng(0), 2, block, split)


@pytest.mark.parametrize("block, match", [(10, "the val split has 10"), (95, "the train split has 90"),
                                          (-3, "at least 1 character")])
def test_a_corpus_is_checked_for_windows_before_training(block, match):
    with pytest.raises(DataError, match=match):
        CharCorpus.from_text("abcdefghij" * 10).check(block)


def test_windows_that_just_fit():
    corpus = CharCorpus.from_text("abcdefghij" * 10)
    corpus.check(9)
    batch = corpus.batch(np.random.default_rng(0), 3, 9, "val")
    np.testing.assert_array_equal(batch["x"], np.tile(np.arange(9), (3, 1)))


SHAKESPEARE = b"First Citizen:\nBefore we proceed any further, hear me speak.\n"


@pytest.fixture
def genuine(monkeypatch):
    """Make ``SHAKESPEARE`` the file whose SHA-256 tinyshakespeare checks."""
    monkeypatch.setattr(text_module, "TINYSHAKESPEARE_SHA256", text_module._sha256(SHAKESPEARE))


def cut_connection(url):
    raise http.client.IncompleteRead(SHAKESPEARE[:10], len(SHAKESPEARE) - 10)


def interrupted(url):
    raise KeyboardInterrupt


@pytest.mark.parametrize("fetch, match", [
    (cut_connection, "IncompleteRead"), (lambda url: SHAKESPEARE[:20], "SHA-256 mismatch"),
    (lambda url: b"", "SHA-256 mismatch"),
])
def test_an_interrupted_download_leaves_nothing(tmp_path, genuine, fetch, match):
    with pytest.raises(DataError, match=match):
        tinyshakespeare(tmp_path, fetch=fetch)
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_during_a_download_leaves_nothing(tmp_path, genuine):
    with pytest.raises(KeyboardInterrupt):
        tinyshakespeare(tmp_path, fetch=interrupted)
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_write_leaves_no_file(tmp_path, genuine, monkeypatch):
    def replace(source, target):
        raise KeyboardInterrupt
    monkeypatch.setattr(text_module.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        tinyshakespeare(tmp_path, fetch=lambda url: SHAKESPEARE)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("cached", [SHAKESPEARE[:30], b"", SHAKESPEARE + b"extra"])
def test_a_partial_cached_file_is_downloaded_again(tmp_path, genuine, cached):
    (tmp_path / "tinyshakespeare.txt").write_bytes(cached)
    path = tinyshakespeare(tmp_path, fetch=lambda url: SHAKESPEARE)
    assert path.read_bytes() == SHAKESPEARE and [p.name for p in tmp_path.iterdir()] == ["tinyshakespeare.txt"]
    assert tinyshakespeare(tmp_path, fetch=interrupted) == path        # complete now: no download


def test_a_partial_cached_file_offline_is_an_error_not_a_corpus(tmp_path, genuine):
    (tmp_path / "tinyshakespeare.txt").write_bytes(SHAKESPEARE[:30])
    with pytest.raises(DataError, match="Offline"):
        tinyshakespeare(tmp_path, fetch=cut_connection)


def test_a_cache_folder_that_cannot_be_written(tmp_path, genuine):
    (tmp_path / "file").write_text("")
    with pytest.raises(DataError, match="cannot save tinyshakespeare .*ATTNGRAPH_CACHE"):
        tinyshakespeare(tmp_path / "file" / "cache", fetch=lambda url: SHAKESPEARE)


@pytest.mark.parametrize("make, match", [
    (lambda: Copy(heldout=0), "heldout must lie strictly between 0 and 1"),
    (lambda: Copy(heldout=1), "heldout must lie strictly between 0 and 1"),
    (lambda: Sort(heldout=-0.2), "heldout must lie strictly between 0 and 1"),
    (lambda: Addition(heldout=1.5), "heldout must lie strictly between 0 and 1"),
    (lambda: Copy(max_length=0), "1 <= min_length <= max_length"),
    (lambda: Copy(min_length=5, max_length=2), "1 <= min_length <= max_length"),
    (lambda: Sort(symbols=0), "1 <= symbols <= 36"), (lambda: Sort(symbols=37), "1 <= symbols <= 36"),
    (lambda: Addition(digits=0), "at least 1 digit"),
    (lambda: Dates(start="1999-02-30"), "written yyyy-mm-dd"), (lambda: Dates(end="tomorrow"), "written yyyy-mm-dd"),
    (lambda: Dates(start="2000-01-02", end="2000-01-01"), "before start"),
    (lambda: Dates(formats=()), "at least one format"),
    (lambda: Dates(formats=("{day}",)), "not a template of format_date"),
    (lambda: Dates(formats=("{0}",)), "not a template of format_date"),
    (lambda: Dates(formats=("{d:q}",)), "not a template of format_date"),
    (lambda: Dates(start="1900-01-01"), "two-digit years"),
])
def test_bad_task_settings(make, match):
    with pytest.raises(DataError, match=match):
        make()


@pytest.mark.parametrize("n, split, match", [
    (-1, "train", "cannot draw -1 pairs"), (3, "test", "split must be one of"),
    (20, "heldout", "gave only .* of the 20 distinct heldout pairs .*ask for fewer"),
])
def test_bad_samples(n, split, match):
    with pytest.raises(DataError, match=match):
        Sort(symbols=2, max_length=2).sample(n, split, distinct=True)


def test_a_small_task_gives_all_it_has():
    task = Sort(symbols=3, max_length=3)            # 39 sources, 2 of them held out
    pairs = task.sample(37, "train", distinct=True) + task.sample(2, "heldout", distinct=True)
    assert len(set(pairs)) == 39 and sorted(map(len, dict(pairs))) == [1] * 3 + [2] * 9 + [3] * 27
    with pytest.raises(DataError, match="gave only 2 of the 3 distinct heldout pairs"):
        task.sample(3, "heldout", distinct=True)
    assert task.sample(0) == []


@pytest.mark.parametrize("call, match", [
    (lambda: pad_sequences([[1, 2]], length=-1), "length must be 0 or more"),
    (lambda: pad_documents([[[1]]], sentences=-2), "sentences must be 0 or more"),
    (lambda: pad_documents([[[1]]], words=-1), "words must be 0 or more"),
])
def test_negative_padding_sizes(call, match):
    with pytest.raises(DataError, match=match):
        call()


def test_zero_padding_sizes_are_empty():
    ids, mask = pad_sequences([[1, 2], []], length=0)
    assert ids.shape == mask.shape == (2, 0)
    ids, _, sentence_mask = pad_documents([[[1]], []], sentences=0)
    assert ids.shape == (2, 0, 1) and sentence_mask.shape == (2, 0)
