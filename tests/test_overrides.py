"""--set resolution: dotted keys whose parts contain dots, list indices and names, TOML values."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import MINIMAL, THREE_REGIONS
from reclaimlab import ScenarioError, load
from reclaimlab.overrides import Override, apply_overrides, parse_override, parse_value, split_key
from reclaimlab.scenario import RandomPhase, Scenario, SequentialPhase

Write = Callable[..., Path]


def resolve(doc: dict, key: str, value: object = 1) -> tuple:
    _, landed, errors = apply_overrides(Scenario, doc, [Override(key, value)])
    assert not errors, errors
    return landed[0][0]


@pytest.fixture
def doc() -> dict:
    return load(THREE_REGIONS).document


def test_split_key() -> None:
    assert [p.text for p in split_key("a.b.c")] == ["a", "b", "c"]
    parts = split_key('cgroups.groups.workload."memory.high"')
    assert [(p.text, p.atomic) for p in parts] == [("cgroups", False), ("groups", False), ("workload", False), ("memory.high", True)]
    assert [(p.text, p.atomic) for p in split_key("processes[0].regions[1].size")] == [
        ("processes", False),
        ("0", True),
        ("regions", False),
        ("1", True),
        ("size", False),
    ]
    for bad in ["", "a..b", "a.", "a[x]", 'a."b']:
        with pytest.raises(ValueError):
            split_key(bad)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("20", 20),
        ('"x"', "x"),
        ("[1,2]", [1, 2]),
        ("1GiB", "1GiB"),
        ("max", "max"),
        ("1.5", 1.5),
        ('{ preset = "ssd" }', {"preset": "ssd"}),
        ("", ""),
    ],
)
def test_parse_value(text: str, value: object) -> None:
    assert parse_value(text) == value


def test_parse_override() -> None:
    o = parse_override("kernel.vm.swappiness=100")
    assert (o.key, o.value, o.origin) == ("kernel.vm.swappiness", 100, "--set kernel.vm.swappiness=100")
    assert parse_override("name=a=b").value == "a=b"
    assert str(parse_override("kernel.zswap.enabled=true")) == "kernel.zswap.enabled=true"
    with pytest.raises(ValueError, match="expected key=value"):
        parse_override("kernel.zswap.enabled")


@pytest.mark.parametrize(
    ("key", "path"),
    [
        ("cgroups.groups.workload.memory.high", ("cgroups", "groups", "workload", "memory.high")),
        ('cgroups.groups.workload."memory.high"', ("cgroups", "groups", "workload", "memory.high")),
        ("cgroups.groups.workload.memory.zswap.max", ("cgroups", "groups", "workload", "memory.zswap.max")),
        ("kernel.zswap.enabled", ("kernel", "zswap", "enabled")),
        ("kernel.vm.page-cluster", ("kernel", "vm", "page-cluster")),
        ("processes.0.regions.1.size", ("processes", 0, "regions", 1, "size")),
        ("processes[0].regions[1].size", ("processes", 0, "regions", 1, "size")),
        ("processes.eval_zswap.regions.text-b.size", ("processes", 0, "regions", 1, "size")),
        ("processes.0.phases.fill1.region", ("processes", 0, "phases", 1, "region")),
        ("processes.0.phases.access.duration", ("processes", 0, "phases", 3, "duration")),
        ("machine.memory", ("machine", "memory")),
        ("machine.swap.swapfile.size", ("machine", "swap", 0, "size")),
        ("kernel.switches.zswap.incompressible", ("kernel", "switches", "zswap.incompressible")),
        ("costs.access_ns", ("costs", "access_ns")),
        ("cgroups.groups.batch.memory.max", ("cgroups", "groups", "batch", "memory.max")),
        ("cgroups.groups.a/b.memory.max", ("cgroups", "groups", "a/b", "memory.max")),
        ('cgroups.groups."x.y".memory.max', ("cgroups", "groups", "x.y", "memory.max")),
        ("max_time", ("max_time",)),
    ],
)
def test_resolution(doc: dict, key: str, path: tuple) -> None:
    assert resolve(doc, key) == path


def test_overrides_apply_and_validate() -> None:
    s = load(
        THREE_REGIONS,
        [
            "cgroups.groups.workload.memory.limit_in_bytes=max",
            "kernel.zswap.enabled=false",
            "kernel.vm.page-cluster=0",
            "processes.0.regions.1.size=1GiB",
            "machine.memory=2GiB",
            "seed=7",
        ],
    )
    assert s.cgroups.groups["workload"].memory_limit_in_bytes is None
    assert s.kernel.zswap.enabled is False
    assert s.kernel.vm.page_cluster == 0
    assert s.processes[0].regions[1].size == 1 << 30
    assert s.machine.memory == 2 << 30
    assert s.seed == 7
    assert str(s.overrides[0]) == "cgroups.groups.workload.memory.limit_in_bytes=max"
    assert str(Override("kernel.version", "6.12")) == 'kernel.version="6.12"'


def test_original_document_untouched() -> None:
    s = load(THREE_REGIONS, ["kernel.zswap.enabled=false"])
    assert s.document["kernel"]["zswap"]["enabled"] is True
    assert s.kernel.zswap.enabled is False


def test_with_overrides_stacks() -> None:
    s = load(THREE_REGIONS, ["kernel.vm.swappiness=100"])
    t = s.with_overrides(["kernel.zswap.enabled=false"])
    assert (t.kernel.vm.swappiness, t.kernel.zswap.enabled) == (100, False)
    assert (s.kernel.vm.swappiness, s.kernel.zswap.enabled) == (100, True)


def test_new_cgroup_via_set() -> None:
    s = load(THREE_REGIONS, ["cgroups.groups.batch.memory.limit_in_bytes=64MiB", "processes.0.cgroup=batch"])
    assert s.cgroups.groups["batch"].memory_limit_in_bytes == 64 << 20
    assert s.processes[0].cgroup_path() == "/batch"


def test_device_string_becomes_table_when_setting_inside() -> None:
    s = load(THREE_REGIONS, ["machine.swap.0.device.read_latency=1ms"])
    dev = s.machine.swap[0].device
    assert dev is not None
    assert dev.preset == "virtio-disk"
    assert dev.model().read_latency_ns == 1_000_000
    assert dev.model().write_latency_ns == 100_000


def test_table_values_merge() -> None:
    s = load(THREE_REGIONS, ["machine.swap.0.device.read_latency=1ms", 'machine.swap.0.device={ preset = "ssd" }'])
    dev = s.machine.swap[0].device
    assert dev is not None and dev.preset == "ssd" and dev.read_latency == 1_000_000
    s = load(THREE_REGIONS, ["machine.swap.0.device.read_latency=1ms", "machine.swap.0.device=nvme"])
    dev = s.machine.swap[0].device
    assert dev is not None and dev.preset == "nvme" and dev.read_latency is None


def test_changing_kind_drops_the_old_kinds_keys() -> None:
    s = load(
        THREE_REGIONS,
        [
            'processes.0.phases.3.dist={ kind = "hot_cold", hot_percent = 10, hot_access_percent = 90 }',
            "processes.0.phases.3.dist.kind=zipf",
            "processes.0.phases.3.dist.theta=0.9",
        ],
    )
    ph = s.processes[0].phases[3]
    assert isinstance(ph, RandomPhase)
    assert ph.dist.kind == "zipf"
    s = load(THREE_REGIONS, ["processes.0.phases.access.kind=sequential"])
    ph = s.processes[0].phases[3]
    assert isinstance(ph, SequentialPhase)
    assert ph.regions == ["text-a", "text-b", "urandom"]


def test_exclusive_keys_replace_each_other() -> None:
    s = load(THREE_REGIONS, ["processes.0.phases.access.count=1000"])
    ph = s.processes[0].phases[3]
    assert isinstance(ph, RandomPhase)
    assert (ph.count, ph.duration) == (1000, None)
    s = load(THREE_REGIONS, ["processes.0.phases.access.region=text-a"])
    ph = s.processes[0].phases[3]
    assert isinstance(ph, RandomPhase)
    assert ph.region_names() == ["text-a"]


def test_unknown_paths_are_errors(write: Write) -> None:
    path = write(MINIMAL)
    with pytest.raises(ScenarioError) as info:
        load(path, ["kernel.zswap.enabeld=true", "processes.3.name=x", "processes.q.name=x", "nope=1", "machine.memory.x=1"])
    assert str(info.value).splitlines() == [
        f"{path}: --set kernel.zswap.enabeld=true: unknown key 'enabeld' under kernel.zswap (did you mean 'enabled'?); expected one of: "
        "enabled, compressor, max_pool_percent, accept_threshold_percent, shrinker_enabled, zpool",
        f"{path}: --set processes.3.name=x: processes has 1 element(s); no index 3",
        f"{path}: --set processes.q.name=x: processes has no element named 'q'; expected an index or one of 'p'",
        f"{path}: --set nope=1: unknown key 'nope' under the top level; expected one of: schema_version, name, description, "
        "seed, max_time, trace, machine, kernel, cgroups, processes, costs, compare, report, lab, engine",
        f"{path}: --set machine.memory.x=1: cannot set a key inside machine.memory: it is a value, not a table",
    ]


def test_bad_values_name_the_key_and_the_override(write: Write) -> None:
    path = write(MINIMAL)
    with pytest.raises(ScenarioError) as info:
        load(path, ["kernel.vm.swappiness=300", "machine.memory=lots"])
    assert str(info.value).splitlines() == [
        f"{path}: machine.memory: expected a size (int bytes, or a string like '4096', '64MiB', '1GiB', '500MB', '2G'); "
        "got 'lots' (from --set machine.memory=lots)",
        f"{path}: kernel.vm.swappiness: expected an integer in 0..200; got 300 (from --set kernel.vm.swappiness=300)",
    ]


def test_malformed_override(write: Write) -> None:
    path = write(MINIMAL)
    with pytest.raises(ScenarioError, match=r"--set: expected key=value"):
        load(path, ["kernel.zswap.enabled"])


def test_compare_set_uses_the_same_resolution() -> None:
    s = load(THREE_REGIONS)
    assert s.compare is not None
    no_limit = s.with_overrides(s.compare.configs[0].overrides())
    assert no_limit.cgroups.groups["workload"].memory_high is None
    assert no_limit.kernel.zswap.enabled is False


def test_string_keys_take_the_typed_text() -> None:
    s = load(THREE_REGIONS, ["kernel.version=6.12"])
    assert s.kernel.version == "6.12"
    assert load(MINIMAL, ["name=123"]).name == "123"
    out, _, errors = apply_overrides(Scenario, load(MINIMAL).document, [parse_override("kernel.version=6.10")])
    assert not errors
    assert out["kernel"]["version"] == "6.10"  # not the float 6.1
    assert load(MINIMAL, ['kernel.version="6.12"']).kernel.version == "6.12"
