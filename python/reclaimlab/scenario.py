"""Scenario format v1: typed models, loading, validation and overrides.

A scenario is a TOML file (see docs/scenario.md). ``load()`` reads it, normalises spellings,
applies ``--set`` overrides to the document, validates it with the models below (unknown keys
are errors), then runs the checks that span several keys. Every problem found is collected into
one ``ScenarioError``; each names the file, the key path and what was expected.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import os
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from reclaimlab import native
from reclaimlab._schema import keys_of, node_at
from reclaimlab.errors import Path, Problem, ScenarioError, format_path
from reclaimlab.overrides import Override, apply_overrides, flatten_table, parse_override
from reclaimlab.units import describe, parse_bandwidth, parse_content, parse_duration, parse_size

__all__ = [
    "DEVICE_PRESETS",
    "Cgroups",
    "DeviceModel",
    "Kernel",
    "Lab",
    "Machine",
    "Process",
    "Region",
    "Report",
    "ReportClaim",
    "Scenario",
    "ScenarioError",
    "Swap",
    "load",
    "parse_metric",
]

SCHEMA_VERSION = 1

# ---------------------------------------------------------------------------------------------
# Value types
# ---------------------------------------------------------------------------------------------


def IntRange(lo: int, hi: int) -> Any:  # noqa: N802 - reads like a type
    """A strict integer in lo..hi (inclusive)."""

    def check(v: int) -> int:
        if not lo <= v <= hi:
            raise PydanticCustomError("range", "expected an integer in {lo}..{hi}; got {got}", {"lo": lo, "hi": hi, "got": v})
        return v

    return Annotated[int, AfterValidator(check)]


def _positive(v: int) -> int:
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


def _memory(v: Any) -> int:
    return _host_memory() if v == "host" else parse_size(v)


def _cpus(v: Any) -> Any:
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


def _schema_version(v: int) -> int:
    if v != SCHEMA_VERSION:
        raise PydanticCustomError(
            "schema_version", "expected {want} (the only scenario format version); got {got}", {"want": SCHEMA_VERSION, "got": v}
        )
    return v


def _non_negative_cost(v: int) -> int:
    if v < 0:
        raise PydanticCustomError("range", "expected an integer >= 0; got {got}", {"got": v})
    return v


Size = Annotated[int, BeforeValidator(parse_size)]
PositiveSize = Annotated[int, BeforeValidator(parse_size), AfterValidator(_positive)]
Duration = Annotated[int, BeforeValidator(parse_duration)]
PositiveDuration = Annotated[int, BeforeValidator(parse_duration), AfterValidator(_positive)]
Bandwidth = Annotated[int, BeforeValidator(parse_bandwidth)]
MaxOrSize = Annotated[int | None, BeforeValidator(_max_or_size)]
V1Limit = Annotated[int | None, BeforeValidator(_v1_limit)]
ZeroOne = Annotated[bool, BeforeValidator(_zero_one)]
Content = Annotated[str, BeforeValidator(parse_content)]
Percent = IntRange(0, 100)
U32 = IntRange(0, 2**32 - 1)
U64 = IntRange(0, 2**64 - 1)
SwitchValue = Annotated[Any, AfterValidator(_scalar)]
CostValue = Annotated[int, AfterValidator(_non_negative_cost)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


# ---------------------------------------------------------------------------------------------
# [machine]
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceModel:
    """A block device as the simulator models it (config.rs DeviceModel). ``iops`` (a cap on
    requests per second), ``max_sectors_kb`` (request merging under a plug) and
    ``nr_requests`` (requests in flight at once) are optional: None is no cap, no merging and
    no limit, the model of the devices without them."""

    rotational: bool
    read_latency_ns: int
    write_latency_ns: int
    read_bytes_per_s: int
    write_bytes_per_s: int
    iops: int | None = None
    max_sectors_kb: int | None = None
    nr_requests: int | None = None


#: Device presets. First estimates; a machine profile (profiles/, written by `reclaimlab
#: calibrate`) replaces the ones it measured. docs/scenario.md gives the rationale for each.
DEVICE_PRESETS: dict[str, DeviceModel] = {
    "hdd": DeviceModel(True, 8_000_000, 8_000_000, 150_000_000, 150_000_000),
    "ssd": DeviceModel(False, 100_000, 50_000, 500_000_000, 500_000_000),
    "nvme": DeviceModel(False, 20_000, 20_000, 2_000_000_000, 2_000_000_000),
    "virtio-disk": DeviceModel(True, 150_000, 100_000, 1_000_000_000, 1_000_000_000),
    # An Azure Standard SSD managed disk up to E50 while it bursts (600 IOPS, 150 MB/s:
    # MicrosoftDocs azure-docs includes/disk-storage-standard-ssd-sizes.md, 2023); latency,
    # rotational, max_sectors_kb and nr_requests are assumptions (docs/scenario.md, "Device
    # presets").
    "cloud-disk": DeviceModel(True, 2_000_000, 2_000_000, 150_000_000, 150_000_000, iops=600, max_sectors_kb=1280, nr_requests=256),
}

#: The device model of a zram swap device when none is given: RAM, no latency and a transfer
#: time (4 ns per page) that is negligible next to the codec's CPU time, which the core charges.
ZRAM_DEVICE = DeviceModel(False, 0, 0, 1_000_000_000_000, 1_000_000_000_000)

DevicePreset = Literal["hdd", "ssd", "nvme", "virtio-disk", "cloud-disk"]

#: /sys/block/<dev>/queue/max_sectors_kb: at least one page, at most what the kernel's u32 holds.
MaxSectorsKb = IntRange(4, 2**32 - 1)
#: /sys/block/<dev>/queue/nr_requests; and a device's IOPS cap.
NrRequests = IntRange(1, 2**32 - 1)
Iops = IntRange(1, 2**32 - 1)


class Device(_Model):
    """A preset name, or a table: a preset with some figures replaced, or all five figures
    (``iops``, ``max_sectors_kb`` and ``nr_requests`` are optional either way)."""

    scalar_shortcut: ClassVar[str] = "preset"

    preset: DevicePreset | None = None
    rotational: bool | None = None
    read_latency: Duration | None = None
    write_latency: Duration | None = None
    read_bandwidth: Bandwidth | None = None
    write_bandwidth: Bandwidth | None = None
    iops: Iops | None = None  # type: ignore[valid-type]
    max_sectors_kb: MaxSectorsKb | None = None  # type: ignore[valid-type]
    nr_requests: NrRequests | None = None  # type: ignore[valid-type]

    #: The figures a device without a preset must give.
    FIGURES: ClassVar[tuple[str, ...]] = ("rotational", "read_latency", "write_latency", "read_bandwidth", "write_bandwidth")
    #: Figures that may be left out (no IOPS cap, no request merging, no queue limit) unless a
    #: preset sets them.
    OPTIONAL_FIGURES: ClassVar[tuple[str, ...]] = ("iops", "max_sectors_kb", "nr_requests")

    def missing(self) -> list[str]:
        if self.preset is not None:
            return []
        return [f for f in self.FIGURES if getattr(self, f) is None]

    def model(self) -> DeviceModel:
        base = DEVICE_PRESETS[self.preset] if self.preset is not None else None

        def pick(mine: Any, theirs: Any) -> Any:
            return mine if mine is not None else theirs

        return DeviceModel(
            rotational=pick(self.rotational, base and base.rotational),
            read_latency_ns=pick(self.read_latency, base and base.read_latency_ns),
            write_latency_ns=pick(self.write_latency, base and base.write_latency_ns),
            read_bytes_per_s=pick(self.read_bandwidth, base and base.read_bytes_per_s),
            write_bytes_per_s=pick(self.write_bandwidth, base and base.write_bytes_per_s),
            iops=pick(self.iops, base and base.iops),
            max_sectors_kb=pick(self.max_sectors_kb, base and base.max_sectors_kb),
            nr_requests=pick(self.nr_requests, base and base.nr_requests),
        )


def _device_shortcut(v: Any) -> Any:
    return {"preset": v} if isinstance(v, str) else v


class Swap(_Model):
    default_name_prefix: ClassVar[str] = "swap"

    name: str | None = None
    kind: Literal["file", "zram"] = "file"
    size: PositiveSize
    priority: IntRange(-32768, 32767) | None = None  # type: ignore[valid-type]
    device: Annotated[Device, BeforeValidator(_device_shortcut)] | None = None
    comp_algorithm: str | None = None


class Machine(_Model):
    memory: Annotated[int, BeforeValidator(_memory), AfterValidator(_positive)]
    cpus: Annotated[IntRange(1, 4096), BeforeValidator(_cpus)] = 1  # type: ignore[valid-type]
    swap: list[Swap] = Field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# [kernel]
# ---------------------------------------------------------------------------------------------


class Zswap(_Model):
    """/sys/module/zswap/parameters/* (defaults: the kernel's Kconfig defaults)."""

    enabled: bool = False
    compressor: str = "lzo"
    max_pool_percent: Percent = 20  # type: ignore[valid-type]
    accept_threshold_percent: Percent = 90  # type: ignore[valid-type]
    shrinker_enabled: bool = False


class Vm(_Model):
    """/proc/sys/vm/*"""

    swappiness: IntRange(0, 200) = 60  # type: ignore[valid-type]
    page_cluster: IntRange(0, 10) = Field(3, alias="page-cluster")  # type: ignore[valid-type]
    min_free_kbytes: IntRange(0, 2**63 - 1) | None = None  # type: ignore[valid-type]
    watermark_scale_factor: IntRange(1, 3000) = 10  # type: ignore[valid-type]


class Kernel(_Model):
    version: str = "6.18"
    zswap: Zswap = Field(default_factory=Zswap)
    vm: Vm = Field(default_factory=Vm)
    switches: dict[str, SwitchValue] = Field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# [cgroups]
# ---------------------------------------------------------------------------------------------

V2_FILES = ("memory.high", "memory.max", "memory.zswap.max", "memory.zswap.writeback")
V1_FILES = ("memory.limit_in_bytes", "memory.swappiness")


class CgroupFiles(_Model):
    """The interface files of one cgroup, by their file names."""

    memory_high: MaxOrSize = Field(None, alias="memory.high")
    memory_max: MaxOrSize = Field(None, alias="memory.max")
    memory_zswap_max: MaxOrSize = Field(None, alias="memory.zswap.max")
    memory_zswap_writeback: ZeroOne = Field(True, alias="memory.zswap.writeback")
    memory_limit_in_bytes: V1Limit = Field(None, alias="memory.limit_in_bytes")
    memory_swappiness: IntRange(0, 200) | None = Field(None, alias="memory.swappiness")  # type: ignore[valid-type]

    def files_set(self) -> list[str]:
        """The file names this scenario writes, in declaration order."""
        fields = type(self).model_fields
        return [fields[name].alias or name for name in fields if name in self.model_fields_set]


def _cgroup_version(v: int) -> int:
    if v not in (1, 2):
        raise PydanticCustomError("cgroup_version", "expected 1 or 2; got {got}", {"got": v})
    return v


class Cgroups(_Model):
    cgroup_version: Annotated[int, AfterValidator(_cgroup_version)] = 1
    groups: dict[str, CgroupFiles] = Field(default_factory=dict)
    #: How often memcg statistics are flushed (docs/model/memcg.md, "Statistics flushes"): the
    #: kernel's flusher every 2 s, plus every read of memory.stat; the lab reads it every 1 s.
    #: The LRU balance and refault activation decide on the flushed sizes. "0s": live sizes.
    stats_flush_interval: Duration = 1_000_000_000

    def all_paths(self) -> list[str]:
        """Every cgroup as "/a/b", parents (also implicit ones) before children, sorted."""
        paths: set[str] = {"/"}
        for key in self.groups:
            parts = [p for p in key.split("/") if p]
            for i in range(1, len(parts) + 1):
                paths.add("/" + "/".join(parts[:i]))
        return sorted(paths, key=lambda p: [c for c in p.split("/") if c])


# ---------------------------------------------------------------------------------------------
# [[processes]]
# ---------------------------------------------------------------------------------------------


class Region(_Model):
    name: str
    size: PositiveSize
    content: Content
    variants: IntRange(1, 65536) = 256  # type: ignore[valid-type]


class Uniform(_Model):
    kind: Literal["uniform"]


class HotCold(_Model):
    kind: Literal["hot_cold"]
    hot_percent: Percent  # type: ignore[valid-type]
    hot_access_percent: Percent  # type: ignore[valid-type]


def _theta(v: float) -> float:
    if not (v >= 0.0 and v < float("inf")):
        raise PydanticCustomError("theta", "expected a finite number >= 0; got {got}", {"got": v})
    return float(v)


class Zipf(_Model):
    kind: Literal["zipf"]
    theta: Annotated[float, AfterValidator(_theta)]


def _dist_shortcut(v: Any) -> Any:
    return {"kind": v} if isinstance(v, str) else v


Dist = Annotated[Annotated[Uniform | HotCold | Zipf, Field(discriminator="kind")], BeforeValidator(_dist_shortcut)]


class _Phase(_Model):
    name: str | None = None

    def region_names(self) -> list[str]:
        return []


class _MultiRegion(_Phase):
    exclusive_keys: ClassVar[tuple[tuple[str, ...], ...]] = (("region", "regions"),)

    region: str | None = None
    regions: list[str] | None = None

    def region_names(self) -> list[str]:
        if self.regions is not None:
            return list(self.regions)
        return [self.region] if self.region is not None else []

    def region_key(self) -> str:
        return "regions" if self.regions is not None else "region"


class FillPhase(_Phase):
    kind: Literal["fill"]
    region: str

    def region_names(self) -> list[str]:
        return [self.region]


class SequentialPhase(_MultiRegion):
    kind: Literal["sequential"]
    passes: IntRange(1, 2**32 - 1) = 1  # type: ignore[valid-type]
    write_percent: Percent = 0  # type: ignore[valid-type]


class RandomPhase(_MultiRegion):
    exclusive_keys: ClassVar[tuple[tuple[str, ...], ...]] = (("region", "regions"), ("count", "duration"))

    kind: Literal["random"]
    dist: Dist = Field(default_factory=lambda: Uniform(kind="uniform"))
    count: IntRange(1, 2**63 - 1) | None = None  # type: ignore[valid-type]
    duration: PositiveDuration | None = None
    write_percent: Percent = 0  # type: ignore[valid-type]


class SleepPhase(_Phase):
    kind: Literal["sleep"]
    duration: Duration


class ExitPhase(_Phase):
    kind: Literal["exit"]


Phase = Annotated[FillPhase | SequentialPhase | RandomPhase | SleepPhase | ExitPhase, Field(discriminator="kind")]


def phase_name(phase: Any, index: int) -> str:
    """A phase's name: as given, or "<kind><index>"."""
    return phase.name if phase.name is not None else f"{phase.kind}{index}"


class Process(_Model):
    name: str
    cgroup: str = "/"
    regions: list[Region] = Field(default_factory=list)
    phases: list[Phase] = Field(default_factory=list)

    def cgroup_path(self) -> str:
        parts = [p for p in self.cgroup.split("/") if p]
        return "/" + "/".join(parts)


# ---------------------------------------------------------------------------------------------
# [compare]
# ---------------------------------------------------------------------------------------------


class CompareConfig(_Model):
    name: str
    description: str = ""
    set: dict[str, Any] = Field(default_factory=dict)

    def overrides(self) -> list[Override]:
        return [Override(k, v, f"compare config {self.name!r}") for k, v in self.set.items()]


class Compare(_Model):
    configs: list[CompareConfig] = Field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# [report]
# ---------------------------------------------------------------------------------------------

#: Per-phase fields a report metric can name: ``phase:<process>/<phase>.<field>``.
#: ``accesses_per_s_norm`` is accesses_per_s divided by the first [compare] config's value.
PHASE_FIELDS = ("elapsed_s", "accesses_per_s", "accesses", "accesses_per_s_norm")

#: ``vmstat.pswpin``, ``zswap.pool_total_size``, ``memcg[/a/b].memory.stat.zswpwb``.
_COUNTER_RE = re.compile(r"^(?:memcg\[(/[^\]]*)\]|[A-Za-z_][A-Za-z0-9_]*)\.[A-Za-z0-9_.-]*[A-Za-z0-9_]$")


@dataclass(frozen=True)
class Metric:
    """A parsed report metric: a counter key, or a per-phase field (``process/phase`` body)."""

    text: str
    counter: str | None = None
    phase: str | None = None  # "process/phase" as written
    field: str | None = None  # one of PHASE_FIELDS
    memcg: str | None = None  # the cgroup path of a memcg[...] counter


def parse_metric(text: str) -> Metric:
    """``"vmstat.pswpin"`` or ``"phase:apt/update.elapsed_s"``; ValueError saying what is expected."""
    if text.startswith("phase:"):
        body, dot, field = text[len("phase:") :].rpartition(".")
        if not dot or field not in PHASE_FIELDS or "/" not in body.strip("/"):
            fields = "|".join(PHASE_FIELDS)
            raise ValueError(f"expected 'phase:<process>/<phase>.<{fields}>'; got {text!r}")
        return Metric(text, phase=body, field=field)
    m = _COUNTER_RE.match(text)
    if m is None:
        raise ValueError(
            f"expected a counter key like 'vmstat.pswpin' or 'memcg[/a].memory.stat.zswpwb', "
            f"or 'phase:<process>/<phase>.<field>'; got {text!r}"
        )
    return Metric(text, counter=text, memcg=m.group(1))


Direction = Literal["up", "down", "about_zero", "several_times", "greater_than"]

#: Directions that compare a config's value with the baseline config's value of the same metric.
BASELINE_DIRECTIONS = ("up", "down", "several_times")


class ReportClaim(_Model):
    """One published claim: ``metric`` in ``config`` moves ``direction`` against ``baseline``
    (or, for ``greater_than``, exceeds ``other_metric`` in the same config)."""

    text: str
    metric: str
    config: str
    direction: Direction
    baseline: str | None = None
    other_metric: str | None = None


class Report(_Model):
    """Published numbers and claims to set beside reclaimlab's (``reclaimlab report``)."""

    title: str = ""
    source: str = ""
    metrics: list[str] = Field(default_factory=list)
    published: dict[str, dict[str, int | float]] = Field(default_factory=dict)
    claims: list[ReportClaim] = Field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# The scenario
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """Where a scenario came from, and the document before overrides."""

    file: str  # for messages: the path as given, or "<string>"
    path: str | None
    sha256: str
    document: dict[str, Any]
    overrides: tuple[Override, ...] = ()


class Lab(_Model):
    """How the lab runs this scenario; the simulator ignores it. ``kernel``: the VM lab's guest
    kernel (``reclaimlab run --backend vm``; docs/vmlab.md), e.g. "debian-6.12"; ``mglru``: MGLRU
    on or off in the guest (/sys/kernel/mm/lru_gen/enabled; default off, as the model)."""

    kernel: str | None = None
    mglru: bool | None = None


class Scenario(_Model):
    schema_version: Annotated[int, AfterValidator(_schema_version)]
    name: str | None = None
    description: str = ""
    seed: U64 = 1  # type: ignore[valid-type]
    max_time: PositiveDuration | None = None
    machine: Machine
    kernel: Kernel = Field(default_factory=Kernel)
    cgroups: Cgroups = Field(default_factory=Cgroups)
    processes: list[Process]
    costs: dict[str, CostValue] = Field(default_factory=dict)
    compare: Compare | None = None
    report: Report | None = None
    lab: Lab = Field(default_factory=Lab)

    _source: Source | None = PrivateAttr(default=None)

    @property
    def file(self) -> str:
        return self._source.file if self._source else "<scenario>"

    @property
    def path(self) -> str | None:
        return self._source.path if self._source else None

    @property
    def sha256(self) -> str | None:
        return self._source.sha256 if self._source else None

    @property
    def overrides(self) -> tuple[Override, ...]:
        return self._source.overrides if self._source else ()

    @property
    def document(self) -> dict[str, Any]:
        """The document before overrides (normalised)."""
        return copy.deepcopy(self._source.document) if self._source else self.model_dump(by_alias=True, exclude_none=True)

    def with_overrides(self, overrides: Iterable[str | Override]) -> Scenario:
        """This scenario's document with its overrides and then ``overrides`` applied, revalidated."""
        if self._source is None:
            raise ValueError("with_overrides() needs a scenario made by load()")
        extra = [o if isinstance(o, Override) else parse_override(o) for o in overrides]
        return _build(self._source, [*self._source.overrides, *extra])

    def lower(self) -> dict[str, Any]:
        from reclaimlab.lower import lower

        return lower(self)


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


def _read(source: str | os.PathLike[str]) -> tuple[str, str | None, bytes]:
    """(display name, path or None, bytes). A str with a newline or '=' is TOML text."""
    if isinstance(source, str) and ("\n" in source or "=" in source):
        return "<string>", None, source.encode()
    path = os.fspath(source)
    try:
        return path, path, FsPath(path).read_bytes()
    except OSError as e:
        raise ScenarioError.single(path, f"cannot read the scenario: {e.strerror or e}") from None


def _flatten_in_place(table: Any, key: str) -> None:
    if isinstance(table, dict) and isinstance(table.get(key), dict):
        table[key] = flatten_table(table[key])


def _flatten_plain(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict) and v:
            out.update(_flatten_plain(v, key))
        else:
            out[key] = v
    return out


def normalize(doc: dict[str, Any]) -> dict[str, Any]:
    """Undo TOML's dotted-key nesting where a key is a file name with dots.

    ``memory.high = "1G"`` (unquoted) in a cgroup table and ``zswap.incompressible = "reject"``
    in ``[kernel.switches]`` parse as nested tables; they mean the single keys ``"memory.high"``
    and ``"zswap.incompressible"``. Compare ``set`` tables become flat path -> value tables, and
    so do ``[report.published.<config>]`` tables (``vmstat.pswpin = 1`` means the metric).
    """
    doc = copy.deepcopy(doc)
    cgroups = doc.get("cgroups")
    if isinstance(cgroups, dict) and isinstance(cgroups.get("groups"), dict):
        groups = cgroups["groups"]
        for name, files in groups.items():
            if isinstance(files, dict):
                groups[name] = _flatten_plain(files)
    kernel = doc.get("kernel")
    if isinstance(kernel, dict) and isinstance(kernel.get("switches"), dict):
        kernel["switches"] = _flatten_plain(kernel["switches"])
    compare = doc.get("compare")
    if isinstance(compare, dict) and isinstance(compare.get("configs"), list):
        for cfg in compare["configs"]:
            _flatten_in_place(cfg, "set")
    report = doc.get("report")
    if isinstance(report, dict) and isinstance(report.get("published"), dict):
        published = report["published"]
        for name, values in published.items():
            if isinstance(values, dict):
                published[name] = _flatten_plain(values)
    return doc


def load(source: str | os.PathLike[str], overrides: Iterable[str | Override] = ()) -> Scenario:
    """Load, override and validate a scenario file (or TOML text: a str containing a newline or '=').

    ``overrides`` are ``"key=value"`` strings as for ``--set``. Raises ScenarioError listing
    every problem found.
    """
    file, path, data = _read(source)
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ScenarioError.single(file, f"not UTF-8 text: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError.single(file, f"invalid TOML: {e}") from None
    ovs: list[Override] = []
    bad: list[Problem] = []
    for o in overrides:
        if isinstance(o, Override):
            ovs.append(o)
            continue
        try:
            ovs.append(parse_override(o))
        except ValueError as e:
            bad.append(Problem((), f"--set: {e}"))
    if bad:
        raise ScenarioError(file, bad)
    src = Source(file=file, path=path, sha256=hashlib.sha256(data).hexdigest(), document=normalize(doc))
    return _build(src, ovs)


def _build(src: Source, overrides: Sequence[Override]) -> Scenario:
    scenario, problems = _validate_document(src.document, overrides, src.file)
    if problems or scenario is None:
        raise ScenarioError(src.file, problems)
    if scenario.name is None:
        stem = FsPath(src.path).stem if src.path else "scenario"
        scenario.name = stem
    scenario._source = Source(src.file, src.path, src.sha256, src.document, tuple(overrides))
    return scenario


def _validate_document(
    base: dict[str, Any], overrides: Sequence[Override], file: str, check_compare: bool = True
) -> tuple[Scenario | None, list[Problem]]:
    doc, landed, errors = apply_overrides(Scenario, base, overrides)
    problems = [Problem((), f"{e.override.origin}: {e}") for e in errors]
    caps = native.capabilities()
    try:
        scenario = Scenario.model_validate(doc)
    except ValidationError as e:
        problems += [_translate(err, doc) for err in e.errors(include_url=False)]
        scenario = None
    if scenario is not None:
        problems += _check(scenario, caps)
    problems = [_annotate(p, landed) for p in problems]
    if scenario is not None and not problems and check_compare and scenario.compare is not None:
        problems += _check_compare_configs(scenario.compare, doc, file)
    return (scenario if not problems else None), problems


def _annotate(problem: Problem, landed: list[tuple[Path, Override]]) -> Problem:
    if problem.note or not problem.path:
        return problem
    for path, ov in reversed(landed):
        n = min(len(path), len(problem.path))
        if path[:n] == problem.path[:n]:
            return Problem(problem.path, problem.message, f"(from {ov.origin})")
    return problem


def _check_compare_configs(compare: Compare, doc: dict[str, Any], file: str) -> list[Problem]:
    problems: list[Problem] = []
    for i, cfg in enumerate(compare.configs):
        where: Path = ("compare", "configs", i, "set")
        _, _, errors = apply_overrides(Scenario, doc, cfg.overrides())
        for e in errors:
            problems.append(Problem((*where, e.override.key), str(e)))
        if errors:
            continue
        _, more = _validate_document(doc, cfg.overrides(), file, check_compare=False)
        problems += [p if p.note else Problem(p.path, p.message, f"(with compare config {cfg.name!r})") for p in more]
    return problems


# ---------------------------------------------------------------------------------------------
# Translating pydantic's errors
# ---------------------------------------------------------------------------------------------


def _doc_path(loc: Sequence[str | int], doc: Any) -> tuple[list[str | int], bool]:
    """Map a pydantic loc onto the document: drop union tags and validator names.

    Returns the path and whether it reached the end of ``loc`` (the last element may be a key
    that is absent from the document: a missing key).
    """
    out: list[str | int] = []
    node = doc
    loc = [x for x in loc if x != "[key]"]
    for i, el in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(node, dict) and isinstance(el, str) and el in node:
            out.append(el)
            node = node[el]
        elif isinstance(node, list) and isinstance(el, int) and 0 <= el < len(node):
            out.append(el)
            node = node[el]
        elif isinstance(node, (dict, list)):
            if last:
                out.append(el)
                return out, True
        else:
            return out, False
    return out, True


def _or_list(expected: str) -> str:
    """pydantic's "'a', 'b' or 'c'" -> "'a', 'b', 'c'"."""
    head, sep, tail = expected.rpartition(" or ")
    return f"{head}, {tail}" if sep else expected


_TYPE_NAMES = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "float_type": "a number",
    "float_parsing": "a number",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}

_HINTS = {
    ("compare", "max_time"): "max_time is a top-level key: put it before the first [table]",
    ("kernel", "vm", "page_cluster"): "the sysctl is spelled page-cluster",
}


def _translate(err: ErrorDetails, doc: dict[str, Any]) -> Problem:
    loc = err["loc"]
    typ = err["type"]
    ctx: dict[str, Any] = dict(err.get("ctx") or {})
    got = describe(err.get("input"))
    path, complete = _doc_path(loc, doc)

    if typ == "missing":
        if not complete:  # below a scalar written for a table (dist = "zipf"): name the key
            return Problem(tuple(path), f"missing required key {loc[-1]!r}")
        return Problem(tuple(path), "required key is missing")
    if typ == "extra_forbidden":
        key = str(path[-1])
        node, value = node_at(Scenario, doc, path[:-1])
        allowed = list(keys_of(node, value) or {})
        hint = _HINTS.get(tuple(x for x in path if isinstance(x, str)))
        close = difflib.get_close_matches(key, allowed, n=1)
        msg = "unknown key"
        if hint:
            msg += f" ({hint})"
        elif close:
            msg += f" (did you mean {close[0]!r}?)"
        if allowed:
            msg += "; expected one of: " + ", ".join(allowed)
        return Problem(tuple(path), msg)
    if typ == "union_tag_invalid":
        node, value = node_at(Scenario, doc, path)
        disc = str(ctx.get("discriminator", "'kind'")).strip("'")
        tag = repr(ctx.get("tag"))
        if isinstance(value, dict):
            path = [*path, disc]
            tag = describe(value.get(disc))
        elif value is not None:
            tag = describe(value)
        return Problem(tuple(path), f"expected one of {ctx.get('expected_tags')}; got {tag}")
    if typ == "union_tag_not_found":
        node, value = node_at(Scenario, doc, path)
        tags = ", ".join(repr(t) for t in node.members) if node.kind == "union" else ""
        disc = str(ctx.get("discriminator", "'kind'")).strip("'")
        if isinstance(value, dict):
            return Problem((*path, disc), "required key is missing" + (f"; expected one of {tags}" if tags else ""))
        return Problem(tuple(path), f"expected a table with a key {disc!r}" + (f" (one of {tags})" if tags else "") + f"; got {got}")
    if typ == "literal_error":
        return Problem(tuple(path), f"expected one of {_or_list(str(ctx.get('expected')))}; got {got}")
    if typ == "value_error":
        return Problem(tuple(path), str(ctx.get("error")))
    if typ in _TYPE_NAMES:
        return Problem(tuple(path), f"expected {_TYPE_NAMES[typ]}; got {got}")
    if typ == "too_short":
        return Problem(tuple(path), f"expected at least {ctx.get('min_length')} element(s)")
    msg = err["msg"]
    if "got" not in msg:
        msg = f"{msg}; got {got}"
    return Problem(tuple(path), msg)


# ---------------------------------------------------------------------------------------------
# Checks that span several keys
# ---------------------------------------------------------------------------------------------


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _duplicates(names: Sequence[str | None], base: Path, key: str, what: str) -> list[Problem]:
    problems = []
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name is None:
            continue
        if name in seen:
            problems.append(Problem((*base, i, key), f"duplicate {what} name {name!r} (also {format_path((*base, seen[name]))})"))
        else:
            seen[name] = i
    return problems


def _switch_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


def _check(s: Scenario, caps: native.Capabilities) -> list[Problem]:
    p: list[Problem] = []
    p += _check_machine(s.machine, caps)
    p += _check_kernel(s.kernel, caps)
    p += _check_costs(s.costs, caps)
    p += _check_cgroups(s.cgroups)
    p += _check_processes(s, s.processes)
    if s.compare is not None:
        if not s.compare.configs:
            p.append(Problem(("compare", "configs"), "expected at least one configuration"))
        p += _duplicates([c.name for c in s.compare.configs], ("compare", "configs"), "name", "configuration")
    if s.report is not None:
        p += _check_report(s, s.report)
    return p


def _check_machine(m: Machine, caps: native.Capabilities) -> list[Problem]:
    p: list[Problem] = []
    names = [sw.name if sw.name is not None else f"swap{i}" for i, sw in enumerate(m.swap)]
    p += _duplicates(names, ("machine", "swap"), "name", "swap device")
    for i, sw in enumerate(m.swap):
        where: Path = ("machine", "swap", i)
        if sw.kind == "file":
            if sw.comp_algorithm is not None:
                p.append(Problem((*where, "comp_algorithm"), 'only a kind = "zram" device has a comp_algorithm; this one is kind = "file"'))
            if sw.device is None:
                p.append(
                    Problem(
                        (*where, "device"),
                        "required key is missing: a swap file needs a device, one of 'hdd', 'ssd', 'nvme', 'virtio-disk' or a table",
                    )
                )
        elif sw.comp_algorithm is not None and sw.comp_algorithm not in caps.codecs:
            p.append(Problem((*where, "comp_algorithm"), f"expected one of {_quoted(caps.codecs)}; got {sw.comp_algorithm!r}"))
        if sw.device is not None and sw.device.missing():
            p.append(
                Problem(
                    (*where, "device"),
                    f"a device without a preset needs all of {', '.join(Device.FIGURES)}; missing {', '.join(sw.device.missing())}",
                )
            )
    return p


def _check_kernel(k: Kernel, caps: native.Capabilities) -> list[Problem]:
    p: list[Problem] = []
    if not caps.version_ok(k.version):
        p.append(Problem(("kernel", "version"), f"expected one of {_quoted(caps.known_versions())}; got {k.version!r}"))
    elif k.switches:
        preset = caps.switches(k.version)
        if preset is not None:
            for name, value in k.switches.items():
                where: Path = ("kernel", "switches", name)
                if name not in preset:
                    close = difflib.get_close_matches(name, list(preset), n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    p.append(Problem(where, f"unknown switch{hint}; expected one of: {', '.join(sorted(preset))}"))
                    continue
                want = preset[name]
                ok = type(value) is type(want) or (isinstance(want, float) and type(value) is int)
                if not ok:
                    p.append(Problem(where, f"expected {_switch_type(want)} (like the preset's {describe(want)}); got {describe(value)}"))
    if k.zswap.compressor not in caps.codecs:
        p.append(Problem(("kernel", "zswap", "compressor"), f"expected one of {_quoted(caps.codecs)}; got {k.zswap.compressor!r}"))
    return p


def _check_costs(costs: dict[str, int], caps: native.Capabilities) -> list[Problem]:
    if caps.default_costs is None:
        return []
    p: list[Problem] = []
    for name in costs:
        if name not in caps.default_costs:
            close = difflib.get_close_matches(name, list(caps.default_costs), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            p.append(
                Problem(("costs", name), f"unknown time-model parameter{hint}; expected one of: {', '.join(sorted(caps.default_costs))}")
            )
    return p


def _check_cgroups(c: Cgroups) -> list[Problem]:
    p: list[Problem] = []
    for key, files in c.groups.items():
        where: Path = ("cgroups", "groups", key)
        parts = key.split("/")
        if not key or key == "/":
            p.append(Problem(where, "the root cgroup has no limits to set; name a child like 'workload'"))
            continue
        if any(part in ("", ".", "..") for part in parts) or any(ch in key for ch in "\n\0"):
            p.append(Problem(where, f"expected a path relative to the root like 'workload' or 'a/b'; got {key!r}"))
            continue
        wrong = V1_FILES if c.cgroup_version == 2 else V2_FILES
        need = 1 if c.cgroup_version == 2 else 2
        for f in files.files_set():
            if f in wrong:
                p.append(Problem((*where, f), f"{f} needs cgroup_version = {need}; this scenario has cgroup_version = {c.cgroup_version}"))
    return p


def _check_processes(s: Scenario, procs: list[Process]) -> list[Problem]:
    p: list[Problem] = []
    if not procs:
        p.append(Problem(("processes",), "expected at least one [[processes]] entry"))
    elif not any(r.size > 0 for proc in procs for r in proc.regions):
        p.append(Problem(("processes",), "expected regions with a total size > 0; no process has a region"))
    p += _duplicates([proc.name for proc in procs], ("processes",), "name", "process")
    cgroups = set(s.cgroups.all_paths())
    for i, proc in enumerate(procs):
        where: Path = ("processes", i)
        if proc.cgroup_path() not in cgroups:
            known = _quoted(c.lstrip("/") or "/" for c in sorted(cgroups))
            p.append(Problem((*where, "cgroup"), f"expected a cgroup under [cgroups.groups] or '/' (one of {known}); got {proc.cgroup!r}"))
        p += _duplicates([r.name for r in proc.regions], (*where, "regions"), "name", "region")
        p += _duplicates([phase_name(ph, j) for j, ph in enumerate(proc.phases)], (*where, "phases"), "name", "phase")
        regions = [r.name for r in proc.regions]
        for j, ph in enumerate(proc.phases):
            pw: Path = (*where, "phases", j)
            p += _check_phase(ph, pw, proc.name, regions)
    return p


def _check_phase(ph: Any, pw: Path, proc: str, regions: list[str]) -> list[Problem]:
    p: list[Problem] = []

    def unknown(path: Path, name: str) -> Problem:
        return Problem(path, f"expected the name of a region of process {proc!r} (one of {_quoted(dict.fromkeys(regions))}); got {name!r}")

    if isinstance(ph, FillPhase):
        if ph.region not in regions:
            p.append(unknown((*pw, "region"), ph.region))
    elif isinstance(ph, _MultiRegion):
        if ph.region is not None and ph.regions is not None:
            p.append(Problem(pw, "expected one of region or regions, not both"))
        elif ph.region is None and ph.regions is None:
            p.append(Problem((*pw, "regions"), "required key is missing (or give region = NAME)"))
        elif ph.regions is not None and not ph.regions:
            p.append(Problem((*pw, "regions"), "expected at least one region name"))
        else:
            seen: set[str] = set()
            for k, name in enumerate(ph.region_names()):
                at: Path = (*pw, "regions", k) if ph.regions is not None else (*pw, "region")
                if name not in regions:
                    p.append(unknown(at, name))
                elif name in seen:
                    p.append(Problem(at, f"region {name!r} is listed twice"))
                seen.add(name)
        if isinstance(ph, RandomPhase) and (ph.count is None) == (ph.duration is None):
            both = "both" if ph.count is not None else "neither"
            p.append(Problem(pw, f"expected exactly one of count or duration; got {both}"))
    return p


def _check_report(s: Scenario, r: Report) -> list[Problem]:
    p: list[Problem] = []
    configs = [c.name for c in s.compare.configs] if s.compare is not None else []
    if not configs:
        p.append(Problem(("report",), "a [report] needs [compare] configs: they are the report's columns"))
    phases = sorted({f"{proc.name}/{phase_name(ph, j)}" for proc in s.processes for j, ph in enumerate(proc.phases)})
    cgroups = s.cgroups.all_paths()

    def metric(path: Path, text: str) -> list[Problem]:
        try:
            m = parse_metric(text)
        except ValueError as e:
            return [Problem(path, str(e))]
        if m.phase is not None and m.phase not in phases:
            return [Problem(path, f"expected '<process>/<phase>' of this scenario (one of {_quoted(phases)}); got {m.phase!r}")]
        if m.memcg is not None and m.memcg not in cgroups:
            return [Problem(path, f"expected a cgroup of this scenario in memcg[...] (one of {_quoted(cgroups)}); got {m.memcg!r}")]
        return []

    def config(path: Path, name: str) -> list[Problem]:
        if not configs or name in configs:
            return []
        close = difflib.get_close_matches(name, configs, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return [Problem(path, f"expected the name of a [compare] config{hint} (one of {_quoted(configs)}); got {name!r}")]

    for i, text in enumerate(r.metrics):
        p += metric(("report", "metrics", i), text)
    seen: dict[str, int] = {}
    for i, text in enumerate(r.metrics):
        if text in seen:
            p.append(Problem(("report", "metrics", i), f"duplicate metric {text!r} (also report.metrics[{seen[text]}])"))
        seen.setdefault(text, i)
    for name, values in r.published.items():
        p += config(("report", "published", name), name)
        for key in values:
            where: Path = ("report", "published", name, key)
            bad = metric(where, key)
            if not bad and key not in r.metrics:
                bad = [Problem(where, f"a published value needs its metric in report.metrics; add {key!r} there")]
            p += bad
    for i, c in enumerate(r.claims):
        w: Path = ("report", "claims", i)
        p += metric((*w, "metric"), c.metric)
        p += config((*w, "config"), c.config)
        if c.direction == "greater_than":
            if c.other_metric is None:
                p.append(
                    Problem(
                        (*w, "other_metric"),
                        'required key is missing: direction = "greater_than" compares metric with other_metric in one config',
                    )
                )
            else:
                p += metric((*w, "other_metric"), c.other_metric)
            if c.baseline is not None:
                p.append(Problem((*w, "baseline"), 'direction = "greater_than" compares two metrics in one config; it takes no baseline'))
            continue
        if c.other_metric is not None:
            p.append(
                Problem(
                    (*w, "other_metric"),
                    f'only direction = "greater_than" takes an other_metric; this claim has direction = "{c.direction}"',
                )
            )
        if c.baseline is None:
            if c.direction in BASELINE_DIRECTIONS:
                p.append(
                    Problem(
                        (*w, "baseline"), f'required key is missing: direction = "{c.direction}" compares config with a baseline config'
                    )
                )
        else:
            p += config((*w, "baseline"), c.baseline)
            if c.baseline == c.config:
                p.append(Problem((*w, "baseline"), f"expected a config other than the claim's config; both are {c.config!r}"))
    return p
