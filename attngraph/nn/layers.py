"""The basic layers: Linear, Embedding, LayerNorm, RMSNorm, GroupNorm, BatchNorm1d/2d, Dropout, and the containers
Sequential, ModuleList, MLP and the gated feed-forward SwiGLU."""
from __future__ import annotations

import math
from typing import Callable, Iterable

import numpy as np

from ..core import functional as F
from ..core.parameter import Parameter
from ..core.norms import batch_statistics
from ..core.tracing import buffer_value, update_buffer
from ..errors import ShapeError
from . import init
from .checks import flag, float_dtype, function, integer, module, non_negative, positive, probability, sizes
from .module import Module


class Linear(Module):
    """y = x W + b with W of shape (in, out) — the transpose of PyTorch's layout, so that no transpose is
    needed. W and b start from U(−1/√in, 1/√in), as in PyTorch."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype="float32", rng=None):
        super().__init__()
        in_features, out_features = sizes(in_features=in_features, out_features=out_features)
        bias, dtype, bound = flag("bias", bias), float_dtype("dtype", dtype), 1 / math.sqrt(in_features)
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(init.uniform((in_features, out_features), bound, dtype, rng))
        self.bias = Parameter(init.uniform((out_features,), bound, dtype, rng)) if bias else None

    def forward(self, x):
        y = x @ self.weight
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """A (num_embeddings, dim) table of N(0, std²) rows (std 1 as in PyTorch; GPT-2 uses 0.02) looked up by
    integer index. As torch's, the row ``padding_idx`` (negative: counted from the end) starts at zero and gets
    no gradient, so training leaves it zero."""

    def __init__(self, num_embeddings: int, dim: int, padding_idx: int | None = None, std: float = 1.0,
                 dtype="float32", rng=None):
        super().__init__()
        self.num_embeddings, self.dim = sizes(num_embeddings=num_embeddings, dim=dim)
        self.padding_idx = None if padding_idx is None else integer(
            "padding_idx", padding_idx, -self.num_embeddings, self.num_embeddings - 1) % self.num_embeddings
        weight = init.normal((self.num_embeddings, self.dim), non_negative("std", std), float_dtype("dtype", dtype),
                             rng)
        if self.padding_idx is not None:
            weight[self.padding_idx] = 0
        self.weight = Parameter(weight)

    def forward(self, indices):
        return F.embedding(self.weight, indices, self.padding_idx)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.dim}" + ("" if self.padding_idx is None else
                                                      f", padding_idx={self.padding_idx}")


class LayerNorm(Module):
    """Layer normalization over the last axis (Ba et al. 2016): γ ∘ (x − μ)/√(σ² + ε) + β, biased σ²."""

    def __init__(self, dim: int, eps: float = 1e-5, bias: bool = True, dtype="float32"):
        super().__init__()
        self.dim, self.eps, dtype = integer("dim", dim), positive("eps", eps), float_dtype("dtype", dtype)
        self.weight = Parameter(np.ones(self.dim, dtype))
        self.bias = Parameter(np.zeros(self.dim, dtype)) if flag("bias", bias) else None

    def forward(self, x):
        return F.layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps}"


class RMSNorm(Module):
    """Root-mean-square normalization over the last axis (Zhang & Sennrich 2019): γ ∘ x / √(mean(x²) + ε), no
    centring and no bias. As torch.nn.RMSNorm, ``eps=None`` takes the dtype's machine epsilon."""

    def __init__(self, dim: int, eps: float | None = None, dtype="float32"):
        super().__init__()
        self.dim, dtype = integer("dim", dim), float_dtype("dtype", dtype)
        self.eps = float(np.finfo(dtype).eps) if eps is None else positive("eps", eps)
        self.weight = Parameter(np.ones(self.dim, dtype))

    def forward(self, x):
        return F.rms_norm(x, self.dim, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps}"


