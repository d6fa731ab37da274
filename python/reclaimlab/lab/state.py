"""A comparable picture of everything the lab may change, to check that a run left the host as
it found it: ``machine_state()`` before and after must be equal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reclaimlab.lab import host
from reclaimlab.lab.knobs import knob_paths

__all__ = ["machine_state"]


def _reclaimlab_cgroups() -> list[str]:
    roots = [m.point for m in host.mounts() if m.fstype == "cgroup2" or (m.fstype == "cgroup" and "memory" in m.options)]
    found = []
    for root in roots:
        try:
            found += [str(p) for p in Path(root).iterdir() if p.is_dir() and p.name.startswith("reclaimlab")]
        except OSError:
            continue
    return sorted(found)


def machine_state(state_dir: Path | None = None) -> dict[str, Any]:
    """/proc/swaps, every knob file the lab may write (zswap parameters; sysctls and others by key), reclaimlab* cgroups
    (v1 memory and v2 roots), zram devices and their disksizes, debugfs mounts, tracefs (mounts; the
    state --trace changes when mounted), and (given the
    lab's state dir) the swap files, filesystem images, mount points and mounts in it and the
    loop devices backed by a file in it."""
    zswap: dict[str, str | None] = {}
    sysctls: dict[str, str | None] = {}
    for key, path in knob_paths().items():
        try:
            now: str | None = host.read_text(path).strip()
        except OSError:
            now = None
        if path.parent == host.ZSWAP_PARAMS:
            zswap[path.name] = now
        else:
            sysctls[key] = now  # sysctls and any other knob file
    zram = {}
    for d in sorted(Path("/sys/block").glob("zram*")):
        zram[d.name] = host.read_int_file(d / "disksize")
    state: dict[str, Any] = {
        "swaps": host.read_text(host.PROC_SWAPS),
        "zswap": zswap,
        "sysctls": sysctls,
        "cgroups": _reclaimlab_cgroups(),
        "zram": zram,
        "debugfs_mounts": sorted(m.point for m in host.mounts() if m.fstype == "debugfs"),
        "tracefs": _tracefs(),
    }
    if state_dir is not None:
        swap = state_dir / "swap"
        state["swap_files"] = sorted(p.name for p in swap.iterdir()) if swap.is_dir() else []
        images = state_dir / "fs"
        state["fs_images"] = sorted(p.name for p in images.iterdir()) if images.is_dir() else []
        mnt = state_dir / "mnt"
        state["mount_points"] = sorted(p.name for p in mnt.iterdir()) if mnt.is_dir() else []
        state["mounts"] = sorted(m.point for m in host.mounts() if Path(m.point).is_relative_to(state_dir))
        state["loop_devices"] = sorted(_loops_in(state_dir))
    return state


def _tracefs() -> dict[str, Any]:
    """Where tracefs is mounted and, when it is, what --trace changes there (lab.tracing):
    tracing_on, the events enabled, the per-CPU buffer size, the events in the buffer."""
    points = sorted(m.point for m in host.mounts() if m.fstype == "tracefs")
    out: dict[str, Any] = {"mounts": points}
    root = Path(points[0]) if points else None
    if root is not None and (root / "events").is_dir():
        out["tracing_on"] = host.read_text(root / "tracing_on").strip()
        out["set_event"] = host.read_text(root / "set_event").split()
        out["buffer_size_kb"] = host.read_text(root / "buffer_size_kb").split()[0]  # "7 (expanded: 1408)": 7
        entries = 0
        for stats in root.glob("per_cpu/cpu*/stats"):
            for line in host.read_text(stats).splitlines():
                if line.startswith("entries:"):
                    entries += int(line.split()[1])
        out["entries"] = entries
    return out


def _loops_in(state_dir: Path) -> list[str]:
    """Loop devices whose backing file is under ``state_dir`` (/sys/block/loopN/loop/backing_file)."""
    out = []
    for d in Path("/sys/block").glob("loop*"):
        try:
            backing = host.read_text(d / "loop" / "backing_file").strip()
        except OSError:
            continue
        if backing.removesuffix(" (deleted)").startswith(str(state_dir)):
            out.append(f"{d.name}: {backing}")
    return out
