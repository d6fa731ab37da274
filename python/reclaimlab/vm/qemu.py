"""One guest: QEMU started, watched and stopped so that nothing outlives the driver.

Process chain (every link dies with the one before it):

    driver --PR_SET_PDEATHSIG=KILL--> timeout -s KILL T --> setpriv --pdeathsig KILL qemu-system-x86_64

* ``timeout`` ends QEMU after T seconds whatever the driver does (the driver's own deadline is a
  little shorter, so it normally reports the timeout itself);
* the driver's death (even SIGKILL) kills ``timeout`` (its PDEATHSIG), whose death kills QEMU
  (``setpriv --pdeathsig``, set in QEMU's own process before exec);
* on any failure and on SIGINT/SIGTERM the driver stops QEMU by its pid (``stop``).

No file of the run has a name: the run's initrd, the swap disk images, the filesystem images
and the serial port outputs are O_TMPFILE files (unnamed, freed when the last descriptor
closes) handed to QEMU as ``/proc/self/fd/N``. A driver killed at any moment leaves nothing on
disk, so there is nothing for ``lab restore`` to undo either. A filesystem image (``fs_image``)
is sparse, and the host lab's mkfs (``lab.filesystems.mkfs_argv``: everything initialised now,
no discard) writes its filesystem through ``/proc/self/fd/N`` of the mkfs process, which
inherits the descriptor: no loop device, no mount on the host.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reclaimlab.lab.errors import LabError
from reclaimlab.lab.filesystems import mkfs_argv

__all__ = ["Guest", "GuestSpec", "fs_image", "qemu_version", "tmpfile"]

PR_SET_PDEATHSIG = 1
QEMU = "qemu-system-x86_64"
#: The kernel command line: console on the first serial port; the data channel is the second.
#: panic=-1 + QEMU's -no-reboot: a panic (or init exiting) ends QEMU at once.
#: transparent_hugepage=madvise: Debian's kernels default to "always", which gives the runner's
#: 2 MiB-aligned regions huge pages (not modelled; memcg OOM kills under memory.max); this
#: project's hosts run "madvise", under which the runner gets none.
CMDLINE = "console=ttyS0 loglevel=4 panic=-1 rdinit=/init transparent_hugepage=madvise"
#: What QEMU itself needs beyond the guest's RAM (measured: ~450 MiB RSS for a 1 GiB guest).
QEMU_OVERHEAD_BYTES = 512 << 20
#: Extra seconds the outer ``timeout`` gives beyond the driver's deadline.
TIMEOUT_SLACK_S = 30


def tmpfile(size: int = 0, data: bytes | None = None) -> int:
    """An unnamed file (O_TMPFILE) in the temporary directory: a descriptor, never a name."""
    fd = os.open(tempfile.gettempdir(), os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
    try:
        if data is not None:
            os.write(fd, data)
        if size:
            os.ftruncate(fd, size)  # sparse: only what the guest writes takes space
    except OSError:
        os.close(fd)
        raise
    return fd


#: How long one mkfs may take (a 320 MiB xfs takes about a second; ext4 writes its inode
#: tables and journal now).
MKFS_TIMEOUT_S = 300


def fs_image(size: int, fstype: str) -> int:
    """An unnamed sparse file of ``size`` bytes with a fresh ``fstype`` filesystem on it (the
    host lab's mkfs options): a descriptor, never a name. LabError if mkfs fails."""
    fd = tmpfile(size=size)
    try:
        argv = mkfs_argv(fstype, f"/proc/self/fd/{fd}")
        if shutil.which(argv[0]) is None:
            raise LabError(f"{argv[0]} is not installed on the host: the VM lab makes the {fstype} image here (`make lab-tools`)")
        try:
            r = subprocess.run(
                argv, pass_fds=[fd], capture_output=True, text=True, timeout=MKFS_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            raise LabError(f"{argv[0]} of a {size >> 20} MiB image took more than {MKFS_TIMEOUT_S} s") from None
        if r.returncode != 0:
            raise LabError(f"`{' '.join(argv)}` failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-600:]}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def qemu_version() -> str | None:
    try:
        r = subprocess.run([QEMU, "--version"], capture_output=True, text=True, timeout=10, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = r.stdout.strip().splitlines()
    return lines[0] if lines else None


_libc: Any = None


def _die_with_parent(parent: int) -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)  # loaded before fork
    libc = _libc

    def setup() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the driver died before prctl took effect
            os._exit(1)

    return setup


@dataclass
class GuestSpec:
    vmlinux: Path
    initrd: bytes
    memory_bytes: int
    cpus: int
    disks: list[int] = field(default_factory=list)  # sizes in bytes, in /dev/vda, vdb ... order
    #: filesystem images, attached after ``disks``: (size in bytes, type for mkfs)
    fs_images: list[tuple[int, str]] = field(default_factory=list)
    timeout_s: float = 600.0
    cmdline_extra: str = ""


class Guest:
    """A running guest. ``read_data()`` returns the data channel's new bytes; ``stop()`` ends it."""

    def __init__(self, spec: GuestSpec):
        self.spec = spec
        self.fds: list[int] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.data_fd = -1
        self.console_fd = -1
        self.err_fd = -1
        self.data_off = 0
        self.started = 0.0

    def argv(self, fd_initrd: int, fd_console: int, fd_data: int, fd_disks: list[int]) -> list[str]:
        s = self.spec
        mib = max(64, s.memory_bytes >> 20)
        argv = [
            QEMU,
            "-nodefaults",
            "-no-user-config",
            "-nographic",
            "-machine", "pc,accel=tcg",
            "-cpu", "max",
            "-smp", str(s.cpus),
            "-m", f"{mib}M",
            "-kernel", str(s.vmlinux),
            "-initrd", f"/proc/self/fd/{fd_initrd}",
            "-append", f"{CMDLINE} {s.cmdline_extra}".strip(),
            "-no-reboot",
            "-serial", f"file:/proc/self/fd/{fd_console}",
            "-serial", f"file:/proc/self/fd/{fd_data}",
            "-monitor", "none",
        ]  # fmt: skip
        for i, fd in enumerate(fd_disks):
            argv += [
                "-drive", f"file=/proc/self/fd/{fd},format=raw,if=none,id=disk{i},cache=unsafe,aio=threads",
                "-device", f"virtio-blk-pci,drive=disk{i}",
            ]  # fmt: skip
        return argv

    def start(self) -> None:
        s = self.spec
        for tool in ("timeout", "setpriv", QEMU):
            if shutil.which(tool) is None:
                raise LabError(f"{tool} is not on PATH: run `make vmlab`")
        fd_initrd = tmpfile(data=s.initrd)
        self.console_fd = tmpfile()
        self.data_fd = tmpfile()
        self.err_fd = tmpfile()
        self.fds = [fd_initrd, self.console_fd, self.data_fd, self.err_fd]
        disks: list[int] = []
        try:
            for size in s.disks:
                disks.append(tmpfile(size=size))
            for size, fstype in s.fs_images:
                disks.append(fs_image(size, fstype))
        finally:
            self.fds += disks  # closed by close() whatever happens (drive's finally)
        argv = [
            "timeout", "-s", "KILL", str(int(s.timeout_s + TIMEOUT_SLACK_S)),
            "setpriv", "--pdeathsig", "KILL",
            *self.argv(fd_initrd, self.console_fd, self.data_fd, disks),
        ]  # fmt: skip
        self.started = time.monotonic()
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self.err_fd,
                pass_fds=self.fds,
                start_new_session=True,  # a Ctrl-C on the terminal reaches only the driver
                preexec_fn=_die_with_parent(os.getpid()),  # safe: the driver has no threads
            )
        except OSError as e:
            self.close()
            raise LabError(f"cannot start {QEMU}: {e.strerror or e}") from None
        # QEMU has its own descriptors once it runs; ours of the initrd and the disks can go
        # (the data and console files stay open here: the driver reads them).
        for fd in (fd_initrd, *disks):
            os.close(fd)
        self.fds = [self.console_fd, self.data_fd, self.err_fd]

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def qemu_pid(self) -> int | None:
        """QEMU's own pid: the child of ``timeout`` (setpriv execs QEMU in place)."""
        if self.proc is None:
            return None
        try:
            kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        except OSError:
            return None
        return int(kids[0]) if kids else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exit_status(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def read_data(self) -> bytes:
        data = os.pread(self.data_fd, 1 << 20, self.data_off)
        self.data_off += len(data)
        return data

    def console_tail(self, n: int = 3000) -> str:
        try:
            size = os.fstat(self.console_fd).st_size
            text = os.pread(self.console_fd, n, max(0, size - n)).decode(errors="replace")
        except OSError:
            return ""
        return text.replace("\r", "")

    def stderr_text(self, n: int = 2000) -> str:
        """The end of what QEMU (or timeout, setpriv) wrote on stderr."""
        try:
            size = os.fstat(self.err_fd).st_size
            return os.pread(self.err_fd, n, max(0, size - n)).decode(errors="replace").strip()
        except OSError:
            return ""

    def wait(self, timeout_s: float) -> bool:
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self) -> None:
        """End the guest: SIGKILL to QEMU by its pid, then to ``timeout`` by its pid; reap."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            qpid = self.qemu_pid()
            if qpid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(qpid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()  # `timeout` (our child): QEMU would follow it by its PDEATHSIG
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)

    def close(self) -> None:
        self.stop()
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []
