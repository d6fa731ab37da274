"""The few figures that answer "which configuration is better, and why": the headline of
``run`` and ``compare``, the outcome banners, per-access and per-second normalisations, and the
ranking of configurations.

Everything here is computed from a ``RunResult`` (counters and phase records), so the kernel
backend's results summarise the same way. Numbers are formatted for people here too
(``fmt_*``): 1.23M, 12.4 MiB, 3.21 s.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from reclaimlab.result import RunResult

__all__ = [
    "LEGEND",
    "Banner",
    "Headline",
    "banners",
    "change",
    "event_counter",
    "fmt_bytes",
    "fmt_count",
    "fmt_seconds",
    "fmt_value",
    "headline",
    "latency_headline",
    "latency_stat",
    "normalise",
    "primary_metric",
    "rank",
    "time_bounded_phases",
    "total_accesses",
]

Unit = Literal["s", "/s", "count", "bytes", "ratio", "pct", "text"]
Better = Literal["higher", "lower"] | None


# --- formatting -----------------------------------------------------------------------------


def fmt_count(v: float) -> str:
    """1234 -> '1234', 12345 -> '12.3k', 1.5e6 -> '1.50M' (three significant digits)."""
    a = abs(v)
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= 10 * scale or (a >= scale and suffix != "k"):
            x = v / scale
            return f"{x:.3g}{suffix}" if abs(x) < 100 else f"{x:.0f}{suffix}"
    if float(v).is_integer():
        return str(int(v))
    if a >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}" if a >= 0.01 else f"{v:.2g}"


def fmt_bytes(v: float) -> str:
    """Binary units: 14936973312 -> '13.9 GiB'."""
    a = abs(v)
    for scale, suffix in ((1024**4, "TiB"), (1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB")):
        if a >= scale:
            return f"{v / scale:.3g} {suffix}" if abs(v / scale) < 100 else f"{v / scale:.0f} {suffix}"
    return f"{int(v)} B"


def fmt_seconds(v: float) -> str:
    if abs(v) >= 100:
        return f"{v:.0f} s"
    if abs(v) >= 1:
        return f"{v:.2f} s"
    if abs(v) >= 1e-3:
        return f"{v * 1e3:.3g} ms"
    return f"{v * 1e6:.3g} µs"


def fmt_value(v: Any, unit: Unit) -> str:
    if v is None:
        return "-"
    if unit == "text":
        return str(v)
    if unit == "s":
        return fmt_seconds(float(v))
    if unit == "/s":
        return fmt_count(float(v)) + "/s"
    if unit == "bytes":
        return fmt_bytes(float(v))
    if unit == "pct":
        return f"{float(v):.2f}%"
    return fmt_count(float(v))


def change(value: float, base: float) -> str:
    """Against the baseline: ``+15.2%``, or ``x38.0`` from twice the baseline on (a percentage
    in the thousands reads badly); ``=`` when equal."""
    if value == base:
        return "="
    if base == 0:
        return "new"
    if base > 0 and value / base >= 2:
        return f"x{value / base:.3g}"
    return f"{(value - base) / abs(base) * 100:+.1f}%"


# --- what a run did -------------------------------------------------------------------------


def total_accesses(r: RunResult) -> int:
    return sum(int(p["accesses"]) for p in r.phase_records)


def run_seconds(r: RunResult) -> float:
    """The workload's span: from the first phase's start to the last phase's end, as the phase
    records give it (their elapsed times summed per process; the longest process)."""
    per_proc: dict[str, float] = {}
    for p in r.phase_records:
        per_proc[p["process"]] = per_proc.get(p["process"], 0.0) + float(p["elapsed_s"])
    return max(per_proc.values(), default=0.0)


def event_counter(key: str) -> bool:
    """True for counters that count events (normalisable), False for sizes and levels; the
    lab's classification (lab/record.py), so both backends agree."""
    from reclaimlab.lab.record import EVENT, kind

    return kind(key) == EVENT


def normalise(r: RunResult, key: str, per: Literal["access", "second"]) -> float | None:
    """An event counter per 1000 accesses or per second of the workload; None for gauges."""
    if key not in r.counters or not event_counter(key):
        return None
    if per == "access":
        n = total_accesses(r)
        return r.counters[key] * 1000 / n if n else None
    s = run_seconds(r)
    return r.counters[key] / s if s > 0 else None


def time_bounded_phases(r: RunResult) -> list[str]:
    """``process/phase`` of the phases that run for a duration (random with ``duration``): their
    access counts depend on the configuration's speed, so raw counts are not comparable."""
    out = []
    for proc in r.config.get("processes", []):
        for ph in proc.get("phases", []):
            body = ph.get("phase", {})
            if body.get("kind") == "random" and body.get("duration_ns") is not None:
                out.append(f"{proc['name']}/{ph['name']}")
    return out


@dataclass(frozen=True)
class Banner:
    """A configuration that did not run as asked: killed, cut by the time limit."""

    kind: Literal["oom_killed", "oom_failed", "time_limit"]
    text: str


