"""The shape and gather/scatter vocabulary of issue 26 in one table: each case, an op of ``ag`` on a small tensor
and its reference written in NumPy (or as torch defines it, by loops), run on every device in float32 and float64
and on int32, with its gradient against central differences of the float64 reference; gradcheck in float64, 0-d
and size-0 axes where the op takes them, PyTorch's gradients where PyTorch makes a choice (scatter_reduce's
product, mean, amax and amin, with ties and zeros) and the refused arguments. gather and the scatters run on the
primitives take_along_axis and put_along_axis, the others compose getitem, concat, broadcast_to and take."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import BindingError, DTypeError, ShapeError
from attngraph.inspect.gradcheck import gradcheck
from tests.conftest import run, value_and_grad_on


def torch_pad(x, widths, mode="constant", value=0.0):
    """torch.nn.functional.pad by NumPy: pairs from the last axis back, negative widths crop after padding."""
    for k in range(len(widths) // 2):
        axis, before, after = x.ndim - 1 - k, widths[2 * k], widths[2 * k + 1]
        grow = [(0, 0)] * x.ndim
        grow[axis] = (max(before, 0), max(after, 0))
        kind = {"replicate": "edge", "circular": "wrap"}.get(mode, mode)
        x = np.pad(x, grow, kind, **({"constant_values": value} if mode == "constant" else {}))
        n = x.shape[axis]
        x = x[(slice(None),) * axis + (slice(max(-before, 0), n - max(-after, 0)),)]
    return x


def scatter_reduce_loops(x, axis, index, src, reduce, include_self=True):
    """torch.scatter_reduce by loops: each position an index points at is the ``reduce`` of what is sent there and,
    with ``include_self``, its own entry; "assign" (torch.scatter) keeps the last sent."""
    sent = {}
    for p in np.ndindex(index.shape):
        sent.setdefault(p[:axis] + (index[p],) + p[axis + 1:], []).append(src[p])
    out = x.copy()
    for at, values in sent.items():
        values = ([x[at]] if include_self else []) + values
        out[at] = {"assign": values[-1], "sum": sum(values), "prod": np.prod(values), "amax": max(values),
                   "amin": min(values), "mean": sum(values) / len(values)}[reduce]
    return out


def gather_loops(x, axis, index):
    out = np.empty(index.shape, x.dtype)
    for p in np.ndindex(index.shape):
        out[p] = x[p[:axis] + (index[p],) + p[axis + 1:]]
    return out


INDEX = np.array([[[0, 3, 3], [1, 0, 2]], [[2, 2, 0], [3, 1, 1]]])        # (2, 2, 3) into axis 2 of (2, 3, 4)
DISTINCT = np.array([[[0, 3, 1], [1, 0, 2]], [[2, 1, 0], [3, 2, 0]]])
MASK = np.array([[True], [False], [True]])
SHAPE = (2, 3, 4)
# name: (the function of ``ag`` it covers, the op on a (2, 3, 4) tensor, its reference on a NumPy array)
CASES = {
    "flip": ("flip", lambda x: ag.flip(x, (0, -1)), lambda x: np.flip(x, (0, 2))),
    "flip_0_d_axis": ("flip", lambda x: ag.flip(x, 1), lambda x: x[:, ::-1]),
    "roll": ("roll", lambda x: ag.roll(x, (1, -5), (0, -1)), lambda x: np.roll(x, (1, -5), (0, 2))),
    "roll_flat": ("roll", lambda x: ag.roll(x, 5), lambda x: np.roll(x, 5)),
    "repeat": ("repeat", lambda x: ag.repeat(x, 2, 1, 1, 2), lambda x: np.tile(x, (2, 1, 1, 2))),
    "repeat_method": ("repeat", lambda x: x.repeat((1, 0, 2)), lambda x: np.tile(x, (1, 0, 2))),
    "repeat_interleave": ("repeat_interleave", lambda x: ag.repeat_interleave(x, 2, -2), lambda x: np.repeat(x, 2, 1)),
    "repeat_interleave_counts": ("repeat_interleave", lambda x: ag.repeat_interleave(x, np.array([1, 0, 3]), 1),
                                 lambda x: np.repeat(x, [1, 0, 3], 1)),
    "repeat_interleave_flat": ("repeat_interleave", lambda x: ag.repeat_interleave(x, 2), lambda x: np.repeat(x, 2)),
    "chunk": ("chunk", lambda x: ag.concat(ag.chunk(x, 3, -1)[::-1], -1),        # sizes 2, 2: two parts, not three
              lambda x: np.concatenate([x[..., 2:], x[..., :2]], -1)),
    "unflatten": ("unflatten", lambda x: ag.unflatten(x, -1, (2, -1)), lambda x: x.reshape(2, 3, 2, 2)),
    "diagonal": ("diagonal", lambda x: ag.diagonal(x, 1, 1, 2), lambda x: np.diagonal(x, 1, 1, 2)),
    "diagonal_below": ("diagonal", lambda x: ag.diagonal(x, -1, -1, 0), lambda x: np.diagonal(x, -1, 2, 0)),
    "diagonal_empty": ("diagonal", lambda x: ag.diagonal(x, 5), lambda x: np.diagonal(x, 5)),
    "diag_of_a_vector": ("diag", lambda x: ag.diag(x[0, 1], 1), lambda x: np.diag(x[0, 1], 1)),
    "diag_below": ("diag", lambda x: ag.diag(x[1, 2], -2), lambda x: np.diag(x[1, 2], -2)),
    "diag_of_a_matrix": ("diag", lambda x: ag.diag(x[0], -1), lambda x: np.diag(x[0], -1)),
    "pad_constant": ("pad", lambda x: ag.pad(x, (1, 2, -1, 1), value=7), lambda x: torch_pad(x, (1, 2, -1, 1), value=7)),
    "pad_reflect": ("pad", lambda x: ag.pad(x, (3, 1, 2, -1), "reflect"), lambda x: torch_pad(x, (3, 1, 2, -1), "reflect")),
    "pad_replicate": ("pad", lambda x: ag.pad(x, (2, 3, 0, 1, 1, 0), "replicate"),
                      lambda x: torch_pad(x, (2, 3, 0, 1, 1, 0), "replicate")),
    "pad_circular": ("pad", lambda x: ag.pad(x, (4, 1, 1, 3), "circular"), lambda x: torch_pad(x, (4, 1, 1, 3), "circular")),
    "index_select": ("index_select", lambda x: ag.index_select(x, 2, np.array([3, 0, 3])), lambda x: x[:, :, [3, 0, 3]]),
    "masked_fill": ("masked_fill", lambda x: ag.masked_fill(x, MASK, 5), lambda x: np.where(MASK, 5, x)),
    "gather": ("gather", lambda x: ag.gather(x, -1, INDEX), lambda x: gather_loops(x, 2, INDEX)),
    "gather_short_index": ("gather", lambda x: ag.gather(x, 0, INDEX[:, :1, :2] % 2),
                           lambda x: gather_loops(x, 0, INDEX[:, :1, :2] % 2)),
    "scatter": ("scatter", lambda x: ag.scatter(x, 2, DISTINCT, x[:, :2, 1:]),          # repeats: their own test
                lambda x: scatter_reduce_loops(x, 2, DISTINCT, x[:, :2, 1:], "assign")),
    "scatter_value": ("scatter", lambda x: ag.scatter(x, 2, INDEX, value=-3),
                      lambda x: scatter_reduce_loops(x, 2, INDEX, np.full(INDEX.shape, -3, x.dtype), "assign")),
    "scatter_add": ("scatter_add", lambda x: ag.scatter_add(x, 2, INDEX, x[:, 1:, :3] * 2),
                    lambda x: scatter_reduce_loops(x, 2, INDEX, x[:, 1:, :3] * 2, "sum")),
    **{f"scatter_reduce_{reduce}{'' if self else '_without_self'}": (
        "scatter_reduce", lambda x, r=reduce, s=self: ag.scatter_reduce(x, 2, INDEX, x[:, 1:, 1:] + 1, r, include_self=s),
        lambda x, r=reduce, s=self: scatter_reduce_loops(x, 2, INDEX, x[:, 1:, 1:] + 1, r, s))
       for reduce in ("sum", "prod", "mean", "amax", "amin") for self in (True, False)},
}
COVERS = {name for name, _, _ in CASES.values()}
INTEGER = [name for name in CASES if "mean" not in name]      # torch's integer mean rounds down: its own test


def values(dtype):
    return (np.random.default_rng(0).standard_normal(SHAPE) * 4).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", CASES)
def test_values_are_the_references(name, dtype, device):
    _, fn, ref = CASES[name]
    x = values(dtype)
    got, want = run(fn, x, device=device), ref(x)
    assert got.shape == want.shape and got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-13)


@pytest.mark.parametrize("name", INTEGER)
def test_integer_tensors_keep_their_dtype_and_values(name, device):
    _, fn, ref = CASES[name]
    x = values(np.float64).astype(np.int32)
    got = run(fn, x, device=device)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, ref(x))


def central_differences(ref, x, weights, h=1e-6):
    grad = np.zeros_like(x)
    for p in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[p] = h
        grad[p] = (np.sum(ref(x + step) * weights) - np.sum(ref(x - step) * weights)) / (2 * h)
    return grad


@pytest.mark.parametrize("name", CASES)
def test_gradients_are_the_references_slopes(name, device):
    """Away from ties, each entry's gradient is the slope of the weighted reference: what it is copied, reflected
    or scattered into, accumulated."""
    _, fn, ref = CASES[name]
    x = values(np.float64)
    weights = np.random.default_rng(1).standard_normal(ref(x).shape)
    _, (grad,) = value_and_grad_on(device, lambda t: ag.sum(fn(t) * weights), x)
    np.testing.assert_allclose(grad, central_differences(ref, x, weights), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", CASES)
def test_gradients_pass_gradcheck_in_float64(name):
    _, fn, ref = CASES[name]
    weights = np.random.default_rng(1).standard_normal(ref(values(np.float64)).shape)
    gradcheck(lambda t: ag.sum(fn(t) * weights), values(np.float64)).raise_if_failed()


# PyTorch 2.13's x.scatter_reduce(1, INDEX2, SRC, reduce, include_self) and the gradients of (y * W).sum(): ties
# between x and src, zeros in x and src
X2 = np.array([[1., 3., 0.], [2., 2., 5.]])
INDEX2 = np.array([[0, 0, 1, 1], [2, 2, 2, 0]])
SRC = np.array([[3., 3., 0., 4.], [5., 2., 0., 2.]])
W = np.array([[1., -2., 0.5], [1.5, 1., -1.]])
TORCH = {
    ("sum", True): ([[7, 7, 0], [4, 2, 12]], [[1, -2, 0.5], [1.5, 1, -1]], [[1, 1, -2, -2], [-1, -1, -1, 1.5]]),
    ("sum", False): ([[6, 4, 0], [2, 2, 7]], [[0, 0, 0.5], [0, 1, 0]], [[1, 1, -2, -2], [-1, -1, -1, 1.5]]),
    ("prod", True): ([[9, 0, 0], [4, 2, 0]], [[9, 0, 0.5], [3, 1, 0]], [[3, 3, -24, 0], [0, 0, -50, 3]]),
    ("prod", False): ([[9, 0, 0], [2, 2, 0]], [[0, 0, 0.5], [0, 1, 0]], [[3, 3, -8, 0], [0, 0, -10, 1.5]]),
    ("mean", True): ([[7 / 3, 7 / 3, 0], [2, 2, 3]], [[1 / 3, -2 / 3, 0.5], [0.75, 1, -0.25]],
                     [[1 / 3, 1 / 3, -2 / 3, -2 / 3], [-0.25, -0.25, -0.25, 0.75]]),
    ("mean", False): ([[3, 2, 0], [2, 2, 7 / 3]], [[0, 0, 0.5], [0, 1, 0]],
                      [[0.5, 0.5, -1, -1], [-1 / 3, -1 / 3, -1 / 3, 1.5]]),
    ("amax", True): ([[3, 4, 0], [2, 2, 5]], [[0, 0, 0.5], [0.75, 1, -0.5]], [[0.5, 0.5, 0, -2], [-0.5, 0, 0, 0.75]]),
    # torch counts the excluded x[1, 0] = 2 and x[1, 2] = 5 as ties and halves src[1, 3]'s and src[1, 0]'s shares
    # (0.75, -0.5); attngraph shares among what the maximum was taken over (README: differences from PyTorch)
    ("amax", False): ([[3, 4, 0], [2, 2, 5]], [[0, 0, 0.5], [0, 1, 0]], [[0.5, 0.5, 0, -2], [-1, 0, 0, 1.5]]),
    ("amin", True): ([[1, 0, 0], [2, 2, 0]], [[1, 0, 0.5], [0.75, 1, 0]], [[0, 0, -2, 0], [0, 0, -1, 0.75]]),
    ("amin", False): ([[3, 0, 0], [2, 2, 0]], [[0, 0, 0.5], [0, 1, 0]], [[0.5, 0.5, -2, 0], [0, 0, -1, 1.5]]),  # torch 0.75
}


@pytest.mark.parametrize("case", TORCH, ids=str)
def test_scatter_reduce_values_and_gradients_with_ties_and_zeros_are_pytorchs(case, device):
    reduce, include_self = case
    want, dx, dsrc = TORCH[case]
    fn = lambda x, s: ag.scatter_reduce(x, 1, INDEX2, s, reduce, include_self=include_self)      # noqa: E731
    np.testing.assert_allclose(run(fn, X2, SRC, device=device), want, rtol=1e-12)
    _, grads = value_and_grad_on(device, lambda x, s: ag.sum(fn(x, s) * W), X2, SRC)
    np.testing.assert_allclose(grads[0], dx, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(grads[1], dsrc, rtol=1e-12, atol=1e-15)


def test_scatter_with_repeated_positions_keeps_the_last_and_gathers_every_gradient(device):
    """torch.scatter: which repeated write wins is unspecified there, the last here; every src entry gets the
    output's gradient at its position (torch's numbers)."""
    fn = lambda x, s: ag.scatter(x, 1, INDEX2, s)       # noqa: E731
    np.testing.assert_array_equal(run(fn, X2, SRC, device=device), [[3, 4, 0], [2, 2, 0]])
    _, (dx, dsrc) = value_and_grad_on(device, lambda x, s: ag.sum(fn(x, s) * W), X2, SRC)
    np.testing.assert_array_equal(dx, [[0, 0, 0.5], [0, 1, 0]])
    np.testing.assert_array_equal(dsrc, [[1, 1, -2, -2], [-1, -1, -1, 1.5]])


def test_integer_mean_rounds_down_as_pytorchs(device):
    got = run(lambda x: ag.scatter_reduce(x, 0, np.array([0, 0, 1]), np.array([4, 4, 5], np.int64), "mean"),
              np.array([1, 2, 3], np.int64), device=device)
    assert got.dtype == np.int64 and got.tolist() == [3, 3, 3]


def test_nan_wins_amax_and_amin(device):
    for reduce, want in (("amax", [np.nan, 5, 3]), ("amin", [np.nan, 2, 3])):
        got = run(lambda x, s: ag.scatter_reduce(x, 0, np.array([0, 0, 1]), s, reduce), np.array([1.0, 2, 3]),
                  np.array([np.nan, 4, 5]), device=device)
        np.testing.assert_array_equal(got, want)


def test_0_d_and_empty_tensors():
    scalar = np.array(2.5)
    assert run(lambda x: ag.flip(x, 0), scalar).tolist() == 2.5
    assert run(lambda x: ag.roll(x, 3), scalar).tolist() == 2.5
    assert run(lambda x: ag.repeat(x, 2, 3), scalar).tolist() == [[2.5] * 3] * 2
    assert run(lambda x: ag.gather(x, 0, np.array(0)), scalar).shape == ()
    assert run(lambda x: ag.scatter(x, 0, np.array(0), value=1.0), scalar).tolist() == 1.0
    assert run(lambda x: ag.index_select(x, 0, np.array([0, 0])), scalar).tolist() == [2.5, 2.5]
    assert run(lambda x: ag.masked_fill(x, np.array(True), 1.0), scalar).tolist() == 1.0
    empty = np.zeros((2, 0, 3))
    assert run(lambda x: ag.flip(x, 1), empty).shape == (2, 0, 3)
    assert run(lambda x: ag.roll(x, 1, 1), empty).shape == (2, 0, 3)
    assert run(lambda x: ag.pad(x, (1, 1, 2, 0)), empty).shape == (2, 2, 5)
    assert [p.shape for p in run(lambda x: tuple(ag.chunk(x, 3, 1)), empty)] == [(2, 0, 3)] * 3
    assert run(lambda x: ag.repeat_interleave(x, 3, 1), empty).shape == (2, 0, 3)
    assert run(lambda x: ag.diag(x[0, :, 0], 2), empty).tolist() == [[0, 0], [0, 0]]
    assert run(lambda x: ag.gather(x, 1, np.zeros((2, 0, 3), np.int64)), empty).shape == (2, 0, 3)


def test_chunk_gives_torchs_parts():
    x = np.arange(6.0)
    assert [p.tolist() for p in run(lambda t: tuple(ag.chunk(t, 4)), x)] == [[0, 1], [2, 3], [4, 5]]
    assert [len(p) for p in run(lambda t: tuple(ag.chunk(t, 4)), np.arange(5.0))] == [2, 2, 1]


REFUSED = {
    "pad_odd": (lambda x: ag.pad(x, (1,)), ShapeError, "pairs"),
    "pad_mode": (lambda x: ag.pad(x, (1, 1), "mirror"), ShapeError, "mode"),
    "pad_reflect_wide": (lambda x: ag.pad(x, (4, 0), "reflect"), ShapeError, "reflect mode takes widths of at most 3"),
    "pad_circular_wide": (lambda x: ag.pad(x, (0, 5), "circular"), ShapeError, "at most 4"),
    "pad_value_with_mode": (lambda x: ag.pad(x, (1, 1), "replicate", value=1.0), ShapeError, "no value"),
    "pad_crop_too_much": (lambda x: ag.pad(x, (-3, -2)), ShapeError, "crops more"),
    "flip_axis": (lambda x: ag.flip(x, 3), ShapeError, "axis 3"),
    "flip_repeated": (lambda x: ag.flip(x, (0, -3)), ShapeError, "repeated"),
    "roll_lengths": (lambda x: ag.roll(x, (1, 2), 0), ShapeError, "one shift per axis"),
    "roll_float": (lambda x: ag.roll(x, 1.5), ShapeError, "shifts"),
    "repeat_few": (lambda x: ag.repeat(x, 2, 2), ShapeError, "at least one size per axis"),
    "repeat_negative": (lambda x: ag.repeat(x, 1, -1, 1), ShapeError, ">= 0"),
    "repeat_interleave_negative": (lambda x: ag.repeat_interleave(x, -1, 0), ShapeError, "ints >= 0"),
    "repeat_interleave_length": (lambda x: ag.repeat_interleave(x, [1, 2, 3], 0), ShapeError, "one count per entry"),
    "repeat_interleave_tensor": (lambda x: ag.repeat_interleave(x, ag.argmax(x), 0), ag.TracingError, "depend"),
    "chunk_zero": (lambda x: ag.chunk(x, 0), ShapeError, "chunks"),
    "unflatten_size": (lambda x: ag.unflatten(x, 2, (3, 2)), ShapeError, "cannot split axis 2"),
    "unflatten_two_unknowns": (lambda x: ag.unflatten(x, 2, (-1, -1)), ShapeError, "at most one -1"),
    "diagonal_same_axis": (lambda x: ag.diagonal(x, 0, 1, -2), ShapeError, "repeated"),
    "diag_3_d": (lambda x: ag.diag(x), ShapeError, "1-D or 2-D"),
    "gather_rank": (lambda x: ag.gather(x, 1, np.zeros((2, 3), np.int64)), ShapeError, "3 dimensions"),
    "gather_longer": (lambda x: ag.gather(x, 1, np.zeros((3, 1, 1), np.int64)), ShapeError, "longer"),
    "gather_float_index": (lambda x: ag.gather(x, 1, np.zeros((1, 1, 1))), DTypeError, "integers"),
    "gather_bounds": (lambda x: ag.gather(x, 1, np.full((1, 1, 1), 3)), ShapeError, "axis 1 with size 3"),
    "gather_negative": (lambda x: ag.gather(x, 2, np.full((1, 1, 1), -1)), ShapeError, "index -1 is out of bounds"),
    "scatter_both": (lambda x: ag.scatter(x, 1, np.zeros((1, 1, 1), np.int64), x, value=1.0), ShapeError, "either"),
    "scatter_small_src": (lambda x: ag.scatter(x, 1, np.zeros((2, 2, 2), np.int64), x[:1]), ShapeError, "at least"),
    "scatter_reduce_mode": (lambda x: ag.scatter_reduce(x, 1, np.zeros((1, 1, 1), np.int64), x, "max"), ShapeError,
                            "'amax'"),
    "scatter_dtype": (lambda x: ag.scatter_add(x, 1, np.zeros((1, 1, 1), np.int64), x.astype("float64")), DTypeError,
                      "dtypes"),
    "index_select_2_d": (lambda x: ag.index_select(x, 0, np.zeros((1, 1), np.int64)), ShapeError, "1-D index"),
    "masked_fill_mask_dtype": (lambda x: ag.masked_fill(x, np.ones(4), 0.0), DTypeError, "bool"),
    "masked_fill_mask_shape": (lambda x: ag.masked_fill(x, np.ones((5, 1, 1, 1), bool), 0.0), ShapeError,
                               "does not broadcast"),
    "masked_fill_value_shape": (lambda x: ag.masked_fill(x, np.ones(4, bool), np.ones(2)), ShapeError, "0-d"),
}


@pytest.mark.parametrize("name", REFUSED)
def test_bad_arguments_are_refused_while_tracing_naming_the_op(name):
    fn, error, words = REFUSED[name]
    with pytest.raises(error, match=words):
        ag.trace(fn, x=ag.Input(SHAPE))


def test_an_index_fed_out_of_range_is_a_binding_error_naming_the_axis(device):
    graph = ag.trace(lambda x, i: ag.gather(x, 1, i), x=ag.Input((2, 3)), i=ag.Input((2, 1), "int64"))
    with pytest.raises(BindingError, match="index 3 is out of bounds for axis 1 with size 3"):
        graph.compile(device.name)(x=np.zeros((2, 3), np.float32), i=np.array([[0], [3]]))
    graph = ag.trace(lambda x, i: ag.scatter_add(x, 0, i, x), x=ag.Input((2, 3)), i=ag.Input((2, 3), "int64"))
    with pytest.raises(BindingError, match="index -1 is out of bounds for axis 0 with size 2"):
        graph.compile(device.name)(x=np.zeros((2, 3), np.float32), i=np.full((2, 3), -1))
