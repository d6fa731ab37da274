from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import MINIMAL, THREE_REGIONS
from reclaimlab import ScenarioError, load
from reclaimlab.compare import CompareResult, Config, compare, configs_from_vary, expand, format_cell, parse_vary, split_values
from reclaimlab.result import RunResult, counter_sort_key


def test_split_values() -> None:
    assert split_values("true,false") == ["true", "false"]
    assert split_values(" 1 , 2 ,3") == ["1", "2", "3"]
    assert split_values('["a"],["a","b"]') == ['["a"]', '["a","b"]']
    assert split_values('"x,y",z') == ['"x,y"', "z"]
    assert split_values("{ a = 1, b = 2 },c") == ["{ a = 1, b = 2 }", "c"]


def test_parse_vary() -> None:
    key, values = parse_vary("kernel.zswap.enabled=true,false")
    assert key == "kernel.zswap.enabled"
    assert values == [("true", True), ("false", False)]
    with pytest.raises(ValueError, match="--vary: expected key=value1,value2"):
        parse_vary("kernel.zswap.enabled")


def test_configs_from_vary_is_a_cartesian_product() -> None:
    configs = configs_from_vary(["kernel.zswap.enabled=false,true", "kernel.vm.swappiness=60,100,200"])
    assert [c.name for c in configs] == [
        "kernel.zswap.enabled=false, kernel.vm.swappiness=60",
        "kernel.zswap.enabled=false, kernel.vm.swappiness=100",
        "kernel.zswap.enabled=false, kernel.vm.swappiness=200",
        "kernel.zswap.enabled=true, kernel.vm.swappiness=60",
        "kernel.zswap.enabled=true, kernel.vm.swappiness=100",
        "kernel.zswap.enabled=true, kernel.vm.swappiness=200",
    ]
    assert [(o.key, o.value) for o in configs[4].overrides] == [("kernel.zswap.enabled", True), ("kernel.vm.swappiness", 100)]


def test_expand_scenario_configs() -> None:
    s = load(THREE_REGIONS)
    out = expand(s)
    assert [c.name for c, _ in out] == ["no-limit", "swap-only", "zswap", "zswap+shrinker"]
    states = [
        (sc.kernel.zswap.enabled, sc.kernel.zswap.shrinker_enabled, sc.cgroups.groups["workload"].memory_limit_in_bytes) for _, sc in out
    ]
    limit = 173 << 20
    assert states == [(False, False, None), (False, False, limit), (True, False, limit), (True, True, limit)]
    assert {sc.seed for _, sc in out} == {42}


def test_expand_with_base_overrides() -> None:
    s = load(THREE_REGIONS, ["kernel.vm.swappiness=100", "kernel.zswap.enabled=false"])
    out = expand(s)
    assert all(sc.kernel.vm.swappiness == 100 for _, sc in out)
    assert out[2][1].kernel.zswap.enabled is True  # the config's set wins over --set


def test_expand_vary_replaces_configs() -> None:
    out = expand(load(THREE_REGIONS), ["kernel.version=6.12,6.18"])
    assert [c.name for c, _ in out] == ["kernel.version=6.12", "kernel.version=6.18"]
    assert [sc.kernel.version for _, sc in out] == ["6.12", "6.18"]


def test_expand_errors_collected() -> None:
    with pytest.raises(ScenarioError) as info:
        expand(load(THREE_REGIONS), ["kernel.vm.swappiness=10,300,400"])
    assert str(info.value).splitlines() == [
        f"{THREE_REGIONS}: kernel.vm.swappiness: expected an integer in 0..200; got 300 (from --vary kernel.vm.swappiness=300)",
        f"{THREE_REGIONS}: kernel.vm.swappiness: expected an integer in 0..200; got 400 (from --vary kernel.vm.swappiness=400)",
    ]


def test_no_configs() -> None:
    with pytest.raises(ScenarioError, match="no configurations to compare"):
        expand(load(MINIMAL))


@pytest.mark.parametrize(
    ("value", "base", "baseline", "text"),
    [
        (1234, 1000, False, "1234 (+23.4%)"),
        (1000, 1234, True, "1000"),
        (500, 1000, False, "500 (-50.0%)"),
        (0, 0, False, "0 (+0.0%)"),
        (5, 0, False, "5 (n/a)"),
        (None, 5, False, "-"),
        (5, None, False, "5 (n/a)"),
        (12.25, 10.0, False, "12.2 (+22.5%)"),
    ],
)
def test_format_cell(value: Any, base: Any, baseline: bool, text: str) -> None:
    assert format_cell(value, base, baseline) == text


