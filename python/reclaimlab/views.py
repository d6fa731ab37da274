"""What ``run`` and ``compare`` print: the headline first (outcome, per-phase time and rate,
faults per access, swap traffic, pool size, OOM kills), a legend of its short labels, banners
for configurations that did not run as asked, the ranking, and the full counter tables behind
``--all``/``--counters``.

Tables are rich ``Table`` objects (rich's markup is off in every cell: names are ``Text``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from reclaimlab import mmtests, summary
from reclaimlab.result import RunResult, counter_sort_key, split_counter
from reclaimlab.scenario import cgroup_files
from reclaimlab.summary import change

if TYPE_CHECKING:
    from reclaimlab.compare import CompareResult
    from reclaimlab.stats import Repeated

__all__ = ["CompareView", "change", "compare_view", "counters_table", "run_view"]

#: Configuration names longer than this become letters in table headers, with a legend.
MAX_HEADER = 16


def _readable(key: str, value: int) -> str:
    """A raw counter with its size where it is one: pages (vmstat nr_*), kB (meminfo), bytes."""
    text = f"{value:,}"
    if not summary.event_counter(key) and value:
        if key.startswith("vmstat.nr_") and key not in ("vmstat.nr_vmscan_write",):
            return f"{text} ({summary.fmt_bytes(value * 4096)})"
        if key.startswith("meminfo."):
            return f"{text} kB ({summary.fmt_bytes(value * 1024)})"
        name = split_counter(key)[1]
        if (
            key == "zswap.pool_total_size"
            or name.endswith("_in_bytes")
            or name in cgroup_files.READ_V2
            or (name.startswith("memory.stat.") and key.startswith("memcg["))
        ) and value >= 1024:
            return f"{text} ({summary.fmt_bytes(value)})"
    return text


def _delta(value: float | None, base: float | None) -> str:
    if value is None or base is None:
        return ""
    if base == 0 and value == 0:
        return ""
    return f" ({change(value, base)})"


def _legend(labels: Sequence[str]) -> Text:
    shown = set(labels)
    parts = []
    for label, meaning in summary.LEGEND.items():
        if label in shown or (label.startswith("<phase>") and any(x.endswith(label.removeprefix("<phase>")) for x in shown)):
            parts.append(f"{label}: {meaning}")
        elif label == "pswpin / pswpout" and ("pswpin" in shown or "pswpout" in shown):
            parts.append(f"{label}: {meaning}")
        elif any(_alternatives(label, i) & shown for i, word in enumerate(label.split(" ")) if "/" in word and word != "/"):
            parts.append(f"{label}: {meaning}")
    return Text("legend: " + "; ".join(parts), style="dim")


def _alternatives(label: str, i: int) -> set[str]:
    """``fault p50/p99/max`` with word ``i`` split: {"fault p50", "fault p99", "fault max"}."""
    words = label.split(" ")
    return {" ".join([*words[:i], alt, *words[i + 1 :]]) for alt in words[i].split("/")}


def _banner_text(name: str | None, r: RunResult) -> list[Text]:
    out = []
    for b in summary.banners(r):
        who = f"{name}: " if name else ""
        out.append(Text(f"!! {who}{b.text}", style="bold red" if b.kind == "oom_killed" else "bold yellow"))
    return out


def _time_bounded_note(names: Sequence[str], results: Sequence[RunResult]) -> Text | None:
    """Phases bounded by time make raw counts incomparable when the configurations did
    different amounts of work; say so, with the spread of accesses."""
    bounded = sorted({p for r in results for p in summary.time_bounded_phases(r)})
    if not bounded:
        return None
    totals = [summary.total_accesses(r) for r in results]
    spread = ""
    if len(results) > 1 and min(totals) > 0 and max(totals) / min(totals) > 1.05:
        lo, hi = min(totals), max(totals)
        spread = (
            f"; the configurations made {summary.fmt_count(lo)} to {summary.fmt_count(hi)} accesses "
            f"({hi / lo:.1f}x): compare per access (majflt/1k, --per access), not raw counts"
        )
    elif len(results) == 1:
        spread = ": raw counts grow with speed; per access: --all shows /1k acc and /s"
    return Text(f"note: {', '.join(bounded)} run for a fixed time{spread}", style="yellow")


# --- run ------------------------------------------------------------------------------------


def run_view(result: RunResult, patterns: Sequence[str], show_all: bool) -> list[RenderableType]:
    """Headline, phases, and (with --all or --counters) the counters with per-access and
    per-second columns for event counters."""
    out: list[RenderableType] = list(_banner_text(None, result))
    rows = summary.headline([result])
    title = Text(f"{result.scenario}: headline ({result.backend})")
    table = Table(title=title, title_justify="left", show_header=False, min_width=len(title) + 2)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for h in rows:
        if h.key.startswith("phase:"):
            continue  # the phases table below has them
        v = h.get(result)
        table.add_row(Text(h.label), Text(summary.fmt_value(v, h.unit), style="bold red" if h.key == "outcome" and v != "ok" else ""))
    out.append(table)
    out.append(phases_table(result))
    out.append(_legend([h.label for h in rows if not h.key.startswith("phase:")]))
    note = _time_bounded_note([result.scenario], [result])
    if note is not None:
        out.append(note)
    lat = latency_table(result) if show_all else None
    if lat is not None:
        out.append(lat)
    if show_all or patterns:
        out.append(counters_table(result, patterns))
    else:
        out.append(Text(f"{len(result.counters)} counters: --all shows them (with /1k acc and /s), --counters GLOB a subset", style="dim"))
    return out


def phases_table(result: RunResult) -> Table:
    table = Table(title=Text(f"{result.scenario}: phases"), title_justify="left")
    outcomes = any(r.get("outcome") not in (None, "completed") for r in result.phase_records)
    writes = any(write_result(r) for r in result.phase_records)
    columns = [("process", "left"), ("phase", "left"), ("elapsed", "right"), ("accesses", "right"), ("accesses/s", "right")]
    extra = ([("outcome", "left")] if outcomes else []) + ([("write", "left")] if writes else [])
    for col, justify in columns + extra:
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in result.phase_records:
        cells = [
            Text(r["process"]),
            Text(r["phase"]),
            Text(summary.fmt_seconds(float(r["elapsed_s"]))),
            Text(summary.fmt_count(int(r["accesses"]))),
            Text(summary.fmt_count(float(r["accesses_per_s"])) + "/s"),
        ]
        if outcomes:
            o = str(r.get("outcome") or "")
            cells.append(Text(o, style="" if o == "completed" else "bold red"))
        if writes:
            cells.append(Text(write_result(r), style="bold red" if r.get("error") else ""))
        table.add_row(*cells)
    return table


def latency_table(result: RunResult) -> Table | None:
    """Every latency kind per process and phase: count, p50, p90, p99, p999, max."""
    scopes = result.latency_tables()
    if not scopes:
        return None
    table = Table(title=Text(f"{result.scenario}: latency (docs/model/latency.md)"), title_justify="left")
    columns = [("scope", "left"), ("kind", "left"), ("count", "right")] + [(s.removesuffix("_ns"), "right") for s in summary.LATENCY_STATS]
    for col, justify in columns:
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for scope, kinds in scopes:
        first = True
        for kind, label in summary.LATENCY_KINDS.items():
            st = kinds.get(kind)
            if st is None:
                continue
            if first:
                table.add_section()
            cells = [Text(scope if first else ""), Text(label), Text(summary.fmt_count(int(st["count"])))]
            cells += [Text(summary.fmt_seconds(int(st[f]) / 1e9)) for f in summary.LATENCY_STATS]
            table.add_row(*cells)
            first = False
    return table


#: The debugfs ``classes`` file's in-use-ratio columns (6.12's zs_stats_size_show).
INUSE_COLUMNS = ("10%", "20%", "30%", "40%", "50%", "60%", "70%", "80%", "90%", "99%", "100%")


def zsmalloc_tables(result: RunResult) -> list[Table]:
    """Each zsmalloc pool's /sys/kernel/debug/zsmalloc/<pool>/classes, the kernel's columns
    (zspages per in-use-ratio group, objects, pages, freeable), classes and pools with no zspage
    left out, and the kernel's Total row."""
    out = []
    for pool in result.zsmalloc:
        rows = [r for r in pool["classes"] if r["obj_allocated"]]
        if not rows:
            continue  # an empty pool (e.g. zswap's, zswap off)
        table = Table(title=Text(f"{result.scenario}: zsmalloc/{pool['pool']}/classes (docs/model/zsmalloc.md)"), title_justify="left")
        names = ["class", "size", *INUSE_COLUMNS, "obj_allocated", "obj_used", "pages_used", "pages_per_zspage", "freeable"]
        for name in names:
            table.add_column(name, justify="right")
        for r in rows:
            cells = [
                r["class"],
                r["size"],
                *r["inuse_ratio"],
                r["obj_allocated"],
                r["obj_used"],
                r["pages_used"],
                r["pages_per_zspage"],
                r["freeable"],
            ]
            table.add_row(*(Text(str(c)) for c in cells))
        total = [sum(r["inuse_ratio"][g] for r in rows) for g in range(len(INUSE_COLUMNS))]
        sums = [sum(r[k] for r in rows) for k in ("obj_allocated", "obj_used", "pages_used")]
        table.add_section()
        table.add_row(
            Text("Total"),
            Text(""),
            *(Text(str(c)) for c in total),
            *(Text(str(c)) for c in sums),
            Text(""),
            Text(str(sum(r["freeable"] for r in rows))),
        )
        out.append(table)
    return out


