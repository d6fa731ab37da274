"""Validation: the simulator against the real kernel, on one scenario.

The kernel runs N times (default 3; each run restores the host before the next), the simulator
once (it is deterministic). For every counter and, per phase, accesses/s, elapsed seconds and
the process's minor and major faults (where the kernel runs recorded them):

* kernel median [min, max] over the runs that report it;
* the simulator's value;
* relative error ``(sim - median) / |median|``; 0 when both are 0; infinite when the kernel's
  median is 0 and the simulator's is not (shown as "n/a (kernel 0)", ``null`` in JSON);
* whether the simulator's value is inside [min, max].

The statistics are plain functions over RunResults (``summarize``, ``relative_error``, ``rows``)
so they can be tested without a kernel.

``revalidate`` reuses the kernel runs of a previous result (its JSON) and runs only the
simulator again, e.g. after a simulator change: no root, no kernel runs.

``update_doc`` rewrites the generated blocks of docs/validation.md from validate JSON files:
one table per scenario and a summary of the key counters' errors across scenarios::

    <!-- BEGIN GENERATED: validation-summary -->   <!-- BEGIN GENERATED: <scenario> -->
    ...                                             ...
    <!-- END GENERATED: validation-summary -->     <!-- END GENERATED: <scenario> -->

Command line: ``python -m reclaimlab.validate [--update-doc DOC] RESULT.json...``.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reclaimlab import native, trace
from reclaimlab.result import FAULT_COLUMNS, RunResult, counter_sort_key, split_counter
from reclaimlab.scenario import Scenario
from reclaimlab.scenario.models import phase_kinds_without_accesses

__all__ = [
    "KERNELS_BLOCK",
    "KEY_COUNTERS",
    "SUMMARY_BLOCK",
    "KernelResultsError",
    "Row",
    "Stat",
    "ValidateResult",
    "format_rel_error",
    "format_value",
    "kernel_label",
    "kernels_markdown",
    "relative_error",
    "revalidate",
    "rows",
    "run_kernel_with_retries",
    "scenario_markdown",
    "select",
    "summarize",
    "summary_markdown",
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
    metric: str  # a counter key, or "process/phase accesses/s" | "... elapsed_s" | "... minflt" | "... majflt"
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
            return p.get(column)
    return None


def _busy_free(kernel_runs: Sequence[RunResult], sim: RunResult) -> list[RunResult]:
    """The kernel runs with each phase's time taken without its runner's CPU wait
    (``run_delay_s``, lab/result.py ``busy_host_free_s``), when the scenario's processes are no
    more than its CPUs: then each has a CPU of its own and the wait is other work on the host,
    not the scenario's own contention (which the simulator models; kernel threads such as
    kswapd can still add some). Runs without the figure are left as they are."""
    from dataclasses import replace

    from reclaimlab.lab.result import busy_host_free_s

    machine = sim.config.get("machine", {})
    if len(sim.config.get("processes", [])) > int(machine.get("cpus", 1) or 1):
        return list(kernel_runs)
    out = []
    for r in kernel_runs:
        recs = []
        for p in r.phase_records:
            if "run_delay_s" in p:
                t = busy_host_free_s(p)
                p = {**p, "elapsed_s": t, "accesses_per_s": p["accesses"] / t if t > 0 else 0.0}
            recs.append(p)
        out.append(replace(r, phase_records=recs))
    return out


def rows(kernel_runs: Sequence[RunResult], sim: RunResult) -> list[Row]:
    """One row per counter (either side reports it; sorted like ``reclaimlab run``), then per
    phase (in the simulator's order) accesses/s and elapsed_s, and minflt and majflt where the
    kernel runs have them. Kernel phase times without the
    runners' CPU wait where the scenario's processes are no more than its CPUs (``_busy_free``)."""
    kernel_runs = _busy_free(kernel_runs, sim)
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
    # VM lab runs (backend "vm") ran under TCG: their times are shown, never set against the
    # simulator's absolute times (docs/vmlab.md); only ratios between configurations are compared.
    absolute_times = not any(r.backend == "vm" for r in kernel_runs)
    for proc, phase in phases:
        for column, label in (("accesses_per_s", "accesses/s"), ("elapsed_s", "elapsed_s")):
            measured: list[Number] = [v for v in (_phase_value(r, proc, phase, column) for r in kernel_runs) if v is not None]
            sim_value = _phase_value(sim, proc, phase, column) if absolute_times else None
            out.append(_row(f"{proc}/{phase} {label}", "phase", measured, sim_value))
        # The process's faults in the phase (getrusage's minflt/majflt): counts, not times, so
        # compared on every backend; only where the kernel runs recorded them.
        for column in FAULT_COLUMNS:
            faults: list[Number] = [v for v in (_phase_value(r, proc, phase, column) for r in kernel_runs) if v is not None]
            if faults:
                out.append(_row(f"{proc}/{phase} {column}", "phase", faults, _phase_value(sim, proc, phase, column)))
    # An OOM kill is a run's outcome (the killed process's phase ends "oom_killed"), counted
    # per process: 1 or 0 per run, so that the kernel's row reads as how many runs it killed.
    for proc in dict.fromkeys(p for p, _ in phases):

        def killed(r: RunResult, proc: str = proc) -> int:
            return int(any(p["process"] == proc and p.get("outcome") == "oom_killed" for p in r.phase_records))

        kills = [killed(r) for r in kernel_runs]
        if any(kills) or killed(sim):
            out.append(_row(f"{proc} oom_killed", "outcome", kills, killed(sim)))
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
    #: Kernel runs that failed and were run again (``retries``): {"rep", "error"} each. They are
    #: not in ``kernel_runs``: the spread is over runs the kernel finished.
    discarded_runs: list[dict[str, Any]] = field(default_factory=list)

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
            "discarded_runs": list(self.discarded_runs),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=indent, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ValidateResult:
        """The result ``to_dict`` wrote. Kernel runs keep their snapshots and time series
        (``KernelRunResult``); the rows are recomputed from the runs (they are derived data)."""
        from reclaimlab.lab.result import KernelRunResult

        if d.get("schema_version") != 1:
            raise ValueError(f"expected a validate result with schema_version 1; got {d.get('schema_version')!r}")
        kernel_runs: list[RunResult] = [
            KernelRunResult.from_dict(r) if r.get("backend") in ("kernel", "vm") else RunResult.from_dict(r) for r in d["kernel_runs"]
        ]
        sim = RunResult.from_dict(d["sim"])
        return cls(str(d["scenario"]), kernel_runs, sim, rows(kernel_runs, sim), list(d.get("discarded_runs", [])))

    @classmethod
    def from_json(cls, text: str) -> ValidateResult:
        return cls.from_dict(json.loads(text))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ValidateResult:
        return cls.from_json(Path(path).read_text(encoding="utf-8"))


def run_kernel_with_retries(
    run_kernel: Callable[..., RunResult],
    scenario: Scenario,
    retries: int,
    discarded: list[dict[str, Any]],
    rep: int,
    **kernel_options: Any,
) -> RunResult:
    """One kernel run; a run whose runner died (``RunnerFailed``: on this host, the memcg OOM
    killer, docs/validation.md) is run again, at most ``retries`` times, and recorded in
    ``discarded``. Every other failure (busy lab, timeout, Ctrl-C, bad scenario) is raised."""
    from reclaimlab.lab.errors import RunnerFailed

    for attempt in range(retries + 1):
        try:
            return run_kernel(scenario, **kernel_options)
        except RunnerFailed as e:
            if attempt == retries:
                raise
            discarded.append({"rep": rep, "error": str(e)})
    raise AssertionError("unreachable")


def validate(
    scenario: Scenario,
    reps: int = 3,
    run_kernel: Callable[..., RunResult] | None = None,
    run_sim: Callable[..., RunResult] | None = None,
    on_run: Callable[[int, int], None] | None = None,
    retries: int = 0,
    **kernel_options: Any,
) -> ValidateResult:
    """Run ``scenario`` ``reps`` times on the kernel and once in the simulator; compare. A
    kernel run whose runner died is run again up to ``retries`` times per rep (see
    ``run_kernel_with_retries``); the result lists those discarded runs."""
    if reps < 1:
        raise ValueError(f"reps: expected at least 1; got {reps}")
    if retries < 0:
        raise ValueError(f"retries: expected 0 or more; got {retries}")
    if run_kernel is None:
        from reclaimlab.backends import kernel

        run_kernel = kernel.run
    if run_sim is None:
        from reclaimlab.backends import sim

        run_sim = sim.run
    kernel_runs = []
    discarded: list[dict[str, Any]] = []
    for i in range(reps):
        if on_run is not None:
            on_run(i + 1, reps)
        kernel_runs.append(run_kernel_with_retries(run_kernel, scenario, retries, discarded, i + 1, **kernel_options))
    sim_result = run_sim(at_speed(scenario, kernel_runs))
    name = scenario.name or "scenario"
    return ValidateResult(name, kernel_runs, sim_result, rows(kernel_runs, sim_result), discarded)


def at_speed(scenario: Scenario, kernel_runs: Sequence[RunResult]) -> Scenario:
    """``scenario`` with its CPU costs (the profile's, with the scenario's own on top) scaled by
    how much slower or faster the kernel runs' CPU ran than the profile's (lab/speed.py
    ``speed_factor``): the simulator then runs at the speed the kernel runs had. Device
    figures and ``process_quantum_ns`` are not scaled. Unchanged when the runs or the profile
    have no speed probe (runs recorded before 2026-11-24)."""
    from reclaimlab.lab.speed import run_probe_ns, speed_factor
    from reclaimlab.profile import active_profile

    profile = active_profile()
    ref = profile.measurements.get("speed_probe_ns") if profile is not None else None
    factor = speed_factor([run_probe_ns(r.stats) for r in kernel_runs], float(ref) if isinstance(ref, int | float) else None)
    if factor is None:
        return scenario
    return scenario.model_copy(update={"costs": costs_at_speed(scenario.costs, factor)})


def costs_at_speed(scenario_costs: Mapping[str, int], factor: float) -> dict[str, int]:
    """Every CPU cost (the built-in defaults, the active profile's, the scenario's own on top)
    times ``factor``: the costs of a CPU ``factor`` times slower. ``process_quantum_ns`` is a
    scheduler setting, not work, and stays."""
    from reclaimlab.profile import active_profile, effective_costs

    every = {**{k: int(v) for k, v in native.core().default_costs().items()}, **effective_costs(scenario_costs, active_profile())}
    return {k: (v if k == "process_quantum_ns" else max(0, round(v * factor))) for k, v in every.items()}


class KernelResultsError(ValueError):
    """Stored kernel runs that do not belong to the scenario being validated."""


def _workload_config(config: dict[str, Any], legacy_backing: str = "loop") -> dict[str, Any]:
    """``config`` without what only the simulator uses: its time costs, its swap devices' and
    filesystems' device models (the kernel ran on the real devices) and its memcg stats flush
    interval (the kernel has its own flusher), the host's other memcgs (``host_memcgs``: the
    kernel had the real ones), the swap readahead state at the start (``swapin_readahead_hits``,
    ``last_readahead_pages``: the kernel had its own) and how the simulator steps accesses (``engine``: the kernel ran
    every access). What remains is what the kernel runs must share
    with the simulator's run: workload, cgroups, kernel settings, sizes. Trace phases are
    compared by their file's sha256, not by where a machine keeps the file."""
    out = {k: v for k, v in trace.without_paths(config).items() if k not in ("costs", "engine")}
    kernel = out.get("kernel")
    if isinstance(kernel, dict):
        out["kernel"] = _kernel_setup(kernel)
    cgroups = out.get("cgroups")
    if isinstance(cgroups, dict):
        # The simulator's flush model (the kernel has its own flusher; the lab's sample
        # interval is in each run's series) and, in runs recorded before it, its predecessor.
        out["cgroups"] = {k: v for k, v in cgroups.items() if k not in ("stats_flush", "stats_flush_ns")}
    machine = out.get("machine")
    if isinstance(machine, dict):
        # The kernel ran on the real devices: the models of swap devices and of the block
        # devices under filesystems are the simulator's own. A filesystem's `image_bytes` is
        # the lab's image size rule applied to the files (fsimage.py), so it follows from the
        # workload compared here; recordings lowered before the key existed lack it.
        machine = dict(machine)
        for key in ("swap", "filesystems"):
            if isinstance(machine.get(key), list):
                machine[key] = [
                    {k: v for k, v in d.items() if k not in ("device", "image_bytes")} if isinstance(d, dict) else d for d in machine[key]
                ]
        # A disk filesystem's `backing` is what the lab built, so it is compared; recordings
        # lowered before the key existed lack it and were made where each lab has always made
        # them: `legacy_backing`, the host lab's loop device (lab/filesystems.py) or the VM
        # lab's virtio disk (vm/plan.py).
        for fs in machine.get("filesystems") or []:
            if isinstance(fs, dict) and fs.get("fstype") != "tmpfs":
                fs.setdefault("backing", legacy_backing)
        # host_memcgs, page_reporting_order and the swap readahead state at the start describe
        # the host for the simulator; the lab sets nothing from them (the kernel walked the
        # host's real memcgs, its balloon reported what it reported, and it started from its own
        # readahead statics).
        for key in ("host_memcgs", "page_reporting_order", "swapin_readahead_hits", "last_readahead_pages"):
            machine.pop(key, None)
        out["machine"] = machine
    return out


