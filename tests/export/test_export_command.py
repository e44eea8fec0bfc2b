"""``attngraph export MODEL --onnx FILE``: the forward graph of a registered model (or a model file), with the
--config/--tiny/--dim conventions of summary and render; bad input is one line of stderr and status 2."""
import sys

import numpy as np
import pytest

from attngraph import models
from attngraph.cli import main

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_export_writes_a_model_that_onnxruntime_runs_at_any_batch_and_length(capsys, tmp_path):
    path = tmp_path / "gpt.onnx"
    code, out, _ = run(capsys, "export", "gpt", "--tiny", "--config", "layers=2", "--onnx", str(path))
    assert code == 0 and out == f"wrote {path}\n"
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [(i.name, i.shape) for i in session.get_inputs()] == [("tokens", ["B", "T"])]
    assert sum(n.op_type == "LayerNormalization" for n in onnx.load(path).graph.node) == 2 * 2 + 1
    vocab = models.spec("gpt").tiny["vocab"]
    for shape in [(2, 5), (1, 9)]:
        logits = session.run(None, {"tokens": np.random.default_rng(0).integers(0, vocab, shape)})[0]
        assert logits.shape == shape + (vocab,) and np.isfinite(logits).all()


def test_dim_fixes_a_size(capsys, tmp_path):
    path = tmp_path / "bert.onnx"
    assert run(capsys, "export", "bert", "--tiny", "--dim", "T=6", "--onnx", str(path))[0] == 0
    shape = onnx.load(path).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in shape] == ["B", 6]


@pytest.mark.parametrize("argv, message", [
    (["gpt", "--onnx", "{tmp}"], "is a folder; give a file name such as"),
    (["gpt", "--dim", "X=3", "--onnx", "{tmp}/m.onnx"], "the graph has no dimension(s) ['X']"),
    (["gpt", "--config", "layers=0.5", "--onnx", "{tmp}/m.onnx"], "--config layers=0.5: expected int"),
    (["gpt"], "the following arguments are required: --onnx"),
])
def test_bad_arguments_exit_with_2_and_one_line(capsys, tmp_path, argv, message):
    code, _, err = run(capsys, "export", *(a.format(tmp=tmp_path) for a in argv))
    assert code == 2 and message in err and err.count("\n") == 1


def test_without_the_onnx_package_it_says_how_to_install_it(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnx", None)
    code, _, err = run(capsys, "export", "gpt", "--onnx", str(tmp_path / "m.onnx"))
    assert code == 1 and "pip install 'attngraph[onnx]'" in err and not list(tmp_path.iterdir())
