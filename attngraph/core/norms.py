"""Normalizations with torch.nn.functional's names and arguments, composed from the functional API: ``rms_norm``,
``group_norm`` (on the fused layer-norm kernel) and ``batch_norm``. Their inputs are (N, C, ...) as torch's, but
``rms_norm``, which normalizes the trailing ``normalized_shape`` axes as ``layer_norm`` does.
"""
from __future__ import annotations

from math import inf

import numpy as np

from ..errors import ShapeError
from . import tensor as F
from .dims import format_shape, multiply
from .tracing import user_source

__all__ = ["rms_norm", "group_norm", "batch_norm"]


def _eps(op: str, eps) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 <= eps < inf:
        raise ShapeError(f"{op}: eps must be a finite number >= 0, got {eps!r} (at {user_source()})")
    return float(eps)


def _channels(op: str, x, minimum: int = 2) -> int:
    shape = F.as_node(x).shape
    if len(shape) < minimum or isinstance(shape[1], str):
        raise ShapeError(f"{op} takes an input (N, C, ...) of at least {minimum} axes, C concrete, got "
                         f"{format_shape(shape)} (at {user_source()})")
    return shape[1]


def _per_channel(op: str, name: str, value, channels: int, ndim: int):
    """A (C,) ``weight``, ``bias`` or running statistic shaped (C, 1, ...) to broadcast over (N, C, ...)."""
    if F.as_node(value).shape != (channels,):
        raise ShapeError(f"{op}: {name} must have shape ({channels},), one value per channel, got "
                         f"{format_shape(F.as_node(value).shape)} (at {user_source()})")
    return F.reshape(value, (channels,) + (1,) * (ndim - 2))


def _affine(op: str, y, weight, bias, channels: int):
    ndim = len(F.as_node(y).shape)
    y = y if weight is None else y * _per_channel(op, "weight", weight, channels, ndim)
    return y if bias is None else y + _per_channel(op, "bias", bias, channels, ndim)


def rms_norm(x, normalized_shape, weight=None, eps: float | None = None):
    """x / √(mean(x²) + ε) · γ over the trailing ``normalized_shape`` axes (Zhang & Sennrich 2019), as
    torch.nn.functional.rms_norm: ``eps=None`` takes the dtype's machine epsilon; no γ means 1."""
    shape, dims = F.as_node(x).shape, (normalized_shape,) if isinstance(normalized_shape, int) \
        else tuple(normalized_shape)
    if not dims or shape[len(shape) - len(dims):] != dims or len(dims) > len(shape):
        raise ShapeError(f"rms_norm: normalized_shape {format_shape(dims)} must end the input's shape "
                         f"{format_shape(shape)} (at {user_source()})")
    dtype = F._floating("rms_norm", x)
    eps = float(np.finfo(dtype).eps) if eps is None else _eps("rms_norm", eps)
    axes = tuple(range(len(shape) - len(dims), len(shape)))
    y = x * F.rsqrt(F.mean(x * x, axes, keepdims=True) + eps)
    if weight is None:
        return y
    if F.as_node(weight).shape != dims:
        raise ShapeError(f"rms_norm: weight must have the normalized shape {format_shape(dims)}, got "
                         f"{format_shape(F.as_node(weight).shape)} (at {user_source()})")
    return y * weight


def group_norm(x, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
    """(x − μ) / √(σ² + ε) · γ + β, μ and the biased σ² over each group of C/G channels and the spatial axes of
    x (N, C, ...) (Wu & He 2018), as torch.nn.functional.group_norm; γ and β are per channel. Each group is a
    row of the fused layer-norm kernel."""
    channels, eps = _channels("group_norm", x), _eps("group_norm", eps)
    if isinstance(num_groups, bool) or not isinstance(num_groups, (int, np.integer)) or num_groups < 1 \
            or channels % num_groups:
        raise ShapeError(f"group_norm: num_groups must be a positive int dividing the {channels} channels, got "
                         f"{num_groups!r} (at {user_source()})")
    shape = F.as_node(x).shape
    size = multiply(channels // num_groups, *shape[2:])
    if isinstance(size, str):
        raise ShapeError(f"group_norm needs concrete channel and spatial sizes, got {format_shape(shape)} "
                         f"(at {user_source()})")
    rows = F.reshape(x, (shape[0], int(num_groups), size))
    return _affine("group_norm", F.reshape(F.layer_norm(rows, eps=eps), shape), weight, bias, channels)


def batch_statistics(x):
    """(mean, biased variance, count) of x (N, C, ...) per channel, over every axis but the channels'."""
    axes = (0, *range(2, len(F.as_node(x).shape)))
    mean = F.mean(x, axes)
    return mean, F.var(x, axes, correction=0), F.emit("size", x, axes=axes, dtype=F.as_node(x).dtype)


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5):
    """(x − μ) / √(σ² + ε) · γ + β per channel of x (N, C, ...) (Ioffe & Szegedy 2015), as
    torch.nn.functional.batch_norm: μ and σ² are the running statistics, or with ``training`` the batch's
    (biased σ²). Graphs are functional, so the running statistics are not updated here (torch updates them in
    place): ``nn.BatchNorm1d``/``2d`` do it, as module buffers (see attngraph/nn/module.py)."""
    channels, eps = _channels("batch_norm", x), _eps("batch_norm", eps)
    if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or not 0 <= momentum <= 1:
        raise ShapeError(f"batch_norm: momentum must be a number in [0, 1], got {momentum!r} (at {user_source()})")
    ndim = len(F.as_node(x).shape)
    if training:
        mean, variance, _ = batch_statistics(x)
        mean, variance = (_per_channel("batch_norm", "mean", v, channels, ndim) for v in (mean, variance))
    else:
        if running_mean is None or running_var is None:
            raise ShapeError(f"batch_norm in eval mode (training=False) needs running_mean and running_var "
                             f"(at {user_source()})")
        mean = _per_channel("batch_norm", "running_mean", running_mean, channels, ndim)
        variance = _per_channel("batch_norm", "running_var", running_var, channels, ndim)
    return _affine("batch_norm", (x - mean) * F.rsqrt(variance + eps), weight, bias, channels)
