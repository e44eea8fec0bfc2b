"""The compiler's graph passes, each on a small graph: what it changes, and that the results do not."""
import collections
from types import SimpleNamespace

import numpy as np
import pytest

import attngraph as ag
from attngraph.attention import MultiHeadAttention
from attngraph.core import passes
from attngraph.core.executor import Executable
from attngraph.core.primitive import lookup
from attngraph.models.gpt import GPT


def ops(graph) -> collections.Counter:
    """Op calls that the outputs depend on."""
    return collections.Counter(n.op for n in graph.topological_order() if n.kind == "call")


def same_results(graph, optimized, **feeds):
    for a, b in zip(Executable(graph)(**feeds), Executable(optimized)(**feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


X = np.linspace(-1, 1, 6).reshape(2, 3)


def test_dce_removes_what_no_output_reads_and_keeps_every_input():
    def f(x, unused):
        ag.exp(x) * 2.0                                     # computed, never used
        return ag.sum(x)
    graph = ag.trace(f, x=X, unused=X)
    optimized = passes.dce(graph)
    assert "exp" in {n.op for n in graph.nodes} and "exp" not in {n.op for n in optimized.nodes}
    assert list(optimized.inputs) == ["x", "unused"]


def test_cse_merges_duplicates():
    graph = ag.trace(lambda x: ag.exp(x * 2.0) + ag.exp(x * 2.0), x=X)
    optimized = passes.dce(passes.cse(graph))
    assert ops(graph)["exp"] == 2 and ops(optimized)["exp"] == 1 and ops(optimized)["mul"] == 1
    same_results(graph, optimized, x=X)


def test_cse_keeps_different_attributes_apart():
    graph = ag.trace(lambda x: ag.sum(x, 0) * ag.sum(x, 1)[:, None], x=X)
    assert ops(passes.cse(graph))["sum"] == 2


def test_folding_evaluates_constant_subgraphs():
    table = np.arange(6.0).reshape(3, 2)
    graph = ag.trace(lambda x: x * ag.exp(ag.embedding(table, np.array([2, 0])) * 0.5) / ag.mean(x), x=X[:, :2])
    optimized = passes.dce(passes.fold(graph))
    assert ops(optimized) == {"mul": 1, "sum": 1, "div": 2}             # the mean's size is folded too
    same_results(graph, optimized, x=X[:, :2])


def test_simplify_composes_transposes_and_drops_the_loss_broadcast():
    """The gradient of Σ f(x) ∘ y is y times the output gradient 1 (folded) broadcast to x's shape: y."""
    x = X.reshape(1, 2, 3)
    graph = ag.trace(lambda x, y: ag.sum(ag.transpose(ag.transpose(x, (1, 2, 0)), (2, 0, 1)) * y), x=x,
                     y=x).grad(["x"])
    optimized = passes.dce(passes.simplify(passes.fold(graph)))
    assert ops(graph)["transpose"] == 4 and "broadcast_to" in ops(graph)
    assert ops(optimized) == {"mul": 1, "sum": 1}
    same_results(graph, optimized, x=x, y=2 * x)


def test_simplify_keeps_a_subtraction_from_zero():
    graph = ag.trace(lambda x: 0.0 - x, x=X)
    assert ops(passes.simplify(graph)) == {"sub": 1}


def test_fuse_moves_transposes_into_matmuls_and_a_bias_into_gelu(rng):
    w, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    graph = ag.trace(lambda x: ag.sum(ag.gelu(x @ w + b) @ w.T), x=X).grad(["x"])
    optimized = passes.dce(passes.fuse(graph))
    assert "transpose" in ops(graph) and "add" in ops(graph)
    assert "transpose" not in ops(optimized) and "add" not in ops(optimized)
    assert any(n.op == "matmul" and n.attrs["transpose_b"] for n in optimized.nodes)
    assert all(len(n.inputs) == 2 for n in optimized.nodes if n.op == "gelu")
    same_results(graph, optimized, x=X)


def test_the_gradient_of_a_split_used_whole_is_one_concatenation(rng):
    cell = ag.nn.GRUCell(3, 4, rng=rng)
    x, h = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)
    graph = ag.trace(lambda x, h: ag.sum(cell(x, h) ** 2), x=x, h=h).grad(["x", "h"])
    optimized = passes.dce(passes.simplify(graph))
    assert ops(graph)["scatter_slice"] == 6 and "scatter_slice" not in ops(optimized)   # 2 splits of 3 gates
    assert ops(optimized)["concat"] == 2
    same_results(graph, optimized, x=x, h=h)


def test_the_gradient_of_every_time_step_is_one_concatenation_and_whole_slices_are_reshapes(rng):
    """Σₜ scatter_slice(gₜ, x[:, t]) over every t (a recurrent layer's steps, in any order) is a concatenation
    of the gₜ given their axis back; x[:, 0] of an axis of size 1, and its gradient, are reshapes. (w[:, 0],
    taken at every step, is differentiated once: autodiff sums the four copies' gradients before its VJP.)"""
    x, w = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 1, 3))

    def f(x, w):
        steps = [ag.tanh(x[:, t] * w[:, 0]) for t in (2, 0, 3, 1)]
        return ag.sum(steps[0] * steps[1] + steps[2] - steps[3])
    graph = ag.trace(f, x=x, w=w).grad(["x", "w"])
    optimized = passes.dce(passes.simplify(graph))
    assert ops(graph)["scatter_slice"] == 4 + 1 and "scatter_slice" not in ops(optimized)
    assert ops(optimized)["concat"] == 1 and ops(optimized)["getitem"] == 4
    same_results(graph, optimized, x=x, w=w)


