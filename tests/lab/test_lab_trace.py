"""--trace on this host's kernel (lab.tracing): the traced reclaim sums against the kernel's
own counters, and the host left as it was found, also after SIGKILL + `lab restore`. Seconds
each; skipped where the lab cannot run or the kernel has no tracefs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import reclaimlab
from lab.labutil import TINY, Lab
from reclaimlab.backends import kernel
from reclaimlab.lab import host, tracing
from reclaimlab.lab.errors import RunnerFailed
from reclaimlab.lab.journal import JOURNAL_NAME, read_entries
from reclaimlab.lab.probe import probe

pytestmark = pytest.mark.lab


@pytest.fixture
def traceable(lab: Lab) -> Lab:
    why = tracing.check(probe().tracefs_supported)
    if why:
        pytest.skip(f"--trace on the host: {why}")
    return lab


def _run(path: Path, *overrides: str) -> Any:
    s = reclaimlab.load(path, overrides)
    try:
        return kernel.run(s, on_note=None)
    except RunnerFailed as e:  # the memcg OOM killer under the tight limit (test_lab._run)
        if "SIGKILL" not in str(e):
            raise
        return kernel.run(s, on_note=None)


def _sum(counters: dict[str, int], event: str, field: str) -> int:
    return sum(v for k, v in counters.items() if k.startswith(f"trace.{event}.priority.") and k.endswith(f".{field}"))


def test_traced_scans_equal_the_kernels_pgscan_pgsteal(traceable: Lab, tmp_path: Path) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY, encoding="utf-8")
    r = _run(path, 'trace=["vmscan"]')
    # tracefs unmounted again (the lab mounted it), swap, zswap, cgroups as they were.
    assert traceable.state_now() == traceable.before
    c = r.counters
    assert r.stats["trace_dropped"] == 0
    assert c["trace.mm_vmscan_memcg_reclaim_begin.calls"] > 0
    scanned = _sum(c, "mm_vmscan_lru_shrink_inactive", "nr_scanned")
    reclaimed = _sum(c, "mm_vmscan_lru_shrink_inactive", "nr_reclaimed")
    # cgroup v1 has no pgscan/pgsteal in memory.stat; /proc/vmstat's pgscan_anon/_file count
    # every reclaimer's scans (the memcg's limit reclaim, kswapd, other tasks' direct reclaim).
    # The trace counts the runners' and kswapd's: equal unless another task reclaimed directly.
    vm_scan = c["vmstat.pgscan_anon"] + c.get("vmstat.pgscan_file", 0)
    vm_steal = c["vmstat.pgsteal_anon"] + c.get("vmstat.pgsteal_file", 0)
    assert scanned > 0 and reclaimed > 0
    if c["vmstat.pgscan_direct"] == 0:
        assert (scanned, reclaimed) == (vm_scan, vm_steal)
    else:
        assert scanned <= vm_scan and reclaimed <= vm_steal
    if c["vmstat.pgscan_direct"] == 0 and c["vmstat.pgscan_kswapd"] == 0:
        # Only the memcg's limit reclaim ran: what its invocations say they reclaimed is what
        # their LRU scans reclaimed (v1 limit reclaim frees no slab pages into nr_reclaimed).
        assert c["trace.mm_vmscan_memcg_reclaim_end.nr_reclaimed"] == reclaimed
    print(f"[{traceable.runner}] traced scanned={scanned} reclaimed={reclaimed}; vmstat pgscan={vm_scan} pgsteal={vm_steal}")


@contextlib.contextmanager
def _tracefs_mounted() -> Iterator[None]:
    """tracefs mounted for the block (by the test, unmounted after, only if it mounted it)."""
    mounted = any(m.fstype == "tracefs" and m.point == str(tracing.TRACEFS) for m in host.mounts())
    if not mounted:
        host.run_tool(["mount", "-t", "tracefs", "tracefs", str(tracing.TRACEFS)])
    try:
        yield
    finally:
        if not mounted:
            host.run_tool(["umount", str(tracing.TRACEFS)])


def test_a_mounted_tracefs_is_left_as_it_was(traceable: Lab, tmp_path: Path) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY, encoding="utf-8")
    with _tracefs_mounted():
        before = traceable.state_now()
        assert before["tracefs"]["set_event"] == [] and "buffer_size_kb" in before["tracefs"]
        r = _run(path, 'trace=["vmscan", "shrinker"]')
        # Mounted still; events disabled, tracing_on, buffer size and (empty) buffer as before.
        assert traceable.state_now() == before
    assert r.counters["trace.mm_vmscan_memcg_reclaim_begin.calls"] > 0
    assert traceable.state_now() == traceable.before


#: TINY with room to spare (at 28 MiB the kernel sometimes OOM-kills the runner, and a run that
#: ended by itself leaves nothing for `lab restore`) and a sleep that keeps it running.
SHORT_SLEEP = TINY.replace('"memory.limit_in_bytes" = "28MiB"', '"memory.limit_in_bytes" = "48MiB"') + (
    '[[processes.phases]]\nkind = "sleep"\nduration = "30s"\n'
)


def test_killed_driver_then_lab_restore_undoes_tracing(traceable: Lab, tmp_path: Path) -> None:
    path = tmp_path / "sleepy.toml"
    path.write_text(SHORT_SLEEP, encoding="utf-8")
    journal = traceable.state / JOURNAL_NAME
    driver = traceable.start_driver(path, tmp_path / "driver.log", "--trace", "vmscan,shrinker")
    try:
        deadline = time.monotonic() + 60
        while not (journal.exists() and "runner" in [e["op"] for e in read_entries(journal)]):
            assert driver.poll() is None, f"the driver exited early: {(tmp_path / 'driver.log').read_text()}"
            assert time.monotonic() < deadline, "timed out waiting for the runner in the journal"
            time.sleep(0.05)
        time.sleep(1.0)  # into the run: tracing on, the reader reading
        assert driver.poll() is None
    finally:
        if driver.poll() is None:  # only the driver we started, while it runs (a reaped pid may be reused)
            os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
    left = traceable.state_now()
    assert left["tracefs"]["mounts"] == [str(tracing.TRACEFS)] and left["tracefs"]["set_event"], left["tracefs"]
    r = subprocess.run(
        [sys.executable, "-m", "reclaimlab", "lab", "restore"],
        env=traceable.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tracefs:" in r.stdout and f"unmounted {tracing.TRACEFS}" in r.stdout
    assert traceable.state_now() == traceable.before
