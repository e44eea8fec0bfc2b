"""The run dashboard: a run folder's records drawn as curves, its figures as a table, its pictures inline."""
import json
import re

import pytest

from attngraph.cli import main
from attngraph.render import RenderError
from attngraph.render.dashboard import dashboard_html

SVG = ('<?xml version="1.0"?>\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "x.dtd">\n'
       '<svg id="{0}"><text>{0}</text></svg>\n')


@pytest.fixture
def run(tmp_path):
    """A run folder as a demo leaves it: 4 training steps, 2 evaluations, a line cut short, figures, pictures."""
    records = [{"kind": "train", "step": s, "loss": 2.0 / s, "lr": 1e-3, "grad_norm": 1.0, "seconds": 0.1}
               for s in range(1, 5)]
    records[2:2] = [{"kind": "eval", "step": 2, "val_loss": 1.5, "accuracy": 0.25}]
    records.append({"kind": "eval", "step": 4, "val_loss": 0.9, "accuracy": 0.5})
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"kind": "tr',
                                          encoding="utf-8")
    (tmp_path / "metrics.json").write_text(json.dumps({"demo": "copy", "config": {"model": {"heads": 4}},
                                                       "files": ["a", "b"]}), encoding="utf-8")
    for name in ("attention-step100", "attention-step20", "graph", "loss"):
        (tmp_path / f"{name}.svg").write_text(SVG.format(name), encoding="utf-8")
    return tmp_path


def test_the_page_draws_the_curves_lists_the_figures_and_holds_the_pictures(run):
    page = dashboard_html(run, title="copy")
    charts = re.findall(r"<figure>(.*?)</figure>", page, re.S)
    titles = [re.search(r'font-weight="bold"[^>]*>([^<]*)<', chart).group(1) for chart in charts]
    assert titles == ["copy: loss", "lr", "grad_norm", "eval accuracy"]
    assert "eval val_loss" in charts[0] and "seconds" not in page.split("</header>")[1].split("Figures")[0]
    rows = re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", page)
    assert rows == [("demo", "copy"), ("config.model.heads", "4"), ("files", '[&quot;a&quot;, &quot;b&quot;]')]
    assert re.findall(r'<svg id="([^"]+)"', page) == ["graph", "attention-step20", "attention-step100"]
    assert "<!DOCTYPE svg" not in page and "<?xml" not in page
    assert "4 steps · last training loss 0.5<" in page


def test_a_folder_without_a_run_is_refused(tmp_path):
    with pytest.raises(RenderError, match="no run in"):
        dashboard_html(tmp_path)
    with pytest.raises(RenderError, match="is not a folder"):
        dashboard_html(tmp_path / "missing")


def test_view_writes_the_dashboard_of_a_run_folder(run, capsys):
    assert main(["view", str(run)]) == 0
    assert (run / "dashboard.html").is_file() and str(run / "dashboard.html") in capsys.readouterr().out
    assert main(["view", str(run), "--out", str(run / "dash.svg")]) == 2
    assert ".html" in capsys.readouterr().err
