"""The kernel's fixed CPU time of one reclaim pass over a memcg (``calibrate`` stage 1c):
``shrink_node_ns``, what one ``shrink_node`` call costs when it finds nothing to reclaim.

What it measures: a cgroup v1 memcg ``reclaimlab-calibrate-pass-<id>`` holding ``mib`` MiB of
mlock()ed anonymous memory (a child process that joins it, calls ``mlockall`` and fills a
buffer), so that everything it charges is on the unevictable list. A write of
``memory.limit_in_bytes`` below its usage then fails with EBUSY after exactly one
``try_to_free_mem_cgroup_pages`` call that reclaims nothing (``mem_cgroup_resize_max``,
6.12 memcontrol-v1.c, read; 6.18 fails the same way: set the limit, fail, ``drain_all_stock``, fail, one reclaim call,
-EBUSY). That call is ``do_try_to_free_pages``: priorities 12 to 0, one ``shrink_node`` each
(one node), then, having reclaimed nothing, the same 13 again with ``memcg_full_walk`` set
(in the 6.12 source; the force_deactivate and memcg_low retries do not fire: no list is active,
no protection is set) -- ``PASSES_PER_FAILED_WRITE`` = 26 calls of ``shrink_node``, each
walking the memcg (``mem_cgroup_iter``), reading its lruvec sizes (``get_scan_count``, all
lists evictable by reclaim empty) and its shrinkers (``shrink_slab``), and ``vmpressure``.

How (``run``), under the lab lock, the cgroup journaled (removed when the stage ends or fails):
each round writes a limit 4 MiB below the usage (fails) and then one 256 MiB above it (succeeds
at once: the syscall, kernfs and ``page_counter_set_max`` without reclaim), each write timed
with ``perf_counter_ns`` and corrected by this thread's schedstat ``run_delay`` over the write
(time the writer waited for a CPU is not kernel work). The figure (``figure``): per cgroup the
median failed write minus the median successful one, over ``PASSES_PER_FAILED_WRITE``; the
median over ``cgroups`` fresh cgroups (the shrinkers a memcg has objects of differ from one
to the next: the spread between cgroups is reported, ``per_cgroup_ns``).

The pure part (``figure``) is tested without a kernel (tests/test_calibrate.py).
"""

from __future__ import annotations

import os
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from reclaimlab.lab import probe as probing
from reclaimlab.lab.errors import LabError, LabUnavailable
from reclaimlab.lab.session import session

__all__ = ["PASSES_PER_FAILED_WRITE", "figure", "run"]

#: shrink_node calls in the one try_to_free_mem_cgroup_pages call of a failed limit write:
#: DEF_PRIORITY + 1 priorities, twice (the memcg_full_walk retry of do_try_to_free_pages).
PASSES_PER_FAILED_WRITE = 2 * 13
MiB = 1 << 20
#: The child: joins the cgroup, locks everything it maps and will map, fills its buffer, says
#: so and waits; PR_SET_PDEATHSIG so that it dies with calibrate (its cgroup can then go).
_CHILD = """
import ctypes, os, sys, signal
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(1, signal.SIGKILL)
with open(sys.argv[1] + "/cgroup.procs", "w") as f:
    f.write(str(os.getpid()))
if libc.mlockall(3) != 0:
    sys.exit("mlockall failed: errno %d" % ctypes.get_errno())
buf = bytearray(int(sys.argv[2]))
for i in range(0, len(buf), 4096):
    buf[i] = 1
sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.read()
"""

_Note = Callable[[str], None]


def figure(per_cgroup: Sequence[Mapping[str, Sequence[int]]]) -> dict[str, Any]:
    """``shrink_node_ns`` from the run-delay-corrected write times of each cgroup
    (``{"failed_ns": [...], "ok_ns": [...]}``): the median over cgroups of
    (median failed - median ok) / PASSES_PER_FAILED_WRITE, and each cgroup's figure."""
    if not per_cgroup:
        raise ValueError("no cgroup measured")
    each = []
    for c in per_cgroup:
        if not c["failed_ns"] or not c["ok_ns"]:
            raise ValueError("a cgroup without failed and successful writes")
        each.append((statistics.median(c["failed_ns"]) - statistics.median(c["ok_ns"])) / PASSES_PER_FAILED_WRITE)
    return {"shrink_node_ns": max(0, round(statistics.median(each))), "per_cgroup_ns": [round(x) for x in each]}