def oom_kills(r: RunResult) -> int:
    """OOM kills in the run: global (vmstat.oom_kill) or memcg (memory.events oom_kill, v2),
    whichever is larger (a memcg kill is counted in both on v2)."""
    memcg = max((v for k, v in r.counters.items() if k.startswith("memcg[") and k.endswith("memory.events.oom_kill")), default=0)
    return max(int(r.counters.get("vmstat.oom_kill", 0)), int(memcg))


def banners(r: RunResult) -> list[Banner]:
    out: list[Banner] = []
    killed = [p for p in r.phase_records if p.get("outcome") == "oom_killed"]
    for p in killed:
        out.append(
            Banner("oom_killed", f"OOM: the OOM killer killed {p['process']} {fmt_seconds(float(p['elapsed_s']))} into phase {p['phase']}")
        )
    if not killed and oom_kills(r):
        out.append(Banner("oom_killed", f"OOM: {oom_kills(r)} OOM kill(s) during the run"))
    for p in r.phase_records:
        if p.get("outcome") == "oom_failed":
            text = f"OOM: {p['process']} stopped in phase {p['phase']}: no task the OOM killer may kill (all at oom_score_adj -1000)"
            out.append(Banner("oom_failed", text))
    cut = [p for p in r.phase_records if p.get("outcome") == "time_limit"]
    if cut:
        names = ", ".join(f"{p['process']}/{p['phase']}" for p in cut)
        out.append(Banner("time_limit", f"time limit: the scenario's max_time ended {names} before it finished"))
    return out


def outcome(r: RunResult) -> str:
    b = banners(r)
    if any(x.kind == "oom_killed" for x in b):
        return "OOM-KILLED"
    if any(x.kind == "oom_failed" for x in b):
        return "OOM-FAILED"
    if b:
        return "TIME LIMIT"
    return "ok"


# --- the headline ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Headline:
    """One headline row: a short label, its legend line, unit and which way is better."""

    key: str
    label: str
    unit: Unit
    better: Better
    get: Callable[[RunResult], Any]


#: Legend of the short labels (printed under the headline table).
LEGEND = {
    "outcome": "ok, OOM-KILLED (a process was killed) or TIME LIMIT (max_time cut a phase short)",
    "<phase> s": "the phase's elapsed simulated time",
    "<phase> acc/s": "the phase's accesses per second (higher is better)",
    "majflt/1k": "major faults (vmstat.pgmajfault: swap-ins from a device or zswap) per 1000 accesses",
    "pswpin / pswpout": "pages read from / written to swap devices (vmstat)",
    "zswpwb": "pages written back from zswap to the swap device (vmstat.zswpwb)",
    "pool": "zswap pool size at the end (zswap.pool_total_size)",
    "oom kills": "OOM kills (vmstat.oom_kill, memcg memory.events oom_kill)",
    "fault p50/p99/max": "page-fault latency over all processes, entry to return (docs/model/latency.md)",
    "stall p99/max": "allocation stall: per allocation or charge that entered reclaim, its time to return",
    "high p99/max": "per return to user space over memory.high: its reclaim and penalty (mem_cgroup_handle_over_high)",
    "throttled p99/max": "each throttling sleep: memory.high penalty, balance_dirty_pages, reclaim_throttle",
    "psi some/full avg10": "/proc/pressure/memory avg10 at the end, % (some: a task stalled; full: all non-idle tasks)",
    "psi some/full total": "/proc/pressure/memory total: stall time over the run",
}

#: Latency kinds in display order with a short label (docs/model/latency.md has what each
#: measures); the headline shows fault and alloc_stall, ``--all`` every kind.
LATENCY_KINDS = {
    "fault": "fault",
    "fault_minor": "minor fault",
    "fault_major": "major fault",
    "fault_zswap": "zswap fault",
    "io_wait": "swap-in IO wait",
    "alloc_stall": "alloc stall",
    "high_reclaim": "memory.high",
    "throttle": "throttled",
}
LATENCY_STATS = ("p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns")


def latency_stat(kind: str, stat: str, scope: str = "all") -> Callable[[RunResult], Any]:
    """A latency statistic in seconds (``stat``: p50_ns ... max_ns, sum_ns; ``count`` as a
    number) of ``kind`` over ``scope`` (``all``, a process, or ``<process>/<phase>``); None
    when it has no sample."""

    def get(r: RunResult) -> Any:
        for name, kinds in r.latency_tables():
            if name == scope:
                st = kinds.get(kind)
                if st is None:
                    return None
                return int(st[stat]) if stat == "count" else int(st[stat]) / 1e9
        return None

    return get


def _psi(which: str, field: str, scale: float) -> Callable[[RunResult], Any]:
    key = f"pressure.memory.{which}.{field}"
    return lambda r: None if key not in r.counters else r.counters[key] * scale


def _phase_field(proc: str, phase: str, field: str) -> Callable[[RunResult], Any]:
    def get(r: RunResult) -> Any:
        for p in r.phase_records:
            if p["process"] == proc and p["phase"] == phase:
                return p[field]
        return None

    return get


