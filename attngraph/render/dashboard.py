"""A training run as one offline HTML page: ``dashboard_html("runs/copy", "runs/copy/dashboard.html")``.

A run folder (a demo's ``runs/NAME``, or the folder of a ``Trainer``'s ``metrics_path``) holds the trainer's
records (``train.jsonl`` or ``metrics.jsonl``: one JSON object per line, ``kind`` "train" or "eval"), the
run's figures (``metrics.json``) and pictures (``graph.svg``, attention maps such as ``attention-1.svg`` or
those saved at checkpoints, ``attention-step500.svg``). The page shows, with nothing fetched:

- the curves: the training loss with every evaluated loss, then one chart per other series (learning rate,
  gradient norm, throughput, each evaluation metric), drawn by ``curves.line_chart_svg``;
- the figures of ``metrics.json``, nested keys joined by dots (``config.model.heads``);
- every SVG picture of the folder but the demo's own loss curve, in the order of the numbers in their names
  (``attention-step100`` before ``attention-step1000``), the graph first.
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

from ..errors import RenderError
from .curves import line_chart_svg
from .html import ASSETS, DOCUMENT

RECORDS = ("train.jsonl", "metrics.jsonl")
SKIPPED = {"step", "kind", "seconds"}           # a record's fields that are no curve
BODY = """<main class="dashboard">
<section aria-label="curves"><h2>Curves</h2><div class="charts">{charts}</div></section>
<section aria-label="figures"><h2>Figures</h2>{figures}</section>
{pictures}
</main>"""


def dashboard_html(folder, path=None, title: str | None = None) -> str:
    """The page of the run in ``folder`` (see the module's docstring), also written to ``path`` when given."""
    folder = Path(folder)
    if not folder.is_dir():
        raise RenderError(f"{folder} is not a folder: give a run's output folder (runs/copy)")
    records = _records(folder)
    figures = json.loads((folder / "metrics.json").read_text(encoding="utf-8")) \
        if (folder / "metrics.json").is_file() else {}
    pictures = sorted((p for p in folder.glob("*.svg") if p.name != "loss.svg"),
                      key=lambda p: (p.stem != "graph", _natural(p.stem)))
    if not records and not figures and not pictures:
        raise RenderError(f"no run in {folder}: expected {' or '.join(RECORDS)}, metrics.json or .svg pictures")
    title = title or folder.name
    losses = [r["loss"] for r in records if r.get("kind", "train") == "train" and "loss" in r]
    stats = f"{len(losses):,} steps" + (f" · last training loss {losses[-1]:.4g}" if losses else "")
    body = BODY.format(charts="".join(f"<figure>{svg}</figure>" for svg in _charts(records, title)) or
                       "<p>No training records (train.jsonl).</p>",
                       figures=_table(_flatten(figures)) if figures else "<p>No metrics.json.</p>",
                       pictures="\n".join(_picture(p) for p in pictures))
    page = DOCUMENT.format(title=html.escape(title), stats=html.escape(stats), body=body,
                           css=(ASSETS / "dashboard.css").read_text(encoding="utf-8"))
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(page, encoding="utf-8")
    return page


def _records(folder: Path) -> list[dict]:
    """The trainer's records, from the first records file found; a line cut short by a crash is skipped."""
    found = next((folder / name for name in RECORDS if (folder / name).is_file()), None)
    if found is None:
        return []
    records = []
    for line in found.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return [r for r in records if isinstance(r, dict) and isinstance(r.get("step"), (int, float))]


def _charts(records: list[dict], title: str) -> list[str]:
    """SVG charts: the losses together (log scale), then one per other numeric field of train and eval records."""
    series: dict[str, tuple[list, list]] = {}
    for record in records:
        prefix = "" if record.get("kind", "train") == "train" else f"{record['kind']} "
        for key, value in record.items():
            if key not in SKIPPED and isinstance(value, (int, float)) and not isinstance(value, bool):
                xs, ys = series.setdefault(prefix + key, ([], []))
                xs.append(record["step"])
                ys.append(value)
    losses = {name: xy for name, xy in series.items() if name.split()[-1].endswith("loss")}
    charts = [line_chart_svg(losses, f"{title}: loss", y_label="loss", log_y=True)] if losses else []
    return charts + [line_chart_svg({name: xy}, name, y_label=name.split()[-1]) for name, xy in series.items()
                     if name not in losses]


def _flatten(value, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted key, value) for every scalar in nested dicts; lists as JSON."""
    if isinstance(value, dict):
        return [row for key, inner in value.items() for row in _flatten(inner, f"{prefix}{key}.")]
    return [(prefix.rstrip("."), value if isinstance(value, str) else json.dumps(value))]


def _table(rows: list[tuple[str, str]]) -> str:
    cells = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table>{cells}</table>"


def _picture(path: Path) -> str:
    """A section holding the SVG of ``path`` inline (its XML prolog and DOCTYPE left out)."""
    text = path.read_text(encoding="utf-8")
    start = text.find("<svg")
    if start < 0:
        return ""
    return (f'<section aria-label="{html.escape(path.stem)}"><h2>{html.escape(path.name)}</h2>'
            f'<div class="picture">{text[start:]}</div></section>')


def _natural(name: str) -> list:
    """A sort key ordering the numbers in a name by value: step100 < step1000."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
