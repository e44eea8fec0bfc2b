"""Convolution, transposed convolution and pooling layers over (B, C, T), (B, C, H, W) and (B, C, D, H, W), with
PyTorch's names, arguments and initialization; each calls its ``F`` op."""
from __future__ import annotations

import math

from ..core import functional as F
from ..core.parameter import Parameter
from . import init
from .checks import divisible, flag, float_dtype, integer, sizes
from .module import Module


def spatial(name: str, value, rank: int, minimum: int) -> tuple[int, ...]:
    """An int for every spatial axis, or one per axis, each at least ``minimum``."""
    values = value if isinstance(value, (tuple, list)) else (value,) * rank
    if len(values) != rank:
        raise ValueError(f"{name} must be an int or {rank} of them, got {value!r}")
    return tuple(integer(name, v, minimum) for v in values)


class _Conv(Module):
    """The weight and bias (O,) of a convolution, drawn as PyTorch draws them: the weight by Kaiming-uniform with
    a = √5 and the bias from U(±1/√fan_in), both U(−1/√fan_in, 1/√fan_in), fan_in = weight.shape[1]·prod(kernel).
    The weight is (O, C/groups, *kernel), or (C, O/groups, *kernel) for a transposed convolution."""
    rank = 2
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, dtype="float32", rng=None):
        super().__init__()
        self.in_channels, self.out_channels = sizes(in_channels=in_channels, out_channels=out_channels)
        self.groups = integer("groups", groups, 1)
        divisible("in_channels", in_channels, "groups", groups)
        divisible("out_channels", out_channels, "groups", groups)
        self.kernel_size = spatial("kernel_size", kernel_size, self.rank, 1)
        self.stride = spatial("stride", stride, self.rank, 1)
        self.dilation = spatial("dilation", dilation, self.rank, 1)
        self.padding = padding if padding in ("same", "valid") and not self.transposed \
            else spatial("padding", padding, self.rank, 0)
        shape = (in_channels, out_channels // groups) if self.transposed else (out_channels, in_channels // groups)
        dtype, bound = float_dtype("dtype", dtype), 1 / math.sqrt(shape[1] * math.prod(self.kernel_size))
        self.weight = Parameter(init.uniform((*shape, *self.kernel_size), bound, dtype, rng))
        self.bias = Parameter(init.uniform((out_channels,), bound, dtype, rng)) if flag("bias", bias) else None

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, groups={self.groups}, bias={self.bias is not None}")


class Conv2d(_Conv):
    """y = conv2d(x, W) + b on x (B, C, H, W): ``F.conv2d``."""

    def forward(self, x):
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv3d(_Conv):
    """y = conv3d(x, W) + b on x (B, C, D, H, W): ``F.conv3d``."""
    rank = 3

    def forward(self, x):
        return F.conv3d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv1d(_Conv):
    """y = conv1d(x, W) + b on x (B, C, T): ``F.conv1d``; ``causal=True`` pads (k − 1)·dilation on the left only,
    so that output t sees the inputs up to t (and takes no ``padding``)."""
    rank = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding=0,
                 dilation: int = 1, groups: int = 1, bias: bool = True, causal: bool = False, dtype="float32",
                 rng=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, dtype, rng)
        self.causal = flag("causal", causal)
        if self.causal and padding:
            raise ValueError("a causal Conv1d pads (kernel_size - 1)·dilation on the left itself: leave padding at 0")

    def forward(self, x):
        padding = self.padding if isinstance(self.padding, str) else self.padding[0]
        return F.conv1d(x, self.weight, self.bias, self.stride[0], padding, self.dilation[0], self.groups,
                        self.causal)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", causal={self.causal}"


class _ConvTranspose(_Conv):
    """A transposed convolution's weight (C, O/groups, *kernel), bias and ``output_padding`` (below the stride)."""
    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, dtype="float32", rng=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, dtype, rng)
        self.output_padding = spatial("output_padding", output_padding, self.rank, 0)
        if any(p >= s for p, s in zip(self.output_padding, self.stride)):
            raise ValueError(f"output_padding {self.output_padding} must be smaller than the stride {self.stride}")

    def extra_repr(self) -> str:
        return super().extra_repr() + f", output_padding={self.output_padding}"


class ConvTranspose2d(_ConvTranspose):
    """y = conv_transpose2d(x, W) + b on x (B, C, H, W): ``F.conv_transpose2d``."""

    def forward(self, x):
        return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                  self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """y = conv_transpose1d(x, W) + b on x (B, C, T): ``F.conv_transpose1d``."""
    rank = 1

    def forward(self, x):
        return F.conv_transpose1d(x, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                  self.groups, self.dilation)


class _Pool(Module):
    """Windows of ``kernel_size`` placed ``stride`` apart (default: the kernel, not overlapping), over ``padding``;
    ``ceil_mode`` keeps a last window that hangs over the end."""
    rank = 2

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False):
        super().__init__()
        self.kernel_size = spatial("kernel_size", kernel_size, self.rank, 1)
        self.stride = self.kernel_size if stride is None else spatial("stride", stride, self.rank, 1)
        self.padding = spatial("padding", padding, self.rank, 0)
        self.ceil_mode = flag("ceil_mode", ceil_mode)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"ceil_mode={self.ceil_mode}")


class _MaxPool(_Pool):
    """The largest value of each window, taps ``dilation`` apart; ``return_indices`` also gives where it lies."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False,
                 ceil_mode: bool = False):
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.dilation = spatial("dilation", dilation, self.rank, 1)
        self.return_indices = flag("return_indices", return_indices)

    def forward(self, x):
        pool = F.max_pool2d if self.rank == 2 else F.max_pool1d
        return pool(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                    self.return_indices)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", dilation={self.dilation}, return_indices={self.return_indices}"


class MaxPool2d(_MaxPool):
    """The largest value of each window of x (B, C, H, W): ``F.max_pool2d``."""


class MaxPool1d(_MaxPool):
    """The largest value of each window of x (B, C, T): ``F.max_pool1d``."""
    rank = 1


class AvgPool2d(_Pool):
    """The mean of each window of x (B, C, H, W): ``F.avg_pool2d``."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override=None):
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.count_include_pad = flag("count_include_pad", count_include_pad)
        self.divisor_override = None if divisor_override is None else integer("divisor_override", divisor_override)

    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                            self.divisor_override)


class AvgPool1d(_Pool):
    """The mean of each window of x (B, C, T): ``F.avg_pool1d``."""
    rank = 1

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.count_include_pad = flag("count_include_pad", count_include_pad)

    def forward(self, x):
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)


class _AdaptivePool(Module):
    """Pooling to a fixed ``output_size`` whatever the input's size (None keeps an axis's size)."""
    op = staticmethod(F.adaptive_avg_pool2d)

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return self.op(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(_AdaptivePool):
    """``F.adaptive_avg_pool2d`` over x (B, C, H, W)."""


class AdaptiveAvgPool1d(_AdaptivePool):
    """``F.adaptive_avg_pool1d`` over x (B, C, T)."""
    op = staticmethod(F.adaptive_avg_pool1d)


class AdaptiveMaxPool2d(_AdaptivePool):
    """``F.adaptive_max_pool2d`` over x (B, C, H, W)."""
    op = staticmethod(F.adaptive_max_pool2d)


class AdaptiveMaxPool1d(_AdaptivePool):
    """``F.adaptive_max_pool1d`` over x (B, C, T)."""
    op = staticmethod(F.adaptive_max_pool1d)
