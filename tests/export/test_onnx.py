"""ONNX export of the ops whose translation is not one ONNX op: masks and causal softmax, flash attention,
transposed matmuls, GELU's two forms, slices with negative and stepped bounds, reductions, sizes read at run
time; and what the exporter refuses. Each graph is run by onnxruntime and compared with attngraph within 1e-5."""
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import attngraph as ag
from attngraph.core.passes import optimize
from attngraph.errors import BindingError
from attngraph.export import ExportError, export_onnx, to_onnx
from tests.ops.test_op_table import BINARY, BITWISE, DIVISION, INTS, UNARY, X

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

rng = np.random.default_rng(0)


def normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def ops(graph) -> set[str]:
    return {n.op for n in graph.nodes}


def test_masked_and_causal_softmax_zero_what_they_forbid_even_whole_rows(matches, run_onnx):
    """Causal with more queries than keys forbids whole rows (query i sees key j ≤ i + K − Q); so does a mask
    with no True: those rows are 0, never NaN."""
    def f(x, mask):
        return (ag.softmax(x, mask=mask), ag.softmax(x, causal=True), ag.log_softmax(x, mask=mask, causal=True),
                ag.softmax(x, axis=1, mask=mask), ag.log_softmax(x))

    graph = ag.trace(f, x=ag.Input(("B", "Q", "K")), mask=ag.Input(("B", 1, "K"), bool))
    sizes = [(2, 3, 5), (3, 6, 4)]
    feeds = [dict(x=normal(*s), mask=rng.random((s[0], 1, s[2])) < 0.7) for s in sizes]
    feeds[1]["mask"][0] = False
    matches(graph, *feeds)
    masked, causal, both = run_onnx(graph, feeds[1])[:3]
    assert (masked[0] == 0).all() and (both[0] == 0).all()
    assert (causal[:, :2] == 0).all() and np.allclose(causal[:, 2:].sum(-1), 1)


def test_fused_attention_becomes_matmuls_and_a_masked_softmax(matches):
    def f(q, k, v, mask):
        return ag.scaled_dot_product_attention(q, k, v, mask=mask), ag.scaled_dot_product_attention(q, k, v,
                                                                                                     causal=True)

    graph = ag.trace(f, q=ag.Input(("B", 2, "T", 4)), k=ag.Input(("B", 2, "T", 4)), v=ag.Input(("B", 2, "T", 3)),
                     mask=ag.Input(("B", 1, 1, "T"), bool))
    assert "attention" in ops(graph)
    feeds = [dict(q=normal(b, 2, t, 4), k=normal(b, 2, t, 4), v=normal(b, 2, t, 3),
                  mask=rng.random((b, 1, 1, t)) < 0.6) for b, t in [(2, 5), (1, 7)]]
    feeds[0]["mask"][1] = False
    matches(graph, *feeds)


def test_attention_with_fewer_queries_than_keys_is_causal_bottom_right(matches):
    graph = ag.trace(lambda q, k, v: ag.scaled_dot_product_attention(q, k, v, causal=True),
                     q=normal(2, 3, 4), k=normal(2, 6, 4), v=normal(2, 6, 5))
    assert "attention" in ops(graph)
    matches(graph, dict(q=normal(2, 3, 4), k=normal(2, 6, 4), v=normal(2, 6, 5)))


def test_fused_additive_scores_become_the_broadcast_sum_tanh_and_product(matches):
    v = normal(4)
    graph = ag.trace(lambda a, b: ag.additive_scores(a, b, v), a=ag.Input(("B", "T", 4)), b=ag.Input(("B", "T", 4)))
    assert "additive_scores" in ops(graph)
    matches(graph, *(dict(a=normal(n, t, 4), b=normal(n, t, 4)) for n, t in [(2, 5), (1, 3)]))


def test_transposed_matmul_operands(matches):
    """The compiler absorbs transposes into matmul's flags; the export transposes back."""
    graph = optimize(ag.trace(lambda a, b, c: (a.mT @ b.mT, a @ c.mT), a=ag.Input(("B", 4, 3)),
                              b=ag.Input((5, 4)), c=ag.Input((6, 3))), elementwise=False)
    assert {(n.attrs["transpose_a"], n.attrs["transpose_b"]) for n in graph.nodes if n.op == "matmul"} == \
        {(True, True), (False, True)}
    matches(graph, *[dict(a=normal(b, 4, 3), b=normal(5, 4), c=normal(6, 3)) for b in (1, 3)])