class GroupNorm(Module):
    """Group normalization (Wu & He 2018) of x (N, C, ...): each group of C/G channels normalized over its channels
    and positions, then γ and β per channel (torch.nn.GroupNorm)."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, dtype="float32"):
        super().__init__()
        self.num_groups, self.num_channels = sizes(num_groups=num_groups, num_channels=num_channels)
        if self.num_channels % self.num_groups:
            raise ValueError(f"num_groups {num_groups} must divide num_channels {num_channels}")
        self.eps, dtype = positive("eps", eps), float_dtype("dtype", dtype)
        affine = flag("affine", affine)
        self.weight = Parameter(np.ones(self.num_channels, dtype)) if affine else None
        self.bias = Parameter(np.zeros(self.num_channels, dtype)) if affine else None

    def forward(self, x):
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}"


class BatchNorm(Module):
    """Batch normalization (Ioffe & Szegedy 2015) per channel of x (N, C, ...), as torch.nn.BatchNorm: in training
    mode with the batch's mean and biased variance, and the buffers ``running_mean`` and ``running_var`` moved
    toward the batch's mean and unbiased variance, r ← (1 − momentum)·r + momentum·batch (written back after each
    run of the traced graph: see nn/module.py); in eval mode with the running statistics. ``momentum=None`` (torch's
    cumulative average) is not offered."""

    spatial: tuple[int, ...] = ()         # the numbers of axes after (N, C) the subclass takes

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = True,
                 track_running_stats: bool = True, dtype="float32"):
        super().__init__()
        self.num_features, dtype = integer("num_features", num_features), float_dtype("dtype", dtype)
        self.eps, self.momentum = positive("eps", eps), probability("momentum", momentum, certain=True)
        affine, self.track_running_stats = flag("affine", affine), flag("track_running_stats", track_running_stats)
        self.weight = Parameter(np.ones(self.num_features, dtype)) if affine else None
        self.bias = Parameter(np.zeros(self.num_features, dtype)) if affine else None
        if self.track_running_stats:
            self.register_buffer("running_mean", np.zeros(self.num_features, dtype))
            self.register_buffer("running_var", np.ones(self.num_features, dtype))

    def forward(self, x):
        if len(x.shape) - 2 not in self.spatial:
            raise ShapeError(f"{type(self).__name__} takes (N, C{', L' if 1 in self.spatial else ', H, W'}), got "
                             f"{x.shape}")
        batch = self.training or not self.track_running_stats
        if batch and self.track_running_stats:
            self._update_running_statistics(x)
        return F.batch_norm(x, None if batch else self.running_mean, None if batch else self.running_var,
                            self.weight, self.bias, training=batch, eps=self.eps)

    def _update_running_statistics(self, x):
        mean, variance, count = (F.stop_gradient(v) for v in batch_statistics(x))
        unbiased = variance * count / F.maximum(count - 1.0, 1.0)
        for buffer, batch in ((self.running_mean, mean), (self.running_var, unbiased)):
            update_buffer(buffer, F.Tensor(buffer_value(buffer)) * (1 - self.momentum) + batch * self.momentum)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class BatchNorm1d(BatchNorm):
    """BatchNorm over x (N, C) or (N, C, L)."""
    spatial = (0, 1)


class BatchNorm2d(BatchNorm):
    """BatchNorm over x (N, C, H, W)."""
    spatial = (2,)


class Dropout(Module):
    """Inverted dropout (Srivastava et al. 2014) while ``training``; the identity in ``eval()`` mode. p is in
    [0, 1): PyTorch also takes p = 1, which zeroes everything and leaves nothing to learn from."""

    def __init__(self, p: float = 0.1):
        super().__init__()
        self.p = probability("p", p)

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class ModuleList(Module):
    """Sub-modules named ``0``, ``1``, ... in order; anything else is refused with a TypeError."""

    def __init__(self, modules: Iterable[Module] = ()):
        super().__init__()
        for m in modules:
            self.append(m)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]

    def append(self, item: Module) -> None:
        setattr(self, str(len(self)), module(f"item {len(self)}", item))


class Sequential(ModuleList):
    """Apply the sub-modules one after the other."""

    def __init__(self, *modules: Module):
        super().__init__(modules)

    def forward(self, x):
        for layer in self:
            x = layer(x)
        return x


class Activation(Module):
    """A parameter-free function as a module, so that it gets a scope (and a box in the rendered graph)."""

    def __init__(self, fn: Callable):
        super().__init__()
        self.fn = function("fn", fn)

    def forward(self, x):
        return self.fn(x)

    def extra_repr(self) -> str:
        return self.fn.__name__


class MLP(Sequential):
    """Linear layers of the given sizes with an activation (default GELU) between them:
    ``MLP([64, 256, 64])`` is Linear(64, 256) → GELU → Linear(256, 64). ``sizes`` holds at least two sizes."""

    def __init__(self, sizes: list[int], activation: Callable = F.gelu, dropout: float = 0.0, rng=None):
        if not isinstance(sizes, (list, tuple)) or len(sizes) < 2:
            raise ValueError(f"sizes must be a list of at least two sizes (input, ..., output), got {sizes!r}")
        sizes = [integer(f"sizes[{i}]", size) for i, size in enumerate(sizes)]
        activation, dropout = function("activation", activation), probability("dropout", dropout)
        layers: list[Module] = []
        for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
            layers.append(Linear(a, b, rng=rng))
            if i < len(sizes) - 2:
                layers.append(Activation(activation))
                if dropout:
                    layers.append(Dropout(dropout))
        super().__init__(*layers)


class SwiGLU(Module):
    """The gated feed-forward layer of Shazeer 2020 (GLU Variants Improve Transformer): (silu(x W) ∘ x V) W₂,
    with W and V (in_features, hidden) and W₂ (hidden, out_features; default in_features). As in the paper (and
    LLaMA), its three Linear layers (``gate`` W, ``up`` V, ``down`` W₂) have no bias unless ``bias=True``."""

    def __init__(self, in_features: int, hidden: int, out_features: int | None = None, bias: bool = False,
                 dtype="float32", rng=None):
        super().__init__()
        out_features = in_features if out_features is None else out_features
        self.gate = Linear(in_features, hidden, bias, dtype, rng)
        self.up = Linear(in_features, hidden, bias, dtype, rng)
        self.down = Linear(hidden, out_features, bias, dtype, rng)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))
