"""The HTML viewer: the page read back as HTML (boxes, frames, details, attention data, nothing fetched), and
the page run in headless Chromium (a screenshot that is not blank; the script ran and its controls work)."""
import html
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
from attngraph import models, nn
from attngraph.cli import main
from attngraph.core import functional as F
from attngraph.inspect import attention_maps, format_count, node_flops
from attngraph.render import RenderError
from attngraph.render.html import to_html
from attngraph.render.picture import picture, repeated_runs

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


class Cell(nn.Module):
    def __init__(self):
        super().__init__()
        self.input, self.hidden = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x, h):
        return ag.tanh(self.input(x) + self.hidden(h))


class Encoder(nn.Module):
    """A recurrent loop: cell called at each of the 3 steps."""

    def __init__(self):
        super().__init__()
        self.cell = Cell()

    def forward(self, xs):
        h = xs[:, 0] * 0.0
        for t in range(3):
            h = self.cell(xs[:, t], h)
        return h


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.head = Encoder(), nn.Linear(4, 2)

    def forward(self, xs):
        return self.head(self.encoder(xs))


@pytest.fixture(scope="module")
def recurrent():
    """The page of a recurrent model drawn at depth 1, its frames by id and the frames' titles."""
    graph = ag.trace(Recurrent(), xs=np.ones((2, 3, 4), np.float32))
    data = Page(to_html(graph, depth=1)).data
    frames = {f["id"]: f for f in data["frames"]}
    return graph, data, frames, {i: data["details"][i]["title"] for i in frames}


def test_the_page_carries_every_box_and_module_call_nested_and_folds_them_at_render_s_depth(recurrent):
    graph, data, frames, titles = recurrent
    full = picture(graph, budget=10**9, roll=False)
    assert [b["id"] for b in data["boxes"]] == [b.id for b in full.boxes]
    assert {"encoder", "encoder.cell", "encoder.cell.input", "head"} <= set(titles.values())
    assert all(f["parent"] in frames or f["parent"] == "" for f in frames.values())
    assert all(b["frame"] in frames or b["frame"] == "" for b in data["boxes"])
    cells = [f for i, f in frames.items() if titles[i] == "encoder.cell"]
    assert [c["label"] for c in cells] == ["cell (call 1 of 3)", "cell (call 2 of 3)", "cell (call 3 of 3)"]
    assert all(f["folded"] for f in frames.values())            # folded at depth 1, every one unfoldable
    ids = {b["id"] for b in data["boxes"]}
    assert data["edges"] and all(tail in ids and head in ids for tail, head, _ in data["edges"])


def test_the_steps_of_a_recurrent_loop_are_rolled_into_one_frame(recurrent):
    _, data, frames, titles = recurrent
    [run] = [f for f in frames.values() if f["label"] == "step ×3"]
    assert titles[run["parent"]] == "encoder" and run["kind"] == "repeat" and run["folded"]
    steps = [f for f in frames.values() if f["parent"] == run["id"]]
    assert [s["label"] for s in steps] == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    for k, step in enumerate(steps):                        # step k holds call k of the cell, and its ops
        assert [f["label"] for f in frames.values() if f["parent"] == step["id"]] == [f"cell (call {k + 1} of 3)"]
        assert [b["title"] for b in data["boxes"] if b["frame"] == step["id"]] == ["getitem"]
    weights = [p.split()[0] for p in data["details"][steps[1]["id"]]["parameters"]]
    assert weights == ["encoder.cell.input.weight", "encoder.cell.input.bias", "encoder.cell.hidden.weight",
                       "encoder.cell.hidden.bias"]


def test_the_both_view_ties_each_forward_box_to_the_boxes_of_its_gradient():
    model = Recurrent()
    xs = np.ones((2, 3, 4), np.float32)
    graph = ag.trace(lambda xs: ag.sum(model(xs)), xs=xs).grad()
    data = Page(to_html(graph, view="both")).data
    boxes = {b["id"]: b for b in data["boxes"]}
    assert data["ties"] and all(not boxes[f]["backward"] and boxes[b]["backward"] for f, b in data["ties"])
    assert all(data["details"][b]["gradient of"] for _, b in data["ties"])
    assert {b["backward"] for b in boxes.values()} == {False, True}


