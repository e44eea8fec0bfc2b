"""2-D convolution (cross-correlation, as PyTorch's), its transpose, and max / average / adaptive pooling, forward
and backward.

x is (B, C, H, W), w (O, C/G, kh, kw) for ``groups`` G (output channel o reads the input channels of its group,
o // (O/G)); ``stride`` (sh, sw), ``dilation`` (dh, dw) and ``padding`` (top, bottom, left, right), zeros outside
x (asymmetric, so that a causal 1-D convolution pads its left side only):

  y[b, o, i, j] = Σ_{c, p, q} w[o, c, p, q] · x[b, g·C/G + c, i·sh + p·dh − top, j·sw + q·dw − left]
  Ho = (H + top + bottom − dh·(kh − 1) − 1) // sh + 1, and Wo alike

as the product of w, (G, O/G, C/G·kh·kw), with the columns of x (im2col: one column of C·kh·kw taps per output
position, each group's rows (G, C/G·kh·kw, B·Ho·Wo), the batch's positions side by side, so that one product per
group serves the whole batch), through BLAS. The transposed convolution (conv2d's input gradient, and PyTorch's
conv_transpose2d) is the columns wᵀ g scattered back onto an input of (Ho − 1)·sh − top − bottom + dh·(kh − 1) + 1 +
output_padding rows (col2im), and Wo alike; the weight gradient dw = g colsᵀ, over the batch's B·Ho·Wo positions.
The columns are read from, and scattered onto, the image inside a border of zeros of the padding's width, so that no
position is tested against the image's borders. The product is kept over a direct loop nest, which it outruns
(benchmarks/MEASUREMENTS.md); its columns cost B·C·kh·kw·Ho·Wo elements of memory. A 1-D convolution is this one
over height 1.

Pooling: along each axis, output i reads the window of ``kernel`` positions i·stride − before + t·dilation
(t < kernel) that fall inside the input, padded with −inf (max) or zeros (average); with ``ceil_mode`` the last
window may hang over the end (shapes.output_size counts them). Adaptive pooling (kernel 0 here) reads positions
floor(i·L/n) to ceil((i + 1)·L/n) − 1 for n outputs. Max pooling gives the window's largest value (NaN if any is
NaN) and its gradient goes to one element, the first largest (the last NaN; the first inside the input when all
are −inf), as PyTorch's CPU kernel, whose flat index in the H·W plane ``max_pool2d_indices`` gives. Average
pooling divides by ``divisor`` when it is not 0, else by the window's size counted up to the padding's end
(``count_include_pad``) or inside the input only, as PyTorch does.
"""
import numpy as np
from numba import njit, prange

from ops.cpu import pool_windows
from ops.cpu.matmul import matmul
from ops.cpu.pool_windows import specialized
from ops.cpu.threads import parallel_kernel
from ops.shapes import output_size, transposed_size


