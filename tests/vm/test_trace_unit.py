"""--trace: the guest's hist triggers and their parsing (no guest needed), the simulator's own
counts under the same keys, and the host lab's refusal where the kernel has no tracefs (the host
lab's own parsing: tests/lab/test_lab_tracing.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import reclaimlab
from reclaimlab.errors import ScenarioError
from reclaimlab.lab.probe import _check_trace
from reclaimlab.lower import lower
from reclaimlab.vm import trace
from reclaimlab.vm.plan import make_plan

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "vm" / "tiny-v2.toml"

# Two histograms as Debian's 6.12.117 guest printed them (v2-shrinker, --trace vmscan,shrinker).
SLAB_START = """# event histogram
#
# trigger info: hist:keys=shrink.sym,priority:vals=hitcount,total_scan:sort=hitcount:size=2048 [active]
#

{ shrink: [ffffffff813e4a50] zswap_shrinker_scan                          , priority:          0 } hitcount:          2  total_scan:         92
{ shrink: [ffffffff8145c710] super_cache_scan                             , priority:          0 } hitcount:          2  total_scan:          0
{ shrink: [ffffffff813e4a50] zswap_shrinker_scan                          , priority:         12 } hitcount:        905  total_scan:          0

Totals:
    Hits: 909
    Entries: 3
    Dropped: 0
"""
THROTTLED = """# event histogram
#
# trigger info: hist:keys=reason:vals=hitcount:sort=hitcount:size=2048 [active]
#

{ reason:          1 } hitcount:          4
{ reason:          8 } hitcount:          2

Totals:
    Hits: 6
    Entries: 2
    Dropped: 3
"""
MEMCG_END = """{ common_pid:        198 } hitcount:        903  nr_reclaimed:      40055
{ common_pid:        201 } hitcount:          1  nr_reclaimed:         45
"""


def _files(**hists: str) -> dict[str, str]:
    return {f"{trace.TRACEFS}/events/vmscan/{event}/hist": text for event, text in hists.items()}


def test_parse_hist_sym_keys_values_and_dropped() -> None:
    rows, dropped = trace.parse_hist(SLAB_START)
    assert dropped == 0
    assert rows[0] == ({"shrink": "zswap_shrinker_scan", "priority": "0"}, {"hitcount": 2, "total_scan": 92})
    assert rows[1][0]["shrink"] == "super_cache_scan"
    assert trace.parse_hist(THROTTLED)[1] == 3


def test_counters_keys_match_the_simulators() -> None:
    files = _files(mm_shrink_slab_start=SLAB_START, mm_vmscan_throttled=THROTTLED, mm_vmscan_memcg_reclaim_end=MEMCG_END)
    out, dropped = trace.counters(files, ["vmscan", "shrinker"])
    assert dropped == 3
    assert out["trace.mm_shrink_slab_start.zswap_shrinker_scan.priority.0.calls"] == 2
    assert out["trace.mm_shrink_slab_start.zswap_shrinker_scan.priority.12.calls"] == 905
    assert out["trace.mm_shrink_slab_start.super_cache_scan.priority.0.total_scan"] == 0
    assert out["trace.mm_vmscan_throttled.VMSCAN_THROTTLE_WRITEBACK.calls"] == 4
    assert out["trace.mm_vmscan_throttled.VMSCAN_THROTTLE_CONGESTED.calls"] == 2
    # summed over the pid key; the end event exports its sum only (as the simulator)
    assert out["trace.mm_vmscan_memcg_reclaim_end.nr_reclaimed"] == 40100
    assert "trace.mm_vmscan_memcg_reclaim_end.calls" not in out
    # the simulator's keys for the same groups: every kernel key of a modelled event and
    # shrinker is one of them
    sim = reclaimlab.run(TINY, overrides=['trace=["vmscan", "shrinker"]'])
    sim_keys = {k for k in sim.counters if k.startswith("trace.")}
    modelled = {k for k in out if "super_cache_scan" not in k}
    assert modelled <= sim_keys, sorted(modelled - sim_keys)


def test_zswap_group_keeps_only_the_zswap_shrinker() -> None:
    out, _ = trace.counters(_files(mm_shrink_slab_start=SLAB_START), ["zswap"])
    assert out and all("zswap_shrinker_scan" in k for k in out)
    # ... and only among the shrinkers: with vmscan, the vmscan events stay whole
    out, _ = trace.counters(_files(mm_shrink_slab_start=SLAB_START, mm_vmscan_throttled=THROTTLED), ["vmscan", "zswap"])
    assert out["trace.mm_vmscan_throttled.VMSCAN_THROTTLE_WRITEBACK.calls"] == 4
    assert not any("super_cache_scan" in k for k in out)
    assert trace.traced_events(["zswap"]) == {"mm_shrink_slab_start", "mm_shrink_slab_end"}
    assert trace.event_of("trace.mm_shrink_slab_end.zswap_shrinker_scan.calls") == "mm_shrink_slab_end"
    assert trace.event_of("vmstat.pswpin") is None


def test_plan_installs_triggers_only_when_asked() -> None:
    config = lower(reclaimlab.load(TINY))
    plain = make_plan(config, "r1", 1.0).script
    assert "plan_trace" not in plain and "TRACE_FILES=''" in plain
    traced = make_plan({**config, "trace": ["vmscan", "zswap"]}, "r1", 1.0).script
    assert "plan_trace() {" in traced
    assert (
        "echo hist:keys=priority:vals=nr_scanned,nr_reclaimed:size=2048 > /sys/kernel/tracing/events/vmscan/mm_vmscan_lru_shrink_inactive/trigger"
        in traced
    )
    assert "hist:keys=shrink.sym,priority:vals=total_scan" in traced
    assert "mm_shrink_slab_end/hist" in traced


def test_simulator_exports_trace_keys_only_when_asked() -> None:
    plain = reclaimlab.run(TINY)
    assert not any(k.startswith(("trace.mm_vmscan_lru", "trace.mm_shrink_slab", "memcg_high_penalty")) for k in plain.counters)
    traced = reclaimlab.run(TINY, overrides=['trace=["vmscan"]'])
    c = traced.counters
    # every counter the run had before is unchanged by tracing
    assert {k: v for k, v in c.items() if k in plain.counters} == plain.counters
    assert sum(c[f"trace.mm_vmscan_lru_shrink_inactive.priority.{p}.nr_scanned"] for p in range(13)) == c["memcg[/w].memory.stat.pgscan"]
    assert sum(c[f"trace.mm_vmscan_lru_shrink_inactive.priority.{p}.nr_reclaimed"] for p in range(13)) == c["memcg[/w].memory.stat.pgsteal"]
    assert c["trace.mm_vmscan_memcg_reclaim_begin.calls"] > 0
    assert "memcg_high_penalty.sleeps" in c
    assert not any("shrink_slab" in k for k in c)


def test_bad_trace_group_names_the_key() -> None:
    with pytest.raises(ScenarioError, match="trace"):
        reclaimlab.load(TINY, ['trace=["bogus"]'])


def test_host_lab_refuses_trace_without_tracefs() -> None:
    from dataclasses import replace

    from reclaimlab.lab.probe import probe

    config = lower(reclaimlab.load(TINY, ['trace=["vmscan"]']))
    p = replace(probe(), tracefs_supported=False)
    problems = _check_trace(config, p)
    assert len(problems) == 1 and "--backend vm" in str(problems[0].message) and "no tracefs" in str(problems[0].message)
    assert _check_trace(lower(reclaimlab.load(TINY)), p) == []


def test_cli_trace_option(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from reclaimlab.cli import app

    out = tmp_path / "r.json"
    r = CliRunner().invoke(app, ["run", str(TINY), "--trace", "zswap", "--json", str(out), "--no-progress"])
    assert r.exit_code == 0, r.output
    keys = json.loads(out.read_text())["counters"]
    assert "trace.mm_shrink_slab_end.zswap_shrinker_scan.retval" in keys
    assert not any(k.startswith("trace.mm_vmscan_lru") for k in keys)


# hist output of the compaction group's triggers in a 6.12 guest (compaction-guest, one run):
# numbers for the zone index, the result and the sync flag.
SUITABLE = """# event histogram
{ idx:          1, order:          9, ret:          4 } hitcount:         57
{ idx:          0, order:          9, ret:          1 } hitcount:          3

