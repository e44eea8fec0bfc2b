"""conv2d, conv1d (causal too), max and average pooling: values and gradients against PyTorch's (numbers stored
from torch 2.13) and against a NumPy reference of the definition, the kernels and graphs of them (to second order)
on every device, float64 gradient checks, and the errors of bad inputs. Shapes stay 4-D so that each kernel
compiles once per dtype, and tiny: the CUDA simulator runs a Python thread per CUDA thread."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import DTypeError, ShapeError
from attngraph.inspect import gradcheck
from attngraph.inspect.flops import total_flops
from ops.cpu import conv
from tests.conftest import on_device

NAN, INF = np.nan, np.inf
# torch.nn.functional.conv2d(x, w, b, stride=(1, 2), padding=(1, 1), dilation=(2, 1)) in float64 with
# x = sin(arange(40)).reshape(1, 2, 4, 5), w = cos(arange(36)).reshape(3, 2, 2, 3), b = [0.5, -1, 2]; the
# gradients are those of (y ** 2).sum()
TORCH_Y = [1.1619625629, -0.8682312763, -0.4388300234, 1.6155401489, 4.0635893669, -3.6814699479, -0.2644008931,
           3.7229533716, 1.0386092297, -0.0638848773, -1.0824633077, 2.8143567625, -0.2787619332, -3.2074975748,
           -1.6310478156, 2.358542881, 1.0479251564, -5.3663995797, -1.3149650659, 3.4302082766, -0.9675075716,
           -2.7721580302, -1.5868531983, 1.4368480771, 2.5552766328, -0.3573798585, 1.8738056287, 6.5526992626,
           1.8927101339, -1.1877371935, 2.2328318577, 6.2539442127, 1.5162284989, -0.4270002612, 2.5920265186,
           3.798331031]
TORCH_DX = [19.0163722966, 19.2799990022, 10.0451252445, -18.0741387864, -16.0722343487, -4.1504053975,
            25.0809742942, 30.6127981693, 11.7212442111, 2.4623636794, -25.191364202, -24.83044976, -9.8744937626,
            30.1304269081, 30.5565171585, -1.434448652, -19.0041210471, -23.4770791689, -10.6045545047,
            -2.423735894, 19.0877863446, 22.1589724683, 11.6619595133, -11.6924829367, -18.3354521227,
            -4.6430581407, 17.1321191496, 32.3161907474, 19.9281382013, 3.2450540211, -24.9080673416,
            -29.2765753413, -12.1551759437, 19.935571062, 32.9598939476, -0.7158998549, -13.3445181092,
            -23.7216184805, -15.7987977614, -2.381248395]
TORCH_DW = [10.3042437222, 26.024311392, 10.5983302056, -15.3075552536, -24.3344048251, -7.6231375078,
            25.7739187631, 17.2686406828, -4.6732979662, -18.9769650363, -6.5555995312, 10.8538825441,
            0.7987623374, 23.825864986, 15.9980850948, -8.5622953396, -27.942886657, -14.4222996258, 19.6988201643,
            27.4489515248, 1.0927619493, -24.7316786976, -18.2337886467, 2.6683025009, 0.3632475395,
            15.6331323368, 25.721178414, -6.7544332786, -24.0062806837, -24.3288266546, 21.0382141878,
            31.1626144564, 20.083839155, -14.9408480561, -23.0037552119, 1.4714695706]
TORCH_DB = [16.0354622336, -17.7033327563, 54.5914729273]
# a NaN, ties and overlapping windows
POOL_X = np.array([[[[1, 3, 3, 0], [2, -1, 3, NAN], [0, 5, -2, 1], [5, 5, 1, 1]]]])
# two channels: NaN, ties, a window of −inf only, and overlapping windows
POOL_EDGES = np.array([[[[1, 3, 3, 0, -INF], [2, -1, 3, NAN, -INF], [0, 5, -2, 1, 4], [5, 5, 1, 1, 4]],
                        [[-INF, -INF, 0, 2, 2], [-INF, -INF, 7, -1, 2], [1, 0, 3, 3, 6], [2, -4, 1, 0, 2]]]])


def taps(x_shape, w_shape, stride, padding, dilation):
    """For each kernel position (p, q), the slices of the padded input that it multiplies at every output."""
    top, bottom, left, right = padding
    (sh, sw), (dh, dw), (kh, kw) = stride, dilation, w_shape[2:]
    ho = (x_shape[2] + top + bottom - dh * (kh - 1) - 1) // sh + 1
    wo = (x_shape[3] + left + right - dw * (kw - 1) - 1) // sw + 1
    for p in range(kh):
        for q in range(kw):
            yield p, q, (..., slice(p * dh, p * dh + sh * (ho - 1) + 1, sh), slice(q * dw, q * dw + sw * (wo - 1) + 1, sw))


def padded(x, padding):
    top, bottom, left, right = padding
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))


def reference_conv2d(x, w, stride, padding, dilation, groups=1):
    """The definition: y[b, o, i, j] = Σ w[o, c, p, q] x_padded[b, g·C/G + c, i·sh + p·dh, j·sw + q·dw], each group
    g of output channels reading its own C/G input channels."""
    if groups > 1:
        return np.concatenate([reference_conv2d(xg, wg, stride, padding, dilation) for xg, wg in
                               zip(np.split(x, groups, 1), np.split(w, groups, 0))], axis=1)
    xp = padded(x, padding)
    return sum(np.einsum("oc,bcij->boij", w[:, :, p, q], xp[at])
               for p, q, at in taps(x.shape, w.shape, stride, padding, dilation))


def reference_conv2d_grads(g, x, w, stride, padding, dilation, groups=1):
    """The definition's adjoints: dx and dw of <g, conv2d(x, w)>."""
    if groups > 1:
        parts = [reference_conv2d_grads(gg, xg, wg, stride, padding, dilation) for gg, xg, wg in
                 zip(np.split(g, groups, 1), np.split(x, groups, 1), np.split(w, groups, 0))]
        return np.concatenate([dx for dx, _ in parts], 1), np.concatenate([dw for _, dw in parts], 0)
    xp = padded(x, padding)
    dxp, dw = np.zeros_like(xp), np.zeros_like(w)
    for p, q, at in taps(x.shape, w.shape, stride, padding, dilation):
        dw[:, :, p, q] = np.einsum("boij,bcij->oc", g, xp[at])
        dxp[at] += np.einsum("oc,boij->bcij", w[:, :, p, q], g)
    top, _, left, _ = padding
    return dxp[:, :, top:top + x.shape[2], left:left + x.shape[3]], dw


