"""Drawing graphs: the SVG itself, read back as XML."""
import re
import xml.etree.ElementTree as ET

import networkx as nx
import numpy as np
import pytest

import attngraph as ag
from attngraph.core.primitive import REGISTRY
from attngraph.inspect import format_count
from attngraph.inspect.calls import is_backward
from attngraph.inspect.summary import shape_text
from attngraph.render import RenderError, render_graph, to_dot, to_svg
from attngraph.render.style import FAMILIES
from tests.inspect.transformer import Encoder, forward_graph, inputs, loss_graph

SVG = "{http://www.w3.org/2000/svg}"
EVERYTHING = 10 ** 6          # a budget that never collapses


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg.encode())


def groups(root, kind):
    """{title: element} of the SVG's nodes, edges or clusters."""
    return {g.find(f"{SVG}title").text: g for g in root.iter(f"{SVG}g") if g.get("class") == kind}


def texts(element) -> list[str]:
    return [t.text for t in element.iter(f"{SVG}text") if t.text]


def drawn(svg: str) -> nx.DiGraph:
    """The boxes and the edges of a drawing."""
    root = parse(svg)
    g = nx.DiGraph()
    g.add_nodes_from(t for t in groups(root, "node") if t != "legend")
    g.add_edges_from(title.split("->") for title in groups(root, "edge"))
    return g


@pytest.fixture(scope="module")
def model():
    return Encoder()


@pytest.fixture(scope="module")
def graph(model):
    return ag.trace(model, **inputs(model))


@pytest.fixture(scope="module")
def full_svg(graph):
    return to_svg(graph, budget=EVERYTHING)


def test_one_cluster_per_module_of_a_two_layer_transformer(model, graph, full_svg):
    scopes = {n.scope for n in graph.nodes}
    modules = {path for path, _ in model.named_modules()
               if path and any(s == path or s.startswith(path + ".") for s in scopes)}
    assert "layers.1.attn.w_q" in modules and "layers.0.attn.dropout" not in modules    # p=0: no nodes
    assert sorted(groups(parse(full_svg), "cluster")) == sorted(f"cluster_{m}" for m in modules)


def test_boxes_show_their_shape_and_edges_the_shape_they_carry(graph, full_svg):
    root = parse(full_svg)
    nodes = groups(root, "node")
    for node in graph.nodes:
        if node.kind == "call":
            assert f"{shape_text(node)} f32" in texts(nodes[node.label]), node.describe()
    labels = {title: texts(e) for title, e in groups(root, "edge").items()}
    scores = next(n for n in graph.nodes if n.op == "softmax")
    assert labels[f"n{scores.inputs[0].id}->{scores.label}"] == ["B×2×T×T"]
    product = next(n for n in graph.nodes if n.op == "matmul" and n.inputs[1].op == "transpose")
    assert labels[f"{product.inputs[1].label}->{product.label}"] == ["[1] B×2×8×T"]   # slot of a @ b


def test_footer_totals_match_the_summary(graph):
    svg = to_svg(graph, T=12)
    s = graph.summary(T=12)
    footer = " ".join(texts(parse(svg)))
    assert f"{s.parameters:,} parameters ({s.trainable:,} trainable)" in footer
    assert f"{format_count(s.flops, 'FLOPs')} forward at B=1, T=12" in footer
    assert s.parameters == Encoder().num_parameters()


def test_depth_and_rolling_reduce_the_boxes_and_stay_acyclic(graph, full_svg):
    full = drawn(full_svg)
    assert nx.is_directed_acyclic_graph(full)
    counts = []
    for options in (dict(depth=3), dict(depth=2), dict(depth=1), dict(roll=True), dict(roll=True, depth=2)):
        picture = drawn(to_svg(graph, budget=EVERYTHING, **options))
        assert nx.is_directed_acyclic_graph(picture), options
        counts.append(picture.number_of_nodes())
    assert full.number_of_nodes() > counts[0] > counts[1] > counts[2] == 4       # tokens, embed, layers, head
    assert counts[3] < full.number_of_nodes() and counts[4] < counts[1]
    assert "layers.0 … layers.1 ×2" in texts(parse(to_svg(graph, roll=True)))


def test_a_large_graph_is_rolled_then_collapsed_below_the_budget(graph, full_svg):
    assert len(drawn(to_svg(graph, budget=20))) <= 20 < len(drawn(full_svg))
    deep = forward_graph(layers=6)
    labels = texts(parse(to_svg(deep)))                          # 6 × 30 boxes unrolled: over the budget
    assert "layers.0 … layers.5 ×6" in labels and "w_q" in labels     # one layer drawn, fully expanded


