"""Latency distributions and memory PSI (docs/model/latency.md): the histogram's percentiles
against the exact sorted list, the result's JSON and tidy forms, and an end-to-end run whose
stalls move the way memory.high says they must. PSI's arithmetic on hand-built timelines is
pinned in the core (crates/reclaimlab-core/tests/it/psi.rs)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import reclaimlab
from reclaimlab import native
from reclaimlab.result import RunResult

QUANTILES_PPM = [500_000, 900_000, 990_000, 999_000, 1_000_000]


def exact_nearest_rank(values: list[int], q_ppm: int) -> int:
    s = sorted(values)
    rank = max(1, math.ceil(len(s) * q_ppm / 1_000_000))
    return s[rank - 1]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.integers(min_value=0, max_value=2**63), min_size=1, max_size=400), st.sampled_from(QUANTILES_PPM))
def test_histogram_quantiles_within_stated_error(values: list[int], q_ppm: int) -> None:
    core = native.core()
    err = core.latency_relative_error()
    assert err <= 0.008  # the bound docs/model/latency.md states
    got = core.latency_quantiles(values, [q_ppm])[0]
    exact = exact_nearest_rank(values, q_ppm)
    assert abs(got - exact) <= exact * err, (got, exact)
    if q_ppm == 1_000_000:
        assert got == max(values)  # the maximum is exact


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.lists(st.integers(min_value=1_000, max_value=10**10), min_size=1000, max_size=3000))
def test_histogram_quantiles_on_realistic_latencies(values: list[int]) -> None:
    core = native.core()
    got = core.latency_quantiles(values, QUANTILES_PPM)
    for q, g in zip(QUANTILES_PPM, got, strict=True):
        exact = exact_nearest_rank(values, q)
        assert abs(g - exact) <= exact * core.latency_relative_error()


SCENARIO = """\
schema_version = 1
seed = 5
[machine]
memory = "1GiB"
cpus = 2
[[machine.swap]]
name = "swapfile"
kind = "file"
size = "1GiB"
device = "ssd"
[kernel]
version = "6.12"
zswap.enabled = true
[cgroups]
cgroup_version = 2
[cgroups.groups.w]
"memory.high" = "{high}"
[[processes]]
name = "w"
cgroup = "w"
[[processes.regions]]
name = "text"
size = "24MiB"
content = "text"
[[processes.phases]]
kind = "fill"
region = "text"
[[processes.phases]]
name = "access"
kind = "random"
regions = ["text"]
dist = "uniform"
count = 60000
"""


def run(tmp_path: Path, high: str) -> RunResult:
    f = tmp_path / f"high-{high}.toml"
    f.write_text(SCENARIO.replace("{high}", high))
    return reclaimlab.run(str(f))


def stall_s(r: RunResult) -> float:
    """Time the process spent in memory.high handling (reclaim and penalty), seconds."""
    kinds = r.latency["processes"][0]["kinds"]
    return kinds.get("high_reclaim", {}).get("sum_ns", 0) / 1e9


def test_tighter_memory_high_stalls_more(tmp_path: Path) -> None:
    loose, mid, tight = (run(tmp_path, h) for h in ("64MiB", "20MiB", "12MiB"))
    # No pressure under 64 MiB: no memory.high stall, no memory stall at all.
    assert "high_reclaim" not in loose.latency["processes"][0]["kinds"]
    assert loose.counters["memcg[/w].memory.pressure.some.total"] == 0
    # Tighter: more time in memory.high reclaim, more faults served from zswap, and PSI that
    # grows with it, for the cgroup and for the system alike.
    assert 0 < stall_s(mid) < stall_s(tight)
    for key in ("memcg[/w].memory.pressure.some.total", "pressure.memory.some.total"):
        assert 0 < mid.counters[key] < tight.counters[key], key
    fault_p99 = [r.latency["all"]["fault"]["p99_ns"] for r in (loose, mid, tight)]
    assert fault_p99[0] < fault_p99[2]
    # One process alone: every stalled moment of the cgroup is a full stall on its CPU.
    assert tight.counters["memcg[/w].memory.pressure.full.total"] == tight.counters["memcg[/w].memory.pressure.some.total"]


def test_latency_in_json_and_tidy(tmp_path: Path) -> None:
    r = run(tmp_path, "12MiB")
    back = RunResult.from_json(r.to_json())
    assert back.latency == r.latency
    phases = [(p["process"], p["phase"]) for p in r.latency["phases"]]
    assert phases == [(p["process"], p["phase"]) for p in r.phase_records]
    tidy = r.tidy()
    rows = tidy[tidy["kind"] == "latency"]
    assert {"latency:all.fault.p99_ns", "latency:w.fault.max_ns", "latency:w/access.fault.count"} <= set(rows["metric"])
    st_ = r.latency["all"]["fault"]
    assert st_["p50_ns"] <= st_["p90_ns"] <= st_["p99_ns"] <= st_["p999_ns"] <= st_["max_ns"]
    # The fault counts add up: every fault is minor or major, as pgfault counts them.
    kinds = r.latency["all"]
    assert kinds["fault"]["count"] == kinds.get("fault_minor", {}).get("count", 0) + kinds["fault_major"]["count"]
    assert kinds["fault_major"]["count"] == r.counters["vmstat.pgmajfault"]


def test_psi_in_the_series(tmp_path: Path) -> None:
    f = tmp_path / "s.toml"
    f.write_text(SCENARIO.replace("{high}", "12MiB"))
    r = reclaimlab.run(str(f), interval_s=0.05)
    col = r.series["values"]["pressure.memory.some.total"]
    assert col[-1] == r.counters["pressure.memory.some.total"]
    assert all(a <= b for a, b in itertools.pairwise(col))
    # Sampling reads only: the result is the one of an unsampled run.
    plain = reclaimlab.run(str(f))
    assert plain.counters == r.counters and plain.latency == r.latency


def test_run_and_compare_show_the_latency_block(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from reclaimlab.cli import app

    f = tmp_path / "c.toml"
    f.write_text(SCENARIO.replace("{high}", "12MiB"))
    cli = CliRunner()
    r = cli.invoke(app, ["compare", str(f), "--vary", "cgroups.groups.w.memory.high=12MiB,20MiB", "--no-progress", "--all"])
    assert r.exit_code == 0, r.output
    for label in ("fault p50", "fault p99", "fault max", "high p99", "psi some avg10", "psi full total", "memory.high p999"):
        assert label in r.output, label
    r = cli.invoke(app, ["run", str(f), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "psi some total" in r.output and "latency (docs/model/latency.md)" not in r.output  # the table is behind --all
    r = cli.invoke(app, ["run", str(f), "--no-progress", "--all"])
    assert "latency (docs/model/latency.md)" in r.output and "w/access" in r.output
