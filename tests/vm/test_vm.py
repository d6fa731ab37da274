"""The VM lab with a guest: one small boot + v2 scenario, and what a killed driver leaves.

Skipped, with the reason, where the VM lab is not installed (`make vmlab`). Each test boots a
384 MiB guest for a few seconds (well under a minute under TCG on this project's machines).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from reclaimlab.vm.cache import VmUnavailable, installed_kernel, missing_tools

REPO = Path(__file__).resolve().parents[2]
TINY = Path(__file__).with_name("tiny-v2.toml")


def _vm_skip_reason() -> str | None:
    missing = missing_tools()
    if missing:
        return f"the VM lab is not installed (missing {', '.join(missing)}): run `make vmlab`"
    try:
        installed_kernel("debian-6.12")
    except VmUnavailable as e:
        return str(e)
    if not Path("/dev/kvm").exists() and os.cpu_count() is None:  # pragma: no cover - never on Linux
        return "no CPU count"
    return None


pytestmark = [pytest.mark.native]
_reason = _vm_skip_reason()
if _reason is not None:
    pytestmark.append(pytest.mark.skip(reason=_reason))


def _descendants(pid: int) -> set[int]:
    """Every live process whose parent chain reaches ``pid`` (from /proc/*/stat)."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        parents[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    out: set[int] = set()
    frontier = {pid}
    while frontier:
        kids = {c for c, p in parents.items() if p in frontier and c not in out}
        out |= kids
        frontier = kids
    return out


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _alive(pids: set[int]) -> set[int]:
    return {p for p in pids if Path(f"/proc/{p}").exists() and "Z" not in Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[:1]}


def _tmp_entries() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith("reclaimlab")}


def test_tiny_v2_scenario_in_the_guest() -> None:
    import reclaimlab
    from reclaimlab.backends import vm

    t0 = time.monotonic()
    # --trace vmscan: the guest's hist triggers (they cost the run nothing measurable)
    r = vm.run(reclaimlab.load(TINY, ['trace=["vmscan"]']), build=False, timeout_s=150, on_note=None)
    wall = time.monotonic() - t0
    c = r.counters
    assert r.backend == "vm" and r.provenance["vm"]["release"].startswith("6.12.")
    assert r.provenance["vm"]["lru_gen_enabled"] == "0x0000"  # MGLRU off by default, as the model
    assert r.provenance["vm"]["zswap_params"]["enabled"] == "Y"
    # khugepaged's recommended min_free_kbytes (THP madvise), capped at 5% of the 384 MiB guest's
    # managed pages; the model's formula gives the same from the guest's MemTotal (vmscan.rs tests)
    assert r.provenance["vm"]["min_free_kbytes"] == "17144"
    # 24 MiB under a 16 MiB memory.max: the limit was hit and reclaim stored pages in zswap ...
    assert c["memcg[/w].memory.events.max"] > 0
    assert c["vmstat.zswpout"] > 2000 and c["memcg[/w].memory.stat.zswpout"] == c["vmstat.zswpout"]
    # ... the random pages did not compress and went to the disk (6.12: reject_compress_fail)
    assert c["zswap.reject_compress_fail"] > 0 and c["vmstat.pswpout"] > 0
    # ... and v2 global pgscan stays 0 under memcg reclaim; memory.stat has it
    assert c["memcg[/w].memory.stat.pgscan"] > 0
    assert [(p["phase"], p["accesses"]) for p in r.phase_records] == [("fill0", 4096), ("fill1", 2048), ("access", 20000)]
    assert r.stats["boot_s"] < 60 and wall < 170
    assert r.series["t"][0] == 0.0 and len(r.series["t"]) >= 2
    # the tracepoints agree with memory.stat: every folio memcg reclaim scanned and freed went
    # through mm_vmscan_lru_shrink_inactive (MGLRU off), and reclaim ran under the memcg's limit
    scanned = sum(c[f"trace.mm_vmscan_lru_shrink_inactive.priority.{p}.nr_scanned"] for p in range(13))
    reclaimed = sum(c[f"trace.mm_vmscan_lru_shrink_inactive.priority.{p}.nr_reclaimed"] for p in range(13))
    assert scanned == c["memcg[/w].memory.stat.pgscan"] and reclaimed == c["memcg[/w].memory.stat.pgsteal"]
    assert c["trace.mm_vmscan_memcg_reclaim_begin.calls"] > 0 and r.stats["trace_dropped"] == 0


def test_killed_driver_leaves_no_guest_and_no_files() -> None:
    before_tmp = _tmp_entries()
    code = (
        "import reclaimlab; from reclaimlab.backends import vm;"
        f"vm.run(reclaimlab.load({str(TINY)!r}, ['processes.0.phases.access.count=10000000']), build=False, timeout_s=150)"
    )
    for how in (signal.SIGKILL, signal.SIGTERM):
        driver = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            qemu: set[int] = set()
            while time.monotonic() < deadline and not qemu:
                time.sleep(0.2)
                qemu = {p for p in _descendants(driver.pid) if _comm(p).startswith("qemu-system")}
                assert driver.poll() is None, driver.stderr.read().decode() if driver.stderr else ""
            assert qemu, "QEMU did not start within 60 s"
            tree = _descendants(driver.pid)
            time.sleep(2.0)  # the guest boots and starts the workload
            driver.send_signal(how)
            driver.wait(timeout=30)
            if how == signal.SIGTERM:
                assert driver.returncode != 0
                assert b"interrupted by SIGTERM" in (driver.stderr.read() if driver.stderr else b"")
            end = time.monotonic() + 15
            while _alive(tree) and time.monotonic() < end:
                time.sleep(0.2)
            assert not _alive(tree), f"left running after {how.name}: {[(p, _comm(p)) for p in _alive(tree)]}"
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
            if driver.stderr is not None:
                driver.stderr.close()
    assert _tmp_entries() <= before_tmp
