"""The value types of scenario keys: sizes, durations, ranges, and the base model."""

from __future__ import annotations

import os
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, WithJsonSchema
from pydantic_core import PydanticCustomError

from reclaimlab.units import describe, parse_bandwidth, parse_content, parse_duration, parse_size

SCHEMA_VERSION = 1


def IntRange(lo: int, hi: int) -> Any:  # noqa: N802 - reads like a type
    """A strict integer in lo..hi (inclusive)."""

    def check(v: int) -> int:
        if not lo <= v <= hi:
            raise PydanticCustomError("range", "expected an integer in {lo}..{hi}; got {got}", {"lo": lo, "hi": hi, "got": v})
        return v

    return Annotated[int, AfterValidator(check)]


def positive(v: int) -> int:
    if v <= 0:
        raise PydanticCustomError("positive", "expected a value > 0; got {got}", {"got": v})
    return v


def _host_memory() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError as e:
        raise ValueError(f"'host' needs /proc/meminfo, which cannot be read: {e}") from None
    raise ValueError("'host': no MemTotal in /proc/meminfo")


def parse_memory(v: Any) -> int:
    return _host_memory() if v == "host" else parse_size(v)


#: Where the memory controller's hierarchy is mounted: cgroup v1's own, else the unified one.
CGROUP_V1_MEMORY = "/sys/fs/cgroup/memory"
CGROUP_V2 = "/sys/fs/cgroup"


def count_host_memcgs(v1: str = CGROUP_V1_MEMORY, v2: str = CGROUP_V2) -> int:
    """The machine's online memcgs besides the root and reclaimlab's own (``reclaimlab-*``):
    every directory of the v1 memory hierarchy; on v2, every directory whose parent enables
    the memory controller (cgroup.subtree_control). What zswap's shrink worker walks."""
    v1_mounted = os.path.isfile(os.path.join(v1, "memory.usage_in_bytes"))
    root = v1 if v1_mounted else v2
    if not os.path.isdir(root):
        raise ValueError(f"'host' needs the memory cgroup hierarchy at {v1} or {v2}, which does not exist")
    n = 0
    for d, subdirs, _files in os.walk(root):
        if os.path.samefile(d, root):
            subdirs[:] = [s for s in subdirs if not s.startswith("reclaimlab-")]
        if not v1_mounted:
            try:
                with open(os.path.join(d, "cgroup.subtree_control"), encoding="ascii") as f:
                    enabled = "memory" in f.read().split()
            except OSError:
                enabled = False
            if not enabled:
                subdirs[:] = []  # no memcgs below (a child cannot enable what its parent does not)
                continue
        n += len(subdirs)
    return n


#: The order from which free page reporting hands free blocks to the hypervisor (a VM with a
#: virtio-balloon that offers VIRTIO_BALLOON_F_REPORTING; mm/page_reporting.c).
PAGE_REPORTING_ORDER = "/sys/module/page_reporting/parameters/page_reporting_order"


def host_page_reporting_order(path: str = PAGE_REPORTING_ORDER) -> int:
    """This machine's free page reporting order, 0 when it reports nothing: no such parameter
    (no CONFIG_PAGE_REPORTING), or its unset value (-1, read as a huge unsigned number, until
    a reporting device registers)."""
    try:
        with open(path, encoding="ascii") as f:
            v = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
    return v if 0 < v <= 10 else 0


def parse_page_reporting_order(v: Any) -> Any:
    if v == "host":
        return host_page_reporting_order()
    if isinstance(v, str):
        raise ValueError(f"expected an integer or 'host'; got {describe(v)}")
    return v


def parse_host_memcgs(v: Any) -> Any:
    if v == "host":
        return count_host_memcgs()
    if isinstance(v, str):
        raise ValueError(f"expected an integer or 'host'; got {describe(v)}")
    return v


def parse_cpus(v: Any) -> Any:
    if v == "host":
        return os.cpu_count() or 1
    if isinstance(v, str):
        raise ValueError(f"expected an integer or 'host'; got {describe(v)}")
    return v


