"""A comparable picture of everything the lab may change, to check that a run left the host as
it found it: ``machine_state()`` before and after must be equal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reclaimlab.lab import host
from reclaimlab.lab.probe import SYSCTLS

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
    """/proc/swaps, the 5 zswap parameters, the sysctls the lab may write, reclaimlab* cgroups
    (v1 memory and v2 roots), zram devices and their disksizes, debugfs mounts, and (given the
    lab's state dir) the swap files in it."""
    zswap: dict[str, str | None] = {}
    for name in host.ZSWAP_PARAM_NAMES:
        try:
            zswap[name] = host.read_text(host.ZSWAP_PARAMS / name).strip()
        except OSError:
            zswap[name] = None
    sysctls: dict[str, str | None] = {}
    for name in SYSCTLS.values():
        try:
            sysctls[name] = host.read_text(host.sysctl_path(name)).strip()
        except OSError:
            sysctls[name] = None
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
    }
    if state_dir is not None:
        swap = state_dir / "swap"
        state["swap_files"] = sorted(p.name for p in swap.iterdir()) if swap.is_dir() else []
    return state
