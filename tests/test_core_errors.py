"""Lowered paths of the core's errors mapped back to the scenario key and file."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import MINIMAL, THREE_REGIONS
from reclaimlab import load
from reclaimlab.core_errors import from_core_error, scenario_key, split_message
from reclaimlab.errors import format_path

SCENARIO = """\
schema_version = 1
[machine]
memory = "256MiB"
[[machine.swap]]
size = "256MiB"
device = "ssd"
[[machine.swap]]
name = "z"
kind = "zram"
size = "64MiB"
[kernel]
zswap.enabled = true
vm.page-cluster = 0
[cgroups]
cgroup_version = 2
[cgroups.groups."a/b"]
"memory.max" = "100MiB"
[cgroups.groups.c]
"memory.high" = "10MiB"
[[processes]]
name = "first"
[[processes.regions]]
name = "a"
size = "1MiB"
content = "text"
[[processes]]
name = "second"
cgroup = "c"
[[processes.regions]]
name = "x"
size = "1MiB"
content = "text"
[[processes.regions]]
name = "y"
size = "2MiB"
content = "zero"
[[processes.phases]]
kind = "fill"
region = "y"
[[processes.phases]]
name = "sweep"
kind = "random"
regions = ["x", "y"]
count = 10
dist = { kind = "zipf", theta = 0.9 }
[[processes.phases]]
kind = "sleep"
duration = "1s"
"""


@pytest.fixture
def s(write: Any) -> Any:
    return load(write(SCENARIO))


@pytest.mark.parametrize(
    ("lowered", "key", "note"),
    [
        ("processes[1].regions[1].pages", "processes[1].regions[1].size", "process 'second', region 'y'"),
        ("processes[1].regions[0].content", "processes[1].regions[0].content", "process 'second', region 'x'"),
        ("processes[1].phases[1].phase.count", "processes[1].phases[1].count", "process 'second', phase 'sweep'"),
        ("processes[1].phases[1].phase.dist.theta", "processes[1].phases[1].dist.theta", "process 'second', phase 'sweep'"),
        ("processes[1].phases[2].phase.duration_ns", "processes[1].phases[2].duration", "process 'second', phase 'sleep2'"),
        ("processes[1].phases[0].phase.region", "processes[1].phases[0].region", "process 'second', phase 'fill0'"),
        ("processes[0].cgroup", "processes[0].cgroup", "process 'first'"),
        ("processes[0]", "processes[0]", "process 'first'"),
        ("machine.swap[1].comp_algorithm", "machine.swap[1].comp_algorithm", "swap device 'z'"),
        ("machine.swap[0].size_bytes", "machine.swap[0].size", "swap device 'swap0'"),
        ("machine.swap[0].device.read_latency_ns", "machine.swap[0].device.read_latency", "swap device 'swap0'"),
        ("machine.memory_bytes", "machine.memory", ""),
        # cgroups in lowered order: /, /a, /a/b, /c; /a is only implied by "a/b"
        ("cgroups.groups[2].limit_bytes", 'cgroups.groups."a/b"."memory.max"', "cgroup '/a/b'"),
        ("cgroups.groups[3].high_bytes", 'cgroups.groups.c."memory.high"', "cgroup '/c'"),
        ("cgroups.groups[1].limit_bytes", "cgroups.groups", "cgroup '/a'"),
        ("cgroups.stats_flush.read_ns", "cgroups.memory_stat_interval", ""),
        ("cgroups.stats_flush.dwork_phase_ns", "cgroups.stats_flusher_phase", ""),
        ("kernel.zswap.zpool", "kernel.zswap.zpool", ""),
        ("kernel.vm.page_cluster", "kernel.vm.page-cluster", ""),
        ("kernel.switches.zswap.incompressible", 'kernel.switches."zswap.incompressible"', ""),
        ("costs.access_ns", "costs.access_ns", ""),
        ("max_time_ns", "max_time", ""),
        ("engine.accesses", "engine.accesses", ""),
    ],
)
def test_lowered_path_to_scenario_key(s: Any, lowered: str, key: str, note: str) -> None:
    path, got_note = scenario_key(s, lowered)
    assert (format_path(path), got_note) == (key, note)


def test_v1_cgroup_files(write: Any) -> None:
    s = load(THREE_REGIONS)
    assert format_path(scenario_key(s, "cgroups.groups[1].limit_bytes")[0]) == 'cgroups.groups.workload."memory.limit_in_bytes"'


def test_split_message() -> None:
    assert split_message("processes[0].regions[1].pages: must be > 0") == ("processes[0].regions[1].pages", "must be > 0")
    assert split_message("kernel.zswap.zpool: unknown zpool 'z3fold'") == ("kernel.zswap.zpool", "unknown zpool 'z3fold'")
    assert split_message("something went wrong") is None


class ConfigError(ValueError):
    """The shape of reclaimlab._core.ConfigError: ``path`` and ``reason`` attributes."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def test_plain_and_typed_errors_map_alike(s: Any) -> None:
    want = f"{s.file}: processes[1].regions[1].size: the simulator rejected the value (process 'second', region 'y'): must be > 0"
    assert str(from_core_error(s, ValueError("processes[1].regions[1].pages: must be > 0"))) == want
    assert str(from_core_error(s, ConfigError("processes[1].regions[1].pages", "must be > 0"))) == want


def test_a_message_without_a_path_is_kept(write: Any) -> None:
    s = load(write(MINIMAL))
    assert str(from_core_error(s, ValueError("out of memory"))) == f"{s.file}: the simulator rejected the scenario: out of memory"


@pytest.mark.native
def test_a_real_core_rejection_names_the_scenario_key(real_core: Any, write: Any) -> None:
    import reclaimlab

    # Bypass the loader's own check of the compressor, so that the core is the one to reject it.
    s = load(write(MINIMAL))
    s.kernel.zswap.compressor = "lz5"
    with pytest.raises(reclaimlab.ScenarioError) as e:
        reclaimlab.run(s)
    assert e.value.file == s.file
    assert [format_path(p.path) for p in e.value.problems] == ["kernel.zswap.compressor"], str(e.value)


@pytest.mark.native
def test_an_unknown_engine_mode_is_refused_with_the_values(real_core: Any, write: Any) -> None:
    # engine.accesses is declared once, in the core: the loader passes any string through and
    # the core's refusal names the scenario key and both values.
    import reclaimlab

    s = load(write(MINIMAL + '\n[engine]\naccesses = "fast"\n'))
    with pytest.raises(reclaimlab.ScenarioError) as e:
        reclaimlab.run(s)
    assert e.value.file == s.file
    assert [format_path(p.path) for p in e.value.problems] == ["engine.accesses"], str(e.value)
    assert "`exact`" in str(e.value) and "`analytic`" in str(e.value), str(e.value)


@pytest.mark.native
def test_analytic_mode_is_the_default_and_says_so(real_core: Any, write: Any) -> None:
    # Analytic is a scenario's default (scenario/models.py Engine); exact mode is asked for and
    # lowers as before the switch existed (no `engine` key: the core's own default).
    import reclaimlab

    text = MINIMAL + '[[processes.phases]]\nkind = "random"\nregions = ["a"]\ncount = 10000\n'
    analytic = reclaimlab.run(load(write(text)))
    exact = reclaimlab.run(load(write(text)).with_overrides(["engine.accesses=exact"]))
    assert "analytic_accesses" not in exact.stats
    assert analytic.stats["analytic_accesses"] > 0
    assert analytic.config["engine"] == {"accesses": "analytic"}
    assert "engine" not in exact.config
