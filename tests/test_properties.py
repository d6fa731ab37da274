"""Property-based tests (hypothesis) of the loader and of bounded simulations on the real core.

What holds for every input, not only the cases someone thought of: a size, duration or
override is either accepted as a value the core can run or refused with a ScenarioError naming
the key (never another exception, never a silently wrong value); a bounded simulation either
runs to a result that respects its bounds or is refused before it starts. The regressions the
fuzzing of issue 9 found are kept below as explicit @example cases; runs are derandomized so
`make test` is reproducible, and short (a few seconds each).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import reclaimlab
from reclaimlab.errors import ScenarioError
from reclaimlab.units import U64_MAX, parse_bandwidth, parse_duration, parse_size

MINIMAL = """\
schema_version = 1
[machine]
memory = "64MiB"
[[machine.swap]]
size = "64MiB"
device = "ssd"
[[processes]]
name = "p"
[[processes.regions]]
name = "a"
size = "512KiB"
content = "text"
[[processes.phases]]
kind = "fill"
region = "a"
[[processes.phases]]
kind = "random"
regions = ["a"]
count = 2000
"""

SETTINGS = settings(max_examples=150, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: What a user might type as a number: ASCII and other digits, units, signs, huge values.
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**64 - 1, 2**64, 2**63 - 1, 2**54, 0, -1]),
    st.text(alphabet="0123456789.-+ eEkKmMgGtTpPiIbBsnu/µ\u0661\uff11\u00b2", max_size=12),
    st.floats(allow_nan=True),
    st.booleans(),
)


def _accepts_or_value_error(parse: Any, value: Any) -> None:
    try:
        n = parse(value)
    except ValueError as e:
        assert str(e).startswith("expected"), e
        return
    assert isinstance(n, int) and 0 <= n <= U64_MAX, (value, n)
    if isinstance(value, str):
        assert value.isascii(), f"accepted non-ASCII {value!r}"


@SETTINGS
@given(NUMBERS)
@example("\uff11\uff12MiB")  # full-width digits were accepted
@example("16EiB")  # 2^64: passed the loader, failed in the core as a float
@example(2**64)
def test_sizes_durations_and_bandwidths_are_u64_or_refused(value: Any) -> None:
    _accepts_or_value_error(parse_size, value)
    _accepts_or_value_error(parse_duration, value)
    _accepts_or_value_error(parse_bandwidth, value)


#: Keys whose values flow into the core's time, counts and sizes.
KEYS = [
    "max_time",
    "seed",
    "machine.memory",
    "machine.cpus",
    "machine.swap[0].size",
    "machine.swap[0].device.write_latency",
    "machine.swap[0].device.read_bandwidth",
    "processes[0].regions[0].size",
    "processes[0].regions[0].variants",
    "processes[0].phases[1].count",
    "costs.access_ns",
    "costs.process_quantum_ns",
    "kernel.zswap.max_pool_percent",
    'kernel.switches."zswap.writeback_pause_ms"',
    "cgroups.memory_stat_interval",
    "cgroups.stats_flusher_phase",
]
VALUES = st.one_of(
    st.integers(min_value=-1, max_value=2**66),
    st.sampled_from([0, 1, 2**32, 2**63 - 1, 2**64 - 1, 2**64, 10**12, 10**12 + 1, 10**15 + 1]),
    st.sampled_from(['"1ms"', '"100000000s"', '"1GiB"', '"16EiB"', '"1TiB"', '"\uff11MiB"', '"-1"', '"max"', "1.5", "true"]),
)


def _toml(value: Any) -> str:
    return str(value) if isinstance(value, int) else value


@pytest.mark.native
@settings(SETTINGS, max_examples=60)
@given(st.lists(st.tuples(st.sampled_from(KEYS), VALUES), min_size=1, max_size=3))
@example([("costs.scan_page_ns", 2**60)])  # ~2^54 ns and up wrapped the clock
@example([("machine.swap[0].device.write_latency", 2**64 - 1)])
@example([('kernel.switches."zswap.writeback_pause_ms"', 2**63 - 1)])
@example([("costs.process_quantum_ns", 10**12), ("max_time", '"1ms"')])  # max_time was ignored
@example([("processes[0].regions[0].size", '"1TiB"')])  # aborted for lack of memory
def test_bounded_simulation_runs_within_its_bounds_or_is_refused(overrides: list[tuple[str, Any]]) -> None:
    """The real core on small machines: a result that respects max_time and the phase counts,
    or a ScenarioError (the loader's, the core's bounds or the resource estimate's)."""
    sets = [f"{k}={_toml(v)}" for k, v in overrides]
    try:
        r = reclaimlab.run(MINIMAL, overrides=sets)
    except ScenarioError as e:
        assert str(e).strip(), sets
        return
    limit = r.config.get("max_time_ns")
    assert r.stats["sim_time_ns"] >= 0
    if limit is not None:
        assert r.stats["sim_time_ns"] <= limit, (sets, r.stats)
    fill, rand = r.phase_records[0], r.phase_records[-1]
    assert fill["outcome"] in ("completed", "oom_killed", "time_limit"), fill
    for rec in r.phase_records:
        assert rec["elapsed_s"] >= 0 and rec["accesses"] >= 0, (sets, rec)
        if rec["outcome"] == "completed" and rec["phase"] == rand["phase"] and len(r.phase_records) == 2:
            # A completed random phase made exactly its count (a wrapped clock once ended it early).
            assert rec["accesses"] == r.config["processes"][0]["phases"][1]["phase"]["count"], (sets, rec)