def windows(x, kernel, stride):
    """The pooling windows (B, C, Ho, Wo, kh·kw), each window's elements in row-major order."""
    view = np.lib.stride_tricks.sliding_window_view(x, kernel, axis=(2, 3))[:, :, ::stride[0], ::stride[1]]
    return view.reshape(*view.shape[:4], -1)


def unpool(weights, shape, kernel, stride):
    """The adjoint of ``windows``: each window's weights added back where they were read."""
    dx = np.zeros(shape)
    (kh, kw), (sh, sw), (ho, wo) = kernel, stride, weights.shape[2:4]
    for p in range(kh):
        for q in range(kw):
            dx[..., p:p + sh * (ho - 1) + 1:sh, q:q + sw * (wo - 1) + 1:sw] += weights[..., p * kw + q]
    return dx


def reference_max_pool_grad(g, x, kernel, stride):
    """As torch.nn.functional.max_pool2d's: each window's gradient to its first largest element, or its last NaN
    (its first element when all are −inf)."""
    win = windows(x, kernel, stride)
    nan = np.isnan(win)
    last_nan = win.shape[-1] - 1 - np.argmax(nan[..., ::-1], -1)
    winner = np.where(nan.any(-1), last_nan, np.argmax(np.where(nan, -INF, win), -1))
    return unpool(g[..., None] * (np.arange(win.shape[-1]) == winner[..., None]), x.shape, kernel, stride)


