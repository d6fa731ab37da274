"""The native core's config errors as scenario errors: the ONE place a lowered JSON path
(``processes[0].regions[1].pages``, ``cgroups.groups[2].limit_bytes``, ``kernel.zswap.zpool``)
is mapped back to the key the user wrote in the scenario file.

The core raises ``reclaimlab._core.ConfigError`` (a ValueError) with ``path`` (the lowered path)
and ``reason``; a core without it raises a plain ValueError whose message is
``"<lowered path>: <reason>"``. Both are handled alike.
"""

from __future__ import annotations

import re
from typing import Any

from reclaimlab import native
from reclaimlab.errors import Path, Problem, ScenarioError
from reclaimlab.scenario import Scenario, cgroup_files, phase_name

__all__ = ["from_core_error", "scenario_key", "split_message"]

#: ``name``, ``name[3]``: one step of a lowered path.
_STEP = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+)\])?")
#: A message that starts with a lowered path: ``a.b[2].c: reason``.
_PATH_PREFIX = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\[\d+\])?(?:\.[A-Za-z_][A-Za-z0-9_]*(?:\[\d+\])?)*): (.*)$", re.S)

#: Lowered names (config.rs) -> the scenario key they come from, where the two differ.
_SWAP_KEYS = {"size_bytes": "size", "comp_algorithm": "comp_algorithm", "device": "device", "priority": "priority"}
_DEVICE_KEYS = {
    "read_latency_ns": "read_latency",
    "write_latency_ns": "write_latency",
    "read_bytes_per_s": "read_bandwidth",
    "write_bytes_per_s": "write_bandwidth",
}
_MACHINE_KEYS = {"memory_bytes": "memory", "cpus": "cpus", "swap": "swap"}
_CGROUP_V2_FILES = cgroup_files.by_lowered(2)
_CGROUP_V1_FILES = cgroup_files.by_lowered(1)
_REGION_KEYS = {"pages": "size"}
_PHASE_KEYS = {"duration_ns": "duration", "region": "region", "regions": "regions"}
_TOP_KEYS = {"max_time_ns": "max_time", "seed": "seed"}


def split_message(message: str) -> tuple[str, str] | None:
    """``"processes[0].regions[1].pages: must be > 0"`` -> (path, reason); None without a path."""
    m = _PATH_PREFIX.match(message)
    return (m.group(1), m.group(2)) if m else None


def _steps(lowered: str) -> list[str | int]:
    out: list[str | int] = []
    for part in lowered.split("."):
        m = _STEP.fullmatch(part)
        if m is None:
            return []
        out.append(m.group(1))
        if m.group(2) is not None:
            out.append(int(m.group(2)))
    return out