Totals:
    Hits: 60
    Entries: 2
    Dropped: 0
"""
END = """{ sync:          0, status:          8 } hitcount:         57
{ sync:          1, status:          6 } hitcount:          1
"""


def test_compaction_group_names_zones_and_results_as_the_simulator() -> None:
    files = {
        f"{trace.TRACEFS}/events/compaction/mm_compaction_suitable/hist": SUITABLE,
        f"{trace.TRACEFS}/events/compaction/mm_compaction_end/hist": END,
    }
    out, dropped = trace.counters(files, ["compaction"])
    assert dropped == 0
    assert out["trace.mm_compaction_suitable.zone.DMA32.order.9.ret.continue.calls"] == 57
    assert out["trace.mm_compaction_suitable.zone.DMA.order.9.ret.skipped.calls"] == 3
    assert out["trace.mm_compaction_end.async.status.success.calls"] == 57
    assert out["trace.mm_compaction_end.sync.status.partial_skipped.calls"] == 1
    # The host's trace_pipe prints names (zone=DMA32, mode=async, status=success): same keys.
    row: dict[str, int] = {}
    e = next(e for e in trace.EVENTS if e.event == "mm_compaction_end")
    trace.add_row(row, e, {"sync": "async", "status": "success"}, {"hitcount": 1}, ["compaction"])
    assert row == {"trace.mm_compaction_end.async.status.success.calls": 1}
    # The simulator exports the same keys for a compaction it made (its zone: Normal).
    assert "compaction" in trace.GROUPS
    assert trace.traced_events(["compaction"]) >= {"mm_compaction_suitable", "mm_compaction_try_to_compact_pages"}