def _counter(key: str) -> Callable[[RunResult], Any]:
    return lambda r: r.counters.get(key)


def _majflt_per_k(r: RunResult) -> float | None:
    n = total_accesses(r)
    return r.counters.get("vmstat.pgmajfault", 0) * 1000 / n if n else None


def headline(results: Sequence[RunResult]) -> list[Headline]:
    """The headline rows for these results (one run, or the configurations of a compare):
    outcome, per phase elapsed and accesses/s, then the swap figures present in any result."""
    rows = [Headline("outcome", "outcome", "text", None, outcome)]
    phases: dict[tuple[str, str], None] = {}
    for r in results:
        for p in r.phase_records:
            phases.setdefault((p["process"], p["phase"]), None)
    procs = {proc for proc, _ in phases}
    for proc, phase in phases:
        name = phase if len(procs) == 1 else f"{proc}/{phase}"
        rows.append(Headline(f"phase:{proc}/{phase}.elapsed_s", f"{name} s", "s", "lower", _phase_field(proc, phase, "elapsed_s")))
        if any(_phase_field(proc, phase, "accesses")(r) for r in results):
            rows.append(
                Headline(
                    f"phase:{proc}/{phase}.accesses_per_s", f"{name} acc/s", "/s", "higher", _phase_field(proc, phase, "accesses_per_s")
                )
            )
    rows.append(Headline("majflt_per_1k", "majflt/1k", "count", "lower", _majflt_per_k))
    present = set().union(*(r.counters for r in results)) if results else set()
    for key, label, unit in (
        ("vmstat.pswpin", "pswpin", "count"),
        ("vmstat.pswpout", "pswpout", "count"),
        ("vmstat.zswpwb", "zswpwb", "count"),
        ("zswap.pool_total_size", "pool", "bytes"),
    ):
        if key in present:
            rows.append(Headline(key, label, unit, "lower", _counter(key)))  # type: ignore[arg-type]
    rows.append(Headline("oom_kills", "oom kills", "count", "lower", oom_kills))
    rows.extend(latency_headline(results))
    return rows


def latency_headline(results: Sequence[RunResult]) -> list[Headline]:
    """The latency block: fault p50/p99/max; p99/max of allocation stalls, memory.high handling
    and throttling sleeps (each when any run has one); PSI some/full avg10 and total (when the
    runs have them)."""
    rows: list[Headline] = []
    if any(latency_stat("fault", "max_ns")(r) is not None for r in results):
        for stat in ("p50", "p99", "max"):
            rows.append(Headline(f"latency:all.fault.{stat}_ns", f"fault {stat}", "s", "lower", latency_stat("fault", f"{stat}_ns")))
    for kind, label in (("alloc_stall", "stall"), ("high_reclaim", "high"), ("throttle", "throttled")):
        if any(latency_stat(kind, "max_ns")(r) is not None for r in results):
            for stat in ("p99", "max"):
                rows.append(Headline(f"latency:all.{kind}.{stat}_ns", f"{label} {stat}", "s", "lower", latency_stat(kind, f"{stat}_ns")))
    if any("pressure.memory.some.total" in r.counters for r in results):
        for which in ("some", "full"):
            rows.append(Headline(f"pressure.memory.{which}.avg10", f"psi {which} avg10", "pct", "lower", _psi(which, "avg10", 0.01)))
        for which in ("some", "full"):
            rows.append(Headline(f"pressure.memory.{which}.total", f"psi {which} total", "s", "lower", _psi(which, "total", 1e-6)))
    return rows


def primary_metric(results: Sequence[RunResult]) -> Headline | None:
    """What decides "better": the accesses/s of the longest time-bounded phase (the work done
    in a fixed time) or, without one, the elapsed time of the longest phase with accesses."""
    rows = headline(results)
    bounded = set()
    for r in results:
        bounded.update(time_bounded_phases(r))
    by_key = {h.key: h for h in rows}

    def longest(field: str, names: Sequence[str]) -> Headline | None:
        cands = [
            (max((float(v) for r in results if (v := by_key[k].get(r)) is not None), default=0.0), k)
            for n in names
            if (k := f"phase:{n}.{field}") in by_key
        ]
        return by_key[max(cands)[1]] if cands else None

    if bounded:
        pick = longest("elapsed_s", sorted(bounded))
        if pick is not None:
            return by_key.get(pick.key.replace(".elapsed_s", ".accesses_per_s"))
    names = [k.removeprefix("phase:").removesuffix(".accesses_per_s") for k in by_key if k.endswith(".accesses_per_s")]
    return longest("elapsed_s", names)


def rank(names: Sequence[str], results: Sequence[RunResult], metric: Headline) -> list[tuple[str, float]]:
    """Configurations that ran as asked (no OOM kill, no time limit), best first, by ``metric``."""
    scored = [(n, float(v)) for n, r in zip(names, results, strict=True) if not banners(r) and (v := metric.get(r)) is not None]
    return sorted(scored, key=lambda x: -x[1] if metric.better == "higher" else x[1])


def matches(key: str, patterns: Sequence[str]) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(key, p) for p in patterns)
