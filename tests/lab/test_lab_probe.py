"""probe's parsers and check()/notes() against synthetic hosts (no root, nothing changed)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import reclaimlab
from reclaimlab.lab import host
from reclaimlab.lab.probe import Probe, ZramDevice, check, notes, parse_crypto
from reclaimlab.lab.state import machine_state

CRYPTO = """\
name         : lzo-rle
driver       : lzo-rle-scomp
module       : kernel
type         : scomp

name         : crc32c
driver       : crc32c-lib
type         : shash

name         : lzo
driver       : lzo-scomp
internal     : no
type         : scomp

name         : secret
driver       : secret-generic
internal     : yes
type         : acomp

name         : deflate
driver       : deflate-generic
type         : acomp
"""

V1_HOST = Probe(
    root=True,
    kernel_release="6.18.44-fc-v657",
    mem_total_bytes=24 * 2**30,
    mem_available_bytes=20 * 2**30,
    cpus=2,
    zswap_params={"enabled": "N", "compressor": "lzo", "max_pool_percent": "20", "accept_threshold_percent": "90", "shrinker_enabled": "N"},
    zswap_compressors=("lzo-rle", "lzo", "deflate"),
    zswap_compressors_loadable=(),
    debugfs_supported=True,
    debugfs_mount=None,
    zswap_debugfs=None,
    zram_loaded=True,
    zram_loadable=False,
    zram_hot_add=True,
    zram_devices=(ZramDevice(0, 0, 0, ("lzo-rle", "lzo", "lz4"), "lzo-rle"),),
    zram_comp_algorithms=("lzo-rle", "lzo", "lz4"),
    cgroup_v1_memory="/sys/fs/cgroup/memory",
    cgroup_v2="/sys/fs/cgroup/unified",
    cgroup_v2_memory=False,
    cgroup_v2_memory_enabled=False,
    cgroup_v2_files=(),
    swaps=(),
    sysctls={"vm.swappiness": "60", "vm.page-cluster": "3", "vm.min_free_kbytes": "67584", "vm.watermark_scale_factor": "10"},
    tools={"mkswap": "/sbin/mkswap", "swapon": "/sbin/swapon", "swapoff": "/sbin/swapoff", "modprobe": None},
)

BASE = """\
schema_version = 1
[machine]
memory = "1GiB"
cpus = 2
[[machine.swap]]
size = "64MiB"
device = "ssd"
[kernel]
zswap.enabled = true
[cgroups]
cgroup_version = 1
[cgroups.groups.workload]
"memory.limit_in_bytes" = "24MiB"
[[processes]]
name = "p"
cgroup = "workload"
[[processes.regions]]
name = "a"
size = "32MiB"
content = "text"
[[processes.phases]]
kind = "fill"
region = "a"
"""


def _config(text: str = BASE, *overrides: str) -> dict[str, Any]:
    return reclaimlab.lower(reclaimlab.load(text, overrides))


def _render(config: dict[str, Any], p: Probe = V1_HOST) -> list[str]:
    return [pr.render("s.toml") for pr in check(config, p)]


def test_parse_crypto_keeps_non_internal_compression_algorithms() -> None:
    assert parse_crypto(CRYPTO) == ["lzo-rle", "lzo", "deflate"]


def test_parsers() -> None:
    assert host.active_swaps("Filename Type Size Used Priority\n/var/a\\040b file 10 0 -2\n") == ["/var/a b"]
    assert host.active_swaps("Filename Type Size Used Priority\n") == []
    mi = (
        "31 23 0:28 / /sys/fs/cgroup/memory rw,relatime shared:1 - cgroup cgroup rw,memory\n40 1 0:30 / /mnt/x\\040y rw - debugfs none rw\n"
    )
    ms = host.mounts(mi)
    assert [(m.point, m.fstype, "memory" in m.options) for m in ms] == [
        ("/sys/fs/cgroup/memory", "cgroup", True),
        ("/mnt/x y", "debugfs", False),
    ]


def test_a_scenario_this_host_can_run_has_no_problems() -> None:
    assert _render(_config()) == []


def test_cgroup_v2_needed_on_a_v1_host() -> None:
    text = BASE.replace("cgroup_version = 1", "cgroup_version = 2").replace('"memory.limit_in_bytes" = "24MiB"', '"memory.zswap.max" = "0"')
    assert _render(_config(text)) == [
        "s.toml: cgroups.cgroup_version: the scenario needs cgroup v2 (memory.zswap.max); this host has the cgroup v1 memory controller only"
    ]


def test_v1_needed_on_a_v2_only_host() -> None:
    v2 = replace(V1_HOST, cgroup_v1_memory=None, cgroup_v2_memory=True, cgroup_v2_memory_enabled=True)
    assert _render(_config(), v2) == [
        "s.toml: cgroups.cgroup_version: the scenario needs the cgroup v1 memory controller (memory.limit_in_bytes); "
        "this host has only the cgroup v2 memory controller"
    ]


def test_v2_processes_must_be_in_leaf_cgroups() -> None:
    v2 = replace(V1_HOST, cgroup_v2_memory=True, cgroup_v2_memory_enabled=True)
    text = (
        BASE.replace("cgroup_version = 1", "cgroup_version = 2")
        .replace('"memory.limit_in_bytes" = "24MiB"', '"memory.max" = "24MiB"')
        .replace("[[processes]]", '[cgroups.groups."workload/child"]\n"memory.high" = "20MiB"\n[[processes]]')
    )
    problems = _render(_config(text), v2)
    assert len(problems) == 1 and "processes[0].cgroup: cgroup v2 keeps processes in leaf cgroups only" in problems[0]


def test_a_compressor_the_kernel_lacks() -> None:
    assert _render(_config(BASE, "kernel.zswap.compressor=zstd")) == [
        "s.toml: kernel.zswap.compressor: 'zstd' is not available to this kernel (available: deflate, lzo, lzo-rle)"
    ]
    # Loadable on demand counts; with zswap off the compressor does not matter.
    assert _render(_config(BASE, "kernel.zswap.compressor=zstd"), replace(V1_HOST, zswap_compressors_loadable=("zstd",))) == []
    assert _render(_config(BASE, "kernel.zswap.compressor=zstd", "kernel.zswap.enabled=false")) == []


def test_no_zswap() -> None:
    assert _render(_config(), replace(V1_HOST, zswap_params={})) == [
        "s.toml: kernel.zswap.enabled: this kernel (6.18.44-fc-v657) has no zswap (no /sys/module/zswap/parameters)"
    ]


def test_zram_problems() -> None:
    text = BASE.replace('size = "64MiB"\ndevice = "ssd"', 'size = "64MiB"\nkind = "zram"\ncomp_algorithm = "zstd"')
    assert _render(_config(text)) == [
        "s.toml: machine.swap[0].comp_algorithm: 'zstd' is not available to zram on this kernel (available: lzo-rle, lzo, lz4)"
    ]
    none = replace(V1_HOST, zram_loaded=False, zram_loadable=True, zram_hot_add=False, zram_devices=(), zram_comp_algorithms=())
    assert _render(_config(text), none) == [
        "s.toml: machine.swap[0].kind: the zram module is not loaded (the lab does not load modules: `modprobe zram`)"
    ]


def test_unlimited_processes_must_not_pressure_the_host() -> None:
    text = BASE.replace('"memory.limit_in_bytes" = "24MiB"', '"memory.swappiness" = 60').replace('size = "32MiB"', 'size = "16GiB"')
    problems = _render(_config(text))
    assert len(problems) == 1 and problems[0].startswith("s.toml: processes[0]: the processes without a memory limit allocate 16 GiB")


def test_notes_name_what_differs_but_does_not_block() -> None:
    assert notes(_config(), V1_HOST) == [
        "scenario machine has 1 GiB and 2 CPUs; this host has 24 GiB and 2 CPUs: the memcg limits still apply; global reclaim will differ"
    ]
    same = replace(V1_HOST, mem_total_bytes=2**30)
    assert notes(_config(), same) == []
    # zswap is on in BASE: the host's other memcgs count for its shrink worker.
    memcgs = replace(same, host_memcgs=12)
    assert notes(_config(), memcgs) == [
        "the scenario states 0 other memcgs (machine.host_memcgs); this host has 12: zswap's shrink worker walks the host's"
    ]
    stated = _config()
    stated["machine"]["host_memcgs"] = 12
    assert notes(stated, memcgs) == []
    # Free page reporting matters to a scenario with THPs only.
    reporting = replace(same, page_reporting_order=9)
    assert notes(_config(), reporting) == []
    thp = _config()
    thp["processes"][0]["regions"][0]["thp"] = True
    assert notes(thp, reporting) == [
        "the scenario states page_reporting_order none (machine.page_reporting_order); this host's is 9: "
        "the first touch of a THP in reported memory differs"
    ]
    thp["machine"]["page_reporting_order"] = 9
    assert notes(thp, reporting) == []
    old = replace(same, kernel_release="6.12.7")
    assert notes(_config(), old) == [
        "the scenario's kernel preset is 6.18; this host runs 6.12.7: the simulator models the preset, the lab measures this kernel"
    ]


def test_machine_state_reads_without_root() -> None:
    s = machine_state()
    assert set(s) == {"swaps", "zswap", "sysctls", "cgroups", "zram", "debugfs_mounts", "tracefs"}
    assert s["swaps"].startswith("Filename")


def test_filesystem_images_are_sized_from_their_files_and_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from reclaimlab.lab import filesystems as fs

    mib = 1 << 20
    config = {
        "machine": {"filesystems": [{"name": "a", "fstype": "ext4"}, {"name": "b", "fstype": "xfs"}]},
        "processes": [
            {"regions": [{"pages": 10}, {"pages": 256 * 100, "file": 0}]},
            {"regions": [{"pages": 256, "file": 0}, {"pages": 256, "file": 1}]},
        ],
    }
    assert fs.file_bytes(config, 0) == 101 * mib
    assert fs.image_bytes(config, 0) == -(-(int(101 * mib * 1.25) + 64 * mib) // mib) * mib
    assert fs.image_bytes(config, 1) == 320 * mib  # mkfs.xfs's minimum, not 1 MiB of files
    assert fs.mkfs_argv("ext4", "/dev/loop1")[-1] == "/dev/loop1"
    monkeypatch.setattr(fs.shutil, "which", lambda name: None if name == "mkfs.xfs" else f"/sbin/{name}")
    monkeypatch.setattr(fs, "_kernel_filesystems", lambda: {"ext4", "tmpfs"})
    problems = dict(fs.check_filesystems(config, tmp_path))
    xfs = problems[("machine", "filesystems", 1, "type")]
    assert "this kernel has no xfs" in xfs or "mkfs.xfs is not installed" in xfs
    assert ("machine", "filesystems", 0, "type") not in problems
    assert fs.check_filesystems({"machine": {}, "processes": []}, tmp_path) == []
    # The lab builds disk filesystems on a loop device only (the scenario's `backing`).
    assert not any(k[-1] == "backing" for k in problems)
    config["machine"]["filesystems"][0]["backing"] = "device"
    refused = dict(fs.check_filesystems(config, tmp_path))[("machine", "filesystems", 0, "backing")]
    assert "loop device" in refused


def test_cgroup_phases_are_refused_on_a_v1_host() -> None:
    # cgroup v1 has no memory.reclaim: the host lab names the phase and the file.
    text = (
        BASE.replace("cgroup_version = 1", "cgroup_version = 2").replace('"memory.limit_in_bytes" = "24MiB"', '"memory.max" = "24MiB"')
        + '\n[[processes.phases]]\nname = "senpai"\nkind = "reclaim"\namount = "1MiB"\n'
        + '\n[[processes.phases]]\nkind = "cgroup_write"\nfile = "memory.high"\nvalue = "max"\n'
    )
    problems = _render(_config(text))
    assert problems[1:] == [
        "s.toml: processes[0].phases[1].kind: phase 'senpai' writes memory.reclaim, a cgroup v2 file; this host has the cgroup v1 "
        "memory controller only, and cgroup v1 has no memory.reclaim",
        "s.toml: processes[0].phases[2].kind: phase 'cgroup_write2' writes memory.high, a cgroup v2 file; this host has the cgroup v1 "
        "memory controller only",
    ]
    assert problems[0].startswith("s.toml: cgroups.cgroup_version: the scenario needs cgroup v2")
    # A v2 kernel without memory.reclaim (before 5.19) is named too.
    v2 = replace(V1_HOST, cgroup_v2_memory=True, cgroup_v2_memory_enabled=True, cgroup_v2_files=("memory.max", "memory.high"))
    assert _render(_config(text), v2) == [
        "s.toml: processes[0].phases[1].kind: phase 'senpai' writes memory.reclaim; this kernel (6.18.44-fc-v657) has no such file"
    ]


def test_tmpfs_files_and_create_files_pass_the_host_check() -> None:
    # The runner joins its cgroup before it makes its files, so neither tmpfs nor a
    # create_files phase is refused.
    text = BASE.replace("[kernel]", '[[machine.filesystems]]\nname = "shm"\ntype = "tmpfs"\nsize = "64MiB"\n[kernel]') + (
        '[[processes.files]]\nname = "f"\nsize = "1MiB"\ncontent = "text"\n'
    )
    problems = _render(_config(text))
    assert not any("tmpfs" in pr or "filesystems" in pr for pr in problems), problems
    created = text + '\n[[processes.phases]]\nname = "c"\nkind = "create_files"\nfiles = 2\nsize = "64KiB"\ncontent = "text"\n'
    assert not any("create_files" in pr for pr in _render(_config(created)))