def test_gelu_exact_and_tanh_with_and_without_the_bias_the_compiler_moves_in(matches):
    def f(x, w, b):
        return ag.gelu(x, approximate="none"), ag.gelu(x), ag.gelu(x @ w + b), ag.gelu(x @ w + b, approximate="none")

    graph = optimize(ag.trace(f, x=ag.Input(("B", 4)), w=ag.Input((4, 4)), b=ag.Input((4,))), elementwise=False)
    assert sum(n.op == "gelu" and len(n.inputs) == 2 for n in graph.nodes) == 2
    matches(graph, *[dict(x=3 * normal(n, 4), w=normal(4, 4), b=normal(4)) for n in (2, 5)])


def test_non_finite_values_as_attngraph_gives_them(matches):
    """max_pool2d of a window holding NaN is NaN (onnxruntime's MaxPool alone skips it), gelu(-inf) is 0 in both forms
    (the formula alone gives -inf · 0 = NaN), gelu(inf) inf; an all -inf log-softmax row is NaN in both."""
    def f(x, r):
        return (ag.max_pool2d(x, 2), ag.gelu(r, approximate="none"), ag.gelu(r), ag.log_softmax(r))
    x = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)
    x[0, 0, 0, 1], x[0, 1, 3, 3], x[0, 1, 0, 0] = np.nan, np.inf, -np.inf
    r = np.array([[-np.inf, np.inf, np.nan, -1e30, 1e30, -11.0, -9.0, 0.5], [-np.inf] * 8], np.float32)
    graph = ag.trace(f, x=ag.Input((1, 2, 4, 4)), r=ag.Input((2, 8)))
    pooled, exact, tanh, log_probs = graph.compile()(x=x, r=r)
    assert np.isnan(pooled[0, 0, 0, 0]) and pooled[0, 1, 1, 1] == np.inf and np.isnan(log_probs[1]).all()
    assert exact[0, 0] == tanh[0, 0] == 0 and exact[0, 1] == tanh[0, 1] == np.inf
    with np.errstate(invalid="ignore", over="ignore"):
        matches(graph, dict(x=x, r=r))


def test_a_softmax_row_of_minus_inf_scores_is_the_documented_difference(run_onnx):
    """attngraph's softmax of an unmasked all -inf row (an additive bias) is 0; onnxruntime's Softmax gives NaN, as
    PyTorch. The README lists it beside the NaN contract."""
    graph = ag.trace(lambda s: ag.softmax(s), s=ag.Input((2, 3)))
    s = np.array([[-np.inf] * 3, [0.0, 1.0, -np.inf]], np.float32)
    (got,), want = run_onnx(graph, dict(s=s)), graph.compile()(s=s)
    assert (want[0] == 0).all() and np.isnan(got[0]).all()
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)


SLICES = [np.s_[:, ::-1], np.s_[:, -1], np.s_[:, 1:-1:2, ::-2], np.s_[..., None, 5:1:-2], np.s_[:, -100:2],
          np.s_[:, 10:], np.s_[:, -3:, -2], np.s_[None, :, 3], np.s_[:, 6:0:-3], np.s_[:, -1:-8:-1, 0],
          np.s_[:, :, -1:]]


def test_getitem_with_negative_stepped_and_out_of_range_slices_is_numpy_s(run_onnx):
    graph = ag.trace(lambda x: [x[key] for key in SLICES], x=ag.Input(("B", 7, 6)))
    for batch in (2, 3):
        x = normal(batch, 7, 6)
        for key, got in zip(SLICES, run_onnx(graph, dict(x=x))):
            np.testing.assert_array_equal(got, x[key], err_msg=str(key))


def test_reductions_sizes_and_casts(matches):
    """Sums of bool are int64; mean divides by a size read at run time; a 0-d sum is the value."""
    def f(x, flags):
        s = ag.sum(x[0, 0])
        return (ag.sum(flags, 1), ag.mean(x, (0, 1)), ag.max(x, -1, keepdims=True), ag.sum(s), ag.mean(x),
                ag.max(flags.astype("int32")), x.astype("int64"), ag.min(x, (0, 2)), ag.logsumexp(x, -1),
                ag.var(x, (0, 2)), ag.std(x, -1, correction=0, keepdims=True), ag.var(x, 1, correction=9))

    graph = ag.trace(f, x=ag.Input(("B", "T", 3)), flags=ag.Input(("B", "T"), bool))
    matches(graph, *[dict(x=5 * normal(b, t, 3), flags=rng.random((b, t)) < 0.5) for b, t in [(2, 4), (3, 1)]])