def torch_case():
    x = np.sin(np.arange(40.0)).reshape(1, 2, 4, 5)
    return x, np.cos(np.arange(36.0)).reshape(3, 2, 2, 3), np.array([0.5, -1.0, 2.0])


def test_conv2d_values_and_gradients_are_pytorchs():
    x, w, b = torch_case()
    conv_ = lambda x, w, b: ag.conv2d(x, w, b, stride=(1, 2), padding=1, dilation=(2, 1))
    y = ag.trace(conv_, x=ag.Input(x.shape, "float64"), w=ag.Input(w.shape, "float64"),
                 b=ag.Input(b.shape, "float64")).compile()(x=x, w=w, b=b)
    assert y.shape == (1, 3, 4, 3)
    np.testing.assert_allclose(y.ravel(), TORCH_Y, atol=1e-9)
    _, (dx, dw, db) = ag.value_and_grad(lambda x, w, b: ag.sum(conv_(x, w, b) ** 2), argnums=(0, 1, 2))(x, w, b)
    for got, want in ((dx, TORCH_DX), (dw, TORCH_DW), (db, TORCH_DB)):
        np.testing.assert_allclose(got.ravel(), want, atol=1e-8)


@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation, groups", [
    ((2, 2, 5, 4), (3, 2, 2, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 2, 5, 4), (3, 2, 2, 3), (2, 1), (1, 1, 2, 2), (1, 2), 1),
    ((2, 2, 5, 4), (3, 2, 2, 3), (1, 3), (0, 2, 3, 0), (2, 1), 1),
    ((2, 2, 1, 9), (3, 2, 1, 3), (1, 1), (0, 0, 4, 0), (1, 2), 1),          # causal conv1d: the left padded only
    ((1, 4, 5, 4), (6, 2, 2, 3), (2, 2), (1, 0, 0, 1), (1, 1), 2),          # two groups, rows the stride skips
    ((1, 3, 4, 4), (3, 1, 3, 2), (1, 1), (1, 1, 0, 1), (1, 1), 3),          # depthwise
], ids=["plain", "strided-padded-dilated", "asymmetric", "causal-1d", "grouped", "depthwise"])
def test_conv2d_kernels_match_the_definition(x_shape, w_shape, stride, padding, dilation, groups, device, rng):
    """Asymmetric padding (the primitive's) and groups included; the backward kernels are the adjoints of the
    forward one: <g, conv(x, w)> = <conv_transpose2d(g, w), x> = <conv2d_weight_grad(g, x), w>."""
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    attrs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    y = on_device(device, "conv2d", x, w, **attrs)
    np.testing.assert_allclose(y, reference_conv2d(x, w, **attrs), atol=1e-12)
    g = rng.standard_normal(y.shape)
    skipped = tuple((x_shape[2 + a] + padding[2 * a] + padding[2 * a + 1] - dilation[a] * (w_shape[2 + a] - 1) - 1)
                    % stride[a] for a in (0, 1))
    dx = on_device(device, "conv_transpose2d", g, w, output_padding=skipped, **attrs)
    dw = on_device(device, "conv2d_weight_grad", g, x, kernel=w_shape[2:], **attrs)
    want_dx, want_dw = reference_conv2d_grads(g, x, w, **attrs)
    np.testing.assert_allclose(dx, want_dx, atol=1e-12)
    np.testing.assert_allclose(dw, want_dw, atol=1e-12)
    assert np.vdot(g, y) == pytest.approx(np.vdot(dx, x), rel=1e-12)
    assert np.vdot(g, y) == pytest.approx(np.vdot(dw, w), rel=1e-12)


@pytest.mark.parametrize("size, stride", [((2, 2), (1, 1)), ((2, 3), (2, 1)), ((1, 2), (2, 3))],
                         ids=["overlapping", "rectangular", "gaps"])
