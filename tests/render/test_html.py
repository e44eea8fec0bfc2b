"""The HTML viewer: the page read back as HTML (boxes, frames, details, attention data, nothing fetched), and
the page run in headless Chromium (a screenshot that is not blank; the script ran and its controls work)."""
import json
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser

import numpy as np
import pytest

import attngraph as ag
from attngraph import models
from attngraph.cli import main
from attngraph.core import functional as F
from attngraph.inspect import attention_maps, format_count, node_flops
from attngraph.render import RenderError
from attngraph.render.html import to_html

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot lays out the graph")
CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


class Page(HTMLParser):
    """Every element with its attributes, the script texts, and the SVG titles by class of their group."""

    def __init__(self, text: str):
        super().__init__()
        self.elements, self.scripts, self.titles, self._open = [], [], {}, []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        self._open.append((tag, dict(attrs).get("class")))

    def handle_endtag(self, tag):
        while self._open and self._open.pop()[0] != tag:
            pass

    def handle_data(self, data):
        if self._open and self._open[-1][0] == "script":
            self.scripts.append(data)
        elif self._open and self._open[-1][0] == "title" and len(self._open) > 1:
            self.titles.setdefault(self._open[-2][1], []).append(data)

    @property
    def data(self) -> dict:
        return json.loads(next(s for s in self.scripts if s.lstrip().startswith("{")))


@pytest.fixture(scope="module")
def transformer():
    """The registry's tiny transformer (encoder self-attention, decoder self- and cross-attention; sources of 8
    tokens, targets of 9), its forward graph and its example batch."""
    spec = models.spec("transformer")
    model = models.get("transformer", tiny=True)
    graph = ag.trace(model, **spec.inputs(model))
    batch = spec.batch(model, np.random.default_rng(0), 2)
    return graph, {name: batch[name] for name in graph.inputs}


@pytest.fixture(scope="module")
def page_path(transformer, tmp_path_factory):
    graph, inputs = transformer
    path = tmp_path_factory.mktemp("view") / "transformer.html"
    to_html(graph, path, inputs=inputs, vocabulary={0: "<pad>", 1: "<bos>"}, title="tiny transformer")
    return path


@pytest.fixture(scope="module")
def page(page_path):
    return Page(page_path.read_text(encoding="utf-8"))


def test_every_box_and_module_frame_of_the_drawing_is_in_the_page(page):
    boxes = page.data["boxes"]
    assert set(page.titles["node"]) - {"legend"} == set(boxes)
    assert {"cluster_encoder", "cluster_encoder.layers.0", "cluster_decoder.layers.0.cross_attn"} <= \
        set(page.titles["cluster"])
    edges = [title.split("->") for title in page.titles["edge"]]
    assert edges and all(tail in boxes and head in boxes for tail, head in edges)
    assert sum(tag == "svg" for tag, _ in page.elements) == 1
    assert page.elements[0] == ("html", {"lang": "en"}) and ("title", {}) in page.elements


def test_a_box_details_give_op_shape_flops_scope_source_and_parameters(transformer, page):
    graph, _ = transformer
    bindings = {"B": 2, "S": 8, "T": 9}                 # the example's sizes
    matmul = next(n for n in graph.nodes if n.op == "matmul" and any(x.kind == "parameter" for x in n.inputs))
    details = page.data["boxes"][matmul.label]
    assert details["op"] == "matmul" and details["scope"] == matmul.scope and details["dtype"] == "float32"
    assert details["shape"] == "×".join(map(str, matmul.shape))
    assert details["FLOPs"] == format_count(node_flops(matmul, bindings), "FLOPs")
    assert details["source"] == matmul.source and re.search(r"\.py:\d+$", details["source"])
    weight = next(x for x in matmul.inputs if x.kind == "parameter")
    assert details["parameters"] == [f"{weight.name}  {weight.shape[0]}×{weight.shape[1]}  ({weight.value.size:,})"]
    src = next(n for n in graph.nodes if n.name == "src")
    assert page.data["boxes"][src.label]["title"] == "src"


