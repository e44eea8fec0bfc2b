"""Creation ops of issue 26 in one table: each builds a tensor from numbers (and shapes that may hold symbolic
dimensions) and must equal NumPy's (or torch's, where they differ) values and dtype exactly, on every device. Then
their arguments at the edges (empty and 0-d shapes, negative or fractional steps, k offsets, indexing), symbolic
shapes bound at run time, gradients through the ``*_like`` and ``meshgrid`` results, PyTorch's dtypes and refusals,
ONNX export, and ``arange``'s two forms (numbers, or the positions of a tensor along an axis)."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import DTypeError, ShapeError, TracingError
from tests.conftest import run
from tests.export.conftest import matches, run_onnx  # noqa: F401  (fixtures)

# name: (a function of a (2, 3) float32 tensor x building the tensor, the values it must equal, dtype and all)
CREATION = {
    "zeros": (lambda x: ag.zeros(2, 3), np.zeros((2, 3), np.float32)),
    "ones": (lambda x: ag.ones((4,), dtype="int32"), np.ones(4, np.int32)),
    "full": (lambda x: ag.full((2, 2), 2.5), np.full((2, 2), 2.5, np.float32)),
    "zeros_like": (lambda x: ag.zeros_like(x), np.zeros((2, 3), np.float32)),
    "ones_like": (lambda x: ag.ones_like(x, dtype=bool), np.ones((2, 3), bool)),
    "full_like": (lambda x: ag.full_like(x, -7), np.full((2, 3), -7, np.float32)),
    "eye": (lambda x: ag.eye(3), np.eye(3, dtype=np.float32)),
    "arange": (lambda x: ag.arange(10, 0, -3), np.array([10, 7, 4, 1], np.int64)),
    "linspace": (lambda x: ag.linspace(-1, 1, 5), np.linspace(-1, 1, 5, dtype=np.float32)),
    "meshgrid": (lambda x: ag.meshgrid(ag.arange(3), ag.arange(2))[0], np.meshgrid(np.arange(3), np.arange(2),
                                                                                  indexing="ij")[0]),
}
COVERS = set(CREATION)
X = np.arange(6, dtype=np.float32).reshape(2, 3)

# arguments: NumPy's (or torch's) result
EDGES = {
    "arange float step": (lambda: ag.arange(0, 1, 0.1), (np.arange(10) * 0.1).astype(np.float32)),
    "eye n m k": (lambda: ag.eye(2, 4, 1), np.eye(2, 4, 1, dtype=np.float32)),
    "eye k below": (lambda: ag.eye(3, 2, -1, dtype="int64"), np.eye(3, 2, -1, dtype=np.int64)),
    "eye k outside": (lambda: ag.eye(2, 2, 5), np.zeros((2, 2), np.float32)),
    "eye empty": (lambda: ag.eye(0), np.zeros((0, 0), np.float32)),
    "zeros empty": (lambda: ag.zeros((2, 0)), np.zeros((2, 0), np.float32)),
    "zeros 0-d": (lambda: ag.zeros(()), np.zeros((), np.float32)),
    "full int": (lambda: ag.full(3, 3), np.full(3, 3, np.int64)),
    "full bool": (lambda: ag.full((1, 2), True), np.ones((1, 2), bool)),
    "full nan float64": (lambda: ag.full((2,), float("nan"), dtype="float64"), np.full(2, np.nan)),
    "full inf": (lambda: ag.full((1,), float("-inf")), np.full(1, -np.inf, np.float32)),
    "arange int": (lambda: ag.arange(5), np.arange(5, dtype=np.int64)),
    "arange start stop": (lambda: ag.arange(-2, 3), np.arange(-2, 3, dtype=np.int64)),
    "arange empty": (lambda: ag.arange(3, 3), np.zeros(0, np.int64)),
    "arange float dtype": (lambda: ag.arange(1, 2.5, 0.5), np.array([1.0, 1.5, 2.0], np.float32)),
    "arange int dtype given": (lambda: ag.arange(4, dtype="float64"), np.arange(4.0)),
    "arange negative float step": (lambda: ag.arange(1.0, -1.0, -0.5), np.array([1.0, 0.5, 0.0, -0.5], np.float32)),
    "linspace torch float32": (lambda: ag.linspace(0, 1, 7), np.array(
        [0.0, 0.1666666716337204, 0.3333333432674408, 0.5, 0.6666666269302368, 0.8333333134651184, 1.0], np.float32)),
    "linspace one": (lambda: ag.linspace(-2, 3, 1), np.array([-2.0], np.float32)),
    "linspace none": (lambda: ag.linspace(3, 3, 0), np.zeros(0, np.float32)),
    "linspace float64 reversed": (lambda: ag.linspace(2, -2, 5, dtype="float64"), np.linspace(2, -2, 5)),
}


@pytest.mark.parametrize("name", CREATION)
def test_each_creation_op_gives_numpys_values_and_dtype(name, device):
    fn, want = CREATION[name]
    got = run(lambda x: fn(x) + ag.zeros_like(fn(x)), X, device=device)       # a graph op on it, so that it runs
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", EDGES)
def test_arguments_at_their_edges(name):
    fn, want = EDGES[name]
    got = run(lambda x: fn(), X)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_shapes_hold_symbolic_dimensions_bound_when_the_graph_runs():
    def f(x):
        b, t = x.shape
        return ag.zeros(b, 3), ag.full((t, "B"), 2), ag.ones_like(x, dtype="int32"), ag.eye(b), ag.eye(t, b, 1), \
            ag.arange(t), ag.arange(x, 0), ag.arange(x.shape[0], dtype="float32")
    graph = ag.trace(f, x=ag.Input(("B", "T")))
    for b, t in [(1, 4), (3, 2)]:
        zeros, full, ones, eye, eye_k, positions, rows, floats = graph.compile()(x=np.zeros((b, t), np.float32))
        assert zeros.shape == (b, 3) and zeros.dtype == np.float32 and not zeros.any()
        np.testing.assert_array_equal(full, np.full((t, b), 2))
        assert ones.dtype == np.int32 and ones.shape == (b, t) and ones.all()
        np.testing.assert_array_equal(eye, np.eye(b, dtype=np.float32))
        np.testing.assert_array_equal(eye_k, np.eye(t, b, 1, dtype=np.float32))
        assert positions.tolist() == list(range(t)) and rows.tolist() == list(range(b))
        assert floats.dtype == np.float32 and floats.tolist() == list(range(b))


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_is_numpys_for_two_and_three_axes_and_0_d(indexing, device):
    a, b, c = np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0]), np.array([6.0, 7.0, 8.0, 9.0])
    got = run(lambda a, b, c: ag.meshgrid(a, b, c, indexing=indexing), a, b, c, device=device)
    for g, w in zip(got, np.meshgrid(a, b, c, indexing=indexing)):
        np.testing.assert_array_equal(g, w)
    got = run(lambda a, s: ag.meshgrid([a, s], indexing=indexing), a, np.array(3.0), device=device)
    for g, w in zip(got, np.meshgrid(a, np.array([3.0]), indexing=indexing)):
        np.testing.assert_array_equal(g, w)
    assert run(lambda a: ag.meshgrid(a, indexing=indexing)[0], a, device=device).tolist() == a.tolist()


def test_gradients_flow_through_meshgrid_and_the_like_ops():
    """A meshgrid result is a broadcast: its gradient sums over the other axes; *_like read only the shape."""
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0])
    weights = np.arange(6.0).reshape(3, 2)
    def f(a, b):
        xs, ys = ag.meshgrid(a, b, indexing="xy")
        return ag.sum((xs * 2 + ys + ag.ones_like(a)[0] + ag.full_like(b, 3.0)[:, None]) * weights)
    _, (da, db) = ag.value_and_grad(f, argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(da, 2 * weights.sum(0))
    np.testing.assert_array_equal(db, weights.sum(1))


def test_arange_of_a_tensor_keeps_its_meaning_positions_along_an_axis():
    x = np.zeros((2, 5, 3))
    assert run(lambda x: ag.arange(x), x).tolist() == [0, 1, 2]
    assert run(lambda x: ag.arange(x, 1), x).tolist() == list(range(5))
    assert run(lambda x: ag.arange(x, axis=-3), x).tolist() == [0, 1]
    assert run(lambda x: ag.arange(x, axis=0), x).dtype == np.int64


@pytest.mark.parametrize("call, error, match", [
    (lambda x: ag.zeros(-1), ShapeError, "zeros's shape|full's shape"),
    (lambda x: ag.zeros((2, 1.5)), ShapeError, "shape"),
    (lambda x: ag.ones(2, dtype="complex64"), DTypeError, "bool, integers or floats"),
    (lambda x: ag.full((2,), 2.5, dtype="int32"), DTypeError, "2.5 is not a int32 value"),
    (lambda x: ag.full((2,), 300, dtype="uint8"), DTypeError, "300 is not a uint8 value"),
    (lambda x: ag.full((2,), float("nan"), dtype="int64"), DTypeError, "not a int64 value"),
    (lambda x: ag.full((2,), x), DTypeError, "fill_value must be a number"),
    (lambda x: ag.full((2,), "a"), DTypeError, "fill_value must be a number"),
    (lambda x: ag.eye(-1), ShapeError, "eye's shape"),
    (lambda x: ag.eye(2, k=1.5), ShapeError, "diagonal k must be an int"),
    (lambda x: ag.arange(0, 5, 0), ShapeError, "step must be non-zero"),
    (lambda x: ag.arange(5, 0, 1), ShapeError, "never gets there"),
    (lambda x: ag.arange(0, float("inf")), ShapeError, "end must be a finite number"),
    (lambda x: ag.arange(True), ShapeError, "arange takes tensors of at least one dimension"),
    (lambda x: ag.arange(2, 5, axis=0), TracingError, "takes no axis"),
    (lambda x: ag.arange(x, 0, axis=1), TracingError, "takes an axis only"),
    (lambda x: ag.arange(x, 2), ShapeError, "out of range"),
    (lambda x: ag.arange("T", 5), ShapeError, "start must be a finite number"),
    (lambda x: ag.linspace(0, 1, -1), ShapeError, "steps must be an int >= 0"),
    (lambda x: ag.linspace(0, 1, 2.0), ShapeError, "steps must be an int >= 0"),
    (lambda x: ag.linspace(0, float("nan"), 3), ShapeError, "end must be a finite number"),
    (lambda x: ag.meshgrid(x, indexing="ij"), ShapeError, "1-d or 0-d tensors"),
    (lambda x: ag.meshgrid(x[0], indexing="ab"), ShapeError, "'ij' or 'xy'"),
    (lambda x: ag.meshgrid(x[0], x[0].astype("int64")), DTypeError, "one dtype"),
    (lambda x: ag.meshgrid(), ShapeError, "at least one tensor"),
])
def test_bad_arguments_are_refused_while_tracing_naming_the_op(call, error, match):
    with pytest.raises(error, match=match):
        ag.trace(call, x=ag.Input((2, 3)))


def test_created_tensors_export_to_onnxruntime(matches):
    def f(x):
        return (x + ag.ones_like(x) + ag.eye(2, 3, 1), ag.arange(0.5, 2, 0.5) * x[0, 0], ag.linspace(0, 1, 3) + x[0],
                ag.zeros(x.shape[0], 2) + ag.full((1, 2), 3.0), *ag.meshgrid(x[0], x[1, :2], indexing="xy"))
    graph = ag.trace(f, x=ag.Input((2, 3)))
    matches(graph, dict(x=np.arange(6, dtype=np.float32).reshape(2, 3)))
