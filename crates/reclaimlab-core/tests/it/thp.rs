//! Transparent huge pages and compaction on the physical-memory model (mm/phys.rs).

use serde_json::json;

use crate::common::{build, counter, has, run, scenario, MIB};

/// A machine of 64 MiB with no memcg limit: region "a" (non-THP) filled, then `thp_pages` of
/// region "t" (`thp = true`) written, then random writes over both.
fn thp_scenario(a_pages: u64, thp_pages: u64) -> serde_json::Value {
    let mut v = scenario(
        &[("a", a_pages, "text"), ("t", thp_pages, "text")],
        20_000,
        1 << 30,
        false,
        false,
    );
    v["machine"]["memory_bytes"] = json!(64 * MIB);
    v["processes"][0]["regions"][1]["thp"] = json!(true);
    v["processes"][0]["phases"][2]["phase"]["write_percent"] = json!(50);
    v
}

#[test]
fn thp_region_faults_in_huge_pages_when_memory_is_free() {
    // 8 MiB of THP region: 4 huge pages, no fallback, on a mostly free machine.
    let r = run(&thp_scenario(1000, 2048));
    assert_eq!(counter(&r, "vmstat.thp_fault_alloc"), 4);
    assert_eq!(counter(&r, "vmstat.thp_fault_fallback"), 0);
    assert_eq!(counter(&r, "vmstat.compact_stall"), 0);
    // v1 pgpgin counts charge events, one per folio (memcg1_charge_statistics): 1000 small
    // pages and 4 THPs, as the host's 6.18 counts them (docs/validation.md, compaction-thp).
    assert_eq!(counter(&r, "memcg[/t].memory.stat.pgpgin"), 1004);
    // buddyinfo: one line per order.
    let free: u64 = (0..=10)
        .map(|o| counter(&r, &format!("buddyinfo.Normal.{o}")) << o)
        .sum();
    assert_eq!(free, counter(&r, "vmstat.nr_free_pages"));
}

#[test]
fn no_thp_region_no_zone() {
    // Without a THP region (enabled = madvise) the machine has no zone: nothing is exported.
    let v = scenario(&[("a", 1000, "text")], 1000, 1 << 30, false, false);
    let r = run(&v);
    assert!(!has(&r, "vmstat.thp_fault_alloc"));
    assert!(!has(&r, "buddyinfo.Normal.0"));
    // enabled = always gives every anonymous region THPs.
    let mut v = scenario(&[("a", 1024, "text")], 1000, 1 << 30, false, false);
    v["kernel"]["transparent_hugepage"] = json!({"enabled": "always", "defrag": "madvise"});
    let r = run(&v);
    assert_eq!(counter(&r, "vmstat.thp_fault_alloc"), 2);
    // enabled = never: none.
    let mut v = thp_scenario(1000, 2048);
    v["kernel"]["transparent_hugepage"] = json!({"enabled": "never", "defrag": "madvise"});
    assert!(!has(&run(&v), "vmstat.thp_fault_alloc"));
}

#[test]
fn bad_thp_knob_is_named() {
    let mut v = thp_scenario(1000, 2048);
    v["kernel"]["transparent_hugepage"] = json!({"enabled": "sometimes"});
    let cfg: reclaimlab_core::SimConfig = serde_json::from_value(v).unwrap();
    let e = reclaimlab_core::Simulation::new(&cfg)
        .err()
        .expect("refused");
    assert_eq!(e.path, "kernel.transparent_hugepage.enabled");
    assert!(e.reason.contains("\"madvise\""), "{e}");
}

/// Memory full of "a" (global reclaim swaps it out page by page, leaving order-0 holes
/// everywhere), then the THP region: huge pages need direct compaction, some fall back.
#[test]
fn fragmented_memory_compacts_for_thp_and_pages_are_conserved() {
    let mut v = thp_scenario(15_000, 4096);
    // calculate_min_free_kbytes' value for 64 MiB: khugepaged's (3200 kB here, the 5% cap)
    // makes reclaim free enough that an order-9 block is already free when compaction starts
    // (compact_stall and compact_success, nothing scanned); this test is about migration.
    v["kernel"]["vm"]["min_free_kbytes"] = json!(1024);
    // Random writes over "a" first, to scatter what reclaim frees, then fill "t".
    let phases = json!([
        {"name": "fill0", "phase": {"kind": "fill", "region": 0}},
        {"name": "scatter", "phase": {"kind": "random", "regions": [0], "dist": {"kind": "uniform"},
            "count": 30_000, "duration_ns": null, "write_percent": 50}},
        {"name": "fill1", "phase": {"kind": "fill", "region": 1}},
    ]);
    v["processes"][0]["phases"] = phases;
    let mut s = build(&v);
    s.set_check_interval(97);
    let r = s.run_to_end();
    s.check_conservation().unwrap();
    crate::common::dump(&r);
    let alloc = counter(&r, "vmstat.thp_fault_alloc");
    let fallback = counter(&r, "vmstat.thp_fault_fallback");
    assert_eq!(
        alloc + fallback,
        8,
        "one THP attempt per 2 MiB of the region"
    );
    assert!(
        counter(&r, "vmstat.compact_stall") > 0,
        "THP faults on a fragmented machine compact"
    );
    assert!(counter(&r, "vmstat.compact_migrate_scanned") > 0);
    assert_eq!(
        counter(&r, "vmstat.compact_stall"),
        counter(&r, "vmstat.compact_success") + counter(&r, "vmstat.compact_fail")
    );
    assert_eq!(
        counter(&r, "vmstat.compact_daemon_wake"),
        0,
        "defrag = madvise compacts directly in a thp region"
    );
    // Same seed, same result.
    let r2 = build(&v).run_to_end();
    assert_eq!(r.counters, r2.counters);
    // defrag = defer: no direct compaction; the faults wake kswapd, and kcompactd after it
    // if compaction is suitable then, which it never is here: kswapd reclaims for order 0
    // only (no sc.order), so free memory stays below low + compact_gap (docs/model/compaction.md).
    v["kernel"]["transparent_hugepage"] = json!({"enabled": "madvise", "defrag": "defer"});
    let mut s = build(&v);
    s.set_check_interval(97);
    let r = s.run_to_end();
    s.check_conservation().unwrap();
    assert_eq!(counter(&r, "vmstat.compact_stall"), 0);
    assert_eq!(counter(&r, "vmstat.compact_daemon_wake"), 0);
    assert!(counter(&r, "vmstat.thp_fault_fallback") > 0);
    assert_eq!(
        counter(&r, "vmstat.thp_fault_alloc") + counter(&r, "vmstat.thp_fault_fallback"),
        8
    );
}
