"""The seed report: a scenario's published numbers beside reclaimlab's, claim by claim.

A scenario's ``[report]`` section (docs/scenario.md) lists metrics, the numbers a patch series
published for some of its ``[compare]`` configurations, and the claims it made ("patches 1-5
lower pswpin"). ``report()`` runs the configurations (``compare()``) and builds two tables:

* metrics x configurations, each cell ``published / reclaimlab`` (an en dash = not published);
* claims: the claim, its direction, the published and simulated values, and whether
  reclaimlab reproduces the direction (✓) or not (✗).

``to_markdown()`` renders both, deterministically (same scenario and seed, same text).
``update_doc()`` rewrites the generated blocks of a document such as docs/seeds.md::

    <!-- BEGIN GENERATED: <scenario name> -->
    ...
    <!-- END GENERATED: <scenario name> -->

Command line: ``python -m reclaimlab.report SCENARIO... [--out FILE] [--update-doc DOC]``.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from reclaimlab import mmtests
from reclaimlab.compare import CompareResult, compare, format_number
from reclaimlab.errors import ScenarioError
from reclaimlab.result import RunResult
from reclaimlab.scenario import Metric, ReportClaim, Scenario, load, parse_metric

__all__ = [
    "ABOUT_ZERO_FRACTION",
    "SEVERAL_TIMES",
    "ClaimResult",
    "DocError",
    "ReportResult",
    "claim_holds",
    "format_metric_value",
    "format_published",
    "metric_values",
    "report",
    "update_doc",
]

Number = float | int
#: (base, value): the baseline config's value (or the other metric's) and the claim config's.
Pair = tuple[Number | None, Number | None]

#: ``about_zero``: |value| ≤ this fraction of the reference (the baseline's value, or without a
#: baseline the largest |value| of the metric over the configurations).
ABOUT_ZERO_FRACTION = 0.01
#: ``several_times``: value ≥ this many times the baseline's value.
SEVERAL_TIMES = 3.0

DASH = "\N{EN DASH}"
CHECK = "\N{CHECK MARK}"
CROSS = "\N{BALLOT X}"
ARROW = "\N{RIGHTWARDS ARROW}"
TIMES = "\N{MULTIPLICATION SIGN}"

_DIRECTION_TEXT = {
    "up": "up",
    "down": "down",
    "about_zero": "≈ 0",
    "several_times": f"≥ {SEVERAL_TIMES:g}{TIMES}",
    "greater_than": "> second",
}


# ---------------------------------------------------------------------------------------------
# Metric values
# ---------------------------------------------------------------------------------------------


def _phase_field(r: RunResult, phase: str, name: str) -> Number | None:
    for p in r.phase_records:
        if f"{p['process']}/{p['phase']}" == phase:
            return p[name]  # type: ignore[no-any-return]
    return None


def latency_processes(pattern: str, names: Sequence[str]) -> list[str]:
    """The processes a ``latency:`` metric names: one, or those starting with ``prefix*``."""
    if pattern.endswith("*"):
        return [n for n in names if n.startswith(pattern[:-1])]
    return [n for n in names if n == pattern]


def _latency_value(r: RunResult, pattern: str, kind: str, stat: str) -> Number | None:
    """Over the processes ``pattern`` names, each one's ``sum_ns`` of ``kind`` (0 without a
    sample): their total, mean per process or largest, in seconds; None without latency
    results."""
    per_process = {str(p["process"]): p["kinds"] for p in r.latency.get("processes", [])}
    names = latency_processes(pattern, list(per_process))
    if not names:
        return None
    sums = [int(per_process[n].get(kind, {}).get("sum_ns", 0)) / 1e9 for n in names]
    if stat == "sum_s":
        return sum(sums)
    if stat == "mean_s":
        return sum(sums) / len(sums)
    return max(sums)


def metric_values(metric: str | Metric, results: Sequence[RunResult]) -> list[Number | None]:
    """The metric's value in each result (None where absent). ``accesses_per_s_norm`` is
    accesses_per_s over the first result's (the baseline configuration's)."""
    m = parse_metric(metric) if isinstance(metric, str) else metric
    if m.counter is not None:
        return [r.counters.get(m.counter) for r in results]
    if m.derived is not None:
        return [mmtests.derived(m.derived, r) for r in results]
    if m.latency is not None:
        return [_latency_value(r, *m.latency) for r in results]
    assert m.phase is not None and m.field is not None
    if m.field != "accesses_per_s_norm":
        return [_phase_field(r, m.phase, m.field) for r in results]
    rates = [_phase_field(r, m.phase, "accesses_per_s") for r in results]
    base = rates[0] if rates else None
    if base is None or base == 0:
        return [None for _ in rates]
    return [None if v is None else float(v) / float(base) for v in rates]


def format_metric_value(metric: str | Metric, value: Number | None) -> str:
    """A simulated value as ``reclaimlab compare`` prints it (integers as they are, rates with one
    decimal), except elapsed seconds (3 decimals) and normalised rates (4 decimals), which the
    seeds publish at that precision."""
    if value is None:
        return "n/a"
    m = parse_metric(metric) if isinstance(metric, str) else metric
    if m.field == "elapsed_s" or m.latency is not None:
        return f"{float(value):.3f}"
    if m.field == "accesses_per_s_norm":
        return f"{float(value):.4f}"
    return format_number(value)


def format_published(metric: str | Metric, value: Number | None) -> str:
    """A published number exactly (shortest round-trip form); normalised rates padded with zeros
    to 4 decimals (``1.0000``, ``0.0260``), as the seeds print them. Never rounded."""
    if value is None:
        return DASH
    if not isinstance(value, float):
        return str(value)
    text = repr(value)
    m = parse_metric(metric) if isinstance(metric, str) else metric
    if m.field == "accesses_per_s_norm" and "e" not in text:
        whole, _, frac = text.partition(".")
        text = f"{whole}.{frac.ljust(4, '0')}"
    return text


# ---------------------------------------------------------------------------------------------
# Claims
# ---------------------------------------------------------------------------------------------


def claim_holds(
    direction: str,
    value: Number | None,
    base: Number | None = None,
    other: Number | None = None,
    largest: Number | None = None,
) -> bool | None:
    """Whether ``value`` moves ``direction``; None when a value it needs is missing.

    * ``up`` / ``down``: value > base / value < base;
    * ``several_times``: value ≥ SEVERAL_TIMES * base, base > 0;
    * ``about_zero``: |value| ≤ ABOUT_ZERO_FRACTION * |base|, or * ``largest`` (the metric's
      largest |value| over the configurations) when there is no baseline;
    * ``greater_than``: value > other (two metrics of one configuration).
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if direction == "greater_than":
        return None if other is None else value > other
    if direction == "about_zero":
        ref = base if base is not None else largest
        return None if ref is None else abs(value) <= ABOUT_ZERO_FRACTION * abs(ref)
    if base is None:
        return None
    if direction == "up":
        return value > base
    if direction == "down":
        return value < base
    if direction == "several_times":
        return base > 0 and value >= SEVERAL_TIMES * base
    raise ValueError(f"unknown direction {direction!r}")


