"""Ops that disagreed with PyTorch when a peer's op suite (tinygrad's test_ops, checked against torch) was
ported: values, dtypes, shapes and gradients, with PyTorch's numbers written out (torch 2.13) so that the
tests run without it. Small shapes throughout, so each kernel signature compiles once."""
import math
import re
from pathlib import Path

import numpy as np
import pytest

import attngraph as ag
from attngraph.core import passes
from tests.conftest import run

INF, NAN = math.inf, math.nan
THIS_FILE = re.escape(Path(__file__).name)   # where tracing errors point


def value_and_grads(fn, *arrays):
    """sum(fn(*arrays)) and its gradient with respect to every argument (float64)."""
    arrays = [np.asarray(a, np.float64) for a in arrays]
    return ag.value_and_grad(lambda *xs: ag.sum(fn(*xs)), argnums=tuple(range(len(arrays))))(*arrays)


# split: an int is the chunk size (torch.split), a list the sizes.

@pytest.mark.parametrize("length, arg, sizes", [
    (5, 2, [2, 2, 1]), (4, 2, [2, 2]), (6, 4, [4, 2]), (3, 5, [3]), (5, 1, [1] * 5),
    (5, [1, 4], [1, 4]), (5, [0, 5], [0, 5]), (0, 2, [0]),
])
def test_split_sizes_and_gradients_follow_torch(length, arg, sizes):
    x = np.arange(2.0 * length).reshape(2, length)
    parts = run(lambda x: ag.split(x, arg, axis=1), x)
    parts = parts if isinstance(parts, tuple) else (parts,)
    assert [p.shape[1] for p in parts] == sizes
    np.testing.assert_array_equal(np.concatenate(parts, axis=1), x)
    _, (g,) = value_and_grads(lambda x: ag.concat([p * (i + 1.0) for i, p in enumerate(ag.split(x, arg, 1))], 1)
                              if length else x, x)
    weights = np.repeat(np.arange(1.0, len(sizes) + 1), sizes) if length else np.zeros(0)
    np.testing.assert_array_equal(g, np.broadcast_to(weights, x.shape))


@pytest.mark.parametrize("x, arg", [(np.ones(5), 0), (np.ones(5), -2), (np.ones(5), [2, 2]), (np.ones(5), [-1, 6]),
                                    (np.array(1.0), 1)], ids=["zero", "negative", "short", "negative-size", "0-d"])
def test_split_rejects_bad_sizes(x, arg):
    with pytest.raises(ag.ShapeError):
        run(lambda x: ag.split(x, arg, axis=0), x)


@pytest.mark.parametrize("arg", [True, 2.0, [1.5, 3.5], [True, 4]])
def test_split_sizes_must_be_ints(arg):
    with pytest.raises(ag.ShapeError, match="split takes an int size or a list of int sizes"):
        run(lambda x: ag.split(x, arg, axis=0), np.ones(5))


@pytest.mark.parametrize("op", [lambda x: ag.arange(x, axis=2), lambda x: ag.moveaxis(x, 2, 0),
                                lambda x: ag.arange(ag.sum(x))], ids=["arange", "moveaxis", "arange-0-d"])
def test_axis_arguments_out_of_range_raise_instead_of_wrapping(op):
    with pytest.raises(ag.ShapeError):
        run(op, np.ones((2, 3)))


def test_moveaxis_takes_negative_axes():
    np.testing.assert_array_equal(run(lambda x: ag.moveaxis(x, -1, 0), X), np.moveaxis(X, -1, 0))


@pytest.mark.parametrize("source, destination", [
    (1, -1), (1, -2), (1, -3), (-1, 1), ((0, 1), (-1, -2)), ((0, 2), (3, 0)), ([3, 1], [0, -1]), ((1, 2), (2, 1)),
])
def test_moveaxis_normalizes_negative_destinations_and_tuples_as_numpy(source, destination):
    """np.moveaxis and torch.movedim: (2, 3, 4, 5) with axis 1 moved to -1 is (2, 4, 5, 3)."""
    x = np.arange(120.0).reshape(2, 3, 4, 5)
    np.testing.assert_array_equal(run(lambda x: ag.moveaxis(x, source, destination), x),
                                  np.moveaxis(x, source, destination))


@pytest.mark.parametrize("source, destination, message", [
    ((0, 1), (1,), "as many destinations"), ((0, 0), (1, 2), "repeated axis"), (1, 4, "out of range"),
])
def test_moveaxis_refuses_mismatched_or_repeated_axes(source, destination, message):
    with pytest.raises(ag.ShapeError, match=message):
        run(lambda x: ag.moveaxis(x, source, destination), np.ones((2, 3, 4, 5)))


