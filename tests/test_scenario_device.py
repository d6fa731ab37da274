"""The block device's request-model figures: iops, max_sectors_kb, nr_requests (scenario keys,
presets, profile tables, lowering) and the errors that name file, key and expectation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import MINIMAL, THREE_REGIONS
from reclaimlab import ScenarioError, load, lower
from reclaimlab.profile import ProfileError, parse_profile
from reclaimlab.scenario import DEVICE_PRESETS, Device, DeviceModel

Write = Callable[..., Path]


def one(write: Write, text: str) -> str:
    path = write(text)
    with pytest.raises(ScenarioError) as info:
        load(path)
    lines = str(info.value).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{path}: ")
    return lines[0][len(f"{path}: ") :]


def device_of(text: str) -> dict[str, object]:
    return lower(load(text), profile=None)["machine"]["swap"][0]["device"]  # type: ignore[no-any-return]


def with_device(table: str) -> str:
    return MINIMAL.replace('device = "ssd"', f"device = {table}")


def test_figures_absent_lower_as_before() -> None:
    # Without the figures the lowered device has exactly the five figures it always had.
    assert device_of(MINIMAL) == {
        "rotational": False,
        "read_latency_ns": 100_000,
        "write_latency_ns": 50_000,
        "read_bytes_per_s": 500_000_000,
        "write_bytes_per_s": 500_000_000,
    }
    for name, preset in DEVICE_PRESETS.items():
        if name not in ("cloud-disk", "lab-loop"):
            assert (preset.iops, preset.max_sectors_kb, preset.nr_requests) == (None, None, None), name
        if name != "lab-loop":
            assert preset.read_ahead_kb is None, name
            assert preset.flush_ns is None, name
    assert "flush_ns" not in device_of(MINIMAL)


def test_flush_latency_lowers_and_lab_loop_has_the_loop_devices_queue() -> None:
    assert device_of(with_device('{ preset = "ssd", flush_latency = "1ms" }'))["flush_ns"] == 1_000_000
    d = device_of(with_device('"lab-loop"'))
    assert (d["max_sectors_kb"], d["read_ahead_kb"], d["nr_requests"]) == (1280, 2560, 128)
    assert d["flush_ns"] > 0
    p = parse_profile('[devices.lab-loop]\nflush_latency = "2ms"\n', "prof.toml")
    assert p.devices["lab-loop"].flush_ns == 2_000_000


def test_figures_on_a_preset() -> None:
    d = device_of(with_device('{ preset = "ssd", iops = 500, max_sectors_kb = 512, nr_requests = 64 }'))
    assert (d["iops"], d["max_sectors_kb"], d["nr_requests"]) == (500, 512, 64)
    assert d["read_latency_ns"] == 100_000
    assert "read_ahead_kb" not in d


def test_read_ahead_kb_lowers_and_0_is_no_readahead() -> None:
    assert device_of(with_device('{ preset = "ssd", read_ahead_kb = 2560 }'))["read_ahead_kb"] == 2560
    assert device_of(with_device('{ preset = "ssd", read_ahead_kb = 0 }'))["read_ahead_kb"] == 0
    p = parse_profile("[devices.ssd]\nread_ahead_kb = 0\n", "prof.toml")
    assert p.devices["ssd"].read_ahead_kb == 0


def test_figures_without_a_preset_are_optional() -> None:
    table = '{ rotational = true, read_latency = "1ms", write_latency = "1ms", read_bandwidth = "100MB/s", write_bandwidth = "100MB/s", iops = 300 }'
    d = device_of(with_device(table))
    assert d["iops"] == 300
    assert "max_sectors_kb" not in d and "nr_requests" not in d


def test_cloud_disk_preset() -> None:
    d = device_of(with_device('"cloud-disk"'))
    assert d == {
        "rotational": True,
        "read_latency_ns": 2_000_000,
        "write_latency_ns": 2_000_000,
        "read_bytes_per_s": 150_000_000,
        "write_bytes_per_s": 150_000_000,
        "iops": 600,
        "max_sectors_kb": 1280,
        "nr_requests": 256,
    }
    # A figure of the scenario wins over the preset's.
    assert device_of(with_device('{ preset = "cloud-disk", iops = 3500 }'))["iops"] == 3500


def test_set_override_reaches_the_figures() -> None:
    s = load(THREE_REGIONS, ["machine.swap.0.device.iops=1000", "machine.swap.0.device.max_sectors_kb=256"])
    d = s.machine.swap[0].device
    assert d is not None and (d.iops, d.max_sectors_kb) == (1000, 256)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('{ preset = "ssd", iops = 0 }', "machine.swap[0].device.iops: expected an integer in 1..4294967295; got 0"),
        ('{ preset = "ssd", iops = -5 }', "machine.swap[0].device.iops: expected an integer in 1..4294967295; got -5"),
        ('{ preset = "ssd", max_sectors_kb = 2 }', "machine.swap[0].device.max_sectors_kb: expected an integer in 4..4294967295; got 2"),
        ('{ preset = "ssd", nr_requests = 0 }', "machine.swap[0].device.nr_requests: expected an integer in 1..4294967295; got 0"),
        ('{ preset = "ssd", read_ahead_kb = -1 }', "machine.swap[0].device.read_ahead_kb: expected an integer in 0..4294967295; got -1"),
    ],
)
def test_figure_ranges(write: Write, table: str, message: str) -> None:
    assert one(write, with_device(table)) == message


def test_figure_types(write: Write) -> None:
    assert one(write, with_device('{ preset = "ssd", iops = "fast" }')).startswith("machine.swap[0].device.iops: expected an integer")
    msg = one(write, with_device('{ preset = "ssd", max_sector_kb = 512 }'))
    assert msg.startswith("machine.swap[0].device.max_sector_kb: unknown key (did you mean 'max_sectors_kb'?)")


def test_device_without_preset_still_needs_the_five(write: Write) -> None:
    msg = one(write, with_device("{ iops = 500, max_sectors_kb = 512 }"))
    assert msg == (
        "machine.swap[0].device: a device without a preset needs all of rotational, read_latency, write_latency, "
        "read_bandwidth, write_bandwidth; missing rotational, read_latency, write_latency, read_bandwidth, write_bandwidth"
    )


def test_profile_device_figures() -> None:
    p = parse_profile("[devices.virtio-disk]\niops = 2000\nmax_sectors_kb = 1280\nnr_requests = 128\n", "prof.toml")
    base = DEVICE_PRESETS["virtio-disk"]
    assert p.devices["virtio-disk"] == DeviceModel(
        base.rotational, base.read_latency_ns, base.write_latency_ns, base.read_bytes_per_s, base.write_bytes_per_s, 2000, 1280, 128
    )
    # A profile's table for a preset with figures keeps the ones it does not replace.
    p = parse_profile('[devices.cloud-disk]\nread_latency = "1ms"\n', "prof.toml")
    assert (p.devices["cloud-disk"].iops, p.devices["cloud-disk"].read_latency_ns) == (600, 1_000_000)
    # The scenario's own figure still wins over the profile's preset.
    s = load(with_device('{ preset = "virtio-disk", iops = 10 }'))
    prof = parse_profile("[devices.virtio-disk]\niops = 2000\n", "prof.toml")
    assert lower(s, profile=prof)["machine"]["swap"][0]["device"]["iops"] == 10


def test_profile_device_figure_errors() -> None:
    with pytest.raises(ProfileError) as info:
        parse_profile("[devices.ssd]\nmax_sectors_kb = 1\nnr_request = 4\n", "prof.toml")
    text = str(info.value)
    assert "prof.toml: devices.ssd.max_sectors_kb: expected an integer in 4..4294967295; got 1" in text
    assert "prof.toml: devices.ssd.nr_request: unknown key (did you mean 'nr_requests'?)" in text


def test_optional_figures_are_listed() -> None:
    assert Device.OPTIONAL_FIGURES == ("iops", "max_sectors_kb", "nr_requests", "read_ahead_kb", "flush_latency")