@dataclass(frozen=True)
class ClaimResult:
    """A claim with the values it was judged on: ``(base, value)`` (base = the baseline config's
    value, or the other metric's for greater_than), published and simulated."""

    claim: ReportClaim
    published: Pair
    simulated: Pair
    published_holds: bool | None
    reproduced: bool | None


def _judge(claim: ReportClaim, values: Callable[[str], Mapping[str, Number | None]]) -> tuple[Pair, bool | None]:
    """((base, value), holds) of ``claim`` given ``values(metric) -> {config: value}``."""
    of_metric = values(claim.metric)
    value = of_metric.get(claim.config)
    if claim.direction == "greater_than":
        assert claim.other_metric is not None
        other = values(claim.other_metric).get(claim.config)
        return (other, value), claim_holds("greater_than", value, other=other)
    base = of_metric.get(claim.baseline) if claim.baseline is not None else None
    known = [abs(v) for v in of_metric.values() if v is not None]
    largest = max(known) if known else None
    if claim.direction == "about_zero" and claim.baseline is not None and base is None:
        return (base, value), None
    return (base, value), claim_holds(claim.direction, value, base=base, largest=largest)


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------


@dataclass
class ReportResult:
    scenario: str
    title: str
    source: str
    configs: list[str]
    metrics: list[str]
    #: config -> metric -> published number
    published: dict[str, dict[str, Number]]
    #: metric -> config -> simulated value (every metric of the table and of the claims)
    simulated: dict[str, dict[str, Number | None]]
    claims: list[ClaimResult]
    path: str | None = None
    compare: CompareResult | None = field(default=None, repr=False)

    @property
    def reproduced(self) -> int:
        return sum(1 for c in self.claims if c.reproduced)

    def to_markdown(self, heading_level: int | None = 2) -> str:
        """Both tables as Markdown. ``heading_level`` None: no heading line (update_doc)."""
        out: list[str] = []
        if heading_level is not None:
            out += [f"{'#' * heading_level} {self.scenario}" + (f": {self.title}" if self.title else ""), ""]
        elif self.title:
            out += [f"**{_escape(self.title)}**", ""]
        facts = []
        if self.source:
            facts.append(f"published: `{self.source}`")
        facts.append(f"cells: published / reclaimlab ({DASH} = not published, n/a = not produced)")
        out += ["; ".join(facts) + ".", ""]
        out += _table(["metric", *self.configs], [[f"`{m}`", *(self._cell(m, c) for c in self.configs)] for m in self.metrics])
        if self.claims:
            out += [""]
            rows = [self._claim_row(c) for c in self.claims]
            out += _table(["claim", "metric", "direction", "published", "reclaimlab", "reproduced"], rows, left=3)
            out += ["", f"{self.reproduced} of {len(self.claims)} claims reproduced."]
        return "\n".join(out) + "\n"

    def _cell(self, metric: str, config: str) -> str:
        pub = format_published(metric, self.published.get(config, {}).get(metric))
        sim = format_metric_value(metric, self.simulated.get(metric, {}).get(config))
        return f"{pub} / {sim}"

    def _claim_row(self, c: ClaimResult) -> list[str]:
        cl = c.claim
        if cl.direction == "greater_than":
            metric = f"`{cl.metric}` vs `{cl.other_metric}`"
            direction = f"{cl.config}: first "
        else:
            metric = f"`{cl.metric}`"
            direction = f"{cl.baseline} {ARROW} {cl.config}: " if cl.baseline is not None else f"{cl.config}: "
        direction += _DIRECTION_TEXT[cl.direction]
        published = self._pair(cl, c.published, published=True)
        if c.published_holds is False:
            published += " (!)"
        simulated = self._pair(cl, c.simulated, published=False)
        mark = CHECK if c.reproduced else CROSS
        if c.reproduced is None:
            mark += " (no value)"
        return [_escape(cl.text), metric, _escape(direction), published, simulated, mark]

    def _pair(self, cl: ReportClaim, pair: Pair, published: bool) -> str:
        base, value = pair

        def fmt(metric: str, v: Number | None) -> str:
            return format_published(metric, v) if published else format_metric_value(metric, v)

        if cl.direction == "greater_than":
            assert cl.other_metric is not None
            if value is None and base is None and published:
                return DASH
            return f"{fmt(cl.metric, value)} vs {fmt(cl.other_metric, base)}"
        if cl.baseline is None:
            return fmt(cl.metric, value) if (value is not None or not published) else DASH
        if published and value is None and base is None:
            return DASH
        text = f"{fmt(cl.metric, base)} {ARROW} {fmt(cl.metric, value)}"
        if base is not None and value is not None:
            text += _change(cl.direction, base, value)
        return text


