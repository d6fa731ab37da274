"""The lab's journal of changes, its lock, and ``restore()``.

Before the lab changes anything on the host it appends one JSON line to
``<state dir>/journal.jsonl`` (and fsyncs it) saying what it is about to do and what is needed
to undo it. ``restore()`` reads the journal and undoes every entry in reverse order; each undo
first looks at the host and does nothing if the change is not (or no longer) in place, so a
restore can be repeated, and it copes with a change that was journaled but never made (the
run died between the two). The journal is deleted once every entry is undone; if something
cannot be undone it stays, and ``reclaimlab lab restore`` can be run again.

Entries (``op`` and its fields; every entry also has ``t``, seconds since the epoch):

=================  ==================================  =============================================
op                 fields                              undo
=================  ==================================  =============================================
``run``            runid, pid, start_time, scenario    (header; nothing)
``mount``          path, fstype, created_dir           umount path if still mounted; rmdir if created
``fsimage``        path                                unlink (refused while a loop device uses it)
``loop``           image                               losetup -d every loop device backed by image
``dirty_limit``    name, ratio_path, bytes_path,       write back whichever of the pair was set (the
                   old_ratio, old_bytes                two are exclusive; dirty_bytes refuses 0)
``sysctl``         name, path, old                     (journals of older versions) as ``knob``
``cgroup``         path                                wait for it to be empty, rmdir
``swapfile``       path                                unlink (after swapoff)
``swapon``         path                                swapoff if in /proc/swaps
``zram_hot_add``   token, existing                     (intent: reported if no ``zram_added`` follows)
``zram_added``     token, id                           hot_remove id
``zram_config``    id                                  swapoff, write 1 to reset (disksize back to 0)
``knob``           name (scenario key), path, old      write old back if the value differs
``zswap_param``    name, path, old                     (journals of older versions) as ``knob``
``runner``         pid, start_time, process            SIGKILL if pid still has that start time
``scratch``        path                                remove the directory (the runner's copy of the
                                                       lowered config and trace files) if it exists
``tracefs``        root, files (path -> old value),    (--trace, lab.tracing) if tracefs is mounted:
                   buffer_size_kb                      write files back, clear the ring buffer, write
                                                       buffer_size_kb back
=================  ==================================  =============================================

The locks: ``flock(LOCK_EX)`` on the host-wide ``/run/lock/reclaimlab-lab.lock`` and on
``<state dir>/lock`` for the whole run (and for a restore). The host-wide lock makes lab runs
with different state directories (a user's ``validate`` and ``make test``'s lab tests, which use
private ones) exclude each other: two lab runs at once would disturb each other's swap, zswap
and timing. Each file holds the holder's pid and purpose, for the message a second run gets. A
run waits for the host lock for ``$RECLAIMLAB_LAB_WAIT_S`` seconds (default 0: fail at once,
naming the holder).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from reclaimlab.lab import host, knobs, tracing
from reclaimlab.lab.errors import LabBusy, LabError, LabLeftovers

__all__ = [
    "DEFAULT_STATE_DIR",
    "HOST_LOCK",
    "JOURNAL_NAME",
    "LOCK_NAME",
    "STATE_ENV",
    "WAIT_ENV",
    "Journal",
    "LabLock",
    "RestoreReport",
    "pending",
    "read_entries",
    "restore",
    "restore_entries",
    "state_dir",
]

STATE_ENV = "RECLAIMLAB_STATE_DIR"
DEFAULT_STATE_DIR = Path("/var/lib/reclaimlab")
JOURNAL_NAME = "journal.jsonl"
LOCK_NAME = "lock"
#: One lab run at a time on a host, whatever its state directory.
HOST_LOCK = Path("/run/lock/reclaimlab-lab.lock")
#: Seconds a lab run waits for another host's lab run to finish (default 0).
WAIT_ENV = "RECLAIMLAB_LAB_WAIT_S"
_POLL_S = 0.5


def state_dir() -> Path:
    """The lab's state directory: $RECLAIMLAB_STATE_DIR or /var/lib/reclaimlab."""
    env = os.environ.get(STATE_ENV)
    return Path(env) if env else DEFAULT_STATE_DIR


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# Lock
# ---------------------------------------------------------------------------------------------


