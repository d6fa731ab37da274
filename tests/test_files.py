"""File regions and the read/mmap phases: loading, cross-key checks, lowering, the real core."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import MINIMAL
from reclaimlab import load, lower
from reclaimlab.errors import ScenarioError

FILES = (
    MINIMAL.replace(
        '[[processes]]\nname = "p"',
        """[[machine.filesystems]]
name = "data"
type = "xfs"
device = "nvme"
[[processes]]
name = "p"
[[processes.files]]
name = "db"
size = "2MiB"
content = "text"
""",
    )
    + """[[processes.phases]]
kind = "read"
file = "db"
passes = 2
[[processes.phases]]
kind = "mmap"
file = "db"
"""
)


def test_files_lower_as_regions_after_the_anonymous_ones() -> None:
    config = lower(load(FILES), profile=None)
    fs = config["machine"]["filesystems"]
    assert [(f["name"], f["fstype"]) for f in fs] == [("data", "xfs")]
    # Where the lab makes it unless the scenario says otherwise: a loop device over an image.
    assert fs[0]["backing"] == "loop"
    assert (
        lower(load(FILES.replace('device = "nvme"', 'device = "nvme"\nbacking = "device"')), profile=None)["machine"]["filesystems"][0][
            "backing"
        ]
        == "device"
    )
    regions = config["processes"][0]["regions"]
    assert [(r["name"], r.get("file")) for r in regions] == [("a", None), ("db", 0)]
    assert regions[1]["pages"] == 512
    phases = [p["phase"] for p in config["processes"][0]["phases"]]
    assert phases[1:] == [{"kind": "read", "region": 1, "passes": 2}, {"kind": "mmap", "region": 1, "passes": 1, "write_percent": 0}]


def test_a_scenario_without_files_lowers_as_before() -> None:
    config = lower(load(MINIMAL), profile=None)
    assert "filesystems" not in config["machine"]
    assert all("file" not in r for r in config["processes"][0]["regions"])


@pytest.mark.native
def test_the_core_runs_file_phases(real_core: Any) -> None:
    sim = real_core.Simulation(json.dumps(lower(load(FILES), profile=None)))
    while not sim.step(100_000):
        pass
    counters = dict(json.loads(sim.result_json())["counters"])
    # 2 MiB read, counted twice: the filesystem's default backing is a loop device (the bio to
    # it and its worker's bio to the device under the image).
    assert counters["vmstat.pgpgin"] == 2 * 512 * 4
    assert counters["vmstat.nr_file_pages"] == 512
    assert counters["vmstat.nr_mapped"] == 512


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('file = "db"\npasses = 2', 'file = "nope"\npasses = 2', "processes[0].phases[1].file: expected the name of a file"),
        ('device = "nvme"', 'device = "nvme"\n[[machine.filesystems]]\nname = "logs"\ndevice = "ssd"', "files[0].filesystem: required key"),
        ('type = "xfs"', 'type = "ntfs"', "machine.filesystems[0].type"),
        ('[[processes.files]]\nname = "db"', '[[processes.files]]\nname = "a"', "files[0].name: a region of process 'p' is also named 'a'"),
    ],
)
def test_file_errors_name_the_key(old: str, new: str, message: str) -> None:
    assert old in FILES
    with pytest.raises(ScenarioError) as e:
        load(FILES.replace(old, new, 1))
    assert message in str(e.value)


WRITES = (
    FILES.replace('kind = "mmap"\nfile = "db"\n', 'kind = "mmap"\nfile = "db"\nwrite_percent = 50\n')
    + """[[processes.phases]]
