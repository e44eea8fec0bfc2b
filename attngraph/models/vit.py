"""The Vision Transformer (Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words")."""
from __future__ import annotations

import numpy as np

from ..attention import LearnedPositions
from ..core import functional as F
from ..core.parameter import Parameter
from ..core.tracing import Input
from ..errors import ShapeError
from ..nn import Dropout, Linear, Module, init
from ..nn.checks import divisible, integer, sizes
from . import tasks
from .blocks import Encoder, gelu_and_eps, stack_settings
from .registry import ModelSpec, register


def patches(images, size: int):
    """(B, C, H, W) → (B, HW/size², C·size²): the non-overlapping size × size patches, row by row, each
    flattened channel-first. H and W must be concrete multiples of ``size``; B may be symbolic."""
    batch, channels, height, width = images.shape
    if isinstance(height, str) or isinstance(width, str) or height % size or width % size:
        raise ShapeError(f"images of {height} × {width} pixels do not split into {size} × {size} patches")
    rows, columns = height // size, width // size
    grid = F.reshape(images, (batch, channels, rows, size, columns, size))
    grid = F.transpose(grid, (0, 2, 4, 1, 3, 5))                  # (B, rows, columns, C, size, size)
    return F.reshape(grid, (batch, rows * columns, channels * size * size))


class ViT(Module):
    """logits = ViT(...)(images): images (B, C, H, W) → class logits (B, classes).

    Each patch is flattened and linearly embedded, a learned class token is put in front, learned
    positions are added, ``layers`` pre-norm GELU encoder layers follow (as the paper), and a linear head
    reads the class token's final state. Layer i's attention weights, (B, heads, 1 + patches, 1 + patches)
    with the class token first, are recorded under ``encoder.layers.i.self_attn``. ``image_size`` must be a
    multiple of ``patch_size``. ``gelu`` picks GELU's tanh approximation or its exact form ("none", as the
    paper); ``layer_norm_eps`` is the ε of every LayerNorm."""

    def __init__(self, image_size: int = 32, patch_size: int = 4, channels: int = 3, classes: int = 10,
                 d_model: int = 64, heads: int = 4, layers: int = 2, d_ff: int = 256, dropout: float = 0.1, rng=None,
                 gelu: str = "tanh", layer_norm_eps: float = 1e-5):
        super().__init__()
        image_size, patch_size, channels = sizes(image_size=image_size, patch_size=patch_size, channels=channels)
        layers, d_model, heads, d_ff, dropout = stack_settings(layers, d_model, heads, d_ff, dropout)
        classes = integer("classes", classes, minimum=2)
        activation, layer_norm_eps = gelu_and_eps(gelu, layer_norm_eps)
        self.image_size = divisible("image_size", image_size, "patch_size", patch_size)
        self.patch_size, self.channels = patch_size, channels
        self.patch_embed = Linear(channels * patch_size ** 2, d_model, rng=rng)
        self.class_token = Parameter(init.normal((1, 1, d_model), 0.02, rng=rng))
        self.positions = LearnedPositions(1 + (image_size // patch_size) ** 2, d_model, rng=rng)
        self.dropout = Dropout(dropout)
        self.encoder = Encoder(layers, d_model, heads, d_ff, dropout, pre_norm=True, activation=activation, rng=rng,
                               layer_norm_eps=layer_norm_eps)
        self.head = Linear(d_model, classes, rng=rng)

    def forward(self, images):
        x = self.patch_embed(patches(images, self.patch_size))
        class_token = F.broadcast_to(self.class_token, (x.shape[0], 1, x.shape[2]))
        x = self.dropout(self.positions(F.concat([class_token, x], axis=1)))
        return self.head(self.encoder(x)[:, 0])


def batch(model: ViT, rng: np.random.Generator, size: int) -> dict[str, np.ndarray]:
    """Which quadrant of the image is brighter (four classes)."""
    images, labels = tasks.quadrant_images(rng, size, model.channels, model.image_size)
    return dict(images=images, labels=labels)


register(ModelSpec(
    name="vit",
    factory=ViT,
    inputs=lambda model: dict(images=Input(("B", model.channels, model.image_size, model.image_size))),
    batch=batch,
    loss=lambda model, images, labels: F.cross_entropy(model(images), labels),
    defaults=dict(image_size=32, patch_size=4, channels=3, classes=10, d_model=64, heads=4, layers=2, d_ff=256,
                  dropout=0.1),
    tiny=dict(image_size=8, patch_size=4, channels=1, classes=4, d_model=16, heads=2, layers=1, d_ff=32,
              dropout=0.0),
    description="Vision Transformer (Dosovitskiy et al. 2021) on finding the bright quadrant",
))
