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
