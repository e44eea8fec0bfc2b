"""abs, sin, cos, rsqrt, silu and clip on "cuda": the kernels against their CPU twins, and a graph using them all
forward and backward against the same graph on "cpu"."""
import numpy as np
import pytest

import attngraph as ag
from ops.cpu import elementwise as cpu
from ops.cuda import elementwise as cuda
from tests.cuda.conftest import host, on_device
from tests.cuda.test_executor import assert_same_on_both


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["abs", "sin", "cos", "rsqrt", "silu"])
def test_unary_kernels_match_the_cpu(name, dtype, rng):
    x = np.append(rng.normal(0, 3, 6), [0.0, -0.0, 40.0]).astype(dtype)
    x = np.abs(x) + dtype(0.1) if name == "rsqrt" else x
    got, want = host(getattr(cuda, name)(on_device(x))), getattr(cpu, name)(x)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, **({"rtol": 1e-6, "atol": 2e-6} if dtype == np.float32 else {"rtol": 1e-13}))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_clip_kernel_broadcasts_its_bounds_and_keeps_nan():
    x = np.array([[-2.0, -1.0, 0.0], [0.5, 3.0, np.nan]], np.float32)
    lo, hi = np.float32(-1), np.float32(0.5)
    got = host(cuda.clip(*on_device(x, lo, hi)))
    np.testing.assert_array_equal(got, cpu.clip(x, lo, hi))
    np.testing.assert_array_equal(got, [[-1, -1, 0], [0.5, 0.5, np.nan]])


def test_a_graph_of_the_new_ops_runs_forward_and_backward_as_on_the_cpu(rng):
    def f(x, y):
        return ag.sum(ag.clip(ag.silu(ag.abs(x)) * ag.rsqrt(y * y + 1), -0.5, 1.0) + ag.sin(x) * ag.cos(y))

    graph = ag.trace(f, x=ag.Input((2, 3)), y=ag.Input((3,)))
    x, y = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    assert_same_on_both(graph.grad(wrt=["x", "y"]), x=x, y=y)
