"""The elementwise vocabulary of issue 26 in one table: each op, the reference it must equal (NumPy's own function
or the formula, in float64), the smooth points where its float64 gradient is checked against central differences,
and its gradient where PyTorch makes a choice (kinks, ±inf, NaN). Each row's values (float32 and float64,
broadcasting, NaN and ±inf) and gradients (at its smooth points against central differences of the reference, and
PyTorch's at the edges) run on every device (tiny cases on cuda: the simulator); 0-d, size-0 axes and float64
gradient checks on the CPU. A function of ``attngraph.functional.__all__`` that is elementwise and has no row fails
the last test."""
import math

import numpy as np
import pytest

import attngraph as ag
from attngraph.core import functional
from attngraph.core.primitive import REGISTRY
from attngraph.inspect.gradcheck import gradcheck
from tests.conftest import run, value_and_grad_on

INF, NAN = math.inf, math.nan
X = np.array([-INF, -25.0, -3.0, -2.5, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.5, 3.0, 25.0, INF, NAN])
SMOOTH = np.array([-2.3, -0.7, 0.4, 1.3])
UNIT = np.array([-0.7, -0.2, 0.3, 0.6])          # inside (-1, 1), for asin, acos and atanh
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def elu(x, alpha):
    return np.where(x <= 0, alpha * np.expm1(x), x)


def softplus(x, beta=1.0, threshold=20.0):
    return np.where(x * beta > threshold, x, np.log1p(np.exp(x * beta)) / beta)


# name: (the op, its reference in float64, the points where its gradient is checked, or None: no gradient)
UNARY = {
    "floor": (ag.floor, np.floor, None),
    "ceil": (ag.ceil, np.ceil, None),
    "round": (ag.round, np.rint, None),
    "trunc": (ag.trunc, np.trunc, None),
    "sign": (ag.sign, np.sign, None),
    "isnan": (ag.isnan, np.isnan, None),
    "isinf": (ag.isinf, np.isinf, None),
    "isfinite": (ag.isfinite, np.isfinite, None),
    "tan": (ag.tan, np.tan, SMOOTH / 2),
    "asin": (ag.asin, np.arcsin, UNIT),
    "acos": (ag.acos, np.arccos, UNIT),
    "atan": (ag.atan, np.arctan, SMOOTH),
    "sinh": (ag.sinh, np.sinh, SMOOTH),
    "cosh": (ag.cosh, np.cosh, SMOOTH),
    "asinh": (ag.asinh, np.arcsinh, SMOOTH),
    "acosh": (ag.acosh, np.arccosh, np.abs(SMOOTH) + 1.1),
    "atanh": (ag.atanh, np.arctanh, UNIT),
    "log2": (ag.log2, np.log2, np.abs(SMOOTH)),
    "log10": (ag.log10, np.log10, np.abs(SMOOTH)),
    "exp2": (ag.exp2, np.exp2, SMOOTH),
    "expm1": (ag.expm1, np.expm1, SMOOTH),
    "log1p": (ag.log1p, np.log1p, np.abs(SMOOTH)),
    "softplus": (lambda x: ag.softplus(x, beta=2.0, threshold=5.0), lambda x: softplus(x, 2.0, 5.0), SMOOTH),
    "leaky_relu": (lambda x: ag.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x), SMOOTH),
    "elu": (lambda x: ag.elu(x, 0.5), lambda x: elu(x, 0.5), SMOOTH),
    "celu": (lambda x: ag.celu(x, 2.0), lambda x: np.where(x <= 0, 2 * np.expm1(x / 2), x), SMOOTH),
    "selu": (ag.selu, lambda x: SELU_SCALE * elu(x, SELU_ALPHA), SMOOTH),
    "mish": (ag.mish, lambda x: x * np.tanh(softplus(x)), SMOOTH),
    "hardswish": (ag.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6, SMOOTH),
    "hardsigmoid": (ag.hardsigmoid, lambda x: np.clip(x / 6 + 0.5, 0, 1), SMOOTH),
    "softsign": (ag.softsign, lambda x: x / (1 + np.abs(x)), SMOOTH),
    "logsigmoid": (ag.logsigmoid, lambda x: np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x))), SMOOTH),
    "quick_gelu": (ag.quick_gelu, lambda x: x * sigmoid(1.702 * x), SMOOTH),
}
BINARY = {
    "atan2": (ag.atan2, np.arctan2),
    "logaddexp": (ag.logaddexp, np.logaddexp),
    "copysign": (ag.copysign, np.copysign),
    "lerp": (lambda a, b: ag.lerp(a, b, 0.75), lambda a, b: b - (b - a) * 0.25),
}
# PyTorch 2.13's gradient of op(x).sum() at points where the op has a kink, a threshold or a non-finite input
EDGE_GRADIENTS = {
    "leaky_relu": ([0.0, -0.0, 1.0, NAN], [0.2, 0.2, 1.0, 0.2]),
    "elu": ([0.0, -INF, INF, NAN], [0.5, 0.0, 1.0, 1.0]),
    "celu": ([0.0, -1.0], [1.0, math.exp(-0.5)]),
    "selu": ([0.0, 1.0], [SELU_SCALE * SELU_ALPHA, SELU_SCALE]),
    "mish": ([0.0, 30.0], [0.6, 1.0]),
    "hardswish": ([-3.0, 3.0, 0.0, -4.0, 4.0], [-0.5, 1.5, 0.5, 0.0, 1.0]),
    "hardsigmoid": ([-3.0, 3.0, 0.0], [0.0, 0.0, 1 / 6]),
    "logsigmoid": ([0.0, -INF, INF], [0.5, 1.0, 0.0]),
    "softplus": ([3.0, 2.0, 2.6], [1.0, float(sigmoid(4.0)), 1.0]),        # β = 2, threshold 5: βx > 5 gives x
    "floor": ([0.5, -1.5], [0.0, 0.0]),
    "sign": ([0.0, 2.0], [0.0, 0.0]),
    "log1p": ([-1.0, 0.0], [INF, 1.0]),
}