def elementwise(x, y):
    h = ag.where(x > y, ag.tanh(x), ag.sigmoid(y)) + ag.maximum(x, y) * (x * x + 1) ** 1.5 - ag.minimum(x, y)
    h = h + ag.exp(-x) * ag.log(y * y + 1) / ag.sqrt(x * x + 1) + ag.relu(ag.erf(x)) - ag.stop_gradient(y)
    h = h + ag.clip(ag.silu(ag.abs(x)) * ag.rsqrt(y * y + 1), -0.5, 1.0) + ag.sin(x) * ag.cos(y) + ag.softplus(30 * y)
    keep = ag.logical_or(ag.logical_and(x >= y, ag.not_equal(x, y)), ag.logical_not(ag.less_equal(x, y)))
    return h * keep.astype(h.dtype) + ag.equal(x, y).astype(h.dtype) + (x < y).astype(h.dtype)


@pytest.mark.parametrize("optimized", [False, True], ids=["traced", "fused"])
def test_elementwise_ops_and_the_compilers_fused_kernels(optimized, matches):
    """A fused node's program is written out op by op."""
    graph = ag.trace(elementwise, x=ag.Input(("B", 3)), y=ag.Input((3,)))
    graph = optimize(graph) if optimized else graph
    assert ("fused" in ops(graph)) == optimized
    matches(graph, *[dict(x=normal(b, 3), y=normal(3)) for b in (2, 4)])


def test_arithmetic_on_booleans_is_logic_as_in_numpy(run_onnx):
    graph = ag.trace(lambda a, b: (a + b, a * b, ag.maximum(a, b), ag.minimum(a, b)),
                     a=ag.Input((4,), bool), b=ag.Input((4,), bool))
    a, b = np.array([False, False, True, True]), np.array([False, True, False, True])
    for got, want in zip(run_onnx(graph, dict(a=a, b=b)), [a + b, a * b, np.maximum(a, b), np.minimum(a, b)]):
        np.testing.assert_array_equal(got, want)


def test_embeddings_positions_concat_reshape_and_broadcast(matches):
    """Sizes of reshapes, broadcasts and ranges are read from the inputs' shapes when the model runs."""
    def f(tokens, table, x):
        e = ag.embedding(table, tokens) + ag.embedding(table, ag.arange(tokens))
        rel = ag.embedding(table, ag.relative_distance(e, x, 2))
        flat = ag.reshape(ag.concat([e, ag.broadcast_to(ag.max(x, 1, keepdims=True), e.shape)], -1), (-1, 4))
        return flat, rel, ag.transpose(e, (1, 0, 2)), x[:, ag.arange(x, 1)]

    graph = ag.trace(f, tokens=ag.Input(("B", "T"), "int64"), table=normal(9, 2), x=ag.Input(("B", "S", 2)))
    feeds = [dict(tokens=rng.integers(0, 9, (b, t)), table=normal(9, 2), x=normal(b, s, 2))
             for b, t, s in [(2, 4, 3), (1, 6, 7)]]
    matches(graph, *feeds)


def test_cross_entropy_with_ignored_targets_even_all_of_them(matches, run_onnx):
    """The mean over the targets kept; 0 when every target is ignored."""
    graph = ag.trace(lambda logits, targets: (ag.cross_entropy(logits, targets, ignore_index=3),
                                              ag.cross_entropy(logits, targets.astype("int32"))),
                     logits=ag.Input(("B", "T", 5)), targets=ag.Input(("B", "T"), "int64"))
    some = dict(logits=normal(3, 4, 5), targets=np.arange(12).reshape(3, 4) % 5)
    every = dict(logits=normal(2, 3, 5), targets=np.full((2, 3), 3))
    matches(graph, some, every)
    assert run_onnx(graph, every)[0] == 0


def test_dropout_is_the_identity_and_its_seed_no_input(run_onnx):
    """As torch.onnx.export in eval mode: the export is for inference."""
    layer = ag.nn.Dropout(0.5)
    graph = ag.trace(lambda x: layer(x) * 2, x=ag.Input(("B", 3)))
    assert "dropout" in ops(graph) and "rng_seed" in graph.inputs
    model = to_onnx(graph)
    assert [i.name for i in model.graph.input] == ["x"]
    x = normal(4, 3)
    np.testing.assert_array_equal(run_onnx(graph, dict(x=x))[0], x * 2)


def test_symbolic_dimensions_are_dim_params_unless_fixed(run_onnx):
    graph = ag.trace(lambda tokens: ag.reshape(tokens, (-1,)) * 2, tokens=ag.Input(("B", "T"), "int64"))

    def dims(value):
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
    model = to_onnx(graph)
    assert dims(model.graph.input[0]) == ["B", "T"] and dims(model.graph.output[0]) == ["B*T"]
    fixed = to_onnx(graph, T=5)
    assert dims(fixed.graph.input[0]) == ["B", 5] and dims(fixed.graph.output[0]) == ["5*B"]
    tokens = np.arange(10).reshape(2, 5)
    np.testing.assert_array_equal(run_onnx(graph, dict(tokens=tokens), T=5)[0], tokens.reshape(-1) * 2)
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidArgument):
        run_onnx(graph, dict(tokens=tokens[:, :4]), T=5)
    with pytest.raises(BindingError, match=r"no dimension 'L'.*\['B', 'T'\]"):
        to_onnx(graph, L=5)
    with pytest.raises(BindingError, match="positive int"):
        to_onnx(graph, T=0)


