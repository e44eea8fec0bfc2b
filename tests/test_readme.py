"""The README's Python snippets run as written, in order, in one namespace (a snippet may use the names of those
before it, as a reader following the README would), and every method that a layer gives ``Graph`` exists after a
plain ``import attngraph``."""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.models.hf_folders import gpt2_folder

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


@pytest.fixture(scope="module")
def readme(tmp_path_factory):
    """The namespace after each snippet of the README (ONNX and Hugging Face's need their extras; the Hugging Face
    snippet reads a tiny random "gpt2" folder written for it), and the folder they ran in."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("safetensors")
    folder = tmp_path_factory.mktemp("readme")
    gpt2_folder(folder / "gpt2", vocab=3300)         # the README's token ids
    namespace, after = {}, []
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        for code in SNIPPETS:
            exec(compile(code, str(README), "exec"), namespace)
            after.append(dict(namespace))
    return after, folder


def test_the_readme_has_its_snippets():
    assert len(SNIPPETS) == 6
    assert "graph.to_html(" in SNIPPETS[1] and "hf.load(" in SNIPPETS[5]


def test_tour(readme):
    namespace, folder = readme[0][0], readme[1]
    assert (folder / "encoder.svg").read_text().lstrip().startswith("<?xml")
    assert namespace["y"].shape == (2, 10, 64)
    assert namespace["dx"].shape == (3,)
    np.testing.assert_allclose(namespace["dx"], 2 * np.tanh(1.0) * (1 - np.tanh(1.0) ** 2), rtol=1e-6)


def test_viewer_page(readme):
    folder = readme[1]
    page = (folder / "encoder.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "attngraph-data" in page


def test_optimized_step_renders(readme):
    namespace, folder = readme[0][2], readme[1]
    assert (folder / "step.svg").read_text().lstrip().startswith("<?xml")
    assert any(node.op == "fused" for node in namespace["optimized"].nodes)


def test_training_example_learns(readme):
    namespace, folder = readme[0][3], readme[1]
    history = namespace["history"]
    assert len(history) == 150
    assert history[-1]["loss"] < 0.1 * history[0]["loss"]          # counting is learnt
    assert [p.name for p in (folder / "run").iterdir()] == ["last.npz"]     # one file: the whole checkpoint


def test_onnx_export(readme):
    namespace, folder = readme[0][4], readme[1]
    expected = namespace["graph"].compile()(tokens=namespace["tokens"])
    np.testing.assert_allclose(namespace["logits"], expected, rtol=1e-5, atol=1e-5)
    assert (folder / "gpt.onnx").stat().st_size > 0


def test_hugging_face_import(readme):
    namespace = readme[0][5]
    assert namespace["logits"].shape == (1, 3, 3300)
    more = namespace["more"]
    assert more.shape == (1, 23) and (more[:, :3] == namespace["tokens"]).all()


def test_graph_methods_exist_after_a_plain_import():
    """Every ``@graph_method("name")`` of the package is a method of Graph once ``import attngraph`` is done, in a
    fresh interpreter (nothing else imported the modules that define them)."""
    names = sorted({m for path in (ROOT / "attngraph").rglob("*.py")
                    for m in re.findall(r'@graph_method\("(\w+)"\)', path.read_text(encoding="utf-8"))})
    assert {"compile", "grad", "render", "summary", "export_onnx", "to_html"} <= set(names)
    check = f"import attngraph; print([n for n in {names!r} if not hasattr(attngraph.Graph, n)])"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip() == "[]"
