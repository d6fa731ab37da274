//! kernel_alloc phases: high-order kernel allocations through the zone (mm/kalloc.rs).

use serde_json::{json, Value};

use crate::common::{build, counter, has, run, scenario, MIB};

fn kalloc(count: u32, order: u8, fallback: Option<u8>) -> Value {
    json!({"kind": "kernel_alloc", "count": count, "order": order, "fallback_order": fallback, "migratetype": "unmovable"})
}

/// A 64 MiB machine without a memcg limit; region "a" of `a_pages` filled (global reclaim
/// swaps the excess out page by page), random writes over it to scatter what reclaim frees,
/// then `phases`, then more random writes (so the conservation checks run while the blocks
/// are held: a run's end frees them with its processes).
fn fragmented(a_pages: u64, phases: &[Value]) -> Value {
    let mut v = scenario(&[("a", a_pages, "text")], 0, 1 << 30, false, false);
    v["machine"]["memory_bytes"] = json!(64 * MIB);
    let mut ph = vec![
        json!({"name": "fill0", "phase": {"kind": "fill", "region": 0}}),
        json!({"name": "scatter", "phase": {"kind": "random", "regions": [0], "dist": {"kind": "uniform"},
            "count": 30_000, "duration_ns": null, "write_percent": 50}}),
    ];
    for (k, p) in phases.iter().enumerate() {
        ph.push(json!({"name": format!("k{k}"), "phase": p}));
    }
    ph.push(json!({"name": "after", "phase": {"kind": "random", "regions": [0], "dist": {"kind": "uniform"},
        "count": 5_000, "duration_ns": null, "write_percent": 50}}));
    v["processes"][0]["phases"] = json!(ph);
    v
}

fn checked_run(v: &Value) -> reclaimlab_core::SimResult {
    let mut s = build(v);
    s.set_check_interval(7);
    let r = s.run_to_end();
    s.check_conservation().unwrap();
    r
}

fn outcome(r: &reclaimlab_core::SimResult, phase: &str) -> String {
    let rec = r
        .phases
        .iter()
        .find(|p| p.phase == phase)
        .expect("phase recorded");
    rec.outcome.to_string()
}

#[test]
fn free_machine_allocates_without_stalls_and_exit_frees_the_blocks() {
    // 1000 pages used of 16384: 100 kernel stacks (order 2) come off the free lists.
    let mut v = scenario(&[("a", 1000, "text")], 0, 1 << 30, false, false);
    v["machine"]["memory_bytes"] = json!(64 * MIB);
    let base = v["processes"][0]["phases"][0].clone();
    v["processes"][0]["phases"] =
        json!([base.clone(), {"name": "fork", "phase": kalloc(100, 2, None)}]);
    let r = checked_run(&v);
    assert_eq!(outcome(&r, "fork"), "completed");
    assert_eq!(counter(&r, "vmstat.allocstall_normal"), 0);
    assert_eq!(counter(&r, "vmstat.compact_stall"), 0);
    assert_eq!(counter(&r, "slub.order_fallback"), 0);
    let free: u64 = (0..=10)
        .map(|o| counter(&r, &format!("buddyinfo.Normal.{o}")) << o)
        .sum();
    assert_eq!(free, counter(&r, "vmstat.nr_free_pages"));
    // The same with an exit after it: the 400 pages go back, so free memory is what it is
    // without the phase (the zone needs no kernel_alloc to be exported then: compare counts).
    v["processes"][0]["phases"] = json!([base.clone(), {"name": "fork", "phase": kalloc(100, 2, None)}, {"name": "exit", "phase": {"kind": "exit"}}]);
    let with = checked_run(&v);
    v["processes"][0]["phases"] = json!([base, {"name": "exit", "phase": {"kind": "exit"}}]);
    let without = run(&v);
    assert!(
        !has(&without, "buddyinfo.Normal.0"),
        "no kernel_alloc, no THP: no zone"
    );
    assert_eq!(
        counter(&with, "vmstat.nr_free_pages"),
        counter(&without, "vmstat.nr_free_pages")
    );
    // Before the exit the blocks were held: 400 pages fewer free than after it (which also
    // freed region "a" and its page tables).
    assert!(
        counter(&r, "vmstat.nr_free_pages") + 400 + 1000 <= counter(&with, "vmstat.nr_free_pages")
    );
}