def test_pooling_kernels_match_the_definition(size, stride, device, rng):
    """Max pooling exactly (the first largest wins, NaN over all); inputs in no window (the "gaps" case) get no
    gradient."""
    x, win = POOL_EDGES, windows(POOL_EDGES, size, stride)
    plain = dict(kernel=size, stride=stride, padding=(0, 0, 0, 0), ceil_mode=False)
    y = on_device(device, "max_pool2d", x, dilation=(1, 1), **plain)
    np.testing.assert_array_equal(y, win.max(-1))
    g = rng.standard_normal(y.shape)
    np.testing.assert_allclose(on_device(device, "max_pool2d_grad", g, x, dilation=(1, 1), **plain),   # zeros exact
                               reference_max_pool_grad(g, x, size, stride), rtol=1e-15, atol=0)
    plain.update(count_include_pad=True, divisor_override=0)
    np.testing.assert_allclose(on_device(device, "avg_pool2d", x, **plain), win.mean(-1), rtol=1e-12)
    np.testing.assert_allclose(on_device(device, "avg_pool2d_grad", g, x, **plain),
                               unpool(np.repeat(g[..., None] / win.shape[-1], win.shape[-1], -1), x.shape, size,
                                      stride), rtol=1e-12)


def test_max_pooling_gradient_goes_to_the_first_largest_and_to_nan(device):
    """As torch.nn.functional.max_pool2d's: each window's gradient on its first largest element, or its last NaN;
    on its first element when all are −inf."""
    weights = np.arange(1.0, 17.0).reshape(1, 2, 2, 4)
    dx = on_device(device, "max_pool2d_grad", weights, POOL_EDGES, kernel=(2, 2), stride=(2, 1), padding=(0, 0, 0, 0),
                   dilation=(1, 1), ceil_mode=False)
    np.testing.assert_array_equal(dx[0], [[[0, 3, 0, 0, 0], [0, 0, 0, 7, 0], [0, 11, 0, 7, 8], [0, 0, 0, 0, 0]],
                                          [[9, 0, 0, 12, 0], [0, 0, 21, 0, 0], [0, 0, 29, 0, 16], [13, 0, 0, 0, 0]]])


