"""Hostile inputs to the ``attngraph`` command: every bad value exits with status 2 and ONE line on
stderr, no traceback, before anything is compiled or trained; Ctrl-C exits with 130 and "interrupted"; a
genuine bug still shows its traceback."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from attngraph import cli
from attngraph.core.graph import Graph
from attngraph.demos import copy as copy_demo
from attngraph.errors import DataError, DeviceError
from attngraph.models import registry
from attngraph.train import Trainer
from tests.demos.conftest import restore_threads  # noqa: F401  (a demo sets the thread counts: put them back)
from tests.train.test_data_errors import encrypt, zip_files

MODEL_FILE = '''
import time

import attngraph as ag
from attngraph.models import ModelSpec
from attngraph.nn import Linear

if __name__ == "slow":
    print("ready", flush=True)
    time.sleep(60)


class Scaler(ag.Module):
    """y = gain · x W (+ b); refuses sizes below 1 with a ValueError, as the library's constructors do."""

    def __init__(self, d=4, bias=True, gain=1.0, act="relu"):
        super().__init__()
        if d < 1:
            raise ValueError(f"Scaler: d must be at least 1, got {d}")
        self.d, self.gain = d, gain
        self.linear = Linear(d, d, bias=bias)

    def forward(self, x):
        return self.linear(x) * self.gain


def inputs(model):
    return dict(x=ag.Input(("B", model.d)))


def batch(model, rng, size):
    return dict(x=rng.standard_normal((size, model.d)).astype("float32"))


def loss(model, x):
    return ag.mean(model(x) * model(x))


SPEC = ModelSpec("robustness-scaler", Scaler, inputs, batch, loss, defaults=dict(d=4, bias=True, gain=1.0, act="relu"),
                 tiny=dict(d=2))
CLASH = ModelSpec("gpt", Scaler, inputs, batch, loss)
VALUE = 3


def graph(d=4, gain=1.0):
    return ag.trace(Scaler(d, gain=gain), x=ag.Input(("B", d)))


def nothing(d=4):
    return None