def conv2d(x, w, stride, padding, dilation, groups):
    """y = w ⋆ x, (B, O, Ho, Wo)."""
    B, O = x.shape[0], w.shape[0]
    cols, ho, wo = _columns(x, w.shape[2:], stride, padding, dilation, groups)
    y = matmul(np.ascontiguousarray(w).reshape(groups, O // groups, -1), cols)
    return np.ascontiguousarray(y.reshape(O, B, ho, wo).transpose(1, 0, 2, 3))


def conv_transpose2d(g, w, stride, padding, output_padding, dilation, groups):
    """The transposed convolution of g (B, O, Ho, Wo) by w (O, C/G, kh, kw): (B, C, H, W), the adjoint of conv2d
    (whose input gradient it is)."""
    B, O, ho, wo = g.shape
    _, cg, kh, kw = w.shape
    size = [transposed_size(n, k, stride[a], padding[2 * a], padding[2 * a + 1], dilation[a], output_padding[a])
            for a, (n, k) in enumerate(((ho, kh), (wo, kw)))]
    dcols = matmul(np.ascontiguousarray(w).reshape(groups, O // groups, -1), _by_channel(g, groups), transpose_a=True)
    top, bottom, left, right = padding
    dx = np.zeros((B, groups * cg, size[0] + top + bottom, size[1] + left + right), dcols.dtype)
    _unfold(dx, dcols.reshape(groups * cg * kh * kw, B, ho * wo), kh, kw, *stride, *dilation, wo, True)
    return np.ascontiguousarray(dx[:, :, top:top + size[0], left:left + size[1]]) if any(padding) else dx


def conv2d_weight_grad(g, x, kernel, stride, padding, dilation, groups):
    """dw (O, C/G, kh, kw) = g colsᵀ, from the output gradient g (B, O, Ho, Wo) and the input x."""
    cols, _, _ = _columns(x, kernel, stride, padding, dilation, groups)
    dw = matmul(_by_channel(g, groups), cols, transpose_b=True)
    return dw.reshape(g.shape[1], x.shape[1] // groups, *kernel)


def _by_channel(g, groups):
    """g (B, O, Ho, Wo) as each group's channels, (G, O/G, B·Ho·Wo)."""
    O = g.shape[1]
    return np.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(groups, O // groups, -1)


def _columns(x, kernel, stride, padding, dilation, groups):
    """im2col of x as each group's rows, (G, C/G·kh·kw, B·Ho·Wo); and Ho, Wo."""
    H, W = x.shape[2:]
    ho = output_size(H, kernel[0], stride[0], padding[0], padding[1], dilation[0])
    wo = output_size(W, kernel[1], stride[1], padding[2], padding[3], dilation[1])
    B, rows = x.shape[0], x.shape[1] * kernel[0] * kernel[1]
    cols = np.empty((rows, B, ho * wo), x.dtype)
    _unfold(_padded(x, padding), cols, *kernel, *stride, *dilation, wo, False)
    return cols.reshape(groups, rows // groups, B * ho * wo), ho, wo


def _padded(x, padding):
    """x (B, C, H, W) inside a border of zeros, ``padding`` (top, bottom, left, right) wide."""
    if not any(padding):
        return np.ascontiguousarray(x)
    top, bottom, left, right = padding
    B, C, H, W = x.shape
    out = np.zeros((B, C, H + top + bottom, W + left + right), x.dtype)
    out[:, :, top:top + H, left:left + W] = x
    return out


@parallel_kernel
def _unfold(image, cols, kh, kw, sh, sw, dh, dw, wo, fold):
    """im2col of an image already padded: cols[(c·kh + p)·kw + q, b, i·wo + j] = image[b, c, i·sh + p·dh, j·sw +
    q·dw], cols C-contiguous; with ``fold``, its adjoint col2im: each column entry added back onto the image position
    it was read from. Every position read or written lies inside the padded image, so the rows copy without a test
    each (0.7 against 1.0 ms testing each position against the unpadded image's borders, for 663 K entries); at
    stride 1 a row of the output reads a run of adjacent pixels, a loop over contiguous slices that vectorizes (0.41
    → 0.09 ms for (32, 3, 24, 24) and 3 × 3 taps; col2im 0.34 → 0.12)."""
    B, C = image.shape[:2]
    ho = cols.shape[2] // wo
    for bc in prange(B * C):
        b, c = bc // C, bc % C
        for p in range(kh):
            for q in range(kw):
                row = cols[(c * kh + p) * kw + q, b]
                for i in range(ho):
                    line, taps = image[b, c, i * sh + p * dh], row[i * wo:(i + 1) * wo]
                    if sw == 1:
                        _copy_run(line[q * dw:q * dw + wo], taps, fold)
                    else:
                        for j in range(wo):
                            if fold:
                                line[j * sw + q * dw] += taps[j]
                            else:
                                taps[j] = line[j * sw + q * dw]


@njit(cache=True, inline="always")
def _copy_run(pixels, taps, fold):
    """taps = pixels, or (``fold``) pixels += taps, for two contiguous runs of one length."""
    for j in range(taps.shape[0]):
        if fold:
            pixels[j] += taps[j]
        else:
            taps[j] = pixels[j]


@njit(cache=True)
def _span(i, size, kernel, stride, before, after, dilation, count):
    """Output i's window along an axis of ``size`` (of ``count`` outputs): (first, step, taps, padded): the
    positions first + t·step, t < taps, inside the input, and the window's length counted up to the end of the
    padding. ``kernel`` 0 is adaptive pooling's window, floor(i·size/count) to ceil((i + 1)·size/count)."""
    if kernel == 0:
        first = i * size // count
        taps = -(-(i + 1) * size // count) - first
        return first, 1, taps, taps
    start = i * stride - before
    padded = min(start + kernel, size + after) - start
    skip = -(start // dilation) if start < 0 else 0
    end = min(kernel, (size - start + dilation - 1) // dilation)
    return start + skip * dilation, dilation, max(end - skip, 0), padded


def windows(shape, kernel, stride, padding, dilation, ceil_mode):
    """The window tuples (kernel, stride, before, after, dilation, count) of the two spatial axes of ``shape``."""
    return tuple((kernel[a], stride[a], padding[2 * a], padding[2 * a + 1], dilation[a],
                  output_size(shape[2 + a], kernel[a], stride[a], padding[2 * a], padding[2 * a + 1], dilation[a],
                              ceil_mode)) for a in (0, 1))


def adaptive_windows(size):
    """The window tuples of adaptive pooling to ``size`` (Ho, Wo)."""
    return tuple((0, 0, 0, 0, 1, n) for n in size)


def max_pool2d(x, kernel, stride, padding, dilation, ceil_mode):
    """The largest value of each window, (B, C, Ho, Wo)."""
    loops, rows, cols = _planned(x.shape, kernel, stride, padding, dilation, ceil_mode)
    out = _pooled(x, (len(rows), len(cols)), x.dtype)
    if _two_by_two(x.shape, out.shape, kernel, stride, padding, dilation):
        return pool_windows.max_pool_2x2(np.ascontiguousarray(x), out)
    return loops.max_pool(np.ascontiguousarray(x), rows, cols, out)


def max_pool2d_indices(x, kernel, stride, padding, dilation, ceil_mode):
    """Where each window's largest value lies: its flat index r·W + s in the H·W plane (int64), as PyTorch's."""
    loops, rows, cols = _planned(x.shape, kernel, stride, padding, dilation, ceil_mode)
    return loops.max_pool(np.ascontiguousarray(x), rows, cols, _pooled(x, (len(rows), len(cols)), np.int64))


def _pooled(x, size, dtype):
    """The empty output of pooling x (B, C, H, W) to ``size`` (Ho, Wo): its values (x's dtype) or positions."""
    return np.empty(x.shape[:2] + tuple(size), dtype)


def max_pool2d_grad(g, x, kernel, stride, padding, dilation, ceil_mode):
    """dx: each window's gradient on its first largest element (the last NaN), summed where windows overlap."""
    if _two_by_two(x.shape, g.shape, kernel, stride, padding, dilation):
        return pool_windows.max_pool_backward_2x2(np.ascontiguousarray(g), np.ascontiguousarray(x))
    loops, rows, cols = _planned(x.shape, kernel, stride, padding, dilation, ceil_mode)
    return loops.max_pool_backward(np.ascontiguousarray(g), np.ascontiguousarray(x), rows, cols)


def _two_by_two(shape, pooled, kernel, stride, padding, dilation) -> bool:
    """Whether pooling ``shape`` (B, C, H, W) to ``pooled`` (…, Ho, Wo) takes 2 × 2 windows at stride 2 from the corner,
    none cut by the border: the windows of pool_windows' written-out 2 × 2 loops."""
    return (tuple(kernel) == tuple(stride) == (2, 2) and not any(padding) and tuple(dilation) == (1, 1)
            and 2 * pooled[2] <= shape[2] and 2 * pooled[3] <= shape[3])


def avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """The mean of each window, (B, C, Ho, Wo)."""
    loops, rows, cols = _planned(x.shape, kernel, stride, padding, (1, 1), ceil_mode)
    return loops.avg_pool(np.ascontiguousarray(x), rows, cols, count_include_pad, divisor_override)


def avg_pool2d_grad(g, x_shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """dx: each window's gradient divided by its divisor onto its elements, summed where windows overlap."""
    loops, rows, cols = _planned(x_shape, kernel, stride, padding, (1, 1), ceil_mode)
    return loops.avg_pool_backward(np.ascontiguousarray(g), np.zeros(x_shape, g.dtype), rows, cols,
                                   count_include_pad, divisor_override)


def _planned(shape, kernel, stride, padding, dilation, ceil_mode) -> tuple:
    """The window loops for ``kernel`` (pool_windows.specialized) and the spans of the rows and of the columns."""
    return specialized(*kernel), *spans(shape, windows(shape, kernel, stride, padding, dilation, ceil_mode))


def spans(shape, windows) -> tuple[np.ndarray, np.ndarray]:
    """The windows of the rows and of the columns of a (B, C, H, W) input, each (outputs, 4): ``_span`` of each
    output, computed once for all the planes."""
    return tuple(_axis_spans(shape[2 + a], *window) for a, window in enumerate(windows))


@njit(cache=True)
def _axis_spans(size, kernel, stride, before, after, dilation, count):
    spans = np.empty((count, 4), np.int64)
    for i in range(count):
        spans[i, 0], spans[i, 1], spans[i, 2], spans[i, 3] = _span(i, size, kernel, stride, before, after, dilation,
                                                                    count)
    return spans


KERNELS = {
    "conv2d": conv2d,
    "conv_transpose2d": conv_transpose2d,
    "conv2d_weight_grad": conv2d_weight_grad,
    "max_pool2d": max_pool2d,
    "max_pool2d_indices": max_pool2d_indices,
    "max_pool2d_grad": max_pool2d_grad,
    "avg_pool2d": avg_pool2d,
    "avg_pool2d_grad": lambda g, x, **attrs: avg_pool2d_grad(g, x.shape, **attrs),
    "adaptive_max_pool2d": lambda x, size: pool_windows.max_pool(
        np.ascontiguousarray(x), *spans(x.shape, adaptive_windows(size)), _pooled(x, size, x.dtype)),
    "adaptive_max_pool2d_grad": lambda g, x, size: pool_windows.max_pool_backward(
        np.ascontiguousarray(g), np.ascontiguousarray(x), *spans(x.shape, adaptive_windows(size))),
    "adaptive_avg_pool2d": lambda x, size: pool_windows.avg_pool(np.ascontiguousarray(x),
                                                                 *spans(x.shape, adaptive_windows(size)), False, 0),
    "adaptive_avg_pool2d_grad": lambda g, x, size: pool_windows.avg_pool_backward(
        np.ascontiguousarray(g), np.zeros(x.shape, g.dtype), *spans(x.shape, adaptive_windows(size)), False, 0),
}
