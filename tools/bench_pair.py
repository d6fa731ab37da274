"""Paired speed comparison of two builds of the throughput bench (issue 17's "at least 1.5x
main's b4a3387 on every case"): the two binaries' `--child CASE` runs interleaved, A B A B ...,
so a machine whose speed drifts (other work, frequency) slows both sides of a pair alike.

Each child prints its own CPU seconds (build + run, /proc/self/schedstat) and its whole-process
peak RSS; a pair's ratio is old CPU / new CPU (above 1: the new build is faster). Prints, per
case, the median and range of the pair ratios, each side's median CPU seconds, wall seconds
(build + run, beside the simulated time) and peak RSS per simulated page, and whether both
sides simulated the same thing (same page events and simulated time: the comparison is only
fair if they did).

Build the old binary in a scratch worktree (`git worktree add ../old COMMIT`, then
`cargo bench -p reclaimlab-core --bench throughput --no-run` there; a commit whose bench lacks a
case needs this repository's benches/throughput.rs cases copied in).

usage: bench_pair.py OLD_BINARY NEW_BINARY [--reps N] CASE...
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess


def child(binary: str, case: str) -> dict[str, float]:
    out = subprocess.run([binary, "--child", case], check=True, capture_output=True, text=True).stdout
    r: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    print(f"paired runs: {a.reps} pairs per case, old then new, interleaved; ratio = old CPU / new CPU (build + run)")
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for case in a.cases:
        ratios, cpu_old, cpu_new, bpp_old, bpp_new = [], [], [], [], []
        wall_old, wall_new = [], []
        events: tuple[float, float] = (0.0, 0.0)
        same = True
        for _ in range(a.reps):
            o, n = child(a.old, case), child(a.new, case)
            co, cn = o["build_cpu_s"] + o["run_cpu_s"], n["build_cpu_s"] + n["run_cpu_s"]
            ratios.append(co / cn)
            cpu_old.append(co)
            cpu_new.append(cn)
            wall_old.append(o["build_s"] + o["run_s"])
            wall_new.append(n["build_s"] + n["run_s"])
            bpp_old.append(o["peak_rss"] / o["pages"])
            bpp_new.append(n["peak_rss"] / n["pages"])
            same &= o["page_events"] == n["page_events"] and o["sim_s"] == n["sim_s"]
            events = (o["page_events"], n["page_events"])
        med = statistics.median(ratios)
        print(
            f"{case}: old/new {med:.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]  CPU s old {statistics.median(cpu_old):.2f}"
            f" new {statistics.median(cpu_new):.2f}  wall s old {statistics.median(wall_old):.1f}"
            f" new {statistics.median(wall_new):.1f}  simulated s {o['sim_s']:.1f}"
            f"  B/page old {statistics.median(bpp_old):.1f} new {statistics.median(bpp_new):.1f}"
            f"  {'same work' if same else f'DIFFERENT work (page events old {events[0]:.0f} new {events[1]:.0f}, or simulated time)'}"
        )
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
