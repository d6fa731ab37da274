"""The scenario's typed models (docs/scenario.md): one pydantic model per table, unknown keys
are errors. What spans several keys is checked in ``checks``; loading is ``loading``."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, get_args

from pydantic import AfterValidator, BeforeValidator, Discriminator, Field, PrivateAttr, Tag, WithJsonSchema, create_model, model_validator
from pydantic_core import PydanticCustomError

from reclaimlab import native
from reclaimlab.devices import DEVICE_PRESETS, FIGURES, OPTIONAL_FIGURES, DeviceModel, overlay
from reclaimlab.overrides import Override, parse_override
from reclaimlab.scenario import cgroup_files
from reclaimlab.scenario.types import (
    SIZE_SCHEMA,
    U64,
    Bandwidth,
    Content,
    CostValue,
    Duration,
    IntRange,
    MaxOrSize,
    Percent,
    PositiveDuration,
    PositiveSize,
    Size,
    StrictModel,
    SwitchValue,
    V1Limit,
    ZeroOne,
    _max_or_size,
    check_schema_version,
    parse_cpus,
    parse_host_memcgs,
    parse_memory,
    parse_page_reporting_order,
    positive,
)

DevicePreset = Literal["hdd", "ssd", "nvme", "virtio-disk", "cloud-disk", "lab-loop"]

#: /sys/block/<dev>/queue/max_sectors_kb: at least one page, at most what the kernel's u32 holds.
MaxSectorsKb = IntRange(4, 2**32 - 1)
#: /sys/block/<dev>/queue/nr_requests; and a device's IOPS cap.
NrRequests = IntRange(1, 2**32 - 1)
Iops = IntRange(1, 2**32 - 1)
#: /sys/block/<dev>/queue/read_ahead_kb: 0 (no readahead) up to what the kernel's u32 holds.
ReadAheadKb = IntRange(0, 2**32 - 1)


class Device(StrictModel):
    """A preset name, or a table: a preset with some figures replaced, or all five figures
    (``iops``, ``max_sectors_kb``, ``nr_requests``, ``read_ahead_kb`` and ``flush_latency`` are
    optional either way)."""

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
    read_ahead_kb: ReadAheadKb | None = None  # type: ignore[valid-type]
    flush_latency: Duration | None = None

    #: The figures a device without a preset must give, and those it may leave out.
    FIGURES: ClassVar[tuple[str, ...]] = FIGURES
    OPTIONAL_FIGURES: ClassVar[tuple[str, ...]] = OPTIONAL_FIGURES

    def missing(self) -> list[str]:
        if self.preset is not None:
            return []
        return [f for f in self.FIGURES if getattr(self, f) is None]

    def figures(self) -> dict[str, Any]:
        """The figures this table gives (None: taken from the preset)."""
        return {f: getattr(self, f) for f in FIGURES + OPTIONAL_FIGURES}

    def model(self, presets: Mapping[str, DeviceModel] = DEVICE_PRESETS) -> DeviceModel:
        """The device: this table's figures over ``presets[preset]`` (a machine profile passes
        its presets, which replace the built-in ones)."""
        base = presets.get(self.preset, DEVICE_PRESETS[self.preset]) if self.preset is not None else None
        return overlay(base, self.figures())


def _device_shortcut(v: Any) -> Any:
    return {"preset": v} if isinstance(v, str) else v


class Swap(StrictModel):
    default_name_prefix: ClassVar[str] = "swap"

    name: str | None = None
    kind: Literal["file", "zram"] = "file"
    size: PositiveSize
    priority: IntRange(-32768, 32767) | None = None  # type: ignore[valid-type]
    device: Annotated[Device, BeforeValidator(_device_shortcut, json_schema_input_type=str | Device)] | None = None
    comp_algorithm: str | None = None
    #: zram only: the allocator of its compressed pages. Not a sysfs file: mainline zram calls
    #: zsmalloc directly, so "zsmalloc" is all the core accepts (docs/scenario.md).
    allocator: str | None = None


class Filesystem(StrictModel):
    """A filesystem holding the processes' files (docs/scenario.md): on its own block device,
    or a tmpfs (memory only, with a ``size`` instead of a device)."""

    name: str
    type: Literal["ext4", "xfs", "btrfs", "tmpfs"] = "ext4"
    #: Required for every type but tmpfs, which has none (checks.py).
    device: Annotated[Device, BeforeValidator(_device_shortcut, json_schema_input_type=str | Device)] | None = None
    #: tmpfs only: the size= mount option; unset, the kernel's default (half of RAM).
    size: PositiveSize | None = None
    #: What ``device`` is (docs/scenario.md): "loop", a loop device with direct IO over an
    #: image file on another block device, which is what the lab makes (lab/filesystems.py);
    #: "device", the filesystem on the block device itself. Every bio to a loop device is
    #: submitted again to the device under its image, and vmstat pgpgin/pgpgout count both.
    #: Not for a tmpfs (checks.py), which has no device.
    backing: Literal["loop", "device"] = "loop"


def _readahead_window(v: int) -> int:
    """``machine.last_readahead_pages``: 0 or a power of two, as swapin_nr_pages makes it."""
    if v < 0 or v >= 2**32 or (v & (v - 1)) != 0:
        raise PydanticCustomError(
            "window", "expected 0 or a power of two below 2^32 (the window swapin_nr_pages last chose); got {got}", {"got": v}
        )
    return v


class Machine(StrictModel):
    memory: Annotated[
        int, BeforeValidator(parse_memory), AfterValidator(positive), WithJsonSchema({"anyOf": [*SIZE_SCHEMA["anyOf"], {"const": "host"}]})
    ]
    cpus: Annotated[IntRange(1, 4096), BeforeValidator(parse_cpus, json_schema_input_type=int | Literal["host"])] = 1  # type: ignore[valid-type]
    swap: list[Swap] = Field(default_factory=list)
    filesystems: list[Filesystem] = Field(default_factory=list)
    #: The machine's other online memcgs, which zswap's shrink worker walks too
    #: (docs/scenario.md): a number, or "host" (counted on this machine now).
    host_memcgs: Annotated[IntRange(0, 65535), BeforeValidator(parse_host_memcgs, json_schema_input_type=int | Literal["host"])] = 0  # type: ignore[valid-type]
    #: Free page reporting to a hypervisor from this order (0: none; docs/scenario.md): a
    #: number, or "host" (this machine's page_reporting_order now).
    page_reporting_order: Annotated[
        IntRange(0, 10),  # type: ignore[valid-type]
        BeforeValidator(parse_page_reporting_order, json_schema_input_type=int | Literal["host"]),
    ] = 0
    #: The swap cluster readahead state the machine's kernel starts the run with
    #: (docs/scenario.md): mm/swap_state.c's global statics, 4 and 0 after boot, afterwards what
    #: the machine's last swap-ins left. Unset: the boot values.
    swapin_readahead_hits: IntRange(0, 2**32 - 1) | None = None  # type: ignore[valid-type]
    last_readahead_pages: Annotated[int, AfterValidator(_readahead_window)] | None = None


# ---------------------------------------------------------------------------------------------
# [kernel]
# ---------------------------------------------------------------------------------------------


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    def check(v: str) -> str:
        if v not in choices:
            raise PydanticCustomError("choice", "expected one of {choices}; got {got}", {"choices": _quoted(choices), "got": repr(v)})
        return v

    return check


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _knob_type(k: native.Knob) -> Any:
    """A knob's value type from its declaration: the core's range and choices."""
    t: Any
    if k.type == "bool":
        t = bool
    elif k.type == "int":
        t = IntRange(k.min if k.min is not None else 0, k.max if k.max is not None else 2**63 - 1)
    else:
        t = Annotated[str, AfterValidator(_one_of(k.choices))] if k.choices else str
    return t | None if k.default is None else t


class KnobTable(StrictModel):
    """A ``[kernel.<section>]`` table of kernel knobs (``[kernel.zswap]``, ``[kernel.vm]``): its
    fields are made from the core's knob declarations (``native.knobs()``), named by their
    lowered field, keyed as the kernel spells the file (``page-cluster``)."""

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any: ...


def _knob_table(section: str, knobs: Sequence[native.Knob]) -> type[KnobTable]:
    fields: dict[str, Any] = {}
    for k in knobs:
        alias = k.name if k.name != k.field else None
        fields[k.field] = (_knob_type(k), Field(k.default, alias=alias, description=k.doc))
    doc = f"[kernel.{section}]: " + ", ".join(sorted({k.kernel_file.rsplit("/", 1)[0] + "/*" for k in knobs}))
    return create_model(f"Kernel_{section}", __base__=KnobTable, __doc__=doc, __module__=__name__, **fields)


#: One model per knob section, made from the core's table.
KNOB_TABLES: dict[str, type[KnobTable]] = {s: _knob_table(s, ks) for s, ks in native.knob_sections().items()}


class KernelBase(StrictModel):
    """``[kernel]``: the version preset, its switches, and one table per knob section."""

    version: str = "6.18"
    switches: dict[str, SwitchValue] = Field(default_factory=dict)

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> KnobTable: ...

    def knob_table(self, section: str) -> KnobTable:
        table: KnobTable = getattr(self, section)
        return table

    def knob_value(self, knob: native.Knob) -> Any:
        """The scenario's value of ``knob`` (its default where the scenario does not set it)."""
        return getattr(self.knob_table(knob.section), knob.field)


