"""The host lab's --trace parsing and aggregation (lab.tracing) on trace_pipe lines as this
host's 6.18 kernel printed them: no root, no tracefs needed. The end-to-end run is in
test_lab_trace.py."""

from __future__ import annotations

from reclaimlab.lab import tracing
from reclaimlab.vm import trace as vmtrace

# Captured from trace_pipe (6.18, cgroup v1, a memcg-limited runner and kswapd0).
LINES = [
    " reclaimlab-runn-4242    [001] ..... 13301.512345: mm_vmscan_memcg_reclaim_begin: order=0 gfp_flags=GFP_HIGHUSER_MOVABLE",
    " reclaimlab-runn-4242    [001] ..... 13301.512350: mm_vmscan_lru_shrink_inactive: nid=0 nr_scanned=32 nr_reclaimed=30 "
    "nr_dirty=0 nr_writeback=0 nr_congested=0 nr_immediate=0 nr_activate_anon=2 nr_activate_file=0 nr_ref_keep=0 "
    "nr_unmap_fail=0 priority=12 flags=RECLAIM_WB_ANON|RECLAIM_WB_ASYNC",
    " reclaimlab-runn-4242    [001] ..... 13301.512360: mm_vmscan_lru_shrink_active: nid=0 nr_taken=16 nr_active=0 "
    "nr_deactivated=16 nr_referenced=3 priority=12 flags=RECLAIM_WB_ANON|RECLAIM_WB_ASYNC",
    " reclaimlab-runn-4242    [001] ..... 13301.512370: mm_shrink_slab_start: super_cache_scan+0x0/0x210 00000000a1b2c3d4: "
    "nid: 0 objects to shrink 0 gfp_flags GFP_HIGHUSER_MOVABLE cache items 211 delta 0 total_scan 0 priority 12",
    " reclaimlab-runn-4242    [001] ..... 13301.512371: mm_shrink_slab_end: super_cache_scan+0x0/0x210 00000000a1b2c3d4: "
    "nid: 0 unused scan count 0 new scan count 0 total_scan 0 last shrinker return val 0",
    " reclaimlab-runn-4242    [001] ..... 13301.512380: mm_shrink_slab_start: zswap_shrinker_scan+0x0/0x1c0 000000005e6f7a8b: "
    "nid: 0 objects to shrink 0 gfp_flags GFP_HIGHUSER_MOVABLE cache items 900 delta 56 total_scan 56 priority 12",
    " reclaimlab-runn-4242    [001] ..... 13301.512390: mm_shrink_slab_end: zswap_shrinker_scan+0x0/0x1c0 000000005e6f7a8b: "
    "nid: 0 unused scan count 0 new scan count 0 total_scan 0 last shrinker return val 5",
    " reclaimlab-runn-4242    [001] ..... 13301.512400: mm_vmscan_memcg_reclaim_end: nr_reclaimed=30",
    "         kswapd0-77      [000] ..... 13301.600000: mm_vmscan_kswapd_wake: nid=0 order=0",
    "         kswapd0-77      [000] ..... 13301.600100: mm_vmscan_throttled: nid=0 usec_timeout=100000 usect_delayed=0 "
    "reason=VMSCAN_THROTTLE_WRITEBACK",
    "CPU:1 [LOST 12 EVENTS]",
]


