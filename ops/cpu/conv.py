"""2-D convolution (cross-correlation, as PyTorch's) and max / average pooling, forward and backward.

x is (B, C, H, W), w (O, C, kh, kw); ``stride`` (sh, sw), ``dilation`` (dh, dw) and ``padding`` (top, bottom,
left, right), zeros outside x (asymmetric, so that a causal 1-D convolution pads its left side only):

  y[b, o, i, j] = Σ_{c, p, q} w[o, c, p, q] · x[b, c, i·sh + p·dh − top, j·sw + q·dw − left]
  Ho = (H + top + bottom − dh·(kh − 1) − 1) // sh + 1, and Wo alike

as the product of w, (O, C·kh·kw), with the columns of x (im2col: one column of C·kh·kw taps per output
position, (B, C·kh·kw, Ho·Wo)), through BLAS. The backward: dw = Σ_b g[b] colsᵀ, and dx the columns wᵀ g[b]
scattered back onto the input (col2im), the transposed convolution. The product is kept over a direct loop
nest, which it outruns (benchmarks/MEASUREMENTS.md); its columns cost B·C·kh·kw·Ho·Wo elements of memory. A 1-D
convolution is this one over height 1.

Pooling takes windows kh × kw with stride (sh, sw), no padding: max pooling gives the window's largest value
(NaN if any is NaN) and its gradient goes to one element, the first largest (the last NaN), as PyTorch's
CPU kernel; average pooling gives the window's mean and spreads the gradient evenly over the window.
"""
import math

import numpy as np
from numba import njit, prange

from ops.cpu.matmul import matmul
from ops.cpu.threads import parallel_kernel
from ops.shapes import output_size


def conv2d(x, w, stride, padding, dilation):
    """y = w ⋆ x, (B, O, Ho, Wo)."""
    B, O = x.shape[0], w.shape[0]
    cols, ho, wo = _columns(x, w.shape[2:], stride, padding, dilation)
    return matmul(w.reshape(1, O, -1), cols).reshape(B, O, ho, wo)


def conv2d_input_grad(g, w, x_shape, stride, padding, dilation):
    """dx (B, C, H, W) from the output gradient g (B, O, Ho, Wo): the transposed convolution of g by w."""
    B, O, ho, wo = g.shape
    _, C, kh, kw = w.shape
    dcols = matmul(np.ascontiguousarray(w).reshape(1, O, -1), np.ascontiguousarray(g).reshape(B, O, ho * wo),
                   transpose_a=True)
    dx = np.zeros((B, C, *x_shape[2:]), dcols.dtype)
    _unfold(dx, dcols, kh, kw, *stride, padding[0], padding[2], *dilation, wo, True)
    return dx


def conv2d_weight_grad(g, x, kernel, stride, padding, dilation):
    """dw (O, C, kh, kw) = Σ_b g[b] colsᵀ, from the output gradient g (B, O, Ho, Wo) and the input x."""
    B, O, ho, wo = g.shape
    cols, _, _ = _columns(x, kernel, stride, padding, dilation)
    dw = matmul(np.ascontiguousarray(g).reshape(B, O, ho * wo), cols, transpose_b=True).sum(axis=0)
    return dw.reshape(O, x.shape[1], *kernel)


def _columns(x, kernel, stride, padding, dilation):
    """im2col of x: (B, C·kh·kw, Ho·Wo), and Ho, Wo."""
    H, W = x.shape[2:]
    ho = output_size(H, kernel[0], stride[0], padding[0], padding[1], dilation[0])
    wo = output_size(W, kernel[1], stride[1], padding[2], padding[3], dilation[1])
    cols = np.empty((x.shape[0], x.shape[1] * kernel[0] * kernel[1], ho * wo), x.dtype)
    _unfold(np.ascontiguousarray(x), cols, *kernel, *stride, padding[0], padding[2], *dilation, wo, False)
    return cols, ho, wo


@parallel_kernel
def _unfold(image, cols, kh, kw, sh, sw, top, left, dh, dw, wo, fold):
    """im2col: cols[b, (c·kh + p)·kw + q, i·wo + j] = image[b, c, i·sh + p·dh − top, j·sw + q·dw − left], 0 where
    that falls outside the image; with ``fold``, its adjoint col2im: each column entry added back onto the image
    position it was read from."""
    B, C, H, W = image.shape
    ho, zero = cols.shape[2] // wo, image.dtype.type(0)
    for bc in prange(B * C):
        b, c = bc // C, bc % C
        for p in range(kh):
            for q in range(kw):
                row = cols[b, (c * kh + p) * kw + q]
                for i in range(ho):
                    r = i * sh + p * dh - top
                    for j in range(wo):
                        s = j * sw + q * dw - left
                        inside = 0 <= r < H and 0 <= s < W
                        if fold:
                            if inside:
                                image[b, c, r, s] += row[i * wo + j]
                        else:
                            row[i * wo + j] = image[b, c, r, s] if inside else zero


