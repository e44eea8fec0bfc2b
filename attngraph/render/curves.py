"""Line charts as plain SVG, for loss curves: no dependency, one ``<polyline>`` per series.

    line_chart({"train loss": (steps, losses), "val loss": (eval_steps, val_losses)}, "loss.svg",
               title="copy", y_label="cross-entropy", log_y=True)

Each series is (x values, y values) of equal length; points whose x or y is not finite (or, with
``log_y``, whose y is not positive) are left out. Series are drawn in order, in the colours of
``PALETTE``; a series of at most ``MARKERS`` points also gets a dot at each point (evaluations are
sparse, training losses dense). Axes get "nice" ticks (1, 2, 5 × 10ᵏ, or decades on a log scale) and a
legend names the series. Each point's value is in a tooltip on the dots.
"""
from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..errors import RenderError


FONT = 'font-family="Helvetica, Arial, sans-serif"'
PALETTE = ("#9ecae1", "#08519c", "#e6550d", "#31a354", "#756bb1", "#636363")
MARKERS = 60
WIDTH, HEIGHT = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 32, 44


def line_chart(series: Mapping[str, tuple[Sequence[float], Sequence[float]]], path, title: str = "",
               x_label: str = "step", y_label: str = "loss", log_y: bool = False,
               colors: Sequence[str] = PALETTE) -> Path:
    """Draw ``series`` ({name: (x, y)}) to the SVG file ``path``; returns the path."""
    path = Path(path)
    if path.suffix.lower() != ".svg":
        raise RenderError(f"line_chart writes SVG; cannot write {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(line_chart_svg(series, title, x_label, y_label, log_y, colors), encoding="utf-8")
    return path


def line_chart_svg(series: Mapping[str, tuple[Sequence[float], Sequence[float]]], title: str = "",
                   x_label: str = "step", y_label: str = "loss", log_y: bool = False,
                   colors: Sequence[str] = PALETTE) -> str:
    """``line_chart``'s drawing as SVG text."""
    cleaned = {}
    for name, (xs, ys) in series.items():
        xs, ys = np.asarray(xs, np.float64).ravel(), np.asarray(ys, np.float64).ravel()
        if xs.shape != ys.shape:
            raise RenderError(f"series {name!r} has {xs.size} x values and {ys.size} y values")
        keep = np.isfinite(xs) & np.isfinite(ys) & ((ys > 0) if log_y else True)
        cleaned[name] = (xs[keep], ys[keep])
    return _svg(cleaned, title, x_label, y_label, log_y, colors)


def nice_ticks(lo: float, hi: float, count: int = 6) -> list[float]:
    """About ``count`` round values (1, 2 or 5 × 10ᵏ apart) covering [lo, hi]."""
    if not hi > lo:
        lo, hi = lo - 0.5 * (abs(lo) or 1), hi + 0.5 * (abs(hi) or 1)
    raw = (hi - lo) / max(1, count - 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.floor(lo / step) * step
    return [first + i * step for i in range(math.ceil((hi - first) / step - 1e-9) + 1)]


def _format(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e4 or abs(value) < 1e-3:
        return f"{value:.0e}".replace("e+0", "e").replace("e-0", "e-")
    return f"{value:.6g}"


def _svg(series: dict, title: str, x_label: str, y_label: str, log_y: bool, colors: Sequence[str]) -> str:
    points = [(xs, ys) for xs, ys in series.values() if xs.size]
    all_x = np.concatenate([xs for xs, _ in points]) if points else np.array([0.0, 1.0])
    all_y = np.concatenate([ys for _, ys in points]) if points else np.array([1.0, 2.0])
    x_ticks = nice_ticks(float(all_x.min()), float(all_x.max()))
    if log_y:
        lo, hi = math.floor(math.log10(all_y.min())), math.ceil(math.log10(all_y.max()))
        hi = hi if hi > lo else lo + 1
        y_ticks = [10.0 ** k for k in range(lo, hi + 1)]
        transform = math.log10
    else:
        y_ticks = nice_ticks(float(all_y.min()), float(all_y.max()))
        transform = float
    x0, x1 = x_ticks[0], x_ticks[-1]
    y0, y1 = transform(y_ticks[0]), transform(y_ticks[-1])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x):
        return LEFT + (x - x0) / ((x1 - x0) or 1) * plot_w

    def py(y):
        return TOP + plot_h - (transform(y) - y0) / ((y1 - y0) or 1) * plot_h

    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" {FONT} font-size="10">'),
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
    if title:
        out.append(f'<text x="{LEFT}" y="18" font-size="12" font-weight="bold">{html.escape(title)}</text>')
    for t in x_ticks:
        out.append(f'<line x1="{px(t):.1f}" y1="{TOP}" x2="{px(t):.1f}" y2="{TOP + plot_h}" stroke="#eeeeee"/>')
        out.append(f'<text x="{px(t):.1f}" y="{TOP + plot_h + 14}" text-anchor="middle">{_format(t)}</text>')
    for t in y_ticks:
        out.append(f'<line x1="{LEFT}" y1="{py(t):.1f}" x2="{LEFT + plot_w}" y2="{py(t):.1f}" stroke="#eeeeee"/>')
        out.append(f'<text x="{LEFT - 4}" y="{py(t) + 3:.1f}" text-anchor="end">{_format(t)}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#666666"/>')
    out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 8}" text-anchor="middle">{html.escape(x_label)}</text>')
    out.append(f'<text transform="translate(14,{TOP + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">'
               f'{html.escape(y_label + (" (log scale)" if log_y else ""))}</text>')
    if series:
        out.append(f'<rect x="{LEFT + plot_w - 156}" y="{TOP + 2}" width="152" height="{14 * len(series) + 4}" '
                   'fill="white" fill-opacity="0.85" stroke="#cccccc"/>')
    for i, (name, (xs, ys)) in enumerate(series.items()):
        color = colors[i % len(colors)]
        coordinates = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys))
        out.append(f'<polyline class="series" data-name="{html.escape(name)}" fill="none" stroke="{color}" '
                   f'stroke-width="1.5" points="{coordinates}"/>')
        if xs.size <= MARKERS:
            out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{color}"><title>'
                    f'{html.escape(name)} at {_format(x)}: {y:.4g}</title></circle>' for x, y in zip(xs, ys)]
        lx, ly = LEFT + plot_w - 150, TOP + 12 + 14 * i
        out.append(f'<line x1="{lx}" y1="{ly - 3}" x2="{lx + 18}" y2="{ly - 3}" stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{lx + 22}" y="{ly}">{html.escape(name)}</text>')
    return "\n".join(out + ["</svg>"]) + "\n"
