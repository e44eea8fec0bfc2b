"""NaN and Inf through the numeric kernels (CPU), as PyTorch 2.13 gives them unless the kernels' docstrings
say otherwise: a NaN or +inf among the entries a softmax row takes part in makes that row NaN, forward and
backward, and nothing else; masked-out entries never matter; layer norm of a NaN row is NaN, of a constant row
exactly its bias; GELU saturates to 0 or x with gradient 0 or 1. The last section checks the same semantics on
every device, each against a float64 NumPy reference.
"""
import numpy as np
import pytest

import attngraph as ag
from ops.cpu import attention as att
from ops.cpu import cross_entropy as xent
from ops.cpu import gelu as gl
from ops.cpu import layer_norm as ln
from ops.cpu import softmax as sm
from tests.conftest import on_device
from tests.ops import test_attention, test_gelu

DTYPES = pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
BAD = pytest.mark.parametrize("bad", [np.nan, np.inf], ids=["nan", "inf"])
POSITION = pytest.mark.parametrize("position", [0, 17, 36], ids=["first", "middle", "last"])
KIND = pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
ROWS, WIDTH = 4, 37             # an odd width: the bad entry lands in a vector body and in a remainder loop


def data(dtype, seed=0, shape=(ROWS, WIDTH)):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype) * 2


def softmax_pair(log, x, g, mask=None, causal=False):
    """(y, dx) of softmax or log_softmax for the output gradient g."""
    if log:
        y = sm.log_softmax(x, mask, causal)
        return y, sm.log_softmax_backward(g, y, mask, causal)
    y = sm.softmax(x, mask, causal)
    return y, sm.softmax_backward(g, y)


@KIND
@DTYPES
@BAD
@POSITION
def test_softmax_row_with_nan_or_inf_is_nan_and_only_that_row(log, dtype, bad, position):
    x, g = data(dtype), data(dtype, 1)
    mask = np.ones((ROWS, WIDTH), bool)
    mask[1, 5] = False                                # a masked entry in the bad row stays 0
    clean = softmax_pair(log, x, g, mask)
    x[1, position] = bad
    for got, want in zip(softmax_pair(log, x, g, mask), clean):
        assert np.isnan(np.delete(got[1], 5)).all() and got[1, 5] == 0
        np.testing.assert_array_equal(np.delete(got, 1, 0), np.delete(want, 1, 0))


@KIND
@DTYPES
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, 1e30], ids=["nan", "inf", "-inf", "huge"])
@pytest.mark.parametrize("masking", ["mask", "causal"])
def test_masked_out_scores_change_nothing(log, dtype, value, masking):
    x, g = data(dtype, shape=(3, 5)), data(dtype, 1, shape=(3, 5))
    mask = np.ones((3, 5), bool)
    mask[0, 4] = False                               # with causal (Tq 3, Tk 5) query 0 sees keys 0..2 only
    args = (mask, False) if masking == "mask" else (None, True)
    want = softmax_pair(log, x, g, *args)
    x[0, 4] = value
    for got, expected in zip(softmax_pair(log, x, g, *args), want):
        np.testing.assert_array_equal(got, expected)
        assert got[0, 4] == 0


@DTYPES
def test_minus_inf_takes_no_probability(dtype):
    """As PyTorch: softmax 0 and gradient 0; log_softmax -inf and gradient g."""
    x = np.array([[-np.inf, 1, 2]], dtype)
    g = np.array([[1, 2, 3]], dtype)
    (y, dy), (ly, dly) = softmax_pair(False, x, g), softmax_pair(True, x, g)
    p = np.exp([1, 2]) / np.exp([1, 2]).sum()
    tol = dict(rtol=1e-6 if dtype == np.float32 else 1e-14)
    np.testing.assert_allclose(y, [[0, *p]], **tol)
    np.testing.assert_allclose(dy, [[0, *(p * ([2, 3] - p @ [2, 3]))]], **tol)
    np.testing.assert_allclose(ly, [[-np.inf, *np.log(p)]], **tol)
    np.testing.assert_allclose(dly, [[1, *([2, 3] - 6 * p)]], **tol)


