"""The kernel knobs on a real kernel: which file holds each, how a value is written there, and
in what order. Everything comes from the core's declarations (``native.knobs()``: key, type,
default, kernel file), so a knob added there is applied, restored, probed and checked by the lab
without an edit here.

* sysctls (files under /proc/sys) are written before the cgroups are made (a new v1 memcg
  takes its ``memory.swappiness`` from its parent, i.e. from ``vm.swappiness``);
* the other knobs (sysfs: /sys/module/zswap/parameters/*) after the swap devices exist. A
  section's ``enabled`` knob is written last (zswap: the pool is created once, with the
  compressor and allocator already chosen) and alone when it is off: the section's other knobs
  do nothing then, and the lab changes as little as it can.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reclaimlab import native
from reclaimlab.native import Knob

__all__ = [
    "SYSCTL_DIR",
    "current",
    "file_text",
    "is_sysctl",
    "knob_paths",
    "same",
    "sysctl_name",
    "sysctl_writes",
    "sysfs_writes",
    "value_of",
]

SYSCTL_DIR = Path("/proc/sys")
_TRUE = {"y", "1", "true", "on"}
LRU_GEN_ENABLED = "/sys/kernel/mm/lru_gen/enabled"
_FALSE = {"n", "0", "false", "off"}


def is_sysctl(k: Knob) -> bool:
    return Path(k.kernel_file).is_relative_to(SYSCTL_DIR)


def sysctl_name(k: Knob) -> str:
    """``/proc/sys/vm/page-cluster`` -> ``vm.page-cluster`` (how sysctl(8) names it)."""
    return ".".join(Path(k.kernel_file).relative_to(SYSCTL_DIR).parts)


def file_text(k: Knob, value: Any) -> str:
    """``value`` as written to the knob's file: a module parameter's bool as Y/N (what
    param_get_bool shows), a sysctl's as 1/0, anything else as its decimal or string form."""
    if k.type == "bool":
        if k.kernel_file == LRU_GEN_ENABLED:
            # The file takes and shows the capability mask (lru_gen_enabled's "0x%04x"):
            # all of them (core, mm walk, non-leaf young) or none, so a write reads back.
            return "0x0007" if value else "0x0000"
        if is_sysctl(k):
            return "1" if value else "0"
        return "Y" if value else "N"
    return str(value)


def current(text: str) -> str:
    """A knob file's value: the selected choice of a file that lists them all with the
    current one in brackets (``always [madvise] never``: the transparent_hugepage files), the
    text itself otherwise. What a write of the value back restores."""
    t = text.strip()
    if "[" in t and "]" in t:
        return t[t.index("[") + 1 : t.index("]")]
    return t


def same(now: str, want: str) -> bool:
    """The file's text ``now`` means the value ``want`` (Y/1/true are one boolean; a bracketed
    choice list means its selected choice)."""
    a, b = current(now), want.strip()
    for group in (_TRUE, _FALSE):
        if a.lower() in group and b.lower() in group:
            return True
    return a == b


def value_of(config: Mapping[str, Any], k: Knob) -> Any:
    """The knob's value in a lowered config (``config["kernel"][section][field]``); its default
    where the config leaves it out, as the core's serde default does."""
    return config["kernel"].get(k.section, {}).get(k.field, k.default)


def _writes(config: Mapping[str, Any], knobs: list[Knob]) -> list[tuple[Knob, str]]:
    """The knobs of one section to write, in order; None values (computed by the kernel) are
    left alone."""
    gate = next((k for k in knobs if k.name == "enabled" and k.type == "bool"), None)
    if gate is not None and not value_of(config, gate):
        return [(gate, file_text(gate, False))]
    rest = [k for k in knobs if k is not gate]
    out = [(k, file_text(k, value_of(config, k))) for k in rest if value_of(config, k) is not None]
    if gate is not None:
        out.append((gate, file_text(gate, True)))
    return out


def sysctl_writes(config: Mapping[str, Any]) -> list[tuple[Knob, str]]:
    """The sysctls a lowered config sets, with the text to write, in declaration order."""
    return [w for ks in native.knob_sections().values() for w in _writes(config, [k for k in ks if is_sysctl(k)])]


def sysfs_writes(config: Mapping[str, Any]) -> list[tuple[Knob, str]]:
    """The other knobs (sysfs files) a lowered config sets, section by section."""
    return [w for ks in native.knob_sections().values() for w in _writes(config, [k for k in ks if not is_sysctl(k)])]


def knob_paths() -> dict[str, Path]:
    """Every knob's file by scenario key: what the lab may change, and compares before and after."""
    return {k.key: Path(k.kernel_file) for k in native.knobs()}