def max_pool2d(x, kernel, stride):
    """The largest value of each kh × kw window, (B, C, Ho, Wo)."""
    return _max_pool(np.ascontiguousarray(x), *kernel, *stride)


def max_pool2d_grad(g, x, kernel, stride):
    """dx: each window's gradient on its first largest element (the last NaN), summed where windows overlap."""
    return _max_pool_backward(np.ascontiguousarray(g), np.ascontiguousarray(x), *kernel, *stride)


def avg_pool2d(x, kernel, stride):
    """The mean of each kh × kw window, (B, C, Ho, Wo)."""
    return _avg_pool(np.ascontiguousarray(x), *kernel, *stride)


def avg_pool2d_grad(g, x_shape, kernel, stride):
    """dx: each window's gradient divided evenly over its kh·kw elements, summed where windows overlap."""
    return _avg_pool_backward(np.ascontiguousarray(g), x_shape[2], x_shape[3], *kernel, *stride)


@njit(cache=True)
def _argmax_window(x, b, c, i, j, kh, kw, sh, sw):
    """(r, s) of the first largest element of a window (the last NaN; the first when all are −inf)."""
    r0, s0 = i * sh, j * sw
    best, at = -math.inf, r0 * x.shape[3] + s0
    for r in range(r0, r0 + kh):
        for s in range(s0, s0 + kw):
            v = x[b, c, r, s]
            if v > best or math.isnan(v):
                best, at = v, r * x.shape[3] + s
    return at // x.shape[3], at % x.shape[3]


@parallel_kernel
def _max_pool(x, kh, kw, sh, sw):
    B, C, H, W = x.shape
    ho, wo = (H - kh) // sh + 1, (W - kw) // sw + 1
    y = np.empty((B, C, ho, wo), x.dtype)
    for bc in prange(B * C):
        b, c = bc // C, bc % C
        for i in range(ho):
            for j in range(wo):
                r, s = _argmax_window(x, b, c, i, j, kh, kw, sh, sw)
                y[b, c, i, j] = x[b, c, r, s]
    return y


@parallel_kernel
def _max_pool_backward(g, x, kh, kw, sh, sw):
    B, C, ho, wo = g.shape
    dx = np.zeros_like(x)
    for bc in prange(B * C):
        b, c = bc // C, bc % C
        for i in range(ho):
            for j in range(wo):
                r, s = _argmax_window(x, b, c, i, j, kh, kw, sh, sw)
                dx[b, c, r, s] += g[b, c, i, j]
    return dx


@parallel_kernel
def _avg_pool(x, kh, kw, sh, sw):
    B, C, H, W = x.shape
    ho, wo = (H - kh) // sh + 1, (W - kw) // sw + 1
    y = np.empty((B, C, ho, wo), x.dtype)
    scale = x.dtype.type(1 / (kh * kw))
    for bc in prange(B * C):
        b, c = bc // C, bc % C
        for i in range(ho):
            for j in range(wo):
                total = x.dtype.type(0)
                for r in range(i * sh, i * sh + kh):
                    for s in range(j * sw, j * sw + kw):
                        total += x[b, c, r, s]
                y[b, c, i, j] = total * scale
    return y


@parallel_kernel
def _avg_pool_backward(g, H, W, kh, kw, sh, sw):
    B, C, ho, wo = g.shape
    dx = np.zeros((B, C, H, W), g.dtype)
    scale = g.dtype.type(1 / (kh * kw))
    for bc in prange(B * C):
        b, c = bc // C, bc % C
        for i in range(ho):
            for j in range(wo):
                share = g[b, c, i, j] * scale
                for r in range(i * sh, i * sh + kh):
                    for s in range(j * sw, j * sw + kw):
                        dx[b, c, r, s] += share
    return dx


KERNELS = {
    "conv2d": conv2d,
    "conv2d_input_grad": lambda g, w, x, **attrs: conv2d_input_grad(g, w, x.shape, **attrs),
    "conv2d_weight_grad": conv2d_weight_grad,
    "max_pool2d": max_pool2d,
    "max_pool2d_grad": max_pool2d_grad,
    "avg_pool2d": avg_pool2d,
    "avg_pool2d_grad": lambda g, x, **attrs: avg_pool2d_grad(g, x.shape, **attrs),
}
