"""Lowering: a validated Scenario -> the SimConfig JSON the Rust core consumes.

The output mirrors crates/reclaimlab-core/src/config.rs field for field (the core rejects
unknown fields): sizes in bytes or pages, times in ns, bandwidths in bytes/s, regions and
cgroups as indices, phases in the serde ``kind``-tagged form of reclaimlab_workload::Phase.

The machine profile (reclaimlab.profile, docs/calibration.md) is applied here: its ``[costs]``
are the cost defaults that the scenario's ``[costs]`` override, and its ``[devices.<preset>]``
tables replace the built-in device presets of the same name (a scenario's own device figures
still win). The profile is package data, so lowering stays a pure function of the scenario and
the installed package (or ``$RECLAIMLAB_PROFILE``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from reclaimlab import native, trace
from reclaimlab.cachedir import cache_dir
from reclaimlab.devices import ZRAM_DEVICE, DeviceModel
from reclaimlab.errors import ScenarioError
from reclaimlab.fsimage import image_bytes
from reclaimlab.profile import Profile, active_profile, device_presets, effective_costs
from reclaimlab.scenario import (
    CgroupClosePhase,
    CgroupOpenPhase,
    CgroupReadPhase,
    Cgroups,
    CgroupWritePhase,
    CreateFilesPhase,
    ExitPhase,
    Filesystem,
    FillPhase,
    HotCold,
    Kernel,
    KernelAllocPhase,
    Machine,
    MmapPhase,
    Process,
    RandomPhase,
    ReadPhase,
    ReclaimPhase,
    Scenario,
    SequentialPhase,
    SleepPhase,
    TracePhase,
    Uniform,
    WritePhase,
    Zipf,
    ZramWritePhase,
    cgroup_files,
    phase_name,
)
from reclaimlab.scenario.checks import after_targets, fd_files
from reclaimlab.units import pages

__all__ = ["lower"]

_ACTIVE: Any = object()


def lower(scenario: Scenario, profile: Profile | None = _ACTIVE) -> dict[str, Any]:
    """The lowered config (a JSON-ready dict) for ``_core.Simulation``.

    ``profile``: the machine profile to apply; by default ``active_profile()``, None for the
    built-in defaults only. Raises ProfileError if the active profile cannot be used."""
    prof = active_profile() if profile is _ACTIVE else profile
    cgroups = _cgroups(scenario.cgroups)
    index = {g["path"]: i for i, g in enumerate(cgroups["groups"])}
    after = after_targets(scenario.processes)
    out: dict[str, Any] = {
        "seed": scenario.seed,
        "machine": _machine(scenario.machine, device_presets(prof)),
        "kernel": _kernel(scenario.kernel),
        "cgroups": cgroups,
        "processes": [_process(scenario, i, p, index, after) for i, p in enumerate(scenario.processes)],
        "costs": effective_costs(scenario.costs, prof),
        "max_time_ns": scenario.max_time,
    }
    for i, fs in enumerate(out["machine"].get("filesystems", [])):
        if "device" in fs:
            # The image the lab makes it on (fsimage.py): an ext4's mke2fs layout and journal
            # size follow from it (mm/journal.rs).
            fs["image_bytes"] = image_bytes(out, i)
    if scenario.trace:
        # Only when asked for: a run without tracing lowers (and caches) as before.
        out["trace"] = sorted(set(scenario.trace))
    if scenario.engine.accesses != "exact":
        # The core steps every access unless told otherwise (its default, config.rs Accesses):
        # an exact-mode scenario lowers (and caches) as before the switch existed.
        out["engine"] = {"accesses": scenario.engine.accesses}
    return out


def _device(d: DeviceModel) -> dict[str, Any]:
    out: dict[str, Any] = {
        "rotational": d.rotational,
        "read_latency_ns": d.read_latency_ns,
        "write_latency_ns": d.write_latency_ns,
        "read_bytes_per_s": d.read_bytes_per_s,
        "write_bytes_per_s": d.write_bytes_per_s,
    }
    # Optional in config.rs (serde default): left out when unset, so a device without them
    # lowers exactly as before they existed.
    if d.iops is not None:
        out["iops"] = d.iops
    if d.max_sectors_kb is not None:
        out["max_sectors_kb"] = d.max_sectors_kb
    if d.nr_requests is not None:
        out["nr_requests"] = d.nr_requests
    if d.read_ahead_kb is not None:
        out["read_ahead_kb"] = d.read_ahead_kb
    if d.flush_ns is not None:
        out["flush_ns"] = d.flush_ns
    return out


def _machine(m: Machine, presets: dict[str, DeviceModel]) -> dict[str, Any]:
    swaps = []
    least_priority = -1  # mm/swapfile.c: swapon without a priority gets --least_priority
    for i, sw in enumerate(m.swap):
        if sw.priority is not None:
            prio = sw.priority
        elif sw.kind == "zram":
            prio = 100  # what zramswap/zram-generator set
        else:
            least_priority -= 1
            prio = least_priority
        device = sw.device.model(presets) if sw.device is not None else ZRAM_DEVICE
        swaps.append(
            {
                "name": sw.name if sw.name is not None else f"swap{i}",
                "kind": sw.kind,
                "size_bytes": sw.size,
                "priority": prio,
                "device": _device(device),
                "comp_algorithm": (sw.comp_algorithm or "lzo-rle") if sw.kind == "zram" else None,
            }
        )
        if sw.allocator is not None:  # optional in config.rs: absent lowers as before the key existed
            swaps[-1]["allocator"] = sw.allocator
    out: dict[str, Any] = {"memory_bytes": m.memory, "cpus": m.cpus, "swap": swaps}
    if m.host_memcgs:  # optional in config.rs: a machine without them lowers as before
        out["host_memcgs"] = m.host_memcgs
    if m.page_reporting_order:  # optional in config.rs too
        out["page_reporting_order"] = m.page_reporting_order
    # Optional in config.rs (unset: the boot values), so a machine without them lowers as before.
    if m.swapin_readahead_hits is not None:
        out["swapin_readahead_hits"] = m.swapin_readahead_hits
    if m.last_readahead_pages is not None:
        out["last_readahead_pages"] = m.last_readahead_pages
    # Optional in config.rs: a machine without filesystems lowers as before they existed.
    if m.filesystems:
        out["filesystems"] = [_filesystem(fs, presets) for fs in m.filesystems]
    return out


def _filesystem(fs: Filesystem, presets: dict[str, DeviceModel]) -> dict[str, Any]:
    """A block-device filesystem with its device; a tmpfs with its size (if set) and no device."""
    out: dict[str, Any] = {"name": fs.name, "fstype": fs.type}
    if fs.device is not None:
        out["device"] = _device(fs.device.model(presets))
        out["backing"] = fs.backing
    if fs.size is not None:
        out["size_bytes"] = fs.size
    return out


def _kernel(k: Kernel) -> dict[str, Any]:
    """The version, each knob section (every knob the core declares, by its lowered field) and
    the switch overrides."""
    out: dict[str, Any] = {"version": k.version}
    for section, knobs in native.knob_sections().items():
        out[section] = {knob.field: k.knob_value(knob) for knob in knobs}
    out["switches"] = dict(sorted(k.switches.items()))
    return out


def _cgroups(c: Cgroups) -> dict[str, Any]:
    files = {"/" + "/".join(p for p in key.split("/") if p): f for key, f in c.groups.items()}
    groups: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    for path in c.all_paths():  # pre-order: sorted by components puts parents first
        parent = None if path == "/" else index[path.rsplit("/", 1)[0] or "/"]
        f = files.get(path)
        g: dict[str, Any] = {"path": path, "parent": parent, **cgroup_files.lowered_defaults()}
        if f is not None:
            for cf in cgroup_files.written(c.cgroup_version):
                value = f.value(cf)
                if not (cf.optional and value is None):
                    g[cf.lowered] = value
        index[path] = len(groups)
        groups.append(g)
    # memcg statistics flushes (docs/model/memcg.md): the kernel's periodic flusher and the
    # lab's memory.stat reads.
    flush = {"dwork_phase_ns": c.stats_flusher_phase, "read_ns": c.memory_stat_interval or None}
    out: dict[str, Any] = {"version": c.cgroup_version, "groups": groups, "stats_flush": flush}
    if c.memory_recursiveprot:
        # Only when on: configs lowered before the option existed stay as they were.
        out["memory_recursiveprot"] = True
    return out


def _dist(d: Uniform | HotCold | Zipf) -> dict[str, Any]:
    if isinstance(d, HotCold):
        return {"kind": "hot_cold", "hot_percent": d.hot_percent, "hot_access_percent": d.hot_access_percent}
    if isinstance(d, Zipf):
        return {"kind": "zipf", "theta": d.theta}
    return {"kind": "uniform"}


def trace_dir() -> Path:
    """Where lowering writes compact trace files: ``<result cache>/traces`` (content addressed,
    so one file serves every run of the same trace, mapping and region sizes)."""
    return cache_dir() / "traces"


def _trace(s: Scenario, ph: TracePhase, where: tuple[str | int, ...], regions: dict[str, int], pages_of: list[int]) -> dict[str, Any]:
    """Converts the phase's trace file once into the compact form both sides replay."""
    base = os.path.dirname(s.path) if s.path else "."
    source = Path(base, ph.file)
    names = ph.region_names()
    total = sum(pages_of[regions[r]] for r in names)
    try:
        words = trace.convert(source, ph.format, total, ph.map, ph.limit)
        path, sha = trace.write_compact(words, trace_dir())
    except trace.TraceError as e:
        raise ScenarioError.single(s.file, f"{ph.format} trace {source}: {e}", (*where, "file")) from None
    except OSError as e:
        raise ScenarioError.single(s.file, f"cannot write the compact trace under {trace_dir()}: {e}", (*where, "file")) from None
    return {
        "kind": "trace",
        "regions": [regions[r] for r in names],
        "trace": {"path": str(path), "sha256": sha},
        "passes": ph.passes,
        "limit": ph.limit,
    }


