"""Lowering to the core's SimConfig: units, indices, order, and a config the real core accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import MINIMAL, THREE_REGIONS
from reclaimlab import load, lower
from reclaimlab.errors import ScenarioError


@pytest.fixture(scope="module")
def lowered() -> dict[str, Any]:
    # Without the machine profile: the built-in cost defaults and device presets (the profile's
    # effect on lowering is tested in test_calibrate.py).
    return lower(load(THREE_REGIONS), profile=None)


@pytest.mark.native
def test_the_core_accepts_every_lowered_form(real_core: Any) -> None:
    """The core (serde, unknown fields denied) is the one declaration of the config's shape:
    every phase and distribution form, cgroup and device form lowered here must be accepted,
    and a stray field rejected."""
    text = MINIMAL.replace(
        '[[processes.phases]]\nkind = "fill"\nregion = "a"',
        """[[processes.phases]]
kind = "fill"
region = "a"
[[processes.phases]]
kind = "sequential"
region = "a"
[[processes.phases]]
kind = "sequential"
region = "a"
write_percent = 100
rw = true
[[processes.phases]]
kind = "random"
regions = ["a"]
count = 5
[[processes.phases]]
kind = "random"
regions = ["a"]
count = 5
write_percent = 30
rw = true
[[processes.phases]]
kind = "random"
regions = ["a"]
count = 5
dist = { kind = "hot_cold", hot_percent = 20, hot_access_percent = 80 }
[[processes.phases]]
kind = "random"
regions = ["a"]
count = 5
dist = { kind = "zipf", theta = 0.99 }
[[processes.phases]]
kind = "sleep"
duration = "1s"
[[processes.phases]]
kind = "exit"
""",
    )
    config = lower(load(text))
    assert {p["phase"]["kind"] for p in config["processes"][0]["phases"]} == {"fill", "sequential", "random", "sleep", "exit"}
    real_core.Simulation(json.dumps(config))
    real_core.Simulation(json.dumps(lower(load(THREE_REGIONS))))
    config["processes"][0]["phases"][0]["phase"]["bogus"] = 1
    with pytest.raises(ValueError, match="bogus"):
        real_core.Simulation(json.dumps(config))


def test_three_regions_lowering(lowered: dict[str, Any]) -> None:
    assert lowered["seed"] == 42
    assert lowered["max_time_ns"] == 120 * 10**9
    assert lowered["costs"] == {}
    m = lowered["machine"]
    assert (m["memory_bytes"], m["cpus"]) == (1 << 30, 2)
    assert m["swap"] == [
        {
            "name": "swapfile",
            "kind": "file",
            "size_bytes": 1 << 30,
            "priority": -2,
            "device": {
                "rotational": True,
                "read_latency_ns": 150_000,
                "write_latency_ns": 100_000,
                "read_bytes_per_s": 10**9,
                "write_bytes_per_s": 10**9,
            },
            "comp_algorithm": None,
        }
    ]
    k = lowered["kernel"]
    assert k["version"] == "6.18"
    assert k["zswap"] == {
        "enabled": True,
        "compressor": "lzo",
        "max_pool_percent": 20,
        "accept_threshold_percent": 90,
        "shrinker_enabled": False,
        "zpool": None,  # unset: the version's default allocator (resolved by the core)
    }
    assert k["vm"] == {
        "swappiness": 60,
        "page_cluster": 3,
        "min_free_kbytes": None,
        "watermark_scale_factor": 10,
        "dirty_ratio": 20,
        "dirty_background_ratio": 10,
        "dirty_bytes": None,
        "dirty_background_bytes": None,
        "dirty_expire_centisecs": 3000,
        "extfrag_threshold": 500,
        "compaction_proactiveness": 20,
        "dirty_writeback_centisecs": 500,
    }
    assert k["switches"] == {}
    cg = lowered["cgroups"]
    assert cg["version"] == 1
    assert cg["groups"] == [
        {
            "path": "/",
            "parent": None,
            "limit_bytes": None,
            "high_bytes": None,
            "swappiness": None,
            "zswap_max_bytes": None,
            "zswap_writeback": True,
        },
        {
            "path": "/workload",
            "parent": 0,
            "limit_bytes": 173 << 20,
            "high_bytes": None,
            "swappiness": None,
            "zswap_max_bytes": None,
            "zswap_writeback": True,
        },
    ]
    (p,) = lowered["processes"]
    assert p["name"] == "eval_zswap"
    assert p["cgroup"] == 1
    assert p["regions"] == [
        {"name": "text-a", "pages": 16384, "content": "text", "variants": 256},
        {"name": "text-b", "pages": 16384, "content": "text", "variants": 256},
        {"name": "urandom", "pages": 16384, "content": "random", "variants": 256},
    ]
    assert p["phases"] == [
        {"name": "fill0", "phase": {"kind": "fill", "region": 0}},
        {"name": "fill1", "phase": {"kind": "fill", "region": 1}},
        {"name": "fill2", "phase": {"kind": "fill", "region": 2}},
        {
            "name": "access",
            "phase": {
                "kind": "random",
                "regions": [0, 1, 2],
                "dist": {"kind": "uniform"},
                "count": None,
                "duration_ns": 20 * 10**9,
                "write_percent": 0,
            },
        },
    ]


def test_memcg_limit_is_about_ten_percent_below_the_working_set(lowered: dict[str, Any]) -> None:
    working_set = sum(r["pages"] for r in lowered["processes"][0]["regions"]) * 4096
    limit = lowered["cgroups"]["groups"][1]["limit_bytes"]
    assert 0.88 < limit / working_set < 0.92


def test_lowering_is_json_and_deterministic() -> None:
    a = json.dumps(lower(load(THREE_REGIONS)), sort_keys=True)
    b = json.dumps(lower(load(THREE_REGIONS)), sort_keys=True)
    assert a == b


def test_pages_round_up() -> None:
    s = load(MINIMAL.replace('size = "1MiB"', "size = 4097"))
    assert lower(s)["processes"][0]["regions"][0]["pages"] == 2


def test_cgroups_pre_order_with_implicit_parents() -> None:
    text = MINIMAL.replace(
        "[[processes]]",
        """[cgroups]