@DTYPES
def test_softmax_backward_is_zero_where_the_probability_is_zero_even_in_a_nan_row(dtype):
    y = np.array([[0.25, 0, np.nan, 0.75]], dtype)
    dx = sm.softmax_backward(np.ones_like(y), y)
    assert dx[0, 1] == 0 and np.isnan(dx[0, [0, 2, 3]]).all()


# cross-entropy

@DTYPES
@BAD
@pytest.mark.parametrize("column", ["target", "other"])
def test_cross_entropy_row_with_nan_or_inf_makes_the_loss_and_its_gradient_row_nan(dtype, bad, column):
    logits, targets = data(dtype), np.array([3, 0, 36, 5])
    one = np.asarray(dtype(1))
    clean = xent.cross_entropy_backward(one, logits, targets)
    logits[2, 36 if column == "target" else 7] = bad
    assert np.isnan(xent.cross_entropy(logits, targets))
    grad = xent.cross_entropy_backward(one, logits, targets)
    assert np.isnan(grad[2]).all()
    np.testing.assert_array_equal(np.delete(grad, 2, 0), np.delete(clean, 2, 0))


@DTYPES
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
def test_cross_entropy_never_reads_an_ignored_row(dtype, value):
    """The loss as PyTorch's; the ignored row's gradient 0 where PyTorch's is NaN (0 · NaN in its backward)."""
    logits, targets = data(dtype), np.array([3, -100, 36, 5])
    kept = [0, 2, 3]
    one = np.asarray(dtype(1))
    want = xent.cross_entropy(logits[kept], targets[kept], -100)
    want_grad = xent.cross_entropy_backward(one, logits[kept], targets[kept], -100)
    logits[1] = value
    assert xent.cross_entropy(logits, targets, -100) == want
    grad = xent.cross_entropy_backward(one, logits, targets, -100)
    np.testing.assert_array_equal(grad[1], 0)
    np.testing.assert_array_equal(grad[kept], want_grad)


@DTYPES
def test_cross_entropy_minus_inf_logits(dtype):
    """As PyTorch: -inf at the target gives an infinite loss and a finite gradient; elsewhere probability 0."""
    logits = np.array([[1, -np.inf, 2], [-np.inf, 1, 2]], dtype)
    targets = np.array([1, 2])
    assert xent.cross_entropy(logits, targets) == np.inf
    p0, p1 = np.exp([1, 0, 2]) / np.exp([1, 2]).sum(), np.exp([0, 1, 2]) / np.exp([1, 2]).sum()
    p0[1] = p1[0] = 0
    np.testing.assert_allclose(xent.cross_entropy_backward(np.asarray(dtype(2)), logits, targets),
                               [p0 - [0, 1, 0], p1 - [0, 0, 1]], rtol=1e-6 if dtype == np.float32 else 1e-14)
    assert np.isfinite(xent.cross_entropy(logits, np.array([0, 2])))


# layer norm

def layer_norm_all(x, g, w, b, eps=1e-5):
    """(y, dx, dweight, dbias)"""
    params = ln.layer_norm_params_backward(g, x, eps)
    return ln.layer_norm(x, w, b, eps), ln.layer_norm_backward(g, x, w, eps), params[0], params[1]


@DTYPES
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
@POSITION
def test_layer_norm_row_with_nan_or_inf_is_nan_and_only_that_row(dtype, bad, position):
    """As PyTorch: the row's y and dx NaN, dweight NaN (a sum over rows), dbias unchanged."""
    x, g, (w, b) = data(dtype), data(dtype, 1), data(dtype, 2, (2, WIDTH))
    y0, dx0, dw0, db0 = layer_norm_all(x, g, w, b)
    x[2, position] = bad
    y, dx, dw, db = layer_norm_all(x, g, w, b)
    assert np.isnan(y[2]).all() and np.isnan(dx[2]).all() and np.isnan(dw).all()
    np.testing.assert_array_equal(np.delete(y, 2, 0), np.delete(y0, 2, 0))
    np.testing.assert_array_equal(np.delete(dx, 2, 0), np.delete(dx0, 2, 0))
    np.testing.assert_array_equal(db, db0)


