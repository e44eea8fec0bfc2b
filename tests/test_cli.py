"""The command line: every command runs; bad arguments print one line and exit with 2, never a traceback (the
hostile-input cases are in tests/robustness/test_cli.py)."""
import io
import subprocess
import sys
from pathlib import Path

import pytest
from numba import njit
from numba.core import event
from tqdm import tqdm

from attngraph import models
from attngraph.cli import _exercise, _programs, main
from attngraph.core.primitive import REGISTRY
from attngraph.demos import common
from attngraph.models import registry

MODEL_FILE = Path(__file__).parent / "inspect" / "transformer.py"
SPEC, GRAPH_FUNCTION = f"{MODEL_FILE}:SPEC", f"{MODEL_FILE}:forward_graph"


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    """Models loaded from files register themselves; keep that out of the other tests."""
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_models_lists_the_registry(capsys):
    code, out, _ = run(capsys, "models")
    assert code == 0 and all(name in out for name in models.names())


@pytest.mark.parametrize("name", models.names())
def test_every_registered_model_renders_and_summarizes(capsys, tmp_path, name):
    assert run(capsys, "render", name, "--tiny", "--out", str(tmp_path / "model.dot"))[0] == 0
    assert (tmp_path / "model.dot").read_text().startswith("digraph")
    code, out, _ = run(capsys, "summary", name, "--tiny")
    assert code == 0 and "parameters" in out


def test_render_and_summary_of_a_model_file(capsys, tmp_path):
    out = tmp_path / "encoder.svg"
    assert run(capsys, "render", SPEC, "--out", str(out), "--depth", "2", "--dim", "T=8")[0] == 0
    assert out.read_text().lstrip().startswith("<?xml")
    assert run(capsys, "render", SPEC, "--out", str(out), "--view", "backward", "--config", "layers=1")[0] == 0
    assert run(capsys, "render", GRAPH_FUNCTION, "--out", str(out), "--roll", "--config", "layers=3")[0] == 0
    assert "×3" in out.read_text()
    code, text, _ = run(capsys, "summary", SPEC, "--depth", "1", "--dim", "B=4")
    assert code == 0 and "layers" in text and "layers.0" not in text and "B=4, T=1" in text


def test_check_grads(capsys):
    code, out, _ = run(capsys, "check-grads", SPEC, "--config", "d=4")
    assert code == 0 and "all gradients match" in out and "embed.weight" in out


def test_info(capsys):
    code, out, _ = run(capsys, "info")
    assert code == 0
    for row in ("numba threading layer", "numba threads", "CUDA", "graphviz dot", "numpy",
                "OMP_WAIT_POLICY=", "OPENBLAS_THREAD_TIMEOUT="):
        assert row in out


@pytest.mark.slow          # compiles every float64 kernel when numba's cache is cold
def test_warmup_exercises_every_primitive(capsys):
    assert {n.op for program in _programs() for n in _exercise(program, float)[0].nodes} >= set(REGISTRY)
    code, out, _ = run(capsys, "warmup", "--dtype", "float64")
    assert code == 0 and f"compiled the kernels of {len(REGISTRY)} primitives" in out


@pytest.mark.slow          # compiles the float32 kernels when numba's cache is cold
def test_warmup_compiles_every_kernel_of_the_copy_demo_s_training(capsys, tmp_path):
    assert run(capsys, "warmup", "--dtype", "float32")[0] == 0
    compiled = _Compiled()
    with event.install_listener("numba:compile", compiled):
        assert run(capsys, "demo", "copy", "--steps", "2", "--heldout", "4", "--out", str(tmp_path))[0] == 0
    assert compiled.names == []


class _Compiled(event.Listener):
    """The functions numba compiles while it listens."""

    def __init__(self):
        self.names = []

    def on_start(self, event):
        self.names.append(event.data["dispatcher"].py_func.__qualname__)

    def on_end(self, event):
        pass


@pytest.mark.parametrize("terminal", [False, True])
def test_demos_show_the_kernels_numba_compiles(capsys, monkeypatch, terminal):
    """Two kernels compiled (each compiling a helper: not counted): a bar on terminals, else one line."""
    bar = io.StringIO()
    monkeypatch.setattr(common, "tqdm", lambda **options: tqdm(**{**options, "file": bar, "disable": not terminal}))
    plus_one = njit(lambda x: x + 1)
    progress, kernel = common.CompileProgress(), njit(lambda x: 2 * plus_one(x))
    with event.install_listener("numba:compile", progress):
        assert kernel(1) == 4 and kernel(1.5) == 5.0 and kernel(2) == 6
        counted = progress.bar.n
    progress.close()
    printed = capsys.readouterr().out
    assert printed == ("" if terminal else f"{common.CompileProgress.MESSAGE}...\n")
    assert (counted, common.CompileProgress.MESSAGE in bar.getvalue()) == ((2, True) if terminal else (0, False))
    assert progress.depth == 0 and progress.bar is None


@pytest.mark.parametrize("argv", [
    [], ["nonsense"], ["render", "no-such-model", "--out", "x.svg"], ["render", SPEC], ["summary"],
    ["summary", SPEC, "--config", "layers"], ["summary", SPEC, "--config", "width=3"], ["summary", SPEC, "--depth", "0"],
    ["summary", SPEC, "--dim", "Q=3"], ["summary", SPEC, "--dim", "T=zero"], ["render", SPEC, "--out", "x.svg", "--view", "up"],
    ["summary", "missing.py:SPEC"], ["summary", f"{MODEL_FILE}:NOTHING"], ["check-grads", GRAPH_FUNCTION],
    ["demo", "no-such-demo"], ["warmup", "--dtype", "int8"],
])
def test_bad_arguments_exit_with_2_and_one_line(capsys, argv):
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.startswith("attngraph") and ": error: " in err and err.count("\n") == 1


def test_python_dash_m():
    done = subprocess.run([sys.executable, "-m", "attngraph", "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "render" in done.stdout


def test_demo_options_without_a_name_go_to_the_default_demo(tmp_path):
    assert main(["demo", "--steps", "2", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "metrics.json").is_file()
