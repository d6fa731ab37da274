"""Scenario format v1 (docs/scenario.md): ``load()`` a TOML file into typed models.

* ``types``: value types (sizes, durations, ranges) and the strict base model;
* ``models``: one pydantic model per table, and ``Scenario``;
* ``loading``: read, normalise, apply ``--set`` overrides, validate -> ``load()``;
* ``messages``: pydantic's errors as messages naming the key the user wrote;
* ``checks``: what spans several keys (references, names, what the native core knows).
"""

from __future__ import annotations

from reclaimlab.devices import DEVICE_PRESETS, ZRAM_DEVICE, DeviceModel
from reclaimlab.errors import ScenarioError
from reclaimlab.scenario.loading import load, normalize
from reclaimlab.scenario.models import (
    BASELINE_DIRECTIONS,
    PHASE_FIELDS,
    Cgroups,
    CgroupWritePhase,
    Compare,
    CompareConfig,
    CounterTimes,
    CreateFilesPhase,
    Device,
    ExitPhase,
    File,
    Filesystem,
    FillPhase,
    HotCold,
    Kernel,
    Lab,
    Machine,
    Metric,
    MmapPhase,
    Phase,
    Process,
    RandomPhase,
    ReadPhase,
    ReclaimPhase,
    Region,
    Report,
    ReportClaim,
    Scenario,
    SequentialPhase,
    SleepPhase,
    Swap,
    TracePhase,
    Uniform,
    WritePhase,
    Zipf,
    ZramWritePhase,
    parse_metric,
    phase_name,
)
from reclaimlab.scenario.types import SCHEMA_VERSION

__all__ = [
    "BASELINE_DIRECTIONS",
    "DEVICE_PRESETS",
    "PHASE_FIELDS",
    "SCHEMA_VERSION",
    "ZRAM_DEVICE",
    "CgroupWritePhase",
    "Cgroups",
    "Compare",
    "CompareConfig",
    "CounterTimes",
    "CreateFilesPhase",
    "Device",
    "DeviceModel",
    "ExitPhase",
    "File",
    "Filesystem",
    "FillPhase",
    "HotCold",
    "Kernel",
    "Lab",
    "Machine",
    "Metric",
    "MmapPhase",
    "Phase",
    "Process",
    "RandomPhase",
    "ReadPhase",
    "ReclaimPhase",
    "Region",
    "Report",
    "ReportClaim",
    "Scenario",
    "ScenarioError",
    "SequentialPhase",
    "SleepPhase",
    "Swap",
    "TracePhase",
    "Uniform",
    "WritePhase",
    "Zipf",
    "ZramWritePhase",
    "load",
    "normalize",
    "parse_metric",
    "phase_name",
]