def test_a_chain_of_identical_blocks_is_a_frame_marked_with_its_length():
    model = models.get("gpt", tiny=True, layers=3)
    graph = ag.trace(model, **models.spec("gpt").inputs(model))
    frames = {f["id"]: f for f in Page(to_html(graph, roll=True)).data["frames"]}
    [chain] = [f for f in frames.values() if f["kind"] == "repeat"]
    assert chain["label"] == "layers.0 … layers.2 ×3" and chain["folded"]
    assert [frames[f]["label"] for f in frames if frames[f]["parent"] == chain["id"]] == \
        ["layers.0", "layers.1", "layers.2"]


def test_repeated_runs_finds_the_longest_run_then_those_around_it():
    assert repeated_runs(list("xabcabcabcyzz")) == [(1, 3, 3), (11, 1, 2)]
    assert repeated_runs(list("xabcabcabcyzz"), keep=lambda unit, count: len(unit) > 1) == [(1, 3, 3)]
    assert repeated_runs(list("ababcdcdcd")) == [(0, 2, 2), (4, 2, 3)]
    assert repeated_runs(list("aaaa")) == [(0, 1, 4)] and repeated_runs(list("abc")) == []


def test_a_box_details_give_op_shape_flops_scope_source_and_parameters(transformer, page):
    graph, _ = transformer
    bindings = {"B": 2, "S": 8, "T": 9}                 # the example's sizes
    matmul = next(n for n in graph.nodes if n.op == "matmul" and any(x.kind == "parameter" for x in n.inputs))
    details = page.data["details"][matmul.label]
    assert details["op"] == "matmul" and details["scope"] == matmul.scope and details["dtype"] == "float32"
    assert details["shape"] == "×".join(map(str, matmul.shape))
    assert details["FLOPs"] == format_count(node_flops(matmul, bindings), "FLOPs")
    assert details["source"] == matmul.source and re.search(r"\.py:\d+$", details["source"])
    weight = next(x for x in matmul.inputs if x.kind == "parameter")
    assert details["parameters"] == [f"{weight.name}  {weight.shape[0]}×{weight.shape[1]}  ({weight.value.size:,})"]
    src = next(n for n in graph.nodes if n.name == "src")
    assert page.data["details"][src.label]["title"] == "src"


def test_the_attention_data_are_every_example_s_weights_labelled_by_their_tokens(transformer, page):
    graph, inputs = transformer
    maps = attention_maps(graph, **inputs)
    shown = {a["scope"]: a for a in page.data["attention"]}
    assert list(shown) == list(maps)
    for scope, weights in maps.items():
        np.testing.assert_allclose(np.array(shown[scope]["weights"]), weights, atol=5e-5)
    names = {0: "<pad>", 1: "<bos>"}
    cross, decoder = shown["decoder.layers.0.cross_attn"], shown["decoder.layers.0.self_attn"]
    for b in range(2):
        src, tgt = ([names.get(t, str(t)) for t in inputs[k][b].tolist()] for k in ("src", "tgt_in"))
        assert (cross["queries"][b], cross["keys"][b]) == (tgt, src) and "<bos>" in tgt
        assert decoder["queries"][b] == decoder["keys"][b] == tgt
        assert shown["encoder.layers.0.self_attn"]["keys"][b] == src
    assert cross["keys"][0] != cross["keys"][1] and cross["image"] is None


def test_the_page_fetches_nothing(page, page_path):
    links = [value for _, attrs in page.elements for key, value in attrs.items() if key in ("src", "href", "xlink:href")]
    assert not [link for link in links if re.match(r"(https?:)?//", link.strip())]
    assert not [tag for tag, attrs in page.elements if tag in ("link", "iframe", "img")]
    assert not [attrs for tag, attrs in page.elements if tag == "script" and "src" in attrs]
    text = page_path.read_text(encoding="utf-8")
    assert not re.search(r"url\((?!#)|@import|fetch\(|XMLHttpRequest|<!DOCTYPE svg", text)   # url(#arrow) is local


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
    assert mixed["scope"] == "(root)" and mixed["queries"] == mixed["keys"] == [["0", "1", "2"]]
    assert single["queries"] == single["keys"] == [["b", "c", "d"]]
    assert np.array(single["weights"]).shape == (1, 1, 3, 3)


