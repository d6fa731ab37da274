"""Validation: the simulator against the real kernel, on one scenario.

The kernel runs N times (default 3; each run restores the host before the next), the simulator
once (it is deterministic). For every counter and, per phase, accesses/s and elapsed seconds:

* kernel median [min, max] over the runs that report it;
* the simulator's value;
* relative error ``(sim - median) / |median|``; 0 when both are 0; infinite when the kernel's
  median is 0 and the simulator's is not (shown as "n/a (kernel 0)", ``null`` in JSON);
* whether the simulator's value is inside [min, max].

The statistics are plain functions over RunResults (``summarize``, ``relative_error``, ``rows``)
so they can be tested without a kernel.
"""

from __future__ import annotations

import fnmatch
import json
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reclaimlab.result import RunResult, counter_sort_key, split_counter
from reclaimlab.scenario import Scenario

__all__ = [
    "Row",
    "Stat",
    "ValidateResult",
    "format_rel_error",
    "format_value",
    "relative_error",
    "rows",
    "select",
    "summarize",
    "validate",
]

Number = int | float


@dataclass(frozen=True)
class Stat:
    """The kernel runs' values of one metric."""

    median: float
    min: float
    max: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.min, "max": self.max, "n": self.n}


def summarize(values: Sequence[Number]) -> Stat | None:
    """Median, min, max of ``values`` (None if there are none)."""
    if not values:
        return None
    return Stat(float(statistics.median(values)), float(min(values)), float(max(values)), len(values))


def relative_error(sim: Number, median: Number) -> float:
    """``(sim - median) / |median|``; 0.0 if both are 0; ``inf`` if only the median is 0."""
    if median == 0:
        return 0.0 if sim == 0 else math.inf
    return (sim - median) / abs(median)


def format_rel_error(err: float | None) -> str:
    if err is None:
        return "-"
    if math.isinf(err):
        return "n/a (kernel 0)"
    return f"{err * 100:+.1f}%"


def format_value(v: Number | None) -> str:
    if v is None:
        return "-"
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"


@dataclass(frozen=True)
class Row:
    metric: str  # a counter key, or "process/phase accesses/s" | "process/phase elapsed_s"
    source: str  # the counter's source (vmstat, memcg[/a], ...) or "phase"
    kernel: Stat | None
    sim: Number | None
    rel_error: float | None  # None when either side is missing
    inside: bool | None

    def to_dict(self) -> dict[str, Any]:
        err = self.rel_error
        return {
            "metric": self.metric,
            "source": self.source,
            "kernel": None if self.kernel is None else self.kernel.to_dict(),
            "sim": self.sim,
            "rel_error": None if err is None or math.isinf(err) else err,
            "rel_error_text": format_rel_error(err),
            "inside": self.inside,
        }


def _row(metric: str, source: str, kernel_values: Sequence[Number], sim: Number | None) -> Row:
    stat = summarize(kernel_values)
    if stat is None or sim is None:
        return Row(metric, source, stat, sim, None, None)
    return Row(metric, source, stat, sim, relative_error(sim, stat.median), stat.min <= sim <= stat.max)


def _phase_value(r: RunResult, proc: str, phase: str, column: str) -> Number | None:
    for p in r.phase_records:
        if p["process"] == proc and p["phase"] == phase:
            return p[column]  # type: ignore[no-any-return]
    return None


def rows(kernel_runs: Sequence[RunResult], sim: RunResult) -> list[Row]:
    """One row per counter (either side reports it; sorted like ``reclaimlab run``), then per
    phase (in the simulator's order) accesses/s and elapsed_s."""
    keys: set[str] = set(sim.counters)
    for r in kernel_runs:
        keys.update(r.counters)
    out = []
    for key in sorted(keys, key=counter_sort_key):
        values = [r.counters[key] for r in kernel_runs if key in r.counters]
        out.append(_row(key, split_counter(key)[0], values, sim.counters.get(key)))
    phases: dict[tuple[str, str], None] = {}
    for r in (sim, *kernel_runs):
        for p in r.phase_records:
            phases.setdefault((p["process"], p["phase"]), None)
    for proc, phase in phases:
        for column, label in (("accesses_per_s", "accesses/s"), ("elapsed_s", "elapsed_s")):
            measured: list[Number] = [v for v in (_phase_value(r, proc, phase, column) for r in kernel_runs) if v is not None]
            out.append(_row(f"{proc}/{phase} {label}", "phase", measured, _phase_value(sim, proc, phase, column)))
    return out


def select(all_rows: Sequence[Row], patterns: Sequence[str] = (), show_all: bool = False) -> list[Row]:
    """Rows whose counter matches one of ``patterns`` (fnmatch; phase rows always pass), and
    unless ``show_all``, not zero (or missing) on both sides."""
    out = []
    for row in all_rows:
        if patterns and row.source != "phase" and not any(fnmatch.fnmatchcase(row.metric, p) for p in patterns):
            continue
        if not show_all and row.source != "phase":
            kernel_zero = row.kernel is None or (row.kernel.min == 0 and row.kernel.max == 0)
            if kernel_zero and not row.sim:
                continue
        out.append(row)
    return out


@dataclass
class ValidateResult:
    scenario: str
    kernel_runs: list[RunResult]
    sim: RunResult
    rows: list[Row] = field(default_factory=list)

    @property
    def reps(self) -> int:
        return len(self.kernel_runs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "scenario": self.scenario,
            "reps": self.reps,
            "rows": [r.to_dict() for r in self.rows],
            "kernel_runs": [r.to_dict() for r in self.kernel_runs],
            "sim": self.sim.to_dict(),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=indent, allow_nan=False) + "\n"


def validate(
    scenario: Scenario,
    reps: int = 3,
    run_kernel: Callable[..., RunResult] | None = None,
    run_sim: Callable[..., RunResult] | None = None,
    on_run: Callable[[int, int], None] | None = None,
    **kernel_options: Any,
) -> ValidateResult:
    """Run ``scenario`` ``reps`` times on the kernel and once in the simulator; compare."""
    if reps < 1:
        raise ValueError(f"reps: expected at least 1; got {reps}")
    if run_kernel is None:
        from reclaimlab.backends import kernel

        run_kernel = kernel.run
    if run_sim is None:
        from reclaimlab.backends import sim

        run_sim = sim.run
    sim_result = run_sim(scenario)
    kernel_runs = []
    for i in range(reps):
        if on_run is not None:
            on_run(i + 1, reps)
        kernel_runs.append(run_kernel(scenario, **kernel_options))
    return ValidateResult(scenario.name or "scenario", kernel_runs, sim_result, rows(kernel_runs, sim_result))