def _phase(ph: Any, name: str, regions: dict[str, int], zram: dict[str, int], fds: dict[str, int], open_: dict[str, str]) -> dict[str, Any]:
    """One phase in the serde form. ``fds``: the process's descriptor names as indices;
    ``open_``: the descriptors open before this phase, name -> file (checks.py made sure every
    one used is open)."""
    if isinstance(ph, FillPhase):
        return {"kind": "fill", "region": regions[ph.region]}
    if isinstance(ph, SequentialPhase):
        return {
            "kind": "sequential",
            "regions": [regions[r] for r in ph.region_names()],
            "passes": ph.passes,
            "write_percent": ph.write_percent,
            # Only when set: configs of phases without it stay as they were.
            **({"rw": True} if ph.rw else {}),
        }
    if isinstance(ph, RandomPhase):
        return {
            "kind": "random",
            "regions": [regions[r] for r in ph.region_names()],
            "dist": _dist(ph.dist),
            "count": ph.count,
            "duration_ns": ph.duration,
            "write_percent": ph.write_percent,
            **({"rw": True} if ph.rw else {}),
        }
    if isinstance(ph, ReadPhase):
        return {"kind": ph.kind, "region": regions[ph.file], "passes": ph.passes}
    if isinstance(ph, MmapPhase):
        return {"kind": ph.kind, "region": regions[ph.file], "passes": ph.passes, "write_percent": ph.write_percent}
    if isinstance(ph, WritePhase):
        return {"kind": ph.kind, "region": regions[ph.file], "passes": ph.passes, "fsync_bytes": ph.fsync_every}
    if isinstance(ph, CreateFilesPhase):
        return {"kind": ph.kind, "regions": [regions[f] for f in ph.file_names(name)], "fsync": ph.sync == "fsync"}
    if isinstance(ph, SleepPhase):
        return {"kind": "sleep", "duration_ns": ph.duration}
    if isinstance(ph, ReclaimPhase):
        return {"kind": "reclaim", "amount": ph.lowered_amount(), "swappiness": ph.swappiness}
    if isinstance(ph, CgroupWritePhase):
        if ph.fd is not None:
            return {"kind": "cgroup_write", "file": open_[ph.fd], "value": ph.lowered_value(), "fd": fds[ph.fd]}
        return {"kind": "cgroup_write", "file": ph.file, "value": ph.lowered_value()}
    if isinstance(ph, CgroupOpenPhase):
        return {"kind": "cgroup_open", "file": ph.file, "fd": fds[ph.fd]}
    if isinstance(ph, CgroupReadPhase):
        if ph.fd is not None:
            return {"kind": "cgroup_read", "file": open_[ph.fd], "fd": fds[ph.fd]}
        return {"kind": "cgroup_read", "file": ph.file} | ({"key": ph.key} if ph.key is not None else {})
    if isinstance(ph, CgroupClosePhase):
        return {"kind": "cgroup_close", "fd": fds[ph.fd]}
    if isinstance(ph, ZramWritePhase):
        # zram devices are numbered in the scenario's order (zram0, zram1 ...), as the lab
        # configures them; checks.py made sure the name is one of them, or that there is one.
        device = zram[ph.device] if ph.device is not None else 0
        return {"kind": "zram_write", "device": device, "file": ph.file}
    if isinstance(ph, KernelAllocPhase):
        return {
            "kind": "kernel_alloc",
            "count": ph.count,
            "order": ph.order,
            "fallback_order": ph.fallback_order,
            "migratetype": ph.migratetype,
        }
    assert isinstance(ph, ExitPhase)
    return {"kind": "exit"}


