"""The functions older than issue 26's tables that no other table covers (orderings, scans, reductions, lookups,
shapes), at their edges, in one table run on every device (tiny shapes: the CUDA simulator): values against NumPy
in float32 and float64 with the result's dtype (int64 indices), integer inputs where the function takes them (the
values and dtype NumPy gives), gradients against central differences of the NumPy reference in float64 on every
device and by gradcheck on the CPU; 0-d tensors, size-0 axes and negative axes where the function takes them. NaN
and ±inf rows give PyTorch 2.13's values and gradients, written in. The per-op files (test_sort.py, test_scan.py,
test_min_logsumexp.py, test_composed.py...) test the kernels, the errors of bad arguments and the ONNX forms."""
import math

import numpy as np
import pytest

import attngraph as ag
from attngraph.inspect import gradcheck
from tests.conftest import run
from tests.ops.test_core_table import central_differences

NAN, INF = math.nan, math.inf
rng = np.random.default_rng(2026)


def normal(*shape):
    return rng.standard_normal(shape)


def indices(values, dtype=np.int64):
    return np.array(values, dtype)


def np_sort(x, axis=-1, descending=False):
    order = np.argsort(-x if descending else x, axis, kind="stable")
    return np.take_along_axis(x, order, axis), order


def np_topk(x, k, axis=-1, largest=True):
    """torch.topk's values and indices, ties in index order."""
    values, order = np_sort(x, axis, largest)
    return np.take(values, range(k), axis), np.take(order, range(k), axis)


def np_logsumexp(x, axis=None, keepdims=False):
    top = np.max(x, axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - top), axis, keepdims=True)) + top
    return out if keepdims else np.squeeze(out, axis)


def np_embedding(table, i):
    return table[i]


def np_one_hot(t, classes):
    return np.eye(classes, dtype=np.int64)[t]


def np_relative_distance(q, k, max_distance):
    offset = np.arange(k.shape[-2])[None, :] - np.arange(q.shape[-2])[:, None]
    return np.clip(offset, -max_distance, max_distance) + max_distance


