"""ops.cpu clears numba's cache of its kernels, the generated ones' included, when any of its sources changes: a
kernel inlines helpers of other files (mathfn.py's, recurrence.py's ``bmm``), which numba's own key does not see."""
import ops.cpu


def make_package(tmp_path, source="x = 1\n"):
    (tmp_path / "mathfn.py").write_text(source)
    (tmp_path / "recurrence.py").write_text("y = 1\n")
    cache = tmp_path / "__pycache__"
    (cache / "fused").mkdir(parents=True, exist_ok=True)
    for name in ("k.f-3.py311.nbi", "k.f-3.py311.1.nbc", "k.cpython-311.pyc", "fused/loop-1.py311.nbi"):
        (cache / name).write_text("")
    return cache


def cached(cache):
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*.nb?"))


def test_cache_is_cleared_only_when_a_source_changes(tmp_path):
    cache = make_package(tmp_path)
    ops.cpu._clear_cache_if_changed(tmp_path)
    assert not cached(cache) and sorted(p.name for p in cache.iterdir()) == ["fused", "k.cpython-311.pyc",
                                                                             "sources.sha256"]
    make_package(tmp_path)
    ops.cpu._clear_cache_if_changed(tmp_path)
    assert cached(cache) == ["fused/loop-1.py311.nbi", "k.f-3.py311.1.nbc", "k.f-3.py311.nbi"]

    for changed in ("mathfn.py", "recurrence.py"):
        make_package(tmp_path)
        (tmp_path / changed).write_text("z = 2\n")
        ops.cpu._clear_cache_if_changed(tmp_path)
        assert not cached(cache), changed


def test_unwritable_cache_is_left_alone(tmp_path):
    (tmp_path / "mathfn.py").write_text("x = 1\n")
    (tmp_path / "__pycache__").write_text("a file where the cache folder would be")
    ops.cpu._clear_cache_if_changed(tmp_path)
    ops.cpu._clear_cache_if_changed(tmp_path / "missing")
