"""reclaimlab plot / report --html: the page, and the page drawn by a real browser (headless
Chromium from Debian's `chromium` package; `make test` installs it where apt-get can)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from reclaimlab import plot
from reclaimlab.cli import app
from test_series import SMALL

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _compare_json(write: Any, tmp_path: Path, *extra: str) -> Path:
    out = tmp_path / "c.json"
    r = runner.invoke(app, ["compare", str(write(SMALL)), "--interval", "20ms", "--json", str(out), "--no-progress", *extra])
    assert r.exit_code == 0, r.output
    return out


@pytest.mark.native
def test_plot_page_has_the_series_bars_and_tables(real_core: Any, write: Any, tmp_path: Path) -> None:
    out = tmp_path / "p.html"
    r = runner.invoke(app, ["plot", str(_compare_json(write, tmp_path)), str(ROOT / "results/validation/swap-only.json"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text(encoding="utf-8")
    for title in (
        "zswap pool size",
        "pages stored in zswap",
        "major faults per second",
        "pages reclaimed per second",
        "memory pressure: pressure.memory.some",
        "memory pressure: pressure.memory.full",
        "per configuration",
    ):
        assert title in text, title
    assert "Validation: swap-only" in text
    assert "<script src=" not in text  # self-contained: plotly.js inline, nothing fetched
    assert text.count("Plotly.newPlot") == 8


def test_plot_rejects_other_json(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"hello": 1}))
    r = runner.invoke(app, ["plot", str(bad)])
    assert r.exit_code == 2
    assert f"{bad}: expected the JSON of `reclaimlab run`, `compare` or `validate`" in r.stderr


def test_rate_between_samples() -> None:
    assert plot._rate([0.0, 0.5, 1.0], [0, 10, None]) == ([0.5, 1.0], [20.0, None])


@pytest.mark.native
def test_the_browser_draws_every_plot(real_core: Any, write: Any, tmp_path: Path) -> None:
    chromium = _chromium()
    if chromium is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium; `make test` does it where apt-get is available)")
    page = tmp_path / "report.html"
    scenario = write(SMALL)
    r = runner.invoke(app, ["report", str(scenario), "--html", str(page), "--interval", "20ms", "--seeds", "2"])
    assert r.exit_code == 0, r.output
    proc = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=20000", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    figures = page.read_text(encoding="utf-8").count("Plotly.newPlot")
    assert figures == 8  # bars + pool, stored pages, faults/s, reclaim/s, writeback/s, PSI some and full
    # plotly replaced each placeholder div by an SVG drawing (two SVG layers per plot)
    assert dom.count('class="main-svg"') >= 2 * figures
    # every time series has a drawn line per configuration (plotly joins collinear points, so
    # a flat line has one segment); each plot has at least one line that moves
    lines = re.findall(r'<path class="js-line"[^>]*d="(M[^"]*)"', dom)
    assert len([d for d in lines if "L" in d]) >= 2 * (figures - 1), lines
    assert len([d for d in lines if d.count("L") >= 3]) >= figures - 1, lines
    # the bars: one per configuration in each of the bar panels
    assert len(re.findall(r'<g class="point"><path d="M[^"]+"', dom)) >= 2 * 3
    assert "Seeds (7, 8)" in dom
