"""2-D convolution (cross-correlation, as PyTorch's), its transpose, and max / average / adaptive pooling on the
device, forward and backward: the twins of ops/cpu/conv.py, with its formulas, attributes and results.

x is (B, C, H, W), w (O, C/G, kh, kw) for ``groups`` G = C / w.shape[1], g the output's gradient (B, O, Ho, Wo);
``stride`` (sh, sw), ``dilation`` (dh, dw), ``padding`` (top, bottom, left, right) of zeros. With
r(i, p) = i·sh + p·dh − top, s(j, q) alike, and c' = (o // (O/G))·C/G + c the input channel that output o reads:

  conv2d             y[b, o, i, j]   = Σ_{c, p, q} w[o, c, p, q] · x[b, c', r(i, p), s(j, q)]
  conv_transpose2d   dx[b, c', r, s] = Σ_{o, p, q} w[o, c, p, q] · g[b, o, i, j]  over r(i, p) = r, s(j, q) = s
  conv2d_weight_grad dw[o, c, p, q]  = Σ_{b, i, j} g[b, o, i, j] · x[b, c', r(i, p), s(j, q)]

Direct kernels: a thread per element of the result, looping over the terms of its sum. Each gathers what it
needs, so no thread writes where another does: no atomics, and the same sums in the same order on every run.
im2col and the tiled product of ops/cuda/matmul.py would reuse operands through shared memory and be faster for
many channels on a real GPU, but they need a column buffer of B·C·kh·kw·Ho·Wo elements, a scatter (col2im, with
atomics or a second gather) for dx and a batch reduction for dw, and the product's barriers cost milliseconds
per block in the simulator, where these kernels are tested; no GPU was at hand to measure the difference.

Pooling windows are the CPU's (its ``_span``, compiled for the device, and the window tuples it builds): a thread
per output element forward; backward a thread per input element, which gathers the gradient of every window that
holds it (no atomics). Max pooling keeps the CPU's rule, compiled from its own device function: a window's first
largest element wins, a NaN wins (the last).
"""
from ops._cuda import cuda, device_function, empty
from ops.cpu import conv as cpu
from ops.cpu import pool_windows
from ops.cuda.launch import THREADS, blocks
from ops.shapes import output_size, transposed_size

_span = device_function(cpu._span)
_window_max = device_function(pool_windows._window_max)
_window_sum = device_function(pool_windows._window_sum)
_window_divisor = device_function(pool_windows._window_divisor)


def conv2d(x, w, stride, padding, dilation, groups):
    """y = w ⋆ x, (B, O, Ho, Wo)."""
    (B, _, H, W), (O, _, kh, kw) = x.shape, w.shape
    ho = output_size(H, kh, stride[0], padding[0], padding[1], dilation[0])
    wo = output_size(W, kw, stride[1], padding[2], padding[3], dilation[1])
    y = empty((B, O, ho, wo), x.dtype)
    _conv[blocks(y.size), THREADS](y, x, w, *stride, padding[0], padding[2], *dilation)
    return y


def conv_transpose2d(g, w, stride, padding, output_padding, dilation, groups):
    """The transposed convolution of g (B, O, Ho, Wo) by w (O, C/G, kh, kw): (B, C, H, W)."""
    B, _, ho, wo = g.shape
    _, cg, kh, kw = w.shape
    dx = empty((B, groups * cg, *(transposed_size(n, k, stride[a], padding[2 * a], padding[2 * a + 1], dilation[a],
                                                  output_padding[a]) for a, (n, k) in enumerate(((ho, kh), (wo, kw))))),
               g.dtype)
    _conv_transpose[blocks(dx.size), THREADS](dx, g, w, *stride, padding[0], padding[2], *dilation)
    return dx