if TYPE_CHECKING:
    Kernel = KernelBase
else:
    Kernel = create_model(
        "Kernel",
        __base__=KernelBase,
        __module__=__name__,
        **{s: (m, Field(default_factory=m)) for s, m in KNOB_TABLES.items()},
    )


# ---------------------------------------------------------------------------------------------
# [cgroups]
# ---------------------------------------------------------------------------------------------

V2_FILES = tuple(f.name for f in cgroup_files.written(2))
V1_FILES = tuple(f.name for f in cgroup_files.written(1))

_FILE_TYPES: dict[str, Any] = {
    "max_or_size": MaxOrSize,
    "size": Size | None,
    "zero_one": ZeroOne,
    "v1_limit": V1Limit,
    "swappiness": IntRange(0, 200) | None,
}


class CgroupFilesBase(StrictModel):
    """The interface files of one cgroup, by their file names (fields: ``cgroup_files.WRITTEN``)."""

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any: ...

    def value(self, f: cgroup_files.CgroupFile) -> Any:
        """This cgroup's value of file ``f`` (its default where the scenario does not set it)."""
        return getattr(self, f.field)

    def files_set(self) -> list[str]:
        """The file names this scenario writes, in declaration order."""
        fields = type(self).model_fields
        return [fields[name].alias or name for name in fields if name in self.model_fields_set]


