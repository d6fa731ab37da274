"""Put a lowered scenario's machine, kernel knobs and cgroups in place on the host.

Every change is journaled (``Journal.record``) *before* it is made, with what undoing it needs;
``journal.restore`` undoes them. Values equal to what the host already has are not written (and
not journaled): the lab changes as little as it can. The order is chosen so that the reverse
order restores cleanly:

1. mount debugfs privately if it is not mounted (for the zswap counters);
2. sysctls (before the cgroups: a new v1 memcg takes its ``memory.swappiness`` from its parent,
   which for the run's top cgroup is ``vm.swappiness``); every knob the core declares, by its
   kernel file (``lab.knobs``). The dirty limits are pairs (``dirty_ratio``/``dirty_bytes``,
   ``dirty_background_ratio``/``dirty_background_bytes``) of which the kernel keeps one: each
   pair is journaled as one ``dirty_limit`` entry and the one the scenario sets is written;
3. cgroups, parents first, each one's files written before its children are created;
4. swap devices (swap file: fallocate, chmod 600, mkswap, swapon; zram: hot_add,
   comp_algorithm, disksize, mkswap, swapon);
5. the sysfs knobs (zswap's parameters), ``enabled`` last;
6. the filesystems (``lab.filesystems``): image, loop device, mkfs, mount.

Runners are started (and journaled) by the backend after this.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reclaimlab.lab import filesystems, host, knobs
from reclaimlab.lab.errors import LabError
from reclaimlab.lab.journal import Journal
from reclaimlab.lab.probe import Probe
from reclaimlab.native import Knob
from reclaimlab.scenario import cgroup_files

__all__ = ["Applied", "SwapDevice", "apply", "new_runid"]


#: The dirty limit pairs (/proc/sys/vm files): the kernel keeps one of each pair set.
DIRTY_PAIRS = (("dirty_ratio", "dirty_bytes"), ("dirty_background_ratio", "dirty_background_bytes"))


def new_runid() -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{secrets.token_hex(2)}"


@dataclass
class SwapDevice:
    name: str  # the scenario's name
    kind: str  # "file" or "zram"
    path: str  # what swapon was given: the file, or /dev/zramN
    zram_id: int | None = None
    key: str | None = None  # counter prefix for zram devices: zram<k>, k = index among the scenario's zram devices
    priority: int | None = None  # what /proc/swaps shows


@dataclass
class Applied:
    """What apply() put in place, for the recorder and the runners."""

    runid: str
    cgroup_version: int
    cgroup_root: Path  # the run's top cgroup, which stands for the scenario's "/"
    cgroup_dirs: dict[str, Path] = field(default_factory=dict)  # scenario path ("/", "/a") -> directory
    swaps: list[SwapDevice] = field(default_factory=list)
    debugfs: Path | None = None
    filesystems: list[filesystems.MountedFs] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def zswap_dir(self) -> Path | None:
        if self.debugfs is None:
            return None
        d = self.debugfs / "zswap"
        return d if d.is_dir() else None


class _Applier:
    def __init__(self, journal: Journal, probe: Probe, config: dict[str, Any], runid: str, state: Path):
        self.j = journal
        self.p = probe
        self.c = config
        self.state = state
        version = config["cgroups"]["version"]
        base = probe.cgroup_v1_memory if version == 1 else probe.cgroup_v2
        if base is None:
            raise LabError(f"no cgroup v{version} memory hierarchy on this host")
        self.out = Applied(runid=runid, cgroup_version=version, cgroup_root=Path(base, f"reclaimlab-{runid}"))

    # 1. debugfs --------------------------------------------------------------------------
    def debugfs(self) -> None:
        if self.p.debugfs_mount is not None:
            self.out.debugfs = Path(self.p.debugfs_mount)
            return
        if not self.p.debugfs_supported:
            return
        point = self.state / f"debugfs-{self.out.runid}"
        self.j.record("mount", path=str(point), fstype="debugfs", created_dir=True)
        point.mkdir(mode=0o700)
        host.run_tool(["mount", "-t", "debugfs", "debugfs", str(point)])  # no options: they could reconfigure the shared superblock
        self.out.debugfs = point

    # 2. sysctls --------------------------------------------------------------------------
    def sysctls(self) -> None:
        writes = knobs.sysctl_writes(self.c)
        by_file = {Path(k.kernel_file).name: (k, want) for k, want in writes}
        for ratio, nbytes in DIRTY_PAIRS:
            self._dirty_pair(ratio, nbytes, by_file)
        paired = {name for pair in DIRTY_PAIRS for name in pair}
        for k, want in writes:
            if Path(k.kernel_file).name not in paired:
                self._knob(k, want)

    def _dirty_pair(self, ratio: str, nbytes: str, by_file: dict[str, tuple[Knob, str]]) -> None:
        """One dirty limit pair: write ``*_bytes`` if the scenario sets it, else ``*_ratio``
        (which zeroes ``*_bytes`` on the host if it was set); journaled as one entry whose
        undo writes back whichever of the two the host had set."""
        ratio_path, bytes_path = knobs.SYSCTL_DIR / "vm" / ratio, knobs.SYSCTL_DIR / "vm" / nbytes
        if not ratio_path.exists() or not bytes_path.exists():
            return
        if nbytes in by_file:
            path, want = bytes_path, by_file[nbytes][1]
        elif ratio in by_file:
            path, want = ratio_path, by_file[ratio][1]
        else:
            return
        old_ratio, old_bytes = host.read_text(ratio_path).strip(), host.read_text(bytes_path).strip()
        if knobs.same(host.read_text(path).strip(), want) and (path == bytes_path or old_bytes == "0"):
            return
        self.j.record(
            "dirty_limit",
            name=f"vm.{ratio}/vm.{nbytes}",
            ratio_path=str(ratio_path),
            bytes_path=str(bytes_path),
            old_ratio=old_ratio,
            old_bytes=old_bytes,
        )
        host.write_text(path, want)
        now = host.read_text(path).strip()
        if not knobs.same(now, want):
            raise LabError(f"vm.{path.name}: wrote {want!r} to {path} but it reads {now!r}")

    def _knob(self, k: Knob, want: str) -> None:
        """Write one knob's file, journaled first; left alone if it already says ``want``, or
        if it does not exist (check() refused scenarios that need a file the host lacks)."""
        path = Path(k.kernel_file)
        if not path.exists():
            return
        old = knobs.current(host.read_text(path))
        if knobs.same(old, want):
            return
        self.j.record("knob", name=k.key, path=str(path), old=old)
        host.write_text(path, want)
        now = host.read_text(path).strip()
        if not knobs.same(now, want):
            raise LabError(f"{k.key}: wrote {want!r} to {path} but it reads {now!r}")

    # 3. cgroups --------------------------------------------------------------------------
    def cgroups(self) -> None:
        groups = self.c["cgroups"]["groups"]
        v2 = self.out.cgroup_version == 2
        parents = {g["parent"] for g in groups if g["parent"] is not None}
        for i, g in enumerate(groups):
            path = g["path"]
            d = self.out.cgroup_root if path == "/" else self.out.cgroup_root / path.lstrip("/")
            self.j.record("cgroup", path=str(d))
            d.mkdir()
            self.out.cgroup_dirs[path] = d
            for f in cgroup_files.written(2 if v2 else 1):
                text = f.text(g.get(f.lowered))
                if text is not None:
                    host.write_text(d / f.name, text)
            if v2 and i in parents:
                host.write_text(d / "cgroup.subtree_control", "+memory")

    # 4. swap -----------------------------------------------------------------------------
    def swaps(self) -> None:
        zram_index = 0
        for i, sw in enumerate(self.c["machine"]["swap"]):
            if sw["kind"] == "zram":
                dev = self._zram(sw, zram_index)
                zram_index += 1
            else:
                dev = self._swapfile(sw, i)
            self._swapon(dev, int(sw["priority"]))
            self.out.swaps.append(dev)

    def _swapfile(self, sw: dict[str, Any], i: int) -> SwapDevice:
        d = self.state / "swap"
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = d / f"{self.out.runid}-{i}.swap"
        self.j.record("swapfile", path=str(path))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.posix_fallocate(fd, 0, int(sw["size_bytes"]))
            os.fsync(fd)
        except OSError as e:
            raise LabError(f"cannot allocate the swap file {path} ({sw['size_bytes']} bytes): {e.strerror or e}") from None
        finally:
            os.close(fd)
        os.chmod(path, 0o600)
        host.run_tool(["mkswap", str(path)])
        return SwapDevice(name=sw["name"], kind="file", path=str(path))

    def _zram(self, sw: dict[str, Any], k: int) -> SwapDevice:
        if self.p.zram_hot_add:
            token = secrets.token_hex(4)
            existing = sorted(z.id for z in self.p.zram_devices)
            self.j.record("zram_hot_add", token=token, existing=existing)
            zid = int(host.read_text(host.ZRAM_CONTROL / "hot_add").strip())  # reading creates the device
            self.j.record("zram_added", token=token, id=zid)
        else:
            used = {self._zram_id(s) for s in host.active_swaps()}
            free = [z.id for z in self.p.zram_devices if z.disksize == 0 and z.initstate == 0 and z.id not in used]
            free = [z for z in free if z not in {s.zram_id for s in self.out.swaps}]
            if not free:
                raise LabError("no unused zram device, and no zram-control/hot_add to add one")
            zid = free[0]
        sysdir = Path(f"/sys/block/zram{zid}")
        self.j.record("zram_config", id=zid)
        alg = sw.get("comp_algorithm")
        if alg:
            host.write_text(sysdir / "comp_algorithm", str(alg))
        host.write_text(sysdir / "disksize", str(int(sw["size_bytes"])))
        dev = Path(f"/dev/zram{zid}")
        host.wait_for_path(dev, f"adding zram{zid}")
        host.run_tool(["mkswap", str(dev)])
        return SwapDevice(name=sw["name"], kind="zram", path=str(dev), zram_id=zid, key=f"zram{k}")

    @staticmethod
    def _zram_id(path: str) -> int | None:
        name = Path(path).name
        return int(name[4:]) if name.startswith("zram") and name[4:].isdigit() else None

    def _swapon(self, dev: SwapDevice, priority: int) -> None:
        self.j.record("swapon", path=dev.path)
        # A negative priority cannot be asked for: swapon without -p gets the kernel's next
        # "least priority" (-2, -3, ...), which is what the lowered scenario says for those.
        argv = ["swapon", *(["-p", str(priority)] if priority >= 0 else []), dev.path]
        host.run_tool(argv)
        for line in host.read_text(host.PROC_SWAPS).splitlines()[1:]:
            parts = line.split()
            if parts and host.unescape_mount(parts[0]) == dev.path:
                dev.priority = int(parts[-1])
        if dev.priority != priority:
            self.out.notes.append(f"swap {dev.name!r}: the scenario's priority is {priority}; the kernel gave {dev.priority}")

    # 5. sysfs knobs (zswap) ------------------------------------------------------------
    def sysfs(self) -> None:
        for k, want in knobs.sysfs_writes(self.c):
            self._knob(k, want)

    # 6. filesystems ------------------------------------------------------------------------
    def filesystems(self) -> None:
        self.out.filesystems = filesystems.set_up(self.j, self.c, self.out.runid, self.state)
        for m in self.out.filesystems:
            if m.loop is not None and filesystems.loop_dio(m.loop) is False:
                self.out.notes.append(
                    f"filesystem {m.name!r}: {m.loop} does buffered IO (direct IO was refused): "
                    "its writes pass through the host's page cache"
                )


def apply(journal: Journal, probe: Probe, config: dict[str, Any], runid: str, state: Path) -> Applied:
    """Apply ``config`` (a lowered scenario) to the host, journaling every change first.

    On an exception, whatever was done so far is in the journal: the caller restores it.
    """
    a = _Applier(journal, probe, config, runid, state)
    a.debugfs()
    a.sysctls()
    a.cgroups()
    a.swaps()
    a.sysfs()
    a.filesystems()
    return a.out