@pytest.mark.parametrize("distance", [-2, 1.5, True])
def test_relative_distance_refuses_a_max_distance_that_is_not_an_int_at_least_0(distance):
    with pytest.raises(ag.ShapeError, match="max_distance must be an int >= 0"):
        run(lambda q: ag.relative_distance(q, q, max_distance=distance), np.ones((3, 2)))


# minimum: its own primitive, exact for every dtype; ties split the gradient as in torch.

@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8])
def test_integer_minimum_and_maximum_are_exact_at_the_limits(dtype):
    info = np.iinfo(dtype)
    a = np.array([info.min, 0, info.max, 5], dtype)
    b = np.array([0, info.min, info.min, info.max], dtype)
    low, high = run(lambda a, b: (ag.minimum(a, b), ag.maximum(a, b)), a, b)
    assert low.dtype == high.dtype == dtype
    np.testing.assert_array_equal(low, np.minimum(a, b))
    np.testing.assert_array_equal(high, np.maximum(a, b))


def test_boolean_minimum_and_maximum():
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    low, high = run(lambda a, b: (ag.minimum(a, b), ag.maximum(a, b)), a, b)
    assert low.dtype == high.dtype == np.bool_
    np.testing.assert_array_equal(low, a & b)
    np.testing.assert_array_equal(high, a | b)


@pytest.mark.parametrize("op, value, grad_a, grad_b", [
    (ag.minimum, [1, 2, 2, NAN], [0.5, 1, 0, 1], [0.5, 0, 1, 1]),
    (ag.maximum, [1, 3, 3, NAN], [0.5, 0, 1, 1], [0.5, 1, 0, 1]),
], ids=["minimum", "maximum"])
def test_minimum_and_maximum_gradients_follow_torch(op, value, grad_a, grad_b):
    """torch: ties split the gradient, a NaN operand passes it to both."""
    a, b = np.array([1.0, 2.0, 3.0, NAN]), np.array([1.0, 3.0, 2.0, 0.0])
    np.testing.assert_array_equal(run(op, a, b), value)
    _, (ga, gb) = value_and_grads(op, a, b)
    np.testing.assert_array_equal(ga, grad_a)
    np.testing.assert_array_equal(gb, grad_b)


def test_minimum_with_a_python_number_on_either_side():
    x = np.array([-1.0, 0.0, 2.0], np.float32)
    left, right = run(lambda x: (ag.minimum(x, 0.5), ag.minimum(0.5, x)), x)
    np.testing.assert_array_equal(left, [-1.0, 0.0, 0.5])
    np.testing.assert_array_equal(right, left)


# pow: torch's gradients where the formulas give 0·∞ or NaN (NumPy warns computing the branch not taken).
PASSED_OVER = pytest.mark.filterwarnings("ignore:(divide by zero|invalid value):RuntimeWarning")


@PASSED_OVER
@pytest.mark.parametrize("a, b, value, grad_a, grad_b", [
    (0.0, 2.0, 0.0, 0.0, 0.0),
    (0.0, 0.0, 1.0, 0.0, 0.0),
    (0.0, -1.0, INF, -INF, -INF),
    (0.0, 0.5, 0.0, INF, 0.0),
    (-2.0, 3.0, -8.0, 12.0, NAN),
    (2.0, 0.0, 1.0, 0.0, math.log(2)),
    (-2.0, 2.0, 4.0, -4.0, NAN),
    (3.0, 1.0, 3.0, 1.0, 3 * math.log(3)),
])
def test_pow_gradients_follow_torch(a, b, value, grad_a, grad_b):
    y, (ga, gb) = value_and_grads(ag.pow, a, b)
    np.testing.assert_allclose([y, ga, gb], [value, grad_a, grad_b], rtol=1e-12)


@pytest.mark.parametrize("fn, grad", [
    (lambda x: x ** 0, [0.0, 0.0, 0.0]),
    (lambda x: x ** 2, [0.0, -2.0, 4.0]),
    (lambda x: x ** 3, [0.0, 3.0, 12.0]),
    (lambda x: 0.0 ** x, [0.0, -INF, 0.0]),
    (lambda x: 2.0 ** x, [math.log(2), math.log(2) / 2, 4 * math.log(2)]),
], ids=["x**0", "x**2", "x**3", "0**x", "2**x"])
@PASSED_OVER
def test_pow_with_a_constant_side(fn, grad):
    _, (g,) = value_and_grads(fn, np.array([0.0, -1.0, 2.0]))
    np.testing.assert_allclose(g, grad, rtol=1e-12)


