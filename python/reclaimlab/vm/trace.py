"""Tracepoint counts in the guest (``--trace``; docs/vmlab.md#tracing).

The guest's kernel aggregates the events itself with **hist triggers** (CONFIG_HIST_TRIGGERS,
set in Debian's 6.1 and 6.12): one trigger per event, keyed by what the counters are split by
(a reclaim priority, a shrinker's scan function), summing the event's fields. Only the
histograms cross the serial channel (a few KiB), however many events fired. A trigger on a
disabled event enables it in "soft" mode: the trigger runs, nothing is written to the ring
buffer.

The counters get the keys the simulator exports for the same events
(crates/reclaimlab-core/src/stats/trace.rs): ``trace.<event>[.<key>.<value>...].<calls|field>``.
The kernel also reports what the model does not have (shrinkers of dentries and inodes, the
ISOLATED/NOPROGRESS throttles); those keys show without a simulator value.

The plan (vm.plan) installs the triggers after the runners are in their cgroups and before
"go"; init.sh sends the histograms as a snapshot labelled ``trace`` right after the "after"
snapshot.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

__all__ = [
    "EVENTS",
    "GROUPS",
    "TRACEFS",
    "HistEvent",
    "add_row",
    "counters",
    "empty_counters",
    "event_of",
    "hist_files",
    "parse_hist",
    "selected",
    "setup_lines",
    "traced_events",
]

TRACEFS = "/sys/kernel/tracing"
#: The groups ``--trace`` accepts (the scenario's ``trace`` list; stats/trace.rs GROUPS).
GROUPS = ("vmscan", "shrinker", "zswap", "compaction")
#: mm_vmscan_throttled's reason field is ``1 << enum vmscan_throttle_state`` (mmzone.h).
THROTTLE_REASONS = {
    1: "VMSCAN_THROTTLE_WRITEBACK",
    2: "VMSCAN_THROTTLE_ISOLATED",
    4: "VMSCAN_THROTTLE_NOPROGRESS",
    8: "VMSCAN_THROTTLE_CONGESTED",
}


@dataclass(frozen=True)
class HistEvent:
    """One event's hist trigger and how its rows become counters.

    ``split``: the hist keys that name counters (in key order); the other keys (``by``) only
    make the trigger valid and are summed over. ``calls``: export the hitcount."""

    group: str  # "vmscan" or "shrinker" (zswap selects the shrinker events' zswap rows)
    system: str
    event: str
    split: tuple[str, ...]
    vals: tuple[str, ...]
    by: tuple[str, ...] = ()
    calls: bool = True
    #: hist field -> the name the event's text output (the host's trace_pipe) prints it under,
    #: where the two differ (compaction's events print ``zone=DMA32``, ``priority=``, ``mode=``).
    text: tuple[tuple[str, str], ...] = ()

    @property
    def path(self) -> str:
        return f"{TRACEFS}/events/{self.system}/{self.event}"

    def trigger(self) -> str:
        keys = ",".join((*("shrink.sym" if k == "shrink" else k for k in self.split), *self.by))
        vals = f":vals={','.join(self.vals)}" if self.vals else ""
        return f"hist:keys={keys}{vals}:size=2048"


EVENTS = (
    HistEvent("vmscan", "vmscan", "mm_vmscan_lru_shrink_inactive", ("priority",), ("nr_scanned", "nr_reclaimed")),
    HistEvent("vmscan", "vmscan", "mm_vmscan_lru_shrink_active", ("priority",), ("nr_taken", "nr_deactivated")),
    HistEvent("vmscan", "vmscan", "mm_vmscan_kswapd_wake", (), (), by=("nid",)),
    HistEvent("vmscan", "vmscan", "mm_vmscan_direct_reclaim_begin", (), (), by=("order",)),
    HistEvent("vmscan", "vmscan", "mm_vmscan_direct_reclaim_end", (), ("nr_reclaimed",), by=("common_pid",), calls=False),
    HistEvent("vmscan", "vmscan", "mm_vmscan_memcg_reclaim_begin", (), (), by=("order",)),
    HistEvent("vmscan", "vmscan", "mm_vmscan_memcg_reclaim_end", (), ("nr_reclaimed",), by=("common_pid",), calls=False),
    HistEvent("vmscan", "vmscan", "mm_vmscan_throttled", ("reason",), ()),
    HistEvent("shrinker", "vmscan", "mm_shrink_slab_start", ("shrink", "priority"), ("total_scan",)),
    HistEvent("shrinker", "vmscan", "mm_shrink_slab_end", ("shrink",), ("retval",)),
    # compaction (include/trace/events/compaction.h): why direct compaction ran or was skipped.
    HistEvent("compaction", "compaction", "mm_compaction_try_to_compact_pages", ("order", "prio"), (), text=(("prio", "priority"),)),
    HistEvent("compaction", "compaction", "mm_compaction_suitable", ("idx", "order", "ret"), (), text=(("idx", "zone"),)),
    HistEvent("compaction", "compaction", "mm_compaction_end", ("sync", "status"), (), text=(("sync", "mode"),)),
    HistEvent("compaction", "compaction", "mm_compaction_deferred", ("idx", "order"), (), text=(("idx", "zone"),)),
    HistEvent("compaction", "compaction", "mm_compaction_defer_compaction", ("idx", "order"), (), text=(("idx", "zone"),)),
    HistEvent("compaction", "compaction", "mm_compaction_isolate_migratepages", (), ("nr_scanned", "nr_taken"), by=("common_pid",)),
    HistEvent("compaction", "compaction", "mm_compaction_isolate_freepages", (), ("nr_scanned", "nr_taken"), by=("common_pid",)),
    HistEvent("compaction", "compaction", "mm_compaction_migratepages", (), ("nr_migrated", "nr_failed"), by=("common_pid",)),
    HistEvent("compaction", "compaction", "mm_compaction_kcompactd_wake", ("order",), ()),
)

#: The zswap shrinker's scan function: what ``zswap`` keeps of the shrinker events.
ZSWAP_SHRINKER = "zswap_shrinker_scan"


def selected(groups: list[str]) -> list[HistEvent]:
    """The events ``groups`` counts, in EVENTS order."""
    shrink = "shrinker" in groups or "zswap" in groups
    return [e for e in EVENTS if (e.group == "shrinker" and shrink) or (e.group != "shrinker" and e.group in groups)]


def traced_events(groups: list[str]) -> set[str]:
    """The events ``groups`` installs triggers on."""
    return {e.event for e in selected(groups)}


def event_of(key: str) -> str | None:
    """``trace.<event>.…`` -> the event (None for another key)."""
    parts = key.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "trace" else None


def hist_files(groups: list[str]) -> list[str]:
    return [f"{e.path}/hist" for e in selected(groups)]


def setup_lines(groups: list[str]) -> list[str]:
    """The body of the plan's ``plan_trace`` (init.sh's helpers: die, info)."""
    lines = [f"    [ -d {TRACEFS}/events ] || mount -t tracefs tracefs {TRACEFS} || die 'cannot mount tracefs on {TRACEFS}'"]
    for e in selected(groups):
        lines.append(f"    [ -d {e.path} ] || die {shlex.quote(f'this kernel has no tracepoint {e.system}:{e.event} (--trace {e.group})')}")
        lines.append(
            f"    echo {shlex.quote(e.trigger())} > {e.path}/trigger || die {shlex.quote(f'cannot set a hist trigger on {e.event}')}"
        )
    return lines


_ROW = re.compile(r"^\{(?P<keys>.*)\}(?P<vals>.*)$")
_PAIR = re.compile(r"(\w+):\s*(-?\d+)")


def parse_hist(text: str) -> tuple[list[tuple[dict[str, str], dict[str, int]]], int]:
    """A hist file's rows as (keys, values incl. ``hitcount``), and its Dropped count.

    A row reads ``{ shrink: [ffffffff8134b3a0] zswap_shrinker_scan , priority: 12 } hitcount: 3
    total_scan: 96``; a ``.sym`` key's value is the symbol after the address."""
    rows = []
    dropped = 0
    for line in text.splitlines():
        line = line.strip()
        m = _ROW.match(line)
        if m is None:
            if line.startswith("Dropped:"):
                dropped = int(line.split()[1])
            continue
        keys = {}
        for part in m.group("keys").split(","):
            name, _, value = part.strip().partition(":")
            value = value.strip()
            if value.startswith("["):
                value = value.partition("]")[2].strip()
            keys[name.strip()] = value
        vals = {k: int(v) for k, v in _PAIR.findall(m.group("vals"))}
        rows.append((keys, vals))
    return rows, dropped


