"""Block devices as the simulator models them: the presets, and the one place a device's
figures are laid over a base model (a scenario's device table over a preset, a machine
profile's ``[devices.<preset>]`` over the built-in preset)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DEVICE_PRESETS", "FIGURES", "OPTIONAL_FIGURES", "ZRAM_DEVICE", "DeviceModel", "overlay"]


@dataclass(frozen=True)
class DeviceModel:
    """A block device as the simulator models it (config.rs DeviceModel). ``iops`` (a cap on
    requests per second), ``max_sectors_kb`` (request merging under a plug) and
    ``nr_requests`` (requests in flight at once) are optional: None is no cap, no merging and
    no limit, the model of the devices without them. ``read_ahead_kb`` (the queue's readahead
    size, the largest window of file readahead) is optional too: None is the kernel's default
    of 128 KiB (VM_READAHEAD_PAGES)."""

    rotational: bool
    read_latency_ns: int
    write_latency_ns: int
    read_bytes_per_s: int
    write_bytes_per_s: int
    iops: int | None = None
    max_sectors_kb: int | None = None
    nr_requests: int | None = None
    read_ahead_kb: int | None = None
    #: The time a cache flush occupies the device (a volatile write cache without FUA, as the
    #: loop device and virtio-blk have: a journal commit's REQ_PREFLUSH | REQ_FUA write costs
    #: two). None: no volatile cache, flushes are dropped as the block layer drops them.
    flush_ns: int | None = None


#: Device presets. First estimates; a machine profile (reclaimlab/profiles/, written by
#: `reclaimlab calibrate`) replaces the ones it measured. docs/scenario.md gives the rationale
#: for each.
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
    # The lab's filesystem device (lab/filesystems.py): a loop device with direct IO over a
    # fallocated image file on this project's VM disk, its queue as sysfs shows it. Figures of
    # `calibrate --only-loop-device` (stage 2b, loop_device.py) on polyglot-vm, 2026-11-24
    # 22:46 UTC, the ones its profile records ([measurements.loop_device]; docs/calibration.md).
    "lab-loop": DeviceModel(
        True, 927_000, 375_100, 4_047_000_000, 3_592_000_000, max_sectors_kb=1280, nr_requests=128, read_ahead_kb=2560, flush_ns=335_000
    ),
}

#: The device model of a zram swap device when none is given: RAM, no latency and a transfer
#: time (4 ns per page) that is negligible next to the codec's CPU time, which the core charges.
ZRAM_DEVICE = DeviceModel(False, 0, 0, 1_000_000_000_000, 1_000_000_000_000)

#: The figures as scenarios and profiles spell them (already parsed: ns, bytes/s) -> the
#: DeviceModel field. The first five are required of a device without a preset.
_FIELDS = {
    "rotational": "rotational",
    "read_latency": "read_latency_ns",
    "write_latency": "write_latency_ns",
    "read_bandwidth": "read_bytes_per_s",
    "write_bandwidth": "write_bytes_per_s",
    "iops": "iops",
    "max_sectors_kb": "max_sectors_kb",
    "nr_requests": "nr_requests",
    "read_ahead_kb": "read_ahead_kb",
    "flush_latency": "flush_ns",
}
#: The figures a device without a preset must give.
FIGURES: tuple[str, ...] = ("rotational", "read_latency", "write_latency", "read_bandwidth", "write_bandwidth")
#: Figures that may be left out (no IOPS cap, no request merging, no queue limit, the default
#: readahead size) unless a preset sets them.
OPTIONAL_FIGURES: tuple[str, ...] = ("iops", "max_sectors_kb", "nr_requests", "read_ahead_kb", "flush_latency")


def overlay(base: DeviceModel | None, figures: Mapping[str, Any]) -> DeviceModel:
    """``base`` with the figures that are given (not None) in ``figures`` (keys as in FIGURES
    and OPTIONAL_FIGURES) replaced. Without a base every figure of FIGURES must be given."""
    changes = {_FIELDS[k]: v for k, v in figures.items() if v is not None}
    if base is not None:
        return dataclasses.replace(base, **changes)
    return DeviceModel(**changes)
