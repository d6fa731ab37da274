"""A stand-in for the native module with its API and deterministic, config-dependent output.

It lets the backend, result and CLI code be tested before (and independently of) the Rust
core; tests that need the real simulator use ``pytest.importorskip("reclaimlab._core")``.
"""

from __future__ import annotations

import importlib
import json
import types
from typing import Any, ClassVar

#: The real native module: the stand-in checks page content classes with its parser.
_REAL = importlib.import_module("reclaimlab._core")

COSTS = {"access_ns": 130, "fault_ns": 700, "process_quantum_ns": 100_000}
SWITCHES = {
    "6.12": {"zswap.incompressible": "reject", "zswap.same_filled": "zeromap"},
    "6.18": {"zswap.incompressible": "store_raw", "zswap.same_filled": "zeromap"},
}
CODECS = ["lzo", "lzo-rle", "lz4", "zstd", "deflate"]


class Simulation:
    instances: ClassVar[list[Simulation]] = []

    def __init__(self, config_json: str) -> None:
        self.config: dict[str, Any] = json.loads(config_json)
        if self.config["kernel"]["version"] not in SWITCHES:
            raise ValueError(f"kernel.version: no preset for {self.config['kernel']['version']!r}")
        for name in self.config["costs"]:
            if name not in COSTS:
                raise ValueError(f"costs.{name}: unknown time-model parameter")
        self.events = 0
        self.total = 1_000_000
        self.steps = 0
        Simulation.instances.append(self)

    def step(self, max_events: int) -> bool:
        self.steps += 1
        self.events = min(self.total, self.events + max_events)
        return self.events >= self.total

    def progress(self) -> float:
        return self.events / self.total

    def result_json(self) -> str:
        cfg = self.config
        pages = sum(r["pages"] for p in cfg["processes"] for r in p["regions"])
        zswap = cfg["kernel"]["zswap"]["enabled"]
        limited = any(g["high_bytes"] is not None or g["limit_bytes"] is not None for g in cfg["cgroups"]["groups"])
        out = pages // 3 if limited else 0
        counters = {
            "vmstat.pgfault": pages + cfg["seed"],
            "vmstat.pswpout": 0 if zswap else out,
            "vmstat.zswpout": out if zswap else 0,
            "vmstat.oom_kill": 0,
            "zswap.written_back_pages": out // 10 if zswap and cfg["kernel"]["zswap"]["shrinker_enabled"] else 0,
            "meminfo.MemTotal": cfg["machine"]["memory_bytes"] // 1024,
        }
        for g in cfg["cgroups"]["groups"][1:]:
            counters[f"memcg[{g['path']}].memory.stat.zswpout"] = counters["vmstat.zswpout"]
        phases = []
        t = 0
        for p in cfg["processes"]:
            for ph in p["phases"]:
                kind = ph["phase"]["kind"]
                dur = ph["phase"].get("duration_ns") or (1_000_000_000 if kind != "exit" else 0)
                accesses = 0 if kind in ("sleep", "exit") else (dur // (1000 + 100 * out // max(pages, 1)))
                phases.append(
                    {
                        "process": p["name"],
                        "phase": ph["name"],
                        "start_ns": t,
                        "end_ns": t + dur,
                        "accesses": accesses,
                        "outcome": "completed",
                    }
                )
                t += dur
        return json.dumps({"counters": counters, "phases": phases, "stats": {"events": self.events, "sim_time_ns": t, "pages": pages}})


def module() -> types.ModuleType:
    m = types.ModuleType("reclaimlab._core")
    m.Simulation = Simulation  # type: ignore[attr-defined]
    m.default_costs = lambda: dict(COSTS)  # type: ignore[attr-defined]

    def preset_switches(version: str) -> dict[str, Any]:
        if version not in SWITCHES:
            raise ValueError(f"no preset for {version!r}")
        return dict(SWITCHES[version])

    m.preset_switches = preset_switches  # type: ignore[attr-defined]
    m.codecs = lambda: list(CODECS)  # type: ignore[attr-defined]
    m.presets = lambda: list(SWITCHES)  # type: ignore[attr-defined]
    m.version = lambda: "0.0.0-fake"  # type: ignore[attr-defined]
    # Page content classes are checked by the real core's parser (no copy of it here).
    m.distinct_variants = _REAL.distinct_variants  # type: ignore[attr-defined]
    m.check_content = _REAL.check_content  # type: ignore[attr-defined]
    m.ConfigError = _REAL.ConfigError  # type: ignore[attr-defined]
    # Knobs and allocators are the real core's declarations (the scenario model is made from them).
    m.knobs = _REAL.knobs  # type: ignore[attr-defined]
    m.zpools = _REAL.zpools  # type: ignore[attr-defined]
    # The bounds and the resource estimate are the real core's (no copy of them here).
    m.estimate = _REAL.estimate  # type: ignore[attr-defined]
    return m