def _kernel_setup(kernel: dict[str, Any]) -> dict[str, Any]:
    """The lowered ``kernel`` table as the kernel run applied it: its knobs with the kernel's
    default where the table leaves one out (as the core reads it; runs recorded before a knob
    was declared lack it), without ``version`` and ``switches``, which choose the simulator's
    model of a kernel (the run's kernel is in its provenance: the host's, or the VM's)."""
    out = {k: v for k, v in kernel.items() if k not in ("version", "switches")}
    for section, knobs in native.knob_sections().items():
        given = out.get(section)
        table = dict(given) if isinstance(given, dict) else {}
        for k in knobs:
            table.setdefault(k.field, k.default)
        out[section] = table
    return out


#: ``machine.memory = "host"`` is this machine's MemTotal, which varies by some hundred kB
#: between machines of one kind (firmware, kernel reservations). Kernel runs recorded on another
#: such machine are re-validated at their own size when the two are this close (relative).
HOST_MEMORY_TOLERANCE = 0.01


def _host_memory(scenario: Scenario, want: dict[str, Any], got: dict[str, Any]) -> int | None:
    """The kernel runs' memory size, when the scenario says memory = "host", that is all that
    differs, and it is within HOST_MEMORY_TOLERANCE; None when nothing is to be done.
    KernelResultsError, with both sizes, when it differs by more."""
    source = getattr(scenario, "_source", None)
    if source is None or source.document.get("machine", {}).get("memory") != "host":
        return None
    mk, ms = got.get("machine", {}).get("memory_bytes"), want.get("machine", {}).get("memory_bytes")
    if not isinstance(mk, int) or not isinstance(ms, int) or mk == ms:
        return None
    rest_k = {**got, "machine": {**got["machine"], "memory_bytes": ms}}
    if rest_k != want:
        return None  # something else differs too: the general message says what
    rel = abs(mk - ms) / mk
    if rel > HOST_MEMORY_TOLERANCE:
        raise KernelResultsError(
            f'machine.memory = "host": the kernel runs had {mk} bytes ({mk // 1024} kB), this machine has {ms} bytes '
            f"({ms // 1024} kB): {rel:.2%} apart, more than the {HOST_MEMORY_TOLERANCE:.0%} allowed for machines of one kind"
        )
    return mk