def _file_field(f: cgroup_files.CgroupFile) -> tuple[Any, Any]:
    return (_FILE_TYPES[f.kind], Field(f.lowered_default, alias=f.name))


if TYPE_CHECKING:
    CgroupFiles = CgroupFilesBase
else:
    CgroupFiles = create_model(
        "CgroupFiles",
        __base__=CgroupFilesBase,
        __module__=__name__,
        **{f.field: _file_field(f) for f in cgroup_files.WRITTEN},
    )


def _cgroup_version(v: int) -> int:
    if v not in (1, 2):
        raise PydanticCustomError("cgroup_version", "expected 1 or 2; got {got}", {"got": v})
    return v


class Cgroups(StrictModel):
    cgroup_version: Annotated[int, AfterValidator(_cgroup_version)] = 1
    groups: dict[str, CgroupFiles] = Field(default_factory=dict)
    #: How often a reader reads memory.stat of every cgroup of the scenario, from the
    #: workload's start: the lab's sampler (the kernel backend samples at this interval). Each
    #: read flushes the cgroup's statistics when enough updates are pending; the LRU balance and
    #: refault activation decide on the flushed sizes (docs/model/memcg.md, "Statistics
    #: flushes"). "0s": nobody reads during the run.
    memory_stat_interval: Duration = 1_000_000_000
    #: When the kernel's own periodic flusher (flush_memcg_stats_dwork, every 2.016 s since
    #: boot: FLUSH_TIME on the timer wheel) first runs after the workload's start, below
    #: 2.016 s. Unknown on a real host.
    stats_flusher_phase: Duration = 0
    #: The cgroup2 mount option memory_recursiveprot (v2; docs/model/memcg.md, "Protection"):
    #: a parent's memory.min/low not claimed by its children is shared among them by usage.
    #: Off as in a plain `mount -t cgroup2`; systemd mounts with it on.
    memory_recursiveprot: bool = False

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


class Region(StrictModel):
    name: str
    size: PositiveSize
    content: Content
    variants: IntRange(1, 65536) = 256  # type: ignore[valid-type]
    #: madvise(MADV_HUGEPAGE): THP faults here under kernel.transparent_hugepage.enabled = "madvise".
    thp: bool = False
    #: mlock(2) of the whole region right after it is mapped, before the first phase: one
    #: system call faults in every page (zero-filled), which stay mlocked and unevictable
    #: until the process exits (docs/model/vmscan.md, the unevictable list).
    mlock: bool = False


class File(StrictModel):
    """A file of the process on a filesystem of [[machine.filesystems]] (its only one when
    ``filesystem`` is left out); its pages live in the page cache. ``tmpfile``: the file has no
    name (O_TMPFILE, or unlinked while open), so its page cache is freed when the process
    exits; only read phases may use it."""

    name: str
    size: PositiveSize
    content: Content
    variants: IntRange(1, 65536) = 256  # type: ignore[valid-type]
    filesystem: str | None = None
    tmpfile: bool = False


