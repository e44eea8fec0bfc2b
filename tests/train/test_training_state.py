"""Issue 12, training state: checkpoints that are damaged, killed mid-save or cannot be written; optimizer
hyper-parameters through checkpoints; diverging runs. A failed load must leave everything as it was."""
import json
import logging
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import attngraph as ag
from attngraph.nn import MLP, init
from attngraph.train import SGD, Adam, AdamW, Trainer, checkpoint, files, schedules
from attngraph.train.schedules import Constant, CosineDecay, LinearWarmup, Noam
from tests.train.conftest import regression_batches, squared_error

ROOT = Path(__file__).parents[2]


def make_trainer(seed=0, optimizer=lambda model: Adam(model, lr=0.01), **options):
    init.manual_seed(seed)
    model = MLP([4, 16, 1])
    options = {"schedule": CosineDecay(0.01, total=8, warmup=2), "eval_fn": lambda m: {"val_loss": 1.0},
               "patience": 3, "progress": False, **options}
    return Trainer(model, squared_error, optimizer(model), seed=seed, **options)


def step_optimizer(optimizer, steps=2, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        optimizer.step([rng.standard_normal(p.shape).astype(np.float32) for _, p in optimizer.named])


@pytest.fixture
def saved(tmp_path):
    """A trainer two steps in, with an early-stopping record, saved to tmp_path/last.npz."""
    trainer = make_trainer(seed=0, optimizer=lambda model: Adam(model, lr=0.02, betas=(0.8, 0.9), eps=1e-6))
    step_optimizer(trainer.optimizer)
    trainer.best, trainer.evals_without_improvement = {"step": 2, "value": 0.5}, 1
    return trainer, trainer.save(tmp_path / "last")


def snapshot(trainer) -> dict:
    """Everything a load may change, in a form that == compares exactly."""
    def exact(arrays):
        return {key: (a.dtype.str, a.shape, a.tobytes()) for key, a in arrays.items()}
    return {"model": exact(trainer.model.state_dict()), "optimizer": exact(trainer.optimizer.state_dict()),
            "config": trainer.optimizer.config(), "schedule": trainer.schedule, "seed": trainer.seed,
            "best": trainer.best, "evals": trainer.evals_without_improvement, "step": trainer.step}


def tamper(path, edit):
    """Rewrite the checkpoint at ``path`` after ``edit(meta, arrays)``."""
    with np.load(path) as data:
        arrays = {key: data[key] for key in data.files}
    meta = json.loads(arrays["meta.json"].tobytes())
    edit(meta, arrays)
    arrays["meta.json"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(path, **arrays)


def temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


# --- Trainer.load: everything is checked before anything changes ---------------------------------------------

def test_a_good_checkpoint_restores_everything(saved):
    trainer, path = saved
    other = make_trainer(seed=1, schedule=Constant(0.5))
    other.load(path)
    assert snapshot(other) == snapshot(trainer)
    assert other.optimizer.config() == {"type": "Adam", "lr": 0.02, "betas": (0.8, 0.9), "eps": 1e-6,
                                        "weight_decay": 0.0}
    assert other.schedule == CosineDecay(0.01, total=8, warmup=2) and other.step == 2


def resize_weight(meta, arrays):
    arrays["param/0.weight"] = np.zeros((4, 8), np.float32)
    meta["parameters"]["0.weight"]["shape"] = [4, 8]


BAD_CHECKPOINTS = {
    "no rng": (lambda m, a: m.pop("rng"), "no trainer state"),
    "no early_stopping": (lambda m, a: m.pop("early_stopping"), "no trainer state"),
    "seed not a number": (lambda m, a: m["rng"].update(seed="seven"), "rng seed 'seven'"),
    "negative seed": (lambda m, a: m["rng"].update(seed=-1), "rng seed -1"),
    "fractional seed": (lambda m, a: m["rng"].update(seed=1.5), "rng seed 1.5"),
    "no seed": (lambda m, a: m["rng"].pop("seed"), "rng seed None"),
    "evals negative": (lambda m, a: m["early_stopping"].update(evals_without_improvement=-2), "evals_without"),
    "evals missing": (lambda m, a: m["early_stopping"].pop("evals_without_improvement"), "evals_without"),
    "best a string": (lambda m, a: m["early_stopping"].update(best="good"), "best 'good'"),
    "best without value": (lambda m, a: m["early_stopping"].update(best={"step": 2}), "best"),
    "best value a string": (lambda m, a: m["early_stopping"]["best"].update(value="low"), "best"),
    "best value NaN": (lambda m, a: m["early_stopping"]["best"].update(value={"$float": "nan"}), "best"),
    "unknown schedule": (lambda m, a: m.update(schedule={"type": "Step", "lr": 0.1}), "unknown schedule type"),
    "schedule out of range": (lambda m, a: m.update(schedule={"type": "LinearWarmup", "lr": 0.1, "warmup": 0}),
                              "warmup must be an integer >= 1"),
    "schedule missing a setting": (lambda m, a: m.update(schedule={"type": "Constant"}), "do not fit Constant"),
    "schedule not a dict": (lambda m, a: m.update(schedule="cosine"), "schedule 'cosine'"),
    "step not the optimizer's": (lambda m, a: m.update(step=7), "step 7 is not the optimizer's step count 2"),
    "optimizer of another type": (lambda m, a: m["optimizer"].update(type="SGD"), "optimizer is SGD, not Adam"),
    "lr NaN": (lambda m, a: a.update({"optim/lr": np.asarray(np.nan)}), "lr must be a finite number >= 0"),
    "beta of 1": (lambda m, a: a.update({"optim/betas": np.asarray([1.0, 0.9])}), "betas must be two numbers"),
    "three betas": (lambda m, a: a.update({"optim/betas": np.asarray([0.9, 0.9, 0.9])}), "betas must be two"),
    "no eps": (lambda m, a: a.pop("optim/eps"), "missing: eps"),
    "moment missing": (lambda m, a: a.pop("optim/m/0.weight"), "missing: m/0.weight"),
    "moment of another shape": (lambda m, a: a.update({"optim/v/2.bias": np.zeros(3, np.float32)}),
                                r"v/2.bias: expected \(1,\) float32, got \(3,\) float32"),
    "moment in float64": (lambda m, a: a.update({"optim/v/2.bias": np.zeros(1)}), "got \\(1,\\) float64"),
    "negative steps": (lambda m, a: (a.update({"optim/steps": np.asarray(-1)}), m.update(step=-1)),
                       "step count -1 is not an integer >= 0"),
    "extra optimizer array": (lambda m, a: a.update({"optim/momentum_buffer/0.weight": np.zeros((4, 16))}),
                              "unexpected: momentum_buffer/0.weight"),
    "weight of another shape": (resize_weight, r"0.weight: expected \(4, 16\) float32, got \(4, 8\) float32"),
    "weight missing": (lambda m, a: (a.pop("param/2.bias"), m["parameters"].pop("2.bias")), "missing: 2.bias"),
    "metadata not describing the arrays": (lambda m, a: a.pop("param/2.bias"), "does not describe its arrays"),
    "stray array": (lambda m, a: a.update({"junk": np.zeros(2)}), "does not describe its arrays"),
    "newer format": (lambda m, a: m.update(format=3), "format 3.*upgrade attngraph"),
    "no format": (lambda m, a: m.pop("format"), "format None.*not written by attngraph"),
}


@pytest.mark.parametrize("edit, message", BAD_CHECKPOINTS.values(), ids=BAD_CHECKPOINTS.keys())
def test_a_bad_checkpoint_raises_checkpoint_error_and_changes_nothing(saved, edit, message):
    _, path = saved
    tamper(path, edit)
    trainer = make_trainer(seed=1)
    step_optimizer(trainer.optimizer, steps=1, seed=1)
    trainer.best = {"step": 1, "value": 3.0}
    before = snapshot(trainer)
    with pytest.raises(ag.CheckpointError, match=message):
        trainer.load(path)
    assert snapshot(trainer) == before


# --- non-finite metrics in checkpoints -------------------------------------------------------------------------

@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, np.float32("nan"), np.float64("-inf"),
                                   [1.0, math.inf, {"deep": math.nan}]], ids=repr)
