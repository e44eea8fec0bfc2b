"""Convolution, pooling and resampling with torch.nn.functional's names, arguments and numbers, on the primitives of
core/prims/conv.py (2-D; the 1-D forms run them over height 1) and the functional API: conv3d stacks its depth
taps into channels for one conv2d, interpolate gathers rows (nearest) or blends two (linear) per axis.

Every argument is checked while tracing, and a bad one is a ShapeError (DTypeError for a dtype) naming the op and
the argument: a stride or dilation below 1, negative padding, ``groups`` that does not divide the channels, an
``output_padding`` not below the stride, a pooling pad over half the kernel, an unknown mode.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import DTypeError, ShapeError
from . import tensor as F
from .dims import format_shape
from .tracing import user_source

__all__ = [
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d", "avg_pool1d",
    "avg_pool2d", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "interpolate",
    "max_pool1d", "max_pool2d",
]


def _spatial(op: str, name: str, value, minimum: int, rank: int) -> tuple[int, ...]:
    """An int for every spatial axis, or one per axis, each at least ``minimum``."""
    values = (value,) * rank if isinstance(value, (int, np.integer)) else tuple(value) \
        if isinstance(value, (tuple, list)) else ()
    if len(values) != rank or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                      and v >= minimum for v in values):
        raise ShapeError(f"{op}: {name} must be an int >= {minimum} or {rank} of them, got {value!r} "
                         f"(at {user_source()})")
    return tuple(int(v) for v in values)


def _flag(op: str, name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ShapeError(f"{op}: {name} must be True or False, got {value!r} (at {user_source()})")
    return bool(value)


def _shape(op: str, x, rank: int, what: str) -> tuple:
    shape = F.as_node(x).shape
    if len(shape) != rank:
        raise ShapeError(f"{op} takes {what}, got {format_shape(shape)} (at {user_source()})")
    return shape


def _conv_padding(op: str, padding, kernel, stride, dilation) -> tuple[int, ...]:
    """(before, after) for each spatial axis, flattened, from an int, one per axis, a pair (before, after) per axis,
    "valid" (none) or "same" (dilation·(kernel − 1) in all, the odd one on the right, as PyTorch; stride 1)."""
    rank = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * 2 * rank
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ShapeError(f"{op}: padding='same' needs stride 1, got stride {stride} (at {user_source()})")
            totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
            return tuple(p for t in totals for p in (t // 2, t - t // 2))
        raise ShapeError(f"{op}: padding must be 'same', 'valid' or sizes, not {padding!r} (at {user_source()})")
    if isinstance(padding, (tuple, list)) and len(padding) == rank and all(isinstance(p, (tuple, list))
                                                                           for p in padding):
        return tuple(p for pair in padding for p in _spatial(op, "padding (before, after)", pair, 0, 2))
    return tuple(p for v in _spatial(op, "padding", padding, 0, rank) for p in (v, v))


def _groups(op: str, groups, channels, w_shape) -> int:
    (groups,) = _spatial(op, "groups", groups, 1, 1)
    if isinstance(channels, int) and (channels % groups or w_shape[1] * groups != channels):
        raise ShapeError(f"{op}: groups={groups} must divide the input's {channels} channels into the weight's "
                         f"{w_shape[1]} per group, weight {format_shape(w_shape)} (at {user_source()})")
    if w_shape[0] % groups:
        raise ShapeError(f"{op}: groups={groups} must divide the {w_shape[0]} output channels of the weight "
                         f"(at {user_source()})")
    return groups


def _with_bias(y, bias, spatial: int):
    """y (B, O, ...) plus a bias of shape (O,) on every position."""
    if bias is None:
        return y
    channels = F.as_node(y).shape[1]
    if F.as_node(bias).shape != (channels,):
        raise ShapeError(f"the bias must have shape ({channels},), one value per output channel, got "
                         f"{format_shape(F.as_node(bias).shape)} (at {user_source()})")
    return y + F.reshape(bias, (channels,) + (1,) * spatial)


def _rows(x):
    """x (B, C, T) as (B, C, 1, T), for the 1-D forms of the 2-D ops."""
    return F.expand_dims(x, 2)


def _rows_back(y):
    shape = F.as_node(y).shape
    return F.reshape(y, shape[:2] + shape[3:])


def conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """y[b, o, i, j] = bias[o] + Σ_{c,p,q} w[o, c, p, q] · x[b, g·C/G + c, i·sh + p·dh − top, j·sw + q·dw − left],
    g = o // (O/G) (the cross-correlation of torch.nn.functional.conv2d) on x (B, C, H, W) and w (O, C/G, kh, kw),
    zeros outside x; ``stride`` and ``dilation`` an int or a pair (height, width); ``padding`` an int, a pair, a
    pair (before, after) per axis, "valid" or "same"; ``groups`` G (G = C: depthwise). The output is
    (B, O, Ho, Wo), Ho = (H + top + bottom − dh·(kh − 1) − 1) // sh + 1, and Wo alike."""
    x_shape, w_shape = _shape("conv2d", x, 4, "an input (B, C, H, W)"), _shape("conv2d", w, 4,
                                                                               "a weight (O, C/groups, kh, kw)")
    stride, dilation = _spatial("conv2d", "stride", stride, 1, 2), _spatial("conv2d", "dilation", dilation, 1, 2)
    y = F.emit("conv2d", x, w, stride=stride, padding=_conv_padding("conv2d", padding, w_shape[2:], stride, dilation),
               dilation=dilation, groups=_groups("conv2d", groups, x_shape[1], w_shape))
    return _with_bias(y, bias, 2)