# "function/case": (the call, its NumPy reference, its inputs: floats in float64, index arrays in int64)
ROWS = {
    "argmax/negative_axis_keepdims": (lambda x: ag.argmax(x, -2, keepdims=True),
                                      lambda x: np.argmax(x, -2, keepdims=True), [normal(2, 3, 2)]),
    "argmax/flattened": (ag.argmax, np.argmax, [normal(3, 4)]),
    "argmax/0d": (ag.argmax, np.argmax, [np.array(0.6)]),
    "argmax/size_0_batch": (lambda x: ag.argmax(x, -1), lambda x: np.argmax(x, -1), [normal(0, 3)]),
    "argmin/negative_axis": (lambda x: ag.argmin(x, -1), lambda x: np.argmin(x, -1), [normal(2, 3, 4)]),
    "argmin/flattened_keepdims": (lambda x: ag.argmin(x, keepdims=True), lambda x: np.argmin(x, keepdims=True),
                                  [normal(3, 2)]),
    "argmin/size_0_batch": (lambda x: ag.argmin(x, 0), lambda x: np.argmin(x, 0), [normal(3, 0)]),
    "sort/negative_axis": (lambda x: ag.sort(x, -2)[0], lambda x: np_sort(x, -2)[0], [normal(2, 3, 2)]),
    "sort/descending_axis_0": (lambda x: ag.sort(x, 0, descending=True)[0], lambda x: np_sort(x, 0, True)[0],
                               [normal(3, 2)]),
    "sort/indices": (lambda x: ag.sort(x, -1, descending=True)[1], lambda x: np_sort(x, -1, True)[1],
                     [normal(2, 4)]),
    "sort/0d": (lambda x: ag.sort(x)[0], np.copy, [np.array(-1.2)]),
    "sort/size_0_axis": (lambda x: ag.sort(x)[0], lambda x: np_sort(x)[0], [normal(2, 0)]),
    "topk/smallest_negative_axis": (lambda x: ag.topk(x, 2, -2, largest=False)[0],
                                    lambda x: np_topk(x, 2, -2, largest=False)[0], [normal(3, 4, 2)]),
    "topk/indices": (lambda x: ag.topk(x, 3)[1], lambda x: np_topk(x, 3)[1], [normal(2, 5)]),
    "topk/k_0": (lambda x: ag.topk(x, 0)[0], lambda x: np_topk(x, 0)[0], [normal(2, 3)]),
    "topk/0d": (lambda x: ag.topk(x, 1)[0], np.copy, [np.array(0.8)]),
    "topk/size_0_batch": (lambda x: ag.topk(x, 2)[0], lambda x: np_topk(x, 2)[0], [normal(0, 4)]),
    "cumsum/negative_axis": (lambda x: ag.cumsum(x, -2), lambda x: np.cumsum(x, -2), [normal(2, 3, 2)]),
    "cumsum/0d": (lambda x: ag.cumsum(x, 0), lambda x: np.cumsum(x).reshape(()), [np.array(1.3)]),
    "cumsum/size_0_axis": (lambda x: ag.cumsum(x, -1), lambda x: np.cumsum(x, -1), [normal(2, 0)]),
    "cumsum/size_0_batch": (lambda x: ag.cumsum(x, 1), lambda x: np.cumsum(x, 1), [normal(0, 3)]),
    "logsumexp/negative_axes": (lambda x: ag.logsumexp(x, (-1, -3)), lambda x: np_logsumexp(x, (-1, -3)),
                                [normal(2, 3, 2)]),
    "logsumexp/all_keepdims": (lambda x: ag.logsumexp(x, keepdims=True), lambda x: np_logsumexp(x, keepdims=True),
                               [normal(2, 3)]),
    "logsumexp/0d": (ag.logsumexp, np_logsumexp, [np.array(-0.7)]),
    "logsumexp/size_0_batch": (lambda x: ag.logsumexp(x, -1), lambda x: np_logsumexp(x, -1), [normal(0, 3)]),
    "min/negative_axes_keepdims": (lambda x: ag.min(x, (-1, -2), keepdims=True),
                                   lambda x: np.min(x, (-1, -2), keepdims=True), [normal(2, 3, 2)]),
    "min/all": (ag.min, np.min, [normal(3, 4)]),
    "min/0d": (ag.min, np.min, [np.array(2.1)]),
    "min/size_0_batch": (lambda x: ag.min(x, -1), lambda x: np.min(x, -1), [normal(0, 3)]),
    "var/negative_axes": (lambda x: ag.var(x, (-1, -3)), lambda x: np.var(x, (-1, -3), ddof=1), [normal(2, 3, 2)]),
    "var/biased_keepdims": (lambda x: ag.var(x, 0, correction=0, keepdims=True),
                            lambda x: np.var(x, 0, ddof=0, keepdims=True), [normal(3, 2)]),
    "var/0d_biased": (lambda x: ag.var(x, correction=0), np.var, [np.array(0.9)]),
    "var/size_0_batch": (lambda x: ag.var(x, -1), lambda x: np.var(x, -1, ddof=1), [normal(0, 3)]),
    "std/negative_axis": (lambda x: ag.std(x, -2), lambda x: np.std(x, -2, ddof=1), [normal(2, 3, 2)]),
    "std/all_correction_2": (lambda x: ag.std(x, correction=2), lambda x: np.std(x, ddof=2), [normal(2, 3)]),
    "std/0d_biased": (lambda x: ag.std(x, correction=0), np.std, [np.array(-0.3)]),
    "std/size_0_batch": (lambda x: ag.std(x, 1, keepdims=True), lambda x: np.std(x, 1, ddof=1, keepdims=True),
                         [normal(0, 3)]),
    "embedding/repeated_indices": (ag.embedding, np_embedding, [normal(5, 3), indices([[4, 0, 4], [1, 1, 2]])]),
    "embedding/int32_indices": (ag.embedding, np_embedding, [normal(3, 2), indices([2, 0, 2], np.int32)]),
    "embedding/0d_index": (ag.embedding, np_embedding, [normal(4, 2), indices(3)]),
    "embedding/no_indices": (ag.embedding, np_embedding, [normal(4, 2), indices([])]),
    "one_hot/matrix": (lambda t: ag.one_hot(t, 4), lambda t: np_one_hot(t, 4), [indices([[0, 3], [2, 2]])]),
    "one_hot/int32_indices": (lambda t: ag.one_hot(t, 3), lambda t: np_one_hot(t, 3), [indices([2, 0], np.int32)]),
    "one_hot/0d": (lambda t: ag.one_hot(t, 3), lambda t: np_one_hot(t, 3), [indices(1)]),
    "one_hot/no_indices": (lambda t: ag.one_hot(t, 2), lambda t: np_one_hot(t, 2), [indices([])]),
    "relative_distance/more_keys": (lambda q, k: ag.relative_distance(q, k, 2),
                                    lambda q, k: np_relative_distance(q, k, 2), [normal(2, 3, 2), normal(2, 5, 2)]),
    "relative_distance/unclipped": (lambda q, k: ag.relative_distance(q, k, 9),
                                    lambda q, k: np_relative_distance(q, k, 9), [normal(4, 1), normal(2, 1)]),
    "relative_distance/no_keys": (lambda q, k: ag.relative_distance(q, k, 0),
                                  lambda q, k: np_relative_distance(q, k, 0), [normal(3, 2), normal(0, 2)]),
    "take/negative_axis_and_indices": (lambda x, i: ag.take(x, i, -1), lambda x, i: np.take(x, i, -1),
                                       [normal(2, 3, 4), indices([[2, -1], [0, -4]])]),
    "take/int32_negative_indices": (lambda x, i: ag.take(x, i, 0), lambda x, i: np.take(x, i, 0),
                                    [normal(3, 2), indices([-3, 1, -1], np.int32)]),
    "take/constant_negative_indices": (lambda x: ag.take(x, indices([-1, 0, -1]), -2),
                                       lambda x: np.take(x, [-1, 0, -1], -2), [normal(3, 2)]),
    "take/0d_index": (lambda x, i: ag.take(x, i, 1), lambda x, i: np.take(x, i, 1), [normal(2, 3), indices(2)]),
    "take/no_indices": (lambda x, i: ag.take(x, i, 0), lambda x, i: np.take(x, i, 0), [normal(3, 2), indices([])]),
    "take/size_0_batch": (lambda x, i: ag.take(x, i, 1), lambda x, i: np.take(x, i, 1),
                          [normal(0, 3), indices([2, 0])]),
    "expand_dims/negative_axis": (lambda x: ag.expand_dims(x, -1), lambda x: np.expand_dims(x, -1), [normal(2, 3)]),
    "expand_dims/0d": (lambda x: ag.expand_dims(x, 0), lambda x: np.expand_dims(x, 0), [np.array(0.4)]),
    "expand_dims/size_0": (lambda x: ag.expand_dims(x, -2), lambda x: np.expand_dims(x, -2), [normal(0, 2)]),
    "unsqueeze/negative_axis": (lambda x: ag.unsqueeze(x, -3), lambda x: np.expand_dims(x, -3), [normal(2, 3)]),
    "unsqueeze/0d": (lambda x: ag.unsqueeze(x, -1), lambda x: np.expand_dims(x, -1), [np.array(-1.1)]),
    "flatten/middle_negative_axes": (lambda x: ag.flatten(x, -3, -2), lambda x: x.reshape(2, 6, 2),
                                     [normal(2, 3, 2, 2)]),
    "flatten/all": (ag.flatten, np.ravel, [normal(2, 3)]),
    "flatten/0d": (ag.flatten, lambda x: x.reshape(1), [np.array(1.9)]),
    "flatten/size_0": (lambda x: ag.flatten(x, 1), lambda x: x.reshape(2, 0), [normal(2, 0, 3)]),
    "moveaxis/several_negative": (lambda x: ag.moveaxis(x, (0, -1), (-1, 0)),
                                  lambda x: np.moveaxis(x, (0, -1), (-1, 0)), [normal(2, 3, 4)]),
    "moveaxis/last_to_first": (lambda x: ag.moveaxis(x, -1, 0), lambda x: np.moveaxis(x, -1, 0), [normal(2, 3, 2)]),
    "moveaxis/0d": (lambda x: ag.moveaxis(x, 0, -1), np.copy, [np.array(0.7)]),
    "moveaxis/size_0": (lambda x: ag.moveaxis(x, 0, -1), lambda x: np.moveaxis(x, 0, -1), [normal(0, 2, 3)]),
    "squeeze/all": (ag.squeeze, np.squeeze, [normal(1, 3, 1)]),
    "squeeze/negative_axes": (lambda x: ag.squeeze(x, (0, -1)), lambda x: np.squeeze(x, (0, -1)), [normal(1, 3, 1)]),
    "squeeze/an_axis_of_another_size_stays": (lambda x: ag.squeeze(x, -2), np.copy, [normal(1, 3, 1)]),
    "squeeze/0d": (ag.squeeze, np.squeeze, [np.array(0.2)]),
    "squeeze/size_0": (ag.squeeze, np.squeeze, [normal(1, 0, 1)]),
    "stack/negative_axis": (lambda x, y: ag.stack([x, y, x], -1), lambda x, y: np.stack([x, y, x], -1),
                            [normal(2, 3), normal(2, 3)]),
    "stack/0d": (lambda x, y: ag.stack([x, y]), lambda x, y: np.stack([x, y]), [np.array(0.5), np.array(-2.0)]),
    "stack/size_0": (lambda x, y: ag.stack([x, y], 1), lambda x, y: np.stack([x, y], 1), [normal(0, 2), normal(0, 2)]),
    "swapaxes/negative_axes": (lambda x: ag.swapaxes(x, -1, 0), lambda x: np.swapaxes(x, -1, 0), [normal(2, 3, 4)]),
    "swapaxes/one_axis_with_itself": (lambda x: ag.swapaxes(x, 1, -1), np.copy, [normal(3, 2)]),
    "swapaxes/0d": (lambda x: ag.swapaxes(x, 0, -1), np.copy, [np.array(-0.6)]),
    "swapaxes/size_0": (lambda x: ag.swapaxes(x, 0, 1), lambda x: np.swapaxes(x, 0, 1), [normal(0, 3)]),
    "tril/batched_below": (lambda x: ag.tril(x, -1), lambda x: np.tril(x, -1), [normal(2, 3, 4)]),
    "tril/above_a_tall_matrix": (lambda x: ag.tril(x, 1), lambda x: np.tril(x, 1), [normal(4, 2)]),
    "tril/everything_dropped": (lambda x: ag.tril(x, -3), lambda x: np.tril(x, -3), [normal(3, 3)]),
    "tril/size_0": (ag.tril, np.tril, [normal(0, 3)]),
    "triu/batched_above": (lambda x: ag.triu(x, 1), lambda x: np.triu(x, 1), [normal(2, 3, 4)]),
    "triu/below_a_wide_matrix": (lambda x: ag.triu(x, -1), lambda x: np.triu(x, -1), [normal(2, 4)]),
    "triu/everything_kept": (lambda x: ag.triu(x, -5), lambda x: np.triu(x, -5), [normal(3, 2)]),
    "triu/size_0": (ag.triu, np.triu, [normal(3, 0)]),
}
# the functions that take integer tensors (the others take floating point only, or ignore the values)
INTEGER_INPUTS = {"argmax", "argmin", "sort", "topk", "cumsum", "min", "embedding", "one_hot", "take",
                  "expand_dims", "unsqueeze", "flatten", "moveaxis", "squeeze", "stack", "swapaxes", "tril", "triu"}