'''


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    """Files for the arguments: {model} a model file, {broken} one with a syntax error, {file} a plain file,
    {dir} a folder named like a model file, text corpora and labelled corpora good and bad."""
    root = tmp_path_factory.mktemp("places")
    files = {"model.py": MODEL_FILE, "broken.py": "x = 1\ndef (:\n", "file.txt": "a plain file\n", "empty.txt": "",
             "tiny.txt": "hello world\n" * 10, "pics.svg/.keep": "", "dir.py/.keep": "",
             "good/pos/a.txt": "great .\n", "good/neg/b.txt": "dull .\n", "one/x.pos": "fine\n",
             "stray/pos/a.txt": "great .\n", "stray/neg/b.txt": "dull .\n", "stray/notes.txt": "mine\n"}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "binary.txt").write_bytes(b"\xff\xfe\x00\x81" * 100)
    encrypt(zip_files(root / "locked.zip", {"c/a.pos": b"good\n", "c/a.neg": b"bad\n"}))
    names = dict(model="model.py", broken="broken.py", file="file.txt", dir="dir.py", pics="pics.svg",
                 empty="empty.txt", tiny="tiny.txt", binary="binary.txt", good="good", one="one", stray="stray",
                 locked="locked.zip")
    return {key: str(root / name) for key, name in names.items()}


@pytest.fixture(autouse=True)
def no_slow_work(monkeypatch):
    """A bad input must fail before any graph is compiled or any model trained: both fail the test here (an
    AssertionError is no error of the library's: main lets it through), and models loaded from files register
    in a registry of the test's own."""
    def slow(*args, **kwargs):
        raise AssertionError("slow work started before the bad input was found")
    monkeypatch.setattr(Graph, "compile", slow)
    monkeypatch.setattr(Trainer, "fit", slow)
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))


def run(capsys, argv, places=None, tmp_path=None):
    """``main(argv)`` with {placeholders} filled in; its status, stdout and stderr."""
    fill = {**(places or {}), "tmp": str(tmp_path)}
    code = cli.main([arg.format(**fill) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line(err, match):
    assert "Traceback" not in err and err.endswith("\n") and err.count("\n") == 1, err
    assert match in err, err


BAD = [
    ([], "the following arguments are required: COMMAND"),
    (["nonsense"], "invalid choice: 'nonsense'"),
    (["models", "extra"], "unrecognized arguments: extra"),
    (["info", "--verbose"], "unrecognized arguments: --verbose"),
    (["warmup", "--dtype", "int8"], "invalid choice: 'int8'"),
    (["warmup", "--dtype"], "expected at least one argument"),
    # MODEL
    (["summary"], "the following arguments are required: MODEL"),
    (["summary", "no-such-model"], "unknown model 'no-such-model'"),
    (["summary", "missing.py:SPEC"], "no file missing.py"),
    (["summary", "{dir}:SPEC"], "no file"),
    (["summary", "{broken}:SPEC"], "broken.py:2: invalid syntax"),
    (["summary", "{model}:NOTHING"], "has no ModelSpec or graph function named 'NOTHING'"),
    (["summary", "{model}:VALUE"], "has no ModelSpec or graph function named 'VALUE'"),
    (["summary", "{model}:nothing"], "returned NoneType, not a traced Graph"),
    (["summary", "{model}:CLASH"], "model 'gpt' is registered twice"),
    (["check-grads", "{model}:graph"], "is a graph function; checking gradients needs a ModelSpec"),
    # --config: malformed, unknown, of the wrong type, refused by the constructor
    (["summary", "gpt", "--config", "d_model"], "expected key=value, got 'd_model'"),
    (["summary", "gpt", "--config", "=3"], "expected key=value, got '=3'"),
    (["summary", "gpt", "--config", "2d=3"], "expected key=value, got '2d=3'"),
    (["summary", "gpt", "--config", "nope=1"], "has no setting(s) ['nope']"),
    (["summary", "gpt", "--config", "tie_weights=maybe"], "--config tie_weights='maybe': expected bool"),
    (["summary", "gpt", "--config", "tie_weights=1"], "--config tie_weights=1: expected bool"),
    (["summary", "gpt", "--config", "d_model=abc"], "--config d_model='abc': expected int"),
    (["summary", "gpt", "--config", "d_model=2.5"], "--config d_model=2.5: expected int"),
    (["summary", "gpt", "--config", "d_model=True"], "--config d_model=True: expected int"),
    (["summary", "gpt", "--config", "dropout=high"], "--config dropout='high': expected int or float"),
    (["summary", "gpt", "--tiny", "--config", "d_model=0"], "d_model"),
    (["summary", "gpt", "--tiny", "--config", "d_model=-5"], "d_model"),
    (["summary", "gpt", "--tiny", "--config", "vocab=0"], "vocab"),
    (["check-grads", "gpt", "--config", "layers=0"], "layers"),
    (["summary", "gpt", "--config", "max_length=1000000000000"], "gpt: Unable to allocate"),
    (["summary", "{model}:SPEC", "--config", "d=0"], "Scaler: d must be at least 1, got 0"),
    (["summary", "{model}:SPEC", "--config", "d=-5"], "Scaler: d must be at least 1, got -5"),
    (["summary", "{model}:SPEC", "--config", "act=3"], "--config act=3: expected str"),
    (["check-grads", "{model}:SPEC", "--config", "d=0"], "Scaler: d must be at least 1, got 0"),
    (["summary", "{model}:graph", "--config", "nope=1"], "unexpected keyword argument 'nope'"),
    (["summary", "{model}:graph", "--config", "d=x"], "--config d='x': expected int"),
    (["summary", "{model}:graph", "--config", "d=0"], "Scaler: d must be at least 1, got 0"),
    # numbers and sizes
    (["summary", "gpt", "--depth", "0"], "argument --depth: expected a positive integer, got '0'"),
    (["summary", "gpt", "--depth", "-1"], "argument --depth: expected a positive integer, got '-1'"),
    (["summary", "gpt", "--depth", "x"], "expected a positive integer, got 'x'"),
    (["summary", "gpt", "--depth", "1.5"], "expected a positive integer, got '1.5'"),
    (["summary", "gpt", "--depth", "²"], "expected a positive integer, got '²'"),
    (["summary", "gpt", "--dim", "T=0"], "expected NAME=SIZE with a positive integer size, got 'T=0'"),
    (["summary", "gpt", "--dim", "T=-3"], "expected NAME=SIZE with a positive integer size"),
    (["summary", "gpt", "--dim", "T=abc"], "expected NAME=SIZE with a positive integer size"),
    (["summary", "gpt", "--dim", "T"], "expected key=value, got 'T'"),
    (["summary", "{model}:SPEC", "--dim", "Q=3"], "the graph has no dimension(s) ['Q']"),
    (["summary", "gpt", "--seed", "1"], "unrecognized arguments: --seed 1"),       # summary draws no batch
    (["export", "gpt", "--seed", "1", "--onnx", "{tmp}/g.onnx"], "unrecognized arguments: --seed 1"),
    (["export", "gpt", "--onnx", "{tmp}/g.txt"], "g.txt: give a file name ending in .onnx"),
    (["check-grads", "gpt", "--seed=-1"], "argument --seed: expected a non-negative integer seed, got '-1'"),
    (["render", "gpt", "--view", "backward", "--seed", "x", "--out", "{tmp}/g.dot"], "non-negative integer seed"),
    # render --out
    (["render", "gpt", "--tiny"], "the following arguments are required: --out"),
    (["render", "{model}:SPEC", "--out", "{pics}"], "is a folder; give a file name such as"),
    (["render", "{model}:SPEC", "--out", "{tmp}"], "the suffix gives the format, one of .svg, .png, .pdf, .dot"),
    (["render", "{model}:SPEC", "--out", "{tmp}/g.jpg"], "the suffix gives the format"),
    (["render", "{model}:SPEC", "--out", "{file}/g.svg"], "file.txt is a file, not a folder"),
    (["render", "{model}:SPEC", "--out", "{file}/sub/g.svg"], "cannot write into"),
    (["render", "{model}:SPEC", "--out", "{tmp}/g.svg", "--view", "up"], "invalid choice: 'up'"),
    # demos: options
    (["demo", "no-such-demo"], "unknown demo 'no-such-demo'; choose from copy"),
    (["demo", "copy", "--steps", "0"], "argument --steps: expected a positive integer, got '0'"),
    (["demo", "copy", "--steps=-3"], "expected a positive integer, got '-3'"),
    (["demo", "--steps", "many"], "attngraph demo copy: error: argument --steps: expected a positive integer"),
    (["demo", "copy", "--threads", "0"], "argument --threads: expected a positive integer"),
    (["demo", "copy", "--seed=-1"], "argument --seed: expected a non-negative integer seed"),
    (["demo", "copy", "--heldout", "0"], "argument --heldout: expected a positive integer, got '0'"),
    (["demo", "copy", "--max-length", "0"], "argument --max-length: expected a positive integer, got '0'"),
    (["demo", "sort", "--max-length", "x"], "argument --max-length: expected a positive integer"),
    (["demo", "dates", "--heldout=-5"], "argument --heldout: expected a positive integer"),
    (["demo", "copy", "--bogus"], "unrecognized arguments: --bogus"),
    (["demo", "copy", "--out", "{file}"], "--out: {file} is a file, not a folder"),
    (["demo", "copy", "--out", "{file}/run"], "--out: cannot write into"),
    (["demo", "shakespeare", "--eval-windows", "0"], "argument --eval-windows: expected a positive integer"),
    (["demo", "shakespeare", "--sample-length=-1"], "argument --sample-length: expected a positive integer"),
    (["demo", "polarity", "--data", "{good}", "--limit", "0"], "argument --limit: expected a positive integer"),
    # demos: data, read before the model is built
    (["demo", "sort", "--max-length", "1", "--out", "{tmp}/run"], "distinct heldout pairs asked for"),
    (["demo", "shakespeare", "--text", "{tmp}/missing.txt"], "the text file not found"),
    (["demo", "shakespeare", "--text", "{dir}", "--out", "{tmp}/run"], "cannot read a UTF-8 text"),
    (["demo", "shakespeare", "--text", "{binary}", "--out", "{tmp}/run"], "cannot read a UTF-8 text"),
    (["demo", "shakespeare", "--text", "{empty}", "--out", "{tmp}/run"], "a text of 0 characters"),
    (["demo", "shakespeare", "--text", "{tiny}", "--out", "{tmp}/run"],
     "the val split has 12 characters, too few for windows of 64 + 1"),
    (["demo", "polarity"], "the following arguments are required: --data"),
    (["demo", "polarity", "--data", "{tmp}/missing.zip"], "the sentence-polarity corpus not found"),
    (["demo", "polarity", "--data", "{file}", "--out", "{tmp}/run"], "File is not a zip file"),
    (["demo", "polarity", "--data", "{locked}", "--out", "{tmp}/run"], "locked.zip is encrypted"),
    (["demo", "polarity", "--data", "{one}", "--out", "{tmp}/run"], "holds a single class"),
    (["demo", "polarity", "--data", "{good}", "--out", "{tmp}/run"], "holding out 0.1 of 2 examples leaves"),
    (["demo", "reviews", "--data", "{stray}", "--out", "{tmp}/run"], "notes.txt lies beside the class folders"),
]


@pytest.mark.parametrize("argv, match", BAD, ids=[" ".join(argv) or "no arguments" for argv, _ in BAD])
def test_a_bad_value_is_one_line_and_status_2(capsys, places, tmp_path, argv, match):
    code, out, err = run(capsys, argv, places, tmp_path)
    assert code == 2 and out == ""
    assert_one_line(err, match.format(**places))


@pytest.mark.parametrize("argv", [["demo", "copy", "--steps", "0"], ["demo", "copy", "--heldout", "0"],
                                  ["demo", "shakespeare", "--text", "{tmp}/missing.txt"]])
def test_a_usage_error_creates_no_output_folder(capsys, places, tmp_path, argv):
    assert run(capsys, [*argv, "--out", "{tmp}/run"], places, tmp_path)[0] == 2
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv", [["--steps", "0"], ["--out", __file__], ["--max-length", "-1"]])
def test_a_demo_called_directly_exits_with_2(capsys, argv):
    with pytest.raises(SystemExit) as exit:
        copy_demo.main(argv)
    assert exit.value.code == 2
    assert_one_line(capsys.readouterr().err, "attngraph demo copy: error: ")


@pytest.mark.parametrize("argv, written", [
    (["render", "{model}:SPEC", "--out", "{tmp}/new/sub/g.dot", "--config", "gain=2", "--config", "act=tanh"],
     "new/sub/g.dot"),
    (["render", "{model}:graph", "--out", "{tmp}/g.dot", "--config", "d=3", "--config", "gain=0.5"], "g.dot"),
])
def test_good_values_around_the_bad_ones(capsys, places, tmp_path, argv, written):
    code, out, err = run(capsys, argv, places, tmp_path)
    assert (code, err) == (0, "") and (tmp_path / written).read_text().startswith("digraph")


@pytest.mark.parametrize("error, code", [
    (DataError("the corpus\nis empty"), 2), (DeviceError("no CUDA device"), 1),
])
def test_library_errors_are_one_line(capsys, monkeypatch, error, code):
    def fail(args):
        raise error
    monkeypatch.setattr(cli, "_models", fail)
    status, out, err = run(capsys, ["models"])
    assert (status, out) == (code, "")
    assert_one_line(err, "attngraph: error: " + " ".join(str(error).split()))


def test_ctrl_c_in_process(capsys, monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "_models", interrupted)
    assert run(capsys, ["models"]) == (130, "", "interrupted\n")


@pytest.mark.parametrize("bug", [RuntimeError("a bug"), ZeroDivisionError("a bug"), ValueError("a bug")])
def test_a_genuine_bug_keeps_its_traceback(monkeypatch, bug):
    def broken(args):
        raise bug
    monkeypatch.setattr(cli, "_models", broken)
    with pytest.raises(type(bug), match="a bug"):
        cli.main(["models"])


def command(*argv):
    return [sys.executable, "-m", "attngraph", *argv]


@pytest.mark.parametrize("argv", [
    command("summary", "gpt", "--config", "tie_weights=maybe"),
    [str(Path(sys.executable).with_name("attngraph")), "render", "gpt", "--out", "/dev/null/g.svg"],
])
def test_the_installed_command_exits_with_2_and_one_line(argv):
    if not Path(argv[0]).exists():
        pytest.skip(f"{argv[0]} is not installed")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert_one_line(done.stderr, "error: ")


def test_ctrl_c_exits_with_130_and_one_line(places):
    slow = Path(places["model"]).with_name("slow.py")
    slow.write_text(MODEL_FILE)
    with subprocess.Popen(command("summary", f"{slow}:SPEC"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}) as process:
        assert process.stdout.readline() == "ready\n"            # loading the model file, which sleeps
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    assert (process.returncode, out, err) == (130, "", "interrupted\n")
