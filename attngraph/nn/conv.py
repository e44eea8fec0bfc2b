"""Convolution and pooling layers over (B, C, H, W), and their 1-D forms over (B, C, T), as PyTorch's."""
from __future__ import annotations

import math

from ..core import functional as F
from ..core.parameter import Parameter
from . import init
from .checks import flag, float_dtype, integer, sizes
from .module import Module


def spatial(name: str, value, rank: int, minimum: int) -> tuple[int, ...]:
    """An int for every spatial axis, or one per axis, each at least ``minimum``."""
    values = value if isinstance(value, (tuple, list)) else (value,) * rank
    if len(values) != rank:
        raise ValueError(f"{name} must be an int or {rank} of them, got {value!r}")
    return tuple(integer(name, v, minimum) for v in values)


class _Conv(Module):
    """The weight (O, C, *kernel) and bias (O,) of a convolution, drawn as PyTorch draws them: the weight by
    Kaiming-uniform with a = √5 and the bias from U(±1/√fan_in), fan_in = C·prod(kernel) — both
    U(−1/√fan_in, 1/√fan_in)."""
    rank = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 bias: bool = True, dtype="float32", rng=None):
        super().__init__()
        self.in_channels, self.out_channels = sizes(in_channels=in_channels, out_channels=out_channels)
        self.kernel_size = spatial("kernel_size", kernel_size, self.rank, 1)
        self.stride, self.dilation = spatial("stride", stride, self.rank, 1), spatial("dilation", dilation, self.rank, 1)
        self.padding = spatial("padding", padding, self.rank, 0)
        dtype, bound = float_dtype("dtype", dtype), 1 / math.sqrt(in_channels * math.prod(self.kernel_size))
        self.weight = Parameter(init.uniform((out_channels, in_channels, *self.kernel_size), bound, dtype, rng))
        self.bias = Parameter(init.uniform((out_channels,), bound, dtype, rng)) if flag("bias", bias) else None

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, bias={self.bias is not None}")


class Conv2d(_Conv):
    """y = conv2d(x, W) + b on x (B, C, H, W): ``F.conv2d``."""

    def forward(self, x):
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation)


class Conv1d(_Conv):
    """y = conv1d(x, W) + b on x (B, C, T): ``F.conv1d``; ``causal=True`` pads (k − 1)·dilation on the left only,
    so that output t sees the inputs up to t (and takes no ``padding``)."""
    rank = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 dilation: int = 1, bias: bool = True, causal: bool = False, dtype="float32", rng=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, bias, dtype, rng)
        self.causal = flag("causal", causal)
        if self.causal and padding:
            raise ValueError("a causal Conv1d pads (kernel_size - 1)·dilation on the left itself: leave padding at 0")

    def forward(self, x):
        (stride,), (padding,), (dilation,) = self.stride, self.padding, self.dilation
        return F.conv1d(x, self.weight, self.bias, stride, padding, dilation, self.causal)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", causal={self.causal}"


class _Pool(Module):
    """Windows of ``kernel_size`` placed ``stride`` apart (default: the kernel, not overlapping), no padding."""
    rank = 2

    def __init__(self, kernel_size, stride=None):
        super().__init__()
        self.kernel_size = spatial("kernel_size", kernel_size, self.rank, 1)
        self.stride = self.kernel_size if stride is None else spatial("stride", stride, self.rank, 1)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}"


class MaxPool2d(_Pool):
    """The largest value of each window of x (B, C, H, W): ``F.max_pool2d``."""

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride)


class AvgPool2d(_Pool):
    """The mean of each window of x (B, C, H, W): ``F.avg_pool2d``."""

    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride)


class MaxPool1d(_Pool):
    """The largest value of each window of x (B, C, T): ``F.max_pool1d``."""
    rank = 1

    def forward(self, x):
        return F.max_pool1d(x, self.kernel_size, self.stride)


class AvgPool1d(_Pool):
    """The mean of each window of x (B, C, T): ``F.avg_pool1d``."""
    rank = 1

    def forward(self, x):
        return F.avg_pool1d(x, self.kernel_size, self.stride)