def test_non_finite_metadata_round_trips_as_strict_json(tmp_path, value):
    init.manual_seed(0)
    path = checkpoint.save(tmp_path / "c", MLP([4, 16, 1]), metadata={"metric": value, "name": "nan"})
    with np.load(path) as data:
        text = data["meta.json"].tobytes().decode()
    json.loads(text, parse_constant=lambda token: pytest.fail(f"{token} is not strict JSON"))
    meta = checkpoint.read(path).metadata
    assert meta["name"] == "nan"
    np.testing.assert_equal(meta["metric"], np.asarray(value, dtype=object).tolist() if isinstance(value, list)
                            else float(value))


@pytest.mark.parametrize("metric", [math.inf, -math.inf])
def test_an_infinite_best_metric_is_checkpointed_and_restored(tmp_path, metric):
    trainer = make_trainer(eval_fn=lambda m: {"val_loss": metric}, eval_every=1, checkpoint_every=1,
                           checkpoint_path=tmp_path / "last")
    trainer.fit(regression_batches, steps=2)
    other = make_trainer(seed=1)
    other.load(tmp_path / "last")
    assert other.best == trainer.best == {"step": 1, "value": metric} and other.evals_without_improvement == 1


def test_a_nan_metric_never_counts_as_an_improvement():
    scripted = iter([0.0, math.nan, 2.0, math.nan, 1.0, math.nan, math.nan])     # 0.0: the sanity evaluation's
    trainer = make_trainer(eval_fn=lambda m: {"val_loss": next(scripted)}, eval_every=1, patience=2)
    trainer.fit(regression_batches, steps=10)
    assert trainer.best == {"step": 4, "value": 1.0} and trainer.step == 6


