"""Reading the kernel's counters under the simulator's names, before/after and over time.

A snapshot reads /proc/vmstat, every file in the zswap debugfs directory, each of the run's
cgroups (memory.stat, plus v1 memory.usage_in_bytes, max_usage_in_bytes and failcnt; v2
memory.current, memory.events, memory.swap.current, memory.zswap.current), /proc/meminfo,
/proc/buddyinfo and the mm_stat of the run's zram devices, keyed exactly as
``Simulation::counters`` keys them (crates/reclaimlab-core/src/engine.rs):

* ``vmstat.<name>``; ``zswap.<debugfs file>``; ``meminfo.<Field>`` (kB, as shown);
  ``buddyinfo.<zone>.<order>`` (free blocks, summed over nodes);
* ``memcg[<scenario path>].memory.stat.<key>``, ``memcg[<path>].memory.usage_in_bytes`` ...,
  where the scenario's "/" is the run's own top cgroup (``reclaimlab-<runid>``);
* ``zram<k>.mm_stat.<field>``, k = the device's index among the scenario's zram devices;
* ``block[<filesystem name>].stat.<field>``: the loop device under a scenario filesystem
  (/sys/block/loopN/stat; sectors are 512 bytes). The simulator exports the request counts
  (``read_ios``, ``read_merges``, ``write_ios``, ``write_merges``, ``flush_ios``); the other
  fields (sectors, ticks) are in the raw snapshots and the series only.

A run's counters are ``after - before`` for event counters and the value in ``after`` for
gauges (``CLASSIFICATION``). ``after`` is read when every runner has finished its phases but
still holds its memory, as the simulator reads its counters before the processes exit.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reclaimlab.lab import host
from reclaimlab.scenario import cgroup_files

__all__ = [
    "BLOCK_STAT",
    "BUDDYINFO",
    "CLASSIFICATION",
    "EVENT",
    "GAUGE",
    "PRESSURE_MEMORY",
    "ZRAM_MM_STAT",
    "Series",
    "Sources",
    "buddyinfo",
    "counters",
    "kind",
    "pressure",
    "sim_counter_keys",
    "snapshot",
]

GAUGE = "gauge"
EVENT = "event"

#: The 9 fields of /sys/block/zramN/mm_stat, in the kernel's order (kernel-model.md §12.2).
ZRAM_MM_STAT = (
    "orig_data_size",
    "compr_data_size",
    "mem_used_total",
    "mem_limit",
    "mem_used_max",
    "same_pages",
    "pages_compacted",
    "huge_pages",
    "huge_pages_since",
)

#: Gauge or event, by key pattern (fnmatch); the first match wins. memcg keys are matched
#: without their path and with ``total_`` removed from memory.stat names
#: (``memcg[/a].memory.stat.total_pgfault`` is matched as ``memcg.memory.stat.pgfault``).
#: A key no pattern matches is a gauge (its value at the snapshot).
CLASSIFICATION: tuple[tuple[str, str], ...] = (
    # /proc/vmstat: these nr_* are cumulative node counters (pages written by reclaim, dirtied,
    # written, FOLL_PIN acquisitions), not current sizes.
    ("vmstat.nr_vmscan_write", EVENT),
    ("vmstat.nr_vmscan_immediate_reclaim", EVENT),
    ("vmstat.nr_dirtied", EVENT),
    ("vmstat.nr_written", EVENT),
    ("vmstat.nr_throttled_written", EVENT),
    ("vmstat.nr_foll_pin_acquired", EVENT),
    ("vmstat.nr_foll_pin_released", EVENT),
    # /proc/vmstat: every other nr_* is a zone/node page count now (nr_free_pages, nr_zspages,
    # nr_swapcached, nr_*_anon, dirty thresholds ...), and workingset_nodes is a node count.
    ("vmstat.nr_*", GAUGE),
    ("vmstat.workingset_nodes", GAUGE),
    # /proc/vmstat: the rest count events since boot (pgscan_*, pswpout, zswpout, allocstall_*).
    ("vmstat.*", EVENT),
    # zswap debugfs: the pool's size and its entry counts now ...
    ("zswap.pool_total_size", GAUGE),
    ("zswap.stored_pages", GAUGE),
    ("zswap.stored_incompressible_pages", GAUGE),
    ("zswap.same_filled_pages", GAUGE),
    # ... the rest count events (rejects, pool_limit_hit, written_back_pages, decompress_fail).
    ("zswap.*", EVENT),
    # memcg memory.stat (v1 and v2): faults, charge/uncharge (v1 pgpgin/pgpgout), scans,
    # steals, (de)activations, refaults and swap traffic count events ...
    ("memcg.memory.stat.pg*", EVENT),
    ("memcg.memory.stat.workingset_refault_*", EVENT),
    ("memcg.memory.stat.workingset_activate_*", EVENT),
    ("memcg.memory.stat.workingset_restore_*", EVENT),
    ("memcg.memory.stat.workingset_nodereclaim", EVENT),
    ("memcg.memory.stat.zswpin", EVENT),
    ("memcg.memory.stat.zswpout", EVENT),
    ("memcg.memory.stat.zswpwb", EVENT),
    ("memcg.memory.stat.pswpin", EVENT),
    ("memcg.memory.stat.pswpout", EVENT),
    ("memcg.memory.stat.swpin_zero", EVENT),
    ("memcg.memory.stat.swpout_zero", EVENT),
    ("memcg.memory.stat.thp_*", EVENT),
    # ... and every size is a gauge: rss, swap, swapcached, anon, zswap, zswapped,
    # inactive_anon, active_anon, *_file, hierarchical_*_limit, workingset_nodes ...
    ("memcg.memory.stat.*", GAUGE),
    # memory.events and memory.swap.events (v2): counts of low, high, max, oom, oom_kill /
    # swap max, fail events.
    ("memcg.memory.events.*", EVENT),
    ("memcg.memory.swap.events.*", EVENT),
    # memory.pressure (v2) and /proc/pressure/memory: `total` is stall time since boot (µs),
    # the avg10/60/300 are decaying averages now.
    ("memcg.memory.pressure.*.total", EVENT),
    ("memcg.memory.pressure.*", GAUGE),
    ("pressure.memory.*.total", EVENT),
    ("pressure.memory.*", GAUGE),
    # v1 memory.failcnt: charges that failed at the cgroup's limit (since it was created) ...
    ("memcg.memory.failcnt", EVENT),
    # ... memory.current, memory.swap.current, memory.zswap.current (v2), memory.usage_in_bytes
    # (v1): bytes charged now; memory.peak, memory.swap.peak (v2), memory.max_usage_in_bytes
    # (v1): the most ever charged.
    ("memcg.memory.*", GAUGE),
    # /proc/meminfo: sizes now, in kB as shown (MemFree, SwapFree, Zswap, Zswapped ...).
    ("meminfo.*", GAUGE),
    # /sys/block/loopN/stat of a scenario filesystem's loop device: requests in flight now ...
    ("block*.stat.in_flight", GAUGE),
    # ... the rest count requests, sectors and milliseconds since the device was set up.
    ("block*.stat.*", EVENT),
    # zram mm_stat: compaction and "huge pages since reset" are cumulative ...
    ("zram*.mm_stat.pages_compacted", EVENT),
    ("zram*.mm_stat.huge_pages_since", EVENT),
    # ... the sizes (orig/compr data, mem used, max used, limit) and page counts are gauges.
    ("zram*.mm_stat.*", GAUGE),
    # /proc/buddyinfo: free blocks of each order now.
    ("buddyinfo.*", GAUGE),
    # /proc/zoneinfo: free pages, watermarks, sizes and lowmem_reserve now.
    ("zoneinfo.*", GAUGE),
)

_MEMCG = re.compile(r"^memcg\[[^\]]*\]\.")


def _normalise(key: str) -> str:
    m = _MEMCG.match(key)
    if m is None:
        return key
    rest = key[m.end() :]
    if rest.startswith("memory.stat.total_"):
        rest = "memory.stat." + rest[len("memory.stat.total_") :]
    return "memcg." + rest


def kind(key: str) -> str:
    """GAUGE or EVENT for a counter key (see CLASSIFICATION)."""
    k = _normalise(key)
    for pattern, what in CLASSIFICATION:
        if fnmatch.fnmatchcase(k, pattern):
            return what
    return GAUGE


# ---------------------------------------------------------------------------------------------
# Snapshots
# ---------------------------------------------------------------------------------------------


@dataclass
class Sources:
    """Where a snapshot reads from."""

    cgroup_version: int = 1
    cgroups: dict[str, Path] = field(default_factory=dict)  # scenario path -> cgroup directory
    zswap_dir: Path | None = None
    zram: list[tuple[str, int]] = field(default_factory=list)  # (key prefix "zram0", device id)
    block: list[tuple[str, str]] = field(default_factory=list)  # (key prefix "block[<fs name>]", /dev/loopN)
    #: Where /proc and /sys are: "/" on the host; the VM lab reads a copy of a guest's files.
    root: Path = Path("/")
    #: Read /proc/zoneinfo too (the VM lab's guest, whose zones the scenario owns; the host's
    #: belong to its other tenants).
    zoneinfo: bool = False


#: The fields of /sys/block/<dev>/stat, in the kernel's order (Documentation/block/stat.rst).
BLOCK_STAT = (
    "read_ios",
    "read_merges",
    "read_sectors",
    "read_ticks",
    "write_ios",
    "write_merges",
    "write_sectors",
    "write_ticks",
    "in_flight",
    "io_ticks",
    "time_in_queue",
    "discard_ios",
    "discard_merges",
    "discard_sectors",
    "discard_ticks",
    "flush_ios",
    "flush_ticks",
)


def _meminfo(root: Path) -> dict[str, int]:
    out = {}
    for line in host.read_text(root / host.MEMINFO.relative_to("/")).splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            try:
                out[f"meminfo.{name.strip()}"] = int(parts[0])
            except ValueError:
                continue
    return out


#: /proc/buddyinfo: one line per node and zone, ``Node 0, zone   Normal   768   169 ...``, the
#: free blocks of orders 0..MAX_PAGE_ORDER (mm/vmstat.c frag_show_print).
BUDDYINFO = Path("/proc/buddyinfo")


def buddyinfo(text: str) -> dict[str, int]:
    """/proc/buddyinfo under the simulator's keys, ``buddyinfo.<zone>.<order>``: each zone's
    free blocks per order, summed over the nodes (the simulator has one node)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        head, sep, counts = line.partition("zone")
        if not sep or not head.startswith("Node"):
            continue
        zone, *fields = counts.split()
        for order, f in enumerate(fields):
            try:
                n = int(f)
            except ValueError:
                continue
            key = f"buddyinfo.{zone}.{order}"
            out[key] = out.get(key, 0) + n
    return out


