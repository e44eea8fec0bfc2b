"""Convolution and pooling over (B, C, H, W): ``conv2d`` (cross-correlation, as PyTorch's), ``conv_transpose2d``
(its adjoint), max, average and adaptive pooling, with their backward primitives. 1-D forms are these with H = 1
and 3-D convolution is conv2d over stacked depth taps (``functional``).

Attributes are pairs (height, width): ``stride`` and ``dilation`` positive, ``padding`` (top, bottom, left, right),
which may differ per side (a causal 1-D convolution pads the left only), ``groups`` splitting the channels. The
kernels and their formulas are in ops/cpu/conv.py. conv2d's input gradient is the transposed convolution, with an
``output_padding`` that gives back rows the stride skipped; the backward primitives are linear in g, so their own
VJPs are convolutions again and second-order gradients work, except through max pooling's.

A spatial size may be symbolic ("T") only where the output keeps it: stride 1 and padding that adds back what
the dilated kernel takes away ((k − 1)·dilation in all), as in a causal or "same" convolution.
"""
from math import prod

import numpy as np

from ops import shapes

from ...errors import AttnGraphError
from .. import tensor as F
from ..dims import format_shape
from ..primitive import define
from ._infer import require_float, same_dtype

AXES = ("height", "width")


def output_size(size, kernel, stride, before, after, dilation, axis, ceil_mode=False):
    """The output length along one spatial axis, or a ValueError saying why there is none."""
    if isinstance(kernel, str):
        raise ValueError(f"the kernel's {axis} must be concrete, not {kernel}")
    if isinstance(size, str):
        if stride != 1 or before + after != dilation * (kernel - 1):
            raise ValueError(f"the input's {axis} {size} is symbolic: give it a concrete size, or use stride 1 and "
                             f"padding {dilation * (kernel - 1)} in all on that axis, which keeps the size")
        return size
    extent = dilation * (kernel - 1) + 1
    if size + before + after < extent:
        raise ValueError(f"the kernel spans {extent} positions along the {axis} (dilation included), more than the "
                         f"padded input's {size + before + after}: pad the input or use a smaller kernel")
    return shapes.output_size(size, kernel, stride, before, after, dilation, ceil_mode)


def spatial_sizes(shape, kernel, stride, padding, dilation, ceil_mode=False):
    return tuple(output_size(shape[2 + a], kernel[a], stride[a], padding[2 * a], padding[2 * a + 1], dilation[a],
                             AXES[a], ceil_mode) for a in (0, 1))


def grouped(op, channels, out_channels, w_shape, groups):
    """Checks that ``groups`` divides both channel counts and that the weight reads channels / groups of them."""
    for name, n in (("input", channels), ("output", out_channels)):
        if isinstance(n, int) and n % groups:
            raise ValueError(f"{op}: groups={groups} must divide the {name} channels, {n}")
    if isinstance(channels, int) and w_shape[1] * groups != channels:
        raise ValueError(f"{op}: the input has {channels} channels but the weight {format_shape(w_shape)} with "
                         f"groups={groups} expects {w_shape[1] * groups}")


def conv2d_rule(x, w, *, stride, padding, dilation, groups):
    require_float(x, w)
    dtype = same_dtype(x, w)
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise ValueError("conv2d takes an input (B, C, H, W) and a weight (O, C/groups, kh, kw), "
                         f"got {format_shape(x.shape)} and {format_shape(w.shape)}")
    grouped("conv2d", x.shape[1], w.shape[0], w.shape, groups)
    return (x.shape[0], w.shape[0], *spatial_sizes(x.shape, w.shape[2:], stride, padding, dilation)), dtype


def conv_transpose2d_rule(x, w, *, stride, padding, output_padding, dilation, groups):
    require_float(x, w)
    dtype = same_dtype(x, w)
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise ValueError("conv_transpose2d takes an input (B, C, H, W) and a weight (C, O/groups, kh, kw), "
                         f"got {format_shape(x.shape)} and {format_shape(w.shape)}")
    if x.shape[1] != w.shape[0]:
        raise ValueError(f"conv_transpose2d: the input has {x.shape[1]} channels but the weight "
                         f"{format_shape(w.shape)} expects {w.shape[0]}")
    if isinstance(w.shape[0], int) and w.shape[0] % groups:
        raise ValueError(f"conv_transpose2d: groups={groups} must divide the input channels, {w.shape[0]}")

    def size(a):
        n, k = x.shape[2 + a], w.shape[2 + a]
        if isinstance(n, str):
            if stride[a] != 1 or padding[2 * a] + padding[2 * a + 1] != dilation[a] * (k - 1):
                raise ValueError(f"the input's {AXES[a]} {n} is symbolic: give it a concrete size, or use stride 1 "
                                 f"and padding {dilation[a] * (k - 1)} in all on that axis, which keeps the size")
            return n
        out = shapes.transposed_size(n, k, stride[a], padding[2 * a], padding[2 * a + 1], dilation[a],
                                     output_padding[a])
        if out < 1:
            raise ValueError(f"the padding {padding[2 * a]} + {padding[2 * a + 1]} along the {AXES[a]} leaves no "
                             f"output of an input of {n}: use less padding")
        return out
    return (x.shape[0], w.shape[1] * groups, size(0), size(1)), dtype


