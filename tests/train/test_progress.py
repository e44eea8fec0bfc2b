"""What is shown while training and compiling: the compile display (a bar on terminals, one line otherwise) and the
Trainer's progress lines off a terminal. A terminal is faked by making the captured stderr say it is one."""
import re
import sys

import pytest
from numba import njit
from tqdm import tqdm

from attngraph.train import Adam, Trainer
from attngraph.train import progress
from attngraph.train.progress import MESSAGE, CompileProgress


def terminal(monkeypatch, yes: bool) -> None:
    """Make the captured stderr a terminal (or not), as tqdm and the Trainer see it."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: yes)


def compile_two_kernels() -> None:
    """Compile two fresh kernels, each compiling a helper (which the display does not count)."""
    plus_one = njit(lambda x: x + 1)
    doubled = njit(lambda x: 2 * plus_one(x))
    assert doubled(1) == 4 and doubled(1.5) == 5.0 and doubled(2) == 6


@pytest.mark.parametrize("on_terminal", [False, True])
def test_compiles_are_a_bar_on_terminals_and_one_line_otherwise(capsys, monkeypatch, on_terminal):
    terminal(monkeypatch, on_terminal)
    with CompileProgress() as progress:
        compile_two_kernels()
        counted = progress.bar.n
    out, err = capsys.readouterr()
    assert out == "" and progress.depth == 0 and progress.bar is None
    if on_terminal:
        assert counted == 2 and MESSAGE in err and "<lambda>" in err
    else:
        assert (counted, err) == (0, f"{MESSAGE}...\n")


def test_compiles_shown_always_or_never_and_a_new_display_after_close(capsys, monkeypatch):
    terminal(monkeypatch, False)
    with CompileProgress(progress=True) as progress:
        compile_two_kernels()
        progress.close()
        compile_two_kernels()
        assert progress.bar.n == 2
    assert capsys.readouterr().err.count(MESSAGE) >= 2
    with CompileProgress(progress=False) as progress:
        compile_two_kernels()
        assert progress.bar is None
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("on_terminal", [False, True])
def test_compiles_reported_in_an_outer_bar(capsys, monkeypatch, on_terminal):
    terminal(monkeypatch, on_terminal)
    with tqdm(range(3), desc="programs", disable=None) as bar, CompileProgress(bar=bar) as progress:
        for _ in bar:
            compile_two_kernels()
        assert progress.bar is bar
    err = capsys.readouterr().err
    assert err.count(MESSAGE) == (0 if on_terminal else 1)
    assert ("<lambda>" in err and "3/3" in err) == on_terminal


def batches_compiling_on_the_first_step():
    """The regression batches; the first call compiles a fresh kernel, as a first step on a cold cache does."""
    from tests.train.conftest import regression_batches
    fresh = njit(lambda x: x)

    def batches(rng):
        fresh(1)
        return regression_batches(rng)
    return batches


def fit(regression, steps, **options):
    model = regression.model()
    return Trainer(model, regression.loss, Adam(model, lr=0.02), **options).fit(
        batches_compiling_on_the_first_step(), steps)


def test_off_a_terminal_a_line_every_n_steps_and_at_the_end(regression, capsys, monkeypatch):
    terminal(monkeypatch, False)
    history = fit(regression, 5, log_every=2, eval_every=4, eval_fn=lambda model: {"val_loss": 0.25})
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and lines[0] == f"{MESSAGE}..." and len(lines) == 5
    assert [line.split(":")[0] for line in lines[1:]] == ["step 2/5", "step 4/5", "step 4 evaluation", "step 5/5"]
    step = history[1]
    assert re.fullmatch(re.escape(
        f"step 2/5: loss {step['loss']:.4g}, lr 0.02, grad_norm {step['grad_norm']:.4g}, "
        f"mean_abs_error {step['mean_abs_error']:.4g}, {step['examples_per_second']:.0f} examples/s ") +
        r"\(elapsed \d+:\d\d, ETA \d+:\d\d\)", lines[1])
    assert lines[3] == "step 4 evaluation: val_loss 0.25"


def test_twenty_lines_per_fit_by_default(regression, capsys, monkeypatch):
    terminal(monkeypatch, False)
    fit(regression, 41, compile_progress=False)
    steps = [line.split(":")[0] for line in capsys.readouterr().err.splitlines()]
    assert steps == [f"step {s}/41" for s in range(2, 41, 2)] + ["step 41/41"]


def test_a_bar_on_a_terminal_and_nothing_when_asked(regression, capsys, monkeypatch):
    terminal(monkeypatch, True)
    fit(regression, 3, log_every=1)
    err = capsys.readouterr().err
    assert "3/3" in err and "loss=" in err and "examples/s=" in err and MESSAGE in err and "step 1/3:" not in err
    fit(regression, 3, log_every=1, compile_progress=False)
    err = capsys.readouterr().err
    assert "3/3" in err and MESSAGE not in err
    terminal(monkeypatch, False)
    fit(regression, 3, log_every=1, progress=False)
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("option, error", [
    ({"log_every": 0}, ValueError), ({"log_every": 2.0}, TypeError), ({"progress": "yes"}, TypeError),
    ({"compile_progress": None}, TypeError),
])
def test_progress_settings_are_checked(regression, option, error):
    model = regression.model()
    with pytest.raises(error, match=next(iter(option))):
        Trainer(model, regression.loss, Adam(model), **option)


def test_long_compiles_off_a_terminal_write_lines_with_the_time_elapsed(capsys, monkeypatch):
    terminal(monkeypatch, False)
    monkeypatch.setattr(progress, "INTERVAL", 0.0)         # every kernel's end is a line's time
    with CompileProgress():
        compile_two_kernels()
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"{MESSAGE}..." and len(lines) == 4
    assert re.fullmatch(r"1 kernels compiled so far \(the last: .*<lambda>\), 0:\d\d elapsed", lines[1])
    assert re.fullmatch(r"2 kernels compiled so far \(the last: .*<lambda>\), 0:\d\d elapsed", lines[2])
    assert re.fullmatch(r"compiled 2 kernels, 0:\d\d elapsed", lines[3])


@pytest.mark.parametrize("seconds, text", [(0, "0:00"), (59.4, "0:59"), (61, "1:01"), (3600 + 62, "1:01:02")])
def test_durations(seconds, text):
    assert progress.duration(seconds) == text


def test_the_clock_extrapolates_the_steps_taken(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: now[0])
    clock = progress.StepClock(10, 50)          # resumed at step 10, to 50
    now[0] = 130.0
    assert clock.text(20) == "elapsed 0:30, ETA 1:30"      # 3 s a step, 30 steps left
