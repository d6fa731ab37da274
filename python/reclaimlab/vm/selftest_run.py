"""Run the kernel's cgroup selftests (built by reclaimlab.vm.selftests) in VM lab guests.

``run()`` boots one guest per selftest binary (a fresh kernel for each: test_no_kmem_bypass
changes vm.min_free_kbytes, a killed test can leave cgroups), each with:

* the installed kernel (``make vmlab``), its VM lab modules plus ext4's, busybox, the binary
  and guest/selftests.sh as /init in an initramfs built in memory (a few MiB, no file);
* ``memory`` of RAM (1 GiB by default, as the conformance scenarios; test_no_kmem_bypass skips
  above 5 GB) and ``cpus`` vCPUs under QEMU TCG; the VM lab's kernel command line (THP
  ``madvise``, as on this project's hosts); MGLRU off unless ``mglru`` (the simulator's LRU is
  the classic one);
* two sparse unnamed disks: /dev/vda the swap device (zswap needs one behind it), /dev/vdb the
  ext4 scratch directory the tests run in.

The guest's init follows the binary's TAP output (vm.tap) and kills it when one test runs
longer than ``test_timeout_s``; QEMU runs under ``timeout`` with a limit of every test's
timeout plus the boot (vm.qemu: killed by pid on any error or signal, nothing left on disk).
Nothing on the host changes: no swap, cgroup, mount or sysctl; the lab lock is not taken.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reclaimlab.vm import initramfs, tap
from reclaimlab.vm.cache import BUSYBOX, InstalledKernel, VmUnavailable, installed_kernel
from reclaimlab.vm.channel import Channel
from reclaimlab.vm.drive import BOOT_TIMEOUT_S, check_host_memory, drive
from reclaimlab.vm.qemu import GuestSpec, qemu_version
from reclaimlab.vm.selftests import InstalledSelftests, SelftestBinary, installed_selftests

__all__ = ["DEFAULT_MEMORY", "DEFAULT_TEST_TIMEOUT_S", "BinaryRun", "SelftestChannel", "run", "run_binary"]

DEFAULT_MEMORY = 1 << 30
#: One test's limit in the guest. Under TCG the slowest 6.12 test (test_memcg_min/low: page
#: cache and reclaim of several 50 MiB cgroups) takes about a minute; see docs/conformance.md.
DEFAULT_TEST_TIMEOUT_S = 300.0
SWAP_DISK_BYTES = 2 << 30
SCRATCH_DISK_BYTES = 1 << 30
POLL_S = 0.2


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class SelftestChannel(Channel):
    """The VM lab's data channel plus the binary's output lines (``@@T uptime_cs text``)."""

    tap: list[tuple[float, str]] = field(default_factory=list)
    #: (uptime s, zswap's stored_pages) each time it changed
    stored_pages: list[tuple[float, int]] = field(default_factory=list)
    #: How many of ``tap`` the driver has shown as progress notes.
    reported: int = 0

    def _line(self, line: str) -> None:
        if self._block is None and line.startswith("@@T "):
            t, _, text = line[4:].partition(" ")
            self.tap.append((int(t) / 100, text))
            return
        if self._block is None and line.startswith("@@Z "):
            t, _, n = line[4:].partition(" ")
            if n.strip().isdigit():
                self.stored_pages.append((int(t) / 100, int(n)))
            return
        super()._line(line)


@dataclass
class BinaryRun:
    binary: str
    tests: list[tap.TestVerdict]
    exit_status: int | None
    timed_out: int | None
    boot_s: float
    wall_s: float
    info: dict[str, str]
    dmesg: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_status": self.exit_status,
            "timed_out_in_test": self.timed_out,
            "boot_s": self.boot_s,
            "wall_s": self.wall_s,
            "tests": [t.to_dict() for t in self.tests],
            "dmesg_tail": self.dmesg[-6000:],
        }


def initrd(
    k: InstalledKernel, s: InstalledSelftests, b: SelftestBinary, test_timeout_s: float, mglru: bool, recursiveprot: bool = True
) -> bytes:
    """The guest's initramfs for binary ``b``: busybox, /init, the modules, the binary, its env.
    cgroup2 is mounted with nsdelegate and (``recursiveprot``) memory_recursiveprot, as systemd
    mounts it."""
    opts = "nsdelegate,memory_recursiveprot" if recursiveprot else "nsdelegate"
    env = f"BINARY={b.name}\nTEST_TIMEOUT_CS={round(test_timeout_s * 100)}\nLRU_GEN={'y' if mglru else 'n'}\nCGROUP2_OPTS={opts}\n"
    dirs = ["bin", "dev", "etc", "lib", "lib/modules", "mnt", "plan", "proc", "root", "run", "sys", "tests", "tmp"]
    entries: list[initramfs.Entry] = [(d, initramfs.DIR, b"") for d in dirs]
    entries += [
        ("bin/busybox", initramfs.EXE, BUSYBOX.read_bytes()),
        ("init", initramfs.EXE, initramfs.guest_script("selftests.sh")),
        (f"tests/{b.name}", initramfs.EXE, b.path.read_bytes()),
        ("plan/selftest.env", initramfs.FILE, env.encode()),
    ]
    entries += [(f"lib/modules/{i:02d}-{m.name}", initramfs.FILE, m.read_bytes()) for i, m in enumerate((*k.modules, *s.modules))]
    return initramfs.newc(entries)


def _stored_pages_peaks(verdicts: list[tap.TestVerdict], samples: list[tuple[float, int]], start: float | None) -> None:
    """Each test's highest sampled zswap stored_pages (a diagnostic beside the verdict: the
    samples are 0.5 s apart, the test's own reads are not)."""
    t0 = start if start is not None else float("-inf")
    for v in verdicts:
        if v.seconds is None:
            continue
        t1 = t0 + v.seconds
        inside = [n for t, n in samples if t0 <= t <= t1]
        before = [n for t, n in samples if t < t0]
        if before:
            inside.append(before[-1])  # the value when the test started
        v.stored_pages_max = max(inside) if inside else None
        t0 = t1


