"""The README's tour runs as written."""
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_tour_runs(tmp_path, monkeypatch):
    code = re.search(r"## A short tour\n\n```python\n(.*?)```", README.read_text(), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(code, str(README), "exec"), namespace)
    assert (tmp_path / "encoder.svg").read_text().lstrip().startswith("<?xml")
    assert namespace["y"].shape == (2, 10, 64)
    assert namespace["dx"].shape == (3,)


def test_readme_training_example_learns(tmp_path, monkeypatch):
    code = re.search(r"## Training\n\n```python\n(.*?)```", README.read_text(), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(code, str(README), "exec"), namespace)
    history = namespace["history"]
    assert len(history) == 150
    assert history[-1]["loss"] < 0.1 * history[0]["loss"]          # counting is learnt
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["last.npz"]     # one file: the whole checkpoint