def _recorded_host_fact(scenario: Scenario, runs: Sequence[RunResult], key: str) -> int | None:
    """``machine.<key> = "host"`` (``host_memcgs``, ``page_reporting_order``): the host the
    kernel runs ran on, as their probe recorded it (provenance ``host.<key>``; the median when
    the runs saw different values), so that re-validating on another host simulates the
    same machine (e.g. the same zswap walk over the host's other memcgs). None when the
    scenario states a number, or the runs predate the record (then "host" is this host now)."""
    source = getattr(scenario, "_source", None)
    if source is None or source.document.get("machine", {}).get(key) != "host":
        return None
    counts = []
    for r in runs:
        host = r.provenance.get("host")
        n = host.get(key) if isinstance(host, dict) else None
        if isinstance(n, int):
            counts.append(n)
    return int(statistics.median_low(counts)) if counts else None


def _differences(got: dict[str, Any], want: dict[str, Any], prefix: str = "") -> str:
    """The keys whose values differ, with both values (kernel runs, then now), one level into tables."""
    parts = []
    for key in sorted(set(got) | set(want)):
        a, b = got.get(key), want.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict) and not prefix:
            parts.append(_differences(a, b, f"{key}."))
            continue
        text_a, text_b = json.dumps(a, sort_keys=True), json.dumps(b, sort_keys=True)
        if len(text_a) + len(text_b) > 200:
            parts.append(f"{prefix}{key}")
        else:
            parts.append(f"{prefix}{key}: kernel runs {text_a}, now {text_b}")
    return "; ".join(parts)