/// Memory full and scattered: order-3 slabs need compaction (and reclaim) before 4.4's SLUB
/// (slub.nowait_high_order = false), and fall back to order 0 at once after it.
#[test]
fn slub_high_order_slabs_compact_or_fall_back_by_switch() {
    let mut v = fragmented(20_000, &[kalloc(300, 3, Some(0))]);
    v["kernel"]["switches"] = json!({"slub.nowait_high_order": false});
    let old = checked_run(&v);
    assert_eq!(outcome(&old, "k0"), "completed");
    assert!(
        counter(&old, "vmstat.compact_stall") > 0,
        "slabs compact on a fragmented machine"
    );
    assert!(counter(&old, "vmstat.allocstall_normal") > 0, "and reclaim");
    assert_eq!(
        counter(&old, "vmstat.compact_stall"),
        counter(&old, "vmstat.compact_success") + counter(&old, "vmstat.compact_fail")
    );
    // The stalls are allocation-stall latencies of the phase.
    let lat = old
        .latency
        .phases
        .iter()
        .find(|p| p.phase == "k0")
        .expect("phase latency");
    assert!(
        lat.kinds.get("alloc_stall").is_some_and(|h| h.count > 0),
        "{:?}",
        lat.kinds.keys().collect::<Vec<_>>()
    );

    v["kernel"]["switches"] = json!({"slub.nowait_high_order": true});
    let new = checked_run(&v);
    assert_eq!(
        counter(&new, "vmstat.compact_stall"),
        0,
        "no reclaim, no compaction for s->oo"
    );
    assert!(counter(&new, "slub.order_fallback") > counter(&old, "slub.order_fallback"));
    // Same seed, same result.
    assert_eq!(new.counters, checked_run(&v).counters);
}

/// Kernel stacks (GFP_KERNEL, no __GFP_NORETRY) retry with rising compaction priority: sync
/// compaction that fails defers later attempts unless compaction.defer is off.
#[test]
fn kernel_stacks_retry_and_deferral_switch_counts() {
    let v = fragmented(20_000, &[kalloc(400, 2, None)]);
    let r = checked_run(&v);
    assert_eq!(outcome(&r, "k0"), "completed");
    assert!(counter(&r, "vmstat.compact_stall") > 0);
    let mut off = v.clone();
    off["kernel"]["switches"] = json!({"compaction.defer": false});
    let r_off = checked_run(&off);
    // Without deferral no attempt is skipped: at least as many compactions run.
    assert!(
        counter(&r_off, "vmstat.compact_migrate_scanned")
            >= counter(&r, "vmstat.compact_migrate_scanned")
    );
}

#[test]
fn bad_kernel_alloc_is_named() {
    for (phase, want) in [
        (kalloc(1, 11, None), "order must be at most 10"),
        (
            kalloc(1, 3, Some(3)),
            "fallback_order must be below order (3)",
        ),
    ] {
        let mut v = scenario(&[("a", 100, "text")], 0, 1 << 30, false, false);
        v["processes"][0]["phases"] = json!([{"name": "bad", "phase": phase}]);
        let cfg: reclaimlab_core::SimConfig = serde_json::from_value(v).unwrap();
        let e = reclaimlab_core::Simulation::new(&cfg)
            .err()
            .expect("refused");
        assert!(e.path.starts_with("processes[0].phases[0]"), "{e}");
        assert!(e.reason.contains(want), "{e}");
    }
}
