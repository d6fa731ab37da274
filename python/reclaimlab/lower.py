"""Lowering: a validated Scenario -> the SimConfig JSON the Rust core consumes.

The output mirrors crates/reclaimlab-core/src/config.rs field for field (the core rejects
unknown fields): sizes in bytes or pages, times in ns, bandwidths in bytes/s, regions and
cgroups as indices, phases in the serde ``kind``-tagged form of reclaimlab_workload::Phase.

The machine profile (docs/calibration.md) is applied here: its ``[costs]`` are the cost
defaults that the scenario's ``[costs]`` override, and its ``[devices.<preset>]`` tables replace
the built-in device presets of the same name (a scenario's own device figures still win). The
profile is ``$RECLAIMLAB_PROFILE`` (a path; ``none`` for the built-in defaults), else
``profiles/polyglot-vm.toml`` of this checkout when it exists. It is data in the repository, so
lowering stays a pure function of the scenario and the checkout.
"""

from __future__ import annotations

import difflib
import functools
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reclaimlab import native
from reclaimlab.errors import Problem, ScenarioError
from reclaimlab.scenario import (
    DEVICE_PRESETS,
    ZRAM_DEVICE,
    Cgroups,
    Device,
    DeviceModel,
    ExitPhase,
    FillPhase,
    HotCold,
    Kernel,
    Machine,
    Process,
    RandomPhase,
    Scenario,
    SequentialPhase,
    SleepPhase,
    Uniform,
    Zipf,
    phase_name,
)
from reclaimlab.units import describe, pages, parse_bandwidth, parse_duration

__all__ = [
    "COST_NAMES",
    "DEFAULT_PROFILE_KIND",
    "PROFILES_DIR",
    "PROFILE_ENV",
    "PROFILE_SCHEMA_VERSION",
    "Profile",
    "ProfileError",
    "active_profile",
    "default_profile_path",
    "effective_costs",
    "load_profile",
    "lower",
    "parse_profile",
    "profile_path",
]

#: The time-model parameters of crates/reclaimlab-core/src/costs.rs, in its order (a test
#: checks this list against the source and against the native module's ``default_costs()``).
COST_NAMES = (
    "access_ns",
    "fault_ns",
    "page_alloc_zero_ns",
    "swapin_page_ns",
    "scan_page_ns",
    "reclaim_page_ns",
    "swap_alloc_ns",
    "bio_submit_ns",
    "zswap_entry_ns",
    "zswap_copy_ns",
    "lzo_compress_ns",
    "lzo_decompress_ns",
    "lz4_compress_ns",
    "lz4_decompress_ns",
    "zstd_compress_ns",
    "zstd_decompress_ns",
    "deflate_compress_ns",
    "deflate_decompress_ns",
    "zswap_lru_visit_ns",
    "process_quantum_ns",
)

#: The environment variable naming the machine profile to use (a path), or ``none``.
PROFILE_ENV = "RECLAIMLAB_PROFILE"
PROFILE_SCHEMA_VERSION = 1
#: The machine kind of this project's machines; its profile is the default.
DEFAULT_PROFILE_KIND = "polyglot-vm"
#: ``profiles/`` of the checkout this package runs from.
PROFILES_DIR = Path(__file__).resolve().parents[2] / "profiles"
_PROFILE_KEYS = ("schema_version", "kind", "costs", "devices", "measurements")


class ProfileError(ScenarioError):
    """A machine profile that cannot be used: every problem, each naming the file and key."""


@dataclass(frozen=True)
class Profile:
    """A parsed machine profile. ``devices`` are complete models: the profile's figures over
    the built-in preset of the same name. ``measurements`` is reference data only."""

    file: str
    kind: str | None = None
    costs: dict[str, int] = field(default_factory=dict)
    devices: dict[str, DeviceModel] = field(default_factory=dict)
    measurements: dict[str, Any] = field(default_factory=dict)


def default_profile_path() -> Path:
    return PROFILES_DIR / f"{DEFAULT_PROFILE_KIND}.toml"