def _max_or_size(v: Any) -> int | None:
    if v == "max":
        return None
    try:
        return parse_size(v)
    except ValueError:
        raise ValueError(f"expected a size (like '1GiB', int bytes) or 'max'; got {describe(v)}") from None


def _v1_limit(v: Any) -> int | None:
    if v == "max" or v == -1:
        return None
    try:
        return parse_size(v)
    except ValueError:
        raise ValueError(f"expected a size (like '1GiB', int bytes), or -1 or 'max' for unlimited; got {describe(v)}") from None


def _zero_one(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if v in (0, 1) and isinstance(v, int):
        return bool(v)
    raise ValueError(f"expected 0 or 1 (or false/true); got {describe(v)}")


def _scalar(v: Any) -> Any:
    if isinstance(v, (bool, int, float, str)):
        return v
    raise ValueError(f"expected a boolean, integer, float or string; got {describe(v)}")


def check_schema_version(v: int) -> int:
    if v != SCHEMA_VERSION:
        raise PydanticCustomError(
            "schema_version", "expected {want} (the only scenario format version); got {got}", {"want": SCHEMA_VERSION, "got": v}
        )
    return v


def _non_negative_cost(v: int) -> int:
    if v < 0:
        raise PydanticCustomError("range", "expected an integer >= 0; got {got}", {"got": v})
    return v


# What a scenario may write for each unit, for the JSON Schema (`reclaimlab schema`, editors):
# the validators above accept a string with a unit, which the int they return does not say.
_SIZE_STR = {"type": "string", "pattern": r"^\s*(\d+(\.\d*)?|\.\d+)\s*([KkMmGgTtPpEe]([Ii]?[Bb])?|[Bb])?\s*$"}
SIZE_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "integer", "minimum": 0}, _SIZE_STR],
    "description": "a size: int bytes, or a string like '4096', '64MiB', '1GiB', '500MB', '2G'",
}
DURATION_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "integer", "minimum": 0},
        {"type": "string", "pattern": r"^\s*(\d+(\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s|min|h)\s*$"},
    ],
    "description": "a duration: int ns, or a string like '10ns', '5us', '20ms', '2s', '1min'",
}
_MAX = {"const": "max"}
Size = Annotated[int, BeforeValidator(parse_size), WithJsonSchema(SIZE_SCHEMA)]
PositiveSize = Annotated[int, BeforeValidator(parse_size), AfterValidator(positive), WithJsonSchema(SIZE_SCHEMA)]
Duration = Annotated[int, BeforeValidator(parse_duration), WithJsonSchema(DURATION_SCHEMA)]
PositiveDuration = Annotated[int, BeforeValidator(parse_duration), AfterValidator(positive), WithJsonSchema(DURATION_SCHEMA)]
Bandwidth = Annotated[
    int,
    BeforeValidator(parse_bandwidth),
    WithJsonSchema(
        {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": r"/s\s*$"}], "description": "bytes/s, or '500MB/s'"}
    ),
]
MaxOrSize = Annotated[int | None, BeforeValidator(_max_or_size), WithJsonSchema({"anyOf": [*SIZE_SCHEMA["anyOf"], _MAX]})]
V1Limit = Annotated[int | None, BeforeValidator(_v1_limit), WithJsonSchema({"anyOf": [*SIZE_SCHEMA["anyOf"], _MAX, {"const": -1}]})]
ZeroOne = Annotated[bool, BeforeValidator(_zero_one), WithJsonSchema({"anyOf": [{"type": "boolean"}, {"enum": [0, 1]}]})]
Content = Annotated[str, BeforeValidator(parse_content)]
Percent = IntRange(0, 100)
U32 = IntRange(0, 2**32 - 1)
U64 = IntRange(0, 2**64 - 1)
SwitchValue = Annotated[Any, AfterValidator(_scalar)]
CostValue = Annotated[int, AfterValidator(_non_negative_cost)]


class StrictModel(BaseModel):
    """A table: unknown keys are errors, and values are not coerced (\"1\" is not 1)."""

    model_config = ConfigDict(extra="forbid", strict=True)