class _Flock:
    """An exclusive, non-blocking ``flock`` on one file, released on close (and by the kernel
    when the holder dies, however it dies). The file holds the holder's pid and purpose."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def try_acquire(self, purpose: str) -> bool:
        """True when taken; False when another open file holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise LabError(f"cannot lock {self.path}: {e.strerror or e}") from None
            return False
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "purpose": purpose, "since": time.time()}).encode() + b"\n")
        self.fd = fd
        return True

    def holder(self) -> str:
        try:
            info = json.loads(host.read_text(self.path) or "{}")
        except (OSError, ValueError):
            info = {}
        pid = info.get("pid")
        purpose = info.get("purpose") or "a lab run"
        if pid is None:
            return "holder unknown"
        since = info.get("since")
        ago = f", for {time.time() - since:.0f}s" if isinstance(since, (int, float)) else ""
        return f"pid {pid} ({purpose}{ago})"

    def release(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the last descriptor releases the flock


def _wait_default() -> float:
    raw = os.environ.get(WAIT_ENV, "")
    try:
        return max(0.0, float(raw)) if raw else 0.0
    except ValueError:
        raise LabError(f"${WAIT_ENV}={raw!r}: expected a number of seconds") from None


class LabLock:
    """The lab's locks: the host-wide one (one lab run per host) and ``<state dir>/lock`` (the
    journal's owner). ``acquire`` waits up to ``wait_s`` (default ``$RECLAIMLAB_LAB_WAIT_S``)
    for the host lock, then raises :class:`LabBusy` naming the holder."""

    def __init__(self, directory: Path | None = None):
        self.dir = directory if directory is not None else state_dir()
        self.path = self.dir / LOCK_NAME
        self._host = _Flock(HOST_LOCK)
        self._state = _Flock(self.path)

    @property
    def fd(self) -> int | None:
        return self._state.fd

    def acquire(self, purpose: str, wait_s: float | None = None) -> LabLock:
        deadline = time.monotonic() + (_wait_default() if wait_s is None else wait_s)
        HOST_LOCK.parent.mkdir(parents=True, exist_ok=True)
        while not self._host.try_acquire(purpose):
            if time.monotonic() >= deadline:
                raise LabBusy(f"another reclaimlab lab process holds the lab lock {HOST_LOCK}: {self._host.holder()}")
            time.sleep(_POLL_S)
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            if not self._state.try_acquire(purpose):
                raise LabBusy(f"another reclaimlab lab process holds the lab lock {self.path}: {self.holder()}")
        except BaseException:
            self._host.release()
            raise
        return self

    def holder(self) -> str:
        return self._state.holder()

    def release(self) -> None:
        self._state.release()
        self._host.release()

    def __enter__(self) -> LabLock:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


# ---------------------------------------------------------------------------------------------
# Journal
# ---------------------------------------------------------------------------------------------


class Journal:
    """Append-only; every ``record()`` is on disk (fsync) before it returns."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def create(cls, directory: Path | None = None, **header: Any) -> Journal:
        """A new journal with a ``run`` header. LabLeftovers if one exists (an earlier run's
        changes may still be in place: ``reclaimlab lab restore`` undoes them)."""
        d = directory if directory is not None else state_dir()
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = d / JOURNAL_NAME
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            raise LabLeftovers(
                f"{path} exists: an earlier lab run did not finish restoring the host. "
                "Run `reclaimlab lab restore` to undo its changes, then try again."
            ) from None
        _fsync_dir(d)
        j = cls(path, fd)
        j.record("run", **header)
        return j

    def record(self, op: str, **fields: Any) -> None:
        if self._fd is None:
            raise LabError(f"the journal {self.path} is closed")
        line = json.dumps({"op": op, "t": round(time.time(), 3), **fields}, sort_keys=True) + "\n"
        os.write(self._fd, line.encode())
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def read_entries(path: Path) -> list[dict[str, Any]]:
    """The journal's entries; a torn last line (a crash while writing it) is skipped."""
    entries = []
    for line in host.read_text(path).splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict) and "op" in e:
            entries.append(e)
    return entries


def pending(directory: Path | None = None) -> Path | None:
    """The journal of an unfinished run, if there is one."""
    p = (directory if directory is not None else state_dir()) / JOURNAL_NAME
    return p if p.exists() else None


# ---------------------------------------------------------------------------------------------
# Restore
# ---------------------------------------------------------------------------------------------


@dataclass
class RestoreReport:
    undone: list[str] = field(default_factory=list)  # changes that were in place and were undone
    skipped: list[str] = field(default_factory=list)  # entries whose change was not in place
    failed: list[str] = field(default_factory=list)  # could not be undone (the journal is kept)

    @property
    def ok(self) -> bool:
        return not self.failed