@pytest.mark.parametrize("kernel, stride, padding, dilation, ceil_mode", [
    ((2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False), ((3, 2), (2, 1), (1, 1, 1, 0), (2, 1), True),
    ((1, 3), (1, 1), (0, 0, 1, 1), (1, 1), False)])
def test_pooling_loops_specialized_to_a_window_size_equal_the_general_ones(kernel, stride, padding, dilation,
                                                                          ceil_mode):
    """ops/cpu/pool_windows.py's loops with the window's size a constant (borders cut by padding and ceil_mode
    skipping taps) against the loops over each window's own taps: bit for bit, NaN and −inf included."""
    from ops.cpu import pool_windows
    x = np.concatenate([POOL_EDGES, POOL_EDGES[:, ::-1] * -1.5], axis=1)
    g = np.arange(1.0, 1.0 + x.size).reshape(x.shape)
    rows, cols = conv.spans(x.shape, conv.windows(x.shape, kernel, stride, padding, dilation, ceil_mode))
    special = pool_windows.specialized(*kernel)
    assert special.WINDOW == kernel and pool_windows.WINDOW == (0, 0)
    gy = g[..., :rows.shape[0], :cols.shape[0]].copy()
    pooled = (*x.shape[:2], rows.shape[0], cols.shape[0])
    for name, arguments in [("max_pool", lambda: (x, rows, cols, np.empty(pooled, x.dtype))),
                            ("max_pool", lambda: (x, rows, cols, np.empty(pooled, np.int64))),
                            ("max_pool_backward", lambda: (gy, x, rows, cols)),
                            ("avg_pool", lambda: (x, rows, cols, True, 0)),
                            ("avg_pool_backward", lambda: (gy, np.zeros_like(x), rows, cols, False, 0))]:
        results = [getattr(module, name).serial(*arguments()) for module in (special, pool_windows)]
        for a, b in zip(*(result if isinstance(result, tuple) else (result,) for result in results)):
            np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_two_by_two_pooling_written_out_equals_the_window_loops(dtype, rng):
    """The 2 × 2, stride-2 max pool (ops/cpu/pool_windows.py ``max_pool_2x2`` and its backward, chosen where no window
    is cut by the border) against the window loops: bit for bit, ties, NaN and −inf included, a last row and column
    in no window left without gradient; windows cut by the border (ceil_mode on odd sizes) keep the loops."""
    from ops.cpu import pool_windows
    edges = np.concatenate([POOL_EDGES, POOL_EDGES[:, ::-1] * -1.5, np.round(rng.standard_normal((1, 2, 4, 5)))],
                           axis=1)
    x = np.concatenate([edges, edges[:, :, ::-1]], axis=2)[:, :, :7].astype(dtype)       # (1, 6, 7, 5): ragged
    attrs = dict(kernel=(2, 2), stride=(2, 2), padding=(0, 0, 0, 0), dilation=(1, 1))
    for ceil_mode, written_out in [(False, True), (True, False)]:
        rows, cols = conv.spans(x.shape, conv.windows(x.shape, ceil_mode=ceil_mode, **attrs))
        loops = pool_windows.specialized(2, 2)
        want = loops.max_pool.serial(x, rows, cols, np.empty((1, 6, len(rows), len(cols)), dtype))
        y = conv.max_pool2d(x, ceil_mode=ceil_mode, **attrs)
        assert conv._two_by_two(x.shape, y.shape, **attrs) == written_out
        np.testing.assert_array_equal(y, want)
        g = rng.standard_normal(y.shape).astype(dtype)
        dx = conv.max_pool2d_grad(g, x, ceil_mode=ceil_mode, **attrs)
        np.testing.assert_array_equal(dx, loops.max_pool_backward.serial(g, x, rows, cols))
        assert written_out <= (not dx[:, :, 6:].any() and not dx[:, :, :, 4:].any())
    x = np.round(rng.standard_normal((8, 16, 24, 24)) * 2).astype(dtype)                 # on the threads, with ties
    rows, cols = conv.spans(x.shape, conv.windows(x.shape, ceil_mode=False, **attrs))
    y, g = conv.max_pool2d(x, ceil_mode=False, **attrs), rng.standard_normal((8, 16, 12, 12)).astype(dtype)
    np.testing.assert_array_equal(y, loops.max_pool.serial(x, rows, cols, np.empty_like(y)))
    np.testing.assert_array_equal(conv.max_pool2d_grad(g, x, ceil_mode=False, **attrs),
                                  loops.max_pool_backward.serial(g, x, rows, cols))


def convolutional_loss(x, w, b, v):
    """The loss of the graph below in NumPy: conv2d, tanh, both poolings, a causal conv1d and avg_pool1d."""
    h = np.tanh(reference_conv2d(x, w, (1, 2), (1, 1, 1, 1), (2, 1)) + b[:, None, None])
    pooled = windows(h, (2, 2), (1, 1)).max(-1) + windows(h, (1, 2), (1, 1)).mean(-1)[..., 1:, :]
    sequence = reference_conv2d(pooled.reshape(2, 3, 1, 6), v[:, :, None], (1, 1), (0, 0, 2, 0), (1, 2))
    return (sequence * sequence).sum() + windows(sequence, (1, 2), (1, 2)).mean(-1).sum()


def test_a_convolutional_graph_runs_forward_and_backward(device, rng, numeric_grad):
    def f(x, w, b, v):
        h = ag.tanh(ag.conv2d(x, w, b, stride=(1, 2), padding=1, dilation=(2, 1)))
        pooled = ag.max_pool2d(h, 2, 1) + ag.avg_pool2d(h, (1, 2), 1)[..., 1:, :]
        sequence = ag.conv1d(ag.reshape(pooled, (2, 3, 6)), v, causal=True, dilation=2)
        return ag.sum(sequence * sequence) + ag.sum(ag.avg_pool1d(sequence, 2))

    shapes = {"x": (2, 2, 4, 5), "w": (3, 2, 2, 3), "b": (3,), "v": (2, 3, 2)}
    graph = ag.trace(f, **{name: ag.Input(shape) for name, shape in shapes.items()})
    arrays = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}
    loss, *grads = graph.grad(wrt=list(shapes)).compile(device.name)(**arrays)
    wide = {name: a.astype(np.float64) for name, a in arrays.items()}
    np.testing.assert_allclose(loss, convolutional_loss(**wide), rtol=1e-5)
    for name, got in zip(shapes, grads):
        assert got.dtype == np.float32 and got.shape == shapes[name]
        np.testing.assert_allclose(got, numeric_grad(lambda a: convolutional_loss(**{**wide, name: a}), wide[name]),
                                   rtol=1e-4, atol=1e-4)


