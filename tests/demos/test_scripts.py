"""Every script of demos/ (the public-API starting points a user copies) runs end to end on its tiny
configuration in a fresh interpreter: it takes the steps asked for, prints its metrics as the last line of JSON,
in range, and draws its graph and its attention as SVG."""
import json
import math
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from attngraph.demos import DEMOS

SCRIPTS = Path(__file__).parents[2] / "demos"
STEPS = 3
DATA = {"polarity": ("--data", "sentence_polarity.zip"), "reviews": ("--data", "movie_reviews.zip"),
        "shakespeare": ("--text", "tinyshakespeare.txt")}
FRACTIONS = ("heldout_exact_match", "heldout_accuracy", "heldout_attention_on_query", "heldout_token_accuracy",
             "heldout_attention_on_shape")

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="the scripts draw SVG with graphviz's dot")


def test_a_script_per_demo():
    assert sorted(p.stem for p in SCRIPTS.glob("train_*.py")) == sorted(f"train_{name}" for name in DEMOS)


def test_scripts_use_the_public_api_only():
    for script in SCRIPTS.glob("train_*.py"):
        imports = [line.split()[1] for line in script.read_text().splitlines() if line.startswith(("from ", "import "))]
        assert not [m for m in imports if m.startswith("attngraph.demos") or "._" in m or m.startswith("ops")], script


@pytest.mark.parametrize("name", sorted(DEMOS))
def test_script_runs_tiny(name, tmp_path, shared_data):
    argv = [sys.executable, str(SCRIPTS / f"train_{name}.py"), "--tiny", "--steps", str(STEPS), "--out", str(tmp_path)]
    if name in DATA:
        argv += [DATA[name][0], str(shared_data(DATA[name][1]))]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads(done.stdout.strip().splitlines()[-1])
    assert metrics["steps"] == STEPS
    assert math.isfinite(metrics["loss"]) and metrics["loss"] > 0
    for key in FRACTIONS:
        if key in metrics:
            assert 0 <= metrics[key] <= 1, key
    assert any(key in metrics for key in (*FRACTIONS, "val_loss"))
    for picture in ("graph.svg", "attention.svg"):
        assert ET.parse(tmp_path / picture).getroot().tag == "{http://www.w3.org/2000/svg}svg", picture