def conv2d_weight_grad(g, x, kernel, stride, padding, dilation, groups):
    """dw (O, C/G, kh, kw) = Σ_b g[b] im2col(x[b])ᵀ."""
    dw = empty((g.shape[1], x.shape[1] // groups, *kernel), g.dtype)
    _conv_weight_grad[blocks(dw.size), THREADS](dw, g, x, *stride, padding[0], padding[2], *dilation)
    return dw


def max_pool2d(x, kernel, stride, padding, dilation, ceil_mode):
    """The largest value of each window (NaN if it holds one), (B, C, Ho, Wo)."""
    return _pool(_max_pool, x, cpu.windows(x.shape, kernel, stride, padding, dilation, ceil_mode))


def max_pool2d_indices(x, kernel, stride, padding, dilation, ceil_mode):
    """Where each window's largest value lies: its flat index r·W + s in the H·W plane (int64)."""
    return _pool(_argmax_pool, x, cpu.windows(x.shape, kernel, stride, padding, dilation, ceil_mode), "int64")


def max_pool2d_grad(g, x, kernel, stride, padding, dilation, ceil_mode):
    """dx: each window's gradient on its first largest element (the last NaN), summed where windows overlap."""
    return _unpool(_max_pool_backward, g, x, cpu.windows(x.shape, kernel, stride, padding, dilation, ceil_mode), x)


def avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """The mean of each window, (B, C, Ho, Wo)."""
    return _pool(_avg_pool, x, cpu.windows(x.shape, kernel, stride, padding, (1, 1), ceil_mode), None,
                 count_include_pad, divisor_override)


def avg_pool2d_grad(g, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """dx, of x's shape (x gives only the shape): each window's gradient divided by its divisor onto its elements,
    summed where windows overlap."""
    return _unpool(_avg_pool_backward, g, x, cpu.windows(x.shape, kernel, stride, padding, (1, 1), ceil_mode),
                   count_include_pad, divisor_override)


def _pool(kernel, x, windows, dtype=None, *args):
    """``kernel`` over a thread per output element of the windows of x."""
    (h, w), B, C = windows, *x.shape[:2]
    y = empty((B, C, h[5], w[5]), dtype or x.dtype)
    kernel[blocks(y.size), THREADS](y, x, h, w, *args)
    return y


def _unpool(kernel, g, x, windows, *args):
    """``kernel`` over a thread per input element, gathering from the windows that hold it."""
    dx = empty(x.shape, g.dtype)
    kernel[blocks(dx.size), THREADS](dx, g, *windows, *args)
    return dx


@cuda.jit(device=True)
def _unravel(e, shape):
    """The 4-D index of the element at flat C-order position e of ``shape``."""
    d, e = e % shape[3], e // shape[3]
    c, e = e % shape[2], e // shape[2]
    return e // shape[1], e % shape[1], c, d


@cuda.jit(device=True)
def _padded(x, b, c, r, s):
    """x[b, c, r, s], or 0 where (r, s) falls in the zero padding around x."""
    return x[b, c, r, s] if 0 <= r < x.shape[2] and 0 <= s < x.shape[3] else x.dtype.type(0)


@cuda.jit(device=True)
def _output_at(u, step, count):
    """The output position i with i·step = u, or −1 when there is none among the ``count`` outputs: the one
    whose tap p reads input position r when u = r + before − p·dilation."""
    if u < 0 or u % step != 0 or u // step >= count:
        return -1
    return u // step


@cuda.jit(device=True)
def _holders(r, size, kernel, stride, before, after, dilation, count):
    """The range of outputs (lo, hi) whose windows may hold position r: each one is checked with _holds."""
    if kernel == 0:
        return r * count // size, min(count, -(-(r + 1) * count // size))
    return max(0, -(-(r + before - (kernel - 1) * dilation) // stride)), min(count, (r + before) // stride + 1)


@cuda.jit(device=True)
def _holds(r, i, size, window):
    """Whether output i's window reads position r."""
    first, step, taps, _ = _span(i, size, *window)
    return r >= first and (r - first) % step == 0 and (r - first) // step < taps


@cuda.jit
def _conv(y, x, w, sh, sw, top, left, dh, dw):
    _, cg, kh, kw = w.shape
    per_group = y.shape[1] // (x.shape[1] // cg)
    for e in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        b, o, i, j = _unravel(e, y.shape)
        first = o // per_group * cg
        acc = y.dtype.type(0)
        for c in range(cg):
            for p in range(kh):
                for q in range(kw):
                    acc += w[o, c, p, q] * _padded(x, b, first + c, i * sh + p * dh - top, j * sw + q * dw - left)
        y[b, o, i, j] = acc


@cuda.jit
def _conv_transpose(dx, g, w, sh, sw, top, left, dh, dw):
    _, O, ho, wo = g.shape
    _, cg, kh, kw = w.shape
    per_group = O // (dx.shape[1] // cg)
    for e in range(cuda.grid(1), dx.size, cuda.gridsize(1)):
        b, c, r, s = _unravel(e, dx.shape)
        acc = dx.dtype.type(0)
        for o in range(c // cg * per_group, (c // cg + 1) * per_group):
            for p in range(kh):
                i = _output_at(r + top - p * dh, sh, ho)
                if i >= 0:
                    for q in range(kw):
                        j = _output_at(s + left - q * dw, sw, wo)
                        if j >= 0:
                            acc += w[o, c % cg, p, q] * g[b, o, i, j]
        dx[b, c, r, s] = acc


@cuda.jit
def _conv_weight_grad(dweight, g, x, sh, sw, top, left, dh, dw):
    B, O, ho, wo = g.shape
    cg = dweight.shape[1]
    per_group = O // (x.shape[1] // cg)
    for e in range(cuda.grid(1), dweight.size, cuda.gridsize(1)):
        o, c, p, q = _unravel(e, dweight.shape)
        channel = o // per_group * cg + c
        acc = dweight.dtype.type(0)
        for b in range(B):
            for i in range(ho):
                for j in range(wo):
                    acc += g[b, o, i, j] * _padded(x, b, channel, i * sh + p * dh - top, j * sw + q * dw - left)
        dweight[o, c, p, q] = acc


@cuda.jit
def _max_pool(y, x, h, w):
    for e in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        b, c, i, j = _unravel(e, y.shape)
        y[b, c, i, j] = _window_max(x[b, c], _span(i, x.shape[2], *h), _span(j, x.shape[3], *w))[1]


@cuda.jit
def _argmax_pool(indices, x, h, w):
    for e in range(cuda.grid(1), indices.size, cuda.gridsize(1)):
        b, c, i, j = _unravel(e, indices.shape)
        indices[b, c, i, j] = _window_max(x[b, c], _span(i, x.shape[2], *h), _span(j, x.shape[3], *w))[0]


@cuda.jit
def _max_pool_backward(dx, g, h, w, x):
    H, W = x.shape[2], x.shape[3]
    for e in range(cuda.grid(1), dx.size, cuda.gridsize(1)):
        b, c, r, s = _unravel(e, dx.shape)
        acc = dx.dtype.type(0)
        i0, i1 = _holders(r, H, *h)
        j0, j1 = _holders(s, W, *w)
        for i in range(i0, i1):
            for j in range(j0, j1):
                if _holds(r, i, H, h) and _holds(s, j, W, w) and \
                        _window_max(x[b, c], _span(i, H, *h), _span(j, W, *w))[0] == r * W + s:
                    acc += g[b, c, i, j]
        dx[b, c, r, s] = acc


@cuda.jit
def _avg_pool(y, x, h, w, include_pad, divisor):
    H, W = x.shape[2], x.shape[3]
    for e in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        b, c, i, j = _unravel(e, y.shape)
        rows, cols = _span(i, H, *h), _span(j, W, *w)
        y[b, c, i, j] = _window_sum(x[b, c], rows, cols) / _window_divisor(rows, cols, include_pad, divisor)


@cuda.jit
def _avg_pool_backward(dx, g, h, w, include_pad, divisor):
    H, W = dx.shape[2], dx.shape[3]
    for e in range(cuda.grid(1), dx.size, cuda.gridsize(1)):
        b, c, r, s = _unravel(e, dx.shape)
        acc = dx.dtype.type(0)
        i0, i1 = _holders(r, H, *h)
        j0, j1 = _holders(s, W, *w)
        for i in range(i0, i1):
            for j in range(j0, j1):
                if _holds(r, i, H, h) and _holds(s, j, W, w):
                    acc += g[b, c, i, j] / _window_divisor(_span(i, H, *h), _span(j, W, *w), include_pad, divisor)
        dx[b, c, r, s] = acc


KERNELS = {
    **{name: globals()[name] for name in ("conv2d", "conv_transpose2d", "conv2d_weight_grad", "max_pool2d",
                                          "max_pool2d_indices", "max_pool2d_grad", "avg_pool2d", "avg_pool2d_grad")},
    "adaptive_max_pool2d": lambda x, size: _pool(_max_pool, x, cpu.adaptive_windows(size)),
    "adaptive_max_pool2d_grad": lambda g, x, size: _unpool(_max_pool_backward, g, x, cpu.adaptive_windows(size), x),
    "adaptive_avg_pool2d": lambda x, size: _pool(_avg_pool, x, cpu.adaptive_windows(size), None, False, 0),
    "adaptive_avg_pool2d_grad": lambda g, x, size: _unpool(_avg_pool_backward, g, x, cpu.adaptive_windows(size),
                                                           False, 0),
}