EDGE = np.array([[1.0, NAN, INF, -INF], [INF, 2.0, NAN, -INF], [NAN, 2.0, INF, 0.0]])
# "function/case": (the call on EDGE, torch 2.13's value and gradient of Σ linspace(-1, 1.5) · value in float64)
EDGE_ROWS = {
    "argmax/nan_first_along_axis_0": (lambda x: ag.argmax(x, 0), [2, 0, 1, 2], None),
    "argmin/nan_first_along_axis_0": (lambda x: ag.argmin(x, 0), [2, 0, 1, 0], None),
    "argmax/nan_along_the_last_axis": (lambda x: ag.argmax(x, -1), [1, 2, 0], None),
    "sort/nan_largest_descending_along_axis_0": (
        lambda x: ag.sort(x, 0, descending=True)[0],
        [[NAN, NAN, NAN, 0.0], [INF, 2.0, INF, -INF], [1.0, 2.0, INF, -INF]],
        [[0.8181818181818182, -0.7727272727272727, 0.36363636363636365, 0.5909090909090909],
         [-0.09090909090909094, 0.13636363636363633, -0.5454545454545454, 1.5],
         [-1.0, 1.0454545454545454, 1.2727272727272727, -0.31818181818181823]]),
    "sort/nan_indices_descending_along_axis_0": (lambda x: ag.sort(x, 0, descending=True)[1],
                                                 [[2, 0, 1, 2], [1, 1, 0, 0], [0, 2, 2, 1]], None),
    "sort/nan_last_ascending": (
        lambda x: ag.sort(x)[0], [[-INF, 1.0, INF, NAN], [-INF, 2.0, INF, NAN], [0.0, 2.0, INF, NAN]],
        [[-0.7727272727272727, -0.31818181818181823, -0.5454545454545454, -1.0],
         [0.36363636363636365, 0.13636363636363633, 0.5909090909090909, -0.09090909090909094],
         [1.5, 1.0454545454545454, 1.2727272727272727, 0.8181818181818182]]),
    "topk/smallest_skip_nan_along_axis_0": (
        lambda x: ag.topk(x, 2, 0, largest=False)[0], [[1.0, 2.0, INF, -INF], [INF, 2.0, INF, -INF]],
        [[-1.0, 0.0, -0.2857142857142857, 0.07142857142857145], [0.42857142857142855, -0.6428571428571428, 0.0, 1.5],
         [0.0, 0.7857142857142857, 1.1428571428571428, 0.0]]),
    "topk/smallest_indices_along_axis_0": (lambda x: ag.topk(x, 2, 0, largest=False)[1],
                                           [[0, 1, 0, 0], [1, 2, 2, 1]], None),
    "topk/largest_nan_first": (lambda x: ag.topk(x, 2)[0], [[NAN, INF], [NAN, INF], [NAN, INF]],
                               [[0.0, -1.0, -0.5, 0.0], [0.5, 0.0, 0.0, 0.0], [1.0, 0.0, 1.5, 0.0]]),
    "topk/largest_indices": (lambda x: ag.topk(x, 2)[1], [[1, 2], [2, 0], [0, 2]], None),
    "cumsum/nan_and_opposite_infinities": (
        lambda x: ag.cumsum(x, 0), [[1.0, NAN, INF, -INF], [INF, NAN, NAN, -INF], [NAN, NAN, NAN, -INF]],
        [[-0.2727272727272727, 0.40909090909090895, 1.0909090909090908, 1.7727272727272725],
         [0.7272727272727273, 1.1818181818181817, 1.6363636363636362, 2.090909090909091],
         [0.8181818181818182, 1.0454545454545454, 1.2727272727272727, 1.5]]),
    "tril/zeros_not_nan_where_dropped": (
        ag.tril, [[1.0, 0.0, 0.0, 0.0], [INF, 2.0, 0.0, 0.0], [NAN, 2.0, INF, 0.0]],
        [[-1.0, 0.0, 0.0, 0.0], [-0.09090909090909094, 0.13636363636363633, 0.0, 0.0],
         [0.8181818181818182, 1.0454545454545454, 1.2727272727272727, 0.0]]),
    "triu/zeros_not_nan_where_dropped": (
        lambda x: ag.triu(x, 1), [[0.0, NAN, INF, -INF], [0.0, 0.0, NAN, -INF], [0.0, 0.0, 0.0, 0.0]],
        [[0.0, -0.7727272727272727, -0.5454545454545454, -0.31818181818181823],
         [0.0, 0.0, 0.36363636363636365, 0.5909090909090909], [0.0, 0.0, 0.0, 1.5]]),
}
COVERS = {name.split("/")[0] for name in (*ROWS, *EDGE_ROWS)}