def scenario_key(scenario: Scenario, lowered: str) -> tuple[Path, str]:
    """The scenario key path a lowered path comes from, and a note naming what the indices are
    (the process, region, phase, cgroup or swap device by name). Unknown tails are kept as the
    nearest key that is known."""
    steps = _steps(lowered)
    if not steps:
        return (), ""
    head = steps[0]
    rest = steps[1:]
    if head == "processes" and rest and isinstance(rest[0], int) and rest[0] < len(scenario.processes):
        i = rest[0]
        proc = scenario.processes[i]
        path: Path = ("processes", i)
        note = f"process {proc.name!r}"
        tail = rest[1:]
        if len(tail) >= 2 and tail[0] == "regions" and isinstance(tail[1], int) and tail[1] < len(proc.regions):
            region = proc.regions[tail[1]]
            path = (*path, "regions", tail[1])
            note += f", region {region.name!r}"
            if len(tail) > 2 and isinstance(tail[2], str):
                path = (*path, _REGION_KEYS.get(tail[2], tail[2]))
        elif len(tail) >= 2 and tail[0] == "phases" and isinstance(tail[1], int) and tail[1] < len(proc.phases):
            j = tail[1]
            path = (*path, "phases", j)
            note += f", phase {phase_name(proc.phases[j], j)!r}"
            inner = [t for t in tail[2:] if t != "phase"]  # {"name", "phase": {kind...}}
            if inner and isinstance(inner[0], str):
                key = inner[0]
                if key == "dist":
                    path = (*path, "dist", *[t for t in inner[1:2] if isinstance(t, str)])
                else:
                    path = (*path, _PHASE_KEYS.get(key, key))
        elif tail and tail[0] == "cgroup":
            path = (*path, "cgroup")
        elif tail and isinstance(tail[0], str) and tail[0] == "name":
            path = (*path, "name")
        return path, note
    if head == "machine":
        if len(rest) >= 2 and rest[0] == "swap" and isinstance(rest[1], int) and rest[1] < len(scenario.machine.swap):
            i = rest[1]
            sw = scenario.machine.swap[i]
            path = ("machine", "swap", i)
            note = f"swap device {sw.name if sw.name is not None else f'swap{i}'!r}"
            tail = rest[2:]
            if tail and isinstance(tail[0], str):
                path = (*path, _SWAP_KEYS.get(tail[0], tail[0]))
                if tail[0] == "device" and len(tail) > 1 and isinstance(tail[1], str):
                    path = (*path, _DEVICE_KEYS.get(tail[1], tail[1]))
            return path, note
        if rest and isinstance(rest[0], str):
            return ("machine", _MACHINE_KEYS.get(rest[0], rest[0])), ""
        return ("machine",), ""
    if head == "cgroups":
        if len(rest) >= 2 and rest[0] == "groups" and isinstance(rest[1], int):
            paths = scenario.cgroups.all_paths()
            if rest[1] < len(paths):
                cg = paths[rest[1]]
                group_key = _group_key(scenario, cg)
                if group_key is None:  # the root, or a parent only implied by a child's key
                    return ("cgroups", "groups"), f"cgroup {cg!r}"
                path = ("cgroups", "groups", group_key)
                if len(rest) > 2 and isinstance(rest[2], str):
                    files = _CGROUP_V1_FILES if scenario.cgroups.cgroup_version == 1 else _CGROUP_V2_FILES
                    path = (*path, files.get(rest[2], rest[2]))
                return path, f"cgroup {cg!r}"
        if len(rest) >= 2 and rest[0] == "stats_flush":
            return (
                "cgroups",
                {"read_ns": "memory_stat_interval", "dwork_phase_ns": "stats_flusher_phase"}.get(str(rest[1]), str(rest[1])),
            ), ""
        if rest and rest[0] == "version":
            return ("cgroups", "cgroup_version"), ""
        return ("cgroups",), ""
    if head == "kernel":
        if len(rest) >= 2 and rest[0] == "switches" and all(isinstance(t, str) for t in rest[1:]):
            return ("kernel", "switches", ".".join(str(t) for t in rest[1:])), ""  # "zswap.incompressible"
        knob = next((kn for kn in native.knobs() if kn.lowered == lowered), None)
        if knob is not None:  # a knob's lowered field -> its key as the kernel spells it
            return knob.path, ""
        return ("kernel", *[t for t in rest if isinstance(t, str)][:2]), ""
    if head in ("costs", "engine"):
        # Both are the scenario's own tables, keys unchanged by lowering.
        return tuple(s for s in steps if isinstance(s, str))[:2], ""
    if isinstance(head, str) and head in _TOP_KEYS:
        return (_TOP_KEYS[head],), ""
    return tuple(s for s in steps[:1]), ""


def _group_key(scenario: Scenario, cgroup_path: str) -> str | None:
    """The ``[cgroups.groups]`` key the user wrote for ``/a/b`` (``a/b``, ``/a/b/`` ...)."""
    for key in scenario.cgroups.groups:
        if "/" + "/".join(p for p in key.split("/") if p) == cgroup_path:
            return key
    return None


def from_core_error(scenario: Scenario, error: Exception) -> ScenarioError:
    """The core's rejection of a lowered config as a ScenarioError naming the scenario file and
    the key the user wrote (with the process, region, phase, cgroup or device by name)."""
    path_attr: Any = getattr(error, "path", None)
    reason_attr: Any = getattr(error, "reason", None)
    if isinstance(path_attr, str) and isinstance(reason_attr, str):
        split: tuple[str, str] | None = (path_attr, reason_attr)
    else:
        split = split_message(str(error))
    if split is None:
        return ScenarioError.single(scenario.file, f"the simulator rejected the scenario: {error}")
    lowered, reason = split
    key, note = scenario_key(scenario, lowered)
    where = f" ({note})" if note else ""
    message = f"the simulator rejected the value{where}: {reason}"
    if not key:
        message = f"the simulator rejected {lowered}: {reason}"
    return ScenarioError(scenario.file, [Problem(key, message)])