def test_weights_behind_dropout_are_shown_without_a_seed():
    table = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    tokens = {"a": np.array([[1, 2, 3]])}
    graph = ag.trace(lambda a: _weights(F.dropout(ag.embedding(table, a), 0.5), ag.embedding(table, a)), **tokens)
    assert "rng_seed" in graph.inputs
    [shown] = Page(to_html(graph, inputs=tokens)).data["attention"]
    assert shown["queries"] == [["1", "2", "3"]] and np.array(shown["weights"]).shape == (1, 1, 3, 3)


def _model_page(name: str, **options) -> tuple[dict, dict, dict]:
    """A tiny registered model's page data, its example batch of 2 and its attention maps."""
    spec, model = models.spec(name), models.get(name, tiny=True)
    graph = ag.trace(model, **spec.inputs(model))
    batch = spec.batch(model, np.random.default_rng(0), 2)
    inputs = {k: batch[k] for k in graph.inputs}
    return Page(to_html(graph, inputs=inputs, **options)).data, inputs, attention_maps(graph, **inputs)


def test_the_steps_of_a_decoder_are_the_rows_of_each_example_s_map():
    data, inputs, maps = _model_page("seq2seq-bahdanau")
    [shown] = data["attention"]
    np.testing.assert_allclose(np.array(shown["weights"])[:, 0], maps["attention"], atol=5e-5)   # (B, 7 steps, S)
    assert shown["queries"] == [[str(t) for t in row] for row in inputs["tgt_in"]]
    assert shown["keys"] == [[str(t) for t in row] for row in inputs["src"]]


def test_show_attend_tell_gives_a_row_per_word_over_the_grid_of_each_picture():
    data, inputs, maps = _model_page("show-attend-tell")
    [shown] = data["attention"]
    weights = np.array(shown["weights"])
    assert weights.shape == (2, 1, 10, 9)                        # examples, heads, words, 3×3 cells
    np.testing.assert_allclose(weights[1, 0], maps[""][1], atol=5e-5)
    image = shown["image"]
    assert (image["rows"], image["columns"], image["cls"], image["height"], image["width"]) == (3, 3, 0, 24, 24)
    pixels = np.array(image["pixels"]).reshape(2, 24, 24, 3)
    picture_ = inputs["images"].transpose(0, 2, 3, 1)
    lowest = picture_.reshape(2, -1).argmin(axis=1)
    assert pixels.min() == 0 and pixels.max() == 255
    assert (pixels.reshape(2, -1)[range(2), lowest] == 0).all()


def test_vit_s_keys_are_its_class_token_and_its_patches():
    data, inputs, _ = _model_page("vit")
    [shown] = data["attention"]
    assert np.array(shown["weights"]).shape == (2, 2, 5, 5)
    image = shown["image"]
    assert (image["rows"], image["columns"], image["cls"]) == (2, 2, 1)
    assert len(image["pixels"][0]) == inputs["images"][0].size * 3      # grey as RGB


def test_han_s_word_attention_has_an_example_per_sentence_labelled_by_its_words():
    data, inputs, _ = _model_page("han", vocabulary={0: "<pad>"})
    words = {a["scope"]: a for a in data["attention"]}["word_attention"]
    sentences = inputs["documents"].reshape(-1, inputs["documents"].shape[-1])
    assert len(words["keys"]) == len(sentences) == 6
    assert words["keys"][4] == [{0: "<pad>"}.get(t, str(t)) for t in sentences[4]]


def test_sizes_must_be_positive_ints(transformer):
    graph, _ = transformer
    for bad in (-3, 0, 2.5, True):
        with pytest.raises(RenderError, match=r"dimension T must be a positive int"):
            to_html(graph, T=bad)


