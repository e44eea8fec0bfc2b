"""Attention over a picture: a coarse map of attention weights (h, w), bilinearly upsampled to the picture,
lighting the picture where the weights are high; a row of such panels, one per generated word, as an SVG
with the pictures embedded as PNGs (written without any dependency).

    svg = attention_panels(image, alpha.reshape(n, 3, 3), words)      # image (3, H, W) in [0, 1]
    Path("attention.svg").write_text(svg, encoding="utf-8")

Pictures are channels-first, (3, H, W) RGB in [0, 1], as models take them.
"""
from __future__ import annotations

import base64
import html
import struct
import zlib
from collections.abc import Sequence

import numpy as np

from ..errors import RenderError

SCALE = 4               # screen pixels per picture pixel in the panels


def upsample(grid: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear resize of a (h, w) map to (height, width), pixel centres aligned (PyTorch's
    ``interpolate(mode="bilinear", align_corners=False)``): output pixel x reads the input at
    (x + 0.5)·n/size − 0.5, clamped to the edges."""
    grid = np.asarray(grid, np.float64)
    if grid.ndim != 2 or 0 in grid.shape:
        raise RenderError(f"an attention map to upsample must be a non-empty (h, w) array, got shape {grid.shape}")

    def weights(n: int, size: int) -> np.ndarray:
        x = np.clip((np.arange(size) + 0.5) * n / size - 0.5, 0, n - 1)
        low = np.floor(x).astype(int)
        high, frac = np.minimum(low + 1, n - 1), x - low
        m = np.zeros((size, n))
        np.add.at(m, (np.arange(size), low), 1 - frac)
        np.add.at(m, (np.arange(size), high), frac)
        return m
    return weights(grid.shape[0], height) @ grid @ weights(grid.shape[1], width).T


def lit(picture: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The picture (3, H, W) dimmed, and lit in white where the attention map (h, w), upsampled and scaled to
    a maximum of 1 (w'), is high: picture · (0.3 + 0.7 w') + 0.55 w', clipped, as (H, W, 3) in [0, 1]."""
    picture = _picture(picture)
    weight = upsample(weights, *picture.shape[1:])
    weight = weight / max(weight.max(), 1e-12)
    return np.clip(picture.transpose(1, 2, 0) * (0.3 + 0.7 * weight[..., None]) + 0.55 * weight[..., None], 0, 1)


def png(rgb: np.ndarray) -> bytes:
    """An 8-bit RGB PNG of ``rgb`` (H, W, 3) in [0, 1]."""
    rgb = np.asarray(rgb, np.float64)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or 0 in rgb.shape or not np.all((rgb >= 0) & (rgb <= 1)):
        raise RenderError(f"a PNG is drawn from (H, W, 3) RGB values in [0, 1], got shape {rgb.shape} "
                          f"with values in [{rgb.min(initial=0):g}, {rgb.max(initial=0):g}]")
    height, width, _ = rgb.shape
    rows = np.round(rgb * 255).astype(np.uint8)
    raw = b"".join(b"\x00" + row.tobytes() for row in rows)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def attention_panels(picture: np.ndarray, maps: np.ndarray, words: Sequence[str], scale: int = SCALE) -> str:
    """An SVG row: the caption, then the picture (3, H, W) and for each word, with its attention map (a row of
    ``maps``, (n, h, w)), the picture lit where the word looked (``lit``), the word beneath; each picture
    pixel drawn as ``scale`` × ``scale`` screen pixels."""
    picture, maps = _picture(picture), np.asarray(maps)
    if maps.ndim != 3 or len(maps) != len(words):
        raise RenderError(f"attention_panels needs one (h, w) map per word: {len(words)} words, "
                          f"maps of shape {maps.shape}")
    height, width = (scale * n for n in picture.shape[1:])
    panels = [("picture", picture.transpose(1, 2, 0))] + [(w, lit(picture, m)) for w, m in zip(words, maps)]
    gap, top = 8, 22
    total, tall = len(panels) * (width + gap) + gap, top + height + 24
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{total}" height="{tall}" viewBox="0 0 {total} {tall}" '
            'font-family="Helvetica, Arial, sans-serif" font-size="12">'),
           f'<rect width="{total}" height="{tall}" fill="white"/>',
           f'<text x="{gap}" y="15" font-weight="bold">{html.escape(" ".join(words))}</text>']
    for k, (label, rgb) in enumerate(panels):
        x = gap + k * (width + gap)
        data = base64.b64encode(png(rgb)).decode("ascii")
        out += [(f'<image x="{x}" y="{top}" width="{width}" height="{height}" style="image-rendering:pixelated" '
                 f'href="data:image/png;base64,{data}"/>'),
                f'<text x="{x + width / 2}" y="{top + height + 16}" text-anchor="middle">{html.escape(label)}</text>']
    return "\n".join(out + ["</svg>"]) + "\n"


def _picture(picture: np.ndarray) -> np.ndarray:
    picture = np.asarray(picture, np.float64)
    if picture.ndim != 3 or picture.shape[0] != 3 or 0 in picture.shape:
        raise RenderError(f"a picture must be (3, H, W) RGB, channels first, got shape {picture.shape}")
    return picture
