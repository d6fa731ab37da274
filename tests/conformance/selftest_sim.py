"""Helpers for the conformance tests: run a scenario of this directory in the simulator and
read its end counters under the names the selftests read (memory.stat fields, memory.events,
interface files, debugfs zswap).

The kernel's selftests are not copied here (GPL); each test module describes the selftest it
follows in its own words. See docs/conformance.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import reclaimlab

HERE = Path(__file__).resolve().parent
MiB = 1 << 20
PAGE_SIZE = 4096


def run(scenario: str, overrides: Iterable[str] = ()) -> reclaimlab.RunResult:
    """Run tests/conformance/<scenario>.toml in the simulator with --set style overrides."""
    return reclaimlab.run(HERE / f"{scenario}.toml", overrides=list(overrides))


def cg(result: reclaimlab.RunResult, group: str, key: str) -> int:
    """The cgroup's interface value, e.g. cg(r, "a", "memory.stat.zswpout").

    A missing key is an error (KeyError), not 0: the simulator leaves out what it does not
    model, and a selftest that reads it cannot be judged."""
    return result.counters[f"memcg[/{group}].{key}"]


def outcomes(result: reclaimlab.RunResult, process: str) -> list[str]:
    """How each phase of the process ended ("completed", "oom_killed", ...), in order."""
    return [p["outcome"] for p in result.phase_records if p["process"] == process]


def values_close(a: int, b: int, err_percent: int) -> bool:
    """The selftests' tolerance (values_close in cgroup_util.c): |a - b| may be at most
    err_percent percent of a + b."""
    return abs(a - b) <= (a + b) / 100 * err_percent