def revalidate(
    scenario: Scenario,
    previous: ValidateResult | dict[str, Any] | str | os.PathLike[str],
    run_sim: Callable[..., RunResult] | None = None,
    speed_runs: Sequence[RunResult] | None = None,
) -> ValidateResult:
    """Compare ``scenario`` in the simulator (run now, at the speed of ``speed_runs``, default
    the kernel runs: ``at_speed``) with the kernel runs of ``previous`` (a
    validate result, its dict, or the path of its JSON). KernelResultsError if ``previous`` is
    for another scenario (by name) or its kernel runs ran another workload or setup than the
    scenario lowers to now (e.g. the file or an override changed since). The simulator's own
    parameters (costs, device latency/bandwidth models) may differ: the kernel did not use them."""
    if isinstance(previous, ValidateResult):
        prev = previous
    elif isinstance(previous, dict):
        prev = ValidateResult.from_dict(previous)
    else:
        prev = ValidateResult.load(previous)
    name = scenario.name or "scenario"
    if prev.scenario != name:
        raise KernelResultsError(f"the kernel results are for scenario {prev.scenario!r}, not {name!r}")
    if not prev.kernel_runs:
        raise KernelResultsError(f"the kernel results for {name!r} hold no kernel runs")
    if run_sim is None:
        from reclaimlab.backends import sim

        run_sim = sim.run
    from reclaimlab.overrides import Override

    speed_of = prev.kernel_runs if speed_runs is None else speed_runs
    for key in ("host_memcgs", "page_reporting_order"):
        recorded = _recorded_host_fact(scenario, prev.kernel_runs, key)
        if recorded is not None:
            # "host": the host the kernel ran on, not the one re-validating now
            scenario = scenario.with_overrides([Override(f"machine.{key}", recorded, f"the kernel runs' host ({key} = 'host')")])
    sim_result = run_sim(at_speed(scenario, speed_of))
    want = _workload_config(sim_result.config)
    host_memory = _host_memory(scenario, want, _workload_config(prev.kernel_runs[0].config))
    if host_memory is not None:
        # memory = "host" on another machine of the same kind: simulate the kernel runs' size
        scenario = scenario.with_overrides([Override("machine.memory", host_memory, "the recorded kernel runs' memory (memory = 'host')")])
        sim_result = run_sim(at_speed(scenario, speed_of))
        want = _workload_config(sim_result.config)
    for i, k in enumerate(prev.kernel_runs, 1):
        got = _workload_config(k.config, "device" if k.backend == "vm" else "loop")
        if got != want:
            raise KernelResultsError(
                f"kernel run {i} of {name!r} ran another configuration than the scenario gives now (differs in: {_differences(got, want)})"
            )
    return ValidateResult(name, list(prev.kernel_runs), sim_result, rows(prev.kernel_runs, sim_result), list(prev.discarded_runs))