def write_result(r: dict[str, Any]) -> str:
    """What a reclaim or cgroup_write phase's write did, or a cgroup_read read, in words (""
    for other phases)."""
    parts = []
    if r.get("error"):
        parts.append(f"failed: {r['error']}")
    if r.get("reclaimed_bytes") is not None:
        parts.append(f"reclaimed {summary.fmt_bytes(float(r['reclaimed_bytes']))}")
    if r.get("written") is not None:
        parts.append(f"wrote {r['written']}")
    if r.get("read") is not None:
        parts.append(f"read {r['read']}")
    return ", ".join(parts)


def counters_table(result: RunResult, patterns: Sequence[str] = ()) -> Table:
    table = Table(title=Text(f"{result.scenario}: counters"), title_justify="left")
    for col, justify in (("source", "left"), ("counter", "left"), ("value", "right"), ("/1k acc", "right"), ("/s", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    previous = None
    for key in sorted(result.counters, key=counter_sort_key):
        if not summary.matches(key, patterns):
            continue
        source, name = split_counter(key)
        if previous is not None and source != previous:
            table.add_section()
        per_k = summary.normalise(result, key, "access")
        per_s = summary.normalise(result, key, "second")
        table.add_row(
            Text(source if source != previous else ""),
            Text(name),
            Text(_readable(key, result.counters[key])),
            Text("" if per_k is None else summary.fmt_count(per_k)),
            Text("" if per_s is None else summary.fmt_count(per_s)),
        )
        previous = source
    return table


# --- compare --------------------------------------------------------------------------------


@dataclass
class CompareView:
    """The compare output's parts, in print order."""

    parts: list[RenderableType]

    def __rich__(self) -> Group:
        return Group(*self.parts)


def _headers(names: Sequence[str]) -> tuple[list[str], Text | None]:
    if all(len(n) <= MAX_HEADER for n in names):
        return list(names), None
    letters = [chr(ord("A") + i) if i < 26 else f"c{i + 1}" for i in range(len(names))]
    legend = Text("configurations: " + "; ".join(f"{x} = {n}" for x, n in zip(letters, names, strict=True)), style="dim")
    return letters, legend


def compare_view(
    result: CompareResult,
    baseline: str | None,
    patterns: Sequence[str],
    show_all: bool,
    per: Literal["access", "second"] | None = None,
    repeated: Repeated | None = None,
) -> CompareView:
    """Headline (configurations as columns, change against the baseline), legend, banners, the
    time-bound note, the ranking and the winner; the full counter table with --all/--counters."""
    names = result.names
    results = [r for _, r in result.configs]
    bi = names.index(baseline) if baseline is not None else 0
    headers, names_legend = _headers(names)
    parts: list[RenderableType] = []
    for name, r in zip(names, results, strict=True):
        parts.extend(_banner_text(name, r))
    if repeated is not None:
        parts.extend(Text(f"!! {name}: {text}", style="bold red") for name, text in repeated.banner_counts())
    rows = summary.headline(results)
    seeds = f", {repeated.n} seeds: mean ±95% CI" if repeated is not None else ""
    title = Text(f"{result.scenario}: headline (baseline {names[bi]}{seeds})")
    table = Table(title=title, title_justify="left", min_width=len(title) + 2)
    table.add_column("")
    for i, (head, r) in enumerate(zip(headers, results, strict=True)):
        mark = " !!" if summary.banners(r) else ""
        table.add_column(Text(head + mark, style="bold" if i == bi else ""), justify="right")
    for h in rows:
        cells = [Text(h.label)]
        base = h.get(results[bi])
        for i, r in enumerate(results):
            v = h.get(r)
            if h.unit == "text":
                cells.append(Text(str(v), style="" if v == "ok" else "bold red"))
                continue
            text = summary.fmt_value(v, h.unit)
            if repeated is not None:
                text = repeated.cell(i, h, bi)
            elif i != bi:
                text += _delta(None if v is None else float(v), None if base is None else float(base))
            cells.append(Text(text))
        table.add_row(*cells)
    parts.append(table)
    if names_legend is not None:
        parts.append(names_legend)
    parts.append(_legend([h.label for h in rows]))
    if repeated is not None:
        parts.append(Text(repeated.marks_legend(), style="dim"))
    note = _time_bounded_note(names, results)
    if note is not None:
        parts.append(note)
    if show_all or patterns or per is not None:
        lat = latency_compare_table(result, bi, headers) if show_all else None
        if lat is not None:
            parts.append(lat)
        parts.append(full_table(result, bi, headers, patterns, show_all, per))
    else:
        parts.append(Text("--all: every counter (--per access|second to normalise); --counters GLOB: a subset", style="dim"))
    parts.extend(ranking(result, bi, repeated))
    return CompareView(parts)


def latency_compare_table(result: CompareResult, bi: int, headers: Sequence[str]) -> Table | None:
    """``compare --all``: every latency kind and percentile over the whole run (and per
    process when there are several), configurations as columns, change against the baseline."""
    results = [r for _, r in result.configs]
    scopes: dict[str, None] = {"all": None}
    for r in results:
        procs = [str(p["process"]) for p in r.latency.get("processes", [])]
        if len(procs) > 1:
            scopes.update(dict.fromkeys(procs))
    table = Table(title=Text(f"{result.scenario}: latency (docs/model/latency.md)"), title_justify="left")
    table.add_column("")
    for i, head in enumerate(headers):
        table.add_column(Text(head, style="bold" if i == bi else ""), justify="right")
    rows = 0
    for scope in scopes:
        section = True
        for kind, label in summary.LATENCY_KINDS.items():
            for stat in ("count", *summary.LATENCY_STATS):
                get = summary.latency_stat(kind, stat, scope)
                values = [get(r) for r in results]
                if all(v is None for v in values):
                    continue
                if section:
                    table.add_section()
                    section = False
                cells = [Text(f"{'' if scope == 'all' else scope + ' '}{label} {stat.removesuffix('_ns')}")]
                for i, v in enumerate(values):
                    text = "-" if v is None else summary.fmt_count(v) if stat == "count" else summary.fmt_seconds(v)
                    if i != bi:
                        text += _delta(v, values[bi])
                    cells.append(Text(text))
                table.add_row(*cells)
                rows += 1
    return table if rows else None


def full_table(
    result: CompareResult,
    bi: int,
    headers: Sequence[str],
    patterns: Sequence[str],
    show_all: bool,
    per: Literal["access", "second"] | None,
) -> Table:
    results = [r for _, r in result.configs]
    how = {None: "", "access": ", event counters per 1000 accesses", "second": ", event counters per second"}[per]
    table = Table(title=Text(f"{result.scenario}: counters{how}"), title_justify="left")
    table.add_column("")
    for i, (head, r) in enumerate(zip(headers, results, strict=True)):
        table.add_column(Text(head + (" !!" if summary.banners(r) else ""), style="bold" if i == bi else ""), justify="right")
    previous = None
    for row in result.rows(patterns, show_all, with_phases=False):
        if previous is not None and row.source != previous:
            table.add_section()
        previous = row.source
        values: list[float | None] = []
        for r, v in zip(results, row.values, strict=True):
            if v is None:
                values.append(None)
            elif per is not None and summary.event_counter(row.label):
                values.append(summary.normalise(r, row.label, per))
            else:
                values.append(float(v))
        base = values[bi]
        cells = [Text(row.label)]
        for i, v in enumerate(values):
            if v is None:
                cells.append(Text("-"))
                continue
            text = summary.fmt_count(v) if per is not None and summary.event_counter(row.label) else f"{int(v):,}"
            cells.append(Text(text + ("" if i == bi else _delta(v, base))))
        table.add_row(*cells)
    # mmtests' derived figures (efficiency, velocity, % direct scans, writes by reclaim).
    figures = [mmtests.all_derived(r) for r in results]
    keys = [k for k in (f"mmtests:{n}" for n in mmtests.DERIVED) if any(k in f for f in figures)]
    keys = [k for k in keys if show_all or summary.matches(k, patterns)]
    if keys:
        table.add_section()
    for k in keys:
        values = [f.get(k) for f in figures]
        base = values[bi]
        cells = [Text(k)]
        for i, v in enumerate(values):
            cells.append(Text("-" if v is None else summary.fmt_count(v) + ("" if i == bi else _delta(v, base))))
        table.add_row(*cells)
    return table


def ranking(result: CompareResult, bi: int, repeated: Repeated | None = None) -> list[RenderableType]:
    """The configurations ranked by the primary metric, and the winner in one sentence."""
    names = result.names
    results = [r for _, r in result.configs]
    metric = summary.primary_metric(results)
    if metric is None or len(results) < 2:
        return []
    ranked = summary.rank(names, results, metric)
    if repeated is not None:
        ranked = repeated.rank(metric)
    if not ranked:
        return [Text("no configuration ran as asked: nothing to rank", style="bold red")]
    base_name = names[bi]
    base_v = dict(ranked).get(base_name)
    if base_v is None:
        v = metric.get(results[bi])
        base_v = None if v is None else float(v)
    lines = [Text(f"ranking by {metric.label} ({metric.better} is better):", style="bold")]
    width = max(len(n) for n, _ in ranked)
    for i, (n, v) in enumerate(ranked, start=1):
        vs = "" if n == base_name or not base_v else f"  {change(v, base_v)} vs {base_name}"
        lines.append(Text(f"  {i}. {n:<{width}}  {summary.fmt_value(v, metric.unit):>10}{vs}"))
    unranked = [n for n, r in zip(names, results, strict=True) if summary.banners(r)]
    if unranked:
        lines.append(Text(f"  not ranked (did not run as asked): {', '.join(unranked)}", style="red"))
    best, bv = ranked[0]
    tied = [n for n, v in ranked if v == bv]
    if len(tied) > 1:
        lines.append(Text(f"no single winner: {', '.join(tied)} tie at {summary.fmt_value(bv, metric.unit)} {metric.label}", style="bold"))
        return list(lines)
    sentence = f"winner: {best}, {summary.fmt_value(bv, metric.unit)} {metric.label}"
    if len(ranked) > 1:
        second, sv = ranked[1]
        sentence += f", {_by_how_much(bv, sv, metric)} {second} (runner-up)"
    if base_name != best and base_v and (len(ranked) < 2 or ranked[1][0] != base_name):
        sentence += f", {_by_how_much(bv, base_v, metric)} {base_name} (baseline)"
    if repeated is not None:
        sentence += repeated.winner_note(best, ranked, metric)
    lines.append(Text(sentence, style="bold green"))
    return list(lines)


def _by_how_much(a: float, b: float, metric: summary.Headline) -> str:
    if b == 0:
        return "vs 0 for"
    c = change(a, b)
    return "equal to" if c == "=" else f"{c} vs"