def run_binary(
    k: InstalledKernel,
    s: InstalledSelftests,
    b: SelftestBinary,
    test_timeout_s: float = DEFAULT_TEST_TIMEOUT_S,
    mglru: bool = False,
    memory: int = DEFAULT_MEMORY,
    cpus: int = 2,
    on_note: Callable[[str], None] | None = _stderr,
    recursiveprot: bool = True,
) -> BinaryRun:
    """Boot a guest that runs ``b``; its per-test verdicts. Raises LabError, LabTimeout,
    LabInterrupted (the guest is stopped in every case)."""
    note = on_note or (lambda _m: None)
    check_host_memory(memory)
    limit = len(b.tests) * test_timeout_s + BOOT_TIMEOUT_S
    spec = GuestSpec(
        vmlinux=k.vmlinux,
        initrd=initrd(k, s, b, test_timeout_s, mglru, recursiveprot),
        memory_bytes=memory,
        cpus=min(cpus, os.cpu_count() or 1),
        disks=[SWAP_DISK_BYTES, SCRATCH_DISK_BYTES],
        timeout_s=limit,
    )

    def report_tap(ch: SelftestChannel) -> None:
        for _, text in ch.tap[ch.reported :]:
            if text.startswith(("ok ", "not ok ", "1..0", "Bail out!")):
                note(f"{k.name} {b.name}: {text}")
        ch.reported = len(ch.tap)

    d, ch = drive(
        spec,
        SelftestChannel,
        what=f"the selftest guest ({k.name}, {b.name})",
        limit_s=limit,
        timeout_message=f"{b.name} in the {k.name} guest exceeded {limit:.0f}s; the guest was stopped",
        poll_s=POLL_S,
        on_poll=report_tap,
        note=note,
    )
    start = ch.event("start")
    started = int(start[0]) / 100 if start else None
    timeout_ev = ch.event("timeout")
    timed_out = int(timeout_ev[0]) if timeout_ev else None
    exit_ev = ch.event("exit")
    status = int(exit_ev[0]) if exit_ev else None
    verdicts = tap.parse(ch.tap, b.tests, start=started, timed_out=timed_out, exit_status=status)
    _stored_pages_peaks(verdicts, ch.stored_pages, started)
    return BinaryRun(
        binary=b.name,
        tests=verdicts,
        exit_status=status,
        timed_out=timed_out,
        boot_s=round(d.boot_s, 2),
        wall_s=round(time.monotonic() - d.t_start, 2),
        info=dict(ch.info),
        dmesg=ch.dmesg,
    )


def run(
    kernel: str,
    binaries: list[str] | None = None,
    test_timeout_s: float = DEFAULT_TEST_TIMEOUT_S,
    mglru: bool = False,
    memory: int = DEFAULT_MEMORY,
    cpus: int = 2,
    on_note: Callable[[str], None] | None = _stderr,
    recursiveprot: bool = True,
) -> dict[str, Any]:
    """Run the selftests built for ``kernel`` (all, or ``binaries``); the results document
    (results/conformance/<kernel>.json). Raises VmUnavailable when something is not installed."""
    k = installed_kernel(kernel)
    s = installed_selftests(kernel)
    chosen = list(s.binaries)
    if binaries:
        known = {b.name: b for b in s.binaries}
        unknown = [n for n in binaries if n not in known]
        if unknown:
            raise VmUnavailable(f"{kernel}'s source has no selftest {', '.join(unknown)} (built: {', '.join(known) or 'none'})")
        chosen = [known[n] for n in binaries]
    runs = [run_binary(k, s, b, test_timeout_s, mglru, memory, cpus, on_note, recursiveprot) for b in chosen]
    info = runs[0].info if runs else {}
    return {
        "kind": "kernel-selftests",
        "kernel": {"name": k.name, "package": k.package, "version": k.version, "release": info.get("release", k.release)},
        "source": {
            "package": s.source_package,
            "version": s.source_version,
            "compiler": s.compiler,
            "binaries": {b.name: {"sha256": b.sha256, "tests": list(b.tests)} for b in chosen},
        },
        "guest": {
            "memory_bytes": memory,
            "cpus": min(cpus, os.cpu_count() or 1),
            "accel": "tcg",
            "qemu": qemu_version(),
            "mglru": mglru,
            "lru_gen_enabled": info.get("lru_gen"),
            "transparent_hugepage": info.get("thp"),
            "cmdline": info.get("cmdline"),
            "zswap_params": {key.removeprefix("zswap."): v for key, v in sorted(info.items()) if key.startswith("zswap.")},
            "swaps": info.get("swaps"),
            "min_free_kbytes": info.get("min_free_kbytes"),
            "cgroup2_mount": info.get("cgroup2_mount"),
        },
        "test_timeout_s": test_timeout_s,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "binaries": {r.binary: r.to_dict() for r in runs},
    }