class Stepper(ag.Module):
    """A cell called at every step, with the step's input read between the calls."""

    def __init__(self, steps=3):
        super().__init__()
        self.cell, self.steps = ag.nn.Linear(8, 4), steps

    def forward(self, x):
        h = x[:, 0] * 0.0
        for t in range(self.steps):
            h = ag.tanh(self.cell(ag.concat([x[:, t], h], axis=-1)))
        return h


def test_a_module_called_at_every_step_is_collapsed_by_call():
    graph = ag.trace(Stepper(), x=ag.Input(("B", 3, 4)))
    svg = to_svg(graph, depth=1)
    assert nx.is_directed_acyclic_graph(drawn(svg))
    assert {f"cell (call {k} of 3)" for k in (1, 2, 3)} <= set(texts(parse(svg)))


def test_the_steps_of_a_loop_are_drawn_once_unless_unrolled():
    graph = ag.trace(Stepper(steps=10), x=ag.Input(("B", 10, 4)))
    rolled, unrolled = (to_svg(graph, depth=1, roll=roll) for roll in (True, False))
    assert "step ×10" in texts(parse(rolled)) and "step ×10" not in texts(parse(unrolled))
    assert "cell (call 10 of 10)" in texts(parse(unrolled))
    assert "cell" in texts(parse(rolled)) and not [t for t in texts(parse(rolled)) if "(call" in t]   # one cell per step
    ops = {svg: [n for n in graph.nodes if n.kind == "call" and n.label in drawn(svg)] for svg in (rolled, unrolled)}
    assert len(ops[unrolled]) == 2 + 10 * 3 and len(ops[rolled]) == 2 + 3     # x[:, 0] * 0, then getitem, concat, tanh
    x = next(n.label for n in graph.nodes if n.name == "x")
    assert drawn(unrolled).out_degree(x) == 11 and drawn(rolled).out_degree(x) == 2   # the input read by every step
    assert nx.is_directed_acyclic_graph(drawn(rolled))


def test_backward_view_holds_a_gradient_node_for_every_parameter(model):
    grads = loss_graph(model).grad()
    svg = to_svg(grads, view="backward", budget=EVERYTHING)
    labels = set(texts(parse(svg)))
    assert {f"grad:{name}" for name, _ in model.named_parameters()} <= labels
    assert nx.is_directed_acyclic_graph(drawn(svg))
    forward_ops = {n.label for n in grads.nodes if n.kind == "call" and n.grad_of is None}
    assert not forward_ops & set(drawn(svg))           # the forward pass is not drawn
    assert any(t.startswith("∂ n") for t in labels)    # backward boxes name the node they differentiate


def test_both_view_draws_the_backward_pass_beside_the_forward_one_naming_what_it_reads(model):
    grads = loss_graph(model).grad()
    svg = to_svg(grads, view="both", depth=3)
    root, node = parse(svg), {n.id: n for n in grads.nodes}
    boxes = {title: node[int(title[1:])] for title in drawn(svg)}     # a box: its (first) node, n17 or m17
    assert not [e for e in drawn(svg).edges if is_backward(boxes[e[1]]) and not is_backward(boxes[e[0]])]
    middle = {title: np.mean([float(t.get("x")) for t in g.iter(f"{SVG}text")])
              for title, g in groups(root, "node").items() if title in boxes}
    assert max(x for t, x in middle.items() if not is_backward(boxes[t])) < \
        min(x for t, x in middle.items() if is_backward(boxes[t]))
    label = {title: texts(g) for title, g in groups(root, "node").items()}
    grad_of_residual = next(t for t, n in boxes.items() if t.startswith("m") and n.scope == "layers.1.norm2"
                            and is_backward(n))
    residual = max((n for n in boxes.values() if n.op == "add" and n.scope == "layers.1"), key=lambda n: n.id)
    assert f"reads: {residual.label} add" in label[grad_of_residual]    # norm2's gradient reads norm2's input
    grad_of_loss = next(t for t, n in boxes.items() if n.grad_of is not None and n.grad_of.op == "cross_entropy")
    assert "targets" in label[grad_of_loss][-1]
    assert "reads: forward boxes it uses" in label["legend"] and "∇ layers.0" in texts(root)
    assert nx.is_directed_acyclic_graph(drawn(svg))