#: enum zone_type on x86-64 (mmzone.h; the tracepoints' ``idx``), as the kernel names zones.
ZONE_NAMES = ("DMA", "DMA32", "Normal", "Movable", "Device")


def _key_part(name: str, value: str) -> str:
    # A hist row has numbers; the host's trace_pipe text prints names (zone, status, mode).
    if name == "idx":
        return f"zone.{ZONE_NAMES[int(value)] if value.isdigit() and int(value) < len(ZONE_NAMES) else value}"
    if name in ("ret", "status"):
        from reclaimlab import native

        results = native.core().compact_results()
        return f"{name}.{results[int(value)] if value.isdigit() and int(value) < len(results) else value}"
    if name == "sync":
        return "sync" if value in ("1", "sync") else "async"
    if name == "reason":
        # A hist row has the number; the host's trace_pipe text prints the flag's name.
        return THROTTLE_REASONS.get(int(value), f"reason_{value}") if value.isdigit() else value
    if name == "shrink":
        return value or "unknown"
    return f"{name}.{value}"


def empty_counters(e: HistEvent, out: dict[str, int]) -> None:
    """Stable keys: an unsplit event that never fired still reports its counters as 0."""
    if not e.split:
        base = f"trace.{e.event}."
        if e.calls:
            out.setdefault(base + "calls", 0)
        for v in e.vals:
            out.setdefault(base + v, 0)


