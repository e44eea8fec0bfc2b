"""2-D convolution (cross-correlation, as PyTorch's) and max / average pooling on the device, forward and backward:
the twins of ops/cpu/conv.py, with its formulas, attributes and results.

x is (B, C, H, W), w (O, C, kh, kw), g the output's gradient (B, O, Ho, Wo); ``stride`` (sh, sw), ``dilation``
(dh, dw), ``padding`` (top, bottom, left, right) of zeros. With r(i, p) = i·sh + p·dh − top and s(j, q) alike:

  conv2d             y[b, o, i, j]  = Σ_{c, p, q} w[o, c, p, q] · x[b, c, r(i, p), s(j, q)]
  conv2d_input_grad  dx[b, c, r, s] = Σ_{o, p, q} w[o, c, p, q] · g[b, o, i, j]  over r(i, p) = r, s(j, q) = s
  conv2d_weight_grad dw[o, c, p, q] = Σ_{b, i, j} g[b, o, i, j] · x[b, c, r(i, p), s(j, q)]

Direct kernels: a thread per element of the result, looping over the terms of its sum. Each gathers what it
needs, so no thread writes where another does: no atomics, and the same sums in the same order on every run.
im2col and the tiled product of ops/cuda/matmul.py would reuse operands through shared memory and be faster for
many channels on a real GPU, but they need a column buffer of B·C·kh·kw·Ho·Wo elements, a scatter (col2im, with
atomics or a second gather) for dx and a batch reduction for dw, and the product's barriers cost milliseconds
per block in the simulator, where these kernels are tested; no GPU was at hand to measure the difference.

Pooling (windows kh × kw, stride (sh, sw), no padding): a thread per output element forward; backward a thread
per input element, which gathers the gradient of every window that holds it (no atomics). Max pooling keeps the
CPU's rule, compiled from its own device function: a window's first largest element wins, a NaN wins (the last).
"""
from ops._cuda import cuda, device_function, empty
from ops.cpu import conv as cpu
from ops.cuda.launch import THREADS, blocks
from ops.shapes import output_size

_argmax_window = device_function(cpu._argmax_window)


def conv2d(x, w, stride, padding, dilation):
    """y = w ⋆ x, (B, O, Ho, Wo)."""
    (B, _, H, W), (O, _, kh, kw) = x.shape, w.shape
    ho = output_size(H, kh, stride[0], padding[0], padding[1], dilation[0])
    wo = output_size(W, kw, stride[1], padding[2], padding[3], dilation[1])
    y = empty((B, O, ho, wo), x.dtype)
    _conv[blocks(y.size), THREADS](y, x, w, *stride, padding[0], padding[2], *dilation)
    return y


def conv2d_input_grad(g, w, x, stride, padding, dilation):
    """dx, of x's shape (x gives only the shape): the transposed convolution of g by w."""
    dx = empty(x.shape, g.dtype)
    _conv_input_grad[blocks(dx.size), THREADS](dx, g, w, *stride, padding[0], padding[2], *dilation)
    return dx


def conv2d_weight_grad(g, x, kernel, stride, padding, dilation):
    """dw (O, C, kh, kw) = Σ_b g[b] im2col(x[b])ᵀ."""
    dw = empty((g.shape[1], x.shape[1], *kernel), g.dtype)
    _conv_weight_grad[blocks(dw.size), THREADS](dw, g, x, *stride, padding[0], padding[2], *dilation)
    return dw


def max_pool2d(x, kernel, stride):
    """The largest value of each kh × kw window (NaN if it holds one), (B, C, Ho, Wo)."""
    y = empty(_pooled(x.shape, kernel, stride), x.dtype)
    _max_pool[blocks(y.size), THREADS](y, x, *kernel, *stride)
    return y


def max_pool2d_grad(g, x, kernel, stride):
    """dx: each window's gradient on its first largest element (the last NaN), summed where windows overlap."""
    dx = empty(x.shape, g.dtype)
    _max_pool_backward[blocks(dx.size), THREADS](dx, g, x, *kernel, *stride)
    return dx


def avg_pool2d(x, kernel, stride):
    """The mean of each kh × kw window, (B, C, Ho, Wo)."""
    y = empty(_pooled(x.shape, kernel, stride), x.dtype)
    _avg_pool[blocks(y.size), THREADS](y, x, *kernel, *stride)
    return y


def avg_pool2d_grad(g, x, kernel, stride):
    """dx, of x's shape (x gives only the shape): each window's gradient divided evenly over its kh·kw elements,
    summed where windows overlap."""
    dx = empty(x.shape, g.dtype)
    _avg_pool_backward[blocks(dx.size), THREADS](dx, g, *kernel, *stride)
    return dx