def _run_delay_ns() -> int:
    # /proc/thread-self/schedstat: time on the CPU, time waiting for it (run_delay), slices.
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1])


def _timed_write(path: Path, value: int) -> tuple[int, bool]:
    """One write of ``value``: its time less the run delay over it, and whether it succeeded."""
    d0 = _run_delay_ns()
    t0 = time.perf_counter_ns()
    ok = True
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, str(value).encode())
    except OSError as e:
        if e.errno != 16:  # EBUSY: the limit stayed above the usage, as meant
            raise LabError(f"{path}: writing {value} failed: {e.strerror}") from None
        ok = False
    finally:
        os.close(fd)
    t1 = time.perf_counter_ns()
    return (t1 - t0) - (_run_delay_ns() - d0), ok


def _one_cgroup(root: Path, journal: Any, mib: int, writes: int) -> dict[str, list[int]]:
    d = root / f"reclaimlab-calibrate-pass-{secrets.token_hex(3)}"
    journal.record("cgroup", path=str(d))
    d.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(d), str(mib * MiB)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise LabError(f"the locked-memory process in {d} did not start (exit {child.wait(10)})")
        usage = int((d / "memory.usage_in_bytes").read_text())
        unevictable = 0
        for line in (d / "memory.stat").read_text().splitlines():
            if line.startswith("unevictable "):
                unevictable = int(line.split()[1])
        if unevictable < usage - 4 * MiB:
            raise LabError(f"{d}: {usage} bytes charged but only {unevictable} unevictable (mlockall did not hold)")
        limit = d / "memory.limit_in_bytes"
        out: dict[str, list[int]] = {"failed_ns": [], "ok_ns": []}
        for _ in range(writes):
            t, ok = _timed_write(limit, usage - 4 * MiB)
            if ok:
                raise LabError(f"{d}: a limit below the usage was accepted (something was reclaimable)")
            out["failed_ns"].append(t)
            t, ok = _timed_write(limit, usage + 256 * MiB)
            if not ok:
                raise LabError(f"{d}: a limit above the usage failed")
            out["ok_ns"].append(t)
        return out
    finally:
        child.kill()
        child.wait(10)


def run(cgroups: int = 5, writes: int = 40, mib: int = 16, note: _Note | None = None) -> dict[str, Any]:
    """Measure ``shrink_node_ns`` on this kernel (module docstring); the report."""
    say = note or (lambda _m: None)
    p = probing.probe()
    if not p.root:
        raise LabUnavailable("measuring a reclaim pass needs root: it creates a memory cgroup")
    if not p.cgroup_v1_memory:
        raise LabUnavailable("measuring a reclaim pass needs the cgroup v1 memory controller (memory.limit_in_bytes)")
    root = Path(p.cgroup_v1_memory)
    raw = []
    with (
        session("reclaimlab calibrate (reclaim pass)", note=say) as lab,
        lab.journal(runid=f"reclaim-pass-{secrets.token_hex(2)}", scenario="reclaim pass", busy_retries=19) as journal,
    ):
        for _ in range(cgroups):
            if lab.interrupted:
                break
            raw.append(_one_cgroup(root, journal, mib, writes))
    if not raw:
        raise LabError("reclaim pass: interrupted before the first cgroup")
    fig = figure(raw)
    return {
        "method": (
            f"cgroup v1 memcg of {mib} MiB mlock()ed memory; per cgroup the median of {writes} memory.limit_in_bytes "
            "writes below the usage (EBUSY after one reclaim call) minus the median of writes above it, "
            f"over {PASSES_PER_FAILED_WRITE} shrink_node calls; run_delay subtracted; median over cgroups"
        ),
        "cgroups": len(raw),
        "writes": writes,
        "failed_write_ns": [round(statistics.median(c["failed_ns"])) for c in raw],
        "ok_write_ns": [round(statistics.median(c["ok_ns"])) for c in raw],
        **fig,
    }