def test_the_attention_data_are_the_first_example_s_weights_labelled_by_their_tokens(transformer, page):
    graph, inputs = transformer
    maps = attention_maps(graph, **inputs)
    shown = {a["scope"]: a for a in page.data["attention"]}
    assert list(shown) == list(maps)
    for scope, weights in maps.items():
        np.testing.assert_allclose(np.array(shown[scope]["weights"]), weights[0], atol=5e-5)
    names = {0: "<pad>", 1: "<bos>"}
    src, tgt = ([names.get(t, str(t)) for t in inputs[k][0].tolist()] for k in ("src", "tgt_in"))
    cross, decoder = shown["decoder.layers.0.cross_attn"], shown["decoder.layers.0.self_attn"]
    assert (cross["queries"], cross["keys"]) == (tgt, src) and "<bos>" in tgt
    assert decoder["queries"] == decoder["keys"] == tgt
    assert shown["encoder.layers.0.self_attn"]["keys"] == src


def test_the_page_fetches_nothing(page, page_path):
    links = [value for _, attrs in page.elements for key, value in attrs.items() if key in ("src", "href", "xlink:href")]
    assert not [link for link in links if re.match(r"(https?:)?//", link.strip())]
    assert not [tag for tag, attrs in page.elements if tag in ("link", "iframe", "img")]
    assert not [attrs for tag, attrs in page.elements if tag == "script" and "src" in attrs]
    text = page_path.read_text(encoding="utf-8")
    assert not re.search(r"url\(|@import|fetch\(|XMLHttpRequest|<!DOCTYPE svg", text)


def _weights(q, k):
    return F.name(ag.softmax(q @ ag.transpose(k, (0, 2, 1)) * 0.5), "attention")


def test_an_axis_has_positions_when_no_single_input_of_its_length_feeds_the_weights():
    table = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    tokens = {"a": np.array([[1, 2, 3]]), "b": np.array([[5, 4, 3]])}
    both = ag.trace(lambda a, b: _weights(ag.embedding(table, a), ag.embedding(table, b)), **tokens)
    one = ag.trace(lambda a, b: _weights(ag.embedding(table, a), ag.embedding(table, a)) + ag.sum(b).astype("float32"),
                   **tokens)
    [mixed] = Page(to_html(both, inputs=tokens)).data["attention"]
    [single] = Page(to_html(one, inputs=tokens, vocabulary="abcdef")).data["attention"]
    assert mixed["scope"] == "(root)" and mixed["queries"] == mixed["keys"] == ["0", "1", "2"]
    assert single["queries"] == single["keys"] == ["b", "c", "d"]
    assert np.array(single["weights"]).shape == (1, 3, 3)


def test_the_steps_of_a_decoder_are_the_rows_of_one_map():
    graph = models.spec("seq2seq-bahdanau")
    model = models.get("seq2seq-bahdanau", tiny=True)
    traced = ag.trace(model, **graph.inputs(model))
    batch = graph.batch(model, np.random.default_rng(0), 1)
    inputs = {name: batch[name] for name in traced.inputs}
    [shown] = Page(to_html(traced, inputs=inputs)).data["attention"]
    steps = attention_maps(traced, **inputs)["attention"]
    np.testing.assert_allclose(np.array(shown["weights"])[0], np.concatenate(steps, axis=1)[0], atol=5e-5)
    assert shown["queries"] == [str(t) for t in inputs["tgt_in"][0]]
    assert shown["keys"] == [str(t) for t in inputs["src"][0]]


def test_without_inputs_the_page_says_how_to_see_attention(transformer, tmp_path):
    graph, _ = transformer
    data = Page(graph.to_html(title="no inputs")).data
    assert data["attention"] == [] and "inputs=" in data["note"] and data["boxes"]
    with pytest.raises(RenderError, match=r"\.html"):
        graph.to_html(tmp_path / "graph.svg")
    assert not (tmp_path / "graph.svg").exists()