# ---------------------------------------------------------------------------------------------
# docs/validation.md: per-scenario tables and the summary across scenarios
# ---------------------------------------------------------------------------------------------

#: The counters of the summary table, in its order; then the phase rates (RANDOM_RATE, FILL_RATE,
#: and ALL_RATES: every phase's rate, fills, random phases, sequential passes, file reads and
#: writes alike, the figure issue 12's time target is stated on).
KEY_COUNTERS = (
    "vmstat.zswpout",
    "vmstat.zswpin",
    "vmstat.zswpwb",
    "vmstat.pswpin",
    "vmstat.pswpout",
    "zswap.pool_total_size",
    "zswap.stored_pages",
)
RANDOM_RATE = "random-phase accesses/s"
FILL_RATE = "fill accesses/s"
ALL_RATES = "all phase rates (accesses/s)"
#: Phases that make no accesses: their "rate" (0 on both sides) says nothing about time.
NO_ACCESS_KINDS = phase_kinds_without_accesses()
SUMMARY_BLOCK = "validation-summary"
KERNELS_BLOCK = "validation-kernels"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def scenario_markdown(result: ValidateResult) -> str:
    """The scenario's rows as ``reclaimlab validate`` prints them (rows zero on both sides left
    out), as a Markdown table."""
    lines = [
        "| metric | kernel median [min\N{EN DASH}max] | sim | rel. error | in spread |",
        "|---|---:|---:|---:|:---:|",
    ]
    for row in select(result.rows):
        k = row.kernel
        kernel = "-" if k is None else f"{format_value(k.median)} [{format_value(k.min)}\N{EN DASH}{format_value(k.max)}]"
        inside = "" if row.inside is None else ("yes" if row.inside else "no")
        lines.append(f"| `{_cell(row.metric)}` | {kernel} | {format_value(row.sim)} | {format_rel_error(row.rel_error)} | {inside} |")
    return "\n".join(lines) + "\n"


