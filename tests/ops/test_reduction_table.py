"""The reductions and scans of issue 26 in one table: each op along an axis, its float64 NumPy reference, and
whether it has a gradient. Every row runs on every device (the CUDA simulator with a few elements): values in
float32 and float64 along a positive and a negative axis, at zeros, ties, ±inf and NaN, 0-d and size-0 axes,
integer and bool inputs where the op takes them, gradients against central differences of the reference and
PyTorch 2.13's gradients where it makes a choice (zeros in a product, ties, −inf, a zero vector); gradcheck in
float64 and ONNX export on the CPU. ``isclose`` has its own table of pairs. The primitives behind them are ``prod``,
``cumprod``, ``logcumsumexp`` and ``cumarg`` (the index of cummax and cummin); the rest are composed."""
import math

import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import DTypeError, ExportError, ShapeError
from attngraph.inspect.gradcheck import gradcheck
from tests.conftest import run, value_and_grad_on
from tests.export.conftest import matches, run_onnx  # noqa: F401  (fixtures)

INF, NAN = math.inf, math.nan


def running_index(x, axis, largest):
    """torch.cummax's (cummin's) indices: the latest index of the running extremum, a NaN winning from where it is."""
    x = np.moveaxis(x, axis, -1)
    out = np.zeros(x.shape, np.int64)
    for row in np.ndindex(x.shape[:-1]):
        at = 0
        for j, v in enumerate(x[row]):
            best = x[row][at]
            if j == 0 or v != v or (best == best and (v >= best if largest else v <= best)):
                at = j
            out[row + (j,)] = at
    return np.moveaxis(out, -1, axis)


def softmin(x, axis):
    e = np.exp(-x - np.max(-x, axis, keepdims=True, initial=-INF))
    return e / np.sum(e, axis, keepdims=True)


def normalize(x, axis, p):
    norm = np.max(np.abs(x), axis, keepdims=True) if p == INF \
        else np.sum(np.abs(x) ** p, axis, keepdims=True) ** (1 / p)
    return x / np.maximum(norm, 1e-12)


# name: (the op along an axis, its float64 NumPy reference, whether it has a gradient)
REDUCTIONS = {
    "prod": (ag.prod, np.prod, True),
    "any": (ag.any, np.any, False),
    "all": (ag.all, np.all, False),
    "cumsum": (ag.cumsum, np.cumsum, True),
    "cumprod": (ag.cumprod, np.cumprod, True),
    "cummax": (lambda x, a: ag.cummax(x, a)[0], np.maximum.accumulate, True),
    "cummin": (lambda x, a: ag.cummin(x, a)[0], np.minimum.accumulate, True),
    "cummax_indices": (lambda x, a: ag.cummax(x, a)[1], lambda x, a: running_index(x, a, True), False),
    "cummin_indices": (lambda x, a: ag.cummin(x, a)[1], lambda x, a: running_index(x, a, False), False),
    "logcumsumexp": (ag.logcumsumexp, np.logaddexp.accumulate, True),
    "softmin": (ag.softmin, softmin, True),
    "normalize": (lambda x, a: ag.normalize(x, axis=a), lambda x, a: normalize(x, a, 2), True),
    "normalize_p1": (lambda x, a: ag.normalize(x, 1, a), lambda x, a: normalize(x, a, 1), True),
    "normalize_p3": (lambda x, a: ag.normalize(x, 3.0, a), lambda x, a: normalize(x, a, 3), True),
    "normalize_inf": (lambda x, a: ag.normalize(x, INF, a), lambda x, a: normalize(x, a, INF), True),
}
INTEGER_INPUTS = ("prod", "any", "all", "cumsum", "cumprod", "cummax", "cummin", "cummax_indices", "cummin_indices")
COVERS = {name.split("_")[0] for name in REDUCTIONS} | {"isclose"}