kind = "write"
file = "db"
fsync_every = "1MiB"
"""
)


def test_write_phases_and_mapping_stores_lower() -> None:
    phases = [p["phase"] for p in lower(load(WRITES), profile=None)["processes"][0]["phases"]]
    assert phases[2] == {"kind": "mmap", "region": 1, "passes": 1, "write_percent": 50}
    assert phases[3] == {"kind": "write", "region": 1, "passes": 1, "fsync_bytes": 1 << 20}
    no_fsync = lower(load(WRITES.replace('fsync_every = "1MiB"\n', "")), profile=None)
    assert no_fsync["processes"][0]["phases"][3]["phase"]["fsync_bytes"] is None


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('fsync_every = "1MiB"', 'fsync_every = "0B"', "processes[0].phases[3].fsync_every"),
        ("write_percent = 50", "write_percent = 101", "processes[0].phases[2].write_percent"),
        ('kind = "write"\nfile = "db"', 'kind = "write"\nfile = "a"', "processes[0].phases[3].file: expected the name of a file"),
    ],
)
def test_write_errors_name_the_key(old: str, new: str, message: str) -> None:
    assert old in WRITES
    with pytest.raises(ScenarioError) as e:
        load(WRITES.replace(old, new, 1))
    assert message in str(e.value)


@pytest.mark.native
def test_the_core_writes_and_fsyncs(real_core: Any) -> None:
    sim = real_core.Simulation(json.dumps(lower(load(WRITES), profile=None)))
    while not sim.step(100_000):
        pass
    counters = dict(json.loads(sim.result_json())["counters"])
    # Half the mapped pages are stored to (dirtied once each), then the write phase dirties
    # the rest and fsyncs every 1 MiB: the 2 MiB file ends clean, written once per dirtying.
    assert counters["vmstat.nr_dirtied"] > 512
    assert counters["vmstat.nr_written"] == counters["vmstat.nr_dirtied"]
    assert counters["vmstat.nr_dirty"] == 0
    assert counters["meminfo.Writeback"] == 0


TMPFS = FILES.replace('type = "xfs"\ndevice = "nvme"', 'type = "tmpfs"\nsize = "4MiB"')


def test_a_tmpfs_lowers_with_its_size_and_no_device() -> None:
    config = lower(load(TMPFS), profile=None)
    assert config["machine"]["filesystems"] == [{"name": "data", "fstype": "tmpfs", "size_bytes": 4 << 20}]
    assert config["processes"][0]["regions"][1]["file"] == 0
    unsized = lower(load(TMPFS.replace('size = "4MiB"\n', "")), profile=None)
    assert unsized["machine"]["filesystems"] == [{"name": "data", "fstype": "tmpfs"}]


@pytest.mark.parametrize(
    ("scenario", "old", "new", "message"),
    [
        ("tmpfs", 'size = "4MiB"', 'size = "4MiB"\ndevice = "ssd"', "machine.filesystems[0].device: a tmpfs has no block device"),
        ("xfs", 'device = "nvme"', 'device = "nvme"\nsize = "1GiB"', "machine.filesystems[0].size: only a tmpfs has a size"),
        ("xfs", 'device = "nvme"\n', "", "machine.filesystems[0].device: required key is missing"),
        ("tmpfs", 'size = "4MiB"', 'size = "4MiB"\nbacking = "loop"', "machine.filesystems[0].backing: a tmpfs has no block device"),
        ("xfs", 'device = "nvme"', 'device = "nvme"\nbacking = "nbd"', "machine.filesystems[0].backing: expected one of 'loop', 'device'"),
    ],
)
def test_tmpfs_errors_name_the_key(scenario: str, old: str, new: str, message: str) -> None:
    text = TMPFS if scenario == "tmpfs" else FILES
    assert old in text
    with pytest.raises(ScenarioError) as e:
        load(text.replace(old, new, 1))
    assert message in str(e.value)


@pytest.mark.native
def test_the_core_keeps_tmpfs_files_as_shmem(real_core: Any) -> None:
    sim = real_core.Simulation(json.dumps(lower(load(TMPFS), profile=None)))
    while not sim.step(100_000):
        pass
    counters = dict(json.loads(sim.result_json())["counters"])
    # The mapping faulted every page in (read(2) of holes allocates nothing): 2 MiB of Shmem,
    # none of it file LRU pages, nothing read from a device.
    assert counters["vmstat.nr_shmem"] == 512
    assert counters["meminfo.Shmem"] == 512 * 4
    assert counters["vmstat.nr_inactive_file"] + counters["vmstat.nr_active_file"] == 0
    assert counters["vmstat.pgpgin"] == 0


def test_files_over_the_tmpfs_size_are_refused() -> None:
    with pytest.raises(ScenarioError) as e:
        load(TMPFS.replace('size = "4MiB"', 'size = "1MiB"'))
    assert "processes[0].files[0].size: the files on tmpfs 'data' reach 2097152 bytes" in str(e.value)
    # Unset, the size is half of RAM (256 MiB here).
    with pytest.raises(ScenarioError) as e:
        load(TMPFS.replace('size = "4MiB"\n', "").replace('size = "2MiB"', 'size = "129MiB"'))
    assert "over its size of 134217728 bytes" in str(e.value)


CREATE = FILES.replace(
    '[[processes.phases]]\nkind = "read"',
    """[[processes.phases]]