@DTYPES
@pytest.mark.parametrize("value", [0.0, 0.1, -31.06, 1e4 / 3, 7e-20, -6e15])
@pytest.mark.parametrize("width", [1, 7, 1023])
def test_layer_norm_of_a_constant_row_is_exactly_the_bias(dtype, value, width):
    x = np.full((2, width), value, dtype)
    b = np.linspace(-1, 1, width).astype(dtype)
    np.testing.assert_array_equal(ln.layer_norm(x, np.full(width, 3, dtype), b), np.broadcast_to(b, x.shape))


@DTYPES
def test_layer_norm_with_eps_zero(dtype):
    """As PyTorch: a constant row is 0 / 0 = NaN (y, dx and dweight); other rows are normalized by the plain
    standard deviation."""
    x, g, (w, b) = data(dtype, shape=(2, 5)), data(dtype, 1, (2, 5)), data(dtype, 2, (2, 5))
    x[0] = 3
    y, dx, dw, db = layer_norm_all(x, g, w, b, eps=0.0)
    assert np.isnan(y[0]).all() and np.isnan(dx[0]).all() and np.isnan(dw).all() and np.isfinite(db).all()
    x1 = x[1].astype(np.float64)
    np.testing.assert_allclose(y[1], (x1 - x1.mean()) / x1.std() * w + b, rtol=1e-5 if dtype == np.float32 else 1e-13)


@DTYPES
def test_layer_norm_of_an_empty_last_axis_is_empty(dtype):
    x = np.zeros((3, 0), dtype)
    y, dx, dw, db = layer_norm_all(x, x, np.ones(0, dtype), np.zeros(0, dtype))
    assert y.shape == dx.shape == (3, 0) and dw.shape == db.shape == (0,)
    value, grad = ag.value_and_grad(lambda v: ag.sum(ag.layer_norm(v)))(x)
    assert value == 0 and grad.shape == (3, 0)


@pytest.mark.parametrize("eps", [-1e-5, np.nan, np.inf])
def test_layer_norm_refuses_an_eps_that_is_not_finite_and_non_negative(eps):
    with pytest.raises(ValueError, match="eps must be a finite number >= 0"):
        ag.trace(lambda x: ag.layer_norm(x, eps=eps), x=ag.Input((2, 3)))


# GELU

EXTREMES = np.array([-np.inf, -1e30, -1e6, -40, -33, -10.5, 10.5, 33, 40, 1e6, 1e30, np.inf])


@DTYPES
@pytest.mark.parametrize("exact", [True, False], ids=["erf", "tanh"])
@pytest.mark.parametrize("sign", [-1, 1], ids=["negative", "positive"])
def test_gelu_saturates_to_zero_or_x_with_gradient_zero_or_one(dtype, exact, sign):
    """As PyTorch for finite x; for x = ±inf the limits (PyTorch gives NaN for gelu(-inf) and GELU'(±inf))."""
    x = EXTREMES[np.sign(EXTREMES) == sign].astype(dtype)[None]
    y, dx = gl.gelu(x, exact=exact), gl.gelu_backward(np.full_like(x, 2), x, exact=exact)
    np.testing.assert_array_equal(y, x if sign > 0 else 0)
    np.testing.assert_array_equal(dx, 2 if sign > 0 else 0)


@DTYPES
@pytest.mark.parametrize("exact", [True, False], ids=["erf", "tanh"])
def test_gelu_of_nan_is_nan_and_its_neighbours_are_untouched(dtype, exact):
    x = np.array([[0.5, np.nan, -2.0]], dtype)
    bias = np.array([0, 0, 1], dtype)
    y, dx = gl.gelu(x, bias, exact), gl.gelu_backward(np.ones_like(x), x, bias, exact)
    assert np.isnan(y[0, 1]) and np.isnan(dx[0, 1])
    np.testing.assert_allclose(y[:, [0, 2]], gl.gelu(x[:, [0, 2]], bias[[0, 2]], exact), rtol=1e-6)
    assert np.isfinite(dx[:, [0, 2]]).all()


