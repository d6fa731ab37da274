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

/// Free page reporting (machine.page_reporting_order, crate::page_alloc): a THP taken from
/// memory the machine has had free since its start (reported: the hypervisor dropped its
/// backing) costs page_reported_touch_ns per page more, once; a THP in frames the scenario
/// freed (backed) does not; order-0 pages never do.
#[test]
fn reported_memory_costs_a_thps_first_touch_once() {
    let touch = 10_000u64;
    let fill_ns = |order: u8, a_pages: u64, thp_pages: u64| {
        let mut v = thp_scenario(a_pages, thp_pages);
        v["machine"]["page_reporting_order"] = json!(order);
        v["costs"]["page_reported_touch_ns"] = json!(touch);
        let r = run(&v);
        assert_eq!(counter(&r, "vmstat.thp_fault_alloc"), thp_pages / 512);
        let ns = |name: &str| {
            let p = r.phases.iter().find(|p| p.phase == name).expect("phase");
            p.end_ns - p.start_ns
        };
        (ns("fill0"), ns("fill1"))
    };
    let (a_off, t_off) = fill_ns(0, 1000, 2048);
    let (a_on, t_on) = fill_ns(9, 1000, 2048);
    // 4 THPs from reported pageblocks: 2048 pages each paying the host's fault.
    assert_eq!(t_on - t_off, 2048 * touch);
    assert_eq!(a_on, a_off, "order-0 pages take no reported memory");
    // Order 10: every pageblock of the pristine zone is in an order-10 free block, reported.
    assert_eq!(fill_ns(10, 1000, 2048).1, t_on);
    // Out of range: named.
    let mut v = thp_scenario(1000, 2048);
    v["machine"]["page_reporting_order"] = json!(5);
    let cfg: reclaimlab_core::SimConfig = serde_json::from_value(v).unwrap();
    let e = reclaimlab_core::Simulation::new(&cfg)
        .err()
        .expect("refused");
    assert_eq!(e.path, "machine.page_reporting_order");
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
/// everywhere), then the THP region. Each THP fault's direct reclaim (sc.order = 9) stops
/// after a pass that frees nothing (the pages it wrote out are still under writeback):
/// compaction stays unsuitable (below the low watermark + compact_gap) and is skipped, and the
/// faults fall back, as the 6.12 guest's do (docs/model/compaction.md).
#[test]
fn thp_faults_under_swap_writeback_fall_back() {
    let mut v = thp_scenario(15_000, 4096);
    v["kernel"]["vm"]["min_free_kbytes"] = json!(1024);
    let phases = json!([
        {"name": "fill0", "phase": {"kind": "fill", "region": 0}},
        {"name": "scatter", "phase": {"kind": "random", "regions": [0], "dist": {"kind": "uniform"},
            "count": 30_000, "duration_ns": null, "write_percent": 50}},
        {"name": "fill1", "phase": {"kind": "fill", "region": 1}},
    ]);
    v["processes"][0]["phases"] = phases;
    v["trace"] = json!(["compaction"]);
    let mut s = build(&v);
    s.set_check_interval(97);
    let r = s.run_to_end();
    s.check_conservation().unwrap();
    let alloc = counter(&r, "vmstat.thp_fault_alloc");
    let fallback = counter(&r, "vmstat.thp_fault_fallback");
    assert_eq!(
        alloc + fallback,
        8,
        "one THP attempt per 2 MiB of the region"
    );
    assert!(fallback > 0);
    assert_eq!(counter(&r, "vmstat.compact_stall"), 0);
    assert!(
        counter(
            &r,
            "trace.mm_compaction_suitable.zone.Normal.order.9.ret.skipped.calls"
        ) > 0
    );
    // Each fallback made two async attempts (the __GFP_THISNODE one and the full one) and a
    // sync-light one after its direct reclaim, all skipped.
    assert_eq!(
        counter(
            &r,
            "trace.mm_compaction_try_to_compact_pages.order.9.prio.1.calls"
        ),
        fallback
    );
}

/// One CPU and a second process "q" that fills a copy of "p"'s first region beside p's own
/// fill and exits: their pages interleave in the zone (one process_quantum_ns each), so q's exit
/// leaves free memory in pieces. p's phases wait for q's exit with `after` (process 1, phase 1).
fn add_interleaved_filler(v: &mut serde_json::Value) {
    v["machine"]["cpus"] = json!(1);
    let mut q = v["processes"][0].clone();
    q["name"] = json!("q");
    q["regions"] = json!([v["processes"][0]["regions"][0].clone()]);
    q["phases"] = json!([
        {"name": "fill0", "phase": {"kind": "fill", "region": 0}},
        {"name": "exit", "phase": {"kind": "exit"}},
    ]);
    v["processes"].as_array_mut().unwrap().push(q);
}

/// Two processes fill their regions side by side on one CPU (their pages interleave in the
/// zone, one process_quantum_ns each); "q" exits; then "p" writes its THP region: free memory
/// is plentiful but in pieces, so the huge pages need direct compaction, which migrates p's
/// pages (their records follow them: conservation is checked every 97 events).
#[test]
fn fragmented_memory_compacts_for_thp_and_pages_are_conserved() {
    let mut v = thp_scenario(7000, 4096);
    v["processes"][0]["phases"] = json!([
        {"name": "fill0", "phase": {"kind": "fill", "region": 0}},
        {"name": "fill1", "phase": {"kind": "fill", "region": 1}, "after": {"process": 1, "phase": 1}},
    ]);
    add_interleaved_filler(&mut v);
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
    // defrag = defer: no direct compaction; a fault that finds no free order-9 block wakes
    // kswapd, and with the node balanced kcompactd at once (kcompactd_do_work, run to
    // completion here), which compacts for the order.
    v["kernel"]["transparent_hugepage"] = json!({"enabled": "madvise", "defrag": "defer"});
    let mut s = build(&v);
    s.set_check_interval(97);
    let r = s.run_to_end();
    s.check_conservation().unwrap();
    assert_eq!(counter(&r, "vmstat.compact_stall"), 0);
    assert!(counter(&r, "vmstat.compact_daemon_wake") > 0);
    assert!(counter(&r, "vmstat.compact_daemon_migrate_scanned") > 0);
    assert_eq!(
        counter(&r, "vmstat.thp_fault_alloc") + counter(&r, "vmstat.thp_fault_fallback"),
        8
    );
}

/// Proactive compaction (vm.compaction_proactiveness): the fills leave no free order-9 block,
/// so after "q" exits the node's fragmentation score is near 100, above the high mark (90 at
/// the default 20); kcompactd's 500 ms timeout compacts the zone down to the low mark (80)
/// while "p" sleeps, counted under compact_daemon_* (no compact_daemon_wake), and p's THP
/// faults need fewer direct compactions. With the knob at 0 nothing compacts before them.
#[test]
fn proactive_compaction_runs_on_kcompactd_timeout() {
    let mut v = thp_scenario(8000, 4096);
    // p fills, waits for q's exit, then sleeps 2 s (four kcompactd timeouts) and fills t.
    v["processes"][0]["phases"] = json!([
        {"name": "fill0", "phase": {"kind": "fill", "region": 0}},
        {"name": "sleep", "phase": {"kind": "sleep", "duration_ns": 2_000_000_000u64}, "after": {"process": 1, "phase": 1}},
        {"name": "fill1", "phase": {"kind": "fill", "region": 1}},
    ]);
    add_interleaved_filler(&mut v);
    let mut s = build(&v);
    s.set_check_interval(97);
    let r = s.run_to_end();
    s.check_conservation().unwrap();
    assert!(counter(&r, "vmstat.compact_daemon_migrate_scanned") > 0);
    assert!(counter(&r, "vmstat.pgmigrate_success") > 0);
    assert_eq!(counter(&r, "vmstat.compact_daemon_wake"), 0);
    assert_eq!(counter(&r, "vmstat.thp_fault_alloc"), 8);
    v["kernel"]["vm"]["compaction_proactiveness"] = json!(0);
    let r0 = run(&v);
    assert_eq!(counter(&r0, "vmstat.compact_daemon_migrate_scanned"), 0);
    // Proactive compaction stops at the low mark, not at "no fragmentation": the faults
    // still compact, but less.
    assert!(counter(&r, "vmstat.compact_stall") < counter(&r0, "vmstat.compact_stall"));
}