def test_second_order_gradients_through_a_convolution_on_every_device(device, rng, numeric_grad):
    """d/d(x, w) of |∂L/∂x|² + |∂L/∂w|², L = Σ tanh(conv2d(x, w)), against finite differences of the definition."""
    def penalty(x, w):
        dx, dw = ag.gradients(ag.sum(ag.tanh(ag.conv2d(x, w, padding=1))), [x, w])
        return ag.sum(dx * dx) + ag.sum(dw * dw)

    def reference(x, w):
        attrs = {"stride": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1)}
        dx, dw = reference_conv2d_grads(1 - np.tanh(reference_conv2d(x, w, **attrs)) ** 2, x, w, **attrs)
        return (dx * dx).sum() + (dw * dw).sum()

    graph = ag.trace(penalty, x=ag.Input((1, 2, 4, 4)), w=ag.Input((2, 2, 3, 3)))
    x, w = rng.standard_normal((1, 2, 4, 4)).astype(np.float32), rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    value, dx, dw = graph.grad(wrt=["x", "w"]).compile(device.name)(x=x, w=w)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    np.testing.assert_allclose(value, reference(x64, w64), rtol=1e-5)
    np.testing.assert_allclose(dx, numeric_grad(lambda a: reference(a, w64), x64), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dw, numeric_grad(lambda a: reference(x64, a), w64), rtol=1e-4, atol=1e-4)


def test_conv2d_in_float32_agrees_with_float64():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((2, 3, 7, 6)), rng.standard_normal((4, 3, 3, 2))
    y = conv.conv2d(x.astype(np.float32), w.astype(np.float32), (1, 1), (1, 1, 1, 1), (1, 1), 1)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, reference_conv2d(x, w, (1, 1), (1, 1, 1, 1), (1, 1)), rtol=1e-5, atol=1e-5)


def test_conv_and_pool_gradients_pass_gradcheck_in_float64():
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((2, 3, 7, 6)), rng.standard_normal((4, 3, 3, 2)), rng.standard_normal(4)
    assert gradcheck(lambda x, w, b: ag.sum(ag.tanh(ag.conv2d(x, w, b, stride=(2, 1), padding=(1, 2),
                                                             dilation=(1, 2)))), x, w, b).ok
    assert gradcheck(lambda x: ag.sum(ag.max_pool2d(x, 2) ** 2) + ag.sum(ag.avg_pool2d(x, (3, 2), 1) ** 2), x).ok
    assert gradcheck(lambda x, w: ag.sum(ag.tanh(ag.conv1d(x, w, causal=True, dilation=2))),
                     rng.standard_normal((2, 3, 9)), rng.standard_normal((4, 3, 3))).ok


