"""abs, sin, cos, rsqrt, silu, softplus and clip: values and gradients against PyTorch's at edge cases on every
device, float64 gradient checks, fusion, and the errors of bad inputs (the min and logsumexp reductions:
test_min_logsumexp.py)."""
import warnings

import numpy as np
import pytest

import attngraph as ag
from attngraph.core.passes import optimize
from attngraph.errors import DTypeError, ShapeError, TracingError
from attngraph.inspect import gradcheck
from ops import _cuda
from tests.conftest import run, value_and_grad_on

INF, NAN = np.inf, np.nan
X = [-INF, -3.0, -1.0, -0.0, 0.0, 0.5, 1.0, 2.5, INF, NAN]
OPS = {"abs": ag.abs, "sin": ag.sin, "cos": ag.cos, "rsqrt": ag.rsqrt, "silu": ag.silu, "softplus": ag.softplus,
       "clip": lambda x: ag.clip(x, -1, 0.5)}
COVERS = set(OPS)          # the functions run on every device (tests/ops/test_every_op.py)
# torch 2.13 in float64 on X: (torch.op(x), the gradient of torch.op(x).sum()); clip is torch.clamp(x, -1, 0.5)
TORCH = {
    "abs": ([INF, 3.0, 1.0, 0.0, 0.0, 0.5, 1.0, 2.5, INF, NAN],
            [-1.0, -1.0, -1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0]),
    "sin": ([NAN, -0.1411200080598672, -0.8414709848078965, -0.0, 0.0, 0.479425538604203, 0.8414709848078965,
             0.5984721441039565, NAN, NAN],
            [NAN, -0.9899924966004454, 0.5403023058681398, 1.0, 1.0, 0.8775825618903728, 0.5403023058681398,
             -0.8011436155469337, NAN, NAN]),
    "cos": ([NAN, -0.9899924966004454, 0.5403023058681398, 1.0, 1.0, 0.8775825618903728, 0.5403023058681398,
             -0.8011436155469337, NAN, NAN],
            [NAN, 0.1411200080598672, 0.8414709848078965, 0.0, -0.0, -0.479425538604203, -0.8414709848078965,
             -0.5984721441039565, NAN, NAN]),
    "rsqrt": ([NAN, NAN, NAN, -INF, INF, 1.414213562373095, 1.0, 0.6324555320336759, 0.0, NAN],
              [NAN, NAN, NAN, INF, -INF, -1.4142135623730947, -0.5, -0.1264911064067352, -0.0, NAN]),
    "silu": ([NAN, -0.14227761953270035, -0.2689414213699951, -0.0, 0.0, 0.3112296656009273, 0.7310585786300049,
              2.3103545499468914, INF, NAN],
             [NAN, -0.08810410601516962, 0.07232948812851325, 0.5, 0.5, 0.7399611873026519, 0.9276705118714869,
              1.0994011113415267, NAN, NAN]),
    "softplus": ([0.0, 0.04858735157374206, 0.31326168751822286, 0.6931471805599453, 0.6931471805599453,
                  0.9740769841801067, 1.3132616875182228, 2.5788897342925496, INF, NAN],
                 [0.0, 0.04742587317756679, 0.2689414213699951, 0.5, 0.5, 0.6224593312018546, 0.7310585786300049,
                  0.9241418199787564, 1.0, NAN]),
    "clip": ([-1.0, -1.0, -1.0, -0.0, 0.0, 0.5, 0.5, 0.5, 0.5, NAN],
             [0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]),
}
TOL = {np.float32: dict(rtol=2e-6, atol=1e-6), np.float64: dict(rtol=1e-13, atol=1e-15)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", OPS)
def test_values_and_gradients_are_pytorchs_at_edge_cases(name, dtype, device):
    """NaN, ±inf and ±0 included: the values, their signs (|−0| = 0, rsqrt(−0) = −inf) and the gradients. The CUDA
    simulator's sin and cos (Python's math module) raise at ±inf, where a GPU gives NaN: it skips those two points."""
    op = OPS[name]
    simulated = device.name == "cuda" and _cuda.SIMULATOR and name in ("sin", "cos")
    points = ~np.isinf(X) if simulated else slice(None)
    x = np.array(X, dtype)[points]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)      # NumPy (and the simulator's scalars) report the NaN
        y = run(op, x, device=device)                        # that sin(inf) and 0·inf make
        _, (dx,) = value_and_grad_on(device, lambda x: ag.sum(op(x)), x)
    want_y, want_dx = (np.array(v, dtype)[points] for v in TORCH[name])
    for got, want in ((y, want_y), (dx, want_dx)):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, **TOL[dtype])
        np.testing.assert_array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


def test_softplus_is_x_itself_above_its_threshold_20_as_pytorch_s():
    """torch.nn.functional.softplus in float64 (threshold 20: x > 20 gives x and a gradient of exactly 1)."""
    x = np.array([-50.0, 19.5, 20.0, 20.5, 1e4])
    y, dx = ag.value_and_grad(lambda x: ag.sum(ag.softplus(x)))(x)
    np.testing.assert_allclose(y, sum([1.9287498479639178e-22, 19.500000003398267, 20.000000002061153, 20.5, 1e4]),
                               rtol=1e-15)
    np.testing.assert_allclose(dx, [1.9287498479639178e-22, 0.9999999966017322, 0.9999999979388464, 1.0, 1.0],
                               rtol=1e-13)


