"""The scenario's filesystems on the real kernel: an image file, a loop device, mkfs, a mount.

For each ``machine.filesystems[i]`` of a lowered scenario the lab makes (docs/lab.md; a disk
filesystem's ``backing`` must be ``"loop"``, what this makes: ``check_filesystems`` refuses the
others):

1. an image file ``<state dir>/fs/<runid>-<i>.img``, created with ``O_EXCL`` and
   ``posix_fallocate`` to ``image_bytes()`` (the files that live on it, plus room for the
   filesystem's metadata), journaled (``fsimage``) before it exists;
2. a loop device over it (``losetup --find --show --direct-io=on``), journaled (``loop``, by
   image path) before it exists. Direct IO: the loop device's writes go to the host's disk
   without passing through the host's page cache a second time, so the page cache the
   scenario's cgroup sees is its own files' only;
3. ``mkfs.<type>`` on the loop device, initialising everything at once (ext4
   ``lazy_itable_init=0,lazy_journal_init=0``: no ext4lazyinit thread writing inode tables
   during the run) and without discard (which would punch the fallocated image full of
   holes);
4. a mount at ``<state dir>/mnt/<runid>-<i>`` (journaled as ``mount``, the directory made by
   the lab).

``tmpfs`` is a ``mount -t tmpfs -o size=...``, nothing else. Undo, in reverse: unmount, detach
every loop device backed by the image (``losetup -j``), delete the image.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reclaimlab.fsimage import MIB, MIN_IMAGE_BYTES, file_bytes, image_bytes
from reclaimlab.lab import host
from reclaimlab.lab.errors import LabError
from reclaimlab.lab.journal import Journal

__all__ = [
    "DISK_TYPES",
    "MIN_IMAGE_BYTES",
    "MountedFs",
    "check_filesystems",
    "file_bytes",
    "image_bytes",
    "mkfs_argv",
    "set_up",
]

#: Filesystem types made on a loop device (the others, tmpfs, are mounted without one).
DISK_TYPES = ("ext4", "xfs", "btrfs")


def mkfs_argv(fstype: str, device: str) -> list[str]:
    """mkfs for ``fstype`` on ``device``: quiet, everything initialised now, no discard."""
    if fstype == "ext4":
        return ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0,nodiscard", device]
    if fstype == "xfs":
        return ["mkfs.xfs", "-q", "-f", "-K", device]
    if fstype == "btrfs":
        return ["mkfs.btrfs", "-q", "-f", "-K", device]
    raise LabError(f"no mkfs for filesystem type {fstype!r}")


def _kernel_filesystems() -> set[str]:
    try:
        text = host.read_text("/proc/filesystems")
    except OSError:
        return set()
    return {line.split()[-1] for line in text.splitlines() if line.split()}


def check_filesystems(config: dict[str, Any], state: Path) -> list[tuple[tuple[str | int, ...], str]]:
    """What the host lacks for the scenario's filesystems: (key path, message) pairs."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    fss = config["machine"].get("filesystems") or []
    if not fss:
        return out
    known = _kernel_filesystems()
    disk = [fs for fs in fss if fs["fstype"] in DISK_TYPES]
    if disk:
        missing = [t for t in ("losetup", "mount", "umount") if shutil.which(t) is None]
        if missing:
            out.append((("machine", "filesystems"), f"filesystems need {', '.join(missing)} (util-linux), not found on PATH"))
    total = 0
    for i, fs in enumerate(fss):
        t = fs["fstype"]
        if t in DISK_TYPES and fs.get("backing", "loop") != "loop":
            out.append(
                (
                    ("machine", "filesystems", i, "backing"),
                    f"backing = {fs['backing']!r}: the lab makes every disk filesystem on a loop device over an image file "
                    'and has no block device of its own to give one; use backing = "loop" (the default)',
                )
            )
        where: tuple[str | int, ...] = ("machine", "filesystems", i, "type")
        if known and t not in known:
            out.append((where, f"{t!r}: this kernel has no {t} (not in /proc/filesystems; the lab loads no modules)"))
        if t in DISK_TYPES:
            tool = f"mkfs.{t}"
            if shutil.which(tool) is None:
                pkg = {"xfs": "xfsprogs", "btrfs": "btrfs-progs", "ext4": "e2fsprogs"}[t]
                out.append((where, f"{t!r}: {tool} is not installed (Debian package {pkg}; `make lab-tools` installs it)"))
            total += image_bytes(config, i)
    if total:
        probe_dir = state if state.exists() else next((p for p in state.parents if p.exists()), Path("/"))
        st = os.statvfs(probe_dir)
        free = st.f_bavail * st.f_frsize
        if total > free // 2:
            out.append(
                (
                    ("machine", "filesystems"),
                    f"the filesystem images need {total // MIB} MiB; {probe_dir} has {free // MIB} MiB free "
                    "(the lab uses at most half of it)",
                )
            )
    return out