def reference(fn, *xs, dtype):
    with np.errstate(all="ignore"):
        return np.asarray(fn(*(np.asarray(x, np.float64) for x in xs))).astype(
            np.bool_ if fn in (np.isnan, np.isinf, np.isfinite) else dtype)


def assert_matches(got, want, dtype):
    assert got.shape == want.shape and got.dtype == want.dtype
    tolerance = {"rtol": 1e-13, "atol": 1e-300} if dtype == np.float64 else {"rtol": 2e-6, "atol": 1e-37}
    np.testing.assert_allclose(got, want, **tolerance)
    finite = ~np.isnan(want) if want.dtype.kind == "f" else slice(None)
    np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(want[finite]))


def central_differences(ref, args, i, h=1e-6):
    """∂ref/∂args[i], elementwise, by central differences of the float64 reference."""
    def at(step):
        return ref(*(a + step if j == i else a for j, a in enumerate(args)))
    return (at(h) - at(-h)) / (2 * h)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator's NumPy scalars warn at ±inf and NaN
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", UNARY)
def test_unary_values_at_zeros_infinities_and_nan(name, dtype, device):
    fn, ref, _ = UNARY[name]
    assert_matches(run(fn, X.astype(dtype), device=device), reference(ref, X.astype(dtype), dtype=dtype), dtype)


