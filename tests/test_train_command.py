"""``attngraph train MODEL``: a registered model trained on its task, a sequence task or a text file, with a
demo's output folder; resumed from its checkpoint, it repeats the uninterrupted run; bad arguments are one line
and exit status 2, before any training."""
import json
import os

import numpy as np
import pytest

from attngraph.cli import main
from attngraph.render.dashboard import dashboard_html
from attngraph.train.trainer import Trainer

TINY_GPT = ["train", "gpt", "--tiny", "--batch", "4", "--steps", "6", "--checkpoint-every", "3"]


def train(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def losses(folder):
    lines = (folder / "train.jsonl").read_text().splitlines()
    return [(r["step"], r["loss"]) for r in map(json.loads, lines) if r["kind"] == "train"]


def test_a_tiny_model_trains_and_writes_a_demos_folder(capsys, tmp_path):
    code, out, err = train(capsys, *TINY_GPT, "--out", str(tmp_path))
    assert code == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["model"] == "gpt" and metrics["task"] == "task" and metrics["steps"] == 6
    assert {"train.jsonl", "checkpoint.npz", "graph.svg", "loss.svg", "metrics.json", "attention-0.svg"} <= set(
        metrics["files"])
    assert all((tmp_path / name).is_file() for name in metrics["files"])
    assert [step for step, _ in losses(tmp_path)] == [1, 2, 3, 4, 5, 6]
    assert np.isfinite([loss for _, loss in losses(tmp_path)]).all()
    assert "step 6/6" in err


def test_checkpoints_draw_the_attention_for_the_dashboard(capsys, tmp_path):
    code, _, _ = train(capsys, *TINY_GPT, "--out", str(tmp_path))         # a checkpoint every 3 steps
    assert code == 0
    files = json.loads((tmp_path / "metrics.json").read_text())["files"]
    assert [f for f in files if "-step" in f] == ["attention-0-step3.svg", "attention-0-step6.svg"]
    assert "at step 3" in (tmp_path / "attention-0-step3.svg").read_text()
    page = dashboard_html(tmp_path)
    assert 0 < page.index("at step 3") < page.index("at step 6")


def test_resume_repeats_the_uninterrupted_run(capsys, tmp_path, monkeypatch):
    assert train(capsys, *TINY_GPT, "--out", str(tmp_path / "whole"))[0] == 0
    emit = Trainer._emit

    def interrupted(trainer, record):       # Ctrl-C at step 5: the checkpoint of step 3 is the last one
        if record["step"] == 5:
            raise KeyboardInterrupt
        emit(trainer, record)

    monkeypatch.setattr(Trainer, "_emit", interrupted)
    assert train(capsys, *TINY_GPT, "--out", str(tmp_path / "parts"))[0] == 130
    monkeypatch.setattr(Trainer, "_emit", emit)
    assert [step for step, _ in losses(tmp_path / "parts")] == [1, 2, 3, 4]
    assert train(capsys, *TINY_GPT, "--out", str(tmp_path / "parts"), "--resume")[0] == 0
    assert losses(tmp_path / "parts") == losses(tmp_path / "whole")


@pytest.mark.parametrize("data", ["copy", "text"])
def test_a_task_or_a_text_file(capsys, tmp_path, data):
    if data == "text":
        data = tmp_path / "text.txt"
        data.write_text("the quick brown fox jumps over the lazy dog. " * 20)
    code, out, _ = train(capsys, "train", "transformer" if data == "copy" else "gpt", "--tiny", "--data", str(data),
                         "--steps", "2", "--batch", "4", "--out", str(tmp_path / "run"))
    assert code == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    expected = 14 if data == "copy" else len(set(data.read_text()))        # the task's or the text's symbols
    assert [metrics["config"][k] for k in metrics["config"] if k.endswith("vocab")] in ([expected] * 2, [expected])


@pytest.mark.parametrize("argv, message", [
    (["gpt", "--steps", "0"], "positive integer"),
    (["gpt", "--lr", "nan"], "positive learning rate"),
    (["nonsense"], "unknown model"),
    (["gpt", "--config", "heads=2.5"], "expected int"),
    (["han", "--data", "copy"], "han (reading documents, labels) trains on its own task"),
    (["transformer", "--data", "missing.txt"], "or one of copy"),
    (["gpt", "--data", "missing.txt"], "cannot read a UTF-8 text"),
    (["gpt", "--resume"], "no checkpoint at"),
])
def test_bad_arguments(capsys, tmp_path, argv, message):
    code, _, err = train(capsys, "train", *argv, "--out", str(tmp_path / "run"))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()                  # refused before the output folder was made


def test_resume_refuses_another_model_or_a_finished_run(capsys, tmp_path):
    assert train(capsys, *TINY_GPT, "--out", str(tmp_path))[0] == 0
    code, _, err = train(capsys, *TINY_GPT, "--out", str(tmp_path), "--resume", "--config", "d_model=8")
    assert code == 2 and "give the same MODEL" in err
    code, _, err = train(capsys, *TINY_GPT, "--out", str(tmp_path), "--resume")
    assert code == 2 and "at step 6 already" in err


def test_the_checkpoint_gets_the_umask(capsys, tmp_path):
    previous = os.umask(0o027)
    try:
        assert train(capsys, *TINY_GPT, "--out", str(tmp_path))[0] == 0
    finally:
        os.umask(previous)
    assert (tmp_path / "checkpoint.npz").stat().st_mode & 0o777 == 0o640
