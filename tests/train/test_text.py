"""Character-level corpora and the tinyshakespeare download (never over the network here)."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.train.data import CharCorpus, tinyshakespeare
from attngraph.train.data import text as text_module


def test_a_corpus_is_split_90_10_over_its_characters():
    corpus = CharCorpus.from_text("abcabcabca" * 10)
    assert corpus.vocab.symbols == ["a", "b", "c"]
    assert (len(corpus.train), len(corpus.val)) == (90, 10)
    assert corpus.decode(corpus.val) == "abcabcabca"


def test_windows_and_their_next_characters():
    corpus = CharCorpus.from_text("".join(chr(ord("a") + i % 26) for i in range(1000)))
    batch = corpus.batch(np.random.default_rng(0), size=5, block=8)
    assert batch["x"].shape == batch["y"].shape == (5, 8)
    np.testing.assert_array_equal(batch["x"][:, 1:], batch["y"][:, :-1])
    np.testing.assert_array_equal((batch["y"] - batch["x"]) % 26, 1)
    with pytest.raises(ValueError, match="too few"):
        corpus.batch(np.random.default_rng(0), size=1, block=100, split="val")


def test_from_file_reads_utf8_and_names_a_bad_path(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("héllo wörld\n" * 10, encoding="utf-8")
    assert "ö" in CharCorpus.from_file(path).vocab
    with pytest.raises(ag.AttnGraphError, match="cannot read"):
        CharCorpus.from_file(tmp_path / "missing.txt")


def test_tinyshakespeare_corpus(shared_data):
    corpus = CharCorpus.from_file(shared_data("tinyshakespeare.txt"))
    assert len(corpus.vocab) == 65
    assert (len(corpus.train), len(corpus.val)) == (1_003_854, 111_540)


def offline(url):
    raise OSError("[Errno -3] Temporary failure in name resolution")


def test_download_offline_says_what_to_do(tmp_path):
    with pytest.raises(ag.AttnGraphError, match="Offline.*--text PATH"):
        tinyshakespeare(tmp_path, fetch=offline)
    assert not list(tmp_path.iterdir())


def test_a_wrong_download_is_not_kept(tmp_path):
    with pytest.raises(ag.AttnGraphError, match="SHA-256"):
        tinyshakespeare(tmp_path, fetch=lambda url: b"not shakespeare")
    assert not list(tmp_path.iterdir())


def test_a_cached_copy_is_used_without_a_download(shared_data, tmp_path):
    data = shared_data("tinyshakespeare.txt").read_bytes()
    (tmp_path / "tinyshakespeare.txt").write_bytes(data)
    assert tinyshakespeare(tmp_path, fetch=offline).read_bytes() == data


def test_a_good_download_is_cached(shared_data, tmp_path):
    data = shared_data("tinyshakespeare.txt").read_bytes()
    urls = []
    path = tinyshakespeare(tmp_path / "cache", fetch=lambda url: urls.append(url) or data)
    assert urls == [text_module.TINYSHAKESPEARE_URL] and path.read_bytes() == data
    assert [p.name for p in path.parent.iterdir()] == ["tinyshakespeare.txt"]