name = "fsmark"
kind = "create_files"
files = 3
size = "64KiB"
loops = 2
sync = "fsync"
content = "random"
[[processes.phases]]
kind = "read\"""",
)


def test_create_files_lowers_its_files_as_regions_after_the_declared_ones() -> None:
    p = lower(load(CREATE), profile=None)["processes"][0]
    created = [r for r in p["regions"] if r["name"].startswith("fsmark/")]
    assert [r["name"] for r in created] == [f"fsmark/{k}" for k in range(6)]
    assert all(r["pages"] == 16 and r["file"] == 0 and r["variants"] == 1 and r["content"] == "random" for r in created)
    assert p["phases"][1]["phase"] == {"kind": "create_files", "regions": [2, 3, 4, 5, 6, 7], "fsync": True}


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("loops = 2", "loops = 40000", "processes[0].phases[1].files: files x loops must be at most 60000"),
        ('sync = "fsync"', 'sync = "always"', "processes[0].phases[1].sync"),
        ('content = "random"', 'content = "random"\nfilesystem = "nope"', "processes[0].phases[1].filesystem: expected the name"),
        ('[[processes.files]]\nname = "db"', '[[processes.files]]\nname = "fsmark/1"', "processes[0].phases[1].name: the files it creates"),
    ],
)
def test_create_files_errors_name_the_key(old: str, new: str, message: str) -> None:
    assert old in CREATE
    with pytest.raises(ScenarioError) as e:
        load(CREATE.replace(old, new, 1))
    assert message in str(e.value)


@pytest.mark.native
def test_the_core_creates_files_and_fsyncs_each(real_core: Any) -> None:
    sim = real_core.Simulation(json.dumps(lower(load(CREATE), profile=None)))
    while not sim.step(100_000):
        pass
    result = json.loads(sim.result_json())
    counters = dict(result["counters"])
    # 6 files of 16 pages written and fsynced at close: all clean, each written once.
    assert counters["vmstat.nr_dirtied"] >= 6 * 16
    assert counters["vmstat.nr_written"] == counters["vmstat.nr_dirtied"]
    assert counters["vmstat.nr_dirty"] == 0
    phase = next(r for r in result["phases"] if r["phase"] == "fsmark")
    assert phase["accesses"] == 6 * 16


TMPFILE = FILES.replace('[[processes.files]]\nname = "db"\n', '[[processes.files]]\nname = "db"\ntmpfile = true\n', 1) + (
    '[[processes.phases]]\nkind = "exit"\n'
)


def test_a_tmpfile_lowers_with_its_flag() -> None:
    assert "tmpfile = true" in TMPFILE
    regions = lower(load(TMPFILE), profile=None)["processes"][0]["regions"]
    assert [r.get("tmpfile") for r in regions] == [None, True]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            TMPFILE.replace('kind = "mmap"\nfile = "db"\n', 'kind = "mmap"\nfile = "db"\nwrite_percent = 1\n'),
            "processes[0].phases[2].file: 'db' is a tmpfile, which only read phases may use",
        ),
        (
            TMPFILE.replace('type = "xfs"\ndevice = "nvme"', 'type = "tmpfs"'),
            "processes[0].files[0].tmpfile: a tmpfile on tmpfs 'data' is not modelled",
        ),
    ],
)
def test_tmpfile_errors_name_the_key(text: str, message: str) -> None:
    with pytest.raises(ScenarioError) as e:
        load(text)
    assert message in str(e.value)


@pytest.mark.native
def test_the_core_frees_a_tmpfile_at_exit(real_core: Any) -> None:
    sim = real_core.Simulation(json.dumps(lower(load(TMPFILE), profile=None)))
    while not sim.step(100_000):
        pass
    counters = dict(json.loads(sim.result_json())["counters"])
    # Read and mapped (512 pages from the device, counted twice on the default loop backing),
    # then the exit's last close truncated it.
    assert counters["vmstat.pgpgin"] == 2 * 512 * 4
    assert counters["vmstat.nr_file_pages"] == 0