# fused attention

def attention_all(q, k, v, g, mask=None, causal=False):
    """(o, dq, dk, dv)"""
    o = att.attention(q, k, v, mask, causal)
    grads = att.attention_backward(g, o, q, k, v, mask, causal)
    return (o, *grads)


def heads(dtype, seed=0):
    """q, k, v and an output gradient: 2 heads of 5 queries and 5 keys of 3 features"""
    return [data(dtype, seed + i, (2, 5, 3)) / 2 for i in range(4)]


@DTYPES
@pytest.mark.parametrize("operand", ["q", "score"])
@BAD
def test_attention_query_seeing_a_nan_or_inf_score_is_nan_and_only_it(dtype, operand, bad):
    """A NaN or inf in q, or a score made NaN or +inf by overflow, for query 2 of head 1: its output and dq
    rows are NaN; every other output and dq row is as before; dv is NaN exactly at the keys that query sees,
    and so is dk when q itself is finite (a NaN q row reaches every dk through dk += dSᵀ q, 0 · NaN)."""
    q, k, v, g = heads(dtype)
    mask = np.ones((5, 5), bool)
    mask[2, 4] = False
    k[1, 0, 0] = 1                  # q[1, 2, 0] = inf makes a score +inf
    big = np.finfo(dtype).max ** 0.75
    if operand == "score":          # q·k_1 overflows to inf (or inf - inf = NaN); other queries' stay finite
        k[1, 1] = np.array([big, big if bad == np.inf else -big, 0]) / np.sqrt(big)
    o0, dq0, _, _ = attention_all(q, k, v, g, mask)
    if operand == "q":
        q[1, 2, 0] = bad
    else:
        q[1, 2] = [big, big, 0]
    o, dq, dk, dv = attention_all(q, k, v, g, mask)
    assert np.isnan(o[1, 2]).all() and np.isnan(dq[1, 2]).all()
    others = np.ones(o.shape[:2], bool)
    others[1, 2] = False
    np.testing.assert_array_equal(o[others], o0[others])
    np.testing.assert_array_equal(dq[others], dq0[others])
    seen = np.zeros(o.shape[:2], bool)
    seen[1, :4] = True
    assert np.isnan(dv[seen]).all() and np.isfinite(dv[~seen]).all()
    if operand == "score":
        assert np.isnan(dk[seen]).all() and np.isfinite(dk[~seen]).all()


@DTYPES
@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
@pytest.mark.parametrize("causal", [False, True], ids=["mask", "causal"])
def test_attention_masked_out_overflowing_score_changes_nothing(dtype, value, causal):
    """Key 4 meets query 0 with a score of +inf, -inf or NaN (inf - inf) and the mask, or causality, hides it
    from query 0: the outputs and dv are those of a key 4 of zeros. Every other score is 0 or moderate (query 0
    and key 4 lie in a feature plane orthogonal to the other queries and keys)."""
    q, k, v, g = heads(dtype)
    mask = np.ones((5, 5), bool)
    mask[0, 4] = False
    mask = None if causal else mask
    big = 2 * np.finfo(dtype).max ** 0.5
    q[:, 0], q[:, 1:, :2], k[:, :, :2], k[:, 4] = [big, big, 0], 0, 0, 0
    o0, _, _, dv0 = attention_all(q, k, v, g, mask, causal)
    k[:, 4] = {"inf": [big, big, 0], "-inf": [-big, -big, 0], "nan": [big, -big, 0]}[value]
    o, dq, dk, dv = attention_all(q, k, v, g, mask, causal)
    for a in (o, dq, dk, dv):
        assert np.isfinite(a).all()
    np.testing.assert_array_equal(o, o0)
    np.testing.assert_array_equal(dv, dv0)


@DTYPES
def test_attention_fully_masked_query_gives_zeros_even_beside_nan_scores(dtype):
    q, k, v, g = heads(dtype)
    mask = np.ones((5, 5), bool)
    mask[3] = False
    q[:, 3] = np.nan                            # every score of query 3 is NaN, and masked
    o, dq, dk, dv = attention_all(q, k, v, g, mask)
    np.testing.assert_array_equal(o[:, 3], 0)
    np.testing.assert_array_equal(dq[:, 3], 0)
    assert np.isfinite(np.delete(o, 3, 1)).all() and np.isfinite(dv).all()


# through graphs

@DTYPES
def test_nan_propagates_through_graph_gradients(dtype):
    """value_and_grad over softmax, layer norm and cross-entropy: a NaN in one row of x leaves the other rows'
    gradients as they were."""
    def loss(x):
        return ag.cross_entropy(ag.log_softmax(ag.layer_norm(x)) * 2, np.array([1, 2, 0, 4]))

    x = data(dtype, shape=(4, 6))
    _, clean = ag.value_and_grad(loss)(x)
    x[2, 3] = np.nan
    value, grad = ag.value_and_grad(loss)(x)
    assert np.isnan(value) and np.isnan(grad[2]).all()
    np.testing.assert_allclose(np.delete(grad, 2, 0), np.delete(clean, 2, 0), rtol=1e-5)


def test_debug_mode_names_the_layer_norm_that_made_the_first_nan():
    graph = ag.trace(lambda x: ag.sum(ag.softmax(ag.layer_norm(x, eps=0.0))), x=ag.Input((2, 3)))
    run = graph.compile()
    x = np.array([[1, 2, 3], [4, 4, 4]], np.float32)          # a constant row with eps = 0: 0 / 0
    assert np.isnan(run(x=x))
    with ag.debug(), pytest.raises(ag.NonFiniteError, match="NaN in the output of .*layer_norm"):
        run(x=x)


# elementwise and reductions

SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, 1.0, -50.0, 100.0, 1e30, -1e30])
UNARY = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "neg": np.negative,
         "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.where(x <= 0, 0, x)}


@DTYPES
@pytest.mark.parametrize("op", UNARY)
def test_unary_ops_take_nan_and_inf_as_numpy_does(dtype, op):
    x = SPECIALS.astype(dtype)
    with np.errstate(all="ignore"):                        # NumPy's ufunc loops flag invalid and overflow
        want = UNARY[op](x).astype(dtype)
        got = ag.trace(getattr(ag, op), x=x).compile()(x=x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, equal_nan=True)


@DTYPES
def test_relu_passes_the_gradient_of_a_nan_on_as_pytorch(dtype):
    _, grad = ag.value_and_grad(lambda x: ag.sum(ag.relu(x)))(SPECIALS.astype(dtype))
    np.testing.assert_array_equal(grad, [1, 1, 0, 0, 1, 0, 1, 1, 0])