def _change(direction: str, base: Number, value: Number) -> str:
    if direction == "several_times" and base > 0:
        return f" ({TIMES}{value / base:.1f})"
    if direction in ("up", "down") and base != 0:
        return f" ({(value - base) / abs(base) * 100:+.1f}%)"
    return ""


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[str]], left: int = 1) -> list[str]:
    """A Markdown table, columns padded to a common width: the first ``left`` columns
    left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        parts = [c.ljust(widths[i]) if i < left else c.rjust(widths[i]) for i, c in enumerate(cells)]
        return "| " + " | ".join(parts) + " |"

    rule = "|" + "|".join(("-" * (w + 2)) if i < left else ("-" * (w + 1) + ":") for i, w in enumerate(widths)) + "|"
    return [line(header), rule, *(line(r) for r in rows)]


def build(scenario: Scenario, result: CompareResult) -> ReportResult:
    """The report of ``scenario`` from its compare result (no simulation)."""
    r = scenario.report
    if r is None:
        raise ScenarioError.single(scenario.file, "no [report] section: add one (docs/scenario.md) to report on this scenario")
    configs = result.names
    runs = [res for _, res in result.configs]
    wanted = list(dict.fromkeys([*r.metrics, *(c.metric for c in r.claims), *(c.other_metric for c in r.claims if c.other_metric)]))
    simulated = {m: dict(zip(configs, metric_values(m, runs), strict=True)) for m in wanted}

    def published_of(metric: str) -> dict[str, Number | None]:
        return {c: r.published.get(c, {}).get(metric) for c in configs}

    claims = []
    for cl in r.claims:
        pub_pair, pub_holds = _judge(cl, published_of)
        sim_pair, sim_holds = _judge(cl, lambda m: simulated[m])
        claims.append(ClaimResult(cl, pub_pair, sim_pair, pub_holds, sim_holds))
    return ReportResult(
        scenario=scenario.name or "scenario",
        title=r.title,
        source=r.source,
        configs=configs,
        metrics=list(r.metrics),
        published={c: dict(v) for c, v in r.published.items()},
        simulated=simulated,
        claims=claims,
        path=scenario.path,
        compare=result,
    )


def report(
    scenario: Scenario | str | os.PathLike[str],
    progress: bool = False,
    run: Callable[..., RunResult] | None = None,
) -> ReportResult:
    """Run the scenario's [compare] configurations and set its [report]'s published numbers and
    claims beside the results. Raises ScenarioError for a bad scenario or one without [report]."""
    sc = scenario if isinstance(scenario, Scenario) else load(scenario)
    if sc.report is None:
        raise ScenarioError.single(sc.file, "no [report] section: add one (docs/scenario.md) to report on this scenario")
    return build(sc, compare(sc, progress=progress, run=run))


# ---------------------------------------------------------------------------------------------
# Documents with generated blocks
# ---------------------------------------------------------------------------------------------


class DocError(ValueError):
    """A document without (or with duplicated) generated-block markers."""


BEGIN = "<!-- BEGIN GENERATED: {name} -->"
END = "<!-- END GENERATED: {name} -->"


def _block(name: str) -> re.Pattern[str]:
    return re.compile(
        "^" + re.escape(BEGIN.format(name=name)) + r"[ \t]*\n(.*?)^" + re.escape(END.format(name=name)) + r"[ \t]*$",
        re.S | re.M,
    )


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the generated block ``name`` holding ``body``. DocError if the markers are
    missing or appear more than once."""
    pattern = _block(name)
    found = pattern.findall(text)
    if len(found) != 1:
        what = "no" if not found else f"{len(found)}"
        raise DocError(f"{what} block {BEGIN.format(name=name)} ... {END.format(name=name)} in the document; expected exactly one")
    body = body if body.endswith("\n") else body + "\n"
    begin, end = BEGIN.format(name=name), END.format(name=name)
    return pattern.sub(lambda _: f"{begin}\n{body}{end}", text, count=1)


def update_doc(
    doc_path: str | os.PathLike[str],
    scenario_paths: Sequence[str | os.PathLike[str]],
    progress: bool = False,
    run: Callable[..., RunResult] | None = None,
) -> list[str]:
    """Rewrite the generated block of each scenario (by its name, the file stem unless it sets
    ``name``) in ``doc_path`` with its report. Other text is kept byte for byte; the file is
    written only once every report succeeded. Returns the names updated."""
    path = Path(doc_path)
    text = path.read_text(encoding="utf-8")
    names = []
    for sp in scenario_paths:
        result = report(sp, progress=progress, run=run)
        try:
            text = replace_block(text, result.scenario, result.to_markdown(heading_level=None))
        except DocError as e:
            raise DocError(f"{path}: {e}") from None
        names.append(result.scenario)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return names