#: /proc/zoneinfo (mm/vmstat.c zoneinfo_show_print): per node and zone, ``pages free``, the
#: watermarks, the sizes and ``protection: (r0, r1, ...)`` (lowmem_reserve by the allocation's
#: highest zone index).
ZONEINFO = Path("/proc/zoneinfo")
ZONEINFO_FIELDS = ("min", "low", "high", "spanned", "present", "managed")


def zoneinfo(text: str) -> dict[str, int]:
    """/proc/zoneinfo under the simulator's keys, ``zoneinfo.<zone>.<field>``: ``nr_free_pages``,
    ZONEINFO_FIELDS and ``protection.<i>``, summed over the nodes; zones with no managed pages
    (the empty ones of a small machine) are left out."""
    out: dict[str, int] = {}
    zone: dict[str, int] = {}
    name = ""

    def flush() -> None:
        if name and zone.get("managed", 0) > 0:
            for k, v in zone.items():
                key = f"zoneinfo.{name}.{k}"
                out[key] = out.get(key, 0) + v

    for line in text.splitlines():
        if line.startswith("Node"):
            flush()
            name, zone = line.partition("zone")[2].strip(), {}
            continue
        words = line.split()
        if len(words) == 3 and words[0] == "pages" and words[1] == "free":
            zone["nr_free_pages"] = int(words[2])
        elif len(words) == 2 and words[0] in ZONEINFO_FIELDS and words[1].isdigit():
            zone[words[0]] = int(words[1])
        elif words and words[0] == "protection:":
            values = line.partition("(")[2].partition(")")[0].split(",")
            for i, v in enumerate(values):
                if v.strip().isdigit():
                    zone[f"protection.{i}"] = int(v)
    flush()
    return out


