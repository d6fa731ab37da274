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

__all__ = ["Capabilities", "NativeUnavailable", "capabilities", "check_content", "core", "native_version"]


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
    """ValueError (the core's message) unless ``value`` is a page content class the core knows."""
    try:
        core().distinct_variants(value, 1)
    except ValueError as e:
        # A ConfigError's str() starts with its path ("content: "); the loader names the key.
        raise ValueError(getattr(e, "reason", str(e))) from None
