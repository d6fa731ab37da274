"""Small, careful accessors for the kernel files the lab reads and writes.

Every path the lab touches is spelled here once. Reads never change anything: in particular
``/sys/class/zram-control/hot_add`` is never read here (reading it creates a zram device); only
``apply`` reads it, journaled.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from reclaimlab.lab.errors import LabError

__all__ = [
    "DEBUGFS_DEFAULT",
    "MEMINFO",
    "PROC_SWAPS",
    "SYSCTL_DIR",
    "VMSTAT",
    "ZRAM_CONTROL",
    "ZSWAP_PARAMS",
    "Mount",
    "active_swaps",
    "detach_loops",
    "drop_caches",
    "kill_if_same",
    "loops_of",
    "mounts",
    "pid_alive",
    "proc_start_time",
    "read_int_file",
    "read_kv_file",
    "read_text",
    "sysctl_path",
    "unescape_mount",
    "write_text",
]

PROC_SWAPS = Path("/proc/swaps")
VMSTAT = Path("/proc/vmstat")
MEMINFO = Path("/proc/meminfo")
SYSCTL_DIR = Path("/proc/sys")
ZSWAP_PARAMS = Path("/sys/module/zswap/parameters")
ZRAM_CONTROL = Path("/sys/class/zram-control")
DEBUGFS_DEFAULT = Path("/sys/kernel/debug")
_OCTAL = re.compile(r"\\([0-7]{3})")


def read_text(path: str | os.PathLike[str]) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def write_text(path: str | os.PathLike[str], value: str) -> None:
    """Write ``value`` to an existing kernel file (no create, no truncate semantics needed)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)  # O_TRUNC: sysfs and procfs ignore it; plain files need it
    except OSError as e:
        raise LabError(f"cannot open {path} for writing: {e.strerror or e}") from None
    try:
        os.write(fd, value.encode())
    except OSError as e:
        raise LabError(f"writing {value!r} to {path} failed: {e.strerror or e}") from None
    finally:
        os.close(fd)


def read_int_file(path: str | os.PathLike[str]) -> int | None:
    try:
        return int(read_text(path).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def read_kv_file(path: str | os.PathLike[str]) -> dict[str, int]:
    """``name value`` lines (vmstat, memory.stat, memory.events); non-integer values skipped."""
    out: dict[str, int] = {}
    for line in read_text(path).splitlines():
        parts = line.split()
        if len(parts) >= 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return out


def sysctl_path(name: str) -> Path:
    """``vm.page-cluster`` -> /proc/sys/vm/page-cluster."""
    return SYSCTL_DIR.joinpath(*name.split("."))


def unescape_mount(field: str) -> str:
    """Undo the octal escapes of /proc/swaps and mountinfo (``\\040`` is a space)."""
    return _OCTAL.sub(lambda m: chr(int(m[1], 8)), field)


def active_swaps(text: str | None = None) -> list[str]:
    """The file names of the active swap devices (/proc/swaps without its header)."""
    if text is None:
        text = read_text(PROC_SWAPS)
    lines = text.splitlines()[1:]
    return [unescape_mount(line.split()[0]) for line in lines if line.strip()]


class Mount:
    """One line of /proc/self/mountinfo: where, what type, and the super-block options."""

    __slots__ = ("fstype", "options", "point", "source")

    def __init__(self, point: str, fstype: str, source: str, options: tuple[str, ...]):
        self.point = point
        self.fstype = fstype
        self.source = source
        self.options = options

    def __repr__(self) -> str:
        return f"Mount({self.point!r}, {self.fstype!r})"


def mounts(text: str | None = None) -> list[Mount]:
    if text is None:
        text = read_text("/proc/self/mountinfo")
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        lf, rf = left.split(), right.split()
        if len(lf) < 5 or len(rf) < 2:
            continue
        opts = tuple(rf[2].split(",")) if len(rf) > 2 else ()
        out.append(Mount(unescape_mount(lf[4]), rf[0], rf[1], opts))
    return out


def proc_start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks since boot): with the pid, it
    identifies one process for its lifetime. None if there is no such process."""
    try:
        stat = read_text(f"/proc/{pid}/stat")
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may contain spaces and ')'.
    rest = stat[stat.rfind(")") + 2 :].split()
    try:
        return int(rest[19])  # rest[0] is field 3
    except (IndexError, ValueError):
        return None


def _state(pid: int) -> str | None:
    try:
        stat = read_text(f"/proc/{pid}/stat")
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2 :].split()
    return rest[0] if rest else None


def pid_alive(pid: int, start_time: int | None = None) -> bool:
    """The process exists, is not a zombie, and (if given) has this start time."""
    state = _state(pid)
    if state is None or state in ("Z", "X"):
        return False
    return start_time is None or proc_start_time(pid) == start_time


def kill_if_same(pid: int, start_time: int, signum: int = 9, wait_s: float = 5.0) -> str:
    """SIGKILL ``pid`` only if it is still the process that started at ``start_time``.

    Returns what happened: "killed", "gone" (no such process, or a zombie), or "not ours" (the
    pid now belongs to another process). Raises LabError if it survives ``wait_s``.
    """
    if not pid_alive(pid):
        return "gone"
    if proc_start_time(pid) != start_time:
        return "not ours"
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        return "gone"
    except OSError as e:
        if e.errno == errno.EPERM:
            raise LabError(f"cannot kill pid {pid}: {e.strerror}") from None
        raise
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not pid_alive(pid, start_time):
            return "killed"
        time.sleep(0.01)
    raise LabError(f"pid {pid} survived SIGKILL for {wait_s:.0f}s")


def run_tool(argv: list[str], timeout: float = 120) -> str:
    """Run a system tool (mkswap, swapoff, mount, ...); its stdout, or LabError naming the
    command and its message."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise LabError(f"{' '.join(argv)}: {e}") from None
    if r.returncode != 0:
        raise LabError(f"{' '.join(argv)} failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()}")
    return r.stdout


def wait_for_path(path: Path, what: str, timeout_s: float = 5.0) -> None:
    """Wait until ``path`` exists (a device node udev creates); LabError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise LabError(f"{path} did not appear after {what}")
        time.sleep(0.02)


def loops_of(image: str) -> list[str]:
    """The loop devices backed by ``image`` (``losetup -j``)."""
    if shutil.which("losetup") is None:
        return []
    out = run_tool(["losetup", "-j", image])
    return [line.split(":", 1)[0] for line in out.splitlines() if line.startswith("/dev/")]


def detach_loops(image: str, wait_s: float = 10.0) -> str | None:
    """Detach every loop device backed by ``image``; wait until none is left (a detach of a
    device still open for a moment only sets autoclear)."""
    devs = loops_of(image)
    if not devs:
        return None
    for d in devs:
        run_tool(["losetup", "-d", d])
    deadline = time.monotonic() + wait_s
    while loops_of(image):
        if time.monotonic() > deadline:
            raise LabError(f"loop device(s) {', '.join(loops_of(image))} still attached to {image} after losetup -d (busy?)")
        time.sleep(0.05)
    return f"detached {', '.join(devs)} from {image}"


def drop_caches() -> None:
    """``sync``, then ``echo 3 > /proc/sys/vm/drop_caches``: clean page cache, dentries and
    inodes are freed host-wide, so a run with files starts with them on disk only, as the
    simulator's do. Nothing to restore: the caches refill on use."""
    os.sync()
    write_text(SYSCTL_DIR / "vm" / "drop_caches", "3")