def _int_or_none(path: Path) -> int | None:
    try:
        return int(host.read_text(path).strip())
    except (OSError, ValueError):
        return None


#: /proc/pressure/memory (the system's memory PSI); absent when the kernel runs without PSI
#: (CONFIG_PSI off, or psi=0: the file is missing or reading it fails).
PRESSURE_MEMORY = Path("/proc/pressure/memory")


def pressure(text: str, prefix: str) -> dict[str, int]:
    """A PSI file (``some avg10=1.23 avg60=0.50 avg300=0.10 total=12345``, then ``full ...``)
    under the simulator's keys: ``<prefix>some.total`` in µs as shown, the averages in
    hundredths of a percent (``avg10=1.23`` -> 123)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        which, *fields = line.split()
        if which not in ("some", "full"):
            continue
        for f in fields:
            name, _, value = f.partition("=")
            try:
                if name == "total":
                    out[f"{prefix}{which}.total"] = int(value)
                elif name in ("avg10", "avg60", "avg300"):
                    whole, _, frac = value.partition(".")
                    out[f"{prefix}{which}.{name}"] = int(whole) * 100 + int((frac + "00")[:2])
            except ValueError:
                continue
    return out


def _pressure_file(path: Path, prefix: str) -> dict[str, int]:
    try:
        return pressure(host.read_text(path), prefix)
    except OSError:
        return {}


def snapshot(src: Sources) -> dict[str, int]:
    """Every counter the sources offer, now, under its simulator key."""
    out: dict[str, int] = {}
    for k, v in host.read_kv_file(src.root / host.VMSTAT.relative_to("/")).items():
        out[f"vmstat.{k}"] = v
    if src.zswap_dir is not None:
        try:
            files = sorted(src.zswap_dir.iterdir())
        except OSError:
            files = []
        for f in files:
            value = _int_or_none(f)
            if value is not None:
                out[f"zswap.{f.name}"] = value
    for path, d in src.cgroups.items():
        pre = f"memcg[{path}]."
        try:
            for k, v in host.read_kv_file(d / "memory.stat").items():
                out[f"{pre}memory.stat.{k}"] = v
        except OSError:
            continue
        if src.cgroup_version == 1:
            names = cgroup_files.READ_V1
        else:
            names = cgroup_files.READ_V2
            for keyed_file in cgroup_files.READ_V2_KEYED:
                try:
                    for k, v in host.read_kv_file(d / keyed_file).items():
                        out[f"{pre}{keyed_file}.{k}"] = v
                except OSError:
                    pass
            out.update(_pressure_file(d / "memory.pressure", f"{pre}memory.pressure."))
        for name in names:
            value = _int_or_none(d / name)
            if value is not None:
                out[f"{pre}{name}"] = value
    out.update(_meminfo(src.root))
    try:
        out.update(buddyinfo(host.read_text(src.root / BUDDYINFO.relative_to("/"))))
    except OSError:
        pass
    if src.zoneinfo:
        try:
            out.update(zoneinfo(host.read_text(src.root / ZONEINFO.relative_to("/"))))
        except OSError:
            pass
    out.update(_pressure_file(src.root / PRESSURE_MEMORY.relative_to("/"), "pressure.memory."))
    for key, zid in src.zram:
        try:
            fields = host.read_text(src.root / f"sys/block/zram{zid}/mm_stat").split()
        except OSError:
            continue
        for name, text in zip(ZRAM_MM_STAT, fields, strict=False):
            try:
                out[f"{key}.mm_stat.{name}"] = int(text)
            except ValueError:
                continue
    for key, dev in src.block:
        try:
            fields = host.read_text(src.root / f"sys/block/{Path(dev).name}/stat").split()
        except OSError:
            continue
        for name, text in zip(BLOCK_STAT, fields, strict=False):
            try:
                out[f"{key}.stat.{name}"] = int(text)
            except ValueError:
                continue
    return out


def counters(before: Mapping[str, int], after: Mapping[str, int], keys: Iterable[str] | None = None) -> dict[str, int]:
    """Event counters as ``after - before``, gauges as ``after``; only ``keys`` if given."""
    wanted = None if keys is None else set(keys)
    out = {}
    for k, v in after.items():
        if wanted is not None and k not in wanted:
            continue
        out[k] = v - before.get(k, 0) if kind(k) == EVENT else v
    return dict(sorted(out.items()))


@dataclass
class Series:
    """Samples over time: ``t`` (seconds since the workload started) and one column per key,
    each value as ``counters()`` would report it at that moment."""

    keys: list[str]
    interval_s: float
    t: list[float] = field(default_factory=list)
    values: dict[str, list[int | None]] = field(default_factory=dict)

    def add(self, t: float, before: Mapping[str, int], now: Mapping[str, int]) -> None:
        self.t.append(round(t, 3))
        for k in self.keys:
            col = self.values.setdefault(k, [None] * (len(self.t) - 1))
            v = now.get(k)
            col.append(None if v is None else (v - before.get(k, 0) if kind(k) == EVENT else v))

    def to_dict(self) -> dict[str, Any]:
        return {"interval_s": self.interval_s, "t": list(self.t), "values": {k: list(v) for k, v in sorted(self.values.items())}}


# ---------------------------------------------------------------------------------------------
# The simulator's key set
# ---------------------------------------------------------------------------------------------


def sim_counter_keys(config: dict[str, Any]) -> tuple[set[str], str]:
    """The keys the simulator reports for ``config`` (a Simulation built and not run) and where
    that answer came from. There is no second, hand-written list to drift from the core's."""
    from reclaimlab import native

    sim = native.core().Simulation(json.dumps(config, sort_keys=True))
    return set(json.loads(sim.result_json())["counters"]), "native"
