"""What a simulation will ask of this machine, checked before it is built.

The core allocates its page arena, slot maps and tables when the simulation is built, and Rust
aborts the process when an allocation fails (no error, exit 134). So the estimate the core
computes from the lowered config (``_core.estimate``: pages, swap slots, bytes, accesses) is set
against the memory this process can still get: /proc/meminfo's MemAvailable, the address-space
limit (``ulimit -v``) and the memory cgroup's limit, whichever is smallest. A run that cannot fit
is refused with the estimate; a long one gets a warning.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LONG_RUN_ACCESSES", "Estimate", "Headroom", "format_size", "headroom", "judge"]

#: A run with at least this many accesses gets a warning with the estimate (each access is at
#: least one step of the simulator's innermost loop, plus the faults and reclaim it causes).
LONG_RUN_ACCESSES = 10**9


def format_size(n: int) -> str:
    """Bytes, approximately, in the largest binary unit: '9.7 GiB'."""
    for suffix, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {suffix}"
    return f"{n} B"


@dataclass(frozen=True)
class Estimate:
    pages: int
    swap_slots: int
    bytes: int
    accesses: int

    def describe(self) -> str:
        return (
            f"{self.pages:,} simulated pages, {self.swap_slots:,} swap slots, "
            f"about {format_size(self.bytes)} of simulator memory, {self.accesses:,} accesses"
        )


@dataclass(frozen=True)
class Headroom:
    """Bytes this process can still allocate, and what bounds it."""

    bytes: int
    source: str


def _meminfo(key: str, text: str) -> int | None:
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return None


def _cgroup_headroom() -> Headroom | None:
    """The memory cgroup's limit minus its usage (v2 memory.max, v1 memory.limit_in_bytes)."""
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if controllers == "":
            base = Path("/sys/fs/cgroup") / rel.lstrip("/")
            files = ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            base = Path("/sys/fs/cgroup/memory") / rel.lstrip("/")
            files = ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        try:
            limit_text = (base / files[0]).read_text(encoding="ascii").strip()
            usage = int((base / files[1]).read_text(encoding="ascii").strip())
        except (OSError, ValueError):
            continue
        if limit_text == "max":
            continue
        limit = int(limit_text)
        if limit >= 2**62:  # v1's "unlimited" is a page-rounded LONG_MAX
            continue
        return Headroom(max(limit - usage, 0), f"memory cgroup {rel} (limit {format_size(limit)})")
    return None


def headroom() -> Headroom | None:
    """The smallest of MemAvailable, the address-space limit left and the memory cgroup's room;
    None when none can be read."""
    found: list[Headroom] = []
    try:
        available = _meminfo("MemAvailable", Path("/proc/meminfo").read_text(encoding="ascii"))
    except OSError:
        available = None
    if available is not None:
        found.append(Headroom(available, "MemAvailable in /proc/meminfo"))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        try:
            used = _meminfo("VmSize", Path("/proc/self/status").read_text(encoding="ascii")) or 0
        except OSError:
            used = 0
        found.append(Headroom(max(soft - used, 0), f"the address-space limit (ulimit -v, {format_size(soft)})"))
    cg = _cgroup_headroom()
    if cg is not None:
        found.append(cg)
    return min(found, key=lambda h: h.bytes) if found else None


def judge(estimate: Estimate, room: Headroom | None) -> tuple[str | None, str | None]:
    """(refusal, warning): why the run cannot fit, and a note when it will be long."""
    refusal = None
    if room is not None and estimate.bytes > room.bytes:
        refusal = (
            f"this run does not fit in this machine's memory: it needs {estimate.describe()}, "
            f"but only {format_size(room.bytes)} is available ({room.source}); "
            "make the regions or swap devices smaller"
        )
    warning = None
    if estimate.accesses >= LONG_RUN_ACCESSES:
        warning = f"a long run: {estimate.describe()} (set max_time or fewer accesses to shorten it; Ctrl-C stops it)"
    return refusal, warning