def _count(groups: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in LINES:
        parsed = tracing.parse_line(line)
        if parsed is not None:
            tracing.add_line(out, parsed[1], parsed[2], groups)
    return out


def test_parse_line_reads_pid_event_and_fields() -> None:
    pid, event, fields = tracing.parse_line(LINES[1]) or (0, "", {})
    assert (pid, event) == (4242, "mm_vmscan_lru_shrink_inactive")
    assert fields["nr_scanned"] == "32" and fields["priority"] == "12"
    assert tracing.parse_line(LINES[5]) == (
        4242,
        "mm_shrink_slab_start",
        {"shrink": "zswap_shrinker_scan", "total_scan": "56", "priority": "12"},
    )
    assert tracing.parse_line(LINES[6]) == (4242, "mm_shrink_slab_end", {"shrink": "zswap_shrinker_scan", "retval": "5"})
    assert tracing.parse_line(LINES[-1]) is None
    # A command name with spaces and dashes: the pid is the last -digits before the CPU.
    odd = "  kworker/u8:2-ev ents-31 [000] ..... 5.0: mm_vmscan_memcg_reclaim_end: nr_reclaimed=4"
    assert tracing.parse_line(odd) == (31, "mm_vmscan_memcg_reclaim_end", {"nr_reclaimed": "4"})
    # A module's scan function carries its module after the symbol.
    mod = (
        " x-9 [000] ..... 1.0: mm_shrink_slab_end: foo_scan+0x0/0x40 [foo] 0000000011112222: nid: 0 unused scan count 0 "
        "new scan count 0 total_scan 0 last shrinker return val 7"
    )
    assert tracing.parse_line(mod) == (9, "mm_shrink_slab_end", {"shrink": "foo_scan", "retval": "7"})


def test_lines_aggregate_into_the_vm_labs_keys() -> None:
    out = _count(["vmscan", "shrinker"])
    assert out["trace.mm_vmscan_lru_shrink_inactive.priority.12.calls"] == 1
    assert out["trace.mm_vmscan_lru_shrink_inactive.priority.12.nr_scanned"] == 32
    assert out["trace.mm_vmscan_lru_shrink_inactive.priority.12.nr_reclaimed"] == 30
    assert out["trace.mm_vmscan_lru_shrink_active.priority.12.nr_deactivated"] == 16
    assert out["trace.mm_vmscan_lru_shrink_active.priority.12.nr_taken"] == 16
    assert out["trace.mm_vmscan_memcg_reclaim_begin.calls"] == 1
    assert out["trace.mm_vmscan_memcg_reclaim_end.nr_reclaimed"] == 30
    assert "trace.mm_vmscan_memcg_reclaim_end.calls" not in out  # as the guest's (calls=False)
    assert out["trace.mm_vmscan_kswapd_wake.calls"] == 1
    # The host prints the reason's name, the guest's hist its number: the same key.
    assert out["trace.mm_vmscan_throttled.VMSCAN_THROTTLE_WRITEBACK.calls"] == 1
    assert out["trace.mm_shrink_slab_start.zswap_shrinker_scan.priority.12.total_scan"] == 56
    assert out["trace.mm_shrink_slab_end.zswap_shrinker_scan.retval"] == 5
    assert out["trace.mm_shrink_slab_end.super_cache_scan.calls"] == 1
    # The guest's hist row for the same throttle (reason as a number) gives the same key.
    guest: dict[str, int] = {}
    throttled = next(e for e in vmtrace.EVENTS if e.event == "mm_vmscan_throttled")
    vmtrace.add_row(guest, throttled, {"reason": "1"}, {"hitcount": 1}, ["vmscan"])
    assert guest == {"trace.mm_vmscan_throttled.VMSCAN_THROTTLE_WRITEBACK.calls": 1}


def test_unreadable_lines_of_our_events_are_reported_not_lost() -> None:
    t = tracing.HostTrace(["vmscan"])
    t._count(LINES[1])
    t._count(" x-9 [000] ..... 1.0: mm_vmscan_lru_shrink_inactive: 0 32 30")  # e.g. options/raw
    t._count("CPU:1 [LOST 12 EVENTS]")
    assert t.lines == 1 and len(t.unparsed) == 1


def test_groups_select_events_and_zswap_keeps_only_its_shrinker() -> None:
    only_vmscan = _count(["vmscan"])
    assert not any(k.startswith("trace.mm_shrink_slab") for k in only_vmscan)
    zswap = _count(["zswap"])
    assert {k for k in zswap} == {
        "trace.mm_shrink_slab_start.zswap_shrinker_scan.priority.12.calls",
        "trace.mm_shrink_slab_start.zswap_shrinker_scan.priority.12.total_scan",
        "trace.mm_shrink_slab_end.zswap_shrinker_scan.calls",
        "trace.mm_shrink_slab_end.zswap_shrinker_scan.retval",
    }


def test_check_refuses_a_kernel_without_tracefs() -> None:
    assert "no tracefs" in (tracing.check(False) or "")