def add_row(out: dict[str, int], e: HistEvent, keys: dict[str, str], vals: dict[str, int], groups: list[str]) -> None:
    """Add one row of event ``e`` to ``out``: the one place an event and its fields become
    ``trace.*`` keys, for the guest's hist rows (``counters``) and the host's trace_pipe lines
    (lab.tracing, one event per row with ``hitcount`` 1). ``keys``: the split fields' values
    as the kernel printed them; ``vals``: the summed fields and ``hitcount``."""
    only_zswap = "zswap" in groups and "shrinker" not in groups
    if only_zswap and "shrink" in e.split and keys.get("shrink") != ZSWAP_SHRINKER:
        return
    parts = [_key_part(k, keys.get(k, "")) for k in e.split]
    base = ".".join(["trace", e.event, *parts]) + "."
    if e.calls:
        out[base + "calls"] = out.get(base + "calls", 0) + vals.get("hitcount", 0)
    for v in e.vals:
        out[base + v] = out.get(base + v, 0) + vals.get(v, 0)


def counters(files: dict[str, str], groups: list[str]) -> tuple[dict[str, int], int]:
    """The histograms of a ``trace`` snapshot as counters, and the events they dropped (a full
    histogram; then the counts are short)."""
    out: dict[str, int] = {}
    dropped = 0
    for e in selected(groups):
        text = files.get(f"{e.path}/hist")
        if text is None:
            continue
        rows, d = parse_hist(text)
        dropped += d
        empty_counters(e, out)
        for keys, vals in rows:
            add_row(out, e, keys, vals, groups)
    return out, dropped