@dataclass
class MountedFs:
    name: str  # the scenario's name
    fstype: str
    point: Path  # the mount point: the runner's --fs-dir
    image: Path | None = None
    loop: str | None = None  # /dev/loopN
    key: str | None = None  # block stat prefix, "block[<name>]"
    queue: dict[str, str] | None = None  # the loop device's queue settings, read once it exists (provenance)


_LOOP = re.compile(r"^/dev/loop\d+$")


def set_up(j: Journal, config: dict[str, Any], runid: str, state: Path) -> list[MountedFs]:
    """Make, journal and mount every filesystem of ``config`` (see the module docstring)."""
    out = []
    for i, fs in enumerate(config["machine"].get("filesystems") or []):
        t = fs["fstype"]
        mnt_root = state / "mnt"
        mnt_root.mkdir(parents=True, exist_ok=True, mode=0o700)
        point = mnt_root / f"{runid}-{i}"
        size = image_bytes(config, i)
        m = MountedFs(name=fs["name"], fstype=t, point=point, key=f"block[{fs['name']}]")
        if t in DISK_TYPES:
            img_dir = state / "fs"
            img_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            m.image = img_dir / f"{runid}-{i}.img"
            j.record("fsimage", path=str(m.image))
            fd = os.open(m.image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as e:
                raise LabError(f"cannot allocate the filesystem image {m.image} ({size} bytes): {e.strerror or e}") from None
            finally:
                os.close(fd)
            j.record("loop", image=str(m.image))
            dev = host.run_tool(["losetup", "--find", "--show", "--direct-io=on", str(m.image)]).strip()
            if not _LOOP.match(dev):
                raise LabError(f"losetup --find --show {m.image} printed {dev!r}, not a loop device")
            m.loop = dev
            m.queue = loop_queue(dev)
            host.run_tool(mkfs_argv(t, dev), timeout=300)
            j.record("mount", path=str(point), fstype=t, created_dir=True)
            point.mkdir(mode=0o700)
            host.run_tool(["mount", "-t", t, dev, str(point)])
        else:
            j.record("mount", path=str(point), fstype=t, created_dir=True)
            point.mkdir(mode=0o700)
            # The scenario's size= (the simulator's limit), else the kernel's default (half
            # of RAM, shmem_default_max_blocks), as the simulator's.
            opts = "mode=0700" if fs.get("size_bytes") is None else f"size={int(fs['size_bytes'])},mode=0700"
            host.run_tool(["mount", "-t", t, "-o", opts, t, str(point)])
        out.append(m)
    return out


def loop_dio(dev: str) -> bool | None:
    """Whether the loop device does direct IO (``/sys/block/loopN/loop/dio``)."""
    try:
        return host.read_text(f"/sys/block/{Path(dev).name}/loop/dio").strip() == "1"
    except OSError:
        return None


#: The loop device's settings that decide its request sizes and the kernel's choices
#: (/sys/block/loopN/queue/*, loop/dio): recorded in each kernel run's provenance.
#: max_segments and wbt_lat_usec (writeback throttling) bound how much writeback it keeps in
#: flight, which the model does not have yet (docs/validation.md, 2026-11-25).
QUEUE_FILES = (
    "read_ahead_kb",
    "max_sectors_kb",
    "max_segments",
    "rotational",
    "logical_block_size",
    "nr_requests",
    "scheduler",
    "wbt_lat_usec",
)


def loop_queue(dev: str) -> dict[str, str]:
    d = Path("/sys/block") / Path(dev).name
    out = {}
    for name in QUEUE_FILES:
        try:
            out[name] = host.read_text(d / "queue" / name).strip()
        except OSError:
            continue
    dio = loop_dio(dev)
    if dio is not None:
        out["dio"] = "1" if dio else "0"
    return out