@DTYPES
@pytest.mark.parametrize("reduce", ["sum", "max", "mean"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
def test_reductions_see_nan_and_inf_anywhere_in_a_long_row(dtype, reduce, bad):
    """Rows long enough to be vectorized: the bad entry in the vector body of row 1 only."""
    x = data(dtype, shape=(3, 1000))
    x[1, 517] = bad
    with np.errstate(all="ignore"):
        want = getattr(np, reduce)(x, axis=-1)
    got = ag.trace(lambda x: getattr(ag, reduce)(x, -1), x=x).compile()(x=x)
    np.testing.assert_allclose(got, want, rtol=1e-5, equal_nan=True)


# every device: the semantics above on inputs holding clean rows beside bad ones, against float64 NumPy

# The CUDA simulator computes on NumPy scalars, which warn where a GPU quietly makes NaN or inf.
SIMULATOR_WARNS = pytest.mark.filterwarnings("ignore::RuntimeWarning")

def close(got, want, dtype):
    """Equal to the float64 reference, NaN exactly where it is NaN."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, **(dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else
                                             dict(rtol=1e-12, atol=1e-14)))


def masked_softmax(x, mask):
    """softmax and log_softmax over the allowed entries in float64, 0 at the others; a row whose allowed
    entries hold NaN or +inf is NaN (inf − inf)."""
    with np.errstate(invalid="ignore"):
        z = np.where(mask, x.astype(np.float64), -np.inf)
        shifted = z - z.max(-1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return np.where(mask, np.exp(log_p), 0), np.where(mask, log_p, 0)


@SIMULATOR_WARNS
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@DTYPES
@BAD
def test_softmax_rows_with_nan_or_inf_and_masked_ones_on_every_device(name, dtype, bad, device, rng):
    """Row 0 holds a bad score it takes part in and is NaN but for its masked entry; row 1's bad score is
    masked out and changes nothing; row 2 is clean."""
    x, g = (rng.standard_normal((3, 6)).astype(dtype) for _ in range(2))
    mask = np.ones((3, 6), bool)
    mask[:, 4] = False
    x[0, 2] = x[1, 4] = bad
    p, log_p = masked_softmax(x, mask)
    y = on_device(device, name, x, mask, causal=False)
    g64 = g.astype(np.float64)
    with np.errstate(invalid="ignore"):
        if name == "softmax":
            want, dx = p, on_device(device, "softmax_grad", g, y)
            want_dx = p * (g64 - (g64 * p).sum(-1, keepdims=True))
        else:
            want, dx = log_p, on_device(device, "log_softmax_grad", g, y, mask, causal=False)
            want_dx = g64 - p * np.where(mask, g64, 0).sum(-1, keepdims=True)
    for got, expected in ((y, want), (dx, np.where(mask, want_dx, 0))):
        assert got.dtype == dtype
        close(got, expected, dtype)
        assert np.isnan(got[0, [0, 1, 2, 3, 5]]).all() and (got[:, 4] == 0).all() and np.isfinite(got[1:]).all()


@SIMULATOR_WARNS
@DTYPES
@BAD
def test_cross_entropy_bad_kept_row_ignored_row_and_minus_inf_on_every_device(dtype, bad, device, rng):
    """Row 0 kept with a bad logit (loss NaN, its gradient row NaN), row 1 ignored and all bad (gradient 0),
    row 2 with -inf beside its target (probability 0 there), row 3 clean."""
    logits = rng.standard_normal((4, 5)).astype(dtype)
    targets = np.array([1, -100, 3, 0])
    logits[0, 4] = bad
    logits[1] = bad
    logits[2, 0] = -np.inf
    g = np.asarray(1.5, dtype)
    assert np.isnan(on_device(device, "cross_entropy", logits, targets, -100))
    p = masked_softmax(logits, np.ones(logits.shape, bool))[0]
    kept = (targets >= 0)[:, None]
    want = np.where(kept, p - np.eye(5)[np.maximum(targets, 0)], 0) * 1.5 / 3
    grad = on_device(device, "cross_entropy_grad", g, logits, targets, -100)
    close(grad, want, dtype)
    assert np.isnan(grad[0]).all() and (grad[1] == 0).all() and grad[2, 0] == 0
    keep = [1, 2, 3]
    close(on_device(device, "cross_entropy", logits[keep], targets[keep], -100), -np.log(p[[2, 3], [3, 0]]).mean(),
          dtype)


@SIMULATOR_WARNS
@DTYPES
@pytest.mark.parametrize("eps", [1e-5, 0.0])
def test_layer_norm_bad_and_constant_rows_on_every_device(dtype, eps, device, rng):
    """Rows: a NaN, an inf, a constant, a clean one. The bad rows are NaN; the constant one is exactly the bias
    with eps > 0, NaN with eps = 0 (0 / 0); the weight's gradient is NaN (a sum over rows), the bias's not."""
    x, g = (rng.normal(2, 3, (4, 9)).astype(dtype) for _ in range(2))
    w, b = (rng.standard_normal(9).astype(dtype) for _ in range(2))
    x[0, 3], x[1, 8], x[2] = np.nan, np.inf, -31.06
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        centred = x64 - x64.mean(-1, keepdims=True)
        centred[2] = 0                      # exactly (a float64 mean of nine equal values need not be)
        rstd = 1 / np.sqrt((centred ** 2).mean(-1, keepdims=True) + eps)
        xhat = np.where(np.isfinite(rstd), centred * rstd, np.nan)
        dxhat = g64 * w
        dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    y = on_device(device, "layer_norm", x, w, b, eps=eps)
    close(y, xhat * w + b, dtype)
    if eps:
        np.testing.assert_array_equal(y[2], b)
    assert np.isnan(y[:2 if eps else 3]).all() and np.isfinite(y[3]).all()
    close(on_device(device, "layer_norm_grad", g, x, w, eps=eps), np.where(np.isnan(xhat), np.nan, dx), dtype)
    params = on_device(device, "layer_norm_params_grad", g, x, eps=eps)
    close(params, np.stack([(g64 * xhat).sum(0), g64.sum(0)]), dtype)
    assert np.isnan(params[0]).all() and np.isfinite(params[1]).all()


@SIMULATOR_WARNS
@DTYPES
def test_layer_norm_of_an_empty_last_axis_is_empty_on_every_device(dtype, device):
    x = np.zeros((2, 0), dtype)
    assert on_device(device, "layer_norm", x).shape == (2, 0)
    assert on_device(device, "layer_norm_grad", x, x).shape == (2, 0)
    assert on_device(device, "layer_norm_params_grad", x, x).shape == (2, 0)


@SIMULATOR_WARNS
@DTYPES
@pytest.mark.parametrize("exact", [True, False], ids=["erf", "tanh"])
def test_gelu_saturates_and_keeps_nan_on_every_device(dtype, exact, device):
    """Beyond |x| = 10, ±inf included, GELU is exactly 0 or x with gradient exactly 0 or g; NaN stays NaN; 0.5,
    between them, is the float64 formula's."""
    x = np.array([[-np.inf, -1e30, -40, -10.5, np.nan, 0.5, 10.5, 40, 1e30, np.inf]], dtype)
    g = np.full_like(x, 2)
    approximate = "none" if exact else "tanh"
    y = on_device(device, "gelu", x, None, approximate=approximate)
    dx = on_device(device, "gelu_grad", g, x, None, approximate=approximate)
    value, slope = test_gelu.reference(np.array([0.5]), exact)
    close(y, [[0, 0, 0, 0, np.nan, *value, 10.5, 40, 1e30, np.inf]], dtype)
    close(dx, [[0, 0, 0, 0, np.nan, *(2 * slope), 2, 2, 2, 2]], dtype)
    np.testing.assert_array_equal(y[0, 6:], x[0, 6:])
    np.testing.assert_array_equal(y[0, :4], 0)


@SIMULATOR_WARNS
@DTYPES
@pytest.mark.parametrize("value", ["inf", "nan"])
def test_attention_overflowing_scores_seen_and_masked_on_every_device(dtype, value, device, rng):
    """Finite operands whose scores overflow: queries 0 and 1 meet key 4 with a score of +inf (or inf - inf =
    NaN); query 0 sees it and its output and dq row are NaN, as are dk and dv (every key is seen by query 0);
    query 1 does not and, like the others, equals the float64 reference. Their other scores are moderate: the
    two lie in orthogonal feature planes, so float64 meets no overflow."""
    q, k, v, g = (rng.standard_normal((1, 5, 3)).astype(dtype) / 2 for _ in range(4))
    big = 2 * np.finfo(dtype).max ** 0.5
    q[0, :2], q[0, 2:, :2], k[0, :4, :2] = [big, big, 0], 0, 0
    k[0, 4] = [big, big if value == "inf" else -big, 0]
    mask = np.ones((5, 5), bool)
    mask[1, 4] = False
    kernels = test_attention.family(device)
    o = on_device(device, kernels.attention, q, k, v, mask)
    dq, dk, dv = on_device(device, kernels.attention_backward, g, o, q, k, v, mask)
    with np.errstate(over="ignore", invalid="ignore"):        # float64 operands near their max overflow too
        want_o, want_dq, _, _, _ = test_attention.reference(q, k, v, mask, False, g)
    assert np.isnan(o[0, 0]).all() and np.isnan(dq[0, 0]).all() and np.isnan(dk).all() and np.isnan(dv).all()
    tol = test_attention.TOL[dtype]
    np.testing.assert_allclose(o[0, 1:], want_o[0, 1:], **tol)
    np.testing.assert_allclose(dq[0, 1:], want_dq[0, 1:], **tol)
