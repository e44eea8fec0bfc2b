"""Every demo runs end to end in a smoke configuration (a few steps, little data) and writes every file it
promises, with metrics.json's fields present and in range. The figures of the full configurations are
measured by running the demos themselves (see each demo's docstring), not here."""
import importlib
import json
import math
import shutil
import xml.etree.ElementTree as ET

import pytest

from attngraph import cli
from attngraph.demos import DEFAULT, DEMOS

HAVE_DOT = shutil.which("dot") is not None
COMMON = ["metrics.json", "train.jsonl", "loss.svg", "graph.svg"]
SMOKE = {
    "copy": (["--steps", "3", "--heldout", "8", "--max-length", "5"], None, ["attention.svg"]),
    "dates": (["--steps", "2", "--heldout", "8"], None, [f"attention-{i}.svg" for i in range(1, 5)]),
    "sort": (["--steps", "3", "--heldout", "8", "--max-length", "4"], None, ["attention.svg"]),
    "shakespeare": (["--steps", "2", "--eval-windows", "16", "--sample-length", "12"],
                    ("--text", "tinyshakespeare.txt"), ["attention.svg"]),
    "polarity": (["--steps", "3", "--limit", "200"], ("--data", "sentence_polarity.zip"),
                 [f"attention-{i}.svg" for i in range(1, 5)]),
    "reviews": (["--steps", "2", "--limit", "40"], ("--data", "movie_reviews.zip"),
                ["attention-sentences.svg"] + [f"attention-words-{i}.svg" for i in range(1, 4)]),
    "recall": (["--steps", "3"], None, ["attention.svg"]),
    "captions": (["--steps", "2", "--heldout", "8"], None, [f"attention-{i}.svg" for i in range(1, 5)]),
}
HELDOUT = {"copy": "heldout_exact_match", "dates": "heldout_exact_match", "sort": "heldout_exact_match",
           "shakespeare": "val_loss", "polarity": "heldout_accuracy", "reviews": "heldout_accuracy",
           "recall": "heldout_accuracy", "captions": "heldout_exact_match"}


def test_registry_of_demos():
    assert DEFAULT == "copy"
    assert set(SMOKE) == set(DEMOS)
    for name in DEMOS:
        assert callable(importlib.import_module(f"attngraph.demos.{name}").main)


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_demo_smoke(name, tmp_path, shared_data, capsys):
    options, data, heatmaps = SMOKE[name]
    argv = ["--out", str(tmp_path / name), *options]
    if data:
        argv += [data[0], str(shared_data(data[1]))]
    returned = importlib.import_module(f"attngraph.demos.{name}").main(argv)
    out = tmp_path / name
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics == json.loads(json.dumps(returned))
    promised = COMMON + heatmaps
    assert sorted(metrics["files"]) == sorted(promised if HAVE_DOT else [f.replace("graph.svg", "graph.dot")
                                                                         for f in promised])
    for filename in metrics["files"]:
        assert (out / filename).stat().st_size > 0, filename
        if filename.endswith(".svg"):
            assert ET.parse(out / filename).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    for key in ("task", "model", "config", "steps", "wall_seconds", "final_train_loss", HELDOUT[name]):
        assert key in metrics, key
    assert metrics["demo"] == name
    assert metrics["steps"] == int(options[options.index("--steps") + 1])
    assert metrics["wall_seconds"] >= metrics["train_seconds"] > 0
    assert math.isfinite(metrics["final_train_loss"]) and metrics["final_train_loss"] > 0
    value = metrics[HELDOUT[name]]
    if name == "shakespeare":
        assert 0 < value < 10
        assert isinstance(metrics["sample"], str) and len(metrics["sample"]) == 12
    else:
        assert 0 <= value <= 1
    train_lines = (out / "train.jsonl").read_text().splitlines()
    assert sum(json.loads(line)["kind"] == "train" for line in train_lines) == metrics["steps"]
    assert '"heldout' in capsys.readouterr().out or name == "shakespeare"


def test_heatmap_shows_the_attention(tmp_path):
    """The copy demo's heatmap holds one cell per (layer, head, target, source) weight, each target row
    of each map summing to 1."""
    importlib.import_module("attngraph.demos.copy").main(
        ["--out", str(tmp_path), "--steps", "2", "--heldout", "20", "--max-length", "4"])
    svg = "{http://www.w3.org/2000/svg}"
    weights = [float(e.find(f"{svg}title").text.rsplit(":", 1)[1])
               for e in ET.parse(tmp_path / "attention.svg").getroot().iter(f"{svg}rect")
               if e.find(f"{svg}title") is not None]
    maps, source = 2 * 4, 4                 # layers x heads; the longest held-out source
    rows, rest = divmod(len(weights), maps * source)    # the symbols decoded (untrained: any), then </s>
    assert rest == 0 and rows >= 1
    assert sum(weights) == pytest.approx(maps * rows, abs=0.01 * maps * rows)


@pytest.mark.parametrize("argv", [
    ["demo", "polarity", "--data", "/no/such/file.zip", "--steps", "1"],
    ["demo", "reviews", "--data", "/no/such/folder", "--steps", "1"],
    ["demo", "shakespeare", "--text", "/no/such/file.txt", "--steps", "1"],
    ["demo", "polarity", "--steps", "1"],
])
def test_missing_data_is_a_usage_error(argv, tmp_path, capsys):
    assert cli.main([*argv, "--out", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err
    assert "not found" in error or "required" in error
    assert not (tmp_path / "run").exists()
