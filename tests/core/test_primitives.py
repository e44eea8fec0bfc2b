"""Every primitive: forward against NumPy in float32, gradients against central differences in float64."""
import math

import numpy as np
import pytest
from scipy.special import erf as np_erf

import attngraph as ag
from attngraph.inspect import gradcheck
from tests.conftest import run


def positive(shape):
    return lambda rng: rng.uniform(0.5, 2.0, shape)


def normal(shape):
    return lambda rng: rng.standard_normal(shape)


def away_from_zero(shape):
    return lambda rng: rng.choice([-1, 1], shape) * rng.uniform(0.1, 2.0, shape)


def np_softmax(x, mask=None):
    z = np.where(mask, x, -np.inf) if mask is not None else x
    m = np.max(z, -1, keepdims=True)
    e = np.exp(z - np.where(np.isfinite(m), m, 0))
    s = e.sum(-1, keepdims=True)
    return np.where(s > 0, e / np.where(s > 0, s, 1), 0)


def np_layer_norm(x, w, b, eps=1e-5):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * w + b


def np_gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


BROADCAST_PAIRS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (1, 5, 1)), ((1,), (2, 3)), ((0, 3), (3,)),
                   ((), (2, 2))]
MASK = np.array([[True, True, False, True], [False, False, False, False], [True, False, False, False]])

