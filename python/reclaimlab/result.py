"""RunResult: what one run of a scenario produced, and its JSON form.

The JSON is deterministic: keys sorted, no wall-clock timestamps, floats computed from integers
in a fixed order. The same scenario and seed give byte-identical JSON.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reclaimlab import profile as profiles
from reclaimlab.profile import Profile
from reclaimlab.scenario import Scenario
from reclaimlab.version import __version__

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FAULT_COLUMNS", "PHASE_COLUMNS", "RESULT_SCHEMA_VERSION", "RunResult", "counter_sort_key", "split_counter"]

RESULT_SCHEMA_VERSION = 1
#: minflt, majflt: the process's page faults in the phase as getrusage counts them (the lab
#: runner reports getrusage's deltas; the simulator counts the same faults, sched.rs PhaseRecord).
PHASE_COLUMNS = ("process", "phase", "elapsed_s", "accesses", "accesses_per_s", "outcome", "minflt", "majflt")
#: The phase record's fault counts (absent from results recorded before they existed).
FAULT_COLUMNS = ("minflt", "majflt")

# Counter sources in the order tables show them; others follow alphabetically.
_SOURCE_ORDER = {"vmstat": 0, "zswap": 1, "memcg": 2, "meminfo": 3}


def split_counter(key: str) -> tuple[str, str]:
    """``"vmstat.zswpout"`` -> ("vmstat", "zswpout"); ``"memcg[/a].memory.stat.zswapped"`` ->
    ("memcg[/a]", "memory.stat.zswapped")."""
    if key.startswith("memcg["):
        end = key.find("]")
        if end > 0:
            return key[: end + 1], key[end + 1 :].lstrip(".")
    source, _, name = key.partition(".")
    return source, name


def counter_sort_key(key: str) -> tuple[int, str, str]:
    source, name = split_counter(key)
    family = source.split("[", 1)[0]
    return (_SOURCE_ORDER.get(family, len(_SOURCE_ORDER)), source, name)


def scenario_provenance(scenario: Scenario, profile: Profile | None) -> dict[str, Any]:
    """What both backends record about the scenario a run ran: its file, overrides, seed,
    preset, the machine profile its config was lowered with (name, file, sha256: results
    depend on it) and the software versions; each backend adds its own (native module, runner,
    host)."""
    return {
        "reclaimlab_version": __version__,
        "scenario_path": scenario.path,
        "scenario_sha256": scenario.sha256,
        "overrides": [str(o) for o in scenario.overrides],
        "seed": scenario.seed,
        "kernel_preset": scenario.kernel.version,
        "profile": profiles.provenance(profile),
        "python": platform.python_version(),
    }


def _phase_record(p: dict[str, Any]) -> dict[str, Any]:
    elapsed_ns = int(p["end_ns"]) - int(p["start_ns"])
    accesses = int(p["accesses"])
    elapsed_s = elapsed_ns / 1e9
    # What a cgroup phase's write did (reclaim: reclaimed_bytes and error "EAGAIN" when it fell
    # short; cgroup_write: the value written; cgroup_read: the number read): present on those
    # phases only.
    extra: dict[str, Any] = {k: p[k] for k in ("reclaimed_bytes", "error", "written", "read") if p.get(k) is not None}
    extra.update({k: int(p[k]) for k in FAULT_COLUMNS if p.get(k) is not None})
    return {
        **extra,
        "process": str(p["process"]),
        "phase": str(p["phase"]),
        "elapsed_s": elapsed_s,
        "accesses": accesses,
        "accesses_per_s": accesses * 1e9 / elapsed_ns if elapsed_ns > 0 else 0.0,
        # How the phase ended ("completed", or cut short, e.g. by max_time), when the core says.
        "outcome": None if p.get("outcome") is None else str(p["outcome"]),
    }


def _phases_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(
        {
            "process": pd.Series([r["process"] for r in records], dtype=object),
            "phase": pd.Series([r["phase"] for r in records], dtype=object),
            "elapsed_s": pd.Series([r["elapsed_s"] for r in records], dtype="float64"),
            "accesses": pd.Series([r["accesses"] for r in records], dtype="int64"),
            "accesses_per_s": pd.Series([r["accesses_per_s"] for r in records], dtype="float64"),
            "outcome": pd.Series([r.get("outcome") for r in records], dtype=object),
            **{c: pd.Series([r.get(c) for r in records], dtype="Int64") for c in FAULT_COLUMNS},
        },
        columns=list(PHASE_COLUMNS),
    )


@dataclass
class RunResult:
    """One run: counters keyed ``<source>.<name>`` as the kernel names them, per-phase timings."""

    scenario: str
    backend: str
    config: dict[str, Any]
    counters: dict[str, int]
    phase_records: list[dict[str, Any]]
    stats: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    #: Counters over time (``--interval``; the kernel backend always samples): ``{"interval_s",
    #: "t": [seconds], "values": {key: [value per t]}}`` in lab/record.py's Series format.
    series: dict[str, Any] = field(default_factory=dict)
    #: Latency distributions (the simulator's; docs/model/latency.md): ``{"all": {kind: stats},
    #: "processes": [{"process", "kinds": {kind: stats}}], "phases": [{"process", "phase",
    #: "kinds"}]}``, stats = count, sum_ns, p50_ns, p90_ns, p99_ns, p999_ns, max_ns.
    latency: dict[str, Any] = field(default_factory=dict)
    #: Each zsmalloc pool's debugfs ``classes`` table, read with the counters (``run
    #: --zsmalloc-classes``; docs/model/zsmalloc.md): ``[{"pool": "zram0", "classes": [{"class",
    #: "size", "inuse_ratio" (zspages in the 10% ... 99%, 100% groups), "obj_allocated",
    #: "obj_used", "pages_used", "pages_per_zspage", "freeable"}]}]``; empty unless asked for.
    zsmalloc: list[dict[str, Any]] = field(default_factory=list)

    @property
    def series_frame(self) -> pd.DataFrame:
        """The series as a tidy long table: columns t_s, metric, value (one sample per row)."""
        import pandas as pd

        t = self.series.get("t", [])
        rows = [(ts, k, v) for k, col in sorted(self.series.get("values", {}).items()) for ts, v in zip(t, col, strict=False)]
        return pd.DataFrame(rows, columns=["t_s", "metric", "value"]).astype({"t_s": "float64", "value": "float64"})

    def tidy(self) -> pd.DataFrame:
        """Everything as one long table, one value per row: columns kind ("counter", "phase",
        "latency", "series"), metric (a counter key, ``phase:<process>/<phase>.<field>``, or
        ``latency:<scope>.<kind>.<stat>`` with scope ``all``, ``<process>`` or
        ``<process>/<phase>``), t_s (the sample time for series rows, else empty) and value."""
        import pandas as pd

        rows: list[tuple[str, str, float | None, float]] = [("counter", k, None, float(v)) for k, v in sorted(self.counters.items())]
        for p in self.phase_records:
            for f in ("elapsed_s", "accesses", "accesses_per_s"):
                rows.append(("phase", f"phase:{p['process']}/{p['phase']}.{f}", None, float(p[f])))
        for name, kinds in self.latency_tables():
            for k, st in sorted(kinds.items()):
                rows += [("latency", f"latency:{name}.{k}.{f}", None, float(v)) for f, v in sorted(st.items())]
        t = self.series.get("t", [])
        for k, col in sorted(self.series.get("values", {}).items()):
            rows += [("series", k, float(ts), float(v)) for ts, v in zip(t, col, strict=False) if v is not None]
        return pd.DataFrame(rows, columns=["kind", "metric", "t_s", "value"]).astype({"t_s": "float64", "value": "float64"})

    def latency_tables(self) -> list[tuple[str, dict[str, dict[str, int]]]]:
        """(scope, {kind: stats}) for the whole run (``all``), each process and each phase
        (``<process>/<phase>``), in that order; empty without latency results."""
        if not self.latency:
            return []
        out: list[tuple[str, dict[str, dict[str, int]]]] = [("all", dict(self.latency.get("all", {})))]
        out += [(str(p["process"]), dict(p["kinds"])) for p in self.latency.get("processes", [])]
        out += [(f"{p['process']}/{p['phase']}", dict(p["kinds"])) for p in self.latency.get("phases", [])]
        return out

    @property
    def phases(self) -> pd.DataFrame:
        """Columns: process, phase, elapsed_s, accesses, accesses_per_s, outcome, minflt, majflt
        (<NA> in results recorded before phase records had them)."""
        return _phases_frame(self.phase_records)

    @classmethod
    def from_native(
        cls, scenario: Scenario, config: dict[str, Any], raw: dict[str, Any], profile: Profile | None, backend: str = "sim"
    ) -> RunResult:
        from reclaimlab import native

        counters = {str(k): int(v) for k, v in raw.get("counters", {}).items()}
        return cls(
            scenario=scenario.name or "scenario",
            backend=backend,
            config=config,
            counters=dict(sorted(counters.items())),
            phase_records=[_phase_record(p) for p in raw.get("phases", [])],
            stats=dict(raw.get("stats", {})),
            provenance={**scenario_provenance(scenario, profile), "native_version": native.native_version()},
            latency=dict(raw.get("latency", {})),
            zsmalloc=list(raw.get("zsmalloc", [])),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": RESULT_SCHEMA_VERSION,
            "backend": self.backend,
            "scenario": self.scenario,
            "config": self.config,
            "counters": dict(sorted(self.counters.items())),
            "phases": [dict(r) for r in self.phase_records],
            "stats": dict(self.stats),
            "provenance": dict(self.provenance),
            # only when sampled: a result without --interval is as before, byte for byte
            **({"series": self.series} if self.series else {}),
            **({"latency": self.latency} if self.latency else {}),
            **({"zsmalloc": self.zsmalloc} if self.zsmalloc else {}),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=indent, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        if d.get("schema_version") != RESULT_SCHEMA_VERSION:
            raise ValueError(f"expected a result with schema_version {RESULT_SCHEMA_VERSION}; got {d.get('schema_version')!r}")
        return cls(
            scenario=d["scenario"],
            backend=d["backend"],
            config=d["config"],
            counters={k: int(v) for k, v in d["counters"].items()},
            phase_records=[dict(r) for r in d["phases"]],
            stats=dict(d.get("stats", {})),
            provenance=dict(d.get("provenance", {})),
            series=dict(d.get("series", {})),
            latency=dict(d.get("latency", {})),
            zsmalloc=list(d.get("zsmalloc", [])),
        )

    @classmethod
    def from_json(cls, text: str) -> RunResult:
        return cls.from_dict(json.loads(text))
