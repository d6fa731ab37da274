"""The machine profile (docs/calibration.md): measured costs and device figures of one kind of
machine, written by ``reclaimlab calibrate`` and applied by lowering.

Its ``[costs]`` are the cost defaults that a scenario's ``[costs]`` override; its
``[devices.<preset>]`` tables replace the built-in device presets of the same name (a scenario's
own device figures still win); ``[measurements]`` is reference only.

The profile used is ``$RECLAIMLAB_PROFILE`` (a path; ``none`` for the built-in defaults), else
the default profile shipped in the package (``reclaimlab/profiles/polyglot-vm.toml``: package
data, so an installed package applies it exactly as a checkout does). Every result's provenance
names the profile and its sha256 (``provenance()``).
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reclaimlab import native
from reclaimlab.devices import DEVICE_PRESETS, FIGURES, OPTIONAL_FIGURES, DeviceModel, overlay
from reclaimlab.errors import Problem, ScenarioError
from reclaimlab.units import describe, parse_bandwidth, parse_duration

__all__ = [
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
    "parse_profile",
    "profile_path",
    "provenance",
]

#: The environment variable naming the machine profile to use (a path), or ``none``.
PROFILE_ENV = "RECLAIMLAB_PROFILE"
PROFILE_SCHEMA_VERSION = 1
#: The machine kind of this project's machines; its profile is the default.
DEFAULT_PROFILE_KIND = "polyglot-vm"
#: The profiles shipped with the package (package data: installed with it).
PROFILES_DIR = Path(__file__).resolve().parent / "profiles"
_PROFILE_KEYS = ("schema_version", "kind", "costs", "devices", "measurements")


class ProfileError(ScenarioError):
    """A machine profile that cannot be used: every problem, each naming the file and key."""


@dataclass(frozen=True)
class Profile:
    """A parsed machine profile. ``devices`` are complete models: the profile's figures over
    the built-in preset of the same name. ``measurements`` is reference data only. ``sha256``
    is the hash of the file's bytes, for the provenance."""

    file: str
    kind: str | None = None
    costs: dict[str, int] = field(default_factory=dict)
    devices: dict[str, DeviceModel] = field(default_factory=dict)
    measurements: dict[str, Any] = field(default_factory=dict)
    sha256: str | None = None

    @property
    def name(self) -> str:
        """The profile's kind, else its file name without .toml."""
        return self.kind if self.kind is not None else Path(self.file).stem


def default_profile_path() -> Path:
    return PROFILES_DIR / f"{DEFAULT_PROFILE_KIND}.toml"


def profile_path() -> Path | None:
    """The profile lowering uses: ``$RECLAIMLAB_PROFILE`` (``none``: no profile; empty: as if
    unset), else the packaged default profile."""
    env = os.environ.get(PROFILE_ENV, "").strip()
    if env.lower() == "none":
        return None
    if env:
        return Path(env)
    return default_profile_path()


def active_profile() -> Profile | None:
    """The profile of ``profile_path()``, parsed (cached while the file is unchanged). A
    profile that is missing or broken is an error, never silently skipped: results depend on it."""
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
        data = Path(file).read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ProfileError.single(file, f"cannot read the machine profile: {getattr(e, 'strerror', None) or e}") from None
    return parse_profile(text, file, sha256=hashlib.sha256(data).hexdigest())


def provenance(profile: Profile | None) -> dict[str, Any] | None:
    """What a result records about the profile its config was lowered with (None: no profile)."""
    if profile is None:
        return None
    return {"name": profile.name, "file": profile.file, "sha256": profile.sha256}


def _close(name: str, choices: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_profile(text: str, file: str = "<profile>", sha256: str | None = None) -> Profile:
    """Parse and check a profile's TOML text. ProfileError lists every problem, each with the
    file and key: unknown keys and cost names (the native core's), values of the wrong type,
    unknown presets. ``sha256``: the file's hash (default: of ``text``)."""
    if sha256 is None:
        sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
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
    names = tuple(native.core().default_costs())
    for name, value in raw_costs.items():
        if name not in names:
            problems.append(
                Problem(
                    ("costs", name),
                    f"unknown time-model parameter{_close(name, names)}; expected one of: {', '.join(sorted(names))}",
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
    return Profile(file=file, kind=kind, costs=costs, devices=devices, measurements=measurements, sha256=sha256)


def _profile_device(name: str, table: Any) -> tuple[DeviceModel | None, list[Problem]]:
    where = ("devices", name)
    if name not in DEVICE_PRESETS:
        presets = sorted(DEVICE_PRESETS)
        return None, [Problem(where, f"not a device preset{_close(name, presets)}; expected one of: {', '.join(presets)}")]
    if not isinstance(table, dict):
        return None, [Problem(where, f"expected a table; got {describe(table)}")]
    figures: dict[str, Any] = {}
    problems = []
    for key, value in table.items():
        try:
            if key == "rotational":
                if not isinstance(value, bool):
                    raise ValueError(f"expected true or false; got {describe(value)}")
                figures[key] = value
            elif key in ("read_latency", "write_latency", "flush_latency"):
                figures[key] = parse_duration(value)
            elif key in ("read_bandwidth", "write_bandwidth"):
                figures[key] = parse_bandwidth(value)
            elif key in OPTIONAL_FIGURES:
                # read_ahead_kb 0 is valid: the kernel then reads only what is asked for.
                lo = {"max_sectors_kb": 4, "read_ahead_kb": 0}.get(key, 1)
                if not isinstance(value, int) or isinstance(value, bool) or not lo <= value < 2**32:
                    raise ValueError(f"expected an integer in {lo}..{2**32 - 1}; got {describe(value)}")
                figures[key] = value
            else:
                known = FIGURES + OPTIONAL_FIGURES
                raise ValueError(f"unknown key{_close(key, known)}; expected one of: {', '.join(known)}")
        except ValueError as e:
            problems.append(Problem((*where, key), str(e)))
    if problems:
        return None, problems
    return overlay(DEVICE_PRESETS[name], figures), []


def effective_costs(scenario_costs: Mapping[str, int], profile: Profile | None) -> dict[str, int]:
    """The ``costs`` of the lowered config: the profile's figures, overridden by the scenario's."""
    base = dict(profile.costs) if profile is not None else {}
    return dict(sorted({**base, **scenario_costs}.items()))


def device_presets(profile: Profile | None) -> dict[str, DeviceModel]:
    """The device presets lowering uses: the built-in ones, with the profile's in their place."""
    return {**DEVICE_PRESETS, **(profile.devices if profile is not None else {})}
