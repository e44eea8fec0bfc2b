"""The Trainer refuses bad arguments when it is made, or before its first step changes anything."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import DataError
from attngraph.train import Adam, Trainer


@pytest.mark.parametrize("option, error, message", [
    ({"clip": -1.0}, ValueError, "clip must be a finite number > 0, got -1.0"),
    ({"clip": float("nan")}, ValueError, "clip must be a finite number > 0, got nan"),
    ({"clip": 0}, ValueError, "clip must be a finite number > 0"),
    ({"eval_every": 0, "eval_fn": lambda m: {}}, ValueError, "eval_every must be an int >= 1, got 0"),
    ({"checkpoint_every": 0, "checkpoint_path": "x"}, ValueError, "checkpoint_every must be an int >= 1, got 0"),
    ({"patience": -1, "eval_fn": lambda m: {}}, ValueError, "patience must be an int >= 0, got -1"),
    ({"accumulate": 2.5}, TypeError, r"accumulate must be an int, got 2.5 \(float\)"),
    ({"accumulate": 0}, ValueError, "accumulate must be an int >= 1, got 0"),
    ({"callbacks": [1]}, TypeError, r"callbacks\[0\] must be a function, got 1 \(int\)"),
    ({"eval_fn": [1], "eval_every": 1}, TypeError, r"eval_fn must be a function, got \[1\] \(list\)"),
])
def test_bad_arguments_are_refused_when_the_trainer_is_made(regression, option, error, message):
    model = regression.model()
    with pytest.raises(error, match=message):
        Trainer(model, regression.loss, Adam(model), **option)


def unchanged(model):
    return [p.numpy() for p in model.parameters()]


@pytest.mark.parametrize("under", ["metrics_path", "checkpoint_path"])
def test_a_path_under_a_file_fails_before_the_first_step(regression, tmp_path, under):
    (tmp_path / "file").write_text("not a folder")
    model = regression.model()
    before = unchanged(model)
    options = {"metrics_path": tmp_path / "file" / "metrics.jsonl"} if under == "metrics_path" else \
        {"checkpoint_path": tmp_path / "file" / "last", "checkpoint_every": 1}
    trainer = Trainer(model, regression.loss, Adam(model), progress=False, **options)
    with pytest.raises(ag.AttnGraphError, match=f"{under} .*file.* cannot be written: .*file"):
        trainer.fit(regression.batches, steps=2)
    assert trainer.step == 0 and all(np.array_equal(a, b) for a, b in zip(unchanged(model), before))


@pytest.mark.parametrize("result, options, message", [
    ([0.5], {}, "must return a dict of metric names to numbers, got list"),
    ({"val": "high"}, {}, "must return numbers, got {'val': 'high'}"),
    ({"accuracy": 0.5}, {"patience": 2}, r"early stopping monitors 'val_loss', which eval_fn did not return \(it "
                                         r"returned \['accuracy'\]\)"),
])
def test_an_eval_fn_returning_no_metrics_fails_before_the_first_update(regression, result, options, message):
    """The sanity evaluation before the first step: nothing trained, nothing recorded."""
    model = regression.model()
    before = unchanged(model)
    trainer = Trainer(model, regression.loss, Adam(model), eval_every=5, eval_fn=lambda m: result, progress=False,
                      **options)
    with pytest.raises(ag.AttnGraphError, match=message):
        trainer.fit(regression.batches, steps=10)
    assert trainer.step == 0 and trainer.history == []
    assert all(np.array_equal(a, b) for a, b in zip(unchanged(model), before))


def test_the_sanity_evaluation_runs_once_per_trainer_in_eval_mode_and_is_not_recorded(regression):
    model = regression.model()
    calls = []
    trainer = Trainer(model, regression.loss, Adam(model), eval_every=2,
                      eval_fn=lambda m: calls.append((trainer.step, m.training)) or {"val_loss": 1.0}, progress=False)
    trainer.fit(regression.batches, steps=2)
    trainer.fit(regression.batches, steps=4)
    assert calls == [(0, False), (2, False), (4, False)]
    assert [r["step"] for r in trainer.history if r["kind"] == "eval"] == [2, 4] and model.training


@pytest.mark.parametrize("batch, message", [
    (lambda rng: {"x": np.zeros((0, 4), np.float32), "y": np.zeros((0, 1), np.float32)},
     r"step 1, micro-batch 0: the batch's 'x' holds no example \(shape \(0, 4\)\); its loss would be NaN"),
    (lambda rng: [1, 2], "step 1, micro-batch 0: batches\\(rng\\) must return a dict of input arrays, got list"),
])
def test_an_empty_or_malformed_batch_is_refused_before_training_on_it(regression, batch, message):
    model = regression.model()
    before = unchanged(model)
    trainer = Trainer(model, regression.loss, Adam(model), progress=False)
    with pytest.raises(DataError, match=message):
        trainer.fit(batch, steps=1)
    assert trainer.step == 0 and all(np.array_equal(a, b) for a, b in zip(unchanged(model), before))