class Uniform(StrictModel):
    kind: Literal["uniform"]


class HotCold(StrictModel):
    kind: Literal["hot_cold"]
    hot_percent: Percent  # type: ignore[valid-type]
    hot_access_percent: Percent  # type: ignore[valid-type]


def _theta(v: float) -> float:
    if not (v >= 0.0 and v < float("inf")):
        raise PydanticCustomError("theta", "expected a finite number >= 0; got {got}", {"got": v})
    return float(v)


class Zipf(StrictModel):
    kind: Literal["zipf"]
    theta: Annotated[float, AfterValidator(_theta)]


def _dist_shortcut(v: Any) -> Any:
    return {"kind": v} if isinstance(v, str) else v


Dist = Annotated[
    Annotated[Uniform | HotCold | Zipf, Field(discriminator="kind")],
    BeforeValidator(_dist_shortcut, json_schema_input_type=str | Uniform | HotCold | Zipf),
]


class _Phase(StrictModel):
    #: Whether the phase touches memory (loads, stores, file IO): its accesses/s is a rate
    #: that says something about time. Phases that only wait or write a control file say no.
    makes_accesses: ClassVar[bool] = True

    name: str | None = None
    #: ``"<process>:<phase>"``: the phase starts once that phase of that other process has
    #: ended (or the process stopped without ending it); docs/scenario.md, "after".
    after: str | None = None

    def region_names(self) -> list[str]:
        return []


class MultiRegionPhase(_Phase):
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


class SequentialPhase(MultiRegionPhase):
    kind: Literal["sequential"]
    passes: IntRange(1, 2**32 - 1) = 1  # type: ignore[valid-type]
    write_percent: Percent = 0  # type: ignore[valid-type]
    #: Each store is a load, then a store to the same page (docs/workload.md, "rw").
    rw: bool = False


class RandomPhase(MultiRegionPhase):
    exclusive_keys: ClassVar[tuple[tuple[str, ...], ...]] = (("region", "regions"), ("count", "duration"))

    kind: Literal["random"]
    dist: Dist = Field(default_factory=lambda: Uniform(kind="uniform"))
    count: IntRange(1, 2**63 - 1) | None = None  # type: ignore[valid-type]
    duration: PositiveDuration | None = None
    write_percent: Percent = 0  # type: ignore[valid-type]
    #: Each store is a load, then a store to the same page (docs/workload.md, "rw").
    rw: bool = False


class TracePhase(MultiRegionPhase):
    """Replays a recorded access trace over the concatenation of its regions (docs/workload.md,
    "Trace phases"): ``file`` (relative to the scenario file) in ``format``, its objects mapped
    to pages by ``map``, ``passes`` times, at most ``limit`` accesses."""

    kind: Literal["trace"]
    file: str
    format: Literal["csv", "oracle_general", "damo"]
    map: Literal["modulo", "first_seen"] = "modulo"
    passes: IntRange(1, 2**32 - 1) = 1  # type: ignore[valid-type]
    limit: IntRange(1, 2**63 - 1) | None = None  # type: ignore[valid-type]


class ReadPhase(_Phase):
    """Buffered read(2) of a file from start to end, one page per call, ``passes`` times."""

    kind: Literal["read"]
    file: str
    passes: IntRange(1, 2**32 - 1) = 1  # type: ignore[valid-type]


class MmapPhase(_Phase):
    """Accesses through a shared mapping of a file, page by page in order, ``passes`` times: a
    store with probability ``write_percent`` %, otherwise a load."""

    kind: Literal["mmap"]
    file: str
    passes: IntRange(1, 2**32 - 1) = 1  # type: ignore[valid-type]
    write_percent: Percent = 0  # type: ignore[valid-type]


class WritePhase(_Phase):
    """Buffered write(2) of a file from start to end, one page per call, ``passes`` times; with
    ``fsync_every``, an fsync(2) after every that many bytes written."""

    kind: Literal["write"]
    file: str
    passes: IntRange(1, 2**32 - 1) = 1  # type: ignore[valid-type]
    fsync_every: PositiveSize | None = None


class CreateFilesPhase(_Phase):
    """fs_mark-style file creation (docs/scenario.md): ``loops`` times, ``files`` new files of
    ``size`` each on ``filesystem``, each written from start to end with buffered write(2), one
    page per call, then closed (``sync = "fsync"``: fsync(2) before the close, fs_mark -S1;
    ``"none"``: -S0). Files are kept (fs_mark without deletion); each is a file of the
    process named ``<phase name>/<k>``."""

    kind: Literal["create_files"]
    files: IntRange(1, 65535)  # type: ignore[valid-type]
    size: PositiveSize
    loops: IntRange(1, 65535) = 1  # type: ignore[valid-type]
    sync: Literal["none", "fsync"] = "none"
    content: Content
    variants: IntRange(1, 65536) = 1  # type: ignore[valid-type]
    filesystem: str | None = None

    def file_names(self, name: str) -> list[str]:
        """The names of the files it creates, in creation order (``name``: the phase's)."""
        return [f"{name}/{k}" for k in range(self.files * self.loops)]