# Indexing: NumPy's and torch's basic indexing, and index arrays.

X = np.arange(12.0).reshape(3, 4)


@pytest.mark.parametrize("key", [
    0, -1, (1, -2), (-3, 0), slice(None, None, -1), slice(2, None, -2), (slice(None), slice(3, 0, -2)),
    (slice(None), slice(-1, None)), None, (None, 1), (Ellipsis, 1), (Ellipsis, None), (1, Ellipsis, None),
    (slice(1, 1),), (slice(5, 9),), [2, -1, 0], (slice(None), np.array([-1, 1])), (Ellipsis, np.array([[0], [-4]])),
    np.array([[0, 0], [2, -3]]), np.int64(2), (np.int32(-1), slice(None, None, 3)),
], ids=str)
def test_indexing_matches_numpy_values_shapes_and_gradients(key):
    want = X[key]
    got = run(lambda x: x[key], X)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    _, (g,) = value_and_grads(lambda x: x[key], X)
    expected = np.zeros_like(X)
    np.add.at(expected, key, 1.0)
    np.testing.assert_array_equal(g, expected)


def test_an_int_index_of_a_vector_is_a_scalar():
    x = np.arange(5.0, dtype=np.float32)
    first, last = run(lambda x: (x[0], x[-1]), x)
    assert first.shape == last.shape == () and (first, last) == (0.0, 4.0)


def test_negative_index_tensors_wrap_when_the_graph_runs():
    idx = np.array([[-1, 0], [2, -3]])
    np.testing.assert_array_equal(run(lambda x, i: x[i], X, idx), X[idx])
    np.testing.assert_array_equal(run(lambda x, i: ag.take(x, i, axis=1), X, idx), np.take(X, idx, axis=1))


@pytest.mark.parametrize("key, error", [
    (3, ag.ShapeError), ((0, -5), ag.ShapeError), ((0, 0, 0), ag.ShapeError), ((Ellipsis, Ellipsis), ag.ShapeError),
    (np.array([3]), ag.ShapeError), ((slice(None), np.array([-5])), ag.ShapeError),
    ((np.array([0]), np.array([5])), ag.ShapeError), ((0, np.array([-6])), ag.ShapeError),
    (np.array([True, False, True]), ag.DTypeError), (np.array([0.0]), ag.DTypeError),
], ids=["int", "negative-int", "too-many", "two-ellipses", "array", "negative-array", "two-arrays", "int-and-array",
        "bool-mask", "float-array"])
def test_bad_indices_raise_while_tracing(key, error):
    with pytest.raises(error):
        ag.trace(lambda x: x[key], x=X)


@pytest.mark.parametrize("idx", [np.array([3]), np.array([-4])], ids=["past-the-end", "before-the-start"])
def test_out_of_range_index_tensors_raise_when_the_graph_runs(idx):
    with pytest.raises(ag.BindingError, match="out of range"):
        run(lambda x, i: x[i], X, idx)


# CSE: a 0-d and a 1-d constant holding the same value stay two constants.

def test_cse_keeps_constants_of_different_shapes_apart():
    graph = ag.trace(lambda s, v: (s * np.float64(2.0) + ag.sum(v * np.array([2.0])), v * np.array([2.0])),
                     s=ag.Input((), "float64"), v=ag.Input((1,), "float64")).grad(["s", "v"])
    optimized = passes.cse(graph)
    constants = [n for n in optimized.nodes if n.op == "constant" and n.value.size == 1 and n.value.flat[0] == 2.0]
    assert sorted(n.shape for n in constants) == [(), (1,)]
    value, product, grad_s, grad_v = optimized.compile()(s=np.array(3.0), v=np.array([5.0]))
    assert (value, product.shape, grad_s.shape, grad_v.shape) == (16.0, (1,), (), (1,))
    assert (grad_s, grad_v[0]) == (2.0, 2.0)


# Reductions over every dtype and every way of naming axes.

