"""SIGINT and SIGTERM during a lab run: become exceptions so that the ``finally`` that restores
the host runs (shared by the kernel backend, calibrate and the codec check)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from reclaimlab.lab.errors import LabInterrupted

__all__ = ["raise_interrupt", "signals_to"]


@contextlib.contextmanager
def signals_to(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    """SIGINT and SIGTERM go to ``handler`` inside the block (main thread only: Python delivers
    signals there, and elsewhere the caller's own handlers stay)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise LabInterrupted(signum, f"interrupted by {signal.Signals(signum).name}; the host was restored")
