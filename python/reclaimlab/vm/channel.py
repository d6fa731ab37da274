"""The data channel: what the guest's init writes on its second serial port, parsed.

The record format is described at the top of guest/init.sh. ``Channel.feed`` takes bytes as
they arrive (the driver reads the file QEMU writes) and keeps complete records; a snapshot
becomes counters under the host lab's keys by ``keyed``, which lays the guest's files out in a
directory tree and reads it with the host lab's own ``record.snapshot`` (one key naming, not two).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reclaimlab.lab.record import Sources, snapshot

__all__ = ["Channel", "Snap", "keyed"]


@dataclass
class Snap:
    label: str  # before | sample | after
    uptime_cs: int
    files: dict[str, str] = field(default_factory=dict)


@dataclass
class Channel:
    buf: bytes = b""
    events: list[tuple[str, list[str]]] = field(default_factory=list)
    info: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    snaps: list[Snap] = field(default_factory=list)
    #: runner index -> its stdout JSON lines / stderr text
    outputs: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    stderrs: dict[int, str] = field(default_factory=dict)
    dmesg: str = ""  # the kernel's OOM reports
    bye: bool = False
    _block: tuple[str, Any] | None = None  # ("snap", Snap) | ("out", i) | ("stderr", i)
    _file: str | None = None
    _lines: list[str] = field(default_factory=list)
    _out_lines: list[str] = field(default_factory=list)

    def feed(self, data: bytes) -> None:
        self.buf += data
        while b"\n" in self.buf:
            raw, self.buf = self.buf.split(b"\n", 1)
            self._line(raw.decode("utf-8", errors="replace").rstrip("\r"))

    def event(self, name: str) -> list[str] | None:
        for n, args in self.events:
            if n == name:
                return args
        return None

    def _flush_file(self) -> None:
        if self._block is not None and self._block[0] == "snap" and self._file is not None:
            self._block[1].files[self._file] = "\n".join(self._lines) + "\n"
        self._file = None
        self._lines = []

    def _line(self, line: str) -> None:
        if self._block is not None:
            kind, what = self._block
            if line == "@@END":
                self._flush_file()
                if kind == "out":
                    self.outputs[what] = [json.loads(ln) for ln in self._out_lines if ln.strip().startswith("{")]
                elif kind == "stderr":
                    self.stderrs[what] = "\n".join(self._out_lines).strip()
                elif kind == "dmesg":
                    self.dmesg = "\n".join(self._out_lines).strip()
                self._block = None
                return
            if kind == "snap":
                if line.startswith("@@F "):
                    self._flush_file()
                    self._file = line[4:]
                elif self._file is not None:
                    self._lines.append(line)
                return
            self._out_lines.append(line)
            return
        if line.startswith("@@EV "):
            parts = line[5:].split()
            if parts:
                self.events.append((parts[0], parts[1:]))
                self.bye = self.bye or parts[0] == "bye"
        elif line.startswith("@@INFO "):
            key, _, value = line[7:].partition(" ")
            self.info[key] = value.strip()
        elif line.startswith("@@ERR "):
            self.error = line[6:]
        elif line.startswith("@@SNAP "):
            label, _, up = line[7:].partition(" ")
            snap = Snap(label, int(up or 0))
            self.snaps.append(snap)
            self._block = ("snap", snap)
        elif line == "@@DMESG":
            self._block = ("dmesg", None)
            self._out_lines = []
        elif line.startswith("@@OUT ") or line.startswith("@@STDERR "):
            kind, _, idx = line[2:].partition(" ")
            self._block = ("out" if kind == "OUT" else "stderr", int(idx))
            self._out_lines = []


def keyed(
    snap: Snap,
    cgroup_version: int,
    cgroups: dict[str, str],
    zram: list[tuple[str, int]],
    block: list[tuple[str, str]] | None = None,
) -> dict[str, int]:
    """The snapshot's counters under the host lab's keys (``record.snapshot`` on a copy of the
    guest's files: /proc/vmstat, /proc/meminfo, the cgroups' files, zswap debugfs, zram mm_stat,
    and ``block`` -- (key prefix, guest device) -- the filesystems' /sys/block/vdX/stat)."""
    with tempfile.TemporaryDirectory(prefix="reclaimlab-vmsnap-") as tmp:
        root = Path(tmp)
        for path, text in snap.files.items():
            f = root / path.lstrip("/")
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text, encoding="utf-8")
        zswap = root / "sys/kernel/debug/zswap"
        src = Sources(
            cgroup_version=cgroup_version,
            cgroups={p: root / d.lstrip("/") for p, d in cgroups.items()},
            zswap_dir=zswap if zswap.is_dir() else None,
            zram=list(zram),
            block=list(block or ()),
            root=root,
            zoneinfo=True,
        )
        return snapshot(src)
