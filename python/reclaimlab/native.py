"""Access to the native module ``reclaimlab._core`` and what the scenario loader asks of it.

The loader validates kernel presets, switch names, codec names and cost names against the
native module when it is built. Without it (a source checkout before ``maturin develop``),
loading, validation and lowering still work: presets and codecs are checked against the lists
below, and switch and cost names are only checked for their value types.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

__all__ = ["Capabilities", "NativeUnavailable", "capabilities", "core", "native_version"]

#: Kernel version presets accepted when the native module is not available.
FALLBACK_VERSIONS = ("6.8", "6.10", "6.12", "6.18")
#: Kernel crypto names of the codecs the simulator models.
FALLBACK_CODECS = ("lzo", "lzo-rle", "lz4", "zstd", "deflate")


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
    """What the loader validates against. ``None`` means "not known: do not check names"."""

    versions: tuple[str, ...] | None
    codecs: tuple[str, ...]
    default_costs: dict[str, int] | None
    _switches: Any = field(default=None, repr=False)  # callable(version) -> dict, or None
    native: bool = False

    def version_ok(self, version: str) -> bool:
        if self._switches is not None:
            return _accepts(self._switches, version)
        return self.versions is None or version in self.versions

    def switches(self, version: str) -> dict[str, Any] | None:
        """The preset's switches (name -> value), or None when they are not known."""
        if self._switches is None:
            return None
        try:
            return dict(self._switches(version))
        except ValueError:
            return None

    def known_versions(self) -> tuple[str, ...]:
        return self.versions if self.versions is not None else FALLBACK_VERSIONS


def fallback_capabilities() -> Capabilities:
    return Capabilities(versions=FALLBACK_VERSIONS, codecs=FALLBACK_CODECS, default_costs=None)


def _accepts(preset_switches: Any, version: str) -> bool:
    try:
        preset_switches(version)
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=1)
def _native_capabilities() -> Capabilities | None:
    try:
        mod = core()
    except NativeUnavailable:
        return None
    if callable(getattr(mod, "presets", None)):
        presets = list(mod.presets())
    else:  # an older module: probe the versions we know of, for error messages
        presets = [v for v in FALLBACK_VERSIONS if _accepts(mod.preset_switches, v)]
    return Capabilities(
        versions=tuple(presets),
        codecs=tuple(mod.codecs()),
        default_costs=dict(mod.default_costs()),
        _switches=mod.preset_switches,
        native=True,
    )


def capabilities() -> Capabilities:
    """The native module's capabilities, or the fallback lists when it is not built."""
    return _native_capabilities() or fallback_capabilities()