# --- save errors --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("where, cause", [("file/last", "File exists"), ("file/run/last", "Not a directory")])
def test_saving_under_a_file_names_the_path_and_the_cause(saved, tmp_path, where, cause):
    trainer, _ = saved
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(ag.CheckpointError, match=f"cannot write the checkpoint .*{where}.npz: .*{cause}: .*file"):
        trainer.save(tmp_path / where)
    assert (tmp_path / "file").read_text() == "not a folder"


def test_saving_over_a_folder_names_the_path_and_leaves_no_temporary(saved, tmp_path):
    trainer, _ = saved
    (tmp_path / "taken.npz").mkdir()
    with pytest.raises(ag.CheckpointError, match=r"cannot write the checkpoint .*taken.npz: .*directory"):
        trainer.save(tmp_path / "taken")
    assert temporaries(tmp_path) == []


@pytest.mark.skipif(os.name == "nt" or os.geteuid() == 0, reason="root writes anywhere; Windows has no chmod 500")
def test_saving_into_a_read_only_folder_names_the_path(saved, tmp_path):
    trainer, _ = saved
    folder = tmp_path / "read-only"
    folder.mkdir(mode=0o500)
    with pytest.raises(ag.CheckpointError, match="cannot write the checkpoint .*read-only/last.npz: .*Permission"):
        trainer.save(folder / "last")


@pytest.mark.parametrize("where, error", [("mkstemp", PermissionError(13, "Permission denied")),
                                          ("fsync", OSError(28, "No space left on device")),
                                          ("replace", OSError(18, "Invalid cross-device link"))])
def test_a_failed_write_raises_checkpoint_error_and_keeps_the_previous_checkpoint(saved, tmp_path, monkeypatch,
                                                                                  where, error):
    trainer, path = saved
    before = path.read_bytes()

    def fail(*args, **kwargs):
        raise error
    monkeypatch.setattr(files.tempfile if where == "mkstemp" else files.os, where, fail)
    with pytest.raises(ag.CheckpointError, match=f"cannot write the checkpoint {path}: .*{error.strerror}"):
        trainer.save(path)
    assert path.read_bytes() == before and temporaries(tmp_path) == []