def _process(s: Scenario, pi: int, p: Process, cgroups: dict[str, int], after: dict[tuple[int, int], tuple[int, int]]) -> dict[str, Any]:
    m = s.machine
    # Files are regions after the anonymous ones, with the index of their filesystem.
    # The files create_files phases create come after the declared ones, in phase order.
    fs_index = {fs.name: i for i, fs in enumerate(m.filesystems)}
    lowered = [
        {"name": r.name, "pages": pages(r.size), "content": r.content, "variants": r.variants}
        | ({"thp": True} if r.thp else {})
        | ({"mlock": True} if r.mlock else {})
        for r in p.regions
    ]
    for f in p.files:
        fs = f.filesystem if f.filesystem is not None else m.filesystems[0].name
        lowered.append(
            {"name": f.name, "pages": pages(f.size), "content": f.content, "variants": f.variants, "file": fs_index[fs]}
            | ({"tmpfile": True} if f.tmpfile else {})
        )
    for j, ph in enumerate(p.phases):
        if isinstance(ph, CreateFilesPhase):
            fs = ph.filesystem if ph.filesystem is not None else m.filesystems[0].name
            created = {"pages": pages(ph.size), "content": ph.content, "variants": ph.variants, "file": fs_index[fs]}
            lowered.extend({"name": f, **created} for f in ph.file_names(phase_name(ph, j)))
    regions = {r["name"]: i for i, r in enumerate(lowered)}
    # oom_score_adj only when set: configs lowered before it existed stay as they were.
    adj = {"oom_score_adj": p.oom_score_adj} if p.oom_score_adj else {}
    zram_names = [sw.name if sw.name is not None else f"swap{i}" for i, sw in enumerate(m.swap) if sw.kind == "zram"]
    zram = {n: k for k, n in enumerate(zram_names)}
    # Descriptor names as indices, in the order of their first cgroup_open.
    fds: dict[str, int] = {}
    for ph in p.phases:
        if isinstance(ph, CgroupOpenPhase):
            fds.setdefault(ph.fd, len(fds))
    opened = fd_files(p)
    return {
        **adj,
        "name": p.name,
        "cgroup": cgroups[p.cgroup_path()],
        "regions": lowered,
        "phases": [
            {
                "name": phase_name(ph, j),
                "phase": _trace(s, ph, ("processes", pi, "phases", j), regions, [r["pages"] for r in lowered])
                if isinstance(ph, TracePhase)
                else _phase(ph, phase_name(ph, j), regions, zram, fds, opened[j]),
                # Only when set: configs of phases without it stay as they were.
                **({"after": {"process": after[(pi, j)][0], "phase": after[(pi, j)][1]}} if (pi, j) in after else {}),
            }
            for j, ph in enumerate(p.phases)
        ],
    }
