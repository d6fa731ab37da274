"""Access to the native module ``reclaimlab._core`` and what the scenario loader asks of it.

The native module is required: the loader validates kernel presets, switch names, codec names,
cost names and page content classes against it (the facts are declared once, in the core). A
source checkout builds it with ``make build`` (``maturin develop``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

__all__ = [
    "Capabilities",
    "Knob",
    "NativeUnavailable",
    "capabilities",
    "check_content",
    "core",
    "knob_sections",
    "knobs",
    "native_version",
    "zpools",
]


class NativeUnavailable(RuntimeError):  # noqa: N818 - reads as a state, like FileNotFound
    """The native module is not built (or failed to import)."""


def core() -> ModuleType:
    """The native module, or NativeUnavailable with a hint on how to build it."""
    try:
        from reclaimlab import _core
    except ImportError as e:
        raise NativeUnavailable(
            "the simulator's native module reclaimlab._core is not built "
            f"({e}); build it with `maturin develop --release` in the repository root"
        ) from e
    return _core


def native_version() -> str | None:
    try:
        mod = core()
    except NativeUnavailable:
        return None
    version = getattr(mod, "version", None)  # a function in reclaimlab._core
    if callable(version):
        return str(version())
    version = getattr(mod, "__version__", None)
    return str(version) if version is not None else None


@dataclass(frozen=True)
class Capabilities:
    """What the loader validates against: the native core's lists."""

    versions: tuple[str, ...]
    codecs: tuple[str, ...]
    default_costs: dict[str, int]
    _switches: Callable[[str], Mapping[str, Any]] = field(repr=False)

    def version_ok(self, version: str) -> bool:
        return version in self.versions

    def switches(self, version: str) -> dict[str, Any]:
        """The preset's switches (name -> value)."""
        return dict(self._switches(version))

    def known_versions(self) -> tuple[str, ...]:
        return self.versions


@functools.lru_cache(maxsize=1)
def _native_capabilities() -> Capabilities:
    mod = core()
    return Capabilities(
        versions=tuple(mod.presets()),
        codecs=tuple(mod.codecs()),
        default_costs=dict(mod.default_costs()),
        _switches=mod.preset_switches,
    )


def capabilities() -> Capabilities:
    """The native module's capabilities (NativeUnavailable when it is not built)."""
    return _native_capabilities()


def check_content(value: str) -> None:
    """ValueError (the core's reason, without its path) unless ``value`` is a page content class
    the core knows: the parser is the workload crate's, so Python keeps no copy of it."""
    mod = core()
    try:
        mod.check_content(value)
    except mod.ConfigError as e:
        raise ValueError(e.reason) from None


@dataclass(frozen=True)
class Knob:
    """One kernel knob as the core declares it (reclaimlab-core ``knobs.rs``, ``_core.knobs()``):
    the scenario model, the lowering, the lab's apply/restore/probe and the table in
    docs/scenario.md are all made from these rows."""

    key: str  # scenario key: "kernel.vm.page-cluster"
    type: str  # "bool", "int" or "str"
    default: bool | int | str | None  # the kernel's; None: computed by the kernel at boot
    min: int | None
    max: int | None
    choices: tuple[str, ...] | None
    kernel_file: str  # "/proc/sys/vm/page-cluster"
    doc: str
    lowered: str  # dotted path in the lowered JSON: "kernel.vm.page_cluster"

    @property
    def section(self) -> str:
        """The lowered table the knob lives in under ``kernel`` ("zswap", "vm")."""
        return self.lowered.split(".")[1]

    @property
    def field(self) -> str:
        """Its field in the lowered table (a Python identifier): "page_cluster"."""
        return self.lowered.rsplit(".", 1)[1]

    @property
    def name(self) -> str:
        """Its key in the scenario's ``[kernel.<section>]`` table, as the kernel spells it: "page-cluster"."""
        return self.key.rsplit(".", 1)[1]

    @property
    def path(self) -> tuple[str, ...]:
        """The scenario key as a key path: ("kernel", "vm", "page-cluster")."""
        return ("kernel", self.section, self.name)


@functools.lru_cache(maxsize=1)
def knobs() -> tuple[Knob, ...]:
    """Every kernel knob the core reads, in declaration order."""
    rows = []
    for r in core().knobs():
        choices = r["choices"]
        rows.append(
            Knob(
                key=str(r["key"]),
                type=str(r["type"]),
                default=r["default"],
                min=r["min"],
                max=r["max"],
                choices=tuple(choices) if isinstance(choices, list) else None,
                kernel_file=str(r["kernel_file"]),
                doc=str(r["doc"]),
                lowered=str(r["lowered"]),
            )
        )
    return tuple(rows)


def knob_sections() -> dict[str, tuple[Knob, ...]]:
    """The knobs by their ``[kernel.<section>]`` table, sections in declaration order."""
    out: dict[str, list[Knob]] = {}
    for k in knobs():
        out.setdefault(k.section, []).append(k)
    return {s: tuple(ks) for s, ks in out.items()}


@functools.lru_cache(maxsize=1)
def zpools() -> dict[str, tuple[str, ...]]:
    """zswap's pool allocators the core models -> the kernel presets that have each."""
    return {str(z["name"]): tuple(z["presets"]) for z in core().zpools()}
