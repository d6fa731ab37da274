//! memcg stats flushes: refault activation and inactive_is_low read the sizes of the last flush.

use crate::common::{counter, run, scenario};

#[test]
fn refaults_activate_only_against_flushed_sizes() {
    // 3000 pages under a 2000-page v1 limit, zswap on, then random reads: refaults galore.
    let base = scenario(&[("a", 3000, "text")], 60_000, 2000, true, false);
    let exact = run(&base);
    let mut never = base.clone();
    never["cgroups"]["stats_flush_ns"] = serde_json::json!(3_600_000_000_000u64); // one flush, at time 0
    let stale = run(&never);
    assert!(counter(&exact, "vmstat.workingset_refault_anon") > 10_000);
    assert!(counter(&exact, "vmstat.workingset_activate_anon") > 0);
    // Flushed once, when every list was empty: the workingset size is 0, nothing activates on
    // refault, and the inactive list never looks low, so only reclaim that fails to make
    // progress (force_deactivate) deactivates.
    assert_eq!(counter(&stale, "vmstat.workingset_activate_anon"), 0);
    let (d_stale, d_exact) = (
        counter(&stale, "vmstat.pgdeactivate"),
        counter(&exact, "vmstat.pgdeactivate"),
    );
    assert!(
        d_stale * 2 < d_exact,
        "pgdeactivate: flushed once {d_stale}, live {d_exact}"
    );
    // An interval shorter than the run lies in between, and 0 means live sizes.
    let mut often = base.clone();
    often["cgroups"]["stats_flush_ns"] = serde_json::json!(1_000_000u64);
    assert!(counter(&run(&often), "vmstat.workingset_activate_anon") > 0);
    let mut zero = base.clone();
    zero["cgroups"]["stats_flush_ns"] = serde_json::json!(0u64);
    assert_eq!(run(&zero).counters, exact.counters);
}

#[test]
fn v1_limit_reclaim_gives_up_when_inactive_anon_empties_between_flushes() {
    // scenarios/validation/oom-v1-edge.toml in small: 6144 pages of text under a 4096-page v1
    // limit, zswap on, then random reads (every swap-in refaults). Refaults activate against
    // the flushed sizes, and deactivation waits for a flush that says the inactive list is
    // low. With a flush every second, the inactive anon list drains to empty in between while
    // the flushed sizes still say "not low"; shrink_lruvec then has no scan target (its loop
    // runs only while inactive anon or a file list has one, so not even force_deactivate is
    // reached), try_to_free_mem_cgroup_pages returns 0 through every retry and the charge ends
    // in the memcg OOM killer, as on this host's 6.18 (docs/model/memcg.md).
    let mut stale = scenario(&[("a", 6144, "text")], 1_200_000, 4096, true, false);
    stale["cgroups"]["stats_flush_ns"] = serde_json::json!(1_000_000_000u64);
    let r = run(&stale);
    assert_eq!(counter(&r, "vmstat.oom_kill"), 1);
    let killed = &r.phases[1];
    assert_eq!(killed.outcome, "oom_killed");
    assert!(killed.accesses < 1_200_000);
    // The same run with live sizes (0) or a flush every 100 ms: deactivation keeps the
    // inactive list supplied and every access completes.
    for ns in [0u64, 100_000_000] {
        let mut fresh = stale.clone();
        fresh["cgroups"]["stats_flush_ns"] = serde_json::json!(ns);
        let r = run(&fresh);
        assert_eq!(counter(&r, "vmstat.oom_kill"), 0, "stats_flush_ns {ns}");
        assert_eq!(r.phases[1].accesses, 1_200_000, "stats_flush_ns {ns}");
    }
}

#[test]
fn folios_in_the_lru_add_batch_are_not_a_scan_target() {
    // The same workload with no flush after time 0: the flushed sizes never say the inactive
    // list is low, so nothing deactivates and the inactive anon list drains through reference
    // activations alone. When only the last swapped-in folios are left inactive, they wait
    // in the task's lru_add batch (mm/lru_add.rs), lruvec_lru_size does not count them, and
    // limit reclaim has no scan target: OOM, as this host's 6.18 killed oom-v1-edge's runner
    // before any flush after the fill. Were those folios on the list, reclaim would evict
    // them again one by one and the run would complete.
    for page_cluster in [0u64, 3] {
        let mut v = scenario(&[("a", 6144, "text")], 300_000, 4096, true, false);
        v["cgroups"]["stats_flush_ns"] = serde_json::json!(3_600_000_000_000u64);
        v["kernel"]["vm"]["page_cluster"] = serde_json::json!(page_cluster);
        let r = run(&v);
        assert_eq!(
            counter(&r, "vmstat.oom_kill"),
            1,
            "page-cluster {page_cluster}"
        );
        assert_eq!(counter(&r, "vmstat.pgdeactivate"), 0);
        assert!(r.phases[1].accesses < 300_000);
    }
}