@pytest.mark.parametrize("name", [n for n, (_, _, points) in UNARY.items() if points is not None])
def test_unary_gradients_at_smooth_points_are_the_references_slope(name, device):
    fn, ref, points = UNARY[name]
    weights = np.linspace(-1.0, 1.5, len(points))
    _, (grad,) = value_and_grad_on(device, lambda x: ag.sum(fn(x) * weights), points)
    np.testing.assert_allclose(grad, weights * central_differences(ref, (points,), 0), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name", UNARY)
def test_unary_ops_keep_0_d_and_empty_shapes(name):
    fn, ref, _ = UNARY[name]
    got = run(fn, np.array(0.5))
    assert isinstance(got, np.ndarray) and got.shape == ()
    np.testing.assert_allclose(got, reference(ref, 0.5, dtype=np.float64), rtol=1e-13)
    assert run(fn, np.zeros((2, 0))).shape == (2, 0)


@pytest.mark.parametrize("name", [n for n, (_, _, points) in UNARY.items() if points is not None])
def test_unary_gradients_pass_gradcheck_in_float64(name):
    fn, _, points = UNARY[name]
    weights = np.linspace(-1.0, 1.5, len(points))
    gradcheck(lambda x: ag.sum(fn(x) * weights), points).raise_if_failed()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator's NumPy scalars warn at ±inf and NaN
@pytest.mark.parametrize("name", EDGE_GRADIENTS)
def test_gradients_at_kinks_thresholds_and_non_finite_inputs_are_pytorchs(name, device):
    points, want = EDGE_GRADIENTS[name]
    _, (grad,) = value_and_grad_on(device, lambda x: ag.sum(UNARY[name][0](x)), np.array(points))
    np.testing.assert_allclose(grad, want, rtol=1e-12)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator's NumPy scalars warn at ±inf and NaN
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", BINARY)
def test_binary_values_broadcast_over_every_pair_of_edge_values(name, dtype, device):
    fn, ref = BINARY[name]
    a, b = X.astype(dtype)[:, None], X.astype(dtype)
    assert_matches(run(fn, a, b, device=device), reference(ref, a, b, dtype=dtype), dtype)


@pytest.mark.parametrize("name", BINARY)
def test_binary_gradients_broadcast_and_are_the_references_slopes(name, device):
    fn, ref = BINARY[name]
    a, b, weights = np.array([[-1.3], [0.4], [2.1]]), np.array([0.7, -2.2]), np.array([1.0, -0.5])
    _, (da, db) = value_and_grad_on(device, lambda a, b: ag.sum(fn(a, b) * weights), a, b)
    np.testing.assert_allclose(da, (weights * central_differences(ref, (a, b), 0)).sum(1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(db, (weights * central_differences(ref, (a, b), 1)).sum(0), rtol=1e-6)


@pytest.mark.parametrize("name", BINARY)
def test_binary_gradients_pass_gradcheck_in_float64(name):
    fn, _ = BINARY[name]
    a, b = np.array([[-1.3], [0.4], [2.1]]), np.array([0.7, -2.2])
    gradcheck(lambda a, b: ag.sum(fn(a, b) * np.array([1.0, -0.5])), a, b).raise_if_failed()


def test_whole_number_ops_and_predicates_take_integers_as_pytorch():
    """torch.floor/ceil/round/trunc of an int tensor is the tensor; isnan false, isinf false, isfinite true;
    sign keeps the dtype."""
    ints = np.array([-3, 0, 7], np.int32)
    for op in (ag.floor, ag.ceil, ag.round, ag.trunc):
        got = run(op, ints)
        assert got.dtype == np.int32 and got.tolist() == [-3, 0, 7]
    assert run(ag.sign, ints).tolist() == [-1, 0, 1] and run(ag.sign, ints).dtype == np.int32
    assert run(ag.isnan, ints).tolist() == [False] * 3 and run(ag.isfinite, ints).tolist() == [True] * 3


def test_round_takes_halves_to_the_even_neighbour_and_keeps_huge_floats():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.5000001, 1e300, -1e17], np.float64)
    np.testing.assert_array_equal(run(ag.round, x), np.rint(x))
    assert np.signbit(run(ag.round, x))[3]


def test_expm1_and_log1p_keep_the_digits_near_0_that_exp_minus_1_loses():
    x = np.array([1e-10, -1e-12], np.float32)
    np.testing.assert_allclose(run(ag.expm1, x), np.expm1(x.astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(run(ag.log1p, x), np.log1p(x.astype(np.float64)), rtol=1e-6)


def test_lerp_weight_gets_end_minus_start_and_weight_1_gives_end_exactly():
    start, end, weight = np.array([0.1, -3.0]), np.array([0.7, 1e16]), np.array([1.0, 0.25])
    (value, (ds, de, dw)) = ag.value_and_grad(lambda s, e, w: ag.sum(ag.lerp(s, e, w)), argnums=(0, 1, 2))(
        start, end, weight)
    assert run(lambda s, e: ag.lerp(s, e, 1.0), start, end).tolist() == end.tolist()
    np.testing.assert_array_equal(ds, 1 - weight)
    np.testing.assert_array_equal(de, weight)
    np.testing.assert_array_equal(dw, end - start)


def test_float_ops_refuse_integer_tensors():
    for op in (ag.tan, ag.log1p, ag.expm1):
        with pytest.raises(TypeError, match="floating-point"):
            run(op, np.array([1, 2], np.int32))


# name: (the op, its reference: NumPy's function, which wraps integers round their dtype as PyTorch does)
DIVISION = {
    "floor_divide": (lambda a, b: a // b, np.floor_divide),
    "remainder": (lambda a, b: a % b, np.remainder),
    "fmod": (ag.fmod, np.fmod),
    "div_trunc": (lambda a, b: ag.div(a, b, rounding_mode="trunc"),
                  lambda a, b: np.trunc(a / b) if a.dtype.kind == "f" else (a - np.fmod(a, b)) // b),
    "div_floor": (lambda a, b: ag.div(a, b, rounding_mode="floor"), np.floor_divide),
}
BITWISE = {
    "bitwise_and": (lambda a, b: a & b, np.bitwise_and),
    "bitwise_or": (lambda a, b: a | b, np.bitwise_or),
    "bitwise_xor": (lambda a, b: a ^ b, np.bitwise_xor),
    "left_shift": (lambda a, b: a << b, np.left_shift),
    "right_shift": (lambda a, b: a >> b, np.right_shift),
}
INTS = np.array([-2**31, -7, -2, -1, 0, 1, 2, 7, 2**31 - 1])
# the ag functions whose values these tables check on every device (tests/ops/test_every_op.py): the rows' names, and
# div (its rounding modes' rows) and bitwise_not (~x, beside each bitwise row)
COVERS = {name for name in (*UNARY, *BINARY, *DIVISION, *BITWISE) if name in functional.__all__} | {"div", "bitwise_not"}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator's NumPy scalars warn at x / 0
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", DIVISION)
def test_division_of_floats_over_every_pair_of_edge_values_is_pythons(name, dtype, device):
    """floor division and remainder as Python's // and % (NumPy's), fmod and trunc as C's; x / 0 is IEEE's."""
    fn, ref = DIVISION[name]
    a, b = X.astype(dtype)[:, None], X.astype(dtype)
    with np.errstate(all="ignore"):
        want = ref(a, b)
    assert_matches(run(fn, a, b, device=device), want, dtype)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator's NumPy scalars warn at x / 0
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.uint8])
@pytest.mark.parametrize("name", DIVISION)
def test_division_of_integers_keeps_the_dtype_and_gives_0_for_a_zero_divisor(name, dtype, device):
    fn, ref = DIVISION[name]
    ints = np.unique(INTS.astype(dtype))
    a, b = ints[:, None], ints
    with np.errstate(all="ignore"):
        want = np.where(b == 0, 0, ref(a, np.where(b == 0, 1, b))).astype(dtype)
    got = run(fn, a, b, device=device)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)


def test_division_examples_as_pytorch():
    a, b = np.array([-7, 7, -7, 7], np.int64), np.array([2, 2, -2, -2], np.int64)
    assert run(lambda a, b: a // b, a, b).tolist() == [-4, 3, 3, -4]
    assert run(lambda a, b: a % b, a, b).tolist() == [1, 1, -1, -1]
    assert run(ag.fmod, a, b).tolist() == [-1, 1, -1, 1]
    assert run(lambda a, b: ag.div(a, b, rounding_mode="trunc"), a, b).tolist() == [-3, 3, 3, -3]
    true = run(lambda a, b: a / b, a, b)
    assert true.dtype == np.float32 and true.tolist() == [-3.5, 3.5, 3.5, -3.5]
    assert run(lambda a: 7 // a + 7 % a, np.array([-2.0, 3.0])).tolist() == [-4.0 - 1.0, 2.0 + 1.0]
    with pytest.raises(ValueError, match="rounding_mode"):
        run(lambda a, b: ag.div(a, b, rounding_mode="round"), a, b)
    with pytest.raises(TypeError, match="integer dtype"):
        run(lambda a, b: a // b, a > 0, b > 0)


@pytest.mark.parametrize("name", ["remainder", "fmod"])
def test_remainder_and_fmod_gradients_pass_gradcheck_and_are_pytorchs(name):
    """d/da = 1, d/db = −⌊a/b⌋ (remainder) or −trunc(a/b) (fmod), as PyTorch's; floor division has none."""
    fn = DIVISION[name][0]
    gradcheck(lambda a, b: ag.sum(fn(a, b) * np.array([1.0, -0.5])), np.array([[-1.3], [0.4], [2.3]]),
              np.array([0.7, -2.2])).raise_if_failed()
    _, (da, db) = ag.value_and_grad(lambda a, b: ag.sum(fn(a, b)), argnums=(0, 1))(
        np.array([5.0, -5.0, 2.0]), np.array([3.0, 3.0, -0.7]))
    assert da.tolist() == [1.0, 1.0, 1.0]
    assert db.tolist() == {"remainder": [-1.0, 2.0, 3.0], "fmod": [-1.0, 1.0, 2.0]}[name]


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64])
@pytest.mark.parametrize("name", BITWISE)
def test_bitwise_ops_and_in_range_shifts_broadcast_as_numpy(name, dtype, device):
    fn, ref = BITWISE[name]
    a = np.unique(INTS.astype(dtype))[:, None]
    b = np.arange(np.iinfo(dtype).bits, dtype=dtype) if "shift" in name else np.unique(INTS.astype(dtype))
    got = run(fn, a, b, device=device)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, ref(a, b))
    np.testing.assert_array_equal(run(lambda x: ~x, a, device=device), np.invert(a))


def test_shifts_beyond_the_width_or_negative_and_bool_operators_are_pytorchs(device):
    a = np.array([5, -5, 7, -8, 1, -1], np.int32)
    by = np.array([31, 31, 32, -1, 40, 33], np.int32)
    assert run(lambda a, b: a << b, a, by, device=device).tolist() == [-2**31, -2**31, 0, 0, 0, 0]
    assert run(lambda a, b: a >> b, a, by, device=device).tolist() == [0, -1, 0, -1, 0, -1]
    assert run(lambda a, b: a << b, np.array([200, 3], np.uint8), np.array([1, 9], np.uint8),
               device=device).tolist() == [144, 0]
    p, q = np.array([True, True, False, False]), np.array([True, False, True, False])
    assert [r.tolist() for r in run(lambda p, q: (p & q, p | q, p ^ q, ~p), p, q, device=device)] == [
        [True, False, False, False], [True, True, True, False], [False, True, True, False], [False, False, True, True]]
    assert run(lambda x: x & 6 | 1, np.array(13, np.int16), device=device).tolist() == 5      # 0-d, Python ints
    assert run(lambda x: x ^ 1, np.zeros((2, 0), np.int32), device=device).shape == (2, 0)
    for op in (lambda x: x & x, lambda x: ~x, lambda x: x << x):
        with pytest.raises(TypeError, match="integer"):
            run(op, np.array([1.0]))
    with pytest.raises(TypeError, match="uint64"):
        run(lambda x: x >> x, np.array([1], np.uint64))


# elementwise functions of the API older than this table, tested in tests/ops/test_elementwise.py and test_unary_functions.py
EARLIER = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "equal", "not_equal", "less", "less_equal",
           "greater", "greater_equal", "logical_and", "logical_or", "neg", "exp", "log", "sqrt", "tanh", "sigmoid",
           "relu", "erf", "abs", "sin", "cos", "rsqrt", "silu", "gelu", "clip", "logical_not", "stop_gradient",
           "astype", "zeros_like", "where"}


def elementwise_only(fn, arity: int) -> bool:
    """Whether ``fn`` of ``arity`` float tensors traces to elementwise primitives only."""
    try:
        graph = ag.trace(fn, **{f"x{i}": ag.Input((2,), "float32") for i in range(arity)})
    except Exception:       # not a function of that many tensors alone
        return False
    return all(REGISTRY[n.op].elementwise for n in graph.nodes if n.kind == "call")


def test_every_elementwise_function_of_the_api_has_a_row():
    rows = set(UNARY) | set(BINARY) | set(DIVISION) | set(BITWISE) | {"bitwise_not"} | EARLIER
    missing = [name for name in functional.__all__ if name != "Tensor" and name not in rows and
               any(elementwise_only(getattr(ag, name), arity) for arity in (1, 2, 3))]
    assert missing == [], "add a row to UNARY or BINARY"