def function(name):
    return name.split("/")[0]


def inputs(name, dtype):
    """The row's inputs, its floating-point ones cast to ``dtype`` (an integer dtype: rounded from 3x)."""
    cast = (lambda x: x.astype(dtype)) if np.dtype(dtype).kind == "f" else (lambda x: np.round(3 * x).astype(dtype))
    return [cast(x) if x.dtype.kind == "f" else x for x in ROWS[name][2]]


def has_floats(name):
    return any(x.dtype.kind == "f" for x in ROWS[name][2])


def differentiable(name):
    _, ref, xs = ROWS[name]
    return np.asarray(ref(*xs)).dtype.kind == "f"


def weights_like(value):
    """Weights of the objective Σ weights · f(xs): distinct, of the result's shape."""
    shape = np.shape(value)
    return np.linspace(-1.0, 1.5, math.prod(shape)).reshape(shape)


def value_and_float_gradients_on(device, fn, xs):
    """fn(*xs) (a scalar) and its gradient with respect to each floating-point array of ``xs``, from the traced
    gradient graph run on ``device``."""
    feeds = {f"x{i}": x for i, x in enumerate(xs)}
    graph = ag.trace(lambda **a: fn(*a.values()), **feeds)
    value, *grads = graph.grad(wrt=[n for n, x in feeds.items() if x.dtype.kind == "f"]).compile(device.name)(**feeds)
    return value, grads


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", [name for name in ROWS if has_floats(name)])
def test_values_are_numpys(name, dtype, device):
    fn, ref, _ = ROWS[name]
    got = run(fn, *inputs(name, dtype), device=device)
    want = np.asarray(ref(*inputs(name, np.float64)))
    assert isinstance(got, np.ndarray) and got.shape == want.shape
    assert got.dtype == (dtype if want.dtype.kind == "f" else want.dtype)
    np.testing.assert_allclose(got, want, **({"rtol": 1e-12, "atol": 1e-14} if dtype == np.float64 else
                                             {"rtol": 2e-6, "atol": 1e-6}))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("name", [name for name in ROWS if function(name) in INTEGER_INPUTS])
def test_integer_inputs_give_numpys_values_and_dtype(name, dtype, device):
    fn, ref, _ = ROWS[name]
    got = run(fn, *inputs(name, dtype), device=device)
    want = np.asarray(ref(*inputs(name, dtype)))
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", [name for name in ROWS if differentiable(name)])
def test_gradients_are_the_references_slopes(name, device):
    fn, ref, xs = ROWS[name]
    weights = weights_like(ref(*xs))
    _, grads = value_and_float_gradients_on(device, lambda *a: ag.sum(fn(*a) * weights), xs)
    floats = [i for i, x in enumerate(xs) if x.dtype.kind == "f"]
    assert len(grads) == len(floats)
    for i, grad in zip(floats, grads):
        want = central_differences(lambda *a: float(np.sum(ref(*a) * weights)), xs, i)
        assert grad.shape == want.shape
        np.testing.assert_allclose(grad, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", [name for name in ROWS
                                  if differentiable(name) and all(np.size(x) for x in ROWS[name][2])])
def test_gradients_pass_gradcheck_in_float64(name):
    fn, ref, xs = ROWS[name]
    weights = weights_like(ref(*xs))
    gradcheck(lambda *a: ag.sum(fn(*a) * weights), *xs).raise_if_failed()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the CUDA simulator's NumPy scalars warn at inf − inf
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", EDGE_ROWS)
def test_nan_and_infinities_give_pytorchs_values_and_gradients(name, dtype, device):
    fn, want, want_grad = EDGE_ROWS[name]
    x = EDGE.astype(dtype)
    got = run(fn, x, device=device)
    want = np.array(want, dtype if want_grad is not None else np.int64)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    if want_grad is not None:
        weights = weights_like(want).astype(dtype)
        _, (grad,) = value_and_float_gradients_on(device, lambda a: ag.sum(fn(a) * weights), [x])
        assert grad.dtype == dtype
        np.testing.assert_allclose(grad, want_grad, rtol=2e-6 if dtype == np.float32 else 1e-15, atol=0)
