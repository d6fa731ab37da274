"""`make bench`'s peer comparison: libCacheSim's LRU and reclaimlab on the same Zipf trace.

The trace is reclaimlab's own access sequence (the workload crate's Zipf generator, exported by
the throughput bench as a libCacheSim oracleGeneral file), so both sides see the same 20 M
requests over 1 M objects with room for 100 K (reclaimlab writes its 1 M pages once first, 5%
more accesses than the trace, in its time: reading untouched anonymous memory allocates nothing). Each side runs in a process of its own, the two
interleaved run by run (a busy machine slows both alike); times are in-process: reclaimlab's
Simulation::new + run, libCacheSim's reader open + process_trace, in CPU seconds (a busy machine
inflates wall time by whatever else runs). Figures, not a test.

Each reclaimlab case runs in exact mode and in analytic mode (engine.accesses = "analytic",
docs/model/analytic.md).

usage: python peer_libcachesim.py THROUGHPUT_BENCH_BINARY [REPS]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CACHE_OBJECTS = 100_000
OBJECT_SIZE = 4096


def lcs_child(trace: str) -> None:
    import libcachesim as lcs

    t0, c0 = time.perf_counter(), time.process_time()
    reader = lcs.TraceReader(trace, lcs.TraceType.ORACLE_GENERAL_TRACE)
    cache = lcs.LRU(cache_size=CACHE_OBJECTS * OBJECT_SIZE)
    req_miss_ratio, _ = cache.process_trace(reader)
    print(json.dumps({"run_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "miss_ratio": req_miss_ratio}))


def run(cmd: list[str]) -> dict[str, float]:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    if sys.argv[1] == "--lcs":
        return lcs_child(sys.argv[2])
    bench, reps = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    try:
        import libcachesim  # noqa: F401
    except ImportError:
        print("peer comparison skipped: libcachesim is not installed (pip install libcachesim)")
        return
    with tempfile.TemporaryDirectory(prefix="reclaimlab-peer-") as d:
        trace = str(Path(d) / "zipf.oracleGeneral")
        subprocess.run([bench, "--export-zipf", trace], check=True)
        cases = ("peer-swap", "peer-zswap", "peer-swap-analytic", "peer-zswap-analytic")
        times: dict[str, list[float]] = {"libCacheSim LRU": [], **{c: [] for c in cases}}
        miss: dict[str, float] = {}
        for _ in range(reps):
            r = run([sys.executable, __file__, "--lcs", trace])
            times["libCacheSim LRU"].append(r["cpu_s"])
            miss["libCacheSim LRU"] = r["miss_ratio"]
            for case in cases:
                r = run([bench, "--child", case])
                times[case].append(r["build_cpu_s"] + r["run_cpu_s"])
    lru = times["libCacheSim LRU"]
    base = statistics.median(lru)
    print(f"peer: 20 M Zipf(0.99) reads, 1 M objects, 100 K fit; {reps} interleaved runs each, median [min-max] CPU seconds")
    print(f"  libCacheSim LRU (miss ratio {miss['libCacheSim LRU']:.3f}): {base:.2f} [{min(lru):.2f}-{max(lru):.2f}] s")
    for case in cases:
        t = times[case]
        med = statistics.median(t)
        ratios = sorted(x / y for x, y in zip(t, lru, strict=True))
        verdict = "met" if med <= base else "OVER"
        print(
            f"  reclaimlab {case}: {med:.2f} [{min(t):.2f}-{max(t):.2f}] s = {med / base:.2f}x libCacheSim's time"
            f" (pair by pair {statistics.median(ratios):.2f}x [{ratios[0]:.2f}-{ratios[-1]:.2f}]);"
            f" target (issue 17, exact mode) at most 1.00x: {verdict}"
        )


if __name__ == "__main__":
    main()
