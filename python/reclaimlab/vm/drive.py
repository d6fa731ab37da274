"""Driving one guest to its end: shared by scenario runs (backends.vm) and selftest runs
(vm.selftest_run), which differ only in their channel and in what they do with its records.

``drive`` starts the guest, feeds its data channel until QEMU exits, and stops the guest on every
way out (an error the guest reports, a boot or run deadline, SIGINT/SIGTERM): the guest is closed
when ``drive`` returns or raises. ``check_host_memory`` refuses a guest the host cannot hold
before anything starts.

One guest failure is QEMU's, not the kernel's: under multi-threaded TCG a vCPU can still run
code another vCPU has just patched back from a breakpoint (the kernel's static keys go through
text_poke_bp, which puts an int3 in the code while it patches), and the guest kernel dies with
"Oops: int3" (seen on 2026-11-24 in 2 of 4 boots of the selftest guest, while the host was busy,
when init created the first cgroup). Nothing of the host changed and nothing of the run is kept,
so ``drive`` boots a fresh guest again, up to ``CODE_PATCH_ATTEMPTS`` times, and says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from reclaimlab.lab.errors import LabError, LabTimeout
from reclaimlab.lab.interrupts import raise_interrupt, signals_to
from reclaimlab.vm.cache import VmUnavailable
from reclaimlab.vm.channel import Channel
from reclaimlab.vm.qemu import QEMU_OVERHEAD_BYTES, Guest, GuestSpec

__all__ = ["BOOT_TIMEOUT_S", "CODE_PATCH_ATTEMPTS", "CodePatchRaceError", "Drive", "check_host_memory", "drive"]

#: How long a guest may take from QEMU's start to its init's first record.
BOOT_TIMEOUT_S = 120.0
#: Boots of a guest that died of TCG's code-patching race (module docstring) before giving up.
CODE_PATCH_ATTEMPTS = 3
#: What the guest kernel prints when a vCPU hit a breakpoint left by text_poke_bp.
_CODE_PATCH_OOPS = "Oops: int3"

C = TypeVar("C", bound=Channel)


class CodePatchRaceError(LabError):
    """The guest kernel died of an int3 left by code patching: the emulator's race, not the run's."""


def _host_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def check_host_memory(memory: int) -> None:
    """Raise VmUnavailable when a guest of ``memory`` bytes (plus QEMU's own) does not fit in
    what the host has available now."""
    avail = _host_available()
    if memory + QEMU_OVERHEAD_BYTES > avail:
        raise VmUnavailable(
            f"a {memory >> 20} MiB guest needs about {(memory + QEMU_OVERHEAD_BYTES) >> 20} MiB; the host has {avail >> 20} MiB available"
        )


@dataclass(frozen=True)
class Drive:
    """When the guest started (monotonic s) and when its init first reported (None: never)."""

    t_start: float
    t_init: float | None

    @property
    def boot_s(self) -> float:
        return (self.t_init or self.t_start) - self.t_start


def drive(
    spec: GuestSpec,
    new_channel: Callable[[], C],
    *,
    what: str,
    limit_s: float,
    timeout_message: str,
    poll_s: float,
    on_poll: Callable[[C], None] | None = None,
    note: Callable[[str], None] | None = None,
) -> tuple[Drive, C]:
    """Boot a guest of ``spec`` and run it to its end, feeding a channel from ``new_channel``;
    the run's Drive and that channel. ``what`` names the guest in errors ("the guest
    (debian-6.12)"); ``limit_s`` counts from QEMU's start; ``on_poll`` runs after every read
    (progress notes). A guest that died of TCG's code-patching race is booted again (module
    docstring), with a fresh channel. Raises LabError (the guest reported an error, did not boot,
    or ended without its closing record), LabTimeout, LabInterrupted; every guest is closed."""
    for attempt in range(1, CODE_PATCH_ATTEMPTS + 1):
        ch = new_channel()
        try:
            return _drive_once(Guest(spec), ch, what, limit_s, timeout_message, poll_s, on_poll), ch
        except CodePatchRaceError:
            if attempt == CODE_PATCH_ATTEMPTS:
                raise
            if note is not None:
                note(
                    f"note: {what} died of QEMU TCG's code-patching race ({_CODE_PATCH_OOPS}); boot {attempt + 1} of {CODE_PATCH_ATTEMPTS}"
                )
    raise AssertionError("unreachable")


def _drive_once(
    guest: Guest,
    ch: C,
    what: str,
    limit_s: float,
    timeout_message: str,
    poll_s: float,
    on_poll: Callable[[C], None] | None,
) -> Drive:
    t_start = time.monotonic()
    t_init: float | None = None
    try:
        with signals_to(raise_interrupt):
            guest.start()
            while True:
                ch.feed(guest.read_data())
                if t_init is None and ch.event("init") is not None:
                    t_init = time.monotonic()
                if ch.error is not None:
                    raise LabError(f"{what} failed: {ch.error}\nconsole:\n{guest.console_tail()}")
                if on_poll is not None:
                    on_poll(ch)
                if not guest.running():
                    ch.feed(guest.read_data())
                    break
                now = time.monotonic()
                if t_init is None and now - t_start > BOOT_TIMEOUT_S:
                    raise LabError(f"the guest did not start its init within {BOOT_TIMEOUT_S:.0f}s; console:\n{guest.console_tail()}")
                if now - t_start > limit_s:
                    raise LabTimeout(timeout_message)
                time.sleep(poll_s)
            if ch.error is not None:
                raise LabError(f"{what} failed: {ch.error}")
            if not ch.bye:
                console = guest.console_tail()
                kind = CodePatchRaceError if _CODE_PATCH_OOPS in console else LabError
                raise kind(f"{what} ended without finishing (QEMU exit {guest.exit_status()}): {guest.stderr_text()}\nconsole:\n{console}")
    finally:
        guest.close()
    return Drive(t_start=t_start, t_init=t_init)