def _pooled(shape, kernel, stride):
    B, C, H, W = shape
    return B, C, output_size(H, kernel[0], stride[0], 0, 0, 1), output_size(W, kernel[1], stride[1], 0, 0, 1)


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
def _windows(at, kernel, step, count):
    """The range of windows (start i·step, ``kernel`` long, ``count`` of them) that hold position ``at``."""
    return max(0, (at - kernel + step) // step), min(count, at // step + 1)


@cuda.jit
def _conv(y, x, w, sh, sw, top, left, dh, dw):
    _, C, kh, kw = w.shape
    for e in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        b, o, i, j = _unravel(e, y.shape)
        acc = y.dtype.type(0)
        for c in range(C):
            for p in range(kh):
                for q in range(kw):
                    acc += w[o, c, p, q] * _padded(x, b, c, i * sh + p * dh - top, j * sw + q * dw - left)
        y[b, o, i, j] = acc


@cuda.jit
def _conv_input_grad(dx, g, w, sh, sw, top, left, dh, dw):
    _, O, ho, wo = g.shape
    _, _, kh, kw = w.shape
    for e in range(cuda.grid(1), dx.size, cuda.gridsize(1)):
        b, c, r, s = _unravel(e, dx.shape)
        acc = dx.dtype.type(0)
        for o in range(O):
            for p in range(kh):
                i = _output_at(r + top - p * dh, sh, ho)
                if i >= 0:
                    for q in range(kw):
                        j = _output_at(s + left - q * dw, sw, wo)
                        if j >= 0:
                            acc += w[o, c, p, q] * g[b, o, i, j]
        dx[b, c, r, s] = acc


@cuda.jit
def _conv_weight_grad(dweight, g, x, sh, sw, top, left, dh, dw):
    B, _, ho, wo = g.shape
    for e in range(cuda.grid(1), dweight.size, cuda.gridsize(1)):
        o, c, p, q = _unravel(e, dweight.shape)
        acc = dweight.dtype.type(0)
        for b in range(B):
            for i in range(ho):
                for j in range(wo):
                    acc += g[b, o, i, j] * _padded(x, b, c, i * sh + p * dh - top, j * sw + q * dw - left)
        dweight[o, c, p, q] = acc


@cuda.jit
def _max_pool(y, x, kh, kw, sh, sw):
    for e in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        b, c, i, j = _unravel(e, y.shape)
        r, s = _argmax_window(x, b, c, i, j, kh, kw, sh, sw)
        y[b, c, i, j] = x[b, c, r, s]


@cuda.jit
def _max_pool_backward(dx, g, x, kh, kw, sh, sw):
    _, _, ho, wo = g.shape
    for e in range(cuda.grid(1), dx.size, cuda.gridsize(1)):
        b, c, r, s = _unravel(e, dx.shape)
        acc = dx.dtype.type(0)
        i0, i1 = _windows(r, kh, sh, ho)
        j0, j1 = _windows(s, kw, sw, wo)
        for i in range(i0, i1):
            for j in range(j0, j1):
                row, col = _argmax_window(x, b, c, i, j, kh, kw, sh, sw)
                if row == r and col == s:
                    acc += g[b, c, i, j]
        dx[b, c, r, s] = acc


@cuda.jit
def _avg_pool(y, x, kh, kw, sh, sw):
    scale = y.dtype.type(1 / (kh * kw))
    for e in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        b, c, i, j = _unravel(e, y.shape)
        total = y.dtype.type(0)
        for r in range(i * sh, i * sh + kh):
            for s in range(j * sw, j * sw + kw):
                total += x[b, c, r, s]
        y[b, c, i, j] = total * scale


@cuda.jit
def _avg_pool_backward(dx, g, kh, kw, sh, sw):
    _, _, ho, wo = g.shape
    scale = dx.dtype.type(1 / (kh * kw))
    for e in range(cuda.grid(1), dx.size, cuda.gridsize(1)):
        b, c, r, s = _unravel(e, dx.shape)
        acc = dx.dtype.type(0)
        i0, i1 = _windows(r, kh, sh, ho)
        j0, j1 = _windows(s, kw, sw, wo)
        for i in range(i0, i1):
            for j in range(j0, j1):
                acc += g[b, c, i, j] * scale
        dx[b, c, r, s] = acc


KERNELS = {name: globals()[name] for name in ("conv2d", "conv2d_input_grad", "conv2d_weight_grad", "max_pool2d",
                                              "max_pool2d_grad", "avg_pool2d", "avg_pool2d_grad")}