class SleepPhase(_Phase):
    makes_accesses: ClassVar[bool] = False
    kind: Literal["sleep"]
    duration: Duration


class ExitPhase(_Phase):
    makes_accesses: ClassVar[bool] = False
    kind: Literal["exit"]


class CounterTimes(StrictModel):
    """``{ of = "memory.zswap.current", times = 0.5 }``: floor(counter * times) - minus bytes (0
    if negative), the counter read from the process's cgroup when the phase runs."""

    of: Literal["memory.current", "memory.swap.current", "memory.zswap.current"]
    times: Annotated[float, AfterValidator(_theta)] = 1.0
    minus: Size = 0

    def lowered(self) -> dict[str, Any]:
        return {"kind": "of", "of": self.of, "times": self.times, "minus": self.minus}


def _counter_or_plain(v: Any) -> str:
    """A table is a value of a counter, anything else a plain value: one error, not one per
    alternative."""
    return "counter" if isinstance(v, dict | CounterTimes) else "plain"


#: The files a process may keep open (``cgroup_open``): where a descriptor of its own matters,
#: the peak files with their per-descriptor resets (6.12 peak_write).
PeakFile = Literal["memory.peak", "memory.swap.peak"]
#: The files a ``cgroup_read`` phase reads: one number each, or one per row for the keyed ones
#: (CgroupCounter in reclaimlab-workload).
ReadableFile = Literal[
    "memory.current", "memory.peak", "memory.swap.current", "memory.swap.peak", "memory.zswap.current", "memory.stat", "memory.events"
]
PEAK_FILES: tuple[str, ...] = ("memory.peak", "memory.swap.peak")
KEYED_FILES: tuple[str, ...] = ("memory.stat", "memory.events")


class CgroupWritePhase(_Phase):
    """A write to an interface file of the process's cgroup during the run: the files writable
    at runtime that the core models (CgroupFile in reclaimlab-workload; its serde names are
    checked against these by the tests). With ``fd``, the write goes through that descriptor of
    the process (a ``cgroup_open`` before it; ``file`` may then be left out). The peak files
    take ``value = "reset"``: a reset of the peak the descriptor reads."""

    makes_accesses: ClassVar[bool] = False
    kind: Literal["cgroup_write"]
    file: (
        Literal[
            "memory.high", "memory.max", "memory.zswap.max", "memory.zswap.writeback", "memory.swap.max", "memory.peak", "memory.swap.peak"
        ]
        | None
    ) = None
    fd: str | None = None
    value: Annotated[
        Annotated[CounterTimes, Tag("counter")] | Annotated[bool | int | str, Tag("plain")],
        Discriminator(_counter_or_plain),
    ]

    @model_validator(mode="after")
    def _value_fits_file(self) -> CgroupWritePhase:
        v = self.value
        if self.file is None and self.fd is None:
            raise PydanticCustomError(
                "cgroup_file", "file: expected the file to write, or fd = the name of a descriptor of cgroup_open", {}
            )
        if self.fd is not None:
            if self.file is not None and self.file not in PEAK_FILES:
                raise PydanticCustomError(
                    "cgroup_file",
                    "file: only memory.peak and memory.swap.peak are written through a descriptor; got {got}",
                    {"got": self.file},
                )
            if v != "reset":
                raise PydanticCustomError("cgroup_value", 'value: a peak file\'s descriptor takes "reset"; got {got}', {"got": repr(v)})
        elif self.file in PEAK_FILES:
            if v != "reset":
                raise PydanticCustomError("cgroup_value", 'value: {file} takes "reset"; got {got}', {"file": self.file, "got": repr(v)})
        elif self.file == "memory.zswap.writeback":
            if isinstance(v, CounterTimes) or v not in (0, 1):
                raise PydanticCustomError(
                    "cgroup_value", "value: memory.zswap.writeback takes 0 or 1 (or a bool); got {got}", {"got": repr(v)}
                )
            self.value = int(v)
        elif isinstance(v, bool):
            raise PydanticCustomError(
                "cgroup_value",
                "value: {file} takes a size, 'max' or {{ of = COUNTER, times = X }}; got {got}",
                {"file": self.file, "got": repr(v)},
            )
        elif not isinstance(v, CounterTimes):
            try:
                _max_or_size(v)
            except ValueError as e:
                raise PydanticCustomError("cgroup_value", "value: {msg} (or {{ of = COUNTER, times = X }})", {"msg": str(e)}) from None
        return self

    def lowered_value(self) -> dict[str, Any]:
        """The serde form of reclaimlab_workload::CgroupValue."""
        v = self.value
        if self.fd is not None or self.file in PEAK_FILES:
            return {"kind": "reset"}
        if isinstance(v, CounterTimes):
            return v.lowered()
        if isinstance(v, int) and not isinstance(v, bool) and self.file == "memory.zswap.writeback":
            return {"kind": "value", "value": v}
        size = _max_or_size(v)
        return {"kind": "max"} if size is None else {"kind": "value", "value": size}