def test_reserved_metadata_keys_are_refused(tmp_path):
    init.manual_seed(0)
    with pytest.raises(ag.CheckpointError, match="cannot set format, parameters: attngraph writes those"):
        checkpoint.save(tmp_path / "c", MLP([4, 16, 1]), metadata={"format": 9, "parameters": {}, "note": 1})
    assert not list(tmp_path.iterdir())


def test_a_file_that_cannot_be_opened_names_the_cause(saved, monkeypatch):
    _, path = saved

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(Path, "open", refuse)
    with pytest.raises(ag.CheckpointError, match="cannot read the checkpoint .*last.npz: .*Permission denied"):
        checkpoint.read(path)


# --- kill -9 in the middle of a save -----------------------------------------------------------------------------

CHILD = """
import sys, time
import numpy as np
from attngraph.nn import MLP, init
from attngraph.train import checkpoint

init.manual_seed(0)
model = MLP([4, 16, 1])
checkpoint.save(sys.argv[1], model, metadata={"step": 1})

def stalled(file, **arrays):            # half a zip, then wait for the kill
    file.write(b"PK\\x03\\x04 half of a checkpoint")
    file.flush()
    print("writing", flush=True)
    time.sleep(120)

np.savez = stalled
checkpoint.save(sys.argv[1], model, metadata={"step": 2})
"""


@pytest.mark.parametrize("next_use", ["load", "save"])
def test_a_save_killed_midway_leaves_the_previous_checkpoint_and_the_next_use_cleans_up(tmp_path, next_use):
    path = tmp_path / "last.npz"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], cwd=ROOT, stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"writing\n"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=60)
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    (stale,) = temporaries(tmp_path)
    assert stale.startswith(f".last.npz.{child.pid}.") and (tmp_path / stale).read_bytes().startswith(b"PK")
    init.manual_seed(0)
    model = MLP([4, 16, 1])
    if next_use == "load":
        assert checkpoint.load(path, model)["step"] == 1
    else:
        checkpoint.save(path, model, metadata={"step": 3})
        assert checkpoint.read(path).metadata["step"] == 3
    assert temporaries(tmp_path) == []


def test_the_temporary_file_of_a_running_save_is_left_alone(saved, tmp_path):
    _, path = saved
    running = tmp_path / f".last.npz.{os.getpid()}.abc123.tmp"
    foreign = tmp_path / ".last.npz.notes.tmp"
    running.write_bytes(b"in progress")
    foreign.write_bytes(b"someone else's")
    checkpoint.read(path)
    assert running.exists() and foreign.exists()


# --- optimizer hyper-parameters -------------------------------------------------------------------------------------

OPTIMIZERS = {
    "SGD": (lambda m: SGD(m, lr=0.3, momentum=0.8, nesterov=True, weight_decay=0.01), lambda m: SGD(m, lr=0.1)),
    "Adam": (lambda m: Adam(m, lr=0.02, betas=(0.5, 0.6), eps=1e-4, weight_decay=0.1), lambda m: Adam(m)),
    "AdamW": (lambda m: AdamW(m, lr=0.02, betas=(0.5, 0.6), eps=1e-4, weight_decay=0.2), lambda m: AdamW(m)),
}


@pytest.mark.parametrize("saved_as, made_as", OPTIMIZERS.values(), ids=OPTIMIZERS.keys())
def test_hyper_parameters_are_restored_and_the_run_continues_exactly(tmp_path, saved_as, made_as):
    """As PyTorch's load_state_dict restores param_groups: a plain SGD gets the momentum and its buffers."""
    init.manual_seed(0)
    model = MLP([4, 16, 1])
    optimizer = saved_as(model)
    step_optimizer(optimizer, steps=2)
    checkpoint.save(tmp_path / "c", model, optimizer)
    init.manual_seed(1)
    other_model = MLP([4, 16, 1])
    other = made_as(other_model)
    checkpoint.load(tmp_path / "c", other_model, other)
    assert other.config() == optimizer.config() and sorted(other.state) == sorted(optimizer.state)
    step_optimizer(optimizer, steps=2, seed=5)
    step_optimizer(other, steps=2, seed=5)
    for (name, p), q in zip(model.named_parameters(), other_model.parameters()):
        np.testing.assert_array_equal(q.data, p.data, err_msg=name)


