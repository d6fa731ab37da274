"""A lab session: everything that changes the host goes through one (docs/lab.md).

``session()`` takes the lab lock and, while it is held, turns SIGINT/SIGTERM into a note: the
signal is remembered and raised as LabInterrupted once the host is restored, so nothing can
stop a journal from being written or a restore from running. Inside it, ``Session.journal()``
opens a journal for one set of changes; its body may be interrupted (LabInterrupted), and on
leaving it, however it is left, the journal is closed and restored. A restore that fails keeps
the journal and raises the "restore failed, journal kept" error.

Used by the kernel backend (``reclaimlab run --backend kernel``), ``reclaimlab calibrate`` and
``reclaimlab lab codec-check``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

from reclaimlab.lab import host
from reclaimlab.lab.errors import LabBusy, LabInterrupted
from reclaimlab.lab.interrupts import raise_interrupt, signals_to
from reclaimlab.lab.journal import Journal, LabLock, restore, restore_failed, state_dir

__all__ = ["POLL_S", "Session", "locked", "session"]

#: How often a session waiting for the lab lock (``wait_s``) tries again.
POLL_S = 2.0

Note = Callable[[str], None]


def _signame(signum: int) -> str:
    return signal.Signals(signum).name


@contextlib.contextmanager
def locked(purpose: str, note: Note, wait_s: float | None = None, state: Path | None = None) -> Iterator[LabLock]:
    """The lab lock for the block. ``wait_s`` None: LabLock's own wait
    (``$RECLAIMLAB_LAB_WAIT_S``); else retry every POLL_S for at most ``wait_s`` seconds,
    noting who holds it."""
    lock = LabLock(state if state is not None else state_dir())
    if wait_s is None:
        lock.acquire(purpose)
    else:
        deadline = time.monotonic() + wait_s
        said = None
        while True:
            try:
                lock.acquire(purpose, wait_s=0)
                break
            except LabBusy as e:
                if time.monotonic() >= deadline:
                    raise LabBusy(f"{e} (waited {wait_s:.0f}s; raise --wait to wait longer)") from None
                holder = re.sub(r", for \d+s\)", ")", str(e))
                if holder != said:
                    note(f"waiting: {e}")
                    said = holder
                time.sleep(POLL_S)
    try:
        yield lock
    finally:
        lock.release()


class Session:
    """The lock is held; signals are deferred (``deferred``). See the module docstring."""

    def __init__(self, state: Path, note: Note):
        self.state = state
        self.note = note
        self.deferred: list[int] = []
        self._cleanups: list[Callable[[], None]] = []

    @property
    def interrupted(self) -> bool:
        return bool(self.deferred)

    def check_interrupt(self) -> None:
        """LabInterrupted if a signal arrived (call where stopping early is safe)."""
        if self.deferred:
            raise LabInterrupted(self.deferred[0], f"interrupted by {_signame(self.deferred[0])}")

    def before_restore(self, cleanup: Callable[[], None]) -> None:
        """Run ``cleanup`` (signals deferred) when the current journal's block ends, before the
        restore: e.g. stop the processes the block started."""
        self._cleanups.append(cleanup)

    @contextlib.contextmanager
    def journal(
        self,
        runid: str,
        scenario: str,
        scenario_sha256: str | None = None,
        what: str = "restoring the host failed",
        busy_retries: int = 0,
    ) -> Iterator[Journal]:
        """A journal for the block's changes, restored when the block ends. Inside the block
        SIGINT/SIGTERM raise LabInterrupted. ``busy_retries``: retry a restore whose failures
        all say "busy" (a device still open for a moment) this many times, 0.1 s apart:
        restore is idempotent."""
        journal = Journal.create(
            self.state,
            runid=runid,
            pid=os.getpid(),
            start_time=host.proc_start_time(os.getpid()),
            scenario=scenario,
            scenario_sha256=scenario_sha256,
        )
        try:
            with signals_to(raise_interrupt):
                self.check_interrupt()
                yield journal
        finally:
            cleanups, self._cleanups = self._cleanups, []
            try:
                for cleanup in reversed(cleanups):
                    cleanup()
            finally:
                journal.close()
                self._restore(what, busy_retries)

    def _restore(self, what: str, busy_retries: int) -> None:
        for attempt in range(busy_retries + 1):
            report = restore(self.state)
            if report.ok:
                return
            if attempt == busy_retries or not all("busy" in f.lower() for f in report.failed):
                raise restore_failed(self.state, report.failed, what)
            time.sleep(0.1)


@contextlib.contextmanager
def session(
    purpose: str,
    note: Note,
    wait_s: float | None = None,
    on_signal: str = "restoring the host first, please wait",
    restored: str = "the host was restored",
) -> Iterator[Session]:
    """Hold the lab lock (``locked``) with SIGINT/SIGTERM deferred for the block; a deferred
    signal is raised as LabInterrupted (saying ``restored``) once the block is done.
    ``on_signal`` is noted when a signal arrives."""
    state = state_dir()
    s = Session(state, note)

    def defer(signum: int, frame: FrameType | None) -> None:
        s.deferred.append(signum)
        note(f"reclaimlab: {_signame(signum)} received: {on_signal}")

    with locked(purpose, note, wait_s, state), signals_to(defer):
        yield s
    if s.deferred:
        raise LabInterrupted(s.deferred[0], f"interrupted by {_signame(s.deferred[0])}; {restored}")
