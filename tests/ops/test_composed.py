"""The ops composed from other primitives (stack, squeeze, unsqueeze, flatten, one_hot, tril, triu, var, std,
nll_loss, cross_entropy's label smoothing) and nn.SwiGLU, against torch 2.13's numbers, and their errors."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import BindingError, DTypeError, ShapeError
from attngraph.inspect import gradcheck

X = np.arange(24.0).reshape(2, 3, 4) ** 1.5 % 7 - 3          # the x of the torch numbers below
T = np.array([[0, 3, -100], [2, -100, 1]])                     # targets; -100 is torch's default ignore_index


def run(f, **feeds):
    return ag.trace(f, **feeds).compile()(**feeds)


def test_stack_squeeze_unsqueeze_and_flatten_shape_as_torch():
    out = run(lambda x: (ag.stack([x, 2 * x], 1), ag.squeeze(ag.unsqueeze(x, -1)), ag.squeeze(x[:1], (0, 1)),
                         ag.flatten(x, 1), ag.flatten(x, 0, 1), ag.flatten(ag.sum(x))), x=X)
    want = [np.stack([X, 2 * X], 1), X, X[0], X.reshape(2, 12), X.reshape(6, 4), np.sum(X).reshape(1)]
    for got, w in zip(out, want):
        assert got.shape == w.shape
        np.testing.assert_array_equal(got, w)


def test_one_hot_is_int64_and_an_index_out_of_range_raises_when_the_graph_runs():
    graph = ag.trace(lambda t: ag.one_hot(t, 4), t=ag.Input((2, 2), "int64"))
    out = graph.compile()(t=np.array([[0, 3], [2, 2]]))
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, np.eye(4, dtype=np.int64)[[[0, 3], [2, 2]]])
    for bad in (4, -1):                                  # torch raises on both
        with pytest.raises(BindingError, match=f"index {bad} is out of range"):
            graph.compile()(t=np.array([[0, bad], [1, 1]]))


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_tril_and_triu_keep_a_triangle_of_the_last_two_axes(k):
    lower, upper = run(lambda x: (ag.tril(x, k), ag.triu(x, k)), x=X)
    np.testing.assert_array_equal(lower, np.tril(X, k))
    np.testing.assert_array_equal(upper, np.triu(X, k))
    np.testing.assert_array_equal(run(lambda b: ag.triu(b, k), b=X > 0), np.triu(X > 0, k))
    _, grad = ag.value_and_grad(lambda x: ag.sum(ag.tril(x, k)))(X)
    np.testing.assert_array_equal(grad, np.tril(np.ones_like(X), k))


def test_var_and_std_with_a_correction_as_torch():
    var, std = run(lambda x: (ag.var(x, (0, 2)), ag.std(x, 1, correction=0)), x=X)
    np.testing.assert_allclose(var, [4.941546684941463, 6.390680037520126, 3.196265582823395], rtol=1e-14)
    np.testing.assert_allclose(std, [[0.6701689815612195, 2.0662828870823455, 1.2353480788907671, 1.6148957542442592],
                                     [2.4042314643374896, 2.342986661668624, 1.2272934654908685, 1.647755961974761]],
                               rtol=1e-14)
    assert run(lambda x: ag.var(x, keepdims=True), x=X).shape == (1, 1, 1)
    gradcheck(lambda x: ag.sum(ag.std(x, -1) * np.linspace(-1, 1, 6).reshape(2, 3)), X).raise_if_failed()


def test_var_and_std_divide_by_max_0_n_minus_correction_as_torch():
    """torch.var(x, 1, correction=c) is Σ(x − mean)² / max(0, n − c): inf for n ≤ c (NaN where the squares sum to
    0), NaN over an empty axis; torch.std is its root."""
    x = np.array([[1.0, 2.0], [3.0, 5.0], [4.0, 4.0]])
    var, std, empty = run(lambda x, e: (ag.var(x, 1, correction=5), ag.std(x, 1, correction=2), ag.var(e, 1)),
                          x=x, e=np.zeros((2, 0)))
    np.testing.assert_array_equal(var, [np.inf, np.inf, np.nan])
    np.testing.assert_array_equal(std, [np.inf, np.inf, np.nan])
    np.testing.assert_array_equal(empty, [np.nan, np.nan])


def test_var_gradient_at_a_row_holding_inf_is_torch_s():
    """torch.var(torch.tensor([1., inf, 2.])).backward() gives [-inf, nan, -inf]: 2(x − mean)/(n − 1) without the
    mean's own term (0 in exact arithmetic, NaN here); a finite row keeps the exact gradient."""
    value, grad = ag.value_and_grad(lambda x: ag.sum(ag.var(x, 1)))(np.array([[1.0, np.inf, 2.0], [1.0, 2.0, 6.0]]))
    assert np.isnan(value)
    np.testing.assert_array_equal(grad, [[-np.inf, np.nan, -np.inf], [-2.0, -1.0, 3.0]])


