"""Times of VM lab runs: compared only as ratios between configurations of one validation.

A guest under TCG runs fault-heavy phases 8-20x slower than hardware and pure CPU work about
as fast, so its absolute times say nothing about the simulator's (whose time model describes a
real machine, docs/model/time.md). What can be compared is how much slower or faster one
configuration is than another *within the same run of configurations*: per phase, the kernel's
median elapsed time of configuration c over the baseline's (the first configuration), beside
the simulator's same ratio. Even those ratios are distorted where TCG slows the configurations
unequally (a configuration that faults more is slowed more), which the note says.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

__all__ = ["NOTE", "RatioRow", "ratio_rows"]

NOTE = (
    "VM lab: times are the guest's under QEMU TCG (fault-heavy phases 8-20x slower than hardware). They are never "
    "compared with the simulator's absolute times (no sim value in the phase rows); with --compare, each phase's "
    "elapsed time is compared as a ratio to the first configuration's, kernel vs simulator."
)


@dataclass(frozen=True)
class RatioRow:
    phase: str  # "process/phase"
    config: str
    baseline: str
    kernel: float | None  # median elapsed(config) / median elapsed(baseline)
    sim: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "config": self.config, "baseline": self.baseline, "kernel": self.kernel, "sim": self.sim}


def _elapsed(runs: list[Any], proc: str, phase: str) -> float | None:
    values = [p["elapsed_s"] for r in runs for p in r.phase_records if p["process"] == proc and p["phase"] == phase]
    return statistics.median(values) if values else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def ratio_rows(ranking: Any) -> list[RatioRow]:
    """Per phase and configuration (baseline excluded): elapsed ratios to the first configuration."""
    configs = ranking.configs
    if len(configs) < 2:
        return []
    base = configs[0]
    phases = [(p["process"], p["phase"]) for p in base.result.sim.phase_records]
    out = []
    for proc, phase in phases:
        k0 = _elapsed(base.result.kernel_runs, proc, phase)
        s0 = _elapsed([base.result.sim], proc, phase)
        for c in configs[1:]:
            out.append(
                RatioRow(
                    f"{proc}/{phase}",
                    c.name,
                    base.name,
                    _ratio(_elapsed(c.result.kernel_runs, proc, phase), k0),
                    _ratio(_elapsed([c.result.sim], proc, phase), s0),
                )
            )
    return out