def _result(counters: dict[str, int], rate: float) -> RunResult:
    return RunResult(
        "s", "sim", {}, counters, [{"process": "p", "phase": "access", "elapsed_s": 1.0, "accesses": int(rate), "accesses_per_s": rate}]
    )


def test_rows() -> None:
    res = CompareResult(
        "s",
        [
            (
                Config("a", ()),
                _result(
                    {"vmstat.pswpout": 10, "vmstat.oom_kill": 0, "zswap.written_back_pages": 0, "memcg[/w].memory.stat.zswpout": 3}, 100.0
                ),
            ),
            (
                Config("b", ()),
                _result({"vmstat.pswpout": 20, "vmstat.oom_kill": 0, "zswap.written_back_pages": 5, "meminfo.MemTotal": 7}, 50.0),
            ),
        ],
    )
    rows = res.rows()
    assert [r.label for r in rows] == [
        "vmstat.pswpout",
        "zswap.written_back_pages",
        "memcg[/w].memory.stat.zswpout",
        "meminfo.MemTotal",
        "p/access accesses/s",
    ]
    assert rows[2].values == (3, None)
    assert rows[-1].values == (100.0, 50.0)
    assert [r.label for r in res.rows(show_all=True)][:2] == ["vmstat.oom_kill", "vmstat.pswpout"]
    assert [r.label for r in res.rows(["vmstat.*", "*zswpout"])] == [
        "vmstat.pswpout",
        "memcg[/w].memory.stat.zswpout",
        "p/access accesses/s",
    ]
    frame = res.frame()
    assert list(frame.columns) == ["a", "b"]
    assert frame.loc["vmstat.pswpout", "b"] == 20


def test_counter_sort_key() -> None:
    keys = [
        "meminfo.MemFree",
        "zswap.pool_total_size",
        "memcg[/a].memory.stat.anon",
        "vmstat.pswpin",
        "zram0.mm_stat.orig_data_size",
        "memcg[/].memory.stat.anon",
    ]
    assert sorted(keys, key=counter_sort_key) == [
        "vmstat.pswpin",
        "zswap.pool_total_size",
        "memcg[/].memory.stat.anon",
        "memcg[/a].memory.stat.anon",
        "meminfo.MemFree",
        "zram0.mm_stat.orig_data_size",
    ]


def test_compare_runs_every_config(fake_core: Any) -> None:
    # The stand-in core: the plumbing only (names, JSON, overrides); no model fact is asserted
    # against it (test_compare_three_regions_model below runs the real core).
    res = compare(THREE_REGIONS)
    assert res.names == ["no-limit", "swap-only", "zswap", "zswap+shrinker"]
    d = json.loads(res.to_json())
    assert sorted(d) == ["configs", "scenario", "schema_version"]
    assert d["scenario"] == "three-regions"
    assert [c["name"] for c in d["configs"]] == res.names
    assert d["configs"][1]["overrides"] == ["kernel.zswap.enabled=false"]
    assert d["configs"][1]["result"]["provenance"]["overrides"] == ["kernel.zswap.enabled=false"]
    assert {c["result"]["config"]["seed"] for c in d["configs"]} == {42}
    assert res.to_json() == compare(THREE_REGIONS).to_json()


@pytest.mark.native
def test_compare_three_regions_model(real_core: Any) -> None:
    """The real core: without a limit nothing swaps; swap-only swaps to the device; zswap stores
    instead (and on cgroup v1 its shrinker never writes back, so both zswap configs agree)."""
    res = compare(THREE_REGIONS)
    c = {cfg.name: r.counters for cfg, r in res.configs}
    assert c["no-limit"]["vmstat.pswpout"] == 0 and c["no-limit"]["vmstat.zswpout"] == 0
    assert c["swap-only"]["vmstat.pswpout"] > 0 and c["swap-only"]["vmstat.zswpout"] == 0
    assert c["zswap"]["vmstat.zswpout"] > 0
    assert c["zswap"] == c["zswap+shrinker"]
