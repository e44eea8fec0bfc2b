"""ops.cpu clears numba's cache of its kernels when mathfn.py, which they inline, changes."""
import ops.cpu


def make_package(tmp_path, source="x = 1\n"):
    (tmp_path / "mathfn.py").write_text(source)
    cache = tmp_path / "__pycache__"
    cache.mkdir(exist_ok=True)
    for name in ("k.f-3.py311.nbi", "k.f-3.py311.1.nbc", "k.cpython-311.pyc"):
        (cache / name).write_text("")
    return cache


def test_cache_is_cleared_only_when_the_helpers_change(tmp_path):
    cache = make_package(tmp_path)
    ops.cpu._clear_cache_if_changed(tmp_path)
    assert sorted(p.name for p in cache.iterdir()) == ["k.cpython-311.pyc", "mathfn.py.sha256"]

    make_package(tmp_path)
    ops.cpu._clear_cache_if_changed(tmp_path)
    assert len(list(cache.glob("*.nb?"))) == 2

    make_package(tmp_path, "x = 2\n")
    ops.cpu._clear_cache_if_changed(tmp_path)
    assert not list(cache.glob("*.nb?"))


def test_unwritable_cache_is_left_alone(tmp_path):
    (tmp_path / "mathfn.py").write_text("x = 1\n")
    (tmp_path / "__pycache__").write_text("a file where the cache folder would be")
    ops.cpu._clear_cache_if_changed(tmp_path)
    ops.cpu._clear_cache_if_changed(tmp_path / "missing")