def _write_back(label: str, path: str, old: str) -> str | None:
    p = Path(path)
    if not p.exists():
        return None
    # knobs.same: Y/1 are one boolean, and a choice list (`always [madvise] never`, the
    # transparent_hugepage files) means its bracketed choice, which is what `old` holds.
    now = host.read_text(p).strip()
    if knobs.same(now, old):
        return None
    host.write_text(p, old)
    after = host.read_text(p).strip()
    if not knobs.same(after, old):
        raise LabError(f"{label}: wrote {old!r} to {path} but it reads {after!r}")
    return f"{label}: {knobs.current(now)} -> {old}"


def _dirty_limit_back(e: dict[str, Any]) -> str | None:
    """Put back a dirty limit pair (``vm.dirty_ratio``/``vm.dirty_bytes``, or the background
    pair). The two are exclusive: writing one zeroes the other, and 0 is not a value
    ``dirty_bytes`` accepts (EINVAL), so the one that was set is written back."""
    ratio, nbytes = Path(e["ratio_path"]), Path(e["bytes_path"])
    old_ratio, old_bytes = str(e["old_ratio"]), str(e["old_bytes"])
    if not ratio.exists() or not nbytes.exists():
        return None
    now_ratio, now_bytes = host.read_text(ratio).strip(), host.read_text(nbytes).strip()
    if (now_ratio, now_bytes) == (old_ratio, old_bytes):
        return None
    path, old = (nbytes, old_bytes) if old_bytes != "0" else (ratio, old_ratio)
    host.write_text(path, old)
    after = (host.read_text(ratio).strip(), host.read_text(nbytes).strip())
    if after != (old_ratio, old_bytes):
        raise LabError(f"{e['name']}: wrote {old!r} to {path} but {ratio.name}, {nbytes.name} read {after}, not {(old_ratio, old_bytes)}")
    return f"{e['name']}: {ratio.name}={now_ratio} {nbytes.name}={now_bytes} -> {ratio.name}={old_ratio} {nbytes.name}={old_bytes}"


def _swapoff(path: str) -> str | None:
    if path not in host.active_swaps():
        return None
    host.run_tool(["swapoff", path], timeout=300)
    return f"swapoff {path}"


def _cgroup_procs(path: Path) -> list[int]:
    try:
        return [int(x) for x in host.read_text(path / "cgroup.procs").split()]
    except (OSError, ValueError):
        return []


def _rmdir_cgroup(path: str, wait_s: float = 10.0) -> str | None:
    p = Path(path)
    if not p.is_dir():
        return None
    deadline = time.monotonic() + wait_s
    while True:
        try:
            os.rmdir(p)
            return f"removed cgroup {path}"
        except FileNotFoundError:
            return None
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() > deadline:
                procs = _cgroup_procs(p)
                who = f" (it still holds pids {procs})" if procs else ""
                raise LabError(f"cannot remove cgroup {path}: {e.strerror or e}{who}") from None
            time.sleep(0.05)  # tasks that were just killed leave the cgroup as they exit


def _umount(path: str, created_dir: bool) -> str | None:
    did = None
    if any(m.point == path for m in host.mounts()):
        try:
            host.run_tool(["umount", path], timeout=30)
        except LabError:
            host.run_tool(["umount", "-l", path], timeout=30)
        did = f"unmounted {path}"
    if created_dir:
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(path)
    return did


def _zram_reset(zid: int) -> str | None:
    d = Path(f"/sys/block/zram{zid}")
    if not d.is_dir():
        return None
    did = []
    off = _swapoff(f"/dev/zram{zid}")
    if off:
        did.append(off)
    if (host.read_int_file(d / "disksize") or 0) != 0 or (host.read_int_file(d / "initstate") or 0) != 0:
        host.write_text(d / "reset", "1")
        did.append(f"reset zram{zid}")
    return "; ".join(did) or None


def _zram_remove(zid: int) -> str | None:
    if not Path(f"/sys/block/zram{zid}").is_dir():
        return None
    host.write_text(host.ZRAM_CONTROL / "hot_remove", str(zid))
    return f"hot-removed zram{zid}"


def _kill_runner(pid: int, start_time: int, process: str) -> str | None:
    what = host.kill_if_same(pid, start_time)
    if what == "killed":
        return f"killed runner pid {pid} (process {process!r})"
    return None


