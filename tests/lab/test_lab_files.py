"""File phases on this host's real kernel: the lab's filesystems (image, loop device, mkfs,
mount), the dirty limit sysctls, and that nothing is left behind, also after SIGKILL of the
driver + `lab restore`. Needs the real runner (the fake one has no file phases)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import reclaimlab
from lab.labutil import Lab
from reclaimlab.backends import kernel
from reclaimlab.lab import host
from reclaimlab.lab.journal import JOURNAL_NAME, read_entries

pytestmark = pytest.mark.lab

#: A 32 MiB file under a 24 MiB v1 memcg: written (fsync every 8 MiB), read, then stored to
#: through a shared mapping; the dirty limits in bytes (the pair the host does not use, so
#: that restoring them exercises the exclusive ratio/bytes pairs). About a second.
TINY_FILE = """\
schema_version = 1
seed = 7
[machine]
memory = "host"
cpus = "host"
[[machine.filesystems]]
name = "data"
type = "FSTYPE"
device = "virtio-disk"
[kernel]
vm.dirty_bytes = 4194304
vm.dirty_background_bytes = 1048576
[cgroups]
cgroup_version = 1
[cgroups.groups.workload]
"memory.limit_in_bytes" = "24MiB"
[[processes]]
name = "w"
cgroup = "workload"
[[processes.files]]
name = "log"
size = "32MiB"
content = "text"
[[processes.phases]]
name = "write"
kind = "write"
file = "log"
fsync_every = "8MiB"
[[processes.phases]]
name = "read"
kind = "read"
file = "log"
[[processes.phases]]
name = "map"
kind = "mmap"
file = "log"
write_percent = 10
"""


def _need_real(lab: Lab, fstype: str = "ext4") -> None:
    if lab.runner != "real":
        pytest.skip("the fake runner has no file phases")
    if shutil.which(f"mkfs.{fstype}") is None:
        pytest.skip(f"mkfs.{fstype} is not installed (make lab-tools)")
    if shutil.which("losetup") is None:
        pytest.skip("losetup is not installed")


def _scenario(tmp_path: Path, fstype: str = "ext4", extra: str = "") -> Path:
    p = tmp_path / f"files-{fstype}.toml"
    p.write_text(TINY_FILE.replace("FSTYPE", fstype) + extra, encoding="utf-8")
    return p


@pytest.mark.parametrize("fstype", ["ext4", "xfs"])
def test_file_phases_end_to_end_leave_nothing_behind(lab: Lab, tmp_path: Path, fstype: str) -> None:
    _need_real(lab, fstype)
    r = kernel.run(reclaimlab.load(_scenario(tmp_path, fstype)), on_note=None)
    assert lab.state_now() == lab.before  # no mount, loop device, image; sysctls as they were
    assert list(r.phases["phase"]) == ["write", "read", "map"]
    assert list(r.phases["accesses"]) == [8192, 8192, 8192]
    c = r.counters
    # The file is larger than the memcg: the kernel reclaimed page cache and wrote the dirty
    # pages; the second pass (read) refaulted what the write pass's pages left as shadows.
    assert c["memcg[/workload].memory.stat.total_pgpgout"] > 0
    assert c["memcg[/workload].memory.stat.total_workingset_refault_file"] > 0
    assert 0 < c["memcg[/workload].memory.stat.cache"] <= 24 << 20
    after = r.raw["after"]
    # At least the 32 MiB written once (64 Ki sectors) went to the loop device.
    assert after["block[data].stat.write_sectors"] - r.raw["before"]["block[data].stat.write_sectors"] >= 32 << 11
    assert "block[data].stat.write_sectors" in r.series["values"]
    # Only the fields the simulator exports are counters; sectors are in raw and the series.
    assert {k for k in c if k.startswith("block[")} == {
        f"block[data].stat.{f}" for f in ("read_ios", "read_merges", "write_ios", "write_merges", "flush_ios")
    }
    assert c["block[data].stat.write_ios"] > 0


def _kill_driver_in_its_phases(lab: Lab, path: Path, tmp_path: Path) -> dict[str, Any]:
    """Start the driver on ``path`` (its runner outlives it), wait until the runner is in its
    cgroup and a second into its phases, then SIGKILL the driver. Returns the runner's journal
    entry. Fails if the driver ends by itself before the kill."""
    journal = lab.state / JOURNAL_NAME
    driver = lab.start_driver(path, tmp_path / "driver.log", orphan_runner=True)
    try:
        deadline = time.monotonic() + 120
        runner: dict[str, Any] | None = None
        while runner is None or not _in_cgroup(journal, runner):
            if driver.poll() is not None:
                raise AssertionError(f"the driver exited early ({driver.returncode}): {(tmp_path / 'driver.log').read_text()}")
            assert time.monotonic() < deadline, "timed out waiting for the runner to be in its cgroup"
            time.sleep(0.05)
            if runner is None and journal.exists():
                runner = next((e for e in read_entries(journal) if e["op"] == "runner"), None)
        time.sleep(1.0)  # into its phases
        if driver.poll() is not None:
            raise AssertionError(f"the driver ended before the kill ({driver.returncode}): {(tmp_path / 'driver.log').read_text()}")
    finally:
        if driver.poll() is None:  # only the driver we started, while it runs (a reaped pid may be reused)
            os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
    assert runner is not None
    return runner


def test_killed_driver_then_lab_restore_removes_the_filesystem(lab: Lab, tmp_path: Path) -> None:
    _need_real(lab)
    path = _scenario(tmp_path, extra='[[processes.phases]]\nkind = "sleep"\nduration = "60s"\n')
    runner = _kill_driver_in_its_phases(lab, path, tmp_path)

    left = lab.state_now()
    assert left["mounts"] and left["loop_devices"] and left["fs_images"], left
    assert host.read_text("/proc/sys/vm/dirty_bytes").strip() == "4194304"
    assert host.pid_alive(runner["pid"], runner["start_time"])
    r = subprocess.run(
        [sys.executable, "-m", "reclaimlab", "lab", "restore"], env=lab.env, capture_output=True, text=True, timeout=120, check=False
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "unmounted" in r.stdout and "detached /dev/loop" in r.stdout and "removed filesystem image" in r.stdout
    assert "vm.dirty_ratio/vm.dirty_bytes" in r.stdout
    assert lab.state_now() == lab.before


def _in_cgroup(journal: Path, runner: dict[str, Any]) -> bool:
    cgroups = [Path(e["path"]) for e in read_entries(journal) if e["op"] == "cgroup"]
    try:
        return bool(cgroups) and str(runner["pid"]) in host.read_text(cgroups[-1] / "cgroup.procs").split()
    except OSError:
        return False


#: A 16 MiB tmpfs file written and read under an 8 MiB v1 memcg with zswap (so its pages go to
#: zswap and come back), and 64 files of 64 KiB created with fsync on ext4 (fs_mark's loop).
TMPFS_AND_CREATE = """\
schema_version = 1
seed = 9
[machine]
memory = "host"
cpus = "host"
[[machine.swap]]
name = "swapfile"
kind = "file"
size = "64MiB"
device = "virtio-disk"
[[machine.filesystems]]
name = "shm"
type = "tmpfs"
size = "32MiB"
[[machine.filesystems]]
name = "data"
type = "ext4"
device = "virtio-disk"
[kernel]
zswap.enabled = true
zswap.compressor = "lzo"
[cgroups]
cgroup_version = 1
[cgroups.groups.workload]
"memory.limit_in_bytes" = "8MiB"
[[processes]]
name = "t"
cgroup = "workload"
[[processes.files]]
name = "tmp"
size = "16MiB"
content = "text"
filesystem = "shm"
[[processes.phases]]
name = "write"
kind = "write"
file = "tmp"
[[processes.phases]]
name = "read"
kind = "read"
file = "tmp"
[[processes.phases]]
name = "create"
kind = "create_files"
files = 64
size = "64KiB"
sync = "fsync"
content = "text"
filesystem = "data"
"""


def test_tmpfs_and_create_files_run_in_the_cgroup_and_leave_nothing_behind(lab: Lab, tmp_path: Path) -> None:
    _need_real(lab)
    path = tmp_path / "tmpfs-create.toml"
    path.write_text(TMPFS_AND_CREATE, encoding="utf-8")
    r = kernel.run(reclaimlab.load(path), on_note=None)
    assert lab.state_now() == lab.before  # no mount (tmpfs included), loop device, image
    assert list(r.phases["phase"]) == ["write", "read", "create"]
    assert list(r.phases["accesses"]) == [4096, 4096, 64 * 16]
    c = r.counters
    # The runner made the tmpfs file inside its cgroup (as holes), so the pages the write
    # phase filled are the cgroup's shmem; over its 8 MiB they went to zswap and the read
    # brought them back.
    assert c["memcg[/workload].memory.stat.shmem"] > 0
    assert c["memcg[/workload].memory.stat.total_pgpgin"] >= 4096
    assert c["vmstat.zswpout"] > 0 and c["vmstat.zswpin"] > 0
    # The created files went to the loop device: 4 MiB of data at least.
    assert r.raw["after"]["block[data].stat.write_sectors"] - r.raw["before"]["block[data].stat.write_sectors"] >= 4 << 11


def test_killed_driver_then_lab_restore_unmounts_the_tmpfs(lab: Lab, tmp_path: Path) -> None:
    _need_real(lab)
    path = tmp_path / "tmpfs-sleep.toml"
    # A roomier limit than the end-to-end test's: at 8 MiB the kernel sometimes OOM-kills the
    # runner in its create phase, the driver then restores everything itself, and there is
    # nothing left for `lab restore` to do. This test needs the runner alive in its sleep.
    roomy = TMPFS_AND_CREATE.replace('"memory.limit_in_bytes" = "8MiB"', '"memory.limit_in_bytes" = "64MiB"')
    assert roomy != TMPFS_AND_CREATE
    path.write_text(roomy + '[[processes.phases]]\nkind = "sleep"\nduration = "60s"\n', encoding="utf-8")
    _kill_driver_in_its_phases(lab, path, tmp_path)

    left = lab.state_now()
    assert len([m for m in left["mounts"] if "/mnt/" in m]) == 2, left  # the tmpfs and the ext4
    r = subprocess.run(
        [sys.executable, "-m", "reclaimlab", "lab", "restore"], env=lab.env, capture_output=True, text=True, timeout=120, check=False
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("unmounted") >= 2, r.stdout
    assert lab.state_now() == lab.before