@pytest.mark.parametrize("saved_as, made_as", [(SGD, Adam), (Adam, SGD), (Adam, AdamW), (AdamW, Adam)],
                         ids=lambda cls: cls.__name__)
def test_an_optimizer_of_another_type_is_refused_and_unchanged(tmp_path, saved_as, made_as):
    init.manual_seed(0)
    model = MLP([4, 16, 1])
    checkpoint.save(tmp_path / "c", model, saved_as(model, lr=0.1))
    optimizer = made_as(model, lr=0.5)
    step_optimizer(optimizer, steps=1)
    before, model_before = optimizer.state_dict(), model.state_dict()
    with pytest.raises(ag.CheckpointError, match=f"optimizer is {saved_as.__name__}, not {made_as.__name__}"):
        checkpoint.load(tmp_path / "c", model, optimizer)
    for key, value in optimizer.state_dict().items():
        np.testing.assert_array_equal(value, before[key], err_msg=key)
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value, model_before[key], err_msg=key)


def test_a_format_1_checkpoint_is_still_read(saved):
    """Format 1 kept the hyper-parameters in the metadata only."""
    trainer, path = saved
    tamper(path, lambda meta, arrays: (meta.update(format=1), [arrays.pop(f"optim/{name}") for name in
                                                               ("lr", "betas", "eps", "weight_decay")]))
    other = make_trainer(seed=1)
    other.load(path)
    assert snapshot(other) == snapshot(trainer)