class CgroupOpenPhase(_Phase):
    """Opens ``file`` (memory.peak or memory.swap.peak) of the process's cgroup and keeps the
    descriptor under the name ``fd`` for later ``cgroup_write``/``cgroup_read`` phases of the
    process, until a ``cgroup_close`` of it or the process's end."""

    makes_accesses: ClassVar[bool] = False
    kind: Literal["cgroup_open"]
    file: PeakFile
    fd: str


class CgroupReadPhase(_Phase):
    """Reads ``file`` of the process's cgroup (opened, read, closed), or with ``fd`` through
    that open descriptor (``file`` may then be left out): the number read (bytes; a
    memory.events row: a count) is the phase record's ``read``. memory.stat and memory.events
    are read at their row ``key`` (as the selftests' cg_read_key_long); a row the file does not
    have leaves ``read`` out and sets ``error = "ENOENT"``."""

    makes_accesses: ClassVar[bool] = False
    kind: Literal["cgroup_read"]
    file: ReadableFile | None = None
    fd: str | None = None
    key: str | None = None

    @model_validator(mode="after")
    def _file_or_fd(self) -> CgroupReadPhase:
        if self.file is None and self.fd is None:
            raise PydanticCustomError("cgroup_file", "file: expected the file to read, or fd = the name of a descriptor of cgroup_open", {})
        if (self.file in KEYED_FILES) != (self.key is not None):
            if self.key is None:
                raise PydanticCustomError("cgroup_key", 'key: {file} is read at a row; name it (e.g. key = "anon")', {"file": self.file})
            raise PydanticCustomError(
                "cgroup_key",
                "key: only memory.stat and memory.events have rows; got key = {key!r} for {file}",
                {"key": self.key, "file": self.file or "a descriptor"},
            )
        if self.fd is not None and self.file is not None and self.file not in PEAK_FILES:
            raise PydanticCustomError(
                "cgroup_file", "file: only memory.peak and memory.swap.peak are read through a descriptor; got {got}", {"got": self.file}
            )
        return self


class CgroupClosePhase(_Phase):
    """Closes the process's descriptor ``fd`` (close(2))."""

    makes_accesses: ClassVar[bool] = False
    kind: Literal["cgroup_close"]
    fd: str


class ZramWritePhase(_Phase):
    """A write to an attribute of a zram device during the run (/sys/block/zram<N>/<file>):
    ``compact`` compacts the device's zsmalloc pool (ZramFile in reclaimlab-workload). ``device``:
    the ``[[machine.swap]]`` name of a ``kind = "zram"`` device; default: the only one."""

    makes_accesses: ClassVar[bool] = False
    kind: Literal["zram_write"]
    file: Literal["compact"]
    device: str | None = None


class KernelAllocPhase(_Phase):
    """``count`` kernel allocations of 2^``order`` pages made on the process's behalf (simulator
    only; docs/model/kernel_alloc.md): a fork's kernel stack is order 2; a SLUB slab is
    ``order = 3`` with ``fallback_order = 0`` (s->oo and s->min). ``migratetype``:
    ``"unmovable"`` (GFP_KERNEL) or ``"reclaimable"``. Held until the process exits."""

    makes_accesses: ClassVar[bool] = False
    kind: Literal["kernel_alloc"]
    count: IntRange(1, 2**32 - 1)  # type: ignore[valid-type]
    order: IntRange(0, 10)  # type: ignore[valid-type]
    fallback_order: IntRange(0, 9) | None = None  # type: ignore[valid-type]
    migratetype: Literal["unmovable", "reclaimable"] = "unmovable"

    @model_validator(mode="after")
    def _fallback_below(self) -> KernelAllocPhase:
        if self.fallback_order is not None and self.fallback_order >= self.order:
            raise ValueError(f"fallback_order must be below order ({self.order}), got {self.fallback_order}")
        return self