def test_the_gradient_of_a_split_used_in_part_keeps_its_scatters():
    graph = ag.trace(lambda x: ag.sum(ag.split(x, 2, axis=0)[0] * 2.0 + ag.split(x, 2, axis=0)[2]),
                     x=ag.Input((6, 2), "float64")).grad(["x"])
    optimized = passes.dce(passes.simplify(graph))
    assert ops(optimized)["scatter_slice"] == 2 and "concat" not in ops(optimized)
    same_results(graph, optimized, x=np.arange(12.0).reshape(6, 2))


def gpt_step_graph(rng):
    model = GPT(11, 16, 2, 2, 32, 8, dropout=0.0, rng=rng)
    tokens, targets = (rng.integers(0, 11, (2, 8)) for _ in range(2))
    graph = ag.trace(lambda tokens, targets: ag.cross_entropy(model(tokens), targets), tokens=tokens,
                     targets=targets)
    return graph, dict(tokens=tokens, targets=targets)


def test_attention_fusion_replaces_composed_attention_and_its_gradient(rng):
    graph, feeds = gpt_step_graph(rng)
    graph = graph.grad()
    optimized = passes.optimize(graph)
    assert ops(graph)["softmax"] == 2 and ops(optimized)["attention"] == ops(optimized)["attention_grad"] == 2
    assert not {"softmax", "softmax_grad"} & set(ops(optimized))
    for a, b in zip(Executable(graph)(**feeds), Executable(optimized)(**feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_split_heads_are_read_in_place(rng):
    """Attention over heads split from a projection reads them in the layout (B, T, H, d), forward and backward:
    no transposes of heads are left (the one of the tied embedding's gradient is 2-D)."""
    graph, feeds = gpt_step_graph(rng)
    graph = graph.grad()
    optimized = passes.optimize(graph)

    def head_transposes(graph):
        return [n for n in graph.topological_order() if n.op == "transpose" and len(n.shape) == 4]
    assert len(head_transposes(graph)) >= 16 and head_transposes(optimized) == []
    assert {n.attrs.get("layout") for n in optimized.nodes if n.op.startswith("attention")} == {"bthd"}
    for a, b in zip(Executable(graph)(**feeds), Executable(optimized)(**feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_the_attention_primitives_infer_the_tokens_first_layout():
    def x(*shape):
        return SimpleNamespace(shape=shape, dtype=np.dtype("float32"))
    q, k, v, g = x(2, 5, 4, 8), x(2, 7, 4, 8), x(2, 7, 4, 6), x(2, 5, 4, 6)
    attrs = dict(causal=False, scale=1.0, layout="bthd")
    assert lookup("attention").infer(q, k, v, **attrs)[0] == (2, 5, 4, 6)
    assert lookup("attention_grad").infer(g, g, q, k, v, **attrs)[0] == (3, 2, 7, 4, 8)
    assert lookup("attention_bias_grad").infer(g, g, q, k, v, **attrs)[0] == (2, 4, 5, 7)
    with pytest.raises(ValueError, match="heads after T"):
        lookup("attention").infer(q, x(2, 7, 3, 8), v, **attrs)
    with pytest.raises(ValueError, match="layout"):
        lookup("attention").infer(q, k, v, causal=False, scale=1.0, layout="tbhd")


def test_grouped_query_attention_keeps_the_heads_first_layout(rng):
    """Keys and values repeated across query heads are no split of a projection: the kernels read them heads
    first."""
    mha = MultiHeadAttention(16, 4, kv_heads=2, rng=rng)
    x = rng.standard_normal((2, 5, 16)).astype(np.float32)
    graph = ag.trace(lambda x: ag.sum(mha(x, x, x, causal=True)), x=x).grad()
    layouts = {n.attrs.get("layout", "bhtd") for n in passes.optimize(graph).nodes if n.op.startswith("attention")}
    assert layouts == {"bhtd"}


def test_attention_maps_asked_for_keep_the_composition(rng):
    graph, _ = gpt_step_graph(rng)
    weights = [n for n in graph.nodes if n.name == "attention"]
    optimized = passes.optimize(graph.with_outputs({"weights": weights[0]}))
    assert ops(optimized)["softmax"] == 1 and ops(optimized)["attention"] == 1


def test_compile_optimizes_unless_debugging(rng):
    graph, _ = gpt_step_graph(rng)
    assert graph.compile().graph is not graph
    with ag.debug():
        assert graph.compile().graph is graph


def test_optimized_nodes_name_the_users_source_line(rng):
    w, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    graph = ag.trace(lambda x: ag.sum(ag.gelu(x @ w + b)), x=X)          # the line the gelu node names
    line = next(n.source for n in graph.nodes if n.op == "gelu")
    assert line.startswith("tests/core/test_passes.py:")
    fused = [n for n in passes.optimize(graph).nodes if n.op == "gelu"]
    assert len(fused) == 1 and fused[0].source == line and line in fused[0].describe()


def test_a_failure_while_folding_names_the_users_source_line():
    table = np.ones((3, 2))
    graph = ag.trace(lambda x: x + ag.embedding(table, np.array([0, 7])), x=X[:, :2])
    with pytest.raises(IndexError) as error:
        graph.compile()
    assert "tests/core/test_passes.py:" in "".join(error.value.__notes__)


def fused_qkv_attention(form: str, heads: int = 2):
    """nanoGPT's attention over one projection c_attn (d → 3d): heads split from (B, T, 3, H, d_h) transposed to
    (3, B, H, T, d_h) and indexed ("5d"), or the projection split along its last axis, each part reshaped to
    (B, T, H, d_h) and transposed ("split"); then ag.scaled_dot_product_attention and the heads merged back."""
    def loss(x, w, wo):
        b, t, d = x.shape
        qkv = x @ w
        if form == "5d":
            qkv = ag.transpose(ag.reshape(qkv, (b, t, 3, heads, d // heads)), (2, 0, 3, 1, 4))
            q, k, v = qkv[0], qkv[1], qkv[2]
        else:
            q, k, v = (ag.swapaxes(ag.reshape(p, (b, t, heads, d // heads)), 1, 2) for p in ag.split(qkv, d, -1))
        y = ag.scaled_dot_product_attention(q, k, v, causal=True)
        return ag.sum(ag.tanh(ag.reshape(ag.swapaxes(y, 1, 2), (b, t, d)) @ wo))
    return loss


@pytest.mark.parametrize("form", ["5d", "split"])
def test_heads_split_from_one_fused_projection_are_read_in_place(rng, form):
    """However the heads are split from nanoGPT's fused projection, the attention reads them in place and no
    transpose of heads is left: the gradient's one copy is the stacked gradient laid out as the projection
    (B, T, 3, H, d_h). Results bit for bit those of the graph as traced."""
    x, w, wo = rng.standard_normal((2, 5, 8)), rng.standard_normal((8, 24)), rng.standard_normal((8, 8))
    graph = ag.trace(fused_qkv_attention(form), x=x, w=w, wo=wo).grad(wrt=["x", "w", "wo"])
    optimized = passes.optimize(graph)
    moves = [(n.op, len(n.shape)) for n in optimized.topological_order() if n.op in ("transpose", "concat")]
    assert moves == ([("transpose", 5)] if form == "5d" else [("concat", 3)])
    assert {n.attrs.get("layout") for n in optimized.nodes if n.op.startswith("attention")} == {"bthd"}
    for a, b in zip(Executable(graph)(x=x, w=w, wo=wo), Executable(optimized)(x=x, w=w, wo=wo)):
        np.testing.assert_array_equal(a, b)


def test_attention_called_on_heads_first_arrays_keeps_its_layout(rng):
    """q, k and v that are no transposes of split heads (here: arrays the user gives heads first) stay heads first."""
    q, k, v = (rng.standard_normal((2, 2, 5, 4)) for _ in range(3))
    graph = ag.trace(lambda q, k, v: ag.sum(ag.scaled_dot_product_attention(q, k, v, causal=True)), q=q, k=k, v=v)
    optimized = passes.optimize(graph.grad(wrt=["q", "k", "v"]))
    assert ops(optimized)["attention_grad"] == 1
    assert {n.attrs.get("layout", "bhtd") for n in optimized.nodes if n.op.startswith("attention")} == {"bhtd"}


def test_concatenated_slices_of_one_array_are_the_array(rng):
    """concat(x[0][None], x[1][None], ...) moved past the transposes around it is x (the rule the stacked attention
    gradient needs), and a concatenation of transposed arrays becomes one transpose of their concatenation."""
    x = rng.standard_normal((3, 4, 5))
    graph = ag.trace(lambda x: ag.transpose(ag.stack([ag.transpose(x[i]) for i in range(3)], 1), (1, 0, 2)), x=x)
    optimized = passes.optimize(graph)
    assert ops(optimized) == {"transpose": 1}
    np.testing.assert_array_equal(Executable(optimized)(x=x), Executable(graph)(x=x))


@pytest.mark.parametrize("index, then", [
    ((slice(None), slice(2, 9)), (slice(None), slice(1, 4))),
    ((slice(None), slice(2, 9)), (-1, slice(-3, None))),
    ((slice(1, 3), 4), (1,)),
    ((slice(None), slice(2, 9)), (slice(None), slice(5, 2))),          # empty
    ((slice(None), slice(None, None, 2)), (slice(None), slice(1, 3))),  # a step: kept as two
])
def test_a_slice_of_a_slice_is_one_slice(index, then, rng):
    x = rng.standard_normal((3, 10))
    graph = ag.trace(lambda x: x[index][then] * 2.0, x=x)
    optimized = passes.dce(passes.simplify(graph))
    assert ops(optimized)["getitem"] == (2 if index[1] == slice(None, None, 2) else 1)
    np.testing.assert_array_equal(Executable(optimized)(x=x), x[index][then] * 2.0)


def test_adjacent_slices_concatenated_are_one_slice(rng):
    """concat(x[:, 1:3], x[:, 3:6], y, x[:, 6:7], x[:, 0:1]): the first two joined, and nothing else (y between,
    and 0:1 not after 6:7)."""
    x, y = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 3, 2))
    graph = ag.trace(lambda x, y: ag.concat([x[:, :, 1:3], x[:, :, 3:6], y, x[:, :, 6:7], x[:, :, 0:1]], axis=-1),
                     x=x, y=y)
    optimized = passes.dce(passes.simplify(graph))
    assert ops(optimized) == {"getitem": 3, "concat": 1}
    np.testing.assert_array_equal(Executable(optimized)(x=x, y=y), Executable(graph)(x=x, y=y))
    whole = passes.dce(passes.simplify(ag.trace(lambda x: ag.concat([x[:, 1:2, 2:], x[:, 2:, 2:]], axis=1), x=x)))
    assert ops(whole) == {"getitem": 1}
    np.testing.assert_array_equal(Executable(whole)(x=x), x[:, 1:, 2:])


def test_gradients_of_slices_side_by_side_are_one_scatter_of_their_concatenation(rng):
    """∂/∂x of Σ x[:, 1:3]·a + Σ x[:, 3:5]·b: the two gradients are one concatenation scattered into 1:5; of
    Σ x[:, 0][1:]·c: one scatter (not into x[:, 0], then into x); of Σ x[:, -1]·a₀ + Σ x[:, :7]·2: a concatenation
    (the last column counted as column 7)."""
    x, a, b = rng.standard_normal((3, 8)), rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    c = rng.standard_normal(2)
    for loss, scattered, expected_ops in [
            (lambda x: ag.sum(x[:, 1:3] * a) + ag.sum(x[:, 3:5] * b), (slice(None), slice(1, 5)), {"concat": 1}),
            (lambda x: ag.sum(x[:, 0][1:] * c), (slice(1, None), 0), {}),
            (lambda x: ag.sum(x[:, -1] * a[:, 0]) + ag.sum(x[:, :7] * 2.0), None, {"concat": 1})]:   # x[:, 7] at -1
        graph = ag.trace(loss, x=x).grad(wrt=["x"])
        optimized = passes.dce(passes.simplify(graph))
        scatters = [n for n in optimized.topological_order() if n.op == "scatter_slice"]
        assert [n.attrs["index"] for n in scatters] == ([scattered] if scattered else [])
        assert not any(n.op == "add" and n.shape == x.shape for n in optimized.topological_order())
        assert all(ops(optimized)[op] == count for op, count in expected_ops.items())
        np.testing.assert_array_equal(Executable(optimized)(x=x)[1], Executable(graph)(x=x)[1])
        assert np.count_nonzero(Executable(optimized)(x=x)[1]) == (2 if not expected_ops else 12 if scattered else 24)


@pytest.mark.parametrize("transpose_a, transpose_b", [(False, False), (True, False), (False, True), (True, True)])
def test_a_product_contracting_an_axis_of_size_1_becomes_an_exact_multiplication(transpose_a, transpose_b, rng):
    """An additive attention's vᵀ tanh(·) has one output column: its gradients are outer products, which
    simplify turns into an elementwise product (then fused with the tanh's derivative), bit for bit."""
    a = rng.standard_normal((2, 1, 5) if transpose_a else (2, 5, 1))
    b = rng.standard_normal((3, 1) if transpose_b else (1, 3))
    graph = ag.trace(lambda a, b: ag.tanh(ag.core.functional.emit("matmul", a, b, transpose_a=transpose_a,
                                                                   transpose_b=transpose_b)), a=a, b=b)
    optimized = passes.dce(passes.simplify(graph))
    assert "matmul" not in ops(optimized) and ops(optimized)["mul"] == 1
    np.testing.assert_array_equal(Executable(optimized)(a=a, b=b), Executable(graph)(a=a, b=b))


def test_a_sum_over_steps_of_outer_products_becomes_one_product(rng):
    """The gradient of a time loop's batched keys: αₜ ⊗ ∂cₜ over B·T rows, reshaped to (B, T, K, D) and summed over
    T, is the product αᵀ (B, K, T) @ ∂c (B, T, D): no (B, T, K, D) array."""
    alpha, grad = rng.standard_normal((6 * 5, 4, 1)), rng.standard_normal((6 * 5, 1, 7))
    graph = ag.trace(lambda a, g: ag.sum(ag.reshape(a * g, (6, 5, 4, 7)), axis=1), a=alpha, g=grad)
    optimized = passes.dce(passes.simplify(graph))
    assert ops(optimized)["matmul"] == 1 and "sum" not in ops(optimized) and "mul" not in ops(optimized)
    expected = np.einsum("btk,btd->bkd", alpha.reshape(6, 5, 4), grad.reshape(6, 5, 7))
    np.testing.assert_allclose(Executable(optimized)(a=alpha, g=grad), expected, rtol=1e-12)


@pytest.mark.parametrize("axis, a_shape, b_shape", [
    (-1, (6, 5, 4), (6, 5, 4)),             # a dot product along rows: no outer product to avoid
    (0, (3, 1, 4), (3, 5, 1)),              # b's axes before a's: the product's result would need a transpose
    (1, (6, 5, 4, 1), (6, 1, 1, 7)),        # a summed axis along which b is broadcast
], ids=["dot", "columns before rows", "summed broadcast"])
def test_sums_of_products_that_one_product_does_not_make_in_place_stay(axis, a_shape, b_shape, rng):
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    graph = ag.trace(lambda a, b: ag.sum(a * b, axis=axis), a=a, b=b)
    optimized = passes.dce(passes.simplify(graph))
    assert "matmul" not in ops(optimized) and ops(optimized)["sum"] == 1
    np.testing.assert_array_equal(Executable(optimized)(a=a, b=b), Executable(graph)(a=a, b=b))


@pytest.mark.parametrize("batch", [2, "B"], ids=["concrete", "symbolic"])
def test_a_weight_used_at_every_time_step_gets_one_product_over_the_stacked_rows(batch, rng):
    """Σₜ hₜᵀ gₜ (a GRU's hidden weight over 5 steps) and Σₜ Σ_rows gₜ (its bias) become one product of the
    stacked rows and one sum: the same gradients as the per-step products. A symbolic batch stacks as (T, B, ·)
    reshaped to (T·B, ·): concat takes concrete axes only."""
    cell = ag.nn.GRUCell(3, 4, rng=rng).astype("float64")
    xs, h0 = rng.standard_normal((5, 2, 3)), rng.standard_normal((2, 4))

    def loss(xs, h):
        for t in range(5):
            h = cell(xs[t], h)
        return ag.sum(h ** 2)
    graph = ag.trace(loss, xs=ag.Input((5, batch, 3), "float64"), h=ag.Input((batch, 4), "float64")).grad()
    optimized = passes.optimize(graph, elementwise=False)
    weight_products = [n for n in optimized.topological_order() if n.op == "matmul" and n.attrs.get("transpose_a")]
    stacked = [n.inputs[0].shape for n in weight_products] if batch == 2 else [n.inputs[0].op for n in weight_products]
    assert sorted(stacked) == ([(10, 3), (10, 4)] if batch == 2 else ["reshape", "reshape"])   # 5 steps × 2 rows
    assert ops(optimized)["matmul"] == ops(graph)["matmul"] - 2 * (5 - 1)
    same_results(graph, optimized, xs=xs, h=h0)