def profile_path() -> Path | None:
    """The profile lowering uses: ``$RECLAIMLAB_PROFILE`` (``none``: no profile; empty: as if
    unset), else the default profile if this checkout has it, else None (built-in defaults)."""
    env = os.environ.get(PROFILE_ENV, "").strip()
    if env.lower() == "none":
        return None
    if env:
        return Path(env)
    p = default_profile_path()
    return p if p.is_file() else None


def active_profile() -> Profile | None:
    """The profile of ``profile_path()``, parsed (cached while the file is unchanged)."""
    path = profile_path()
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError as e:
        raise ProfileError.single(
            str(path), f"cannot read the machine profile (set ${PROFILE_ENV} to a profile, or to none): {e.strerror or e}"
        ) from None
    return _load_cached(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int, size: int) -> Profile:
    return load_profile(path)


def load_profile(path: str | os.PathLike[str]) -> Profile:
    file = os.fspath(path)
    try:
        text = Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ProfileError.single(file, f"cannot read the machine profile: {getattr(e, 'strerror', None) or e}") from None
    return parse_profile(text, file)


def _close(name: str, choices: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_profile(text: str, file: str = "<profile>") -> Profile:
    """Parse and check a profile's TOML text. ProfileError lists every problem, each with the
    file and key: unknown keys and cost names, values of the wrong type, unknown presets."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ProfileError.single(file, f"invalid TOML: {e}") from None
    problems: list[Problem] = []
    for key in doc:
        if key not in _PROFILE_KEYS:
            problems.append(Problem((key,), f"unknown key{_close(key, _PROFILE_KEYS)}; expected one of: {', '.join(_PROFILE_KEYS)}"))
    version = doc.get("schema_version", PROFILE_SCHEMA_VERSION)
    if version != PROFILE_SCHEMA_VERSION or isinstance(version, bool):
        problems.append(Problem(("schema_version",), f"expected {PROFILE_SCHEMA_VERSION}; got {describe(version)}"))
    kind = doc.get("kind")
    if kind is not None and not isinstance(kind, str):
        problems.append(Problem(("kind",), f"expected a string; got {describe(kind)}"))
        kind = None
    costs: dict[str, int] = {}
    raw_costs = doc.get("costs", {})
    if not isinstance(raw_costs, dict):
        problems.append(Problem(("costs",), f"expected a table; got {describe(raw_costs)}"))
        raw_costs = {}
    for name, value in raw_costs.items():
        if name not in COST_NAMES:
            problems.append(
                Problem(
                    ("costs", name),
                    f"unknown time-model parameter{_close(name, COST_NAMES)}; expected one of: {', '.join(sorted(COST_NAMES))}",
                )
            )
        elif not isinstance(value, int) or isinstance(value, bool) or value < 0:
            problems.append(Problem(("costs", name), f"expected an integer >= 0 (ns); got {describe(value)}"))
        elif name == "process_quantum_ns" and value == 0:
            problems.append(Problem(("costs", name), "expected an integer > 0 (ns); got 0"))
        else:
            costs[name] = value
    devices: dict[str, DeviceModel] = {}
    raw_devices = doc.get("devices", {})
    if not isinstance(raw_devices, dict):
        problems.append(Problem(("devices",), f"expected a table; got {describe(raw_devices)}"))
        raw_devices = {}
    for name, table in raw_devices.items():
        model, bad = _profile_device(name, table)
        problems += bad
        if model is not None:
            devices[name] = model
    measurements = doc.get("measurements", {})
    if not isinstance(measurements, dict):
        problems.append(Problem(("measurements",), f"expected a table; got {describe(measurements)}"))
        measurements = {}
    if problems:
        raise ProfileError(file, problems)
    return Profile(file=file, kind=kind, costs=costs, devices=devices, measurements=measurements)


def _profile_device(name: str, table: Any) -> tuple[DeviceModel | None, list[Problem]]:
    where = ("devices", name)
    if name not in DEVICE_PRESETS:
        presets = sorted(DEVICE_PRESETS)
        return None, [Problem(where, f"not a device preset{_close(name, presets)}; expected one of: {', '.join(presets)}")]
    if not isinstance(table, dict):
        return None, [Problem(where, f"expected a table; got {describe(table)}")]
    base = DEVICE_PRESETS[name]
    values: dict[str, Any] = {
        "rotational": base.rotational,
        "read_latency": base.read_latency_ns,
        "write_latency": base.write_latency_ns,
        "read_bandwidth": base.read_bytes_per_s,
        "write_bandwidth": base.write_bytes_per_s,
        "iops": base.iops,
        "max_sectors_kb": base.max_sectors_kb,
        "nr_requests": base.nr_requests,
    }
    problems = []
    for key, value in table.items():
        try:
            if key == "rotational":
                if not isinstance(value, bool):
                    raise ValueError(f"expected true or false; got {describe(value)}")
                values[key] = value
            elif key in ("read_latency", "write_latency"):
                values[key] = parse_duration(value)
            elif key in ("read_bandwidth", "write_bandwidth"):
                values[key] = parse_bandwidth(value)
            elif key in Device.OPTIONAL_FIGURES:
                lo = 4 if key == "max_sectors_kb" else 1
                if not isinstance(value, int) or isinstance(value, bool) or not lo <= value < 2**32:
                    raise ValueError(f"expected an integer in {lo}..{2**32 - 1}; got {describe(value)}")
                values[key] = value
            else:
                figures = Device.FIGURES + Device.OPTIONAL_FIGURES
                raise ValueError(f"unknown key{_close(key, figures)}; expected one of: {', '.join(figures)}")
        except ValueError as e:
            problems.append(Problem((*where, key), str(e)))
    if problems:
        return None, problems
    model = DeviceModel(
        rotational=values["rotational"],
        read_latency_ns=values["read_latency"],
        write_latency_ns=values["write_latency"],
        read_bytes_per_s=values["read_bandwidth"],
        write_bytes_per_s=values["write_bandwidth"],
        iops=values["iops"],
        max_sectors_kb=values["max_sectors_kb"],
        nr_requests=values["nr_requests"],
    )
    return model, []


_ACTIVE: Any = object()


def effective_costs(scenario_costs: dict[str, int], profile: Profile | None) -> dict[str, int]:
    """The ``costs`` of the lowered config: the profile's figures, overridden by the scenario's.

    Only figures the loaded core knows are passed (``native.capabilities().default_costs``, when
    known): with a core built from this checkout that is every name of COST_NAMES."""
    base: dict[str, int] = {}
    if profile is not None:
        known = native.capabilities().default_costs
        base = {k: v for k, v in profile.costs.items() if known is None or k in known}
    return dict(sorted({**base, **scenario_costs}.items()))


def lower(scenario: Scenario, profile: Profile | None = _ACTIVE) -> dict[str, Any]:
    """The lowered config (a JSON-ready dict) for ``_core.Simulation``.

    ``profile``: the machine profile to apply; by default ``active_profile()``, None for the
    built-in defaults only. Raises ProfileError if the active profile cannot be used."""
    prof = active_profile() if profile is _ACTIVE else profile
    cgroups = _cgroups(scenario.cgroups)
    index = {g["path"]: i for i, g in enumerate(cgroups["groups"])}
    return {
        "seed": scenario.seed,
        "machine": _machine(scenario.machine, prof.devices if prof is not None else {}),
        "kernel": _kernel(scenario.kernel),
        "cgroups": cgroups,
        "processes": [_process(p, index) for p in scenario.processes],
        "costs": effective_costs(scenario.costs, prof),
        "max_time_ns": scenario.max_time,
    }


def _device_model(d: Device, presets: dict[str, DeviceModel]) -> DeviceModel:
    """``Device.model()`` with the profile's presets in place of the built-in ones."""
    if d.preset is None or d.preset not in presets:
        return d.model()
    base = presets[d.preset]

    def pick(mine: Any, theirs: Any) -> Any:
        return mine if mine is not None else theirs

    return DeviceModel(
        rotational=pick(d.rotational, base.rotational),
        read_latency_ns=pick(d.read_latency, base.read_latency_ns),
        write_latency_ns=pick(d.write_latency, base.write_latency_ns),
        read_bytes_per_s=pick(d.read_bandwidth, base.read_bytes_per_s),
        write_bytes_per_s=pick(d.write_bandwidth, base.write_bytes_per_s),
        iops=pick(d.iops, base.iops),
        max_sectors_kb=pick(d.max_sectors_kb, base.max_sectors_kb),
        nr_requests=pick(d.nr_requests, base.nr_requests),
    )


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
        device = _device_model(sw.device, presets) if sw.device is not None else ZRAM_DEVICE
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
    return {"memory_bytes": m.memory, "cpus": m.cpus, "swap": swaps}


def _kernel(k: Kernel) -> dict[str, Any]:
    z, vm = k.zswap, k.vm
    return {
        "version": k.version,
        "zswap": {
            "enabled": z.enabled,
            "compressor": z.compressor,
            "max_pool_percent": z.max_pool_percent,
            "accept_threshold_percent": z.accept_threshold_percent,
            "shrinker_enabled": z.shrinker_enabled,
        },
        "vm": {
            "swappiness": vm.swappiness,
            "page_cluster": vm.page_cluster,
            "min_free_kbytes": vm.min_free_kbytes,
            "watermark_scale_factor": vm.watermark_scale_factor,
        },
        "switches": dict(sorted(k.switches.items())),
    }


def _cgroups(c: Cgroups) -> dict[str, Any]:
    files = {"/" + "/".join(p for p in key.split("/") if p): f for key, f in c.groups.items()}
    groups: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    for path in c.all_paths():  # pre-order: sorted by components puts parents first
        parent = None if path == "/" else index[path.rsplit("/", 1)[0] or "/"]
        f = files.get(path)
        g: dict[str, Any] = {
            "path": path,
            "parent": parent,
            "limit_bytes": None,
            "high_bytes": None,
            "swappiness": None,
            "zswap_max_bytes": None,
            "zswap_writeback": True,
        }
        if f is not None:
            if c.cgroup_version == 1:
                g["limit_bytes"] = f.memory_limit_in_bytes
                g["swappiness"] = f.memory_swappiness
            else:
                g["limit_bytes"] = f.memory_max
                g["high_bytes"] = f.memory_high
                g["zswap_max_bytes"] = f.memory_zswap_max
                g["zswap_writeback"] = f.memory_zswap_writeback
        index[path] = len(groups)
        groups.append(g)
    return {"version": c.cgroup_version, "groups": groups, "stats_flush_ns": c.stats_flush_interval}


def _dist(d: Uniform | HotCold | Zipf) -> dict[str, Any]:
    if isinstance(d, HotCold):
        return {"kind": "hot_cold", "hot_percent": d.hot_percent, "hot_access_percent": d.hot_access_percent}
    if isinstance(d, Zipf):
        return {"kind": "zipf", "theta": d.theta}
    return {"kind": "uniform"}


def _phase(ph: Any, regions: dict[str, int]) -> dict[str, Any]:
    if isinstance(ph, FillPhase):
        return {"kind": "fill", "region": regions[ph.region]}
    if isinstance(ph, SequentialPhase):
        return {
            "kind": "sequential",
            "regions": [regions[r] for r in ph.region_names()],
            "passes": ph.passes,
            "write_percent": ph.write_percent,
        }
    if isinstance(ph, RandomPhase):
        return {
            "kind": "random",
            "regions": [regions[r] for r in ph.region_names()],
            "dist": _dist(ph.dist),
            "count": ph.count,
            "duration_ns": ph.duration,
            "write_percent": ph.write_percent,
        }
    if isinstance(ph, SleepPhase):
        return {"kind": "sleep", "duration_ns": ph.duration}
    assert isinstance(ph, ExitPhase)
    return {"kind": "exit"}


def _process(p: Process, cgroups: dict[str, int]) -> dict[str, Any]:
    regions = {r.name: i for i, r in enumerate(p.regions)}
    return {
        "name": p.name,
        "cgroup": cgroups[p.cgroup_path()],
        "regions": [{"name": r.name, "pages": pages(r.size), "content": r.content, "variants": r.variants} for r in p.regions],
        "phases": [{"name": phase_name(ph, j), "phase": _phase(ph, regions)} for j, ph in enumerate(p.phases)],
    }