SMOOTH = np.array([[[0.7, -1.3, 1.9, 0.4], [-0.6, 1.1, -1.7, 1.4], [1.2, 0.3, -0.9, -1.5]],
                   [[-1.1, 0.8, 1.6, -0.2], [0.5, -1.9, 1.3, 0.9], [-0.4, 1.7, 0.6, -1.2]]])
EDGES = np.array([[1.0, 3.0, 3.0, 2.0], [0.0, 2.0, 0.0, 5.0], [-INF, -INF, 0.0, 1.0], [1.0, INF, 2.0, NAN],
                  [NAN, 1.0, NAN, -INF], [-0.0, 0.0, -2.0, -2.0]])
# PyTorch 2.13's gradient of sum(op(x) · weights) along the last axis, float64
EDGE_GRADIENTS = {
    "prod": ([[2.0, 0.0, 3.0], [0.0, 0.0, 4.0], [2.0, 3.0, 4.0]], [1.0, 1.0, 1.0],
             [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0], [12.0, 8.0, 6.0]]),
    "cumprod": ([[2.0, 0.0, 3.0, 5.0], [0.0, 0.0, 4.0, 1.0], [2.0, 3.0, 0.0, 4.0], [2.0, 3.0, 4.0, 0.0]],
                [1.0, 2.0, 3.0, 4.0], [[1.0, 142.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [7.0, 4.0, 114.0, 0.0],
                                       [43.0, 28.0, 18.0, 96.0]]),
    "cummax": ([[1.0, 3.0, 3.0, 2.0]], [1.0, 2.0, 3.0, 4.0], [[1.0, 2.0, 7.0, 0.0]]),
    "logcumsumexp": ([[-INF, -INF, 0.0, 1000.0, 1000.5]], [1.0, -2.0, 3.0, 0.5, 1.0],
                     [[NAN, NAN, 3.0000000000000004, 0.877540668798223, 0.622459331201858]]),
    "normalize": ([[3.0, 4.0], [0.0, 0.0]], [1.0, 2.0], [[-0.064, 0.048], [1e12, 2e12]]),
    "normalize_p1": ([[0.0, 2.0, -1.0], [0.0, 0.0, 0.0]], [1.0, 2.0, 3.0],
                     [[1 / 3, 5 / 9, 10 / 9], [1e12, 2e12, 3e12]]),
    "normalize_inf": ([[3.0, -4.0, 1.0]], [1.0, 2.0, 3.0], [[0.25, 0.375, 0.75]]),
}


def reference(name, x, axis, dtype):
    with np.errstate(all="ignore"):
        want = np.asarray(REDUCTIONS[name][1](x.astype(np.float64), axis))
    return want.astype(dtype) if want.dtype.kind == "f" else want


def assert_matches(got, want, dtype):
    assert got.shape == want.shape and got.dtype == want.dtype
    tolerance = {"rtol": 1e-12, "atol": 1e-300} if dtype == np.float64 else {"rtol": 1e-5, "atol": 1e-37}
    np.testing.assert_allclose(got, want, **tolerance)


def weights_for(name, x, axis):
    """Distinct weights for each element of the op's result on x."""
    shape = reference(name, x, axis, np.float64).shape
    return np.linspace(-1.0, 1.5, math.prod(shape)).reshape(shape)


def central_differences(name, x, axis, weights, h=1e-6):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = h
        grad[i] = np.sum((reference(name, x + step, axis, np.float64)
                          - reference(name, x - step, axis, np.float64)) * weights) / (2 * h)
    return grad


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator's NumPy scalars warn at ±inf and NaN
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", REDUCTIONS)
def test_values_along_positive_and_negative_axes_at_zeros_ties_infinities_and_nan(name, dtype, device):
    fn = REDUCTIONS[name][0]
    for x, axis in [(SMOOTH, 1), (SMOOTH, -1), (EDGES, -1), (EDGES, 0)]:
        want = reference(name, x.astype(dtype), axis, dtype)
        assert_matches(run(lambda x: fn(x, axis), x.astype(dtype), device=device), want, dtype)