def skipped(x_shape, w_shape, stride, padding, dilation) -> tuple[int, ...]:
    """The output padding under which the transposed convolution gives back x's size: the rows at the end of x
    that conv2d's stride skipped (0 for a symbolic size, which only stride 1 keeps)."""
    return tuple(0 if isinstance(x_shape[2 + a], str) else
                 (x_shape[2 + a] + padding[2 * a] + padding[2 * a + 1] - dilation[a] * (w_shape[2 + a] - 1) - 1)
                 % stride[a] for a in (0, 1))


def conv2d_vjp(g, y, x, w, **attrs):
    """dx, the transposed convolution of g by w, and dw = Σ_b g[b] im2col(x[b])ᵀ."""
    return (F.emit("conv_transpose2d", g, w, output_padding=skipped(x.shape, w.shape, attrs["stride"],
                                                                     attrs["padding"], attrs["dilation"]), **attrs),
            F.emit("conv2d_weight_grad", g, x, kernel=w.shape[2:], **attrs))


def conv_transpose2d_vjp(h, y, g, w, *, output_padding, **attrs):
    """conv_transpose2d is linear in g and in w: its adjoint in g is conv2d by w, in w the weight gradient of the
    convolution that maps its output to g's size."""
    return F.emit("conv2d", h, w, **attrs), F.emit("conv2d_weight_grad", g, h, kernel=w.shape[2:], **attrs)


def weight_grad_vjp(h, dw, g, x, *, kernel, **attrs):
    """conv2d_weight_grad is linear in g and in x: its adjoints are conv2d of x by h, and its input gradient."""
    return (F.emit("conv2d", x, h, **attrs),
            F.emit("conv_transpose2d", g, h, output_padding=skipped(x.shape, h.shape, attrs["stride"],
                                                                     attrs["padding"], attrs["dilation"]), **attrs))


def pool_rule(x, *, kernel, stride, padding, dilation=(1, 1), ceil_mode, **divisor):
    require_float(x)
    if len(x.shape) != 4:
        raise ValueError(f"pooling takes an input (B, C, H, W), got {format_shape(x.shape)}")
    return x.shape[:2] + spatial_sizes(x.shape, kernel, stride, padding, dilation, ceil_mode), x.dtype


def adaptive_rule(x, *, size):
    require_float(x)
    if len(x.shape) != 4:
        raise ValueError(f"adaptive pooling takes an input (B, C, H, W), got {format_shape(x.shape)}")
    for axis, n in zip(AXES, x.shape[2:]):
        if not isinstance(n, int) or n == 0:
            raise ValueError(f"adaptive pooling needs a concrete, non-empty {axis}, got {n}")
    return x.shape[:2] + tuple(size), x.dtype


def no_second_order(h, dx, g, x, **attrs):
    raise AttnGraphError("the gradient of max pooling has no gradient of its own: second-order gradients through "
                         "max pooling are not supported")


def window_flops(out, x, *, kernel, **attrs):
    return prod(out) * prod(kernel)


def adaptive_flops(out, x, *, size):
    """Each input element is read by about one window."""
    return prod(x)


def like_x(g, x, **attrs):
    """A pooling gradient's shape and dtype: x's."""
    return x.shape, same_dtype(g, x)


define("conv2d", conv2d_rule, vjp=conv2d_vjp,
       flops=lambda out, x, w, **attrs: 2 * prod(out) * prod(w[1:]))
define("conv_transpose2d", conv_transpose2d_rule, vjp=conv_transpose2d_vjp,
       flops=lambda out, x, w, **attrs: 2 * prod(x) * prod(w[1:]),
       doc="the transposed convolution, conv2d's adjoint and its input gradient")
define("conv2d_weight_grad",
       lambda g, x, *, kernel, groups, **attrs: ((g.shape[1], x.shape[1] // groups, *kernel), same_dtype(g, x)),
       vjp=weight_grad_vjp, flops=lambda out, g, x, **attrs: 2 * prod(g) * prod(out[1:]),
       doc="the gradient of conv2d's weight: Σ_b g[b] im2col(x[b])ᵀ")


def pooling(name: str, rule, flops, grad_flops, grad_doc: str, linear: bool) -> None:
    """Define pooling ``name`` and its gradient ``name_grad``: average pooling's gradient is linear in g, and its VJP
    the pooling again; max pooling's has none."""
    define(name, rule, vjp=lambda g, y, x, **attrs: (F.emit(f"{name}_grad", g, x, **attrs),), flops=flops)
    define(f"{name}_grad", like_x, flops=grad_flops, doc=grad_doc,
           vjp=(lambda h, dx, g, x, **attrs: (F.emit(name, h, **attrs), None)) if linear else no_second_order)


pooling("max_pool2d", pool_rule, window_flops, lambda out, g, x, **attrs: prod(g),
        "each window's gradient on its first largest element", linear=False)
pooling("avg_pool2d", pool_rule, window_flops, lambda out, g, x, *, kernel, **attrs: prod(g) * prod(kernel),
        "each window's gradient spread over its elements, divided as the forward divides", linear=True)
pooling("adaptive_max_pool2d", adaptive_rule, adaptive_flops, lambda out, g, x, **attrs: prod(g),
        "each window's gradient on its first largest element", linear=False)
pooling("adaptive_avg_pool2d", adaptive_rule, adaptive_flops, lambda out, g, x, **attrs: prod(out),
        "each window's gradient spread evenly over its elements", linear=True)
define("max_pool2d_indices", lambda x, **attrs: (pool_rule(x, **attrs)[0], np.dtype(np.int64)),
       differentiable=False, flops=window_flops,
       doc="where max_pool2d's values lie: flat indices r·W + s in each H·W plane, as PyTorch's return_indices")
