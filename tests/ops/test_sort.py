"""argmax, argmin, sort and topk: the kernels on every device against NumPy's stable order (NaN the largest, ties
by index, integers and booleans), the ops against torch 2.13's numbers, their gradients, a graph of them on "cuda"
as on "cpu", the errors of bad inputs, and their ONNX forms in onnxruntime."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import ShapeError
from attngraph.inspect import gradcheck
from tests.cuda.test_executor import assert_same_on_both

NAN, INF = np.nan, np.inf
ROWS = np.array([[3.0, NAN, 1.0, 3.0, NAN], [-INF, 1.0, -0.0, 0.0, INF]], np.float32)
TIES = np.array([[2, 0, 2, 1, 0], [1, 1, 1, 1, 1]], np.int32)
X = np.array([3.0, NAN, 1.0, 3.0, NAN, -INF, 1.0, -0.0, 0.0, INF])
# torch.sort(torch.tensor(X), stable=True, descending=...): (values, indices)
TORCH_SORT = {False: ([-INF, -0.0, 0.0, 1.0, 1.0, 3.0, 3.0, INF, NAN, NAN], [5, 7, 8, 2, 6, 0, 3, 9, 1, 4]),
              True: ([NAN, NAN, INF, 3.0, 3.0, 1.0, 1.0, -0.0, 0.0, -INF], [1, 4, 9, 0, 3, 2, 6, 7, 8, 5])}


def run(f, **feeds):
    return ag.trace(f, **feeds).compile()(**feeds)


def stable_order(x, descending):
    """The indices of each row's stable sort along the last axis, a NaN larger than any number."""
    x = x.astype(np.float64)
    nan = np.isnan(x)
    key = np.where(nan, 0, -x if descending else x)
    return np.lexsort((key, ~nan if descending else nan), axis=-1)


def argsort(device, x, k, descending):
    return device.get(device.kernels["argsort"](device.put(x), k, descending))


@pytest.mark.parametrize("x", [ROWS, TIES, TIES > 0], ids=["nan", "ties", "bool"])
def test_order_kernels_find_the_first_extreme_and_the_stable_order(x, device):
    for name, numpy_arg in (("argmax", np.argmax), ("argmin", np.argmin)):        # NumPy's: the first NaN wins
        got = device.get(device.kernels[name](device.put(x)))
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, numpy_arg(x, -1))
    for k, descending in ((None, False), (None, True), (2, True), (0, False)):
        got = argsort(device, x, k, descending)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, stable_order(x, descending)[:, :k])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_is_torch_s_stable_sort_with_nan_the_largest(descending, dtype):
    values, indices = run(lambda x: ag.sort(x, descending=descending), x=X.astype(dtype))
    want_values, want_indices = TORCH_SORT[descending]
    assert values.dtype == dtype and indices.dtype == np.int64
    np.testing.assert_array_equal(values, np.array(want_values, dtype))
    np.testing.assert_array_equal(np.signbit(values), np.signbit(want_values))
    np.testing.assert_array_equal(indices, want_indices)


def test_the_kernel_agrees_with_numpy_s_stable_argsort_on_rows_with_many_ties(device, rng):
    x = rng.integers(0, 4, (7, 33)).astype(np.float32)
    np.testing.assert_array_equal(argsort(device, x, 33, False), np.argsort(x, -1, kind="stable"))
    descending = argsort(device, x, 5, True)
    np.testing.assert_array_equal(descending, np.argsort(-x, -1, kind="stable")[:, :5])
    np.testing.assert_array_equal(argsort(device, x.astype(np.int32), 33, False), np.argsort(x, -1, kind="stable"))


def test_topk_picks_the_k_largest_or_smallest_in_order_ties_by_index():
    values, indices = run(lambda x: ag.topk(x, 4), x=X)
    np.testing.assert_array_equal(values, [NAN, NAN, INF, 3.0])            # torch.topk(X, 4).values
    np.testing.assert_array_equal(indices, [1, 4, 9, 0])
    values, indices = run(lambda x: ag.topk(x, 4, largest=False), x=X)
    np.testing.assert_array_equal(values, [-INF, -0.0, 0.0, 1.0])         # torch: the same values
    np.testing.assert_array_equal(indices, [5, 7, 8, 2])