def test_a_token_that_looks_like_markup_stays_data(tmp_path):
    table = np.ones((3, 2), np.float32)
    tokens = {"a": np.array([[0, 1, 2]])}
    graph = ag.trace(lambda a: _weights(ag.embedding(table, a), ag.embedding(table, a)), **tokens)
    evil = ["<!--<script>", "</script><b>x</b>", "a&b"]
    text = to_html(graph, inputs=tokens, vocabulary=evil)
    block = re.search(r'<script type="application/json" id="attngraph-data">(.*?)</script>', text, re.S).group(1)
    assert "<" not in block
    assert json.loads(block)["attention"][0]["keys"] == [evil]
    assert Page(text).data["attention"][0]["queries"] == [evil]


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
const data = JSON.parse(document.getElementById("attngraph-data").textContent);
const pane = document.getElementById("graph-pane"), scene = document.getElementById("scene");
const lens = scene.parentNode;
const inPane = () => { const p = pane.getBoundingClientRect(), g = lens.getBoundingClientRect();
  return {left: g.left - p.left, top: g.top - p.top, right: p.right - g.right, bottom: p.bottom - g.bottom,
          width: g.width / p.width, height: g.height / p.height}; };
const frameOf = title => Object.keys(data.details).find(id => data.details[id].title === title && id.startsWith("c"));
const click = target => target.dispatchEvent(new MouseEvent("click", {bubbles: true}));
const key = name => document.dispatchEvent(new KeyboardEvent("keydown", {key: name, bubbles: true}));
const decoder = frameOf("decoder");
result.open = {boxes: Number(pane.dataset.boxes), height: scene.getBBox().height};
result.start = inPane();
key("f");
result.fitted = inPane();
click(document.querySelector(`[data-id="${decoder}"] .frame-title`));
result.folded = {boxes: Number(pane.dataset.boxes), height: scene.getBBox().height,
                 box: document.querySelector(`[data-id="${decoder}"]`).getAttribute("class")};
click(document.querySelector(`[data-id="${decoder}"]`));
result.unfolded = {boxes: Number(pane.dataset.boxes), height: scene.getBBox().height};
const scale = () => Number(lens.getAttribute("transform").match(/scale\\(([^)]+)\\)/)[1]);
const before = scale();
pane.dispatchEvent(new WheelEvent("wheel", {deltaY: -200, clientX: 300, clientY: 300, bubbles: true,
                                             cancelable: true}));
result.zoom = [before, scale()];
key("0");
result.actual = scale();
key("f");
result.refitted = inPane();
click(document.querySelector(`[data-id="${decoder}"] .frame-title`));
const search = document.getElementById("search");
search.value = "cross_attn";
search.dispatchEvent(new Event("input"));
result.hits = [...document.querySelectorAll("#scene .hit")].map(g => g.dataset.id);
search.dispatchEvent(new KeyboardEvent("keydown", {key: "Enter"}));
result.revealed = document.querySelector("#scene .selected") && document.querySelector("#scene .selected").dataset.id;
result.details = document.querySelector("#details h2").textContent;
result.heads = document.querySelectorAll("#attention button.head").length;
result.lines = document.querySelectorAll("svg.lines line").length;
document.querySelector("svg.lines g.token").dispatchEvent(new MouseEvent("mouseenter"));
result.hovered = document.querySelectorAll("svg.lines line:not(.off)").length;
result.readout = document.querySelector("#attention .readout").textContent;
document.querySelectorAll("#attention button.head")[1].dispatchEvent(new MouseEvent("dblclick"));
result.oneHead = [...document.querySelectorAll("svg.lines line")].map(l => l.getAttribute("stroke"));
const example = document.getElementById("example");
example.value = "1";
example.dispatchEvent(new Event("change"));
result.example = [...document.querySelectorAll("svg.lines g.token title")].map(t => t.textContent);
click(document.querySelector('#attention .modes [data-mode="model"]'));
result.maps = document.querySelectorAll("#attention .model-view button.map").length;
click(document.querySelectorAll("#attention .model-view button.map")[3]);
result.enlarged = document.querySelector("#attention figure.enlarged figcaption").textContent;
document.body.append(Object.assign(document.createElement("pre"), {id: "probe", textContent: JSON.stringify(result)}));
</script>"""


def _probe(page_text: str, probe: str, tmp_path) -> dict:
    """What ``probe`` (a script run after the viewer's) found in the page, read back from the DOM."""
    probed = tmp_path / "probed.html"
    probed.write_text(page_text.replace("</body>", probe + "</body>"), encoding="utf-8")
    dom = _chromium("--dump-dom", probed.as_uri()).stdout.decode()
    return json.loads(html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1)))