cgroup_version = 2
[cgroups.groups."b/c"]
"memory.max" = "100MiB"
"memory.zswap.writeback" = false
[cgroups.groups.a]
"memory.zswap.max" = "10MiB"
[cgroups.groups."a/x/y"]
"memory.high" = "max"
[[processes]]""",
    ).replace('name = "p"', 'name = "p"\ncgroup = "a/x/y"')
    out = lower(load(text))
    groups = out["cgroups"]["groups"]
    assert [g["path"] for g in groups] == ["/", "/a", "/a/x", "/a/x/y", "/b", "/b/c"]
    assert [g["parent"] for g in groups] == [None, 0, 1, 2, 0, 4]
    by_path = {g["path"]: g for g in groups}
    assert by_path["/b/c"]["limit_bytes"] == 100 << 20
    assert by_path["/b/c"]["zswap_writeback"] is False
    assert by_path["/a"]["zswap_max_bytes"] == 10 << 20
    assert by_path["/a/x"] == {
        "path": "/a/x",
        "parent": 1,
        "limit_bytes": None,
        "high_bytes": None,
        "swappiness": None,
        "zswap_max_bytes": None,
        "zswap_writeback": True,
    }
    assert out["processes"][0]["cgroup"] == 3


def test_oom_group_and_oom_score_adj_only_when_set() -> None:
    # Both lowered only when the scenario sets them: configs lowered before they existed stay
    # as they were.
    plain = lower(load(MINIMAL.replace("[[processes]]", "[cgroups]\ncgroup_version = 2\n[cgroups.groups.g]\n[[processes]]", 1)))
    assert "oom_group" not in plain["cgroups"]["groups"][1]
    assert "oom_score_adj" not in plain["processes"][0]
    text = MINIMAL.replace(
        "[[processes]]", '[cgroups]\ncgroup_version = 2\n[cgroups.groups.g]\n"memory.oom.group" = 1\n[[processes]]', 1
    ).replace('name = "p"', 'name = "p"\ncgroup = "g"\noom_score_adj = -1000')
    out = lower(load(text))
    assert out["cgroups"]["groups"][1]["oom_group"] is True
    assert out["processes"][0]["oom_score_adj"] == -1000
    with pytest.raises(ScenarioError, match=r"oom_score_adj"):
        load(text.replace("-1000", "1001"))


def test_cgroup_v1() -> None:
    text = MINIMAL.replace(
        "[[processes]]",
        '[cgroups.groups.w]\n"memory.limit_in_bytes" = "172MiB"\n"memory.swappiness" = 100\n[cgroups.groups.u]\n"memory.limit_in_bytes" = -1\n[[processes]]',
    )
    groups = {g["path"]: g for g in lower(load(text))["cgroups"]["groups"]}
    assert groups["/w"]["limit_bytes"] == 172 << 20
    assert groups["/w"]["swappiness"] == 100
    assert groups["/w"]["high_bytes"] is None
    assert groups["/u"]["limit_bytes"] is None


def test_stats_flush() -> None:
    # The lab's memory.stat reads (default: every second, its sampler's default) and the
    # kernel's flusher's phase; "0s": no reader.
    assert lower(load(MINIMAL))["cgroups"]["stats_flush"] == {"dwork_phase_ns": 0, "read_ns": 1_000_000_000}
    text = MINIMAL.replace("[[processes]]", '[cgroups]\nmemory_stat_interval = "0s"\nstats_flusher_phase = "1.5s"\n[[processes]]', 1)
    assert lower(load(text))["cgroups"]["stats_flush"] == {"dwork_phase_ns": 1_500_000_000, "read_ns": None}
    with pytest.raises(ScenarioError, match=r"cgroups\.memory_stat_interval"):
        load(MINIMAL.replace("[[processes]]", '[cgroups]\nmemory_stat_interval = "often"\n[[processes]]', 1))


@pytest.mark.native
def test_stats_flusher_phase_below_the_flushers_period() -> None:
    """The flusher's period is FLUSH_TIME on the timer wheel, 2.016 s (memcg_stats.rs): its
    first run comes within one period, so a phase of 2 s is fine and one of 2.016 s is not."""
    import reclaimlab

    ok = reclaimlab.run(MINIMAL.replace("[[processes]]", '[cgroups]\nstats_flusher_phase = "2s"\n[[processes]]', 1))
    assert ok.counters
    with pytest.raises(ScenarioError, match=r"cgroups\.stats_flusher_phase"):
        reclaimlab.run(MINIMAL.replace("[[processes]]", '[cgroups]\nstats_flusher_phase = "2016ms"\n[[processes]]', 1))


def test_swap_priorities_and_zram() -> None:
    text = MINIMAL.replace(
        'device = "ssd"',
        """device = "ssd"
