"""The command line: every command runs; bad arguments print one line and exit with 2, never a traceback (the
hostile-input cases are in tests/test_cli_errors.py)."""
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest
from numba import njit
from numba.core import event

import attngraph as ag
from attngraph import cli, inspect, models
from attngraph.cli import _exercise, _programs, main
from attngraph.core.passes import optimize
from attngraph.core.primitive import REGISTRY
from attngraph.demos import DEMOS
from attngraph.models import registry
from attngraph.train.progress import MESSAGE

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
    assert text.splitlines()[2].split()[:4] == ["embed", "Embedding", "1", "4×T"]     # module, type, calls, input
    assert "inputs       tokens B×T int64\nsizes        B=4; T not given: counted as 1\n" in text
    code, text, _ = run(capsys, "summary", GRAPH_FUNCTION, "--depth", "1")          # a graph: no model, no types
    assert code == 0 and text.splitlines()[2].split()[:3] == ["embed", "1", "B×T"]


def test_render_draws_a_time_loop_as_one_scan_box_and_its_body_on_request(capsys, tmp_path):
    """Show-Attend-Tell decodes 10 words in one scan: one box 'scan ×10', rolled or not; --bodies draws the step."""
    for option in ("--roll", "--unroll", "--bodies"):
        assert run(capsys, "render", "show-attend-tell", "--tiny", option, "--out", str(tmp_path / f"{option}.dot"))[0] == 0
    rolled, unrolled, bodies = ((tmp_path / f"{option}.dot").read_text() for option in ("--roll", "--unroll", "--bodies"))
    assert all("scan ×10" in text and "(call" not in text for text in (rolled, unrolled))
    assert bodies.count("cell") > rolled.count("cell")                 # the step's LSTM cell, op by op


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
def test_warmup_says_which_primitives_its_programs_do_not_exercise(capsys):
    graphs = [_exercise(program, float)[0] for program in _programs()]
    missing = set(REGISTRY) - {n.op for graph in graphs for g in (graph, optimize(graph)) for n in g.nodes}
    code, out, _ = run(capsys, "warmup", "--dtype", "float64")
    assert code == 0 and f"compiled the kernels of {len(REGISTRY) - len(missing)} primitives" in out
    assert (f"not exercised: {', '.join(sorted(missing))}" in out) == bool(missing)


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


def fresh_kernel_compiled(function):
    """``function`` compiling a new numba kernel first, as a run on a cold cache does."""
    def compiling(*args, **kwargs):
        assert njit(lambda x: x + 1)(1) == 2
        return function(*args, **kwargs)
    return compiling


@pytest.mark.parametrize("terminal", [False, True])
def test_check_grads_shows_the_kernels_numba_compiles(capsys, monkeypatch, terminal):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal)
    monkeypatch.setattr(inspect, "gradcheck_parameters", fresh_kernel_compiled(inspect.gradcheck_parameters))
    code, out, err = run(capsys, "check-grads", SPEC, "--config", "d=4")
    assert code == 0 and "all gradients match" in out
    assert (MESSAGE in err and "<lambda>" in err) if terminal else err == f"{MESSAGE}...\n"


@pytest.mark.parametrize("terminal", [False, True])
def test_warmup_shows_compiles_in_its_bar_over_programs(capsys, monkeypatch, terminal):
    """One bar: the programs, the kernel compiling in its postfix; off a terminal one line for the compiles."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal)
    program = fresh_kernel_compiled(lambda x, y, tokens, table: ag.sum(x * y) + ag.sum(table))
    monkeypatch.setattr(cli, "_programs", lambda: [program])
    code, out, err = run(capsys, "warmup", "--dtype", "float64")
    assert code == 0 and out.startswith("compiled the kernels of ")
    if terminal:
        assert "compiling kernels into numba's cache" in err and "1/1" in err and "<lambda>" in err
        assert MESSAGE not in err
    else:
        assert err == f"{MESSAGE}...\n"


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert (code, out) == (0, f"attngraph {importlib.metadata.version('attngraph')}\n")


def test_demo_help_lists_the_demos_one_line_each(capsys):
    code, out, _ = run(capsys, "demo", "--help")
    listed = out[out.index("demos:\n"):].splitlines()[1:]
    assert code == 0 and [line.split()[0] for line in listed if not line.startswith(" " * 15)] == list(DEMOS)
    assert "  copy         a Transformer encoder-decoder learns y = x" in out
    assert "  recall       Associative recall with additive (Bahdanau) attention." in out


@pytest.mark.parametrize("argv", [
    [], ["nonsense"], ["render", "no-such-model", "--out", "x.svg"], ["render", SPEC], ["summary"],
    ["summary", SPEC, "--config", "layers"], ["summary", SPEC, "--config", "width=3"], ["summary", SPEC, "--depth", "0"],
    ["summary", SPEC, "--dim", "Q=3"], ["summary", SPEC, "--dim", "T=zero"], ["render", SPEC, "--out", "x.svg", "--view", "up"],
    ["render", SPEC, "--out", "x.svg", "--roll", "--unroll"],
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


def test_tables_stay_aligned_on_long_names(capsys):
    from attngraph.inspect import GradcheckReport
    from attngraph.inspect.gradcheck import GradcheckEntry
    _, out, _ = run(capsys, "models")
    lines = out.splitlines()
    column = lines[0].index("description")
    assert all(line[column - 2:column] == "  " and line[column] != " " for line in lines[1:])
    entries = [GradcheckEntry("a" * 40, (3,), 1e-9, 1e-8, True), GradcheckEntry("b", (12, 16), 2e-9, 3e-8, False)]
    table = str(GradcheckReport(entries)).splitlines()
    shape, errors_end = table[0].index("shape"), table[0].index("max rel err") + len("max rel err")
    for line in table:
        assert line[shape - 2:shape] == "  " and line[shape] != " "                       # left-aligned
        assert line[errors_end - 1] != " " and line[errors_end:errors_end + 2] == "  "   # right-aligned
    assert [line.split()[-1] for line in table] == ["ok", "yes", "NO"]


def test_view_and_seed_options_are_documented(capsys):
    for command in ("render", "view"):
        assert run(capsys, command, "--help")[0] == 0
    _, out, _ = run(capsys, "render", "--help")
    assert "gradient graph" in out and "seed of the example batch (--view backward or both)" in " ".join(out.split())