@needs_chromium
def test_the_script_runs_and_its_controls_work(page, page_path, tmp_path):
    result = _probe(page_path.read_text(encoding="utf-8"), PROBE, tmp_path)
    assert result["ready"] == "ready" and result["error"] is None
    fitted, refitted, start = result["fitted"], result["refitted"], result["start"]
    assert start["top"] == pytest.approx(10) and start["height"] > 1       # a tall graph starts readable, at its top
    for fit in (fitted, refitted):      # the whole graph in the pane, filling its width or its height
        assert min(fit["left"], fit["right"], fit["top"], fit["bottom"]) >= -1 and max(fit["width"], fit["height"]) > .9
    decoder = {d for d, details in page.data["details"].items() if details["scope"].startswith("decoder")}
    assert result["folded"]["boxes"] < result["open"]["boxes"] - len(decoder) // 2
    assert result["folded"]["height"] < 0.8 * result["open"]["height"]          # laid out again: no empty frame
    assert "module" in result["folded"]["box"]
    assert result["unfolded"] == result["open"]
    assert result["zoom"][1] > 1.2 * result["zoom"][0] and result["actual"] == pytest.approx(1)
    details = page.data["details"]
    assert [details[b]["title"] for b in result["hits"]] == ["decoder"]        # the folded frame holding the hits
    assert result["revealed"] and "cross_attn" in details[result["revealed"]]["scope"]
    assert result["details"].startswith(details[result["revealed"]]["title"])
    encoder = page.data["attention"][0]
    weights = np.array(encoder["weights"][0])
    assert result["heads"] == len(weights)
    assert result["lines"] == (weights >= 0.01).sum() and result["hovered"] == (weights[:, 0] >= 0.01).sum()
    assert result["readout"].startswith(f"query {encoder['queries'][0][0]} (0), mean of {len(weights)} heads")
    assert result["oneHead"] and set(result["oneHead"]) == {"#ff7f0e"}              # head 1's colour
    assert result["example"][0] == f"query 0: {encoder['queries'][1][0]}" and len(set(result["example"])) > 1
    heads = [len(a["weights"][0]) for a in page.data["attention"]]
    assert result["maps"] == sum(heads)
    assert result["enlarged"] == f"{page.data['attention'][3 // heads[0]]['scope']}, head {3 % heads[0]}, example 2"


PICTURES = """<script>
const boxes = () => Number(document.getElementById("graph-pane").dataset.boxes);
const result = {error: document.body.dataset.error || null, boxes: [boxes()]};
const figures = () => [...document.querySelectorAll("#attention .pictures figcaption")].map(f => f.textContent);
result.words = figures();
const example = document.getElementById("example");
example.value = "1";
example.dispatchEvent(new Event("change"));
result.second = figures();
const rolled = document.querySelector('#scene [data-id="t0"]');
result.rolled = rolled.querySelector(".title").textContent;
rolled.dispatchEvent(new MouseEvent("click", {bubbles: true}));
result.boxes.push(boxes());
document.body.append(Object.assign(document.createElement("pre"), {id: "probe", textContent: JSON.stringify(result)}));
</script>"""


@needs_chromium
def test_show_attend_tell_shows_a_picture_per_word_and_unrolls_a_rolled_group(tmp_path):
    spec, model = models.spec("show-attend-tell"), models.get("show-attend-tell", tiny=True)
    graph = ag.trace(model, **spec.inputs(model))
    batch = spec.batch(model, np.random.default_rng(0), 2)
    inputs = {k: batch[k] for k in graph.inputs}
    result = _probe(to_html(graph, inputs=inputs), PICTURES, tmp_path)
    assert result["error"] is None
    assert result["words"] == [f"{t}: {w}" for t, w in enumerate(inputs["captions_in"][0])]
    assert result["second"] == [f"{t}: {w}" for t, w in enumerate(inputs["captions_in"][1])]
    assert result["rolled"].startswith("▸ ") and "×" in result["rolled"] and result["boxes"][1] > result["boxes"][0]
