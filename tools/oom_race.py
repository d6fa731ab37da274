"""OOM kills as a function of speed: each stored kernel run of a ``validate --json`` file set
against the simulator at that run's speed (docs/validation.md, "OOM kills on the kernel side").

Whether the cgroup v1 memcg OOM killer takes a runner is a race between how fast the workload
drains the inactive anon list and when the memcg statistics are next flushed
(docs/model/memcg.md, "When limit reclaim gives up"). The flushes come in wall-clock time
(the kernel's flusher every 2 s, the lab's memory.stat reads every sample interval), the
workload progresses at its CPU's speed for the share of its runnable time it gets a CPU. So per
kernel run this prints its speed probe, its runners' CPU wait (schedstat run_delay over
run_delay plus time on a CPU), its outcome (the process and phase the OOM killer ended, seconds
into the phase), and the simulator's outcome with its CPU costs scaled so that it gets as far
per wall-clock second as the kernel's runner did: by the run's probe over the profile's (as
``validate.at_speed`` does for the runs' median), or by the simulator's access rate over the
kernel's busy-free rate (completed runs of the timed phase; the simulator's own timing error
taken out), in both cases times 1 / (1 - wait). The kernel's flusher has run since boot, so its
phase against the run's start is unknown: the simulator runs at each of ``PHASES``. ``--sweep``
and ``--fine`` add the simulator over a range of speeds (the knife edge, if there is one).

``--set KEY=VALUE`` overrides a scenario key on the simulator's side (the kernel runs are the
stored ones), e.g. ``kernel.switches.vmscan.pageout_anon_check=true`` for the outcomes of a
model change against the same kernel runs.

Usage: python tools/oom_race.py SCENARIO.toml RESULT.json [--rate-from OTHER.json ...]
       [--set KEY=VALUE ...] [--sweep | --fine] [--out FILE.md]
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

#: The kernel flusher's phases tried, ns (flush_memcg_stats_dwork every 2.016 s). With the lab's
#: reads every second, phase 0 starts on the reads (as 1 s would) and drifts 16 ms a cycle off
#: them; 0.5 s and 1.5 s start with a flush half-way between two reads, in every other second,
#: each in the other ones.
PHASES = (0, 500_000_000, 1_500_000_000)
#: Speeds of the sweep: the simulated workload's progress per wall-clock second against the
#: profile's (1: the profile's CPU with no wait; 0.5: half as far per second).
SWEEP = (2.0, 1.5, 1.25, 1.0, 0.8, 0.65, 0.5, 0.4, 0.3)


def killed(r: RunResult) -> str:
    """``proc/phase @ t s`` for every phase the OOM killer ended, or ``completed``."""
    kills = [f"{p['process']}/{p['phase']} @ {float(p['elapsed_s']):.2f} s" for p in r.phase_records if p.get("outcome") == "oom_killed"]
    return ", ".join(kills) if kills else "completed"


def wait_fraction(r: RunResult) -> float | None:
    """The share of the runners' runnable time they spent waiting for a CPU: run_delay over
    run_delay plus time on a CPU. From the series' per-runner schedstat where the run has it
    (recorded since 2026-11-25: it covers a phase the OOM killer ended, up to the last sample),
    else from the phases that report it (a killed phase reports nothing)."""
    values = r.series.get("values", {})
    delay = cpu = 0
    for key, col in values.items():
        if not (key.startswith("runner[") and key.endswith(".schedstat.run_delay_ns")):
            continue
        cpu_col = values.get(key.replace("run_delay_ns", "cpu_ns"), [])
        seen = [i for i, v in enumerate(col) if v is not None and i < len(cpu_col) and cpu_col[i] is not None]
        if len(seen) >= 2:
            delay += int(col[seen[-1]]) - int(col[seen[0]])
            cpu += int(cpu_col[seen[-1]]) - int(cpu_col[seen[0]])
    if delay + cpu == 0:
        recs = [p for p in r.phase_records if "run_delay_s" in p and "cpu_s" in p]
        delay = sum(float(p["run_delay_s"]) for p in recs)
        cpu = sum(float(p["cpu_s"]) for p in recs)
    return delay / (delay + cpu) if delay + cpu > 0 else None


def simulate(scenario: Scenario, slowdown: float, phase_ns: int) -> RunResult:
    """The scenario with every CPU cost times ``slowdown`` and the kernel flusher at ``phase_ns``."""
    cgroups = scenario.cgroups.model_copy(update={"stats_flusher_phase": phase_ns})
    s = scenario.model_copy(update={"costs": costs_at_speed(scenario.costs, slowdown), "cgroups": cgroups})
    return sim.run(s)


def outcomes(scenario: Scenario, slowdown: float, phases: tuple[int, ...] = PHASES) -> str:
    return "; ".join(f"{p / 1e9:g} s: {killed(simulate(scenario, slowdown, p))}" for p in phases)


def busy_free_rates(runs: list[RunResult], proc: str, phase: str) -> list[float]:
    """The busy-free access rates (accesses over elapsed minus run_delay) of ``proc/phase`` in
    the runs that completed it."""
    out = []
    for r in runs:
        for p in r.phase_records:
            if p["process"] == proc and p["phase"] == phase and p.get("outcome") == "completed" and "run_delay_s" in p:
                t = float(p["elapsed_s"]) - float(p["run_delay_s"])
                if t > 0:
                    out.append(float(p["accesses"]) / t)
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", type=Path)
    ap.add_argument("result", type=Path)
    ap.add_argument(
        "--rate-from",
        type=Path,
        action="append",
        default=[],
        help="more `validate --json` files of the scenario whose completed runs give the kernel's busy-free rate",
    )
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key (the simulator's side)")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--fine", action="store_true", help="the sweep in steps of 5%% from x0.9 to x1.6 (around the profile's speed)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    scenario = load(a.scenario, a.set)
    stored = ValidateResult.load(a.result)
    profile = active_profile()
    ref = profile.measurements.get("speed_probe_ns") if profile is not None else None
    if not isinstance(ref, int | float):
        print("oom_race: the active profile has no speed_probe_ns", file=sys.stderr)
        return 2
    # The timed phase: the one with the most accesses (the random phase of these scenarios).
    base = sim.run(scenario)
    main_phase = max(base.phase_records, key=lambda p: int(p["accesses"]))
    proc, phase = main_phase["process"], main_phase["phase"]
    sim_rate = float(main_phase["accesses_per_s"])
    runs = list(stored.kernel_runs) + [r for f in a.rate_from for r in ValidateResult.load(f).kernel_runs]
    rates = [v for v in busy_free_rates(runs, proc, phase) if v > 0]
    lines = [
        f"{a.result}: {len(stored.kernel_runs)} kernel runs; profile probe {ref:.0f} ns"
        + (f"; simulator with {', '.join(a.set)}" if a.set else ""),
        "",
        f"{proc}/{phase}: the simulator at the profile's speed {sim_rate:,.0f} accesses/s; the kernel's busy-free rate "
        + (
            f"{statistics.median(rates):,.0f}/s (median of {len(rates)} completed runs)"
            if rates
            else "not known (no completed run: pass --rate-from)"
        ),
        "",
        "Per run, the simulator's CPU costs are scaled so that it does per wall-clock second what the kernel's",
        "runner did: by the probe over the profile's, or (second column) by its own rate over the kernel's busy-free",
        "rate, and by 1 / (1 - CPU wait).",
        "",
        "| run | probe ns | CPU wait | kernel | simulator at the run's probe and wait | at the kernel's rate and the run's wait |",
        "|---:|---:|---:|---|---|---|",
    ]
    rate_factor = sim_rate / statistics.median(rates) if rates else None
    waits = []
    for i, r in enumerate(stored.kernel_runs, 1):
        probe = run_probe_ns(r.stats)
        wait = wait_fraction(r)
        if probe is None or wait is None:
            lines.append(f"| {i} | - | - | {killed(r)} | (no probe or run_delay recorded) | |")
            continue
        waits.append(wait)
        stretch = 1 / (1 - min(wait, 0.95))  # CPU work per wall-clock second
        by_probe = probe / ref * stretch
        by_rate = f"x{rate_factor * stretch:.2f}: {outcomes(scenario, rate_factor * stretch)}" if rate_factor else "-"
        lines.append(f"| {i} | {probe:.0f} | {wait:.0%} | {killed(r)} | x{by_probe:.2f}: {outcomes(scenario, by_probe)} | {by_rate} |")
        print(lines[-1], file=sys.stderr)
    if waits:
        lines += ["", f"median CPU wait {statistics.median(waits):.0%}"]
    if a.sweep or a.fine:
        lines += ["", "| CPU costs x | simulator, by flusher phase |", "|---:|---|"]
        slowdowns = [round(0.9 + 0.05 * i, 2) for i in range(15)] if a.fine else [1 / v for v in SWEEP]
        for slowdown in slowdowns:
            lines.append(f"| {slowdown:.2f} | {outcomes(scenario, slowdown, PHASES[:2])} |")
            print(lines[-1], file=sys.stderr)
    text = "\n".join(lines) + "\n"
    if a.out:
        a.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