def test_the_view_command_writes_the_page(capsys, tmp_path):
    out = tmp_path / "gpt.html"
    assert main(["view", "gpt", "--tiny", "--out", str(out), "--dim", "T=8"]) == 0
    assert str(out) in capsys.readouterr().out
    data = Page(out.read_text(encoding="utf-8")).data
    assert [a["scope"] for a in data["attention"]] == ["transformer.layers.0.self_attn"]
    assert main(["view", "gpt", "--out", str(tmp_path / "gpt.svg")]) == 2
    assert ".html" in capsys.readouterr().err and not (tmp_path / "gpt.svg").exists()
    assert main(["view", "gpt", "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium runs the page (apt-get install chromium)")


def _chromium(*args, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,900", *args],
                          capture_output=True, timeout=timeout, check=True)


@needs_chromium
def test_the_screenshot_is_not_blank(page_path, tmp_path):
    """A one-colour screenshot compresses about 650:1; a page showing a graph and attention lines, ~30:1."""
    shot = tmp_path / "shot.png"
    _chromium(f"--screenshot={shot}", page_path.as_uri())
    png, chunks, pos = shot.read_bytes(), {}, 8
    while pos < len(png):
        size, kind = struct.unpack(">I4s", png[pos:pos + 8])
        chunks[kind] = chunks.get(kind, b"") + png[pos + 8:pos + 8 + size]
        pos += size + 12
    width, height = struct.unpack(">II", chunks[b"IHDR"][:8])
    assert (width, height) == (1400, 900)
    assert len(zlib.decompress(chunks[b"IDAT"])) / len(chunks[b"IDAT"]) < 150


PROBE = """<script>
const result = {ready: document.body.dataset.viewer, error: document.body.dataset.error || null};
const hidden = () => [...document.querySelectorAll("#graph-pane g.node.hidden")].map(g => g.querySelector("title").textContent);
const frame = [...document.querySelectorAll("#graph-pane g.cluster")]
  .find(g => g.querySelector("title").textContent === "cluster_decoder");
frame.dispatchEvent(new MouseEvent("click", {bubbles: true}));
result.folded = hidden();
frame.dispatchEvent(new MouseEvent("click", {bubbles: true}));
result.unfolded = hidden();
const search = document.getElementById("search");
search.value = "cross_attn";
search.dispatchEvent(new Event("input"));
result.hits = [...document.querySelectorAll("#graph-pane g.node.hit")].map(g => g.querySelector("title").textContent);
search.dispatchEvent(new KeyboardEvent("keydown", {key: "Enter"}));
result.details = document.querySelector("#details h2").textContent;
result.heads = document.querySelectorAll("#attention button.head").length;
result.lines = document.querySelectorAll("svg.lines line").length;
document.querySelector("svg.lines g.token").dispatchEvent(new MouseEvent("mouseenter"));
result.hovered = document.querySelectorAll("svg.lines line:not(.off)").length;
result.readout = document.querySelector("#attention .readout").textContent;
document.body.append(Object.assign(document.createElement("pre"), {id: "probe", textContent: JSON.stringify(result)}));
</script>"""


@needs_chromium
def test_the_script_runs_and_its_controls_work(page, page_path, tmp_path):
    probed = tmp_path / "probed.html"
    probed.write_text(page_path.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _chromium("--dump-dom", probed.as_uri()).stdout.decode()
    result = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', dom).group(1).replace("&quot;", '"'))
    assert result["ready"] == "ready" and result["error"] is None
    boxes = page.data["boxes"]
    decoder = {box for box, details in boxes.items() if details["scope"].startswith("decoder")}
    assert decoder and set(result["folded"]) == decoder and result["unfolded"] == []
    assert result["hits"] and all("cross_attn" in boxes[b]["scope"] for b in result["hits"])
    assert result["details"].startswith(boxes[result["hits"][0]]["title"])
    encoder = page.data["attention"][0]
    weights = np.array(encoder["weights"])
    assert result["heads"] == len(weights)
    assert result["lines"] == (weights >= 0.01).sum() and result["hovered"] == (weights[:, 0] >= 0.01).sum()
    assert result["readout"].startswith(f"query {encoder['queries'][0]} (0), mean of {len(weights)} heads")
