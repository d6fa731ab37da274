"""Plots of results: one self-contained HTML page (plotly, its JavaScript inlined, so the
file opens anywhere without a network).

The page has, when the results have them:

* time series per configuration (``--interval`` in the simulator; the lab always samples):
  zswap pool size, pages stored in zswap, major faults per second, pages reclaimed per second,
  and memory pressure (PSI some/full, system and per cgroup: the share of time stalled between
  samples) where a result carries it;
* bars per configuration: the headline's figures (accesses/s of the deciding phase, major
  faults per 1000 accesses, pages swapped out, pool size);
* the seed table (``--seeds``: mean and 95% interval per configuration) and validation tables
  (``validate --json``: kernel median [min-max] against the simulator).

Inputs are the JSON files ``run``, ``compare`` and ``validate`` write (``load``).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reclaimlab import summary
from reclaimlab.result import RunResult

__all__ = ["SERIES", "Page", "load", "page_html"]

#: The time series the page draws: (title, counter key, how, y axis title). "level" plots the
#: value; "rate" its change per second between samples (event counters).
SERIES: tuple[tuple[str, str, str, str], ...] = (
    ("zswap pool size", "zswap.pool_total_size", "level", "bytes"),
    ("pages stored in zswap", "zswap.stored_pages", "level", "pages"),
    ("major faults per second", "vmstat.pgmajfault", "rate", "faults/s"),
    ("pages reclaimed per second", "vmstat.pgsteal_anon", "rate", "pages/s"),
    ("zswap writeback per second", "vmstat.zswpwb", "rate", "pages/s"),
)
#: Memory PSI totals (``pressure.memory.some.total``, ``memcg[/a].memory.pressure.full.total``,
#: µs since the start), drawn as the share of time stalled between samples where present.
PSI_TOTAL = re.compile(r"^(?:pressure\.memory|memcg\[[^\]]*\]\.memory\.pressure)\.(?:some|full)\.total$")


@dataclass
class Page:
    """What one HTML page shows: named runs (a configuration's result, per seed), validation
    results as raw dicts."""

    title: str
    runs: list[tuple[str, RunResult]] = field(default_factory=list)
    seeds: dict[str, Any] | None = None  # a compare-seeds document
    validations: list[dict[str, Any]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


def load(paths: Sequence[Path]) -> Page:
    """Read run, compare, compare --seeds and validate JSON results into one page. Raises
    ValueError naming the file when it is none of those."""
    page = Page(title=", ".join(p.name for p in paths))
    for path in paths:
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: cannot read a JSON result: {e}") from None
        page.sources.append(str(path))
        if d.get("kind") == "compare-seeds":
            page.seeds = d
            first = d["runs"][0]
            page.runs += [(c["name"], RunResult.from_dict(c["result"])) for c in first["configs"]]
        elif d.get("kind") == "validate-compare" or ("rows" in d and "kernel_runs" in d):
            page.validations.append(d)
        elif "configs" in d and d.get("kind") is None:
            page.runs += [(c["name"], RunResult.from_dict(c["result"])) for c in d["configs"]]
        elif "counters" in d and "phases" in d:
            r = RunResult.from_dict(d)
            page.runs.append((r.scenario if len(paths) == 1 else path.stem, r))
        else:
            raise ValueError(f"{path}: expected the JSON of `reclaimlab run`, `compare` or `validate`; got keys {sorted(d)[:6]}")
    return page


def _rate(t: list[float], v: list[int | None]) -> tuple[list[float], list[float | None]]:
    xs, ys = [], []
    for i in range(1, len(t)):
        a, b = v[i - 1], v[i]
        dt = t[i] - t[i - 1]
        xs.append(t[i])
        ys.append(None if a is None or b is None or dt <= 0 else (b - a) / dt)
    return xs, ys


def _series_figures(page: Page) -> list[Any]:
    import plotly.graph_objects as go

    figs = []
    sampled = [(n, r) for n, r in page.runs if r.series.get("t")]
    if not sampled:
        return []
    keys = [(title, key, how, unit) for title, key, how, unit in SERIES if any(key in r.series.get("values", {}) for _, r in sampled)]
    psi = sorted({k for _, r in sampled for k in r.series.get("values", {}) if PSI_TOTAL.match(k)})
    keys += [(f"memory pressure: {k.removesuffix('.total')} (share of time stalled)", k, "psi", "%") for k in psi]
    for title, key, how, unit in keys:
        fig = go.Figure()
        for name, r in sampled:
            t = [float(x) for x in r.series["t"]]
            col = r.series["values"].get(key)
            if col is None:
                continue
            xs, ys = (t, col) if how == "level" else _rate(t, col)
            if how == "psi":
                # µs stalled per second of time → percent
                ys = [None if y is None else y / 1e4 for y in ys]
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=name))
        fig.update_layout(title=title, xaxis_title="simulated time (s)" if sampled[0][1].backend == "sim" else "time (s)", yaxis_title=unit)
        figs.append(fig)
    return figs


def _bar_figure(page: Page) -> Any | None:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    if not page.runs:
        return None
    names = [n for n, _ in page.runs]
    results = [r for _, r in page.runs]
    rows = [h for h in summary.headline(results) if h.unit != "text" and not h.key.endswith(".elapsed_s")]
    primary = summary.primary_metric(results)
    wanted = [h for h in rows if h.key in ("majflt_per_1k", "vmstat.pswpout", "zswap.pool_total_size", "oom_kills")]
    if primary is not None:
        wanted.insert(0, primary)
    fig = make_subplots(rows=1, cols=len(wanted), subplot_titles=[h.label for h in wanted])
    for i, h in enumerate(wanted, start=1):
        values = [h.get(r) for r in results]
        colors = ["#d62728" if summary.banners(r) else "#1f77b4" for r in results]
        fig.add_trace(go.Bar(x=names, y=values, marker_color=colors, showlegend=False, name=h.label), row=1, col=i)
    fig.update_layout(title="per configuration (red: killed or cut short)")
    return fig


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _seed_table(seeds: dict[str, Any]) -> str:
    labels = {h.key: (h.label, h.unit) for h in summary.headline([RunResult.from_dict(c["result"]) for c in seeds["runs"][0]["configs"]])}
    rows = []
    for name, metrics in seeds["summary"].items():
        for key, m in metrics.items():
            label, unit = labels.get(key, (key, "count"))
            rows.append([name, label, summary.fmt_value(m["mean"], unit), "±" + summary.fmt_value(m["ci95"], unit), str(m["n"])])
    return f"<h2>Seeds ({', '.join(map(str, seeds['seeds']))})</h2>" + _table(["configuration", "metric", "mean", "95% CI", "n"], rows)


def _validation_table(d: dict[str, Any]) -> str:
    from reclaimlab.validate import format_rel_error, format_value

    parts = []
    docs = (
        [(c["name"], c["validate"]) for c in d.get("configs", [])] if d.get("kind") == "validate-compare" else [(d.get("scenario", ""), d)]
    )
    for name, doc in docs:
        rows = []
        for row in doc.get("rows", []):
            k = row.get("kernel")
            kernel = "-" if not k else f"{format_value(k['median'])} [{format_value(k['min'])}-{format_value(k['max'])}]"
            inside = row.get("inside")
            rows.append(
                [
                    str(row.get("metric")),
                    kernel,
                    format_value(row.get("sim")),
                    format_rel_error(row.get("rel_error")),
                    "" if inside is None else ("yes" if inside else "no"),
                ]
            )
        parts.append(
            f"<h2>Validation: {html.escape(str(name))}</h2>"
            + _table(["metric", "kernel median [min-max]", "sim", "rel. error", "in range"], rows)
        )
    return "".join(parts)


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.banner { color: #b00; font-weight: bold; }
.plot { margin-bottom: 1em; }
"""


def page_html(page: Page) -> str:
    """The page: banners, bars, time series, seed and validation tables; plotly.js inlined once."""
    figs = [f for f in [_bar_figure(page), *_series_figures(page)] if f is not None]
    out = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>reclaimlab: {html.escape(page.title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>reclaimlab: {html.escape(page.title)}</h1>",
    ]
    for name, r in page.runs:
        for b in summary.banners(r):
            out.append(f"<p class='banner'>!! {html.escape(name)}: {html.escape(b.text)}</p>")
    if page.runs and not any(r.series.get("t") for _, r in page.runs):
        out.append("<p>No time series in these results: run with <code>--interval</code> (e.g. 500ms) to plot them.</p>")
    for i, fig in enumerate(figs):
        div = fig.to_html(full_html=False, include_plotlyjs=(i == 0), default_height=420)
        out.append(f"<div class='plot'>{div}</div>")
    if page.seeds is not None:
        out.append(_seed_table(page.seeds))
    for d in page.validations:
        out.append(_validation_table(d))
    out.append(f"<p><small>from {html.escape(', '.join(page.sources))}</small></p></body></html>\n")
    return "\n".join(out)