def _undo(e: dict[str, Any], completed_tokens: set[str]) -> str | None:
    """Undo one entry; the description of what was done, or None when nothing was in place."""
    op = e["op"]
    if op == "run":
        return None
    if op == "runner":
        return _kill_runner(int(e["pid"]), int(e["start_time"]), str(e.get("process", "?")))
    if op in ("knob", "zswap_param", "sysctl"):
        label = f"zswap {e['name']}" if op == "zswap_param" else str(e["name"])
        return _write_back(label, e["path"], str(e["old"]))
    if op == "swapon":
        return _swapoff(e["path"])
    if op == "swapfile":
        path = e["path"]
        if path in host.active_swaps():
            raise LabError(f"swap file {path} is still active (swapoff failed?)")
        try:
            os.unlink(path)
        except FileNotFoundError:
            return None
        return f"removed swap file {path}"
    if op == "zram_config":
        return _zram_reset(int(e["id"]))
    if op == "zram_added":
        return _zram_remove(int(e["id"]))
    if op == "zram_hot_add":
        if e.get("token") in completed_tokens:
            return None
        existing = set(e.get("existing", []))
        new = [int(d.name[4:]) for d in Path("/sys/block").glob("zram*") if d.name[4:].isdigit() and int(d.name[4:]) not in existing]
        if new:
            # The run died between adding a device and journaling its id: it is one of these,
            # but another user may have added the others, so it is not removed blindly.
            raise LabError(
                f"a zram device was being added when the run died and its id was not journaled; zram devices added since: "
                f"{', '.join(f'zram{n}' for n in new)}. If one is unused, remove it with "
                "`echo ID > /sys/class/zram-control/hot_remove`"
            )
        return None
    if op == "cgroup":
        return _rmdir_cgroup(e["path"])
    if op == "mount":
        return _umount(e["path"], bool(e.get("created_dir")))
    if op == "loop":
        return host.detach_loops(str(e["image"]))
    if op == "fsimage":
        path = str(e["path"])
        if host.loops_of(path):
            raise LabError(f"filesystem image {path} is still attached to {', '.join(host.loops_of(path))} (losetup -d failed?)")
        try:
            os.unlink(path)
        except FileNotFoundError:
            return None
        return f"removed filesystem image {path}"
    if op == "scratch":
        path = Path(str(e["path"]))
        if not path.exists():
            return None
        shutil.rmtree(path)
        return f"removed scratch directory {path}"
    if op == "dirty_limit":
        return _dirty_limit_back(e)
    if op == "tracefs":
        return tracing.undo(e)
    raise LabError(f"unknown journal entry {op!r}: {e}")


def describe_entry(e: dict[str, Any]) -> str:
    op = e["op"]
    detail = {k: v for k, v in e.items() if k not in ("op", "t")}
    return f"{op} " + " ".join(f"{k}={v}" for k, v in sorted(detail.items()))


def restore_entries(entries: list[dict[str, Any]], on_step: Callable[[str], None] | None = None) -> RestoreReport:
    """Undo ``entries`` in reverse order, each at most once, carrying on past failures."""
    report = RestoreReport()
    completed = {str(e.get("token")) for e in entries if e["op"] == "zram_added"}
    for e in reversed(entries):
        try:
            did = _undo(e, completed)
        except (LabError, OSError) as err:
            report.failed.append(f"{describe_entry(e)}: {err}")
            continue
        if did is None:
            if e["op"] != "run":
                report.skipped.append(describe_entry(e))
        else:
            report.undone.append(did)
            if on_step is not None:
                on_step(did)
    return report


def restore_failed(directory: Path, failed: list[str], what: str = "restoring the host failed") -> LabError:
    """The error for a restore that left changes in place: what failed, and that the journal
    in ``directory`` is kept for ``reclaimlab lab restore``."""
    kept = f"the journal {directory}/journal.jsonl is kept: fix the cause and run `reclaimlab lab restore`"
    return LabError(f"{what}:\n  " + "\n  ".join(failed) + "\n" + kept)


def restore(directory: Path | None = None, on_step: Callable[[str], None] | None = None) -> RestoreReport:
    """Undo the journal in ``directory`` (default: the state dir) and delete it if all went well.

    The caller holds the lab lock. No journal: an empty report.
    """
    d = directory if directory is not None else state_dir()
    path = d / JOURNAL_NAME
    if not path.exists():
        return RestoreReport()
    report = restore_entries(read_entries(path), on_step)
    if report.ok:
        path.unlink()
        _fsync_dir(d)
    return report


@contextlib.contextmanager
def locked(purpose: str, directory: Path | None = None) -> Iterator[LabLock]:
    lock = LabLock(directory).acquire(purpose)
    try:
        yield lock
    finally:
        lock.release()