@pytest.mark.parametrize("name", [n for n, (_, _, grad) in REDUCTIONS.items() if grad])
def test_gradients_at_smooth_points_are_the_references_slopes(name, device):
    fn = REDUCTIONS[name][0]
    axis = 1
    weights = weights_for(name, SMOOTH, axis)
    _, (grad,) = value_and_grad_on(device, lambda x: ag.sum(fn(x, axis) * weights), SMOOTH)
    np.testing.assert_allclose(grad, central_differences(name, SMOOTH, axis, weights), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", [n for n, (_, _, grad) in REDUCTIONS.items() if grad])
def test_gradients_pass_gradcheck_in_float64(name):
    fn = REDUCTIONS[name][0]
    weights = weights_for(name, SMOOTH[0], -1)
    gradcheck(lambda x: ag.sum(fn(x, -1) * weights), SMOOTH[0]).raise_if_failed()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator's NumPy scalars warn at ±inf and NaN
@pytest.mark.parametrize("name", EDGE_GRADIENTS)
def test_gradients_at_zeros_ties_and_minus_inf_are_pytorchs(name, device):
    x, weights, want = (np.array(a) for a in EDGE_GRADIENTS[name])
    _, (grad,) = value_and_grad_on(device, lambda x: ag.sum(REDUCTIONS[name][0](x, -1) * weights), x)
    np.testing.assert_allclose(grad, want, rtol=1e-12)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_0_d_and_size_0_axes(name, device):
    fn = REDUCTIONS[name][0]
    empty = np.zeros((2, 0))
    if name != "normalize_inf":          # the largest |x| of no element: no value, as ag.max
        assert_matches(run(lambda x: fn(x, 1), empty, device=device), reference(name, empty, 1, np.float64),
                       np.float64)
    if "normalize" not in name:         # torch.nn.functional.normalize of a 0-d tensor has no axis 1
        got = run(lambda x: fn(x, 0), np.array(-0.5), device=device)
        assert isinstance(got, np.ndarray)
        assert_matches(got, reference(name, np.array([-0.5]), 0, np.float64).reshape(()), np.float64)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int64, np.bool_])
@pytest.mark.parametrize("name", INTEGER_INPUTS)
def test_integer_and_bool_inputs_as_torch(name, dtype, device):
    """prod, cumsum and cumprod give int64 (as torch), any and all bool, the running extrema keep the dtype."""
    x = np.array([[3, 0, 3, 7], [1, 2, 2, 1]]).astype(dtype)
    got = run(lambda x: REDUCTIONS[name][0](x, -1), x, device=device)
    with np.errstate(over="ignore"):
        want = np.asarray(REDUCTIONS[name][1](x.astype(np.int64), -1))
    want = want.astype({"prod": np.int64, "cumsum": np.int64, "cumprod": np.int64, "cummax": dtype, "cummin": dtype}.get(name, want.dtype))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_products_of_integers_are_int64_and_over_floats_hold_zeros_infinities_and_nan_as_numpy():
    assert run(lambda x: ag.prod(x), np.array([2**20, 2**20, 4], np.int32)).tolist() == 2**42
    got = run(lambda x: (ag.prod(x, 1, keepdims=True), ag.prod(x, (0, 1))), np.array([[0.0, INF], [2.0, -3.0]]))
    np.testing.assert_array_equal(got[0], [[NAN], [-6.0]])
    assert np.isnan(got[1])


def test_cummax_and_cummin_take_the_latest_tie_and_stay_at_nan_as_torch(device):
    x = np.array([1.0, 3.0, 3.0, 2.0, NAN, 5.0, NAN])
    values, indices = run(lambda x: ag.cummax(x, 0), x, device=device)
    np.testing.assert_array_equal(values, [1, 3, 3, 3, NAN, NAN, NAN])
    assert indices.tolist() == [0, 1, 2, 2, 4, 4, 6]
    values, indices = run(lambda x: ag.cummin(x, 0), np.array([3.0, 1.0, 1.0, 2.0, NAN, 0.0]), device=device)
    np.testing.assert_array_equal(values, [3, 1, 1, 1, NAN, NAN])
    assert indices.tolist() == [0, 1, 2, 2, 4, 4]