class ReclaimPhase(_Phase):
    """A write of ``amount`` to the process's cgroup's ``memory.reclaim`` (cgroup v2; proactive
    reclaim), with ``swappiness=`` when given (kernels 6.12 and later). ``amount`` is a size or
    ``{ of = COUNTER, times = X, minus = SIZE }``."""

    makes_accesses: ClassVar[bool] = False
    kind: Literal["reclaim"]
    amount: Annotated[
        Annotated[CounterTimes, Tag("counter")] | Annotated[PositiveSize, Tag("plain")],
        Discriminator(_counter_or_plain),
    ]
    swappiness: IntRange(0, 200) | None = None  # type: ignore[valid-type]

    def lowered_amount(self) -> dict[str, Any]:
        """The serde form of reclaimlab_workload::CgroupValue."""
        a = self.amount
        return a.lowered() if isinstance(a, CounterTimes) else {"kind": "value", "value": a}


Phase = Annotated[
    FillPhase
    | SequentialPhase
    | RandomPhase
    | TracePhase
    | ReadPhase
    | MmapPhase
    | WritePhase
    | CreateFilesPhase
    | SleepPhase
    | ReclaimPhase
    | CgroupWritePhase
    | CgroupOpenPhase
    | CgroupReadPhase
    | CgroupClosePhase
    | ZramWritePhase
    | KernelAllocPhase
    | ExitPhase,
    Field(discriminator="kind"),
]


def phase_kinds_without_accesses() -> frozenset[str]:
    """The ``kind`` of every phase whose ``makes_accesses`` is False (derived from ``Phase``)."""
    members = get_args(get_args(Phase)[0])
    return frozenset(get_args(cls.model_fields["kind"].annotation)[0] for cls in members if not cls.makes_accesses)


def phase_name(phase: Any, index: int) -> str:
    """A phase's name: as given, or "<kind><index>"."""
    return phase.name if phase.name is not None else f"{phase.kind}{index}"


def parse_after(text: str) -> tuple[str, str] | None:
    """``"<process>:<phase>"`` as (process, phase); None if it is not of that form."""
    proc, sep, phase = text.partition(":")
    return (proc, phase) if sep and proc and phase else None


class Process(StrictModel):
    name: str
    cgroup: str = "/"
    #: ``"<process>:<phase>"``: the process's first phase starts once that phase has ended.
    after: str | None = None
    regions: list[Region] = Field(default_factory=list)
    files: list[File] = Field(default_factory=list)
    phases: list[Phase] = Field(default_factory=list)
    #: /proc/<pid>/oom_score_adj: added to the OOM killer's badness in thousandths of the OOM
    #: domain's pages; -1000 is never killed (docs/model/memcg.md, "OOM kills").
    oom_score_adj: IntRange(-1000, 1000) = 0  # type: ignore[valid-type]

    def cgroup_path(self) -> str:
        parts = [p for p in self.cgroup.split("/") if p]
        return "/" + "/".join(parts)


# ---------------------------------------------------------------------------------------------
# [compare]
# ---------------------------------------------------------------------------------------------


class CompareConfig(StrictModel):
    name: str
    description: str = ""
    set: dict[str, Any] = Field(default_factory=dict)

    def overrides(self) -> list[Override]:
        return [Override(k, v, f"compare config {self.name!r}") for k, v in self.set.items()]


class Compare(StrictModel):
    configs: list[CompareConfig] = Field(default_factory=list)
    #: The configuration the others are set against in `compare`'s tables (default: the first).
    baseline: str | None = None


# ---------------------------------------------------------------------------------------------
# [report]
# ---------------------------------------------------------------------------------------------

#: Per-phase fields a report metric can name: ``phase:<process>/<phase>.<field>``.
#: ``accesses_per_s_norm`` is accesses_per_s divided by the first [compare] config's value.
PHASE_FIELDS = ("elapsed_s", "accesses_per_s", "accesses", "accesses_per_s_norm")
#: mmtests' derived figures a metric may name (``mmtests:<name>``; reclaimlab.mmtests computes them).
MMTESTS_FIGURES = (
    "kswapd_efficiency",
    "direct_efficiency",
    "kswapd_velocity",
    "direct_velocity",
    "direct_scans_percent",
    "page_writes_by_reclaim",
)