def test_sort_and_topk_along_another_axis_and_of_integers_and_booleans(rng):
    x = rng.integers(-5, 5, (4, 3, 2))
    values, indices = run(lambda x: ag.sort(x, axis=0, descending=True), x=x)
    assert values.dtype == np.int64
    np.testing.assert_array_equal(indices, np.argsort(-x, 0, kind="stable"))
    np.testing.assert_array_equal(values, np.take_along_axis(x, indices, 0))
    values, indices = run(lambda x: ag.topk(x, 2, axis=1, largest=False), x=x.astype(np.float32))
    np.testing.assert_array_equal(indices, np.argsort(x, 1, kind="stable")[:, :2])
    values, indices = run(lambda b: ag.sort(b, descending=True), b=np.array([False, True, False, True]))
    np.testing.assert_array_equal(values, [True, True, False, False])
    np.testing.assert_array_equal(indices, [1, 3, 0, 2])


def test_the_values_gradient_goes_back_to_the_chosen_positions(rng):
    x, w = rng.standard_normal((3, 6)), rng.standard_normal((3, 2))
    loss, grad = ag.value_and_grad(lambda x, w: ag.sum(ag.topk(x, 2, axis=1)[0] * w))(x, w)
    top = np.argsort(-x, 1, kind="stable")[:, :2]
    want = np.zeros_like(x)
    np.put_along_axis(want, top, w, 1)          # what torch.topk's backward gives
    np.testing.assert_allclose(grad, want, rtol=1e-15)
    assert loss == pytest.approx(np.sum(np.take_along_axis(x, top, 1) * w))
    gradcheck(lambda x: ag.sum(ag.sort(x, axis=0)[0] * np.arange(12.0).reshape(3, 4)),
              rng.standard_normal((3, 4))).raise_if_failed()


def test_symbolic_leading_axes_take_any_size(rng):
    graph = ag.trace(lambda x: ag.topk(x, 2), x=ag.Input(("B", "T", 5)))
    for b, t in ((1, 1), (2, 3)):
        x = rng.standard_normal((b, t, 5)).astype(np.float32)
        values, indices = graph.compile()(x=x)
        np.testing.assert_array_equal(indices, np.argsort(-x, -1, kind="stable")[..., :2])
        np.testing.assert_array_equal(values, -np.sort(-x, -1)[..., :2])


def test_argmax_and_argmin_find_the_first_extreme_nan_first():
    y = np.array([[2.0, -1.0, 2.0], [0.5, 7.0, -3.0]])
    out = run(lambda x, y, n: (ag.argmax(x), ag.argmin(x), ag.argmax(y, 1), ag.argmin(y, 0, keepdims=True),
                               ag.argmax(n, -1), ag.argmin(y)), x=X, y=y, n=np.array([[1, 5, 5], [9, 0, 9]]))
    # torch.argmax(X), argmin(X), argmax(y, 1), argmin(y, 0, keepdim=True), argmax(n, 1), argmin(y)
    for got, want in zip(out, [1, 1, [0, 1], [[1, 0, 1]], [1, 0], 5]):
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(run(lambda b: ag.argmin(b), b=np.array([True, False, False])), 1)
    assert run(lambda s: ag.argmax(s, keepdims=True), s=np.float32(3)).shape == ()


def test_indices_are_not_differentiable_and_integer_outputs_stop_the_gradient(rng):
    x = rng.standard_normal((2, 4))
    _, grad = ag.value_and_grad(lambda x: ag.sum(x * ag.argmax(x, 1, keepdims=True).astype(x.dtype)))(x)
    np.testing.assert_array_equal(grad, np.broadcast_to(np.argmax(x, 1)[:, None], x.shape))


