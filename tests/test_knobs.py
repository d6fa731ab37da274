"""Kernel knobs end to end from the core's one declaration: the scenario model, the lowering,
the allocator keys (zswap's zpool, a zram device's allocator) and the lab's refusal of what the
host kernel lacks."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

import reclaimlab
from conftest import MINIMAL
from lab.test_lab_probe import BASE, V1_HOST
from reclaimlab import native
from reclaimlab.errors import ScenarioError
from reclaimlab.lab import knobs as lab_knobs
from reclaimlab.lab.probe import check
from reclaimlab.scenario import load


def _problems(text: str, *overrides: str) -> list[str]:
    with pytest.raises(ScenarioError) as e:
        load(text, overrides)
    return [p.render("").split(" (from --set ")[0] for p in e.value.problems]


def test_every_declared_knob_is_a_scenario_key_with_the_kernels_default() -> None:
    s = load(MINIMAL)
    for k in native.knobs():
        assert s.kernel.knob_value(k) == k.default, k.key
    lowered = reclaimlab.lower(s)
    assert {f"kernel.{sec}.{f}" for sec in native.knob_sections() for f in lowered["kernel"][sec]} == {k.lowered for k in native.knobs()}


def test_knob_ranges_and_choices_come_from_the_core() -> None:
    assert _problems(MINIMAL, "kernel.vm.page-cluster=32") == [": kernel.vm.page-cluster: expected an integer in 0..31; got 32"]
    assert _problems(MINIMAL, "kernel.zswap.zpool=z3fold") == [": kernel.zswap.zpool: expected one of 'zsmalloc', 'zbud'; got 'z3fold'"]


def test_zbud_must_exist_in_the_preset() -> None:
    assert _problems(MINIMAL, "kernel.zswap.zpool=zbud") == [
        ": kernel.zswap.zpool: zbud does not exist in kernel 6.18 (kernel.version = '6.18'); it exists in 6.1, 6.8, 6.10, 6.12"
    ]
    assert load(MINIMAL, ["kernel.version=6.12", "kernel.zswap.zpool=zbud"]).kernel.zswap.zpool == "zbud"


ZSWAP_RUN = (
    MINIMAL.replace('memory = "256MiB"', 'memory = "256MiB"\n[kernel]\nversion = "6.12"\nzswap.enabled = true')
    .replace('name = "p"\n', 'name = "p"\ncgroup = "w"\n')
    .replace("[[processes]]", '[cgroups]\n[cgroups.groups.w]\n"memory.limit_in_bytes" = "2MiB"\n[[processes]]')
    .replace('size = "1MiB"', 'size = "4MiB"')
)


@pytest.mark.native
def test_zswap_zpool_zbud_runs_the_scenario_through_zbud(real_core: Any) -> None:
    """zbud keeps at most two objects per pool page, zsmalloc packs them by size class: the same
    stores take more pool pages in zbud."""
    runs = {z: reclaimlab.run(ZSWAP_RUN, [f"kernel.zswap.zpool={z}"]).counters for z in ("zsmalloc", "zbud")}
    assert runs["zbud"]["vmstat.zswpout"] == runs["zsmalloc"]["vmstat.zswpout"] > 0
    assert runs["zbud"]["zswap.pool_total_size"] > runs["zsmalloc"]["zswap.pool_total_size"]


ZRAM = MINIMAL.replace('size = "256MiB"\ndevice = "ssd"', 'size = "256MiB"\nkind = "zram"')


def test_the_zram_allocator_key() -> None:
    assert load(ZRAM, ["machine.swap[0].allocator=zsmalloc"]).machine.swap[0].allocator == "zsmalloc"
    assert reclaimlab.lower(load(ZRAM, ["machine.swap[0].allocator=zsmalloc"]))["machine"]["swap"][0]["allocator"] == "zsmalloc"
    assert "allocator" not in reclaimlab.lower(load(ZRAM))["machine"]["swap"][0]  # unset: lowered as before the key existed
    assert _problems(MINIMAL, "machine.swap[0].allocator=zsmalloc") == [
        ': machine.swap[0].allocator: only a kind = "zram" device has an allocator; this one is kind = "file"'
    ]


@pytest.mark.native
def test_zram_allocates_from_zsmalloc_only(real_core: Any) -> None:
    with pytest.raises(ScenarioError) as e:
        reclaimlab.run(ZRAM, ["kernel.version=6.12", "machine.swap[0].allocator=zbud"])
    msg = str(e.value)
    assert "machine.swap[0].allocator" in msg and "mainline zram has only zsmalloc" in msg
    assert 'kernel.switches."zram.zpool_api"' in msg, "the message names the switch that allows it"


ZPOOL_API = ["kernel.version=6.12", "kernel.switches.zram.zpool_api=true"]
#: 24 MiB of text through 16 MiB of RAM: zram is the only swap and gets used.
ZRAM_PRESSURE = ZRAM.replace('memory = "256MiB"', 'memory = "16MiB"').replace('size = "1MiB"', 'size = "24MiB"')


@pytest.mark.native
def test_zram_on_zbud_under_seed_004s_switch(real_core: Any) -> None:
    runs = {a: reclaimlab.run(ZRAM_PRESSURE, [*ZPOOL_API, f"machine.swap[0].allocator={a}"]).counters for a in ("zsmalloc", "zbud")}
    # Pool pages per stored byte: zbud's two-per-page pool costs more than zsmalloc's classes
    # (and, taking more of the 16 MiB, it pushes more pages out).
    density = {a: r["zram0.mm_stat.mem_used_total"] / r["zram0.mm_stat.orig_data_size"] for a, r in runs.items()}
    assert density["zbud"] > 1.2 * density["zsmalloc"] > 0, density
    assert runs["zbud"]["zram0.mm_stat.pages_compacted"] == 0
    # zbud is gone in 6.18: the switch does not bring it back.
    with pytest.raises(ScenarioError) as e:
        reclaimlab.run(ZRAM, ["kernel.version=6.18", "kernel.switches.zram.zpool_api=true", "machine.swap[0].allocator=zbud"])
    assert "machine.swap[0].allocator" in str(e.value) and "does not exist in kernel 6.18" in str(e.value)


def _config(*overrides: str) -> dict[str, Any]:
    return reclaimlab.lower(reclaimlab.load(BASE, overrides))


def test_lab_writes_every_knob_from_its_declared_file_enabled_last() -> None:
    writes = [(k.kernel_file, v) for k, v in lab_knobs.sysfs_writes(_config("kernel.zswap.max_pool_percent=30"))]
    zswap = [w for w in writes if w[0].startswith("/sys/module/zswap/")]
    assert zswap[-1] == ("/sys/module/zswap/parameters/enabled", "Y"), "enabled last within its section"
    assert ("/sys/module/zswap/parameters/max_pool_percent", "30") in writes
    # zpool unset: the kernel keeps its own default allocator (zbud in 6.1, zsmalloc since 6.7)
    assert not any(f == "/sys/module/zswap/parameters/zpool" for f, _ in writes)
    set_zpool = [(k.kernel_file, v) for k, v in lab_knobs.sysfs_writes(_config("kernel.zswap.zpool=zsmalloc"))]
    assert ("/sys/module/zswap/parameters/zpool", "zsmalloc") in set_zpool
    off = [(k.key, v) for k, v in lab_knobs.sysfs_writes(_config("kernel.zswap.enabled=false")) if k.section == "zswap"]
    assert off == [("kernel.zswap.enabled", "N")]
    sysctls = {k.kernel_file: v for k, v in lab_knobs.sysctl_writes(_config("kernel.vm.page-cluster=0"))}
    assert sysctls["/proc/sys/vm/page-cluster"] == "0" and "/proc/sys/vm/min_free_kbytes" not in sysctls


def test_lab_refuses_zbud_on_a_kernel_without_zpool() -> None:
    """6.18 has no zswap zpool file: zbud is refused naming the key; zsmalloc (what 6.18 runs)
    is fine."""
    assert "zpool" not in V1_HOST.zswap_params
    config = _config("kernel.version=6.12", "kernel.zswap.zpool=zbud")
    assert [p.render("s.toml") for p in check(config, V1_HOST)] == [
        "s.toml: kernel.zswap.zpool: this kernel (6.18.44-fc-v657) has no /sys/module/zswap/parameters/zpool: "
        "the lab cannot set zpool = zbud (it would run the kernel's own zpool instead)"
    ]
    assert check(_config("kernel.version=6.12"), V1_HOST) == []
    older = replace(V1_HOST, zswap_params={**V1_HOST.zswap_params, "zpool": "zbud"})
    assert check(config, older) == []


def test_lab_refuses_a_non_default_sysctl_the_kernel_lacks() -> None:
    host = replace(V1_HOST, sysctls={k: v for k, v in V1_HOST.sysctls.items() if k != "vm.watermark_scale_factor"})
    assert check(_config(), host) == []  # the default: nothing to write that matters
    assert [p.render("") for p in check(_config("kernel.vm.watermark_scale_factor=100"), host)] == [
        ": kernel.vm.watermark_scale_factor: this kernel (6.18.44-fc-v657) has no sysctl vm.watermark_scale_factor: "
        "the lab cannot set watermark_scale_factor = 100 (it would run the kernel's own watermark_scale_factor instead)"
    ]


def test_lab_refuses_another_zram_allocator() -> None:
    text = BASE.replace('size = "64MiB"\ndevice = "ssd"', 'size = "64MiB"\nkind = "zram"')
    config = reclaimlab.lower(reclaimlab.load(text, ["kernel.version=6.12", "machine.swap[0].allocator=zbud"]))
    assert [p.render("") for p in check(config, V1_HOST)] == [
        ": machine.swap[0].allocator: zram on a real kernel allocates from zsmalloc only (no sysfs file selects zbud)"
    ]


@pytest.mark.parametrize(
    ("now", "want", "same"),
    [
        ("Y", "Y", True),
        ("1", "Y", True),
        ("true", "1", True),
        ("N", "Y", False),
        ("20", "20", True),
        ("always [madvise] never", "madvise", True),
        ("always [madvise] never", "always", False),
        ("[always] defer defer+madvise madvise never", "always", True),
    ],
)
def test_knob_file_values_compare_as_the_kernel_means_them(now: str, want: str, same: bool) -> None:
    assert lab_knobs.same(now, want) is same


def test_a_bracketed_choice_file_restores_to_its_choice() -> None:
    # What the journal keeps as the old value, and writes back: the choice, not the list.
    assert lab_knobs.current("always [madvise] never\n") == "madvise"
    assert lab_knobs.current("20\n") == "20"


def test_thp_region_is_lowered_only_when_set() -> None:
    # Unset: the lowered region has no key (earlier configs and their hashes stay the same).
    plain = reclaimlab.lower(reclaimlab.load(BASE))
    assert all("thp" not in r for p in plain["processes"] for r in p["regions"])
    text = BASE.replace('size = "32MiB"\ncontent = "text"', 'size = "32MiB"\ncontent = "text"\nthp = true')
    assert text != BASE
    marked = reclaimlab.lower(reclaimlab.load(text))
    assert marked["processes"][0]["regions"][0]["thp"] is True


COMPACT = """
[[processes.phases]]
kind = "random"
region = "a"
count = 20000
[[processes.phases]]
name = "compact"
kind = "zram_write"
file = "compact"
"""


def test_zram_write_phases_name_a_zram_device() -> None:
    one = reclaimlab.lower(load(ZRAM + COMPACT))
    assert one["processes"][0]["phases"][2]["phase"] == {"kind": "zram_write", "device": 0, "file": "compact"}
    two = ZRAM.replace(
        '[[machine.swap]]\nsize = "256MiB"',
        '[[machine.swap]]\nname = "z0"\nsize = "16MiB"\nkind = "zram"\n[[machine.swap]]\nname = "z1"\nsize = "256MiB"',
        1,
    )
    named = reclaimlab.lower(load(two + COMPACT + 'device = "z1"\n'))
    assert named["processes"][0]["phases"][2]["phase"]["device"] == 1
    assert _problems(two + COMPACT) == [
        ": processes[0].phases[2].device: a zram_write phase writes a zram device's compact; the machine has 2 zram devices ('z0', 'z1'): name one"
    ]
    assert _problems(MINIMAL + COMPACT) == [
        ': processes[0].phases[2].device: a zram_write phase writes a zram device\'s compact; the machine has no kind = "zram" swap device'
    ]
    assert _problems(two + COMPACT + 'device = "z2"\n') == [
        ": processes[0].phases[2].device: expected the name of a kind = \"zram\" swap device (one of 'z0', 'z1'); got 'z2'"
    ]
    assert _problems(ZRAM + COMPACT + 'file = "reset"\n') != []


def test_the_host_lab_refuses_zram_writes() -> None:
    from lab.test_lab_probe import _render

    text = BASE.replace('size = "64MiB"\ndevice = "ssd"', 'size = "64MiB"\nkind = "zram"') + COMPACT
    assert _render(reclaimlab.lower(load(text))) == [
        "s.toml: processes[0].phases[2].kind: zram_write phases run in the simulator and the VM lab (--backend vm) only"
    ]


#: 24 MiB of text through a v1 limit of 12 MiB: memcg reclaim, which never runs the
#: pool's compaction shrinker (it is not memcg-aware), so only the write compacts.
ZRAM_LIMITED = ZRAM.replace('size = "1MiB"', 'size = "24MiB"').replace(
    '[[processes]]\nname = "p"',
    '[cgroups]\ncgroup_version = 1\n[cgroups.groups.w]\n"memory.limit_in_bytes" = "12MiB"\n[[processes]]\nname = "p"\ncgroup = "w"',
)


@pytest.mark.native
def test_a_compact_write_counts_pages_compacted(real_core: Any) -> None:
    before = reclaimlab.run(ZRAM_LIMITED + COMPACT.split("[[processes.phases]]\nname")[0], ["kernel.version=6.12"]).counters
    after = reclaimlab.run(ZRAM_LIMITED + COMPACT, ["kernel.version=6.12"]).counters
    freed = after["zram0.mm_stat.pages_compacted"]
    assert before["zram0.mm_stat.pages_compacted"] == 0 < freed
    assert after["zram0.mm_stat.mem_used_total"] == before["zram0.mm_stat.mem_used_total"] - 4096 * freed
    assert after["zram0.mm_stat.orig_data_size"] == before["zram0.mm_stat.orig_data_size"]