def test_logcumsumexp_neither_overflows_nor_loses_small_terms(device):
    """torch.logcumsumexp: [-1000, 0] in float32 is [-1000, 0]; inf and -inf mix to inf; a NaN stays."""
    got = run(lambda x: ag.logcumsumexp(x, 0), np.array([-1000.0, 0.0, 1e4, 1e4], np.float32), device=device)
    np.testing.assert_allclose(got, [-1000.0, 0.0, 1e4, 1e4 + math.log(2)], rtol=1e-7)
    np.testing.assert_array_equal(run(lambda x: ag.logcumsumexp(x, 0), np.array([INF, -INF, INF, NAN, 1.0]),
                                      device=device), [INF, INF, INF, NAN, NAN])


def test_any_and_all_count_nan_as_true_and_keep_dims():
    x = np.array([[0.0, NAN], [0.0, -0.0]])
    assert run(lambda x: ag.any(x, 1, keepdims=True), x).tolist() == [[True], [False]]
    assert run(lambda x: ag.all(x, 0), np.array([[1.0, NAN], [2.0, 0.0]])).tolist() == [True, False]
    assert run(lambda x: (ag.any(x), ag.all(x)), np.zeros((0, 3))) == (False, True)


# isclose(a, b, **kwargs) and torch.isclose's result
ISCLOSE = [
    ([INF, INF, -INF, NAN, 1.0, 1.0, 1e-9], [INF, -INF, -INF, NAN, INF, 1.0 + 1e-6, 0.0], {},
     [True, False, True, False, False, True, True]),
    ([NAN, 1.0], [NAN, NAN], {"equal_nan": True}, [True, False]),
    ([1.0, 1.1, 1.2], [1.0, 1.0, 1.0], {"rtol": 0.0, "atol": 0.15}, [True, True, False]),
    ([100, 2], [101, 2], {"rtol": 0.01}, [True, True]),
    ([1, 2, 3], [1, 3, 4], {}, [True, False, False]),
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator's NumPy scalars warn at ±inf and NaN
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", range(len(ISCLOSE)))
def test_isclose_is_torchs_and_broadcasts(case, dtype, device):
    a, b, kwargs, want = ISCLOSE[case]
    a, b = np.array(a), np.array(b)
    if a.dtype.kind == "f":
        a, b = a.astype(dtype), b.astype(dtype)
    got = run(lambda a, b: ag.isclose(a, b, **kwargs), a, b, device=device)
    assert got.dtype == np.bool_ and got.tolist() == want
    grid = run(lambda a, b: ag.isclose(a[:, None], b, **kwargs), a, b, device=device)
    assert grid.shape == (len(a), len(b)) and np.diagonal(grid).tolist() == want


def test_isclose_of_0_d_empty_bool_and_python_numbers():
    assert run(lambda a: ag.isclose(a, 1.0 + 1e-9), np.array(1.0)).tolist() is True
    assert run(lambda a: ag.isclose(a, a), np.zeros((0, 2))).shape == (0, 2)
    assert run(lambda a, b: ag.isclose(a, b), np.array([True, False]), np.array([True, True])).tolist() == [True, False]


def test_symbolic_lengths_take_any_size(rng):
    graph = ag.trace(lambda x: (ag.prod(x, 1), ag.cumprod(x, 0), ag.logcumsumexp(x, 1), ag.cummax(x, 0)[1],
                                ag.normalize(x)), x=ag.Input(("B", "T")))
    for b, t in [(1, 3), (3, 2)]:
        x = rng.standard_normal((b, t)).astype(np.float32)
        prod, cumprod, lcse, at, unit = graph.compile()(x=x)
        np.testing.assert_allclose(prod, np.prod(x, 1), rtol=1e-6)
        np.testing.assert_allclose(cumprod, np.cumprod(x, 0), rtol=1e-6)
        np.testing.assert_allclose(lcse, np.logaddexp.accumulate(x, 1), rtol=1e-6)
        assert at.tolist() == running_index(x, 0, True).tolist()
        np.testing.assert_allclose(unit, x / np.linalg.norm(x, axis=1, keepdims=True), rtol=1e-6)


@pytest.mark.parametrize("call, error, match", [
    (lambda x: ag.prod(x, 2), ShapeError, "out of range"),
    (lambda x: ag.cumprod(x, -3), ShapeError, "out of range"),
    (lambda x: ag.cummax(x, 1.0), ShapeError, "out of range"),
    (lambda x: ag.logcumsumexp(x.astype("int32"), 0), DTypeError, "logcumsumexp of a int32"),
    (lambda x: ag.any(x, (0, 0)), ShapeError, "repeated axis"),
    (lambda x: ag.normalize(x, p=0), ShapeError, "normalize's p must be a number > 0"),
    (lambda x: ag.normalize(x, p="fro"), ShapeError, "normalize's p"),
    (lambda x: ag.normalize(x, eps=-1.0), ShapeError, "eps must be >= 0"),
    (lambda x: ag.normalize(x, eps=NAN), ShapeError, "eps must be a finite number"),
    (lambda x: ag.normalize(x.astype("int64")), DTypeError, "normalize of a int64"),
    (lambda x: ag.isclose(x, x, rtol=-1e-3), ShapeError, "rtol and atol must be >= 0"),
    (lambda x: ag.isclose(x, x, atol="1"), ShapeError, "atol must be a finite number"),
    (lambda x: ag.isclose(x, x.astype("int64")), DTypeError, "one dtype"),
    (lambda x: ag.softmin(x, 2), ShapeError, "out of range"),
])
def test_bad_arguments_are_refused_while_tracing_naming_the_op(call, error, match):
    with pytest.raises(error, match=match):
        ag.trace(call, x=ag.Input((2, 3)))


def test_composed_ops_and_prod_export_to_onnxruntime(matches):
    def f(x, flags):
        return (ag.prod(x, 1), ag.prod(flags, -1), ag.any(x, 0), ag.all(flags, 1, keepdims=True), ag.softmin(x),
                ag.normalize(x), ag.normalize(x, INF, 0), ag.isclose(x, ag.sum(x, 1, keepdims=True), atol=0.5))
    graph = ag.trace(f, x=ag.Input(("B", 3)), flags=ag.Input(("B", 2), bool))
    rng = np.random.default_rng(0)
    matches(graph, *[dict(x=rng.standard_normal((b, 3)).astype(np.float32), flags=rng.random((b, 2)) < 0.5)
                     for b in (1, 4)])


@pytest.mark.parametrize("op", ["cumprod", "logcumsumexp", "cummax"])
def test_running_ops_without_an_onnx_form_are_refused_with_the_reason(op):
    from attngraph.export import to_onnx
    pytest.importorskip("onnx")
    graph = ag.trace(lambda x: getattr(ag, op)(x, 0), x=ag.Input((3,)))
    with pytest.raises(ExportError, match="ONNX has no running"):
        to_onnx(graph)


def test_the_reductions_are_tensor_methods_too():
    x = np.array([[2.0, 0.0, 3.0], [1.0, -2.0, 4.0]])
    prod, anything, everything, sums, products, top, at = run(
        lambda x: (x.prod(1), x.any(), x.all(0), x.cumsum(1), x.cumprod(0), *x.cummin(1)), x)
    np.testing.assert_array_equal(prod, [0.0, -8.0])
    assert anything.tolist() is True and everything.tolist() == [True, False, True]
    np.testing.assert_array_equal(sums, np.cumsum(x, 1))
    np.testing.assert_array_equal(products, np.cumprod(x, 0))
    np.testing.assert_array_equal(top, np.minimum.accumulate(x, 1))
    assert at.tolist() == [[0, 1, 1], [0, 1, 1]]