def test_second_order_gradients_through_a_convolution():
    """The backward primitives have VJPs of their own: d/dw of |∂L/∂x|², checked by finite differences."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((1, 2, 5, 5)), rng.standard_normal((3, 2, 3, 3))

    def penalty(x, w):
        dx, dw = ag.gradients(ag.sum(ag.tanh(ag.conv2d(x, w, padding=1))), [x, w])
        return ag.sum(dx * dx) + ag.sum(dw * dw)
    assert gradcheck(penalty, x, w).ok


def run(fn, x):
    return ag.trace(fn, x=ag.Input(x.shape, x.dtype)).compile()(x=x)


def test_max_and_average_pooling_are_pytorchs():
    """Max pooling: NaN wins its windows and takes their gradient; among ties the first largest does."""
    weights = np.arange(1.0, 10.0).reshape(1, 1, 3, 3)
    np.testing.assert_array_equal(run(lambda x: ag.max_pool2d(x, 2, 1), POOL_X)[0, 0],
                                  [[3, 3, NAN], [5, 5, NAN], [5, 5, 1]])
    _, dx = ag.value_and_grad(lambda x: ag.sum(ag.max_pool2d(x, 2, 1) * weights))(POOL_X)
    np.testing.assert_array_equal(dx[0, 0], [[0, 3, 0, 0], [0, 0, 0, 9], [0, 24, 0, 9], [0, 0, 0, 0]])
    np.testing.assert_allclose(run(lambda x: ag.avg_pool2d(x, (2, 3), (2, 1)), POOL_X)[0, 0],
                               [[11 / 6, NAN], [14 / 6, 11 / 6]])
    _, dx = ag.value_and_grad(lambda x: ag.sum(ag.avg_pool2d(x, (2, 3), (2, 1)) * weights[..., :2, :2]))(POOL_X)
    np.testing.assert_allclose(dx[0, 0], np.array([[1, 3, 3, 2], [1, 3, 3, 2], [4, 9, 9, 5], [4, 9, 9, 5]]) / 6)


def test_conv1d_is_conv2d_over_one_row_and_causal_sees_only_the_past():
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((2, 3, 9)), rng.standard_normal((4, 3, 3))
    run = lambda **kw: ag.trace(lambda x: ag.conv1d(x, w, **kw), x=ag.Input(("B", 3, "T"), "float64")).compile()
    y = run(causal=True, dilation=2)(x=x)
    assert y.shape == (2, 4, 9)
    np.testing.assert_allclose(y, reference_conv2d(x[:, :, None], w[:, :, None], (1, 1), (0, 0, 4, 0), (1, 2))[:, :, 0],
                               atol=1e-12)
    future = x.copy()
    future[:, :, 5:] += 1.0
    np.testing.assert_array_equal(run(causal=True, dilation=2)(x=future)[:, :, :5], y[:, :, :5])
    assert run(causal=True, dilation=2)(x=x[:, :, :4]).shape == (2, 4, 4)      # one graph serves every T
    y = ag.trace(lambda x: ag.conv1d(x, w, stride=2, padding=1), x=ag.Input(x.shape, "float64")).compile()(x=x)
    np.testing.assert_allclose(y, reference_conv2d(x[:, :, None], w[:, :, None], (1, 2), (0, 0, 1, 1), (1, 1))[:, :, 0],
                               atol=1e-12)


def test_pool1d_pools_along_time():
    x = np.arange(12.0).reshape(1, 2, 6) ** 2 % 7
    for op, reduce in ((ag.max_pool1d, np.max), (ag.avg_pool1d, np.mean)):
        y = run(lambda x, op=op: op(x, 3, 2), x)
        np.testing.assert_allclose(y, [[[reduce(row[i:i + 3]) for i in (0, 2)] for row in x[0]]])


def test_flops_count_two_per_multiply_add():
    graph = ag.trace(lambda x: ag.conv2d(x, np.zeros((4, 3, 3, 2), np.float32), padding=1),
                     x=ag.Input((2, 3, 7, 6)))
    assert total_flops(graph) == 2 * (2 * 4 * 7 * 7) * (3 * 3 * 2)


@pytest.mark.parametrize("fn, error, message", [
    (lambda x: ag.conv2d(x, np.zeros((4, 2, 3, 3), np.float32)), ShapeError, "groups=1 must divide the input's 3"),
    (lambda x: ag.conv2d(x, np.zeros((4, 3, 9, 3), np.float32)), ShapeError, "kernel spans 9 positions"),
    (lambda x: ag.conv2d(x, np.zeros((4, 3, 3, 3), np.float32), dilation=(4, 1)), ShapeError, "spans 9 positions"),
    (lambda x: ag.conv2d(x, np.zeros((4, 3, 3, 3), np.float32), stride=0), ShapeError, "stride must be an int >= 1"),
    (lambda x: ag.conv2d(x, np.zeros((4, 3, 3, 3), np.float32), padding=(1, -1)), ShapeError, "padding must be"),
    (lambda x: ag.conv2d(x, np.zeros((4, 3, 3, 3), np.float32), np.zeros(3, np.float32)), ShapeError, "bias"),
    (lambda x: ag.conv2d(x, np.zeros((4, 3, 3, 3))), DTypeError, "different dtypes"),
    (lambda x: ag.conv2d(x[0], np.zeros((4, 3, 3, 3), np.float32)), ShapeError, "(B, C, H, W)"),
    (lambda x: ag.conv2d(x.astype("int32"), np.zeros((4, 3, 3, 3), np.int32)), DTypeError, "floating-point"),
    (lambda x: ag.max_pool2d(x, 8), ShapeError, "kernel spans 8 positions"),
    (lambda x: ag.avg_pool2d(x, 2, stride=(1, 0)), ShapeError, "stride must be"),
    (lambda x: ag.conv1d(x, np.zeros((4, 3, 3), np.float32)), ShapeError, "conv1d takes an input (B, C, T)"),
])
def test_bad_inputs_raise_errors_that_say_what_to_change(fn, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        ag.trace(fn, x=ag.Input((2, 3, 7, 7)))


def test_symbolic_sizes_need_a_size_keeping_convolution():
    x = ag.Input((2, 3, "T"))
    with pytest.raises(ShapeError, match="symbolic: give it a concrete size, or use stride 1 and padding 2"):
        ag.trace(lambda x: ag.conv1d(x, np.zeros((4, 3, 3), np.float32)), x=x)
    with pytest.raises(ShapeError, match="causal conv1d pads"):
        ag.trace(lambda x: ag.conv1d(x, np.zeros((4, 3, 3), np.float32), padding=1, causal=True), x=x)
    assert ag.trace(lambda x: ag.conv1d(x, np.zeros((4, 3, 3), np.float32), padding=1), x=x).outputs


def test_onnx_export_gives_conv_maxpool_and_averagepool_that_onnxruntime_agrees_with():
    ort = pytest.importorskip("onnxruntime")
    from attngraph.export import to_onnx
    rng = np.random.default_rng(6)
    w, v = rng.standard_normal((4, 3, 3, 2)).astype(np.float32), rng.standard_normal((2, 3, 3)).astype(np.float32)

    def f(x, seq):
        h = ag.conv2d(x, w, np.ones(4, np.float32), stride=(2, 1), padding=(1, 2), dilation=(1, 2))
        return ag.max_pool2d(h, 2, 1) + ag.avg_pool2d(h, (2, 2), 1), ag.conv1d(seq, v, causal=True, dilation=2)

    graph = ag.trace(f, x=ag.Input(("B", 3, 7, 7)), seq=ag.Input(("B", 3, "T")))
    feeds = dict(x=rng.standard_normal((2, 3, 7, 7)).astype(np.float32),
                 seq=rng.standard_normal((2, 3, 6)).astype(np.float32))
    session = ort.InferenceSession(to_onnx(graph).SerializeToString(), providers=["CPUExecutionProvider"])
    for got, want in zip(session.run(None, feeds), graph.compile()(**feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