def test_a_gradient_graph_is_refused_naming_the_node():
    graph = ag.trace(lambda x: ag.sum(ag.softmax(x)), x=ag.Input((2, 3))).grad(wrt=["x"])
    with pytest.raises(ExportError, match=r"softmax_grad.*test_onnx\.py:\d+.*export the forward graph"):
        to_onnx(graph)


def test_an_output_named_as_an_input_is_refused():
    graph = ag.trace(lambda x: {"x": x * 2}, x=ag.Input((3,)))
    with pytest.raises(ExportError, match="rename the output"):
        to_onnx(graph)


def test_export_onnx_writes_a_file_that_onnxruntime_loads(tmp_path):
    graph = ag.trace(lambda x: ag.tanh(x), x=ag.Input(("B", 3)))
    path = graph.export_onnx(tmp_path / "sub" / "tanh.onnx")
    assert path == tmp_path / "sub" / "tanh.onnx" and onnx.load(path).producer_name == "attngraph"
    x = normal(2, 3)
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, dict(x=x))[0]
    np.testing.assert_allclose(got, np.tanh(x), rtol=1e-6)


def test_writing_to_a_folder_or_an_unwritable_place_names_the_path(tmp_path):
    """Not the OS's error about the hidden temporary file that the atomic write makes beside the path."""
    graph = ag.trace(lambda x: ag.tanh(x), x=ag.Input((3,)))
    with pytest.raises(ExportError, match=rf"cannot write the ONNX model to {re.escape(str(tmp_path))}: it is a folder"):
        graph.export_onnx(tmp_path)
    (tmp_path / "file").write_text("")
    target = tmp_path / "file" / "model.onnx"          # under a file: no folder can be made there
    with pytest.raises(ExportError, match=rf"cannot write the ONNX model to {re.escape(str(target))}: ") as error:
        graph.export_onnx(target)
    assert ".tmp" not in str(error.value)


def test_without_the_onnx_package_the_error_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ExportError, match=r"pip install 'attngraph\[onnx\]'"):
        export_onnx(ag.trace(lambda x: -x, x=ag.Input((3,))), tmp_path / "m.onnx")
    assert not list(tmp_path.iterdir())


def test_readme_example_runs(tmp_path, monkeypatch):
    readme = Path(__file__).resolve().parents[2] / "README.md"
    code = re.search(r"## Export to ONNX\n\n```python\n(.*?)```", readme.read_text(), re.DOTALL).group(1)
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(code, str(readme), "exec"), namespace)
    np.testing.assert_allclose(namespace["logits"], namespace["graph"].compile()(tokens=namespace["tokens"]),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", [*UNARY, *BINARY])
def test_every_op_of_the_table_exports_to_onnxruntime(name, matches):
    """Inside each op's domain, ±0 and halves (round's even neighbour) included; the non-finite values where an
    exported model differs are README's differences."""
    if name in BINARY:
        graph = ag.trace(BINARY[name][0], a=ag.Input((3, 1)), b=ag.Input((4,)))
        matches(graph, dict(a=np.array([[-1.5], [0.0], [2.5]], np.float32),
                            b=np.array([-2.0, 0.5, 1.0, 3.0], np.float32)))
        return
    fn, _, points = UNARY[name]
    x = (X[np.isfinite(X)] if points is None else points).astype(np.float32)
    matches(ag.trace(fn, x=ag.Input(x.shape)), dict(x=x))


@pytest.mark.parametrize("name, dtype", [*((n, d) for n in DIVISION for d in (np.float32, np.int32)),
                                         *((n, np.int32) for n in BITWISE if "shift" not in n)])
def test_every_division_and_bitwise_op_exports_to_onnxruntime(name, dtype, matches):
    """Every sign pair, a zero divisor included (IEEE's x / 0 for floats, 0 for integers)."""
    fn = {**DIVISION, **BITWISE}[name][0]
    values = np.array([-7.5, -2.0, -0.5, 0.0, 0.5, 3.0, 7.5]) if dtype == np.float32 else INTS
    a, b = values[:, None].astype(dtype), values.astype(dtype)
    matches(ag.trace(lambda a, b: (fn(a, b), ~a) if name in BITWISE else fn(a, b), a=ag.Input(a.shape, dtype),
                     b=ag.Input(b.shape, dtype)), dict(a=a, b=b))