def test_abs_keeps_integer_dtypes_and_refuses_booleans():
    y = ag.trace(ag.abs, x=ag.Input((3,), "int32")).compile()(x=np.array([-3, 0, 2], np.int32))
    assert y.dtype == np.int32 and y.tolist() == [3, 0, 2]
    with pytest.raises(DTypeError, match="boolean"):
        ag.trace(ag.abs, x=ag.Input((3,), bool))


@pytest.mark.parametrize("name", OPS)
def test_gradients_match_central_differences_in_float64(name, rng):
    x = rng.uniform(0.2, 2.0, (3, 4)) * rng.choice([-1, 1], (3, 4))
    if name == "rsqrt":
        x = np.abs(x)
    gradcheck(lambda x: ag.sum(OPS[name](x) * np.arange(12.0).reshape(3, 4)), x).raise_if_failed()


def test_clip_with_one_bound_leaves_the_other_side_open_as_torch_clamp():
    x = np.array([-5.0, 0.0, 5.0], np.float32)
    lower = ag.trace(lambda x: ag.clip(x, lo=-1), x=ag.Input((3,))).compile()(x=x)
    upper = ag.trace(lambda x: x.clip(hi=1), x=ag.Input((3,))).compile()(x=x)
    assert lower.tolist() == [-1, 0, 5] and upper.tolist() == [-5, 0, 1]


def test_clip_with_crossed_bounds_gives_the_upper_one_everywhere_as_torch_clamp(device):
    """torch.clamp(x, 3, 0) is min(max(x, 3), 0) = 0 everywhere; no gradient reaches x (x ≥ 3 and x ≤ 0 never
    hold together), NaN stays NaN."""
    x = np.array([-1.0, 1.0, 5.0, NAN])
    _, (dx,) = value_and_grad_on(device, lambda x: ag.sum(ag.clip(x, 3, 0) * np.arange(4.0)), x)
    z = run(lambda x: ag.clip(x, 3, 0), x, device=device)
    np.testing.assert_array_equal(z, [0.0, 0.0, 0.0, NAN])
    np.testing.assert_array_equal(dx, [0.0, 0.0, 0.0, 0.0])


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8])
def test_clip_of_integers_keeps_their_dtype_as_torch_clamp(dtype, device):
    """torch.clamp(torch.tensor([0, 1, 5, 100]), 1, 4) = [1, 1, 4, 4]; one bound open reaches the dtype's limit."""
    x = np.array([0, 1, 5, 100], dtype)
    both, lower = run(lambda x: (ag.clip(x, 1, 4), ag.clip(x, lo=2)), x, device=device)
    assert both.dtype == lower.dtype == dtype
    assert both.tolist() == [1, 1, 4, 4] and lower.tolist() == [2, 2, 5, 100]


@pytest.mark.parametrize("lo, hi, error, message", [
    (None, None, TracingError, "clip needs at least one bound"),
    (np.ones(3), 1.0, DTypeError, "Python numbers or None for a float32 tensor, not ndarray"),
    (True, 2.0, DTypeError, "not bool"),
    (0.0, "1", DTypeError, "not str"),
])
def test_clip_refuses_bounds_that_are_not_ordered_numbers_at_trace_time(lo, hi, error, message):
    with pytest.raises(error, match=message):
        ag.trace(lambda x: ag.clip(x, lo, hi), x=ag.Input((3,)))


def test_sin_cos_rsqrt_silu_refuse_integer_tensors():
    for op in (ag.sin, ag.cos, ag.rsqrt, ag.silu):
        with pytest.raises(DTypeError, match="floating-point"):
            ag.trace(op, x=ag.Input((3,), "int32"))
    with pytest.raises(DTypeError, match="Python ints or None for a int32 tensor, not float"):
        ag.trace(lambda x: ag.clip(x, 0.5, 1), x=ag.Input((3,), "int32"))


def test_a_chain_of_the_new_ops_fuses_into_one_kernel_with_the_same_bits(rng):
    def f(x, y):
        return ag.clip(ag.silu(ag.abs(ag.sin(x) * ag.cos(y))) + ag.rsqrt(x * x + 1) - ag.softplus(y), -0.3, 0.5)

    graph = ag.trace(f, x=ag.Input((4, 5)), y=ag.Input((4, 5)))
    fused, unfused = optimize(graph), optimize(graph, elementwise=False)
    assert [n.op for n in fused.nodes if n.kind == "call"] == ["fused"]
    feeds = dict(x=rng.standard_normal((4, 5)).astype(np.float32), y=rng.standard_normal((4, 5)).astype(np.float32))
    np.testing.assert_array_equal(fused.compile()(**feeds), unfused.compile()(**feeds))


def test_shapes_broadcast_and_scalars_stay_scalars():
    y = ag.trace(lambda x: ag.clip(ag.silu(x), 0, 1), x=ag.Input(())).compile()(x=np.float32(2))
    assert y.shape == () and y.dtype == np.float32
    with pytest.raises(ShapeError):
        ag.trace(lambda x, y: ag.sin(x) + y, x=ag.Input((3,)), y=ag.Input((4,)))
