"""abs, sin, cos, rsqrt, silu, clip, min and logsumexp, and every op of tests/ops/test_op_table.py's table, on "cuda":
the kernels against their CPU twins, and graphs using them forward and backward against the same graphs on "cpu"."""
import numpy as np
import pytest

import attngraph as ag
from ops.cpu import elementwise as cpu
from ops.cpu import reduce as cpu_reduce
from ops.cuda import elementwise as cuda
from ops.cuda import reduce as cuda_reduce
from tests.cuda.conftest import host, on_device
from tests.cuda.test_executor import assert_same_on_both
from tests.ops.test_op_table import BINARY, BITWISE, DIVISION, INTS, UNARY, X


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["abs", "sin", "cos", "rsqrt", "silu"])
def test_unary_kernels_match_the_cpu(name, dtype, rng):
    x = np.append(rng.normal(0, 3, 6), [0.0, -0.0, 40.0]).astype(dtype)
    x = np.abs(x) + dtype(0.1) if name == "rsqrt" else x
    got, want = host(cuda.KERNELS[name](on_device(x))), getattr(cpu, name)(x)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, **({"rtol": 1e-6, "atol": 2e-6} if dtype == np.float32 else {"rtol": 1e-13}))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_clip_kernel_broadcasts_its_bounds_and_keeps_nan():
    x = np.array([[-2.0, -1.0, 0.0], [0.5, 3.0, np.nan]], np.float32)
    lo, hi = np.float32(-1), np.float32(0.5)
    got = host(cuda.KERNELS["clip"](*on_device(x, lo, hi)))
    np.testing.assert_array_equal(got, cpu.clip(x, lo, hi))
    np.testing.assert_array_equal(got, [[-1, -1, 0], [0.5, 0.5, np.nan]])


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_clip_kernel_with_crossed_bounds_and_on_integers_as_the_cpu(dtype):
    """min(max(x, 3), 0) is 0 everywhere (torch.clamp); integers keep their dtype."""
    x, lo, hi = np.array([-1, 1, 5], dtype), dtype(3), dtype(0)
    got = host(cuda.KERNELS["clip"](*on_device(x, lo, hi)))
    assert got.dtype == dtype and got.tolist() == cpu.clip(x, lo, hi).tolist() == [0, 0, 0]


def test_a_graph_of_the_new_ops_runs_forward_and_backward_as_on_the_cpu(rng):
    def f(x, y):
        return ag.sum(ag.clip(ag.silu(ag.abs(x)) * ag.rsqrt(y * y + 1), -0.5, 1.0) + ag.sin(x) * ag.cos(y))

    graph = ag.trace(f, x=ag.Input((2, 3)), y=ag.Input((3,)))
    x, y = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    assert_same_on_both(graph.grad(wrt=["x", "y"]), x=x, y=y)


@pytest.mark.parametrize("axes, keepdims", [((1,), False), ((0, 2), True), ((2,), False)])
def test_min_and_logsumexp_kernels_match_the_cpu(axes, keepdims, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x[0, 0, 0], x[1, 2, 3] = np.nan, 1000.0
    got, want = host(cuda_reduce.min(on_device(x), axes, keepdims)), cpu_reduce.min(x, axes, keepdims)
    np.testing.assert_array_equal(got, want)
    got, want = host(cuda_reduce.logsumexp(on_device(x), axes, keepdims)), cpu_reduce.logsumexp(x, axes, keepdims)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_logsumexp_of_infinite_rows_and_of_no_element():
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0]], np.float32)
    np.testing.assert_array_equal(host(cuda_reduce.logsumexp(on_device(x), (1,), False)), [-np.inf, np.inf])
    assert host(cuda_reduce.logsumexp(on_device(np.zeros((2, 0), np.float32)), (1,), False)).tolist() == [-np.inf] * 2


def test_min_of_integers_and_a_reduction_graph_forward_and_backward(rng):
    ints = np.array([[3, -7, 5], [0, 2, 2]], np.int32)
    np.testing.assert_array_equal(host(cuda_reduce.min(on_device(ints), (1,), False)), [-7, 0])
    graph = ag.trace(lambda x: ag.sum(ag.logsumexp(x, -1) * ag.min(x, 0)), x=ag.Input((3, 3)))
    x = np.array([[1.0, -2.0, 0.5], [-2.0, 3.0, 0.5], [0.0, 1.0, 2.0]], np.float32)     # ties for the min
    assert_same_on_both(graph.grad(wrt=["x"]), x=x)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator's NumPy scalars warn at ±inf and NaN
@pytest.mark.parametrize("name", UNARY)
def test_every_tabled_unary_op_forward_and_backward_at_edge_values_as_on_the_cpu(name):
    fn, _, points = UNARY[name]
    x = X.astype(np.float32)
    assert_same_on_both(ag.trace(fn, x=ag.Input(x.shape)), x=x)
    if points is not None:
        weights = np.linspace(-1, 1, x.size).astype(np.float32)
        graph = ag.trace(lambda x: ag.sum(fn(x) * weights), x=ag.Input(x.shape))
        assert_same_on_both(graph.grad(wrt=["x"]), x=x)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator's NumPy scalars warn at ±inf and NaN
@pytest.mark.parametrize("name", BINARY)
def test_every_tabled_binary_op_broadcasts_forward_and_backward_as_on_the_cpu(name):
    fn = BINARY[name][0]
    a, b = X[::2, None].astype(np.float32), X[1::2].astype(np.float32)
    graph = ag.trace(lambda a, b: ag.sum(fn(a, b)), a=ag.Input(a.shape), b=ag.Input(b.shape))
    assert_same_on_both(graph.grad(wrt=["a", "b"]), a=a, b=b)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator's NumPy scalars warn at x / 0
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("name", DIVISION)
def test_every_division_op_broadcasts_as_on_the_cpu(name, dtype):
    values = X[np.isfinite(X)] if dtype == np.float32 else INTS
    a, b = values[::2, None].astype(dtype), values[1::2].astype(dtype)
    assert_same_on_both(ag.trace(DIVISION[name][0], a=ag.Input(a.shape, dtype), b=ag.Input(b.shape, dtype)), a=a, b=b)


@pytest.mark.parametrize("name", BITWISE)
def test_every_bitwise_op_and_shift_broadcasts_as_on_the_cpu(name):
    a, b = INTS[:, None].astype(np.int32), np.array([-1, 0, 3, 31, 40], np.int32)
    graph = ag.trace(lambda a, b: (BITWISE[name][0](a, b), ~a), a=ag.Input(a.shape, "int32"),
                     b=ag.Input(b.shape, "int32"))
    assert_same_on_both(graph, a=a, b=b)