[[machine.swap]]
kind = "zram"
size = "512MiB"
[[machine.swap]]
size = "1GiB"
device = { preset = "hdd", read_latency = "4ms" }
[[machine.swap]]
size = "1GiB"
priority = 5
device = { rotational = false, read_latency = "80us", write_latency = "30us", read_bandwidth = "500MB/s", write_bandwidth = "400MB/s" }
[[machine.swap]]
kind = "zram"
size = "1GiB"
priority = 50
comp_algorithm = "zstd"
""",
    )
    swaps = lower(load(text))["machine"]["swap"]
    assert [s["name"] for s in swaps] == ["swap0", "swap1", "swap2", "swap3", "swap4"]
    assert [s["priority"] for s in swaps] == [-2, 100, -3, 5, 50]
    assert [s["comp_algorithm"] for s in swaps] == [None, "lzo-rle", None, None, "zstd"]
    assert swaps[2]["device"] == {
        "rotational": True,
        "read_latency_ns": 4_000_000,
        "write_latency_ns": 8_000_000,
        "read_bytes_per_s": 150_000_000,
        "write_bytes_per_s": 150_000_000,
    }
    assert swaps[3]["device"] == {
        "rotational": False,
        "read_latency_ns": 80_000,
        "write_latency_ns": 30_000,
        "read_bytes_per_s": 500_000_000,
        "write_bytes_per_s": 400_000_000,
    }
    assert swaps[1]["device"]["read_latency_ns"] == 0


def test_kernel_knobs_lowered() -> None:
    text = MINIMAL.replace(
        "[machine]",
        """[kernel]