#: Latency kinds a ``latency:`` metric may name (docs/model/latency.md).
LATENCY_METRIC_KINDS = ("fault", "fault_minor", "fault_major", "fault_zswap", "io_wait", "alloc_stall", "high_reclaim", "throttle")
#: Aggregates of a ``latency:`` metric over its processes' per-process sums: the total, the
#: mean per process, the largest.
LATENCY_METRIC_STATS = ("sum_s", "mean_s", "max_s")

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
    derived: str | None = None  # an mmtests figure (reclaimlab.mmtests.DERIVED)
    latency: tuple[str, str, str] | None = None  # (process or "prefix*", kind, stat)


def parse_metric(text: str) -> Metric:
    """``"vmstat.pswpin"``, ``"phase:apt/update.elapsed_s"`` or ``"mmtests:kswapd_efficiency"``;
    ValueError saying what is expected."""
    if text.startswith("mmtests:"):
        name = text[len("mmtests:") :]
        if name not in MMTESTS_FIGURES:
            raise ValueError(f"expected 'mmtests:<{'|'.join(MMTESTS_FIGURES)}>'; got {text!r}")
        return Metric(text, derived=name)
    if text.startswith("latency:"):
        parts = text[len("latency:") :].rsplit(".", 2)
        if len(parts) != 3 or not parts[0] or parts[1] not in LATENCY_METRIC_KINDS or parts[2] not in LATENCY_METRIC_STATS:
            kinds, stats = "|".join(LATENCY_METRIC_KINDS), "|".join(LATENCY_METRIC_STATS)
            raise ValueError(f"expected 'latency:<process or prefix*>.<{kinds}>.<{stats}>'; got {text!r}")
        return Metric(text, latency=(parts[0], parts[1], parts[2]))
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


class ReportClaim(StrictModel):
    """One published claim: ``metric`` in ``config`` moves ``direction`` against ``baseline``
    (or, for ``greater_than``, exceeds ``other_metric`` in the same config)."""

    text: str
    metric: str
    config: str
    direction: Direction
    baseline: str | None = None
    other_metric: str | None = None


class Report(StrictModel):
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
    #: The loader's build step (source, overrides) -> Scenario: ``with_overrides`` reruns it.
    rebuild: Callable[[Source, Sequence[Override]], Scenario]
    overrides: tuple[Override, ...] = ()


#: The trace groups (crates/reclaimlab-core/src/stats/trace.rs GROUPS): vmscan (LRU scans,
#: reclaim entries, kswapd wakes, reclaim_throttle), shrinker (every shrinker's slab events),
#: zswap (the zswap shrinker's slab events; 6.12's zswap has no tracepoints of its own),
#: compaction (compaction_suitable's verdicts, direct compaction's priorities and results,
#: deferral, the scanners' isolations, migrations, kcompactd wakes).
TraceGroup = Literal["vmscan", "shrinker", "zswap", "compaction"]


class Lab(StrictModel):
    """How the lab runs this scenario; the simulator ignores it. ``kernel``: the VM lab's guest
    kernel (``reclaimlab run --backend vm``; docs/vmlab.md), e.g. "debian-6.12". MGLRU in the
    guest is the knob ``kernel.lru_gen.enabled``, which the simulator models too."""

    kernel: str | None = None


class Engine(StrictModel):
    """How the simulator carries the run out, not what it models (the lab ignores it).
    ``accesses``: ``"analytic"`` draws the resident hits of random phases and sequential passes
    in bulk (docs/model/analytic.md); ``"exact"`` steps every access (the lab's sequence, byte
    for byte). The values are declared once, in the core (config.rs ``Accesses``), which
    refuses any other with the list; a scenario's default is declared here, once: analytic,
    since it is as close to the kernel as exact mode on the validation suite (analytic.md).
    The core's own default for a lowered config without ``engine`` stays exact (its tests,
    benches and the runner's sequence), so lower.py writes the mode whenever it is not that."""

    accesses: str = "analytic"


class Scenario(StrictModel):
    schema_version: Annotated[int, AfterValidator(check_schema_version)]
    name: str | None = None
    description: str = ""
    seed: U64 = 1  # type: ignore[valid-type]
    max_time: PositiveDuration | None = None
    #: Tracepoint groups to count (``--trace``; docs/vmlab.md#tracing): the simulator exports
    #: its own counts of the events, the VM lab's guest counts the kernel's.
    trace: list[TraceGroup] = Field(default_factory=list)
    machine: Machine
    kernel: Kernel = Field(default_factory=Kernel)
    cgroups: Cgroups = Field(default_factory=Cgroups)
    processes: list[Process]
    costs: dict[str, CostValue] = Field(default_factory=dict)
    compare: Compare | None = None
    report: Report | None = None
    lab: Lab = Field(default_factory=Lab)
    engine: Engine = Field(default_factory=Engine)

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
        return self._source.rebuild(self._source, [*self._source.overrides, *extra])