@pytest.mark.parametrize("build, message", [
    (lambda x: ag.topk(x, 6), "k = 6 is out of range"),
    (lambda x: ag.topk(x, -1), "k must be an int >= 0"),
    (lambda x: ag.topk(x, 1.5), "k must be an int >= 0"),
    (lambda x: ag.sort(x, axis=2), "axis 2 is out of range"),
    (lambda x: ag.topk(ag.sum(x), 2), "k must be 1"),
    (lambda x: ag.argmax(x[:, :0], 1), "axis of size 0"),
    (lambda x: ag.argmin(x, 3), "axis 3 is out of range"),
    (lambda x: ag.argmax(ag.sum(x), 1), "axis 1 is out of range"),
])
def test_bad_arguments_raise_shape_errors_while_tracing(build, message):
    with pytest.raises(ShapeError, match=message):
        ag.trace(build, x=ag.Input((3, 5)))


@pytest.mark.parametrize("op", [lambda x: ag.sort(x, descending=True), lambda x: ag.topk(x, 1, axis=-1)],
                         ids=["sort", "topk"])
def test_a_0d_tensor_sorts_to_itself_at_index_0_as_torch(op):
    """torch.sort(torch.tensor(2.5)) and torch.topk(torch.tensor(2.5), 1) give (2.5, 0), both 0-d; the value's
    gradient is 1."""
    values, indices = run(op, x=np.array(2.5, np.float32))
    assert values.shape == indices.shape == () and values == 2.5 and indices == 0 and indices.dtype == np.int64
    _, grad = ag.value_and_grad(lambda x: op(x)[0] * 3.0)(np.array(2.5))
    assert grad == 3.0


def test_an_empty_axis_bound_at_run_time_raises_as_max_does():
    graph = ag.trace(lambda x: ag.argmax(x, 1), x=ag.Input((2, "T")))
    with pytest.raises(ValueError, match="argmax over an empty axis"):
        graph.compile()(x=np.zeros((2, 0), np.float32))


def test_onnx_forms_match_in_onnxruntime(rng):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from attngraph.export import to_onnx

    def f(x):
        values, indices = ag.sort(x, axis=1, descending=True)
        top, at = ag.topk(x, 2, largest=False)
        return values, indices, top, at, ag.argmax(x, -1), ag.argmin(x, 0), ag.cumsum(x, 1), ag.cumsum(x > 0, 2)
    graph = ag.trace(f, x=ag.Input(("B", 3, 4)))
    model = to_onnx(graph)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for b in (1, 2):
        x = rng.integers(-2, 3, (b, 3, 4)).astype(np.float32)      # ties, which both order by index
        x[0, 1, 1:3] = np.nan                                       # onnxruntime's ArgMax and ArgMin skip NaN
        for got, want in zip(session.run(None, {"x": x}), graph.compile()(x=x)):
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_k_beyond_a_symbolic_axis_raises_when_the_graph_runs():
    graph = ag.trace(lambda x: ag.topk(x, 3), x=ag.Input((2, "T")))
    with pytest.raises(ValueError, match="the top 3 of an axis of size 2"):
        graph.compile()(x=np.zeros((2, 2), np.float32))


@pytest.mark.parametrize("device", ["cuda"], indirect=True)
def test_a_graph_of_the_order_ops_runs_forward_and_backward_on_cuda_as_on_the_cpu(device, rng):
    def f(x, w):
        top, at = ag.topk(x, 2)
        return ag.sum(top * w) + ag.sum(ag.cumsum(ag.sort(x, 0, descending=True)[0], 1) * x) + \
            ag.sum((ag.argmax(x, 1) - ag.argmin(x, 0)[:2]).astype(x.dtype)) + ag.sum(at.astype(x.dtype))

    graph = ag.trace(f, x=ag.Input((2, 3)), w=ag.Input((2, 2)))
    x, w = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 2)).astype(np.float32)
    assert_same_on_both(graph.grad(wrt=["x", "w"]), x=x, w=w)