def conv1d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1, causal: bool = False):
    """y[b, o, t] = bias[o] + Σ_{c,q} w[o, c, q] · x[b, g·C/G + c, t·stride + q·dilation − left] on x (B, C, T) and
    w (O, C/G, k), as torch.nn.functional.conv1d: conv2d over height 1, ``padding`` as there. ``causal=True`` pads
    (k − 1)·dilation zeros on the left only (no ``padding`` then), so that output t sees the inputs up to t
    (WaveNet)."""
    x_shape, w_shape = _shape("conv1d", x, 3, "an input (B, C, T)"), _shape("conv1d", w, 3,
                                                                            "a weight (O, C/groups, k)")
    stride, dilation = _spatial("conv1d", "stride", stride, 1, 1), _spatial("conv1d", "dilation", dilation, 1, 1)
    if _flag("conv1d", "causal", causal) and padding != 0:
        raise ShapeError(f"conv1d: a causal conv1d pads (k - 1)·dilation on the left itself: leave padding at 0 "
                         f"(at {user_source()})")
    pads = ((w_shape[2] - 1) * dilation[0], 0) if causal else _conv_padding("conv1d", padding, w_shape[2:], stride,
                                                                             dilation)
    y = F.emit("conv2d", _rows(x), F.expand_dims(w, 2), stride=(1, *stride), padding=(0, 0, *pads),
               dilation=(1, *dilation), groups=_groups("conv1d", groups, x_shape[1], w_shape))
    return _with_bias(_rows_back(y), bias, 1)