def test_second_order_gradients_through_var_keep_the_mean_s_term():
    """d/dx of |∂ var/∂x|², whose exact value needs the mean's term the first-order rule leaves out."""
    def penalty(x):
        (dx,) = ag.gradients(ag.sum(ag.var(x, -1) * np.array([1.0, -2.0])), [x])
        return ag.sum(dx * dx * np.arange(8.0).reshape(2, 4))
    assert gradcheck(penalty, np.random.default_rng(1).standard_normal((2, 4))).ok


def test_std_gradient_of_a_constant_row_is_zero_as_torch():
    """torch.std(x, 1).sum().backward(): 0 on the constant row (std_backward masks where std = 0), else
    (x − mean) / ((n − 1)·std), std = √(7/3) = 1.5275252316519465 for [1, 2, 4]."""
    x = np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]])
    std, grad = ag.value_and_grad(lambda x: ag.sum(ag.std(x, 1)))(x)
    np.testing.assert_allclose(std, 1.5275252316519465, rtol=1e-15)
    np.testing.assert_allclose(grad, [[0.0, 0.0, 0.0], [-0.43643578047198484, -0.10910894511799625,
                                                      0.5455447255899809]], rtol=1e-14)


@pytest.mark.parametrize("reduction, want", [
    ("mean", 2.6797012160742653), ("sum", 10.718804864297061),
    ("none", [[5.304365208750783, 0.5671726725144042, 0.0], [3.3978600962394996, 0.0, 1.4494068867923744]])])
def test_nll_loss_skips_ignored_targets_as_torch(reduction, want):
    got = run(lambda x, t: ag.nll_loss(ag.log_softmax(x), t, reduction=reduction), x=X, t=T)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    assert not np.signbit(got).any()


def test_a_batch_whose_targets_are_all_ignored_has_a_loss_of_zero_not_torch_s_nan():
    ignored = np.full((2, 3), -100)
    loss, grad = ag.value_and_grad(lambda x, t: ag.nll_loss(ag.log_softmax(x), t))(X, ignored)
    assert loss == 0 and not grad.any()
    assert run(lambda x, t: ag.cross_entropy(x, t, -100, label_smoothing=0.3), x=X, t=ignored) == 0


@pytest.mark.parametrize("eps, want, row", [
    (0.1, 2.6486929139450983, [-0.23000753698852183, -0.0028726353733663757, 0.014771018830644357,
                               0.21810915353124383]),
    (1.0, 2.3696181947825954, [-0.06125753698852183, -0.05912263537336637, -0.04147898116935564,
                               0.16185915353124383])])
def test_label_smoothing_spreads_eps_over_the_classes_as_torch(eps, want, row):
    loss, grad = ag.value_and_grad(lambda x, t: ag.cross_entropy(x, t, ignore_index=-100, label_smoothing=eps))(X, T)
    assert loss == pytest.approx(want, rel=1e-14)
    np.testing.assert_allclose(grad[0, 0], row, rtol=1e-12)
    np.testing.assert_array_equal(grad[T == -100], 0)
    targets = np.array([[0, 3, 1], [2, 2, 1]])
    assert run(lambda x, t: ag.cross_entropy(x, t, label_smoothing=0.25), x=X, t=targets) == \
        pytest.approx(2.0741813063674885, rel=1e-14)


