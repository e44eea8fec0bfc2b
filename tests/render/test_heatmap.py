"""Attention heatmaps: a grey square per weight with its tooltip, a layer × head grid for 4-D weights."""
import importlib.util
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from attngraph.render import RenderError, attention_heatmap

SVG = "{http://www.w3.org/2000/svg}"


def cells(path):
    root = ET.parse(path).getroot()
    return [r for r in root.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]


def test_one_grey_cell_per_weight_with_a_tooltip(tmp_path):
    weights = np.array([[1.0, 0.0, 0.0], [0.25, 0.75, 0.0]])
    path = attention_heatmap(weights, ["le", "chat", "<eos>"], ["the", "cat"], tmp_path / "map.svg")
    found = cells(path)
    assert len(found) == 6
    assert [r.get("fill") for r in found[:3]] == ["#ffffff", "#000000", "#000000"]     # white is 1, black 0
    assert found[3].find(f"{SVG}title").text == "cat → le: 0.250"
    assert "&lt;eos&gt;" in path.read_text()


def test_layers_by_heads_grid(tmp_path):
    weights = np.random.default_rng(0).dirichlet(np.ones(4), size=(2, 3, 5))      # (layers, heads, Ty, Tx)
    path = attention_heatmap(weights, list("abcd"), None, tmp_path / "grid.svg")
    text = path.read_text()
    assert len(cells(path)) == 2 * 3 * 5 * 4
    assert "head 2" in text and "layer 1" in text


def test_every_map_has_a_frame_so_that_white_cells_show_on_the_white_page(tmp_path):
    weights = np.zeros((2, 3, 1, 4))
    weights[..., 0] = 1.0                                                          # one-row maps, white cells
    path = attention_heatmap(weights, list("abcd"), ["x"], tmp_path / "frames.svg")
    root = ET.parse(path).getroot()
    frames = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "frame"]
    assert len(frames) == 2 * 3
    first = cells(path)[0]
    assert (float(frames[0].get("x")), float(frames[0].get("y"))) < (float(first.get("x")), float(first.get("y")))
    assert frames[0].get("fill") == "none" and frames[0].get("stroke") not in (None, "white", "#ffffff")


def test_bad_weights_and_labels(tmp_path):
    with pytest.raises(RenderError, match="shape"):
        attention_heatmap(np.ones(3), None, None, tmp_path / "a.svg")
    with pytest.raises(RenderError, match="labels"):
        attention_heatmap(np.ones((2, 3)), ["a"], None, tmp_path / "a.svg")
    with pytest.raises(RenderError, match=".svg or .png"):
        attention_heatmap(np.ones((2, 3)), None, None, tmp_path / "a.pdf")


def test_png_needs_matplotlib(tmp_path):
    weights = np.eye(3)
    if importlib.util.find_spec("matplotlib") is None:
        with pytest.raises(RenderError, match="matplotlib"):
            attention_heatmap(weights, None, None, tmp_path / "map.png")
    else:
        assert attention_heatmap(weights, None, None, tmp_path / "map.png").read_bytes()[:4] == b"\x89PNG"
