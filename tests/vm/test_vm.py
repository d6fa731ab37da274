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
TINY_FS = Path(__file__).with_name("tiny-fs-v2.toml")


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


def test_file_scenario_in_the_guest() -> None:
    """An ext4 image made on the host (a virtio disk) and a tmpfs in the guest: the file
    counters come back under the host lab's keys. (That the image has no name is
    test_vm_fs_unit's; the host's mounts and loop devices are not compared here: host lab runs
    of others change them meanwhile.)"""
    import reclaimlab
    from reclaimlab.backends import vm

    r = vm.run(reclaimlab.load(TINY_FS), build=False, timeout_s=200, on_note=None)
    c = r.counters
    fss = r.provenance["vm"]["filesystems"]
    assert [(f["name"], f["backing"], f.get("device")) for f in fss] == [("data", "virtio-blk", "/dev/vda"), ("shm", "tmpfs", None)]
    assert [(p["phase"], p["accesses"]) for p in r.phase_records] == [("write", 12288), ("read", 12288), ("shm", 2048)]
    # 48 MiB written through a 24 MiB memory.max: at least half of it went to the disk (kB) ...
    assert c["vmstat.pgpgout"] >= 24 << 10 and c["block[data].stat.write_ios"] > 0
    # ... and read back after the caches were dropped (the run starts with nothing cached)
    assert c["vmstat.pgpgin"] >= 24 << 10 and c["block[data].stat.read_ios"] > 0
    assert c["memcg[/w].memory.stat.pgsteal"] > 0 and c["vmstat.nr_vmscan_write"] == 0
    # the tmpfs file stays charged as shmem (no swap)
    assert c["memcg[/w].memory.stat.shmem"] >= 8 << 20
    for key in ("file", "file_dirty", "file_writeback", "file_mapped", "active_file", "inactive_file"):
        assert f"memcg[/w].memory.stat.{key}" in c
    for key in ("vmstat.nr_dirty", "vmstat.nr_writeback", "vmstat.nr_file_pages", "meminfo.Dirty", "meminfo.Cached"):
        assert key in c


def test_killed_driver_leaves_no_guest_and_no_files() -> None:
    before_tmp = _tmp_entries()
    code = (
        "import reclaimlab; from reclaimlab.backends import vm;"
        f"vm.run(reclaimlab.load({str(TINY)!r}, ['processes.0.phases.access.count=10000000']), build=False, timeout_s=150)"
    )
    # a file run too: its ext4 image is an unnamed file like the swap disk's
    code_fs = (
        "import reclaimlab; from reclaimlab.backends import vm;"
        f"vm.run(reclaimlab.load({str(TINY_FS)!r}, ['processes.0.files.stream.size=1GiB']), build=False, timeout_s=150)"
    )
    for how, prog in ((signal.SIGKILL, code), (signal.SIGTERM, code), (signal.SIGKILL, code_fs)):
        driver = subprocess.Popen([sys.executable, "-c", prog], cwd=REPO, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
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
