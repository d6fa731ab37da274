"""The guest's initramfs: a base image cached by a hash of its inputs, plus one small archive per run.

The kernel unpacks every cpio archive it finds in the initrd, one after the other, into its
rootfs; so a run's initrd is the cached base image with the run's archive (``/plan/plan.sh``,
``/plan/lowered.json``) appended, and the base image is built once per kernel.

Base image: ``/bin/busybox`` (Debian's busybox-static; init installs its applet links),
``/bin/reclaimlab-runner`` (statically linked), ``/init`` (guest/init.sh),
``/lib/modules/NN-name.ko`` (decompressed, numbered in load order).

The archives are written here in the "newc" format (the one the kernel reads; see the kernel's
Documentation/driver-api/early-userspace/buffer-format.rst) rather than with cpio(1): no tool
needed, and the bytes depend only on the inputs (mtime 0, fixed owner, sorted entries).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from reclaimlab.vm.cache import BUSYBOX, InstalledKernel

__all__ = ["Entry", "base_image", "base_inputs", "guest_init", "guest_script", "newc", "run_archive"]

#: Bump when the image layout changes (it is part of the hash).
LAYOUT_VERSION = "1"

Entry = tuple[str, int, bytes]  # (path without leading "/", mode incl. type bits, data)

DIR = 0o040755
EXE = 0o100755
FILE = 0o100644


def _header(ino: int, mode: int, nlink: int, size: int, name: bytes) -> bytes:
    fields = (ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name) + 1, 0)
    return b"070701" + b"".join(f"{v:08X}".encode() for v in fields)


def _pad(n: int) -> bytes:
    return b"\0" * (-n % 4)


def newc(entries: Iterable[Entry]) -> bytes:
    """A newc cpio archive of ``entries`` (parent directories first), with its trailer."""
    out = bytearray()
    ino = 1
    for path, mode, data in [*entries, ("TRAILER!!!", 0, b"")]:
        name = path.encode()
        nlink = 2 if mode & 0o170000 == 0o040000 else 1
        if path == "TRAILER!!!":
            ino, nlink = 0, 1
        head = _header(ino, mode, nlink, len(data), name) + name + b"\0"
        out += head + _pad(len(head)) + data + _pad(len(data))
        ino += 1
    out += b"\0" * (-len(out) % 512)  # whole blocks, as cpio(1) writes them
    return bytes(out)


def guest_script(program: str) -> bytes:
    """A guest's /init: guest/prologue.sh (what every guest starts with) followed by
    guest/``program`` (package data of reclaimlab.vm)."""
    guest = resources.files("reclaimlab.vm").joinpath("guest")
    return guest.joinpath("prologue.sh").read_bytes() + b"\n" + guest.joinpath(program).read_bytes()


def guest_init() -> bytes:
    """The scenario runner's /init (guest/init.sh)."""
    return guest_script("init.sh")


def _module_name(i: int, path: Path) -> str:
    return f"lib/modules/{i:02d}-{path.name}"


def base_inputs(kernel: InstalledKernel, runner: Path) -> list[tuple[str, int, Path | bytes]]:
    """What the base image holds: (path, mode, source file or bytes)."""
    items: list[tuple[str, int, Path | bytes]] = [
        ("bin/busybox", EXE, BUSYBOX),
        ("bin/reclaimlab-runner", EXE, runner),
        ("init", EXE, guest_init()),
    ]
    items += [(_module_name(i, m), FILE, m) for i, m in enumerate(kernel.modules)]
    return items


def base_image(kernel: InstalledKernel, runner: Path, cache: Path) -> Path:
    """The base image for ``kernel`` with ``runner``, built unless the cache has it."""
    items = base_inputs(kernel, runner)
    blobs = {path: (src if isinstance(src, bytes) else src.read_bytes()) for path, _, src in items}
    h = hashlib.sha256(f"layout {LAYOUT_VERSION}\n".encode())
    for path, mode, _ in items:
        data = blobs[path]
        h.update(f"{path} {mode:o} {len(data)}\n".encode())
        h.update(data)
    out = cache / "initramfs" / f"{kernel.name}-{h.hexdigest()[:32]}.cpio"
    if out.is_file():
        return out
    for old in out.parent.glob(f"{kernel.name}-*.cpio"):  # superseded (another runner, kernel or init)
        old.unlink(missing_ok=True)
    dirs = ["bin", "dev", "etc", "lib", "lib/modules", "mnt", "plan", "proc", "root", "run", "sys", "tmp"]
    entries: list[Entry] = [(d, DIR, b"") for d in dirs]
    entries += [(path, mode, blobs[path]) for path, mode, _ in items]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(newc(entries))
    tmp.replace(out)  # atomic: a concurrent builder writes the same bytes
    return out


def run_archive(files: dict[str, bytes]) -> bytes:
    """One run's archive: ``files`` (paths under /plan, "fsmod/01-ext4.ko" in a directory of
    its own) after the base image; the directories come before their files (the kernel's
    unpacker does not make missing parents)."""
    dirs = sorted({str(parent) for name in files for parent in Path(name).parents if str(parent) != "."})
    entries: list[Entry] = [(f"plan/{d}", DIR, b"") for d in dirs]
    return newc([*entries, *((f"plan/{name}", FILE, data) for name, data in sorted(files.items()))])