# name: (attngraph function, NumPy reference, input makers)
CASES = {
    **{f"add{a}{b}": (ag.add, np.add, [normal(a), normal(b)]) for a, b in BROADCAST_PAIRS},
    **{f"sub{a}{b}": (ag.sub, np.subtract, [normal(a), normal(b)]) for a, b in BROADCAST_PAIRS},
    **{f"mul{a}{b}": (ag.mul, np.multiply, [normal(a), normal(b)]) for a, b in BROADCAST_PAIRS},
    **{f"div{a}{b}": (ag.div, np.divide, [normal(a), away_from_zero(b)]) for a, b in BROADCAST_PAIRS},
    "pow": (ag.pow, np.power, [positive((3, 4)), normal((4,))]),
    "maximum": (ag.maximum, np.maximum, [normal((3, 4)), normal((3, 1))]),
    "minimum": (ag.minimum, np.minimum, [normal((3, 4)), normal((4,))]),
    "neg": (ag.neg, np.negative, [normal((2, 3))]),
    "exp": (ag.exp, np.exp, [normal((2, 3))]),
    "log": (ag.log, np.log, [positive((2, 3))]),
    "sqrt": (ag.sqrt, np.sqrt, [positive((2, 3))]),
    "tanh": (ag.tanh, np.tanh, [normal((2, 5))]),
    "tanh_large": (ag.tanh, np.tanh, [lambda rng: rng.uniform(-30, 30, (4, 4))]),
    "sigmoid": (ag.sigmoid, lambda x: 1 / (1 + np.exp(-x)), [normal((2, 5))]),
    "relu": (ag.relu, lambda x: np.maximum(x, 0), [away_from_zero((2, 5))]),
    "gelu_tanh": (ag.gelu, np_gelu_tanh, [normal((2, 5))]),
    "gelu_exact": (lambda x: ag.gelu(x, approximate="none"), lambda x: 0.5 * x * (1 + np_erf(x / math.sqrt(2))),
                   [normal((2, 5))]),
    "erf": (ag.erf, np_erf, [normal((2, 5))]),
    "where": (lambda x, y: ag.where(x > 0, x, y * 2), lambda x, y: np.where(x > 0, x, y * 2),
              [away_from_zero((3, 4)), normal((4,))]),
    "sum_all": (ag.sum, np.sum, [normal((3, 4))]),
    "sum_axis": (lambda x: ag.sum(x, axis=1), lambda x: x.sum(1), [normal((2, 3, 4))]),
    "sum_keepdims": (lambda x: ag.sum(x, axis=(0, 2), keepdims=True), lambda x: x.sum((0, 2), keepdims=True),
                     [normal((2, 3, 4))]),
    "sum_empty": (lambda x: ag.sum(x, axis=0), lambda x: x.sum(0), [normal((0, 3))]),
    "mean": (lambda x: ag.mean(x, axis=-1), lambda x: x.mean(-1), [normal((2, 3, 4))]),
    "mean_keepdims": (lambda x: ag.mean(x, axis=(0, 1), keepdims=True), lambda x: x.mean((0, 1), keepdims=True),
                      [normal((2, 3, 4))]),
    "max": (lambda x: ag.max(x, axis=1), lambda x: x.max(1), [normal((3, 5))]),
    "max_keepdims": (lambda x: ag.max(x, axis=0, keepdims=True), lambda x: x.max(0, keepdims=True),
                     [normal((3, 5))]),
    "matmul": (ag.matmul, np.matmul, [normal((3, 4)), normal((4, 5))]),
    "matmul_batched": (ag.matmul, np.matmul, [normal((2, 3, 4)), normal((2, 4, 5))]),
    "matmul_broadcast": (ag.matmul, np.matmul, [normal((2, 1, 3, 4)), normal((3, 4, 2))]),
    "matmul_shared_weight": (ag.matmul, np.matmul, [normal((2, 3, 4)), normal((4, 5))]),
    "matmul_vector": (ag.matmul, np.matmul, [normal((2, 3, 4)), normal((4,))]),
    "vector_matmul": (ag.matmul, np.matmul, [normal((4,)), normal((4, 3))]),
    "matmul_empty_batch": (ag.matmul, np.matmul, [normal((0, 3, 4)), normal((4, 2))]),
    "reshape": (lambda x: ag.reshape(x, (4, -1)), lambda x: x.reshape(4, -1), [normal((2, 3, 4))]),
    "transpose": (lambda x: ag.transpose(x, (2, 0, 1)), lambda x: x.transpose(2, 0, 1), [normal((2, 3, 4))]),
    "T": (lambda x: x.T, lambda x: x.T, [normal((2, 3))]),
    "broadcast_to": (lambda x: ag.broadcast_to(x, (2, 3, 4)), lambda x: np.broadcast_to(x, (2, 3, 4)),
                     [normal((3, 1))]),
    "slice": (lambda x: x[1:, ::2, -1], lambda x: x[1:, ::2, -1], [normal((3, 5, 2))]),
    "slice_newaxis": (lambda x: x[None, ..., 0], lambda x: x[None, ..., 0], [normal((3, 4))]),
    "concat": (lambda x, y: ag.concat([x, y, x], axis=1), lambda x, y: np.concatenate([x, y, x], 1),
               [normal((2, 3)), normal((2, 1))]),
    "split": (lambda x: ag.split(x, [1, 3], axis=1)[1] * 2, lambda x: x[:, 1:] * 2, [normal((2, 4))]),
    "softmax": (ag.softmax, np_softmax, [normal((3, 4))]),
    "softmax_axis0": (lambda x: ag.softmax(x, axis=0), lambda x: np_softmax(x.T).T, [normal((3, 4))]),
    "softmax_masked": (lambda x: ag.softmax(x, mask=MASK), lambda x: np_softmax(x, MASK), [normal((2, 3, 4))]),
    "softmax_causal": (lambda x: ag.softmax(x, causal=True),
                       lambda x: np_softmax(x, np.tril(np.ones((3, 4), bool), 1)), [normal((2, 3, 4))]),
    "log_softmax": (ag.log_softmax, lambda x: np.log(np_softmax(x)), [normal((3, 4))]),
    "log_softmax_masked": (lambda x: ag.log_softmax(x, mask=MASK),
                           lambda x: np.where(MASK, np.log(np.where(MASK, np_softmax(x, MASK), 1)), 0),
                           [normal((3, 4))]),
    "layer_norm": (ag.layer_norm, np_layer_norm, [normal((2, 3, 5)), normal((5,)), normal((5,))]),
    "layer_norm_plain": (lambda x: ag.layer_norm(x), lambda x: np_layer_norm(x, 1, 0), [normal((4, 6))]),
    "layer_norm_empty_batch": (lambda x: ag.layer_norm(x), lambda x: np_layer_norm(x, 1, 0), [normal((0, 6))]),
    "softmax_size_one_axis": (ag.softmax, np_softmax, [normal((3, 1))]),
    "softmax_empty_batch": (ag.softmax, np_softmax, [normal((0, 2, 4))]),
    "log_softmax_empty_batch": (ag.log_softmax, lambda x: np.log(np_softmax(x)), [normal((2, 0, 3))]),
    "tanh_empty": (ag.tanh, np.tanh, [normal((0,))]),
    "attention": (lambda q, k, v: ag.scaled_dot_product_attention(q, k, v, causal=True),
                  lambda q, k, v: np_softmax(q @ k.swapaxes(-1, -2) / 2, np.tril(np.ones((3, 5), bool), 2)) @ v,
                  [normal((2, 3, 4)), normal((2, 5, 4)), normal((2, 5, 2))]),
    "additive_scores": (ag.additive_scores, lambda a, b, v: np.tanh(a[..., None, :] + b[..., None, :, :]) @ v,
                        [normal((2, 4, 3)), normal((2, 4, 3)), normal((3,))]),
}


def inputs(case, rng, dtype):
    return [np.asarray(make(rng), dtype) for make in CASES[case][2]]


@pytest.mark.parametrize("case", CASES)
def test_forward_matches_numpy(case, rng):
    fn, reference, _ = CASES[case]
    arrays = inputs(case, rng, np.float32)
    got = run(fn, *arrays)
    want = reference(*[a.astype(np.float64) for a in arrays])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("case", CASES)
def test_gradients_match_central_differences(case, rng):
    fn, _, _ = CASES[case]
    arrays = inputs(case, rng, np.float64)
    weights = np.random.default_rng(7).standard_normal(np.shape(run(fn, *arrays)))
    report = gradcheck(lambda *xs: ag.sum(fn(*xs) * weights), *arrays)
    report.raise_if_failed()