DTYPES = [np.float32, np.int32, np.int64, np.uint8, np.bool_]
AXES = [None, 0, -1, (0, 2), (-1, 0), (1,)]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_sum_and_max_over_every_dtype_and_axis(dtype, axis, keepdims):
    x = (np.arange(24).reshape(2, 3, 4) * 7 % 5).astype(dtype)
    total, largest = run(lambda x: (ag.sum(x, axis, keepdims), ag.max(x, axis, keepdims)), x)
    want = np.sum(x, axis=axis, keepdims=keepdims)
    assert total.dtype == (dtype if np.dtype(dtype).kind == "f" else np.int64)      # torch.sum's dtypes
    np.testing.assert_array_equal(total, want)
    assert largest.dtype == dtype
    np.testing.assert_array_equal(largest, np.max(x, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("dtype", [np.int32, np.bool_])
def test_mean_of_integers_asks_for_a_cast(dtype):
    with pytest.raises(ag.DTypeError, match="astype"):
        ag.trace(lambda x: ag.mean(x), x=np.ones(3, dtype))


@pytest.mark.parametrize("axis, keepdims, grad", [
    (1, False, [[0, 0.5, 0.5], [0.5, 0.5, 0]]),
    (None, False, [[0, 0.5, 0.5], [0, 0, 0]]),
    (0, True, [[0, 1, 1], [1, 0, 0]]),
    (-1, True, [[0, 0.5, 0.5], [0.5, 0.5, 0]]),
], ids=str)
def test_max_gradient_shares_ties_as_torch_amax(axis, keepdims, grad):
    _, (g,) = value_and_grads(lambda x: ag.max(x, axis, keepdims), [[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    np.testing.assert_array_equal(g, grad)


def test_max_over_an_empty_axis_has_no_value():
    with pytest.raises(ag.ShapeError, match="size 0"):
        ag.trace(lambda x: ag.max(x, 1), x=np.ones((2, 0)))


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_sums_and_means_of_empty_tensors():
    x = np.ones((2, 0), np.float32)
    total, rows, mean = run(lambda x: (ag.sum(x), ag.sum(x, 1), ag.mean(x)), x)
    assert total == 0 and np.isnan(mean) and rows.shape == (2,) and not rows.any()


# 0-d tensors: PyTorch lets axis 0 and -1 name a scalar's (missing) axis.

@pytest.mark.parametrize("fn, value, grad", [
    (lambda x: ag.sum(x, 0), 2.5, 1.0),
    (lambda x: ag.sum(x, -1, keepdims=True), 2.5, 1.0),
    (lambda x: ag.mean(x, 0), 2.5, 1.0),
    (lambda x: ag.max(x, (-1,)), 2.5, 1.0),
    (lambda x: ag.softmax(x, 0), 1.0, 0.0),
    (lambda x: ag.softmax(x, -1), 1.0, 0.0),
    (lambda x: ag.log_softmax(x), 0.0, 0.0),
    (lambda x: ag.gelu(x), 2.5 * 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * (2.5 + 0.044715 * 2.5 ** 3))), None),
    (lambda x: ag.expand_dims(x, 0), 2.5, 1.0),
    (lambda x: x[None, ...], 2.5, 1.0),
    (lambda x: x.T, 2.5, 1.0),
], ids=["sum0", "sum-1-keepdims", "mean0", "max-1", "softmax0", "softmax-1", "log_softmax", "gelu", "expand_dims",
        "newaxis", "T"])
def test_scalar_ops_follow_torch(fn, value, grad):
    y, (g,) = value_and_grads(fn, np.array(2.5))
    assert g.shape == ()
    np.testing.assert_allclose(y, value, rtol=1e-12)
    if grad is not None:
        assert g == grad


@pytest.mark.parametrize("fn", [
    lambda x: ag.sum(x, 1), lambda x: ag.softmax(x, 1), lambda x: ag.concat([x, x]), lambda x: x[0],
    lambda x: ag.take(x, np.array([0])), lambda x: ag.expand_dims(x, 2),
], ids=["sum1", "softmax1", "concat", "int-index", "take", "expand_dims2"])
def test_scalar_ops_torch_refuses_raise_shape_errors(fn):
    with pytest.raises(ag.ShapeError):
        ag.trace(fn, x=np.array(1.0))


@pytest.mark.parametrize("fn", [
    lambda x: ag.transpose(x, (0, 5)), lambda x: ag.concat([x, x], axis=2), lambda x: ag.swapaxes(x, 0, -3),
    lambda x: ag.sum(x, (0, -2)), lambda x: ag.split(x, 1, axis=2), lambda x: ag.softmax(x, axis=-3),
], ids=["transpose", "concat", "swapaxes", "repeated", "split", "softmax"])
def test_axes_out_of_range_raise_instead_of_wrapping(fn):
    with pytest.raises(ag.ShapeError, match="out of range|repeated"):
        ag.trace(fn, x=X)


# Integer and boolean arithmetic keep their dtype (and wrap around in it), as in NumPy and torch.

@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8])
def test_integer_arithmetic_keeps_its_dtype(dtype):
    info = np.iinfo(dtype)
    a, b = np.array([info.max, 3], dtype), np.array([1, 2], dtype)
    added, product, negated = run(lambda a, b: (a + b, a * b, -b), a, b)
    assert added.dtype == product.dtype == negated.dtype == dtype
    np.testing.assert_array_equal(added, [info.min, 5])
    np.testing.assert_array_equal(product, a * b)
    np.testing.assert_array_equal(negated, -b)


def test_boolean_add_and_mul_are_or_and_and():
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    added, product = run(lambda a, b: (a + b, a * b), a, b)
    assert added.dtype == product.dtype == np.bool_
    np.testing.assert_array_equal(added, a | b)
    np.testing.assert_array_equal(product, a & b)


@pytest.mark.parametrize("fn", [lambda a: -a, lambda a: a - a], ids=["neg", "sub"])
def test_boolean_negation_and_subtraction_name_the_logical_op(fn):
    with pytest.raises(ag.DTypeError, match="logical_not|not_equal"):
        ag.trace(fn, a=np.array([True]))


# Broadcasting: values and gradient shapes, with 0-d and empty operands.

@pytest.mark.parametrize("a_shape, b_shape", [
    ((), ()), ((1,), ()), ((), (0,)), ((0, 3), (1, 3)), ((3, 1), (1, 4)), ((2, 1, 3), (4, 1)), ((1, 1), (2, 0)),
    ((2, 1, 0), (3, 1)),
], ids=str)
def test_broadcast_gradients_have_their_inputs_shapes(a_shape, b_shape):
    a, b = np.full(a_shape, 2.0), np.full(b_shape, 3.0)
    y, (ga, gb) = value_and_grads(ag.mul, a, b)
    n = np.broadcast_shapes(a_shape, b_shape)
    assert y == 6.0 * math.prod(n) and ga.shape == a_shape and gb.shape == b_shape
    np.testing.assert_array_equal(ga, np.full(a_shape, 3.0 * math.prod(n) / max(math.prod(a_shape), 1)))
    np.testing.assert_array_equal(gb, np.full(b_shape, 2.0 * math.prod(n) / max(math.prod(b_shape), 1)))


def test_shapes_that_do_not_broadcast_raise():
    with pytest.raises(ag.ShapeError, match="broadcast"):
        ag.trace(ag.add, a=np.ones((2, 0)), b=np.ones((3,)))


# Integers that do not fit: a feed refused when the graph runs, a Python number while tracing (torch wraps both).

@pytest.mark.parametrize("dtype, value, bad", [
    ("int32", [2 ** 32 + 1, 0], 2 ** 32 + 1), ("uint8", [-1, 0], -1), ("uint8", [256, 0], 256),
    ("int32", np.array([2 ** 40, 1], np.uint64), 2 ** 40),
])
def test_an_integer_feed_that_does_not_fit_the_input_s_dtype_is_a_binding_error(dtype, value, bad):
    graph = ag.trace(lambda t: t + 0, t=ag.Input((2,), dtype))
    with pytest.raises(ag.BindingError, match=f"input 't' is {dtype}, whose range .* does not hold the value {bad}"):
        graph.compile()(t=value)
    assert graph.compile()(t=np.array([-1 if dtype == "int32" else 255, 7])).dtype == dtype     # values that fit


@pytest.mark.parametrize("build, op", [(lambda x: x + 1000, "add"), (lambda x: ag.where(x > 0, x, -129), "where"),
                                       (lambda x: ag.clip(x, hi=300), "clip")])
def test_a_python_int_that_does_not_fit_the_tensor_s_dtype_names_the_op_and_line(build, op):
    with pytest.raises(ag.DTypeError, match=rf"{op}: the Python int -?\d+ does not fit the int8 tensor .*{THIS_FILE}:\d+"):
        ag.trace(build, x=ag.Input((3,), "int8"))


def test_a_tensor_kept_from_another_trace_is_a_tracing_error_at_the_line_using_it():
    kept = []

    def first(x):
        kept.append(x * 2)
        return x + 1
    ag.trace(first, x=ag.Input((3,)))
    for second in (lambda x: x + kept[0], lambda x: ag.concat([ag.exp(x), x * 3, kept[0]])):
        with pytest.raises(ag.TracingError, match=rf"at .*{THIS_FILE}:\d+ takes node n\d+ \(mul.*another trace"):
            ag.trace(second, x=ag.Input((3,)))
