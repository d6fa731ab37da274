"""OOM kills as a function of speed: each stored kernel run of a ``validate --json`` file set
against the simulator at that run's speed (docs/validation.md, "OOM kills on the kernel side").

Whether the cgroup v1 memcg OOM killer takes a runner is a race between how fast the workload
drains the inactive anon list and when the memcg statistics are next flushed
(docs/model/memcg.md, "When limit reclaim gives up"). The flushes come in wall-clock time
(the kernel's flusher every 2 s, the lab's memory.stat reads every sample interval), the
workload progresses at its CPU's speed for the share of wall-clock time it gets a CPU. So per
kernel run this prints its speed probe, its runners' CPU wait (schedstat run_delay over the
phases' elapsed time), its outcome (the process and phase the OOM killer ended, seconds into
the phase), and the simulator's outcome at that run's speed: CPU costs scaled by the run's
probe over the profile's (as ``validate.at_speed`` does for the runs' median) and by
1 / (1 - wait), so that the simulated workload gets as far per second of wall clock as the
kernel's did. The kernel's flusher has run since boot, so its phase against the run's start is
unknown: the simulator runs at each of ``PHASES``. ``--sweep`` adds the simulator over a range
of speeds (the knife edge, if there is one).

Usage: python tools/oom_race.py SCENARIO.toml RESULT.json [--sweep] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from reclaimlab import load
from reclaimlab.backends import sim
from reclaimlab.lab.speed import run_probe_ns
from reclaimlab.profile import active_profile
from reclaimlab.result import RunResult
from reclaimlab.scenario import Scenario
from reclaimlab.validate import ValidateResult, costs_at_speed

#: The kernel flusher's phases tried, ns (flush_memcg_stats_dwork every 2 s). With the lab's
#: reads every second, phase 0 flushes only with the reads (as 1 s would); 0.5 s and 1.5 s add
#: a flush half-way between two reads, in every other second, each in the other ones.
PHASES = (0, 500_000_000, 1_500_000_000)
#: Speeds of the sweep: the simulated workload's progress per wall-clock second against the
#: profile's (1: the profile's CPU with no wait; 0.5: half as far per second).
SWEEP = (2.0, 1.5, 1.25, 1.0, 0.8, 0.65, 0.5, 0.4, 0.3)


def killed(r: RunResult) -> str:
    """``proc/phase @ t s`` for every phase the OOM killer ended, or ``completed``."""
    kills = [f"{p['process']}/{p['phase']} @ {float(p['elapsed_s']):.2f} s" for p in r.phase_records if p.get("outcome") == "oom_killed"]
    return ", ".join(kills) if kills else "completed"


def wait_fraction(r: RunResult) -> float | None:
    """The share of the runners' phase time they spent waiting for a CPU (run_delay)."""
    recs = [p for p in r.phase_records if "run_delay_s" in p and float(p.get("elapsed_s", 0)) > 0]
    if not recs:
        return None
    return sum(float(p["run_delay_s"]) for p in recs) / sum(float(p["elapsed_s"]) for p in recs)


def simulate(scenario: Scenario, slowdown: float, phase_ns: int) -> RunResult:
    """The scenario with every CPU cost times ``slowdown`` and the kernel flusher at ``phase_ns``."""
    cgroups = scenario.cgroups.model_copy(update={"stats_flusher_phase": phase_ns})
    s = scenario.model_copy(update={"costs": costs_at_speed(scenario.costs, slowdown), "cgroups": cgroups})
    return sim.run(s)


def outcomes(scenario: Scenario, slowdown: float, phases: tuple[int, ...] = PHASES) -> str:
    return "; ".join(f"{p / 1e9:g} s: {killed(simulate(scenario, slowdown, p))}" for p in phases)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", type=Path)
    ap.add_argument("result", type=Path)
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    scenario = load(a.scenario)
    stored = ValidateResult.load(a.result)
    profile = active_profile()
    ref = profile.measurements.get("speed_probe_ns") if profile is not None else None
    if not isinstance(ref, int | float):
        print("oom_race: the active profile has no speed_probe_ns", file=sys.stderr)
        return 2
    lines = [
        f"{a.result}: {len(stored.kernel_runs)} kernel runs; profile probe {ref:.0f} ns",
        "",
        "| run | probe ns | CPU wait | kernel | simulator at the run's wall-clock speed, by flusher phase |",
        "|---:|---:|---:|---|---|",
    ]
    waits = []
    for i, r in enumerate(stored.kernel_runs, 1):
        probe = run_probe_ns(r.stats)
        wait = wait_fraction(r)
        if probe is None or wait is None:
            lines.append(f"| {i} | - | - | {killed(r)} | (no probe or run_delay recorded) |")
            continue
        waits.append(wait)
        slowdown = probe / ref / (1 - min(wait, 0.95))
        lines.append(f"| {i} | {probe:.0f} | {wait:.0%} | {killed(r)} | x{slowdown:.2f}: {outcomes(scenario, slowdown)} |")
        print(lines[-1], file=sys.stderr)
    if waits:
        lines += ["", f"median CPU wait {statistics.median(waits):.0%}"]
    if a.sweep:
        lines += ["", "| CPU costs x | simulator, by flusher phase |", "|---:|---|"]
        for speed in SWEEP:
            lines.append(f"| {1 / speed:.2f} | {outcomes(scenario, 1 / speed, PHASES[:2])} |")
            print(lines[-1], file=sys.stderr)
    text = "\n".join(lines) + "\n"
    if a.out:
        a.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
