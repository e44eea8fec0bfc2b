"""conv2d, its input and weight gradients, max and average pooling and theirs on "cuda": every kernel against its
CPU twin (stride, asymmetric padding, dilation, a causal conv1d; NaN, ties and −inf in the pooled windows), and
graphs using them forward and backward, to second order, against the same graphs on "cpu". Shapes are tiny: the
simulator runs a Python thread per CUDA thread."""
import numpy as np
import pytest

import attngraph as ag
from ops.cpu import conv as cpu
from ops.cuda import conv as cuda
from tests.cuda.conftest import host, on_device
from tests.cuda.test_executor import assert_same_on_both

NAN, INF = np.nan, np.inf
# NaN, ties, a window of −inf only, and overlapping windows
POOL_X = np.array([[[[1, 3, 3, 0, -INF], [2, -1, 3, NAN, -INF], [0, 5, -2, 1, 4], [5, 5, 1, 1, 4]],
                    [[-INF, -INF, 0, 2, 2], [-INF, -INF, 7, -1, 2], [1, 0, 3, 3, 6], [2, -4, 1, 0, 2]]]])


@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation", [
    ((2, 2, 5, 4), (3, 2, 2, 3), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((2, 2, 5, 4), (3, 2, 2, 3), (2, 1), (1, 1, 2, 2), (1, 2)),
    ((2, 2, 5, 4), (3, 2, 2, 3), (1, 3), (0, 2, 3, 0), (2, 1)),
    ((2, 2, 1, 9), (3, 2, 1, 3), (1, 1), (0, 0, 4, 0), (1, 2)),          # causal conv1d: the left padded only
], ids=["plain", "strided-padded-dilated", "asymmetric", "causal-1d"])
def test_conv_kernels_match_the_cpu(x_shape, w_shape, stride, padding, dilation, rng):
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    attrs = {"stride": stride, "padding": padding, "dilation": dilation}
    y = cpu.conv2d(x, w, **attrs)
    np.testing.assert_allclose(host(cuda.conv2d(*on_device(x, w), **attrs)), y, atol=1e-12)
    g = rng.standard_normal(y.shape)
    np.testing.assert_allclose(host(cuda.conv2d_input_grad(*on_device(g, w, x), **attrs)),
                               cpu.conv2d_input_grad(g, w, x.shape, **attrs), atol=1e-12)
    np.testing.assert_allclose(host(cuda.conv2d_weight_grad(*on_device(g, x), kernel=w_shape[2:], **attrs)),
                               cpu.conv2d_weight_grad(g, x, w_shape[2:], **attrs), atol=1e-12)


@pytest.mark.parametrize("kernel, stride", [((2, 2), (1, 1)), ((2, 3), (2, 1)), ((1, 2), (2, 3))],
                         ids=["overlapping", "rectangular", "gaps"])
def test_pooling_kernels_match_the_cpu(kernel, stride, rng):
    """Max pooling exactly (the same window element wins: the first largest, NaN over all); inputs in no window
    (the "gaps" case) get no gradient."""
    x = POOL_X
    y = cpu.max_pool2d(x, kernel, stride)
    np.testing.assert_array_equal(host(cuda.max_pool2d(on_device(x), kernel, stride)), y)
    g = rng.standard_normal(y.shape)
    np.testing.assert_array_equal(host(cuda.max_pool2d_grad(*on_device(g, x), kernel, stride)),
                                  cpu.max_pool2d_grad(g, x, kernel, stride))
    np.testing.assert_allclose(host(cuda.avg_pool2d(on_device(x), kernel, stride)),
                               cpu.avg_pool2d(x, kernel, stride), rtol=1e-12)
    np.testing.assert_allclose(host(cuda.avg_pool2d_grad(*on_device(g, x), kernel, stride)),
                               cpu.avg_pool2d_grad(g, x.shape, kernel, stride), rtol=1e-12)


def test_max_pooling_gradient_goes_to_the_first_largest_and_to_nan():
    """As torch.nn.functional.max_pool2d's: each window's gradient on its first largest element, or its last NaN;
    on its first element when all are −inf."""
    weights = np.arange(1.0, 17.0).reshape(1, 2, 2, 4)
    dx = host(cuda.max_pool2d_grad(*on_device(weights, POOL_X), (2, 2), (2, 1)))
    np.testing.assert_array_equal(dx[0], [[[0, 3, 0, 0, 0], [0, 0, 0, 7, 0], [0, 11, 0, 7, 8], [0, 0, 0, 0, 0]],
                                          [[9, 0, 0, 12, 0], [0, 0, 21, 0, 0], [0, 0, 29, 0, 16], [13, 0, 0, 0, 0]]])


def test_a_convolutional_graph_runs_forward_and_backward_as_on_the_cpu(rng):
    def f(x, w, b, v):
        h = ag.tanh(ag.conv2d(x, w, b, stride=(1, 2), padding=1, dilation=(2, 1)))
        pooled = ag.max_pool2d(h, 2, 1) + ag.avg_pool2d(h, (1, 2), 1)[..., 1:, :]
        sequence = ag.conv1d(ag.reshape(pooled, (2, 3, 6)), v, causal=True, dilation=2)
        return ag.sum(sequence * sequence) + ag.sum(ag.avg_pool1d(sequence, 2))

    shapes = {"x": (2, 2, 4, 5), "w": (3, 2, 2, 3), "b": (3,), "v": (2, 3, 2)}
    graph = ag.trace(f, **{name: ag.Input(shape) for name, shape in shapes.items()})
    arrays = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}
    assert_same_on_both(graph.grad(wrt=list(shapes)), **arrays)


def test_second_order_gradients_through_a_convolution_as_on_the_cpu(rng):
    def penalty(x, w):
        dx, dw = ag.gradients(ag.sum(ag.tanh(ag.conv2d(x, w, padding=1))), [x, w])
        return ag.sum(dx * dx) + ag.sum(dw * dw)

    graph = ag.trace(penalty, x=ag.Input((1, 2, 4, 4)), w=ag.Input((2, 2, 3, 3)))
    assert_same_on_both(graph.grad(wrt=["x", "w"]), x=rng.standard_normal((1, 2, 4, 4)).astype(np.float32),
                        w=rng.standard_normal((2, 2, 3, 3)).astype(np.float32))
