"""`make bench`'s start-up case (issue 17, item 3): the CPU a `reclaimlab run` of a small
scenario spends outside the simulator's core.

Each repetition runs the CLI as users do (a new process: interpreter, imports, loading and
lowering the scenario, the simulation, the tables) and takes its CPU time (user + system, from
the child's rusage); the core's share is the CPU of `backends.sim.simulate` on the same lowered
scenario, timed in this process. Both are medians over the repetitions; the figure is their
difference. Usage: bench_startup.py [SCENARIO] [--reps N]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "validation" / "swap-only.toml"


def _child_cpu(argv: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _core_cpu(scenario: Path) -> float:
    import json

    from reclaimlab.backends.sim import simulate
    from reclaimlab.lower import lower
    from reclaimlab.profile import active_profile
    from reclaimlab.scenario import load

    config = json.dumps(lower(load(scenario), active_profile()))
    t0 = time.process_time()
    simulate(config)
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", nargs="?", type=Path, default=DEFAULT_SCENARIO)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    cli = [str(Path(sys.executable).with_name("reclaimlab")), "run", str(args.scenario)]
    env_note = " (PYTHONDONTWRITEBYTECODE is set: modules are compiled on every start)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else ""
    whole = [_child_cpu(cli) for _ in range(args.reps)]
    core = [_core_cpu(args.scenario) for _ in range(args.reps)]
    w, c = statistics.median(whole), statistics.median(core)
    print(f"start-up: `reclaimlab run {args.scenario.name}`, {args.reps} runs{env_note}")
    print(f"  whole process CPU  median {w:.3f} s [{min(whole):.3f}-{max(whole):.3f}]")
    print(f"  core (simulate)    median {c:.3f} s [{min(core):.3f}-{max(core):.3f}]")
    print(f"  outside the core   {w - c:.3f} s (target: under 0.3 s)")


if __name__ == "__main__":
    main()
