"""The Trainer on a tiny regression MLP: it learns, it is reproducible, it resumes exactly, it logs."""
import json

import numpy as np
import pytest

import attngraph as ag
from attngraph.train import SGD, Adam, AdamW, CosineDecay, LinearWarmup, Trainer, checkpoint


def losses(records):
    return [r["loss"] for r in records if r["kind"] == "train"]


def test_training_reduces_the_loss(regression):
    model = regression.model()
    trainer = Trainer(model, regression.loss, Adam(model, lr=0.02), progress=False)
    history = trainer.fit(regression.batches, steps=60)
    curve = losses(history)
    assert len(curve) == 60 and trainer.step == 60
    assert np.mean(curve[-5:]) < 0.05 * np.mean(curve[:5])
    assert history[-1]["mean_abs_error"] < 0.3 * history[0]["mean_abs_error"]
    assert set(history[0]) == {"kind", "step", "loss", "lr", "grad_norm", "mean_abs_error", "seconds",
                               "examples_per_second"}


def test_the_same_seed_gives_the_same_loss_curve(regression):
    def curve(seed):
        model = regression.model()
        trainer = Trainer(model, regression.loss, SGD(model, lr=0.05, momentum=0.9), seed=seed, progress=False)
        return losses(trainer.fit(regression.batches, steps=8))
    assert curve(0) == curve(0)
    assert curve(0) != curve(1)


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_resuming_from_a_checkpoint_repeats_the_uninterrupted_run(regression, tmp_path, dropout):
    def trainer(model_seed, **options):
        model = regression.model(model_seed, dropout)
        return Trainer(model, regression.loss, AdamW(model, lr=0.01), schedule=CosineDecay(0.01, total=8, warmup=2),
                       clip=0.5, accumulate=2, seed=7, progress=False, **options)

    uninterrupted = losses(trainer(0).fit(regression.batches, steps=8))
    first = trainer(0, checkpoint_every=2, checkpoint_path=tmp_path / "last", model_info={"name": "mlp"})
    assert losses(first.fit(regression.batches, steps=5)) == uninterrupted[:5]      # the checkpoint is of step 4
    resumed = trainer(model_seed=99)
    meta = resumed.load(tmp_path / "last")
    assert meta["step"] == 4 and resumed.step == 4 and meta["schedule"]["type"] == "CosineDecay"
    assert meta["model"] == {"name": "mlp"} and meta["rng"]["seed"] == 7
    assert losses(resumed.fit(regression.batches, steps=8)) == uninterrupted[4:]


def test_a_checkpoint_without_trainer_state_is_refused(regression, tmp_path):
    model = regression.model()
    checkpoint.save(tmp_path / "plain", model, Adam(model))
    other = regression.model(seed=1)
    trainer = Trainer(other, regression.loss, Adam(other), progress=False)
    before = trainer.model.state_dict()
    with pytest.raises(ag.CheckpointError, match="no trainer state"):
        trainer.load(tmp_path / "plain")
    for name, value in trainer.model.state_dict().items():
        np.testing.assert_array_equal(value, before[name])


def test_clipping_and_schedule_reach_the_optimizer(regression):
    model = regression.model()
    seen = []
    trainer = Trainer(model, regression.loss, SGD(model, lr=1.0), schedule=LinearWarmup(0.1, warmup=4),
                      clip=1e-3, callbacks=[lambda t, record: seen.append(record)], progress=False)
    before = model.state_dict()
    trainer.fit(regression.batches, steps=1)
    step = np.sqrt(sum(np.sum((p.data - before[name]) ** 2) for name, p in model.named_parameters()))
    assert seen[0]["lr"] == pytest.approx(0.025) and seen[0]["grad_norm"] > 1
    assert step == pytest.approx(0.025 * 1e-3, rel=1e-3)          # lr · max_norm: the clipped gradient


def test_only_the_optimizers_parameters_change(regression):
    model = regression.model()
    frozen = model[0].weight.data.copy()
    trainer = Trainer(model, regression.loss, Adam([("w", model[2].weight)], lr=0.1), progress=False)
    trainer.fit(regression.batches, steps=3)
    np.testing.assert_array_equal(model[0].weight.data, frozen)
    assert trainer.optimizer.steps == 3


def test_evaluation_early_stopping_and_the_metrics_file(regression, tmp_path):
    scripted = iter([0.5, 3.0, 2.0, 2.5, 2.4, 1.0])        # 0.5: the sanity evaluation's, before training, unrecorded
    model = regression.model()
    modes = []

    def evaluate(m):
        modes.append(m.training)
        return {"val_loss": next(scripted)}
    trainer = Trainer(model, regression.loss, Adam(model), eval_every=2, eval_fn=evaluate, patience=2,
                      metrics_path=tmp_path / "metrics.jsonl", progress=False)
    trainer.fit(regression.batches, steps=100)
    assert trainer.step == 8                       # evaluations at 2, 4 (best), 6, 8: two without improvement
    assert trainer.best == {"step": 4, "value": 2.0} and modes == [False] * 5 and model.training
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in records].count("train") == 8
    assert [(r["step"], r["val_loss"]) for r in records if r["kind"] == "eval"] == [(2, 3.0), (4, 2.0), (6, 2.5),
                                                                                    (8, 2.4)]
    assert records == trainer.history


def test_a_callback_can_stop_the_run_and_tokens_are_counted(regression):
    model = regression.model()

    def stop_at_three(trainer, record):
        if record["step"] == 3:
            trainer.request_stop()
    trainer = Trainer(model, regression.loss, Adam(model), callbacks=[stop_at_three],
                      tokens=lambda batch: batch["x"].size, progress=False)
    history = trainer.fit(regression.batches, steps=10)
    assert trainer.step == 3 and "tokens_per_second" in history[0] and "examples_per_second" not in history[0]


def test_progress_lines_off_a_terminal_and_a_bar_when_asked(regression, capsys):
    """Off a terminal (stderr is captured), a line a step here; more in test_progress.py."""
    model = regression.model()
    Trainer(model, regression.loss, Adam(model), compile_progress=False).fit(regression.batches, steps=2)
    out, err = capsys.readouterr()
    assert out == "" and [line.split(":")[0] for line in err.splitlines()] == ["step 1/2", "step 2/2"]
    Trainer(model, regression.loss, Adam(model), progress=True).fit(regression.batches, steps=2)
    err = capsys.readouterr().err
    assert "2/2" in err and "loss=" in err and "lr=" in err and "examples/s=" in err


def test_a_loss_function_must_return_scalars(regression):
    model = regression.model()
    with pytest.raises(ag.AttnGraphError, match="shape"):
        Trainer(model, lambda m, x, y: {"loss": ag.mean(m(x)), "out": m(x)}, Adam(model),
                progress=False).fit(regression.batches, steps=1)
    with pytest.raises(ag.AttnGraphError, match="'loss'"):
        Trainer(model, lambda m, x, y: {"error": ag.mean(m(x))}, Adam(model),
                progress=False).fit(regression.batches, steps=1)
    with pytest.raises(ValueError, match="eval_fn"):
        Trainer(model, regression.loss, Adam(model), patience=3)