def test_swiglu_is_the_gated_feed_forward_of_shazeer_2020():
    layer = ag.nn.SwiGLU(4, 3, 2, dtype="float64")
    assert sorted(name for name, _ in layer.named_parameters()) == ["down.weight", "gate.weight", "up.weight"]
    layer.gate.weight.data[:] = np.linspace(-1, 1, 12).reshape(4, 3)
    layer.up.weight.data[:] = np.linspace(1, -0.5, 12).reshape(4, 3)
    layer.down.weight.data[:] = np.linspace(-0.3, 0.6, 6).reshape(3, 2)
    out = ag.trace(layer, x=ag.Input((2, 3, 4), "float64")).compile()(x=X)
    np.testing.assert_allclose(out[0], [[-0.5693144331417415, -11.597044581479611],
                                        [0.11641024812852074, -1.5925440817176695],
                                        [-0.004804447503631598, -0.10419636171249581]], rtol=1e-13)
    assert len(list(ag.nn.SwiGLU(4, 8, bias=True).parameters())) == 6


@pytest.mark.parametrize("build, error, message", [
    (lambda x, t: ag.stack([x, x[0]]), ShapeError, "stack takes tensors of one shape"),
    (lambda x, t: ag.stack([]), ShapeError, "at least one tensor"),
    (lambda x, t: ag.squeeze(x, 3), ShapeError, "out of range"),
    (lambda x, t: ag.flatten(x, 2, 1), ShapeError, "comes after its end axis"),
    (lambda x, t: ag.one_hot(t, 0), ShapeError, "classes must be a positive int"),
    (lambda x, t: ag.one_hot(x, 3), DTypeError, "must be integers"),
    (lambda x, t: ag.tril(x[0, 0]), ShapeError, "at least two axes"),
    (lambda x, t: ag.triu(x, 0.5), ShapeError, "must be an int"),
    (lambda x, t: ag.var(x, 4), ShapeError, "out of range"),
    (lambda x, t: ag.var(t), DTypeError, "cast it first"),
    (lambda x, t: ag.nll_loss(x, t, reduction="avg"), ShapeError, "reduction must be"),
    (lambda x, t: ag.nll_loss(x, t[0]), ShapeError, "targets of their shape"),
    (lambda x, t: ag.cross_entropy(x, t, label_smoothing=1.5), ShapeError, "label_smoothing must be"),
])
def test_bad_arguments_raise_the_project_s_errors_while_tracing(build, error, message):
    with pytest.raises(error, match=message):
        ag.trace(build, x=ag.Input((2, 3, 4)), t=ag.Input((2, 3), "int64"))


def test_a_target_out_of_range_that_is_not_ignored_raises_when_the_graph_runs():
    graph = ag.trace(lambda x, t: ag.nll_loss(x, t), x=ag.Input((2, 3, 4)), t=ag.Input((2, 3), "int64"))
    with pytest.raises(BindingError, match="index 4 is out of range"):
        graph.compile()(x=X.astype(np.float32), t=np.array([[0, 4, -100], [1, 1, 1]]))


def test_the_compositions_export_to_onnx_and_match_in_onnxruntime():
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from attngraph.export import to_onnx

    def f(x, t):
        return (ag.nll_loss(ag.log_softmax(x), t), ag.cross_entropy(x, t, -100, label_smoothing=0.1), ag.tril(x, 1),
                ag.std(x, 1), ag.flatten(ag.stack([x, x], 1), 2), ag.one_hot(ag.where(t < 0, 0, t), 4))
    graph = ag.trace(f, x=ag.Input(("B", 3, 4)), t=ag.Input(("B", 3), "int64"))
    session = ort.InferenceSession(to_onnx(graph).SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = dict(x=X.astype(np.float32), t=T)
    for got, want in zip(session.run(None, feeds), graph.compile()(**feeds)):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)
