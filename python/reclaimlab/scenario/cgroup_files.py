"""The memory cgroup interface files reclaimlab knows, declared once.

``WRITTEN``: the files a scenario sets in ``[cgroups.groups.<path>]``. The scenario model
(``models.CgroupFiles``), the lowering (``lower._cgroups``: the ``lowered`` key of config.rs's
``Cgroup``), the host lab and the VM lab (which write them), the lab's probe (which checks the
host has them), core error messages (which name the file for a lowered key), docs/scenario.md's
table (``table()``, checked by tests/test_knob_doc.py) and the JSON Schema all read this tuple.

``READ_V1``/``READ_V2`` and ``READ_V2_KEYED``: the files both labs read from every cgroup of
a run, single-value ones and ``key value`` ones (exported as ``memcg[<path>].<file>.<key>``);
the simulator exports the same names (crates/reclaimlab-core/src/mm/memcg.rs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "READ_V1",
    "READ_V2",
    "READ_V2_KEYED",
    "WRITTEN",
    "CgroupFile",
    "by_lowered",
    "lowered_defaults",
    "table",
    "written",
]

Kind = Literal["max_or_size", "size", "zero_one", "v1_limit", "swappiness"]


@dataclass(frozen=True)
class CgroupFile:
    #: The interface file name, as the scenario spells it.
    name: str
    #: The cgroup version it exists in.
    version: Literal[1, 2]
    #: Its key in the lowered config (config.rs ``Cgroup``).
    lowered: str
    #: What values it takes (models.py maps this to a type).
    kind: Kind
    #: The value a cgroup has when the scenario does not set the file: in the lowered config,
    #: and as docs/scenario.md says it.
    lowered_default: int | bool | None
    default_doc: str
    meaning: str
    #: Whether the lowered config carries the key only when it is set (added after the first
    #: lowered format: older configs and benches without it stay valid).
    optional: bool = False

    @property
    def field(self) -> str:
        """The pydantic field name: ``memory.zswap.max`` -> ``memory_zswap_max``."""
        return self.name.replace(".", "_")

    def text(self, value: int | bool | None) -> str | None:
        """What a lab writes into the file for a lowered value; None: leave the file alone
        (the kernel's default is the value)."""
        if value is None or value == self.lowered_default:
            return None
        if isinstance(value, bool):
            return "1" if value else "0"
        return str(value)


WRITTEN: tuple[CgroupFile, ...] = (
    CgroupFile("memory.high", 2, "high_bytes", "max_or_size", None, "`max`", "throttle (reclaim + penalty sleep) above this"),
    CgroupFile("memory.max", 2, "limit_bytes", "max_or_size", None, "`max`", "hard limit (reclaim, then OOM)"),
    CgroupFile(
        "memory.low",
        2,
        "low_bytes",
        "size",
        None,
        "`0`",
        "best-effort protection: reclaim skips the cgroup while under it, unless nothing else is reclaimable (`memory.events` `low`)",
        optional=True,
    ),
    CgroupFile(
        "memory.min", 2, "min_bytes", "size", None, "`0`", "hard protection: reclaim never takes the cgroup below it", optional=True
    ),
    CgroupFile(
        "memory.swap.max",
        2,
        "swap_max_bytes",
        "max_or_size",
        None,
        "`max`",
        "swap limit of the cgroup (zswap entries count, as they hold a swap slot); at it, anonymous pages stay in memory",
        optional=True,
    ),
    CgroupFile(
        "memory.oom.group",
        2,
        "oom_group",
        "zero_one",
        None,
        "`0`",
        "an OOM kill of a task of the cgroup or a descendant kills every task of the subtree "
        "but those at `oom_score_adj` -1000 (`memory.events` `oom_group_kill`)",
        optional=True,
    ),
    CgroupFile("memory.zswap.max", 2, "zswap_max_bytes", "max_or_size", None, "`max`", "zswap pool limit of the cgroup"),
    CgroupFile(
        "memory.zswap.writeback", 2, "zswap_writeback", "zero_one", True, "`1`", "whether zswap may write the cgroup's pages back to swap"
    ),
    CgroupFile("memory.limit_in_bytes", 1, "limit_bytes", "v1_limit", None, "unlimited", "hard limit"),
    CgroupFile("memory.swappiness", 1, "swappiness", "swappiness", None, "inherited", "per-cgroup swappiness"),
)

#: Single-value files both labs read and the simulator exports: bytes, but v1 memory.failcnt
#: (the memory counter's failed charges; an event count, lab/record.py CLASSIFICATION).
READ_V1: tuple[str, ...] = ("memory.usage_in_bytes", "memory.max_usage_in_bytes", "memory.failcnt")
READ_V2: tuple[str, ...] = ("memory.current", "memory.peak", "memory.swap.current", "memory.swap.peak", "memory.zswap.current")
#: ``key value`` files of v2 (besides memory.stat).
READ_V2_KEYED: tuple[str, ...] = ("memory.events", "memory.swap.events")

_TYPES = {
    "max_or_size": 'size or `"max"`',
    "size": "size",
    "zero_one": "`0`/`1` or bool",
    "v1_limit": 'size, or `-1`/`"max"` = unlimited',
    "swappiness": "int 0..200",
}


def written(version: int) -> tuple[CgroupFile, ...]:
    """The files a scenario of cgroup ``version`` may set."""
    return tuple(f for f in WRITTEN if f.version == version)


def by_lowered(version: int) -> dict[str, str]:
    """Lowered key -> file name, for ``version``."""
    return {f.lowered: f.name for f in written(version)}


def lowered_defaults() -> dict[str, int | bool | None]:
    """Every lowered key a cgroup always carries, with its default (the keys of both versions;
    the optional ones only when set)."""
    out: dict[str, int | bool | None] = {}
    for f in WRITTEN:
        if not f.optional:
            out.setdefault(f.lowered, f.lowered_default)
    return out


BEGIN = "<!-- cgroup-files: generated from reclaimlab.scenario.cgroup_files by `make docs-knobs`; do not edit -->"
END = "<!-- /cgroup-files -->"


def table() -> str:
    """docs/scenario.md's table of the files a scenario sets."""
    rows = ["| file | version | type | default | meaning |", "|---|---|---|---|---|"]
    order = sorted(WRITTEN, key=lambda f: -f.version)  # v2 first, each in declaration order
    rows += [f"| `{f.name}` | {f.version} | {_TYPES[f.kind]} | {f.default_doc} | {f.meaning} |" for f in order]
    return "\n".join(rows)