BAD_SETTINGS = [(SGD, {"lr": -0.1}, "lr must be a finite number >= 0"), (SGD, {"lr": math.nan}, "lr"),
                (SGD, {"lr": math.inf}, "lr"), (SGD, {"lr": "fast"}, "lr must be"),
                (SGD, {"lr": 0.1, "momentum": -0.5}, "momentum"), (SGD, {"lr": 0.1, "nesterov": True}, "Nesterov"),
                (SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": "yes"}, "nesterov must be True or False"),
                (Adam, {"betas": (1.0, 0.9)}, "betas must be two numbers in \\[0, 1\\)"),
                (Adam, {"betas": (0.9,)}, "betas"), (Adam, {"betas": (0.9, -0.1)}, "betas"),
                (Adam, {"eps": -1e-8}, "eps"), (AdamW, {"weight_decay": math.nan}, "weight_decay"),
                (SGD, {"lr": "0.5"}, "lr must be a number"), (SGD, {"lr": True}, "lr must be a number"),
                (SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": 1}, "nesterov must be True or False")]


@pytest.mark.parametrize("cls, settings, message", BAD_SETTINGS, ids=lambda x: getattr(x, "__name__", repr(x)))
def test_hyper_parameters_out_of_range_are_refused(cls, settings, message):
    """PyTorch's ranges (ValueError), and NaN and infinity are out of every range."""
    init.manual_seed(0)
    with pytest.raises(ValueError, match=message):
        cls(MLP([4, 16, 1]), **settings)


BAD_SCHEDULES = [(lambda: Constant(-1.0), "Constant's lr must be a finite number >= 0"),
                 (lambda: Constant(math.nan), "lr"),
                 (lambda: LinearWarmup(0.1, warmup=0), "warmup must be an integer >= 1"),
                 (lambda: LinearWarmup(0.1, warmup=2.5), "an integer"),
                 (lambda: CosineDecay(0.1, total=10, warmup=-1), ">= 0"),
                 (lambda: CosineDecay(0.1, total=10, min_lr=math.inf), "min_lr"), (lambda: Noam(0), "d_model"),
                 (lambda: Noam(64, warmup=0), "warmup"), (lambda: Noam(64, factor=-2.0), "factor"),
                 (lambda: schedules.from_config({"type": "Noam", "d_model": 64, "speed": 2}), "do not fit Noam")]


@pytest.mark.parametrize("make, message", BAD_SCHEDULES)
def test_schedule_settings_out_of_range_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


# --- diverging runs -----------------------------------------------------------------------------------------------

def poisoned(value, at):
    """The regression batches, with ``value`` (NaN or inf) in the inputs of the batch of step ``at``."""
    calls = []

    def batches(rng):
        calls.append(None)
        batch = regression_batches(rng)
        if len(calls) == at:
            batch["x"][0, 0] = value
        return batch
    return batches


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_a_huge_learning_rate_logs_nan_and_finishes_the_run(tmp_path, caplog):
    """The default, on_nonfinite="continue": what a PyTorch loop does, with clipping, a schedule, evaluation,
    early stopping, the bar and checkpoints all going on."""
    trainer = make_trainer(optimizer=lambda m: SGD(m, lr=1e6), schedule=LinearWarmup(1e6, warmup=2), clip=1e9,
                           eval_every=2, eval_fn=lambda m: {"val_loss": float(np.abs(m[0].weight.data).sum())},
                           patience=2, progress=True, checkpoint_every=2, checkpoint_path=tmp_path / "last")
    with caplog.at_level(logging.WARNING, logger="attngraph.train.trainer"):
        history = trainer.fit(regression_batches, steps=20)
    losses = [r["loss"] for r in history if r["kind"] == "train"]
    assert math.isnan(losses[-1]) and all(math.isfinite(loss) for loss in losses[:2])
    assert trainer.step == 6 and trainer.best["step"] == 2                     # NaN evaluations at 4 and 6
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1 and len(caplog.records) == 1
    assert "training goes on (on_nonfinite='continue'" in caplog.records[0].message
    assert make_trainer(seed=1, optimizer=lambda m: SGD(m, lr=1.0)).load(tmp_path / "last")["step"] == 6


def parameters_and_moments(trainer) -> dict:
    """The model's and the optimizer's arrays, but the step count and the lr (which the schedule sets first)."""
    state = snapshot(trainer)
    return {"model": state["model"], "optimizer": {key: value for key, value in state["optimizer"].items()
                                                   if key not in ("steps", "lr")}}


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_skip_leaves_the_model_as_it_was_and_goes_on(value, caplog):
    reference = make_trainer()
    reference.fit(regression_batches, steps=2)
    trainer = make_trainer(on_nonfinite="skip")
    with caplog.at_level(logging.WARNING, logger="attngraph.train.trainer"):
        history = trainer.fit(poisoned(value, at=3), steps=3)
    assert parameters_and_moments(trainer) == parameters_and_moments(reference) and trainer.step == 3
    history += trainer.fit(regression_batches, steps=5)
    assert [math.isfinite(r["loss"]) for r in history] == [True, True, False, True, True]
    assert all(np.isfinite(p.data).all() for p in trainer.model.parameters())
    assert [r.message.split(":")[0] for r in caplog.records] == ["step 3"]
    assert "update skipped (on_nonfinite='skip')" in caplog.records[0].message


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_raise_stops_before_the_update_and_the_state_saves(tmp_path, value):
    trainer = make_trainer(on_nonfinite="raise", metrics_path=tmp_path / "metrics.jsonl")
    trainer.fit(regression_batches, steps=2)
    before = parameters_and_moments(trainer)
    with pytest.raises(ag.NonFiniteError, match="step 3: the loss is .*as after step 2 .*lower the learning rate"):
        trainer.fit(poisoned(value, at=1), steps=5)
    assert parameters_and_moments(trainer) == before and trainer.step == 2
    assert [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]
    trainer.save(tmp_path / "last")
    assert make_trainer(seed=1).load(tmp_path / "last")["step"] == 2


def test_on_nonfinite_must_be_known():
    with pytest.raises(ValueError, match="on_nonfinite must be 'continue', 'skip' or 'raise', got 'ignore'"):
        make_trainer(on_nonfinite="ignore")