def _phase_kinds(result: ValidateResult) -> dict[tuple[str, str], str]:
    """(process, phase) -> the phase's kind ("fill", "random", ...), from the run configs."""
    kinds: dict[tuple[str, str], str] = {}
    for r in (result.sim, *result.kernel_runs):
        for proc in r.config.get("processes", []):
            for ph in proc.get("phases", []):
                kinds.setdefault((str(proc["name"]), str(ph["name"])), str(ph.get("phase", {}).get("kind")))
    return kinds


@dataclass(frozen=True)
class SummaryEntry:
    scenario: str
    label: str  # the scenario, and for phase rows the process/phase
    rel_error: float
    inside: bool | None


def _nonzero(row: Row) -> bool:
    kernel_nonzero = row.kernel is not None and not (row.kernel.min == 0 and row.kernel.max == 0)
    return kernel_nonzero or bool(row.sim)


def summary_entries(results: Sequence[ValidateResult]) -> dict[str, list[SummaryEntry]]:
    """Per key counter (and the random-phase and fill rates), one entry per scenario (per
    process and phase for the rates) in which it is non-zero on either side and both sides
    report it."""
    out: dict[str, list[SummaryEntry]] = {key: [] for key in (*KEY_COUNTERS, RANDOM_RATE, FILL_RATE, ALL_RATES)}
    for result in results:
        by_metric = {r.metric: r for r in result.rows}
        for key in KEY_COUNTERS:
            row = by_metric.get(key)
            if row is not None and row.rel_error is not None and _nonzero(row):
                out[key].append(SummaryEntry(result.scenario, result.scenario, row.rel_error, row.inside))
        kinds = _phase_kinds(result)
        for row in result.rows:
            if row.source != "phase" or not row.metric.endswith(" accesses/s") or row.rel_error is None:
                continue
            proc_phase = row.metric[: -len(" accesses/s")]
            proc, _, phase = proc_phase.partition("/")
            entry = SummaryEntry(result.scenario, f"{result.scenario} {proc_phase}", row.rel_error, row.inside)
            target = {"random": RANDOM_RATE, "fill": FILL_RATE}.get(kinds.get((proc, phase), ""))
            if target is not None:
                out[target].append(entry)
            if kinds.get((proc, phase)) not in NO_ACCESS_KINDS:
                out[ALL_RATES].append(entry)
    return out