version = "6.12"
zswap.enabled = true
zswap.compressor = "zstd"
zswap.shrinker_enabled = true
vm.min_free_kbytes = 67584
vm.page-cluster = 0
[kernel.switches]
zswap.same_filled = "zeromap"
[costs]
access_ns = 200
fault_ns = 1000
[machine]""",
    )
    out = lower(load(text), profile=None)  # the scenario's costs alone
    assert out["kernel"]["version"] == "6.12"
    assert out["kernel"]["zswap"]["compressor"] == "zstd"
    assert out["kernel"]["zswap"]["shrinker_enabled"] is True
    assert out["kernel"]["vm"]["min_free_kbytes"] == 67584
    assert out["kernel"]["vm"]["page_cluster"] == 0
    assert out["kernel"]["switches"] == {"zswap.same_filled": "zeromap"}
    assert out["costs"] == {"access_ns": 200, "fault_ns": 1000}
    assert out["max_time_ns"] is None


def test_phase_names_and_region_indices() -> None:
    text = MINIMAL.replace(
        'content = "text"', 'content = "text"\n[[processes.regions]]\nname = "b"\nsize = 8192\ncontent = "same:0x5a"\nvariants = 1'
    ).replace(
        '[[processes.phases]]\nkind = "fill"\nregion = "a"',
        '[[processes.phases]]\nkind = "fill"\nregion = "b"\n[[processes.phases]]\nkind = "sequential"\nregions = ["b", "a"]\npasses = 3\nwrite_percent = 50\n'
        '[[processes.phases]]\nkind = "sequential"\nregion = "a"\nwrite_percent = 50\nrw = true\n'
        '[[processes.phases]]\nname = "nap"\nkind = "sleep"\nduration = "5ms"',
    )
    phases = lower(load(text))["processes"][0]["phases"]
    assert phases == [
        {"name": "fill0", "phase": {"kind": "fill", "region": 1}},
        {"name": "sequential1", "phase": {"kind": "sequential", "regions": [1, 0], "passes": 3, "write_percent": 50}},
        # rw only where set: the lowered form of every other phase is as before.
        {"name": "sequential2", "phase": {"kind": "sequential", "regions": [0], "passes": 1, "write_percent": 50, "rw": True}},
        {"name": "nap", "phase": {"kind": "sleep", "duration_ns": 5_000_000}},
    ]


def test_lab_samples_at_the_scenarios_memory_stat_interval() -> None:
    # The lab's sampler is the reader the simulator models: without --sample-interval it
    # samples at the scenario's interval, and an explicit one is written into the scenario.
    from reclaimlab.backends.kernel import sampling

    s = load(MINIMAL)
    assert sampling(s, None) == (s, 1.0)
    s2, interval = sampling(s, 2.5)
    assert interval == 2.5 and lower(s2)["cgroups"]["stats_flush"]["read_ns"] == 2_500_000_000
    quiet = load(MINIMAL.replace("[[processes]]", '[cgroups]\nmemory_stat_interval = "0s"\n[[processes]]', 1))
    assert sampling(quiet, None) == (quiet, None)