def conv3d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv3d on x (B, C, D, H, W) and w (O, C/G, kd, kh, kw): conv2d's sum over a third axis,
    as one conv2d of the kd depth taps x[:, :, i·sd + p·dd − front] stacked into channels (group by group), each
    output depth a batch entry. The stacked taps cost kd times the input's memory, as im2col's columns do."""
    x_shape, w_shape = (_shape("conv3d", x, 5, "an input (B, C, D, H, W)"),
                        _shape("conv3d", w, 5, "a weight (O, C/groups, kd, kh, kw)"))
    stride, dilation = _spatial("conv3d", "stride", stride, 1, 3), _spatial("conv3d", "dilation", dilation, 1, 3)
    pads = _conv_padding("conv3d", padding, w_shape[2:], stride, dilation)
    groups = _groups("conv3d", groups, x_shape[1], w_shape)
    (B, C, D, H, W), (O, cg, kd, kh, kw) = x_shape, w_shape
    front, back = pads[:2]
    extent = dilation[0] * (kd - 1) + 1
    if not isinstance(D, int) or D + front + back < extent:
        raise ShapeError(f"conv3d: the kernel spans {extent} positions along the depth (dilation included), more "
                         f"than the padded input's {D} + {front + back}, or the depth is not concrete "
                         f"(at {user_source()})")
    depth = (D + front + back - extent) // stride[0] + 1
    zeros = F.zeros_like(x[:, :, :1]) if D else None
    padded = F.concat([F.broadcast_to(zeros, (B, C, n, H, W)) for n in (front,) if n] + [x]
                      + [F.broadcast_to(zeros, (B, C, n, H, W)) for n in (back,) if n], axis=2)
    taps = F.stack([padded[:, :, p * dilation[0]: p * dilation[0] + stride[0] * (depth - 1) + 1: stride[0]]
                    for p in range(kd)], axis=2)                                 # (B, C, kd, D', H, W)
    taps = F.transpose(F.reshape(taps, (B, groups, C // groups, kd, depth, H, W)), (0, 4, 1, 3, 2, 5, 6))
    weight = F.reshape(F.transpose(w, (0, 2, 1, 3, 4)), (O, kd * cg, kh, kw))
    y = F.emit("conv2d", F.reshape(taps, (-1, groups * kd * cg, H, W)), weight, stride=stride[1:], padding=pads[2:],
               dilation=dilation[1:], groups=groups)
    y = F.transpose(F.reshape(y, (B, depth, *F.as_node(y).shape[1:])), (0, 2, 1, 3, 4))
    return _with_bias(y, bias, 3)


def _transposed(op: str, x, w, stride, padding, output_padding, groups, dilation, rank: int) -> dict:
    x_shape = _shape(op, x, rank + 2, f"an input (B, C, {'H, W' if rank == 2 else 'T'})")
    w_shape = _shape(op, w, rank + 2, "a weight (C, O/groups, " + ("kh, kw)" if rank == 2 else "k)"))
    stride, dilation = _spatial(op, "stride", stride, 1, rank), _spatial(op, "dilation", dilation, 1, rank)
    output_padding = _spatial(op, "output_padding", output_padding, 0, rank)
    if any(p >= s for p, s in zip(output_padding, stride)):
        raise ShapeError(f"{op}: output_padding {output_padding} must be smaller than the stride {stride} "
                         f"(at {user_source()})")
    (groups,) = _spatial(op, "groups", groups, 1, 1)
    if isinstance(x_shape[1], int) and (x_shape[1] != w_shape[0] or x_shape[1] % groups):
        raise ShapeError(f"{op}: the input's {x_shape[1]} channels must be the weight's first axis "
                         f"{format_shape(w_shape)} and divisible by groups={groups} (at {user_source()})")
    pads = tuple(p for v in _spatial(op, "padding", padding, 0, rank) for p in (v, v))
    return dict(stride=stride, padding=pads, output_padding=output_padding, dilation=dilation, groups=groups)


def conv_transpose2d(x, w, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed convolution of torch.nn.functional.conv_transpose2d (conv2d's adjoint, "deconvolution") of
    x (B, C, H, W) by w (C, O/G, kh, kw): each input position scatters w times its value onto the output from
    (i·sh − ph, j·sw − pw), (B, O, Ho, Wo) with Ho = (H − 1)·sh − 2·ph + dh·(kh − 1) + output_padding + 1."""
    attrs = _transposed("conv_transpose2d", x, w, stride, padding, output_padding, groups, dilation, 2)
    return _with_bias(F.emit("conv_transpose2d", x, w, **attrs), bias, 2)


