"""Convolution and pooling over (B, C, H, W): ``conv2d`` (cross-correlation, as PyTorch's), ``max_pool2d`` and
``avg_pool2d``, with their backward primitives. 1-D forms are these with H = 1 (``functional.conv1d``).

Attributes are pairs (height, width): ``stride`` and ``dilation`` positive, ``padding`` (top, bottom, left, right)
of zeros, which may differ per side (a causal 1-D convolution pads the left only). The kernels and their
formulas are in ops/cpu/conv.py. The backward primitives are linear in g, so their own VJPs are convolutions
again and second-order gradients work, except through max pooling's.

A spatial size may be symbolic ("T") only where the output keeps it: stride 1 and padding that adds back what
the dilated kernel takes away ((k − 1)·dilation in all), as in a causal or "same" convolution.
"""
from math import prod

from ops import shapes

from ...errors import AttnGraphError
from .. import functional as F
from ..dims import format_shape
from ..primitive import define
from ._infer import require_float, same_dtype

AXES = ("height", "width")


def output_size(size, kernel, stride, before, after, dilation, axis):
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
    return shapes.output_size(size, kernel, stride, before, after, dilation)


def conv2d_rule(x, w, *, stride, padding, dilation):
    require_float(x, w)
    dtype = same_dtype(x, w)
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise ValueError("conv2d takes an input (B, C, H, W) and a weight (O, C, kh, kw), "
                         f"got {format_shape(x.shape)} and {format_shape(w.shape)}")
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"the input has {x.shape[1]} channels but the weight {format_shape(w.shape)} expects "
                         f"{w.shape[1]}")
    return (x.shape[0], w.shape[0], *(
        output_size(x.shape[2 + a], w.shape[2 + a], stride[a], padding[2 * a], padding[2 * a + 1], dilation[a],
                    AXES[a]) for a in (0, 1))), dtype


def conv2d_vjp(g, y, x, w, **attrs):
    """dx, the transposed convolution of g by w, and dw = Σ_b g[b] im2col(x[b])ᵀ."""
    return (F.emit("conv2d_input_grad", g, w, x, **attrs),
            F.emit("conv2d_weight_grad", g, x, kernel=w.shape[2:], **attrs))


def input_grad_vjp(h, dx, g, w, x, **attrs):
    """conv2d_input_grad is linear in g and in w: its adjoint in g is conv2d by w, in w the weight gradient."""
    return (F.emit("conv2d", h, w, **attrs),
            F.emit("conv2d_weight_grad", g, h, kernel=w.shape[2:], **attrs), None)


def weight_grad_vjp(h, dw, g, x, *, kernel, **attrs):
    """conv2d_weight_grad is linear in g and in x: its adjoints are conv2d of x by h, and its input gradient."""
    return F.emit("conv2d", x, h, **attrs), F.emit("conv2d_input_grad", g, h, x, **attrs)


def pool_rule(x, *, kernel, stride):
    require_float(x)
    if len(x.shape) != 4:
        raise ValueError(f"pooling takes an input (B, C, H, W), got {format_shape(x.shape)}")
    return x.shape[:2] + tuple(output_size(x.shape[2 + a], kernel[a], stride[a], 0, 0, 1, AXES[a]) for a in (0, 1)), \
        x.dtype


def no_second_order(h, dx, g, x, **attrs):
    raise AttnGraphError("max_pool2d_grad has no gradient of its own: second-order gradients through max pooling "
                         "are not supported")


define("conv2d", conv2d_rule, vjp=conv2d_vjp,
       flops=lambda out, x, w, **attrs: 2 * prod(out) * prod(w[1:]))
define("conv2d_input_grad", lambda g, w, x, **attrs: (x.shape, same_dtype(g, w, x)),
       vjp=input_grad_vjp, flops=lambda out, g, w, x, **attrs: 2 * prod(g) * prod(w[1:]),
       doc="the gradient of conv2d's input: the transposed convolution of g by w (x gives the shape)")
define("conv2d_weight_grad",
       lambda g, x, *, kernel, **attrs: ((g.shape[1], x.shape[1], *kernel), same_dtype(g, x)), vjp=weight_grad_vjp,
       flops=lambda out, g, x, **attrs: 2 * prod(g) * prod(out[1:]),
       doc="the gradient of conv2d's weight: Σ_b g[b] im2col(x[b])ᵀ")
define("max_pool2d", pool_rule,
       vjp=lambda g, y, x, **attrs: (F.emit("max_pool2d_grad", g, x, **attrs),),
       flops=lambda out, x, *, kernel, stride: prod(out) * prod(kernel))
define("max_pool2d_grad", lambda g, x, **attrs: (x.shape, same_dtype(g, x)), vjp=no_second_order,
       flops=lambda out, g, x, *, kernel, stride: prod(g),
       doc="each window's gradient on its first largest element")
define("avg_pool2d", pool_rule,
       vjp=lambda g, y, x, **attrs: (F.emit("avg_pool2d_grad", g, x, **attrs),),
       flops=lambda out, x, *, kernel, stride: prod(out) * prod(kernel))
define("avg_pool2d_grad", lambda g, x, **attrs: (x.shape, same_dtype(g, x)),
       vjp=lambda h, dx, g, x, **attrs: (F.emit("avg_pool2d", h, **attrs), None),
       flops=lambda out, g, x, *, kernel, stride: prod(g) * prod(kernel),
       doc="each window's gradient spread evenly over its elements")
