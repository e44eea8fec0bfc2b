"""A ``scan`` drawn: one box ``scan ×T`` in the graph, its body drawable on its own or beside the box
(``bodies=True``), and listed op by op in the viewer's details."""
import json
import re
import shutil
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import attngraph as ag
from attngraph.cli import main
from attngraph.nn.recurrent import GRU
from attngraph.render import render_graph, to_svg
from attngraph.render.html import to_html
from attngraph.render.picture import picture

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot lays out the graph")
SVG = "{http://www.w3.org/2000/svg}"


def boxes(svg: str) -> dict[str, list[str]]:
    """{node id: the texts of its box} of a drawing, the legend left out."""
    root = ET.fromstring(svg.encode())
    return {g.find(f"{SVG}title").text: [t.text for t in g.iter(f"{SVG}text") if t.text]
            for g in root.iter(f"{SVG}g") if g.get("class") == "node" and g.find(f"{SVG}title").text != "legend"}


def edges(svg: str) -> set[tuple[str, str]]:
    root = ET.fromstring(svg.encode())
    return {tuple(g.find(f"{SVG}title").text.split("->")) for g in root.iter(f"{SVG}g") if g.get("class") == "edge"}


@pytest.fixture(scope="module")
def graph():
    return ag.trace(GRU(8, 16, rng=np.random.default_rng(0)), x=ag.Input(("B", "T", 8)))


@pytest.fixture(scope="module")
def scan(graph):
    return next(n for n in graph.nodes if n.op == "scan")


def test_a_scan_is_one_box(graph, scan):
    drawn = boxes(to_svg(graph, B=2, T=5))
    body = scan.attrs["body"].graph
    assert [texts[0] for texts in drawn.values()].count("scan ×T") == 1
    assert drawn[scan.label][:3] == ["scan ×T", f"body: {sum(n.kind == 'call' for n in body.nodes)} ops, calls cell",
                                     "20 kFLOPs"]                       # 5 steps × 2 rows of 2 kFLOPs
    assert "B×T×16 f32" in drawn[scan.label] and "[2] weight 16×48 f32" in drawn[scan.label]
    assert len(drawn) == len(picture(graph).boxes)                  # the body's ops are no boxes of the graph
    assert not any(texts[0] in ("sigmoid", "tanh") for texts in drawn.values())
    assert "time loop (scan)" in to_svg(graph)                        # in the legend


def test_a_reversed_scan_says_so():
    graph = ag.trace(GRU(4, 4, bidirectional=True), x=ag.Input(("B", 6, 4)))
    titles = [texts[:3] for texts in boxes(to_svg(graph)).values() if texts[0].startswith("scan")]
    assert sorted(t[0] for t in titles) == ["scan ×6", "scan ×6"]
    assert sorted(t[1] for t in titles) == ["body: 20 ops, calls backward_cell", "body: 20 ops, calls cell"]
    assert sum("reversed: t = 5 … 0" in t[2] for t in titles) == 1


def test_the_body_is_a_graph_drawable_on_its_own(scan, tmp_path):
    body = scan.attrs["body"].graph
    drawn = boxes(render_graph(body, tmp_path / "step.svg").read_text())
    titles = sorted(texts[0] for texts in drawn.values())
    assert {"carry", "x0", "c0", "c1", "out", "matmul", "tanh"} <= set(titles) and titles.count("sigmoid") == 2
    assert len(drawn) == len(picture(body).boxes)


def test_the_bodies_option_draws_each_body_beside_its_box(graph, scan):
    svg = to_svg(graph, bodies=True)
    drawn, lines = boxes(svg), edges(svg)
    body = scan.attrs["body"].graph
    inner = {box_id: texts for box_id, texts in drawn.items() if box_id.startswith(f"{scan.label}_")}
    assert len(inner) == len(picture(body).boxes) and len(drawn) == len(picture(graph).boxes) + len(inner)
    assert drawn[scan.label][0] == "scan ×T"
    carry, x0, c0, out = (f"{scan.label}_{n.label}" for n in (*map(body.inputs.get, ("carry", "x0", "c0")),
                                                               body.outputs[0]))
    assert {(scan.label, carry), (scan.label, x0), (out, scan.label)} <= lines      # the loop and the step
    assert inner[c0][:2] == ["c0", "= cell.hidden.weight"]
    assert inner[carry][1] == "= init, then the previous step's carry"
    root = ET.fromstring(svg.encode())
    clusters = [g for g in root.iter(f"{SVG}g") if g.get("class") == "cluster"]
    assert any(f"{scan.label} scan ×T: its body, one step" in "".join(t.text or "" for t in g.iter(f"{SVG}text"))
               for g in clusters)
    assert to_svg(graph) != svg and boxes(to_svg(graph)) == {k: v for k, v in drawn.items() if k not in inner}


def test_the_backward_pass_of_a_scan_is_drawn():
    encoder = GRU(4, 8)
    grads = ag.trace(lambda x: ag.sum(encoder(x)[0]), x=ag.Input(("B", 3, 4))).grad()
    scans = [n for n in grads.nodes if n.op == "scan"]
    assert len(scans) == 3      # the forward loop; its gradient's: the forward keeping residuals, the reverse loop
    for view, count in (("forward", 1), ("backward", 2), ("both", 3)):
        drawn = boxes(to_svg(grads, view=view, bodies=True))
        assert sum(texts[0] == "scan ×3" for texts in drawn.values()) == count


def test_the_viewer_lists_the_body(graph, scan):
    page = to_html(graph, inputs={"x": np.zeros((2, 5, 8), np.float32)})
    data = json.loads(re.search(r'id="attngraph-data">(.*?)</script>', page, re.S).group(1))
    box = next(b for b in data["boxes"] if b["id"] == scan.label)
    details = data["details"][scan.label]
    assert box["title"] == details["title"] == "scan ×T" and details["FLOPs"] == "20 kFLOPs"
    body = scan.attrs["body"].graph
    assert len(details["body"]) == sum(n.kind != "constant" for n in body.nodes)
    matmul = next(n for n in body.nodes if n.op == "matmul")
    operands = ", ".join(f"%{x.id}" for x in matmul.inputs)
    assert f"%{matmul.id} = matmul({operands}) rows×48 · cell.hidden" in details["body"]
    assert f"%{body.inputs['c0'].id} = c0 16×48 ← cell.hidden.weight" in details["body"]
    assert details["body"][-1] == f"out = %{body.outputs[0].inputs[0].id}"
    assert '"body"' in re.search(r"const FIELDS = \[(.*?)\];", page, re.S).group(1)      # the panel shows it


def test_the_render_command_on_a_model_with_a_recurrent_encoder(tmp_path, capsys):
    out = tmp_path / "han.svg"
    assert main(["render", "han", "--tiny", "--out", str(out)]) == 0
    titles = sorted(texts[0] for texts in boxes(out.read_text()).values() if texts[0].startswith("scan"))
    assert titles == ["scan ×3", "scan ×3", "scan ×4", "scan ×4"]        # sentences of 4 words, documents of 3
    assert main(["render", "seq2seq-bahdanau", "--tiny", "--out", str(tmp_path / "s2s.svg")]) == 0
    assert str(tmp_path / "s2s.svg") in capsys.readouterr().out
    assert main(["render", "han", "--tiny", "--bodies", "--out", str(out)]) == 0
    drawn = boxes(out.read_text())
    scans = [box_id for box_id, texts in drawn.items() if texts[0].startswith("scan")]
    assert len(scans) == 4 and all(sum(b.startswith(f"{s}_") for b in drawn) > 20 for s in scans)
