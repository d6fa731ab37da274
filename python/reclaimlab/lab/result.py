"""The kernel backend's RunResult: the simulator's fields plus a time series and raw snapshots.

``counters`` holds only keys the simulator also reports (for this scenario), with the same
meaning; everything else the kernel showed is in ``raw`` (the full before/after snapshots), and
the samples taken during the run are in ``series``. Phase records carry the simulator's columns
(``minflt`` and ``majflt`` are the runner's getrusage deltas) and, where
the kernel has schedstat, ``cpu_s`` and ``run_delay_s``: the runner thread's time on a CPU and
runnable but waiting for one (what a busy host adds to ``elapsed_s``; ``busy_host_free_s``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reclaimlab.result import RunResult

__all__ = ["KernelRunResult", "busy_host_free_s", "phase_record"]


def phase_record(ev: dict[str, Any]) -> dict[str, Any]:
    """A runner's ``phase`` event as a phase record (the simulator's columns, same formulas)."""
    elapsed_ns = int(ev["end_ns"]) - int(ev["start_ns"])
    accesses = int(ev["accesses"])
    # reclaim, cgroup_write and cgroup_read phases: what the write did or the read read, under
    # the simulator's keys (reclaimed_bytes is memory.stat pgsteal over the write: the kernel
    # does not report it).
    extra: dict[str, Any] = {k: ev[k] for k in ("reclaimed_bytes", "error", "written", "read") if ev.get(k) is not None}
    return {
        **extra,
        "process": str(ev["process"]),
        "phase": str(ev["phase"]),
        "elapsed_s": elapsed_ns / 1e9,
        "accesses": accesses,
        "accesses_per_s": accesses * 1e9 / elapsed_ns if elapsed_ns > 0 else 0.0,
        "outcome": str(ev.get("outcome", "completed")),
        "minflt": int(ev.get("minflt", 0)),
        "majflt": int(ev.get("majflt", 0)),
        **({"cpu_s": int(ev["cpu_ns"]) / 1e9, "run_delay_s": int(ev["run_delay_ns"]) / 1e9} if "run_delay_ns" in ev else {}),
    }


def busy_host_free_s(record: dict[str, Any]) -> float:
    """A kernel phase's elapsed time without the time its runner waited for a CPU: the time it
    would have taken had nothing else wanted the CPUs. Exact for a single-process scenario on a
    host busy with unrelated work; in a scenario whose own processes and kernel threads
    outnumber the CPUs part of that wait is the scenario's own contention, which the simulator
    models (processor sharing), so do not use it there. The elapsed time where not recorded."""
    return float(record["elapsed_s"]) - float(record.get("run_delay_s", 0.0))


@dataclass
class KernelRunResult(RunResult):
    raw: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["series"] = self.series
        d["raw"] = self.raw
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KernelRunResult:
        base = RunResult.from_dict(d)
        return cls(
            scenario=base.scenario,
            backend=base.backend,
            config=base.config,
            counters=base.counters,
            phase_records=base.phase_records,
            stats=base.stats,
            provenance=base.provenance,
            series=dict(d.get("series", {})),
            raw=dict(d.get("raw", {})),
        )