def test_cross_entropy_matches_numpy_and_ignores_targets(rng):
    logits = rng.standard_normal((2, 3, 5))
    targets = np.array([[0, 4, -1], [2, -1, 1]])
    loss = run(lambda x, t: ag.cross_entropy(x, t, ignore_index=-1), logits, targets)
    logp = np.log(np_softmax(logits))
    keep = targets != -1
    want = -np.mean(np.take_along_axis(logp, np.where(keep, targets, 0)[..., None], -1)[..., 0][keep])
    np.testing.assert_allclose(loss, want, rtol=1e-12)
    gradcheck(lambda x, t: ag.cross_entropy(x, t, ignore_index=-1), logits, targets).raise_if_failed()


def test_cross_entropy_with_every_target_ignored_is_zero_with_zero_gradient(rng):
    logits = rng.standard_normal((3, 4))
    targets = np.full(3, -100)
    value, grad = ag.value_and_grad(lambda x, t: ag.cross_entropy(x, t, ignore_index=-100))(logits, targets)
    assert value == 0 and np.all(grad == 0)


def test_embedding_gathers_rows_and_scatter_adds_repeated_indices(rng):
    table = rng.standard_normal((5, 3))
    idx = np.array([[1, 1, 4], [0, 1, 2]])
    np.testing.assert_array_equal(run(ag.embedding, table, idx), table[idx])
    _, grad = ag.value_and_grad(lambda t, i: ag.sum(ag.embedding(t, i)))(table, idx)
    np.testing.assert_array_equal(grad[:, 0], [1, 3, 1, 0, 1])
    gradcheck(lambda t, i: ag.sum(ag.embedding(t, i) ** 2), table, idx).raise_if_failed()


def test_take_along_a_middle_axis(rng):
    x = rng.standard_normal((2, 4, 3))
    idx = np.array([3, 0, 3])
    np.testing.assert_allclose(run(lambda a, i: ag.take(a, i, axis=1), x, idx), np.take(x, idx, axis=1))
    gradcheck(lambda a, i: ag.sum(ag.take(a, i, axis=1) ** 2), x, idx).raise_if_failed()


def test_dropout_keeps_the_expected_fraction_and_reuses_its_mask_backward():
    x = np.ones((200, 100), np.float32)
    graph = ag.trace(lambda x: ag.dropout(x, 0.25), x=x)
    run_once = graph.compile(seed=3)
    first, second = run_once(x=x), run_once(x=x)
    assert abs((first > 0).mean() - 0.75) < 0.01
    np.testing.assert_allclose(first[first > 0], 1 / 0.75, rtol=1e-6)
    assert not np.array_equal(first, second), "successive calls must draw fresh masks"
    np.testing.assert_array_equal(graph.compile(seed=3)(x=x), first)
    value, grad = ag.value_and_grad(lambda x: ag.sum(ag.dropout(x, 0.5)))(x)
    np.testing.assert_allclose(value, grad.sum(), rtol=1e-5)


@pytest.mark.parametrize("name, reference", [("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less),
                                             ("less_equal", np.less_equal), ("greater", np.greater),
                                             ("greater_equal", np.greater_equal)])
def test_comparisons_broadcast_and_give_booleans(name, reference, rng):
    a, b = rng.integers(0, 3, (3, 4)).astype(np.float32), rng.integers(0, 3, (4,)).astype(np.float32)
    got = run(getattr(ag, name), a, b)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, reference(a, b))


def test_logical_ops(rng):
    a, b = rng.random((3, 4)) > 0.5, rng.random(4) > 0.5
    np.testing.assert_array_equal(run(ag.logical_and, a, b), a & b)
    np.testing.assert_array_equal(run(ag.logical_or, a, b), a | b)
    np.testing.assert_array_equal(run(ag.logical_not, a), ~a)
    np.testing.assert_array_equal(run(lambda a, b: ~(a & b) | a, a, b), ~(a & b) | a)


def test_astype_casts_and_passes_gradients_back_in_the_source_dtype(rng):
    x = rng.standard_normal(4)
    assert run(lambda x: x.astype("float32"), x).dtype == np.float32
    _, grad = ag.value_and_grad(lambda x: ag.sum(x.astype("float32") * 3.0).astype("float64"))(x)
    assert grad.dtype == np.float64
    np.testing.assert_allclose(grad, 3.0)


def test_positions_are_read_from_the_running_shapes():
    graph = ag.trace(lambda q, k: (ag.arange(k, axis=1), ag.relative_distance(q, k, 1)),
                     q=ag.Input(("B", "T", 2)), k=ag.Input(("B", "S", 2)))
    positions, distance = graph.compile()(q=np.zeros((1, 2, 2), np.float32), k=np.zeros((1, 4, 2), np.float32))
    np.testing.assert_array_equal(positions, [0, 1, 2, 3])
    np.testing.assert_array_equal(distance, [[1, 2, 2, 2], [0, 1, 2, 2]])
