"""Additive scores (ops/cpu/additive.py, ops/cuda/additive.py): the kernels of every device against a float64
NumPy reference, forward and stacked gradient, Tq ≠ Tk and Tq = Tk; ``ag.additive_scores`` against the composition
of core/unfused.py, values and gradients, and when it takes which; its errors and FLOPs."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.core import tensor as F
from attngraph.core import unfused
from attngraph.errors import AttnGraphError
from attngraph.inspect.flops import total_flops
from tests.conftest import on_device

rng = np.random.default_rng(0)


def normal(*shape, dtype=np.float64):
    return rng.standard_normal(shape).astype(dtype)


def reference(g, a, b, v):
    """s, da, db and dv in float64 through the (..., Tq, Tk, H) hidden tensor."""
    g, a, b, v = (x.astype(np.float64) for x in (g, a, b, v))
    t = np.tanh(a[..., :, None, :] + b[..., None, :, :])
    d = g[..., None] * v * (1 - t * t)
    return t @ v, d.sum(-2), d.sum(-3), (g[..., None] * t).reshape(-1, v.size).sum(0)


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("batch, tq, tk", [((2, 3), 3, 5), ((4,), 6, 6), ((), 5, 2), ((0,), 2, 2), ((2,), 0, 0),
                                          ((2,), 0, 3)])
def test_kernels_on_every_device_are_the_reference(device, dtype, tol, batch, tq, tk):
    a, b, v = normal(*batch, tq, 7, dtype=dtype), normal(*batch, tk, 7, dtype=dtype), normal(7, dtype=dtype)
    g = normal(*batch, tq, tk, dtype=dtype)
    s, da, db, dv = reference(g, a, b, v)
    out = on_device(device, "additive_scores", a, b, v)
    grads = on_device(device, "additive_scores_grad", g, a, b, v)
    assert out.dtype == dtype and grads.shape == batch + (3, max(tq, tk), 7)
    np.testing.assert_allclose(out, s, rtol=tol, atol=tol)
    np.testing.assert_allclose(grads[..., 0, :tq, :], da, rtol=tol, atol=tol)
    np.testing.assert_allclose(grads[..., 1, :tk, :], db, rtol=tol, atol=tol)
    np.testing.assert_allclose(grads[..., 2, :1, :].reshape(-1, 7).sum(0), dv, rtol=tol, atol=10 * tol)
    assert not grads[..., 0, tq:, :].any() and not grads[..., 1, tk:, :].any() and not grads[..., 2, 1:, :].any()


def test_the_cpu_kernels_threads_compute_what_one_thread_does():
    from ops.cpu import additive
    a, b, v, g = normal(64, 10, 64), normal(64, 10, 64), normal(64), normal(64, 10, 10)
    for kernel, args in ((additive._scores, (a, b, v)), (additive._backward, (g, a, b, v))):
        np.testing.assert_array_equal(kernel.parallel(*args), kernel.serial(*args))


def scores_and_gradients(f, a, b, v, g):
    graph = ag.trace(lambda a, b, v, g: ag.sum(f(a, b, v) * g), a=a, b=b, v=v, g=g)
    return graph, graph.grad(wrt=["a", "b", "v"]).compile()(a=a, b=b, v=v, g=g)


@pytest.mark.parametrize("a_shape, b_shape", [((2, 3, 5, 4), (2, 3, 5, 4)), ((2, 1, 5, 4), (1, 3, 5, 4)),
                                              ((5, 4), (5, 4)), ((2, 5, 4), (2, 6, 4)), ((4,), (5, 4)),
                                              ((2, 0, 4), (2, 0, 4)), ((0, 3, 4), (0, 3, 4))])
def test_the_function_is_the_composition_values_and_gradients(a_shape, b_shape):
    a, b, v = normal(*a_shape), normal(*b_shape), normal(4)
    g = normal(*(np.tanh(np.expand_dims(a, -2) + np.expand_dims(b, -3)) @ v).shape)
    fused_graph, fused = scores_and_gradients(ag.additive_scores, a, b, v, g)
    _, composed = scores_and_gradients(unfused.additive_scores, a, b, v, g)
    is_fused = len(a_shape) > 1 and a_shape[-2] == b_shape[-2]
    assert ("additive_scores" in {n.op for n in fused_graph.nodes}) == is_fused
    for x, y in zip(fused, composed):
        assert x.shape == y.shape
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


def test_the_primitive_names_what_is_wrong_with_its_inputs():
    a, b = ag.Input((2, 5, 4)), ag.Input((2, 5, 4))
    cases = [((a, b, ag.Input((3,))), ValueError, "v"), ((a, ag.Input((3, 5, 4)), ag.Input((4,))), ValueError, "batch"),
             ((a, ag.Input((2, 5, 3)), ag.Input((4,))), ValueError, "H"),
             ((a, b, ag.Input((4,), "float64")), TypeError, "dtypes"),
             ((ag.Input((2, 5, 4), "int64"), b, ag.Input((4,))), TypeError, "floating")]
    for inputs, error, words in cases:
        with pytest.raises(error, match=words):
            ag.trace(lambda a, b, v: F.emit("additive_scores", a, b, v),
                     **dict(zip("abv", inputs)))


def test_its_gradient_has_no_gradient_and_says_what_to_use():
    def gradient_norm(a, b, v):
        (da,) = ag.gradients(ag.sum(ag.additive_scores(a, b, v) ** 2), [a])
        return ag.sum(da * da)
    with pytest.raises(AttnGraphError, match=r"additive_scores_grad .*core\.unfused"):
        ag.trace(gradient_norm, a=normal(3, 4), b=normal(3, 4), v=normal(4)).grad(wrt=["a"])


def test_flops_count_each_query_key_feature_as_the_composition():
    a, b, v = normal(2, 5, 4), normal(2, 5, 4), normal(4)
    graph = ag.trace(ag.additive_scores, a=a, b=b, v=v)
    assert total_flops(graph) == 9 * 2 * 5 * 5 * 4
