"""Tracepoint counts on the host (``--trace``; docs/lab.md#tracing).

The guest's kernels aggregate the events themselves with hist triggers (vm.trace); this host's
kernel has tracing but not CONFIG_HIST_TRIGGERS, so the host lab reads every event as text from
``trace_pipe`` and aggregates in user space, into exactly the guest's keys (vm.trace.add_row is
the one place an event and its fields become a ``trace.*`` key).

What the run changes, journaled before it is changed (journal ``mount`` and ``tracefs``
entries; ``reclaimlab lab restore`` undoes them, also after SIGKILL):

1. tracefs is mounted at /sys/kernel/tracing if it is not (undo: unmount, only if we mounted it);
2. ``tracing_on`` 0, the events of the groups enabled, the per-CPU ``buffer_size_kb`` raised to
   BUFFER_KB, the buffer cleared (undo: the events' ``enable`` and ``tracing_on`` written back,
   the buffer cleared, ``buffer_size_kb`` written back);
3. at "go" ``tracing_on`` 1 and a reader thread drains ``trace_pipe`` (non-blocking, every
   READ_PAUSE_S when it is empty); after the "after" snapshot ``tracing_on`` 0 and the reader
   drains what is left. Events the ring buffer overwrote before they were read are the
   ``overrun`` of ``per_cpu/cpu*/stats``: ``stats.trace_dropped``.

The events are host-wide. Only those fired by the run's runners (their threads' pids) and by
kswapd count; the others (another process's reclaim, a shrinker run by a kernel thread) are
``stats.trace_other``. ``stats.trace_events`` is every event read, ``stats.trace_reader_cpu_s``
the reader thread's CPU time (the cost: it competes with the runners for the CPUs).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reclaimlab.lab import host
from reclaimlab.lab.errors import LabError
from reclaimlab.vm import trace as vmtrace

if TYPE_CHECKING:  # journal.restore calls undo(): no import at run time
    from reclaimlab.lab.journal import Journal

__all__ = ["BUFFER_KB", "TRACEFS", "HostTrace", "check", "parse_line", "undo"]

TRACEFS = Path("/sys/kernel/tracing")
#: Per-CPU ring buffer: ~4 MiB holds ~25k vmscan events per CPU, seconds of the busiest
#: scenario's events between two reads (the reader wakes every READ_PAUSE_S).
BUFFER_KB = 4096
READ_PAUSE_S = 0.05
_EVENTS = {e.event: e for e in vmtrace.EVENTS}

# ``comm-pid [cpu] flags timestamp: event: body`` (the default trace output; comm may hold
# spaces and dashes, so the pid is the last ``-digits`` before the CPU in brackets).
_LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[\d+\]\s+\S+\s+[\d.]+:\s+(?P<event>\w+):\s(?P<body>.*)$")
_PAIR = re.compile(r"(\w+)=(\S+)")
# mm_shrink_slab_start/end print ``%pS %p: nid: ...``: the scan function as symbol+off/len
# (and `` [module]`` for a module's), then the shrinker's hashed address.
_SYM = r"(?P<shrink>[^\s+]+)\S*(?: \[\w+\])? \S+: nid: -?\d+ "
_SHRINK_START = re.compile(
    _SYM + r"objects to shrink -?\d+ gfp_flags \S+ cache items \d+ delta \d+ total_scan (?P<total_scan>\d+) priority (?P<priority>-?\d+)"
)
_SHRINK_END = re.compile(_SYM + r"unused scan count -?\d+ new scan count -?\d+ total_scan -?\d+ last shrinker return val (?P<retval>-?\d+)")


def parse_line(line: str) -> tuple[int, str, dict[str, str]] | None:
    """One ``trace_pipe`` line as (pid, event, fields as printed); None for another line (a
    ``CPU:N [LOST N EVENTS]`` note, an event of another system)."""
    m = _LINE.match(line)
    if m is None:
        return None
    event, body = m.group("event"), m.group("body")
    if event == "mm_shrink_slab_start" or event == "mm_shrink_slab_end":
        s = (_SHRINK_START if event == "mm_shrink_slab_start" else _SHRINK_END).match(body)
        if s is None:
            return None
        fields = s.groupdict()
    else:
        fields = dict(_PAIR.findall(body))
        e = _EVENTS.get(event)
        if e is not None:
            for hist_name, text_name in e.text:
                if text_name in fields:
                    fields[hist_name] = fields.pop(text_name)
        if e is not None and any(k not in fields for k in (*e.split, *e.vals)):
            return None  # not the default output (e.g. options/raw): reported by HostTrace
    return int(m.group("pid")), event, fields


def add_line(out: dict[str, int], event: str, fields: dict[str, str], groups: list[str]) -> bool:
    """Count one event into ``out`` (vm.trace.add_row); False when the groups do not count it."""
    e = _EVENTS.get(event)
    if e is None or e not in vmtrace.selected(groups):
        return False
    keys = {k: fields.get(k, "") for k in e.split}
    vals = {"hitcount": 1, **{v: int(fields.get(v, "0")) for v in e.vals}}
    vmtrace.add_row(out, e, keys, vals, groups)
    return True


def check(tracefs_supported: bool) -> str | None:
    """Why the host lab cannot trace here (None: it can)."""
    if not tracefs_supported:
        return "this kernel has no tracefs (not in /proc/filesystems)"
    if (TRACEFS / "events").is_dir():
        tracer = host.read_text(TRACEFS / "current_tracer").strip()
        events = host.read_text(TRACEFS / "set_event").strip()
        if tracer != "nop" or events:
            busy = f"tracer {tracer!r}" if tracer != "nop" else f"events {events.split()[:3]}"
            return f"tracefs at {TRACEFS} is in use ({busy}): the lab does not share the ring buffer"
    return None


def _tracefs_mounted() -> bool:
    return any(m.point == str(TRACEFS) and m.fstype == "tracefs" for m in host.mounts())


def _buffer_kb(text: str) -> str:
    """``buffer_size_kb`` as written back: ``7 (expanded: 1408)`` (never expanded) is 7."""
    return text.split()[0]


def undo(e: dict[str, Any]) -> str | None:
    """The ``tracefs`` journal entry's undo (journal.restore): events and tracing_on back, the
    buffer cleared, its size back. Nothing when tracefs is not mounted (nothing can be on)."""
    root = Path(e["root"])
    if not (root / "events").is_dir():
        return None
    did = []
    for path, old in sorted(e["files"].items()):
        p = Path(path)
        if p.exists() and host.read_text(p).strip() != old:
            host.write_text(p, old)
            did.append(f"{p.relative_to(root)}={old}")
    host.write_text(root / "trace", "")  # opening ``trace`` with O_TRUNC clears the ring buffer
    size = root / "buffer_size_kb"
    old_kb = str(e["buffer_size_kb"])
    if _buffer_kb(host.read_text(size)) != old_kb:
        host.write_text(size, old_kb)
        did.append(f"buffer_size_kb={old_kb}")
    return f"tracefs: {', '.join(did)}" if did else None


@dataclass
class HostTrace:
    """One run's tracing: ``setup`` (journaled), ``start`` at go, ``stop`` after "after"."""

    groups: list[str]
    counts: dict[str, int] = field(default_factory=dict)
    other: int = 0  # events of other tasks (not counted)
    lines: int = 0  # events read (all tasks)
    unparsed: list[str] = field(default_factory=list)  # lines of our events the parser did not read
    reader_cpu_s: float = 0.0  # CPU time of the reader thread (its cost, one of the CPUs)
    overrun_before: int = 0
    _pids: set[int] = field(default_factory=set)
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _fd: int | None = None
    _error: BaseException | None = None

    def setup(self, journal: Journal) -> None:
        if not _tracefs_mounted():
            journal.record("mount", path=str(TRACEFS), fstype="tracefs", created_dir=False)
            host.run_tool(["mount", "-t", "tracefs", "tracefs", str(TRACEFS)])
        events = vmtrace.selected(self.groups)
        files = {str(TRACEFS / "tracing_on"): host.read_text(TRACEFS / "tracing_on").strip()}
        for e in events:
            enable = TRACEFS / "events" / e.system / e.event / "enable"
            if not enable.exists():
                raise LabError(f"this kernel has no tracepoint {e.system}:{e.event} (--trace {e.group})")
            files[str(enable)] = host.read_text(enable).strip()
        old_kb = _buffer_kb(host.read_text(TRACEFS / "buffer_size_kb"))
        journal.record("tracefs", root=str(TRACEFS), files=files, buffer_size_kb=old_kb)
        host.write_text(TRACEFS / "tracing_on", "0")
        if int(old_kb) < BUFFER_KB:
            host.write_text(TRACEFS / "buffer_size_kb", str(BUFFER_KB))
        for e in events:
            host.write_text(TRACEFS / "events" / e.system / e.event / "enable", "1")
        host.write_text(TRACEFS / "trace", "")
        self.overrun_before = self.overrun()

    @staticmethod
    def overrun() -> int:
        """Events overwritten in the ring buffer before anyone read them, all CPUs."""
        total = 0
        for stats in sorted(TRACEFS.glob("per_cpu/cpu*/stats")):
            for line in host.read_text(stats).splitlines():
                name, _, value = line.partition(":")
                if name.strip() == "overrun":
                    total += int(value.strip())
        return total

    def start(self, pids: list[int]) -> None:
        """Count from now: the runners' threads (``pids``' tasks) and kswapd."""
        for pid in pids:
            with contextlib.suppress(OSError):
                self._pids |= {int(t) for t in os.listdir(f"/proc/{pid}/task")}
            self._pids.add(pid)
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                with contextlib.suppress(OSError):
                    if host.read_text(d / "comm").startswith("kswapd"):
                        self._pids.add(int(d.name))
        self._fd = os.open(TRACEFS / "trace_pipe", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        host.write_text(TRACEFS / "tracing_on", "1")
        self._thread = threading.Thread(target=self._read, name="reclaimlab-trace", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._fd is not None
        tail = b""
        try:
            while True:
                try:
                    chunk = os.read(self._fd, 1 << 16)
                except BlockingIOError:
                    chunk = b""
                except OSError as err:
                    if err.errno != errno.EINTR:
                        raise
                    continue
                if chunk:
                    lines = (tail + chunk).split(b"\n")
                    tail = lines.pop()
                    for raw in lines:
                        self._count(raw.decode("utf-8", "replace"))
                elif self._stop.is_set():
                    break
                else:
                    time.sleep(READ_PAUSE_S)
            if tail:
                self._count(tail.decode("utf-8", "replace"))
        except BaseException as err:  # raised again by stop()
            self._error = err
        finally:
            self.reader_cpu_s = time.thread_time()

    def _count(self, line: str) -> None:
        parsed = parse_line(line)
        if parsed is None:
            if any(f" {event}: " in line for event in _EVENTS) and len(self.unparsed) < 3:
                self.unparsed.append(line)
            return
        pid, event, fields = parsed
        self.lines += 1
        if pid not in self._pids:
            self.other += 1
            return
        add_line(self.counts, event, fields, self.groups)

    def stop(self) -> tuple[dict[str, int], int]:
        """Stop tracing, drain the buffer: the counts and the events lost (overrun)."""
        host.write_text(TRACEFS / "tracing_on", "0")
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)
            if self._thread.is_alive():
                raise LabError("the trace reader did not finish draining trace_pipe within 120 s")
        self.close()
        if self._error is not None:
            raise LabError(f"reading {TRACEFS}/trace_pipe failed: {self._error}")
        if self.unparsed:
            # A changed output format (trace_options such as raw, hex, bin) would lose events silently.
            raise LabError(f"{TRACEFS}/trace_pipe printed events in a form the lab cannot read (trace options changed?): {self.unparsed}")
        out: dict[str, int] = {}
        for e in vmtrace.selected(self.groups):
            vmtrace.empty_counters(e, out)
        out.update(self.counts)
        return out, self.overrun() - self.overrun_before

    def close(self) -> None:
        """Stop the reader (if running) and close trace_pipe; safe to call twice."""
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=120)
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