def conv_transpose1d(x, w, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """conv_transpose2d over height 1: x (B, C, T), w (C, O/G, k), as torch.nn.functional.conv_transpose1d."""
    attrs = _transposed("conv_transpose1d", x, w, stride, padding, output_padding, groups, dilation, 1)
    attrs.update(stride=(1, *attrs["stride"]), padding=(0, 0, *attrs["padding"]),
                 output_padding=(0, *attrs["output_padding"]), dilation=(1, *attrs["dilation"]))
    return _with_bias(_rows_back(F.emit("conv_transpose2d", _rows(x), F.expand_dims(w, 2), **attrs)), bias, 1)


def _windows(op: str, kernel_size, stride, padding, dilation, rank: int) -> dict:
    """A pooling's kernel, stride (default: the kernel), padding (at most half the kernel, as PyTorch) and
    dilation, as the primitives' (height, width) attributes."""
    kernel = _spatial(op, "kernel_size", kernel_size, 1, rank)
    stride = kernel if stride is None else _spatial(op, "stride", stride, 1, rank)
    padding, dilation = _spatial(op, "padding", padding, 0, rank), _spatial(op, "dilation", dilation, 1, rank)
    if any(p > k // 2 for p, k in zip(padding, kernel)):
        raise ShapeError(f"{op}: padding {padding} must be at most half the kernel_size {kernel} "
                         f"(at {user_source()})")
    if rank == 1:
        kernel, stride, padding, dilation = (1, *kernel), (1, *stride), (0, *padding), (1, *dilation)
    return dict(kernel=kernel, stride=stride, padding=tuple(p for v in padding for p in (v, v)), dilation=dilation)


def _pooled(op: str, primitive: str, x, rank: int, **attrs):
    """``primitive`` over x (B, C, H, W), or over x (B, C, T) as (B, C, 1, T)."""
    _shape(op, x, rank + 2, "an input (B, C, H, W)" if rank == 2 else "an input (B, C, T)")
    return F.emit(primitive, x, **attrs) if rank == 2 else _rows_back(F.emit(primitive, _rows(x), **attrs))


def _max_pool(op, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices, rank):
    attrs = dict(_windows(op, kernel_size, stride, padding, dilation, rank), ceil_mode=_flag(op, "ceil_mode",
                                                                                              ceil_mode))
    y = _pooled(op, "max_pool2d", x, rank, **attrs)
    return (y, _pooled(op, "max_pool2d_indices", x, rank, **attrs)) if _flag(op, "return_indices", return_indices) \
        else y


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The largest value of each window of x (B, C, H, W), as torch.nn.functional.max_pool2d: windows of
    ``kernel_size`` ``stride`` apart (default: the kernel), taps ``dilation`` apart, over −inf ``padding`` (at
    most half the kernel); ``ceil_mode`` keeps a last window that hangs over the end. NaN if the window holds one.
    Its gradient goes to the window's first largest element; ``return_indices`` also gives where that lies, its
    flat index in the H·W plane (int64)."""
    return _max_pool("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2)


def max_pool1d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """max_pool2d over x (B, C, T) with windows along T (indices along T), as torch.nn.functional.max_pool1d."""
    return _max_pool("max_pool1d", x, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1)


def _avg_pool(op, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, rank):
    if divisor_override is not None:
        (divisor_override,) = _spatial(op, "divisor_override", divisor_override, 1, 1)
    return _pooled(op, "avg_pool2d", x, rank, **{name: v for name, v in _windows(
        op, kernel_size, stride, padding, 1, rank).items() if name != "dilation"},
        ceil_mode=_flag(op, "ceil_mode", ceil_mode), count_include_pad=_flag(op, "count_include_pad",
                                                                             count_include_pad),
        divisor_override=divisor_override or 0)


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """The mean of each window of x (B, C, H, W), as torch.nn.functional.avg_pool2d: the window's sum over its size,
    padding included (``count_include_pad``, up to the padding's end, not a ``ceil_mode`` overhang) or not, or over
    ``divisor_override``."""
    return _avg_pool("avg_pool2d", x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2)


def avg_pool1d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """avg_pool2d over x (B, C, T) with windows along T, as torch.nn.functional.avg_pool1d."""
    return _avg_pool("avg_pool1d", x, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1)


def _adaptive(op: str, primitive: str, x, output_size, rank: int):
    shape = _shape(op, x, rank + 2, "an input (B, C, H, W)" if rank == 2 else "an input (B, C, T)")
    sizes = (output_size,) * rank if output_size is None or isinstance(output_size, (int, np.integer)) \
        else tuple(output_size)
    size = _spatial(op, "output_size", tuple(n if s is None else s for n, s in zip(shape[2:], sizes))
                    if len(sizes) == rank else output_size, 1, rank)
    return _pooled(op, primitive, x, rank, size=size if rank == 2 else (1, *size))


def adaptive_avg_pool2d(x, output_size):
    """The means of an ``output_size`` (Ho, Wo) grid of windows over x (B, C, H, W), as PyTorch's: window i spans
    floor(i·H/Ho) to ceil((i + 1)·H/Ho) − 1, and alike along W (None keeps that axis's size)."""
    return _adaptive("adaptive_avg_pool2d", "adaptive_avg_pool2d", x, output_size, 2)


def adaptive_avg_pool1d(x, output_size):
    """adaptive_avg_pool2d over x (B, C, T) along T."""
    return _adaptive("adaptive_avg_pool1d", "adaptive_avg_pool2d", x, output_size, 1)


def adaptive_max_pool2d(x, output_size):
    """The largest values of adaptive_avg_pool2d's windows (NaN if the window holds one); the gradient goes to the
    window's first largest element, as PyTorch's."""
    return _adaptive("adaptive_max_pool2d", "adaptive_max_pool2d", x, output_size, 2)


def adaptive_max_pool1d(x, output_size):
    """adaptive_max_pool2d over x (B, C, T) along T."""
    return _adaptive("adaptive_max_pool1d", "adaptive_max_pool2d", x, output_size, 1)


MODES = {"nearest": (1, 2, 3), "linear": (1,), "bilinear": (2,)}


def interpolate(x, size=None, scale_factor=None, mode: str = "nearest", align_corners=None):
    """x (B, C, *spatial) resampled to ``size`` or floor(size·``scale_factor``) along each spatial axis, as
    torch.nn.functional.interpolate, one axis after the other. Output position j reads source coordinate
    u = j·s, s = in/out (1/scale_factor when given): "nearest" takes x[min(floor(u), in − 1)]; "linear" (1-D) and
    "bilinear" (2-D) blend x[i0]·(1 − λ) + x[i0 + 1]·λ at u = s·(j + ½) − ½ (clamped at 0), i0 = floor(u),
    λ = u − i0, or at u = j·(in − 1)/(out − 1) with ``align_corners``. The gradient scatters back through the
    gathers."""
    shape = F.as_node(x).shape
    rank = len(shape) - 2
    if mode not in MODES:
        raise ShapeError(f"interpolate: mode must be one of {', '.join(map(repr, MODES))}, not {mode!r} "
                         f"(at {user_source()})")
    if rank not in MODES[mode]:
        raise ShapeError(f"interpolate: mode {mode!r} takes an input of {MODES[mode][0] + 2} axes (B, C, ...), got "
                         f"{format_shape(shape)} (at {user_source()})")
    if align_corners is not None and (mode == "nearest" or not isinstance(align_corners, bool)):
        raise ShapeError(f"interpolate: align_corners is True or False with the linear modes only, got "
                         f"{align_corners!r} with mode {mode!r} (at {user_source()})")
    if (size is None) == (scale_factor is None):
        raise ShapeError(f"interpolate: give either size or scale_factor (at {user_source()})")
    if not all(isinstance(n, int) for n in shape[2:]):
        raise ShapeError(f"interpolate needs concrete spatial sizes, got {format_shape(shape)} (at {user_source()})")
    if size is not None:
        sizes, scales = _spatial("interpolate", "size", size, 1, rank), (None,) * rank
    else:
        scales = (scale_factor,) * rank if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
        if len(scales) != rank or not all(isinstance(s, (int, float)) and not isinstance(s, bool) and s > 0
                                          and math.isfinite(s) for s in scales):
            raise ShapeError(f"interpolate: scale_factor must be a positive number or {rank} of them, got "
                             f"{scale_factor!r} (at {user_source()})")
        sizes = tuple(math.floor(n * s) for n, s in zip(shape[2:], scales))
        if min(sizes) < 1:
            raise ShapeError(f"interpolate: scale_factor {scale_factor!r} leaves no output of {format_shape(shape)} "
                             f"(at {user_source()})")
    if mode != "nearest" and F.as_node(x).dtype.kind != "f":
        raise DTypeError(f"interpolate: mode {mode!r} blends values: cast the {F.as_node(x).dtype} input to a float "
                         f"dtype first (at {user_source()})")
    for axis, (n, out, scale) in enumerate(zip(shape[2:], sizes, scales), start=2):
        x = _resample(x, axis, n, out, scale, mode, bool(align_corners))
    return x


def _resample(x, axis: int, n: int, out: int, scale, mode: str, align_corners: bool):
    """x resampled from n to ``out`` positions along ``axis`` (PyTorch's source index rules)."""
    j = np.arange(out)
    if mode == "nearest":
        s = np.float32(1 / scale if scale else n / out)
        return F.take(x, np.minimum(np.floor(j.astype(np.float32) * s).astype(np.int64), n - 1), axis)
    if align_corners:
        u = j * ((n - 1) / (out - 1) if out > 1 else 0.0)
    else:
        u = np.maximum((1 / scale if scale else n / out) * (j + 0.5) - 0.5, 0.0)
    i0 = np.minimum(np.floor(u).astype(np.int64), n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    lam = (u - i0).reshape((out,) + (1,) * (len(F.as_node(x).shape) - 1 - axis)).astype(F.as_node(x).dtype)
    return F.take(x, i0, axis) * (1 - lam) + F.take(x, i1, axis) * lam
