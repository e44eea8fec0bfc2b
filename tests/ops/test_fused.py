"""The fused elementwise kernel (one program of the scalar functions, its inputs read through broadcast strides) on
every device against NumPy: a GRU update and its gradient, integer, boolean and scalar programs, and a Linear
layer's bias that the fusion pass moves into GELU."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.core import passes
from attngraph.core.executor import Executable
from tests.core.test_fuse_elementwise import fused_nodes, gru_update
from tests.ops.test_gelu import reference as gelu_reference

TOL = dict(rtol=1e-5, atol=1e-5)            # float32 against float64, accumulated in different orders


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def gru_objective(x, h, b):
    """sum(gru_update(x, h, b)) in NumPy."""
    xz, xr, xn = np.split(x, 3, axis=-1)
    hz, hr, hn = np.split(h + b, 3, axis=-1)
    z, r = sigmoid(xz + hz), sigmoid(xr + hr)
    return ((1 - z) * np.tanh(xn + r * hn) + z * np.tanh(hn)).sum()


def test_a_gru_update_and_its_gradient(device, rng, numeric_grad):
    b = ag.Parameter(rng.standard_normal(12).astype(np.float32), name="b")
    graph = ag.trace(lambda x, h: ag.sum(gru_update(x, h, b)), x=ag.Input(("B", 12)), h=ag.Input(("B", 12)))
    gradient = graph.grad(wrt=["x", "h", "b"])
    assert len(fused_nodes(passes.optimize(gradient))) >= 3
    x, h = (rng.standard_normal((3, 12)).astype(np.float32) for _ in range(2))
    value, dx, dh, db = gradient.compile(device.name)(x=x, h=h)
    x64, h64, b64 = x.astype(np.float64), h.astype(np.float64), b.numpy().astype(np.float64)
    assert value.dtype == dx.dtype == dh.dtype == db.dtype == np.float32
    np.testing.assert_allclose(value, gru_objective(x64, h64, b64), **TOL)
    np.testing.assert_allclose(dx, numeric_grad(lambda v: gru_objective(v, h64, b64), x64), **TOL)
    np.testing.assert_allclose(dh, numeric_grad(lambda v: gru_objective(x64, v, b64), h64), **TOL)
    np.testing.assert_allclose(db, numeric_grad(lambda v: gru_objective(x64, h64, v), b64), **TOL)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")     # the simulator's NumPy int32 wraps
def test_broadcast_integer_boolean_and_scalar_programs(device, rng):
    def f(x, bias, a, b):
        wrapped = a * b + a
        keep = ag.logical_and(wrapped > 0, ag.logical_not(ag.equal(a, b)))
        return (ag.relu((x + bias) * 0.5 + 2.0), wrapped, ag.where(keep, wrapped, -wrapped).astype(np.float32) * 0.5,
                ag.sum(x) * 2.0 + 1.0)
    feeds = dict(x=rng.standard_normal((2, 3, 4)).astype(np.float32), bias=rng.standard_normal(4).astype(np.float32),
                 a=np.array([2 ** 30, -7, 5], np.int32), b=np.array([4, 3, 5], np.int32))
    graph = ag.trace(f, **feeds)
    assert len(fused_nodes(passes.optimize(graph))) == 4
    relu, wrapped, signed, total = graph.compile(device.name)(**feeds)
    x64, bias64 = feeds["x"].astype(np.float64), feeds["bias"].astype(np.float64)
    assert (relu.dtype, wrapped.dtype, signed.dtype, total.dtype) == (np.float32, np.int32, np.float32, np.float32)
    np.testing.assert_allclose(relu, np.maximum((x64 + bias64) * 0.5 + 2.0, 0), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(wrapped, [2 ** 30, -28, 30])       # 2^30·4 wraps to 0 in int32
    np.testing.assert_array_equal(signed, [2 ** 29, 14, -15])        # kept where positive and a != b, else negated
    np.testing.assert_allclose(total, x64.sum() * 2 + 1, rtol=1e-6)


def test_linear_then_gelu_after_fusion_takes_the_bias_into_the_kernel(device):
    layer = ag.nn.Linear(3, 4, rng=np.random.default_rng(0))
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    graph = ag.trace(lambda x: ag.sum(ag.gelu(layer(x)) * ag.gelu(layer(x), approximate="none")), x=x).grad()
    executable = graph.compile(device.name)
    assert any(n.op == "gelu" and len(n.inputs) == 2 for n in executable.graph.nodes), "bias not fused"
    value, dweight, dbias = executable(x=x)
    z = x.astype(np.float64) @ layer.weight.numpy().astype(np.float64) + layer.bias.numpy().astype(np.float64)
    (tanh_gelu, tanh_slope), (exact_gelu, exact_slope) = gelu_reference(z, False), gelu_reference(z, True)
    dz = tanh_slope * exact_gelu + tanh_gelu * exact_slope
    np.testing.assert_allclose(value, (tanh_gelu * exact_gelu).sum(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dweight, x.T.astype(np.float64) @ dz, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dbias, dz.sum(0), rtol=1e-5, atol=1e-6)


REVERSED = [((9,), np.s_[::-1], (9,)),                                 # x[::-1] read backwards from its end
            ((3, 4), np.s_[::-1], (3, 4)),
            ((3, 4), np.s_[:, ::-2], (3, 2)),
            ((4, 5), np.s_[3:0:-2, 1:], (2, 4)),
            ((2, 3, 4), np.s_[1, ::-1, None, 2::-1], (3, 1, 3)),
            ((4,), np.s_[::-1], (3, 4))]                               # broadcast: a stride of 0 beside one of −1


@pytest.mark.parametrize("shape, index, w_shape", REVERSED, ids=lambda v: str(v).replace(" ", ""))
def test_negative_step_slices_read_in_place_forward_and_gradient(device, rng, shape, index, w_shape):
    """A slice with a negative step fused as a view (its first element is its last in memory) gives the unfused
    graph's values and NumPy's, forward and backward: sum(x[index] ∘ w), ∂/∂x = w scattered back at [index]."""
    x, w = rng.standard_normal(shape), rng.standard_normal(w_shape)
    graph = ag.trace(lambda x, w: ag.sum(ag.tanh(x[index] * w)), x=x, w=w).grad(wrt=["x", "w"])
    fused = passes.optimize(graph)
    assert any(v is not None for n in fused_nodes(fused) for v in n.attrs["views"]), "the slice is not a view"
    value, dx, dw = Executable(fused, device.name)(x=x, w=w)
    for a, b in zip((value, dx, dw), Executable(passes.optimize(graph, elementwise=False), device.name)(x=x, w=w)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    slope = 1 - np.tanh(x[index] * w) ** 2
    expected_dx = np.zeros_like(x)
    np.add.at(expected_dx, index, (slope * w).reshape(-1, *x[index].shape).sum(0))     # summed over broadcast axes
    np.testing.assert_allclose(value, np.tanh(x[index] * w).sum(), rtol=1e-12)
    np.testing.assert_allclose(dx, expected_dx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dw, slope * x[index], rtol=1e-12, atol=1e-12)