def test_gradient_norms_after_a_training_step_and_parameter_nodes(model):
    grads = loss_graph(model).grad()
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 11, (2, 5))
    values = dict(zip(grads.output_names, grads.compile()(tokens=tokens, targets=tokens)))
    svg = to_svg(grads, gradients=values, parameter_nodes=True, budget=EVERYTHING)
    weight = np.linalg.norm(values["grad:head.weight"])
    nodes = {title: " ".join(texts(e)) for title, e in groups(parse(svg), "node").items()}
    head = next(n for n in grads.nodes if n.name == "head.weight")
    assert f"‖∇‖={weight:.3g}" in nodes[head.label]
    assert sum(n.kind == "parameter" for n in grads.nodes) == sum(
        title in nodes for title in (n.label for n in grads.nodes if n.kind == "parameter"))


def test_output_is_byte_identical_across_runs(tmp_path):
    first, second = (render_graph(forward_graph(), tmp_path / f"{k}.svg", roll=True) for k in "ab")
    assert first.read_bytes() == second.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.svg", "b.svg"]       # no .dot unasked
    first, second = (render_graph(forward_graph(), tmp_path / f"{k}.dot", roll=True) for k in "ab")
    assert first.read_bytes() == second.read_bytes()


def test_node_ids_are_plain(full_svg):
    assert all(re.fullmatch(r"[nm]\d+|legend", t) for t in groups(parse(full_svg), "node"))


def test_missing_dot_gives_install_instructions_and_leaves_the_dot_file(graph, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RenderError) as e:
        render_graph(graph, tmp_path / "graph.svg")
    for how in ("apt-get install graphviz", "brew install graphviz", "conda install", "choco install graphviz"):
        assert how in str(e.value)
    assert (tmp_path / "graph.dot").read_text() == to_dot(graph).source
    assert not (tmp_path / "graph.svg").exists()


def test_formats_and_bad_options(graph, tmp_path):
    assert render_graph(graph, tmp_path / "g.dot").read_text().startswith("digraph attngraph")
    assert render_graph(graph, tmp_path / "g.png", depth=1).read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(RenderError, match=".svg"):
        render_graph(graph, tmp_path / "g.jpeg")
    with pytest.raises(ValueError, match="view"):
        to_dot(graph, view="sideways")
    with pytest.raises(ag.AttnGraphError, match="no dimension"):
        to_dot(graph, Q=3)


def test_left_to_right_layout_and_png_resolution(graph, tmp_path):
    """A deep model drawn left to right is wider than tall; dpi scales a .png."""
    def size(svg):
        root = parse(svg)
        return float(root.get("width").removesuffix("pt")), float(root.get("height").removesuffix("pt"))
    (down_w, down_h), (right_w, right_h) = (size(to_svg(graph, depth=2, direction=d)) for d in ("down", "right"))
    assert down_h > down_w and right_w > right_h
    widths = [int.from_bytes(render_graph(graph, tmp_path / f"g{dpi}.png", depth=1, dpi=dpi).read_bytes()[16:20], "big")
              for dpi in (48, 96)]
    assert abs(widths[1] / widths[0] - 2) < 0.05
    for bad in ({"direction": "up"}, {"dpi": 0}, {"dpi": 72.5}):
        with pytest.raises(RenderError, match=next(iter(bad))):
            to_dot(graph, **bad)


def test_notebooks_show_the_svg(graph):
    assert graph._repr_svg_().lstrip().startswith("<?xml")


def test_every_family_of_primitives_has_a_colour_of_its_own():
    families = {prim.family for prim in REGISTRY.values()}
    assert families <= set(FAMILIES), sorted(families - set(FAMILIES))
    assert len({colour for _, colour in FAMILIES.values()}) == len(FAMILIES)


@pytest.mark.parametrize("name", ["a\\", "a\\l", "<!--x", "<!--<script>", "<b>", 'x"y'])
def test_module_names_are_drawn_as_they_are(tmp_path, name):
    """A module's name is DOT text, never an escape (a trailing backslash broke the file) or HTML-like label."""
    class Model(ag.Module):
        def __init__(self):
            super().__init__()
            setattr(self, name, ag.nn.Linear(3, 3))

        def forward(self, x):
            return ag.sum(getattr(self, name)(x))

    graph = ag.trace(Model(), x=ag.Input((2, 3)))
    for options in ({}, {"depth": 1}, {"view": "both"}):
        svg = ET.fromstring(render_graph(graph, tmp_path / "g.svg", **options).read_text())
        assert name in "".join(svg.itertext())


def test_a_path_under_a_file_is_a_render_error(graph, tmp_path):
    (tmp_path / "file").write_text("")
    for suffix in ("svg", "dot"):
        with pytest.raises(RenderError, match="file is a file, not a folder"):
            render_graph(graph, tmp_path / "file" / f"g.{suffix}")
