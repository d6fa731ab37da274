"""Loading and validation: every error names the file, the key path and what was expected."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import reclaimlab
from conftest import MINIMAL, THREE_REGIONS
from reclaimlab import ScenarioError, load
from reclaimlab.scenario import DEVICE_PRESETS, RandomPhase

Write = Callable[..., Path]


def problems(write: Write, text: str, overrides: tuple[str, ...] = ()) -> list[str]:
    path = write(text)
    with pytest.raises(ScenarioError) as info:
        load(path, overrides)
    lines = str(info.value).splitlines()
    assert all(line.startswith(f"{path}: ") for line in lines), lines
    assert len(lines) == len(info.value.problems)
    return [line[len(f"{path}: ") :] for line in lines]


def one(write: Write, text: str, overrides: tuple[str, ...] = ()) -> str:
    found = problems(write, text, overrides)
    assert len(found) == 1, found
    return found[0]


# --- loading -------------------------------------------------------------------------------


def test_three_regions_loads() -> None:
    s = load(THREE_REGIONS)
    assert s.name == "three-regions"
    assert s.seed == 42
    assert s.cgroups.cgroup_version == 1
    assert [r.size for r in s.processes[0].regions] == [64 << 20] * 3
    assert [c.name for c in s.compare.configs] == ["no-limit", "swap-only", "zswap", "zswap+shrinker"]  # type: ignore[union-attr]
    assert s.path == str(THREE_REGIONS)
    assert s.sha256 is not None and len(s.sha256) == 64


def test_load_from_string_and_defaults() -> None:
    s = load(MINIMAL)
    assert s.file == "<string>"
    assert s.name == "scenario"
    assert s.seed == 1
    assert s.machine.cpus == 1
    assert s.kernel.version == "6.18"
    assert s.kernel.zswap.enabled is False
    assert s.kernel.zswap.compressor == "lzo"
    assert s.kernel.zswap.max_pool_percent == 20
    assert s.kernel.zswap.accept_threshold_percent == 90
    assert s.kernel.vm.swappiness == 60
    assert s.kernel.vm.page_cluster == 3
    assert s.kernel.vm.min_free_kbytes is None
    assert s.kernel.vm.watermark_scale_factor == 10
    assert s.cgroups.cgroup_version == 1
    assert s.processes[0].cgroup == "/"
    assert s.processes[0].regions[0].variants == 256


def test_reclaimlab_load_is_scenario_load() -> None:
    assert reclaimlab.load is load


def test_name_defaults_to_file_stem(write: Write) -> None:
    assert load(write(MINIMAL, "my-test.toml")).name == "my-test"
    assert load(write('name = "x"\n' + MINIMAL, "y.toml")).name == "x"


def test_host_memory_and_cpus() -> None:
    s = load(MINIMAL.replace('memory = "256MiB"', 'memory = "host"\ncpus = "host"'))
    assert s.machine.memory > 0 and s.machine.memory % 1024 == 0
    assert s.machine.cpus >= 1


def test_dotted_cgroup_keys_unquoted_mean_file_names() -> None:
    text = MINIMAL.replace(
        "[[processes]]", '[cgroups]\ncgroup_version = 2\n[cgroups.groups.w]\nmemory.high = "1GiB"\nmemory.zswap.max = 0\n[[processes]]'
    )
    files = load(text).cgroups.groups["w"]
    assert files.memory_high == 1 << 30
    assert files.memory_zswap_max == 0


def test_missing_file() -> None:
    with pytest.raises(ScenarioError, match=r"^nope\.toml: cannot read the scenario"):
        load("nope.toml")


def test_invalid_toml(write: Write) -> None:
    msg = one(write, "schema_version = \n")
    assert msg.startswith("invalid TOML:")


# --- structural errors -------------------------------------------------------------------


def test_schema_version_required_and_checked(write: Write) -> None:
    assert one(write, MINIMAL.replace("schema_version = 1\n", "")) == "schema_version: required key is missing"
    assert one(write, MINIMAL.replace("schema_version = 1", "schema_version = 2")) == (
        "schema_version: expected 1 (the only scenario format version); got 2"
    )


def test_unknown_keys_everywhere(write: Write) -> None:
    text = (
        MINIMAL.replace("[machine]", "colour = 1\n[machine]\nmemroy = 1")
        .replace('device = "ssd"', 'device = { preset = "ssd", latency = "1ms" }')
        .replace('content = "text"', 'content = "text"\nsize_bytes = 5')
        .replace('region = "a"', 'region = "a"\nregions = ["a"]')
    )
    found = problems(write, text)
    assert (
        "colour: unknown key; expected one of: schema_version, name, description, seed, max_time, trace, machine, kernel, cgroups, processes, costs, compare, report, lab, engine"
        in found
    )
    assert any(f.startswith("machine.memroy: unknown key (did you mean 'memory'?); expected one of: memory, cpus, swap") for f in found)
    assert any(f.startswith("machine.swap[0].device.latency: unknown key") and "read_latency" in f for f in found)
    assert any(f.startswith("processes[0].regions[0].size_bytes: unknown key") for f in found)
    assert "processes[0].phases[0].regions: unknown key (did you mean 'region'?); expected one of: name, after, kind, region" in found
    assert len(found) == 5


def test_all_problems_reported_together(write: Write) -> None:
    text = MINIMAL.replace('memory = "256MiB"', 'memory = "lots"').replace('content = "text"', 'content = "txet"')
    found = problems(write, text)
    assert len(found) == 2
    assert found[0].startswith("machine.memory: expected a size")
    assert found[1].startswith('processes[0].regions[0].content: bad page content "txet": unknown content class; expected one of')


def test_type_errors(write: Write) -> None:
    text = MINIMAL.replace("[machine]", 'seed = "x"\n[kernel]\nzswap.enabled = "yes"\n[machine]')
    found = problems(write, text)
    assert "seed: expected an integer; got 'x'" in found
    assert "kernel.zswap.enabled: expected true or false; got 'yes'" in found


def test_ranges(write: Write) -> None:
    text = MINIMAL.replace(
        "[machine]",
        "[kernel]\nvm.swappiness = 201\nvm.page-cluster = 32\nzswap.max_pool_percent = 101\nvm.watermark_scale_factor = 0\n[machine]",
    )
    found = problems(write, text)
    assert "kernel.vm.swappiness: expected an integer in 0..200; got 201" in found
    assert "kernel.vm.page-cluster: expected an integer in 0..31; got 32" in found
    assert "kernel.zswap.max_pool_percent: expected an integer in 0..100; got 101" in found
    assert "kernel.vm.watermark_scale_factor: expected an integer in 1..3000; got 0" in found


def test_page_cluster_spelling_hint(write: Write) -> None:
    msg = one(write, MINIMAL.replace("[machine]", "[kernel]\nvm.page_cluster = 3\n[machine]"))
    assert msg.startswith("kernel.vm.page_cluster: unknown key (the sysctl is spelled page-cluster)")


def test_literal_choice(write: Write) -> None:
    msg = one(write, MINIMAL.replace('size = "256MiB"', 'size = "256MiB"\nkind = "flie"'))
    assert msg == "machine.swap[0].kind: expected one of 'file', 'zram'; got 'flie'"


def test_device_preset_name(write: Write) -> None:
    msg = one(write, MINIMAL.replace('device = "ssd"', 'device = "sdd"'))
    assert msg == "machine.swap[0].device: expected one of 'hdd', 'ssd', 'nvme', 'virtio-disk', 'cloud-disk', 'lab-loop'; got 'sdd'"


def test_phase_kind(write: Write) -> None:
    msg = one(write, MINIMAL.replace('kind = "fill"', 'kind = "fil"'))
    assert (
        msg
        == "processes[0].phases[0].kind: expected one of 'fill', 'sequential', 'random', 'trace', 'read', 'mmap', 'write', 'create_files', 'sleep', 'reclaim', 'cgroup_write', 'cgroup_open', 'cgroup_read', 'cgroup_close', 'zram_write', 'kernel_alloc', 'exit'; got 'fil'"
    )


def test_phase_kind_missing(write: Write) -> None:
    msg = one(write, MINIMAL.replace('kind = "fill"\n', ""))
    assert (
        msg
        == "processes[0].phases[0].kind: required key is missing; expected one of 'fill', 'sequential', 'random', 'trace', 'read', 'mmap', 'write', 'create_files', 'sleep', 'reclaim', 'cgroup_write', 'cgroup_open', 'cgroup_read', 'cgroup_close', 'zram_write', 'kernel_alloc', 'exit'"
    )


def test_dist_name(write: Write) -> None:
    text = MINIMAL.replace('kind = "fill"\nregion = "a"', 'kind = "random"\nregion = "a"\ncount = 10\ndist = "unifrom"')
    assert one(write, text) == "processes[0].phases[0].dist: expected one of 'uniform', 'hot_cold', 'zipf'; got 'unifrom'"
    text = MINIMAL.replace('kind = "fill"\nregion = "a"', 'kind = "random"\nregion = "a"\ncount = 10\ndist = { kind = "zipff", theta = 1 }')
    assert one(write, text) == "processes[0].phases[0].dist.kind: expected one of 'uniform', 'hot_cold', 'zipf'; got 'zipff'"
    text = MINIMAL.replace(
        'kind = "fill"\nregion = "a"', 'kind = "random"\nregion = "a"\ncount = 10\ndist = { kind = "hot_cold", hot_percent = 10 }'
    )
    assert one(write, text) == "processes[0].phases[0].dist.hot_access_percent: required key is missing"
    text = MINIMAL.replace('kind = "fill"\nregion = "a"', 'kind = "random"\nregion = "a"\ncount = 10\ndist = "zipf"')
    assert one(write, text) == "processes[0].phases[0].dist: missing required key 'theta'"


def test_dist_forms() -> None:
    for dist, kind in [
        ('"uniform"', "uniform"),
        ('{ kind = "zipf", theta = 1 }', "zipf"),
        ('{ kind = "hot_cold", hot_percent = 10, hot_access_percent = 90 }', "hot_cold"),
    ]:
        s = load(MINIMAL.replace('kind = "fill"\nregion = "a"', f'kind = "random"\nregion = "a"\ncount = 10\ndist = {dist}'))
        phase = s.processes[0].phases[0]
        assert isinstance(phase, RandomPhase)
        assert phase.dist.kind == kind


def test_content_error_path(write: Write) -> None:
    msg = one(write, MINIMAL.replace('content = "text"', 'content = "same:300"'))
    # The native core's parser (content.rs) says what is wrong and what it expected.
    assert msg.startswith('processes[0].regions[0].content: bad page content "same:300": BYTE is larger than 255; expected one of `zero`')


def test_sizes_must_be_positive(write: Write) -> None:
    msg = one(write, MINIMAL.replace('size = "1MiB"', "size = 0"))
    assert msg == "processes[0].regions[0].size: expected a value > 0; got 0"


def test_max_time_under_compare_hint(write: Write) -> None:
    msg = one(write, MINIMAL + '[compare]\nconfigs = [{ name = "a" }]\nmax_time = "10s"\n')
    assert msg.startswith("compare.max_time: unknown key (max_time is a top-level key")


# --- checks across keys --------------------------------------------------------------------


def test_phase_region_must_exist(write: Write) -> None:
    msg = one(write, MINIMAL.replace('region = "a"', 'region = "b"'))
    assert msg == "processes[0].phases[0].region: expected the name of a region of process 'p' (one of 'a'); got 'b'"


def test_phase_regions_list_checked(write: Write) -> None:
    text = MINIMAL.replace('kind = "fill"\nregion = "a"', 'kind = "sequential"\nregions = ["a", "c", "a"]')
    found = problems(write, text)
    assert found == [
        "processes[0].phases[0].regions[1]: expected the name of a region of process 'p' (one of 'a'); got 'c'",
        "processes[0].phases[0].regions[2]: region 'a' is listed twice",
    ]


def test_random_needs_exactly_one_of_count_or_duration(write: Write) -> None:
    base = MINIMAL.replace('kind = "fill"\nregion = "a"', 'kind = "random"\nregions = ["a"]\n{}')
    assert one(write, base.format("")) == "processes[0].phases[0]: expected exactly one of count or duration; got neither"
    assert (
        one(write, base.format('count = 5\nduration = "1s"'))
        == "processes[0].phases[0]: expected exactly one of count or duration; got both"
    )


def test_region_or_regions(write: Write) -> None:
    text = MINIMAL.replace('kind = "fill"\nregion = "a"', 'kind = "sequential"')
    assert one(write, text) == "processes[0].phases[0].regions: required key is missing (or give region = NAME)"
    text = MINIMAL.replace('kind = "fill"\nregion = "a"', 'kind = "sequential"\nregion = "a"\nregions = ["a"]')
    assert one(write, text) == "processes[0].phases[0]: expected one of region or regions, not both"


def test_cgroup_reference(write: Write) -> None:
    msg = one(write, MINIMAL.replace('name = "p"', 'name = "p"\ncgroup = "workload"'))
    assert msg == "processes[0].cgroup: expected a cgroup under [cgroups.groups] or '/' (one of '/'); got 'workload'"


def test_implicit_parent_cgroup_can_be_referenced() -> None:
    text = MINIMAL.replace("[[processes]]", '[cgroups]\ncgroup_version = 2\n[cgroups.groups."a/b"]\n"memory.max" = "1G"\n[[processes]]')
    text = text.replace('name = "p"', 'name = "p"\ncgroup = "a"')
    assert load(text).processes[0].cgroup_path() == "/a"


def test_v2_keys_under_v1(write: Write) -> None:
    text = MINIMAL.replace("[[processes]]", '[cgroups.groups.w]\n"memory.high" = "1G"\n"memory.zswap.writeback" = 0\n[[processes]]')
    assert problems(write, text) == [
        'cgroups.groups.w."memory.high": memory.high needs cgroup_version = 2; this scenario has cgroup_version = 1',
        'cgroups.groups.w."memory.zswap.writeback": memory.zswap.writeback needs cgroup_version = 2; this scenario has cgroup_version = 1',
    ]


def test_v1_keys_under_v2(write: Write) -> None:
    text = MINIMAL.replace(
        "[[processes]]",
        '[cgroups]\ncgroup_version = 2\n[cgroups.groups.w]\n"memory.limit_in_bytes" = "1G"\n"memory.swappiness" = 10\n[[processes]]',
    )
    assert problems(write, text) == [
        'cgroups.groups.w."memory.limit_in_bytes": memory.limit_in_bytes needs cgroup_version = 1; this scenario has cgroup_version = 2',
        'cgroups.groups.w."memory.swappiness": memory.swappiness needs cgroup_version = 1; this scenario has cgroup_version = 2',
    ]


def test_cgroup_file_values(write: Write) -> None:
    text = MINIMAL.replace(
        "[[processes]]",
        '[cgroups]\ncgroup_version = 2\n[cgroups.groups.w]\n"memory.high" = "lots"\n"memory.zswap.writeback" = 2\n[[processes]]',
    )
    assert problems(write, text) == [
        "cgroups.groups.w.\"memory.high\": expected a size (like '1GiB', int bytes) or 'max'; got 'lots'",
        'cgroups.groups.w."memory.zswap.writeback": expected 0 or 1 (or false/true); got 2',
    ]


def test_cgroup_group_paths(write: Write) -> None:
    text = MINIMAL.replace("[[processes]]", '[cgroups.groups."/abs"]\n[cgroups.groups."a//b"]\n[[processes]]')
    assert problems(write, text) == [
        "cgroups.groups.\"/abs\": expected a path relative to the root like 'workload' or 'a/b'; got '/abs'",
        "cgroups.groups.\"a//b\": expected a path relative to the root like 'workload' or 'a/b'; got 'a//b'",
    ]


def test_comp_algorithm_on_a_file(write: Write) -> None:
    msg = one(write, MINIMAL.replace('device = "ssd"', 'device = "ssd"\ncomp_algorithm = "lz4"'))
    assert msg == 'machine.swap[0].comp_algorithm: only a kind = "zram" device has a comp_algorithm; this one is kind = "file"'


def test_zram_comp_algorithm(write: Write) -> None:
    text = MINIMAL.replace('device = "ssd"', 'device = "ssd"\n[[machine.swap]]\nkind = "zram"\nsize = "1G"\ncomp_algorithm = "lz5"')
    assert one(write, text) == "machine.swap[1].comp_algorithm: expected one of 'lzo', 'lzo-rle', 'lz4', 'zstd', 'deflate'; got 'lz5'"


def test_file_swap_needs_a_device(write: Write) -> None:
    msg = one(write, MINIMAL.replace('device = "ssd"\n', ""))
    assert msg.startswith("machine.swap[0].device: required key is missing: a swap file needs a device")


def test_device_table_without_preset_needs_all_figures(write: Write) -> None:
    msg = one(write, MINIMAL.replace('device = "ssd"', 'device = { rotational = false, read_latency = "1ms" }'))
    assert msg == (
        "machine.swap[0].device: a device without a preset needs all of rotational, read_latency, write_latency, "
        "read_bandwidth, write_bandwidth; missing write_latency, read_bandwidth, write_bandwidth"
    )


def test_device_table_values(write: Write) -> None:
    msg = one(write, MINIMAL.replace('device = "ssd"', 'device = { preset = "ssd", read_bandwidth = "fast" }'))
    assert msg.startswith("machine.swap[0].device.read_bandwidth: expected a bandwidth")


def test_kernel_version(write: Write) -> None:
    msg = one(write, MINIMAL.replace("[machine]", '[kernel]\nversion = "5.4"\n[machine]'))
    assert msg == "kernel.version: expected one of '6.12', '6.18'; got '5.4'"


def test_zswap_compressor(write: Write) -> None:
    msg = one(write, MINIMAL.replace("[machine]", '[kernel]\nzswap.compressor = "lz5"\n[machine]'))
    assert msg == "kernel.zswap.compressor: expected one of 'lzo', 'lzo-rle', 'lz4', 'zstd', 'deflate'; got 'lz5'"


def test_switches(write: Write) -> None:
    ok = load(MINIMAL.replace("[machine]", '[kernel.switches]\nzswap.incompressible = "reject"\n[machine]'))
    assert ok.kernel.switches == {"zswap.incompressible": "reject"}
    text = MINIMAL.replace("[machine]", '[kernel.switches]\nzswap.incompressable = "reject"\nzswap.same_filled = true\n[machine]')
    assert problems(write, text) == [
        "kernel.switches.\"zswap.incompressable\": unknown switch (did you mean 'zswap.incompressible'?); "
        "expected one of: zswap.incompressible, zswap.same_filled",
        "kernel.switches.\"zswap.same_filled\": expected a string (like the preset's 'zeromap'); got true",
    ]


def test_switch_values_must_be_scalars(write: Write) -> None:
    msg = one(write, MINIMAL.replace("[machine]", "[kernel.switches]\nx = [1]\n[machine]"))
    assert msg == "kernel.switches.x: expected a boolean, integer, float or string; got an array"


def test_costs(write: Write) -> None:
    assert load(MINIMAL + "[costs]\naccess_ns = 200\n").costs == {"access_ns": 200}
    assert one(write, MINIMAL + "[costs]\naccess_nss = 200\n").startswith(
        "costs.access_nss: unknown time-model parameter (did you mean 'access_ns'?); expected one of: access_ns, fault_ns"
    )
    assert one(write, MINIMAL + "[costs]\naccess_ns = -1\n") == "costs.access_ns: expected an integer >= 0; got -1"
    assert one(write, MINIMAL + '[costs]\naccess_ns = "1us"\n') == "costs.access_ns: expected an integer; got '1us'"


def test_regions_total_size(write: Write) -> None:
    text = MINIMAL.split("[[processes.regions]]")[0]
    assert one(write, text) == "processes: expected regions with a total size > 0; no process has a region or file"
    no_processes = "processes = []\n" + MINIMAL.split("[[processes]]")[0]
    assert one(write, no_processes) == "processes: expected at least one [[processes]] entry"
    assert one(write, MINIMAL.split("[[processes]]")[0]) == "processes: required key is missing"


def test_duplicate_names(write: Write) -> None:
    text = MINIMAL + '[[processes]]\nname = "p"\n'
    assert one(write, text) == "processes[1].name: duplicate process name 'p' (also processes[0])"
    text = MINIMAL.replace(
        '[[processes.phases]]\nkind = "fill"\nregion = "a"',
        '[[processes.phases]]\nkind = "exit"\n[[processes.phases]]\nkind = "exit"\nname = "exit0"',
    )
    assert one(write, text) == "processes[0].phases[1].name: duplicate phase name 'exit0' (also processes[0].phases[0])"


def test_compare_configs_are_validated(write: Write) -> None:
    text = MINIMAL + (
        '[compare]\nconfigs = [\n  { name = "a", set = { "kernel.zswap.enabeld" = true } },\n'
        '  { name = "b", set = { "kernel.vm.swappiness" = 500 } },\n  { name = "b" },\n]\n'
    )
    assert problems(write, text) == [
        "compare.configs[2].name: duplicate configuration name 'b' (also compare.configs[1])",
    ]
    text = text.replace('  { name = "b" },\n', "")
    assert problems(write, text) == [
        "compare.configs[0].set.\"kernel.zswap.enabeld\": unknown key 'enabeld' under kernel.zswap (did you mean 'enabled'?); expected one of: "
        "enabled, compressor, max_pool_percent, accept_threshold_percent, shrinker_enabled, zpool",
        "kernel.vm.swappiness: expected an integer in 0..200; got 500 (from compare config 'b')",
    ]


def test_compare_set_tables_may_nest() -> None:
    s = load(MINIMAL + '[compare]\nconfigs = [{ name = "a", set = { kernel.zswap.enabled = true } }]\n')
    assert s.compare is not None
    assert s.compare.configs[0].set == {"kernel.zswap.enabled": True}


def test_error_is_picklable_and_has_problems(write: Write) -> None:
    import pickle

    path = write(MINIMAL.replace("schema_version = 1", "schema_version = 3"))
    with pytest.raises(ScenarioError) as info:
        load(path)
    again = pickle.loads(pickle.dumps(info.value))
    assert str(again) == str(info.value)
    assert info.value.problems[0].path == ("schema_version",)


def test_device_presets_documented() -> None:
    doc = (THREE_REGIONS.parents[1] / "docs" / "scenario.md").read_text(encoding="utf-8")
    for name in DEVICE_PRESETS:
        assert f"`{name}`" in doc


def test_odd_types(write: Write) -> None:
    assert (
        one(write, MINIMAL.replace("[machine]", "[cgroups]\ncgroup_version = true\n[machine]"))
        == "cgroups.cgroup_version: expected an integer; got true"
    )
    assert (
        one(write, MINIMAL.replace("[machine]", "[cgroups]\ncgroup_version = 3\n[machine]"))
        == "cgroups.cgroup_version: expected 1 or 2; got 3"
    )
    assert one(write, MINIMAL.replace('kind = "fill"', "kind = 5")) == (
        "processes[0].phases[0].kind: expected one of 'fill', 'sequential', 'random', 'trace', 'read', 'mmap', 'write', 'create_files', 'sleep', 'reclaim', 'cgroup_write', 'cgroup_open', 'cgroup_read', 'cgroup_close', 'zram_write', 'kernel_alloc', 'exit'; got 5"
    )
    assert one(write, MINIMAL.replace('device = "ssd"', "device = 5")) == "machine.swap[0].device: expected a table; got 5"
    assert one(write, "compare = 5\n" + MINIMAL) == "compare: expected a table; got 5"
    text = MINIMAL.replace('region = "a"', 'region = "a"\ndist = 5').replace('kind = "fill"', 'kind = "random"\ncount = 1')
    assert one(write, text) == "processes[0].phases[0].dist: expected a table; got 5"


# --- cgroup phases: reclaim, cgroup_write -----------------------------------------------------

V2_PROC = MINIMAL.replace(
    '[[processes]]\nname = "p"', '[cgroups]\ncgroup_version = 2\n[cgroups.groups.w]\n[[processes]]\nname = "p"\ncgroup = "w"'
)


def _with_phase(phase: str, base: str = V2_PROC) -> str:
    return base + "[[processes.phases]]\n" + phase


def test_cgroup_phases_load_and_lower() -> None:
    text = _with_phase('kind = "reclaim"\namount = "4MiB"\nswappiness = 0\n')
    text += '[[processes.phases]]\nkind = "reclaim"\namount = { of = "memory.current", minus = "30MiB" }\n'
    text += '[[processes.phases]]\nkind = "cgroup_write"\nfile = "memory.zswap.max"\nvalue = { of = "memory.zswap.current", times = 0.5 }\n'
    text += '[[processes.phases]]\nkind = "cgroup_write"\nfile = "memory.high"\nvalue = "max"\n'
    text += '[[processes.phases]]\nkind = "cgroup_write"\nfile = "memory.max"\nvalue = "2G"\n'
    text += '[[processes.phases]]\nkind = "cgroup_write"\nfile = "memory.zswap.writeback"\nvalue = false\n'
    phases = [p["phase"] for p in reclaimlab.lower(load(text))["processes"][0]["phases"]]
    assert phases[1:] == [
        {"kind": "reclaim", "amount": {"kind": "value", "value": 4 << 20}, "swappiness": 0},
        {"kind": "reclaim", "amount": {"kind": "of", "of": "memory.current", "times": 1.0, "minus": 30 << 20}, "swappiness": None},
        {
            "kind": "cgroup_write",
            "file": "memory.zswap.max",
            "value": {"kind": "of", "of": "memory.zswap.current", "times": 0.5, "minus": 0},
        },
        {"kind": "cgroup_write", "file": "memory.high", "value": {"kind": "max"}},
        {"kind": "cgroup_write", "file": "memory.max", "value": {"kind": "value", "value": 2 << 30}},
        {"kind": "cgroup_write", "file": "memory.zswap.writeback", "value": {"kind": "value", "value": 0}},
    ]


def test_cgroup_phase_errors_name_the_key(write: Write) -> None:
    assert one(write, _with_phase('kind = "reclaim"\namount = "4MiB"\n', MINIMAL)) == (
        "processes[0].phases[1].kind: a reclaim phase writes memory.reclaim, a cgroup v2 file; cgroup_version is 1"
    )
    assert one(
        write, _with_phase('kind = "cgroup_write"\nfile = "memory.high"\nvalue = "1G"\n', V2_PROC.replace('cgroup = "w"\n', ""))
    ) == ("processes[0].phases[1].file: the root cgroup has no memory.high; put process 'p' in a cgroup of [cgroups.groups]")
    msg = one(write, _with_phase('kind = "cgroup_write"\nfile = "memory.swappiness"\nvalue = 10\n'))
    assert msg.startswith(
        "processes[0].phases[1].file: expected one of 'memory.high', 'memory.max', 'memory.zswap.max', 'memory.zswap.writeback'"
    )
    msg = one(write, _with_phase('kind = "cgroup_write"\nfile = "memory.zswap.writeback"\nvalue = 2\n'))
    assert msg.startswith("processes[0].phases[1]") and "memory.zswap.writeback takes 0 or 1" in msg, msg
    msg = one(write, _with_phase('kind = "cgroup_write"\nfile = "memory.high"\nvalue = "lots"\n'))
    assert "expected a size (like '1GiB', int bytes) or 'max'" in msg, msg
    msg = one(write, _with_phase('kind = "reclaim"\namount = { of = "memory.peak" }\n'))
    assert msg.startswith("processes[0].phases[1].amount"), msg
    msg = one(write, _with_phase('kind = "reclaim"\namount = "4MiB"\nswappiness = 201\n'))
    assert msg.startswith("processes[0].phases[1].swappiness"), msg


def test_cgroup_descriptor_phases_load_and_lower() -> None:
    # A process keeps descriptors of the peak files by name; writes and reads through them
    # lower to the descriptor's index, with the file it was opened on.
    text = _with_phase('kind = "cgroup_open"\nfile = "memory.peak"\nfd = "a"\n')
    for phase in (
        'kind = "cgroup_open"\nfile = "memory.swap.peak"\nfd = "b"\n',
        'kind = "cgroup_write"\nfd = "a"\nvalue = "reset"\n',
        'kind = "cgroup_read"\nfd = "b"\n',
        'kind = "cgroup_close"\nfd = "a"\n',
        'kind = "cgroup_read"\nfile = "memory.peak"\n',
        'kind = "cgroup_read"\nfile = "memory.events"\nkey = "oom"\n',
        'kind = "cgroup_write"\nfile = "memory.swap.peak"\nvalue = "reset"\n',
        'kind = "cgroup_write"\nfile = "memory.swap.max"\nvalue = "30M"\n',
        'kind = "cgroup_open"\nfile = "memory.peak"\nfd = "a"\n',
    ):
        text += "[[processes.phases]]\n" + phase
    phases = [p["phase"] for p in reclaimlab.lower(load(text))["processes"][0]["phases"]]
    assert phases[1:] == [
        {"kind": "cgroup_open", "file": "memory.peak", "fd": 0},
        {"kind": "cgroup_open", "file": "memory.swap.peak", "fd": 1},
        {"kind": "cgroup_write", "file": "memory.peak", "value": {"kind": "reset"}, "fd": 0},
        {"kind": "cgroup_read", "file": "memory.swap.peak", "fd": 1},
        {"kind": "cgroup_close", "fd": 0},
        {"kind": "cgroup_read", "file": "memory.peak"},
        {"kind": "cgroup_read", "file": "memory.events", "key": "oom"},
        {"kind": "cgroup_write", "file": "memory.swap.peak", "value": {"kind": "reset"}},
        {"kind": "cgroup_write", "file": "memory.swap.max", "value": {"kind": "value", "value": 30 << 20}},
        {"kind": "cgroup_open", "file": "memory.peak", "fd": 0},
    ]


def test_cgroup_descriptor_errors_name_the_key(write: Write) -> None:
    opened = _with_phase('kind = "cgroup_open"\nfile = "memory.peak"\nfd = "a"\n')
    assert one(write, opened + '[[processes.phases]]\nkind = "cgroup_read"\nfd = "b"\n') == (
        "processes[0].phases[2].fd: expected the name of a descriptor a cgroup_open of process 'p' opened before this phase"
        " (open here: 'a'); got 'b'"
    )
    closed = opened + '[[processes.phases]]\nkind = "cgroup_close"\nfd = "a"\n'
    assert one(write, closed + '[[processes.phases]]\nkind = "cgroup_write"\nfd = "a"\nvalue = "reset"\n') == (
        "processes[0].phases[3].fd: expected the name of a descriptor a cgroup_open of process 'p' opened before this phase"
        " (none is open here); got 'a'"
    )
    assert one(write, opened + '[[processes.phases]]\nkind = "cgroup_open"\nfile = "memory.swap.peak"\nfd = "a"\n') == (
        "processes[0].phases[2].fd: descriptor 'a' of process 'p' is already open (on memory.peak); close it first"
    )
    assert one(write, opened + '[[processes.phases]]\nkind = "cgroup_read"\nfile = "memory.swap.peak"\nfd = "a"\n') == (
        "processes[0].phases[2].file: descriptor 'a' is open on memory.peak, not memory.swap.peak"
    )
    msg = one(write, _with_phase('kind = "cgroup_open"\nfile = "memory.high"\nfd = "a"\n'))
    assert msg.startswith("processes[0].phases[1].file: expected one of 'memory.peak', 'memory.swap.peak'"), msg
    msg = one(write, _with_phase('kind = "cgroup_write"\nfile = "memory.peak"\nvalue = "1G"\n'))
    assert msg.startswith("processes[0].phases[1]") and 'memory.peak takes "reset"' in msg, msg
    msg = one(write, _with_phase('kind = "cgroup_read"\nfile = "memory.stat"\n'))
    assert msg.startswith("processes[0].phases[1]") and "memory.stat is read at a row" in msg, msg
    msg = one(write, _with_phase('kind = "cgroup_read"\nfile = "memory.current"\nkey = "anon"\n'))
    assert "only memory.stat and memory.events have rows" in msg, msg
    assert one(write, _with_phase('kind = "cgroup_read"\nfile = "memory.peak"\n', MINIMAL)) == (
        "processes[0].phases[1].kind: a cgroup_read phase reads memory.peak, a cgroup v2 file; cgroup_version is 1"
    )


@pytest.mark.native
def test_cgroup_read_records_the_value_and_a_missing_row(real_core: object, tmp_path: Path) -> None:
    # memory.stat is on the root cgroup too; a row the simulator does not model reads as ENOENT
    # (as cg_read_key_long finds no such key).
    text = MINIMAL.replace("[machine]", "[cgroups]\ncgroup_version = 2\n[machine]")
    text += '[[processes.phases]]\nname = "anon"\nkind = "cgroup_read"\nfile = "memory.stat"\nkey = "anon"\n'
    text += '[[processes.phases]]\nname = "nope"\nkind = "cgroup_read"\nfile = "memory.stat"\nkey = "no_such_row"\n'
    path = tmp_path / "s.toml"
    path.write_text(text, encoding="utf-8")
    r = reclaimlab.run(path)
    rec = {p["phase"]: p for p in r.phase_records}
    assert rec["anon"]["read"] == r.counters["memcg[/].memory.stat.anon"] == 1 << 20
    assert "read" not in rec["nope"] and rec["nope"]["error"] == "ENOENT"


# --- after ---------------------------------------------------------------------------------

_SECOND = """
[[processes]]
name = "q"
{after}
[[processes.regions]]
name = "a"
size = "1MiB"
content = "text"
[[processes.phases]]
kind = "fill"
region = "a"
{phase_after}
[[processes.phases]]
name = "walk"
kind = "sequential"
region = "a"
"""


def _two(after: str = "", phase_after: str = "") -> str:
    return MINIMAL + _SECOND.format(after=after, phase_after=phase_after)


def test_after_lowers_to_indices() -> None:
    from reclaimlab.lower import lower

    s = load(_two(after='after = "p:fill0"'))
    q = lower(s, None)["processes"][1]["phases"]
    assert q[0]["after"] == {"process": 0, "phase": 0} and "after" not in q[1]
    assert all("after" not in ph for ph in lower(load(_two()), None)["processes"][1]["phases"])
    # A phase's own key, on a later phase.
    s = load(_two(phase_after="").replace('name = "walk"', 'name = "walk"\nafter = "p:fill0"'))
    q = lower(s, None)["processes"][1]["phases"]
    assert "after" not in q[0] and q[1]["after"] == {"process": 0, "phase": 0}


def test_after_references_are_checked(write: Write) -> None:
    assert one(write, _two(after='after = "p"')) == "processes[1].after: expected '<process>:<phase>'; got 'p'"
    assert one(write, _two(after='after = "x:fill0"')) == "processes[1].after: expected the name of another process (one of 'p'); got 'x'"
    assert one(write, _two(after='after = "p:nope"')) == "processes[1].after: expected a phase of process 'p' (one of 'fill0'); got 'nope'"
    assert "its own process 'q'" in one(write, _two(after='after = "q:walk"'))
    assert "give one of the two" in one(write, _two(after='after = "p:fill0"', phase_after='after = "p:fill0"'))
    # p's fill waits for q's walk, which comes after q's fill, which waits for p's fill.
    text = _two(phase_after='after = "p:fill0"').replace(
        'region = "a"\n\n[[processes]]', 'region = "a"\nafter = "q:walk"\n[[processes]]', 1
    )
    assert "waits, through `after`, on itself" in one(write, text)


# --- host_memcgs ---------------------------------------------------------------------------


def test_host_memcgs_counts_the_memory_hierarchy(tmp_path: Path) -> None:
    from reclaimlab.scenario.types import count_host_memcgs

    v1 = tmp_path / "v1"
    for d in ("system.slice/a.service", "system.slice/b.service", "user.slice", "reclaimlab-123/workload"):
        (v1 / d).mkdir(parents=True)
    (v1 / "memory.usage_in_bytes").write_text("0\n")
    # system.slice, its two services and user.slice; reclaimlab's own tree is not the host's.
    assert count_host_memcgs(str(v1), str(tmp_path / "none")) == 4
    # v2: only below a parent that enables the memory controller.
    v2 = tmp_path / "v2"
    for d in ("a/x", "a/y", "b/z"):
        (v2 / d).mkdir(parents=True)
    (v2 / "cgroup.subtree_control").write_text("cpu memory\n")
    (v2 / "a" / "cgroup.subtree_control").write_text("memory\n")
    (v2 / "b" / "cgroup.subtree_control").write_text("cpu\n")
    assert count_host_memcgs(str(tmp_path / "nov1"), str(v2)) == 4  # a, b, a/x, a/y
    with pytest.raises(ValueError, match="memory cgroup hierarchy"):
        count_host_memcgs(str(tmp_path / "nov1"), str(tmp_path / "nov2"))


def test_host_memcgs_lowers_only_when_set() -> None:
    from reclaimlab.lower import lower

    assert "host_memcgs" not in lower(load(MINIMAL), None)["machine"]
    s = load(MINIMAL.replace('memory = "256MiB"', 'memory = "256MiB"\nhost_memcgs = 12'))
    assert lower(s, None)["machine"]["host_memcgs"] == 12


# --- page_reporting_order ------------------------------------------------------------------


def test_page_reporting_order_reads_the_host_and_lowers_only_when_set(tmp_path: Path) -> None:
    from reclaimlab.lower import lower
    from reclaimlab.scenario.types import host_page_reporting_order

    param = tmp_path / "page_reporting_order"
    param.write_text("9\n")
    assert host_page_reporting_order(str(param)) == 9
    # Unset until a reporting device registers: -1 in an unsigned int.
    param.write_text("4294967295\n")
    assert host_page_reporting_order(str(param)) == 0
    assert host_page_reporting_order(str(tmp_path / "absent")) == 0
    assert "page_reporting_order" not in lower(load(MINIMAL), None)["machine"]
    s = load(MINIMAL.replace('memory = "256MiB"', 'memory = "256MiB"\npage_reporting_order = 9'))
    assert lower(s, None)["machine"]["page_reporting_order"] == 9
    with pytest.raises(ScenarioError, match="page_reporting_order"):
        load(MINIMAL.replace('memory = "256MiB"', 'memory = "256MiB"\npage_reporting_order = "guest"'))


def test_the_readahead_state_at_the_start_lowers_only_when_stated(write: Write) -> None:
    from reclaimlab.lower import lower

    machine = lower(load(MINIMAL), None)["machine"]
    assert "swapin_readahead_hits" not in machine and "last_readahead_pages" not in machine
    s = load(MINIMAL.replace('memory = "256MiB"', 'memory = "256MiB"\nswapin_readahead_hits = 0\nlast_readahead_pages = 1'))
    machine = lower(s, None)["machine"]
    assert (machine["swapin_readahead_hits"], machine["last_readahead_pages"]) == (0, 1)
    # swapin_nr_pages only ever chooses 0 or a power of two.
    bad = one(write, MINIMAL.replace('memory = "256MiB"', 'memory = "256MiB"\nlast_readahead_pages = 3'))
    assert "machine.last_readahead_pages" in bad and "power of two" in bad