def summary_markdown(results: Sequence[ValidateResult]) -> str:
    """The key counters' relative errors across scenarios: how many scenarios count, the median
    of the signed and of the absolute errors (over finite errors), and each scenario's error."""
    lines = [
        "| counter | scenarios (kernel or sim \N{NOT EQUAL TO} 0) | median rel. error | median \\|rel. error\\| "
        "| per scenario (rel. error, in spread) |",
        "|---|---:|---:|---:|---|",
    ]
    infinite = False
    for key, entries in summary_entries(results).items():
        finite = [e.rel_error for e in entries if not math.isinf(e.rel_error)]
        infinite = infinite or len(finite) < len(entries)
        med = format_rel_error(statistics.median(finite)) if finite else "-"
        med_abs = f"{statistics.median(abs(x) for x in finite) * 100:.1f}%" if finite else "-"
        per = "; ".join(
            f"{e.label} {format_rel_error(e.rel_error)}" + ("" if e.inside is None else (" (in)" if e.inside else " (out)"))
            for e in entries
        )
        label = key if key in (RANDOM_RATE, FILL_RATE, ALL_RATES) else f"`{key}`"
        lines.append(f"| {label} | {len(entries)} | {med} | {med_abs} | {per or '-'} |")
    text = "\n".join(lines) + "\n"
    if infinite:
        text += '\nErrors against a kernel median of 0 ("n/a (kernel 0)") are listed but left out of the medians.\n'
    return text


def kernel_label(result: ValidateResult) -> str:
    """Which kernel the result's kernel runs ran, for the per-kernel table: its version
    (major.minor), the cgroup hierarchy and where it ran ("6.18 v1 host", "6.12 v2 guest")."""
    run = result.kernel_runs[0]
    prov = run.provenance
    vm = prov.get("vm")
    if run.backend == "vm" and isinstance(vm, dict):
        release, where = str(vm.get("release", "?")), "guest"
    else:
        release, where = str(prov.get("host_kernel_release", "?")), "host"
    version = ".".join(release.split("-")[0].split(".")[:2])
    cgroups = run.config.get("cgroups")
    cg = cgroups.get("version") if isinstance(cgroups, dict) else None
    return f"{version} v{cg} {where}" if cg is not None else f"{version} {where}"


def kernels_markdown(results: Sequence[ValidateResult]) -> str:
    """The key counters' median |relative error| per kernel (columns in the order the kernels
    first appear), with the number of scenarios behind each, and over all key counters."""
    groups: dict[str, list[ValidateResult]] = {}
    for r in results:
        groups.setdefault(kernel_label(r), []).append(r)
    per_kernel = {label: summary_entries(rs) for label, rs in groups.items()}
    labels = list(groups)
    lines = [
        "| counter | " + " | ".join(f"{label}: median \\|rel. error\\| (scenarios)" for label in labels) + " |",
        "|---|" + "---:|" * len(labels),
    ]

    def cell(errors: list[float], n: int) -> str:
        return f"{statistics.median(abs(x) for x in errors) * 100:.1f}% ({n})" if errors else "-"

    everything: dict[str, list[float]] = {label: [] for label in labels}
    for key in KEY_COUNTERS:
        cells = []
        for label in labels:
            entries = per_kernel[label][key]
            finite = [e.rel_error for e in entries if not math.isinf(e.rel_error)]
            everything[label] += finite
            cells.append(cell(finite, len(entries)))
        lines.append(f"| `{key}` | " + " | ".join(cells) + " |")
    lines.append("| all key counters | " + " | ".join(cell(everything[label], len(everything[label])) for label in labels) + " |")
    return "\n".join(lines) + "\n"
