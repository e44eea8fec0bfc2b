"""Attention heatmaps in the style of Bahdanau et al. (2015), Fig. 3: one grey square per weight, black for
0 and white for 1, source tokens along the top (rotated), target tokens down the left.

    attention_heatmap(maps["decoder.attn"][0], source_tokens, target_tokens, "attention.svg")

``weights`` is (Ty, Tx) for one map, (heads, Ty, Tx) for a row of heads, or (layers, heads, Ty, Tx) for a
layer × head grid. The SVG is written without any dependency, each cell with a tooltip (its target and
source token and the weight); a path ending in ``.png`` is drawn with matplotlib (the ``plot`` extra).
"""
from __future__ import annotations

import html
from collections.abc import Sequence
from itertools import product
from pathlib import Path

import numpy as np

from ..errors import RenderError


FONT = 'font-family="Helvetica, Arial, sans-serif"'


def attention_heatmap(weights, x_labels: Sequence[str] | None = None, y_labels: Sequence[str] | None = None,
                      path="attention.svg", title: str = "") -> Path:
    """Draw ``weights`` to ``path`` (.svg, or .png with matplotlib); labels default to positions."""
    grid = np.asarray(weights, dtype=np.float64)
    if not 2 <= grid.ndim <= 4:
        raise RenderError(f"attention weights must be (Ty, Tx), (heads, Ty, Tx) or (layers, heads, Ty, Tx); "
                          f"got shape {grid.shape}")
    grid = grid.reshape((1,) * (4 - grid.ndim) + grid.shape)
    ty, tx = grid.shape[-2:]
    x_labels = [str(s) for s in (range(tx) if x_labels is None else x_labels)]
    y_labels = [str(s) for s in (range(ty) if y_labels is None else y_labels)]
    if len(x_labels) != tx or len(y_labels) != ty:
        raise RenderError(f"{len(x_labels)} x labels and {len(y_labels)} y labels for maps of {ty} × {tx} "
                          "(target × source) weights")
    path = Path(path)
    if path.suffix.lower() not in (".svg", ".png"):
        raise RenderError(f"cannot draw a heatmap to {path.name!r}: use .svg or .png")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".png":
        _png(grid, x_labels, y_labels, path, title)
    else:
        path.write_text(_svg(grid, x_labels, y_labels, title), encoding="utf-8")
    return path


def _svg(grid: np.ndarray, x_labels: list[str], y_labels: list[str], title: str) -> str:
    layers, heads, ty, tx = grid.shape
    cell = max(6, min(24, 480 // max(tx, ty)))
    longest_x, longest_y = max(map(len, x_labels), default=0), max(map(len, y_labels), default=0)
    left = 10 + 6 * longest_y + (16 if layers > 1 else 0)
    top = 10 + 6 * longest_x + (16 if heads > 1 else 0) + (18 if title else 0)
    gap = cell
    width = max(left + heads * (tx * cell + gap), left + 7 * len(title) + 10, left + 140)
    height = top + layers * (ty * cell + gap) + 16
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" {FONT} font-size="10">'),
           f'<rect width="{width}" height="{height}" fill="white"/>']
    if title:
        out.append(f'<text x="{left}" y="14" font-size="12" font-weight="bold">{html.escape(title)}</text>')
    for layer in range(layers):
        for head in range(heads):
            x0, y0 = left + head * (tx * cell + gap), top + layer * (ty * cell + gap)
            if layer == 0:
                out += [f'<text transform="translate({x0 + j * cell + cell * 3 // 4},{y0 - 4}) rotate(-90)">'
                        f'{html.escape(s)}</text>' for j, s in enumerate(x_labels)]
                if heads > 1:
                    out.append(f'<text x="{x0}" y="{y0 - 8 - 6 * longest_x}" fill="#555">head {head}</text>')
            if head == 0:
                out += [f'<text x="{x0 - 4}" y="{y0 + i * cell + cell * 3 // 4}" text-anchor="end">{html.escape(s)}</text>'
                        for i, s in enumerate(y_labels)]
                if layers > 1:
                    out.append(f'<text transform="translate(12,{y0 + ty * cell // 2}) rotate(-90)" text-anchor="middle" '
                               f'fill="#555">layer {layer}</text>')
            for i in range(ty):
                for j in range(tx):
                    w = grid[layer, head, i, j]
                    grey = round(255 * min(max(w, 0.0), 1.0))
                    out.append(f'<rect x="{x0 + j * cell}" y="{y0 + i * cell}" width="{cell}" height="{cell}" '
                               f'fill="#{grey:02x}{grey:02x}{grey:02x}"><title>{html.escape(y_labels[i])} → '
                               f'{html.escape(x_labels[j])}: {w:.3f}</title></rect>')
            out.append(f'<rect class="frame" x="{x0 - 0.5}" y="{y0 - 0.5}" width="{tx * cell + 1}" '
                       f'height="{ty * cell + 1}" fill="none" stroke="#888"/>')     # white cells stay visible
    out.append(f'<text x="{left}" y="{height - 4}" fill="#555">weight: black 0, white 1</text>')
    return "\n".join(out + ["</svg>"]) + "\n"


def _png(grid: np.ndarray, x_labels: list[str], y_labels: list[str], path: Path, title: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RenderError("a PNG heatmap needs matplotlib: pip install 'attngraph[plot]', or write .svg, which "
                          "needs nothing") from None
    layers, heads, ty, tx = grid.shape
    fig, axes = plt.subplots(layers, heads, squeeze=False,
                             figsize=(1 + heads * (0.25 * tx + 0.8), 1 + layers * (0.25 * ty + 0.8)))
    for layer, head in product(range(layers), range(heads)):
        ax = axes[layer, head]
        ax.imshow(grid[layer, head], cmap="gray", vmin=0, vmax=1)
        ax.set_xticks(range(tx), x_labels if layer == 0 else [], rotation=90)
        ax.set_yticks(range(ty), y_labels if head == 0 else [])
        ax.xaxis.tick_top()
        if heads > 1 and layer == 0:
            ax.set_title(f"head {head}", fontsize=9)
        if layers > 1 and head == 0:
            ax.set_ylabel(f"layer {layer}")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
