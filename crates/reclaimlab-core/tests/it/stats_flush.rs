//! memcg stats flushes (mm/memcg_stats.rs): refault activation and inactive_is_low read the
//! sizes of the last flush; the kernel's periodic flusher, memory.stat reads and the
//! rate-limited flushes of reclaim and refault decide when that was.

use crate::common::{counter, run, scenario};
use reclaimlab_core::mm::memcg_stats::{FLUSHER_PERIOD_NS, FLUSH_TIME_NS};
use serde_json::{json, Value};

/// `scenario`'s random phase bound by `secs` of time instead of a count.
fn for_secs(mut v: Value, secs: u64) -> Value {
    let last = v["processes"][0]["phases"].as_array().unwrap().len() - 1;
    let phase = &mut v["processes"][0]["phases"][last]["phase"];
    phase["count"] = Value::Null;
    phase["duration_ns"] = json!(secs * 1_000_000_000);
    v
}

/// `cgroups.stats_flush`: the kernel's flusher at `dwork_phase_ns` (None: none) and a
/// memory.stat reader every `read_ns` (None: none).
fn flush(v: &mut Value, dwork_phase_ns: Option<u64>, read_ns: Option<u64>) {
    v["cgroups"]["stats_flush"] = json!({"dwork_phase_ns": dwork_phase_ns, "read_ns": read_ns});
}

#[test]
fn refaults_activate_only_against_flushed_sizes() {
    // 3000 pages under a 2000-page v1 limit, zswap on, then random reads: refaults galore.
    let base = scenario(&[("a", 3000, "text")], 60_000, 2000, true, false);
    let exact = run(&base);
    let mut never = base.clone();
    flush(&mut never, None, None); // nothing flushes (the run ends before the rate limit's 4 s)
    let stale = run(&never);
    assert!(
        stale.stats.sim_time_ns < 2 * FLUSH_TIME_NS,
        "{}",
        stale.stats.sim_time_ns
    );
    assert!(counter(&exact, "vmstat.workingset_refault_anon") > 10_000);
    assert!(counter(&exact, "vmstat.workingset_activate_anon") > 0);
    // Never flushed: the workingset size is 0, nothing activates on refault, and the inactive
    // list never looks low, so only reclaim that fails to make progress (force_deactivate)
    // deactivates.
    assert_eq!(counter(&stale, "vmstat.workingset_activate_anon"), 0);
    let (d_stale, d_exact) = (
        counter(&stale, "vmstat.pgdeactivate"),
        counter(&exact, "vmstat.pgdeactivate"),
    );
    assert!(
        d_stale * 2 < d_exact,
        "pgdeactivate: never flushed {d_stale}, live {d_exact}"
    );
    // A reader every millisecond lies in between.
    let mut often = base.clone();
    flush(&mut often, None, Some(1_000_000));
    assert!(counter(&run(&often), "vmstat.workingset_activate_anon") > 0);
}

#[test]
fn the_periodic_flusher_runs_every_flush_time_from_its_phase() {
    // The kernel's flusher at phase 0 flushes at 0, 2.016 s, 4.032 s, ... (FLUSH_TIME on the
    // timer wheel): a reader at those same times finds nothing pending (the flusher reset the
    // counts) and changes nothing, while the flusher at another phase, or a reader every
    // half period, flushes at other times.
    // Under memory.high (v2): reclaim throttles, nothing is killed.
    let base = for_secs(scenario(&[("a", 3000, "text")], 0, 2000, true, true), 5);
    let with = |phase: u64, read: Option<u64>| {
        let mut v = base.clone();
        flush(&mut v, Some(phase), read);
        run(&v)
    };
    let alone = with(0, None);
    assert!(alone.stats.sim_time_ns > 2 * FLUSHER_PERIOD_NS);
    assert_eq!(alone.counters, with(0, Some(FLUSHER_PERIOD_NS)).counters);
    assert_ne!(alone.counters, with(FLUSHER_PERIOD_NS / 2, None).counters);
    assert_ne!(
        alone.counters,
        with(0, Some(FLUSHER_PERIOD_NS / 2)).counters
    );
    // A reader every FLUSH_TIME (2 s) no longer meets the flusher after the first one.
    assert_ne!(alone.counters, with(0, Some(FLUSH_TIME_NS)).counters);
}

#[test]
fn without_the_periodic_flusher_reclaim_flushes_once_it_is_late() {
    // mem_cgroup_flush_stats_ratelimited (prepare_scan_control, workingset_test_recent) flushes
    // only when the periodic flusher is a whole FLUSH_TIME late: with the flusher running it
    // never does; without it, from 2 × FLUSH_TIME on, every reclaim and refault flushes and
    // refaults activate again (against sizes at most the threshold behind).
    let none = |secs: u64| {
        let mut v = for_secs(scenario(&[("a", 3000, "text")], 0, 2000, true, true), secs);
        flush(&mut v, None, None);
        run(&v)
    };
    let (short, long) = (none(3), none(10));
    assert_eq!(counter(&short, "vmstat.workingset_activate_anon"), 0);
    assert!(counter(&short, "vmstat.workingset_refault_anon") > 10_000);
    let live = run(&for_secs(
        scenario(&[("a", 3000, "text")], 0, 2000, true, true),
        10,
    ));
    let (a_long, a_live) = (
        counter(&long, "vmstat.workingset_activate_anon"),
        counter(&live, "vmstat.workingset_activate_anon"),
    );
    // None in the first 4 s, then about as often as with live sizes.
    assert!(2 * a_long > a_live, "ratelimited {a_long}, live {a_live}");
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
    flush(&mut stale, None, Some(1_000_000_000));
    let r = run(&stale);
    assert_eq!(counter(&r, "vmstat.oom_kill"), 1);
    let killed = &r.phases[1];
    assert_eq!(killed.outcome, "oom_killed");
    assert!(killed.accesses < 1_200_000);
    // The same run with live sizes or a reader every 100 ms: deactivation keeps the inactive
    // list supplied and every access completes.
    let mut live = stale.clone();
    live["cgroups"]["stats_flush"] = Value::Null;
    let mut often = stale.clone();
    flush(&mut often, None, Some(100_000_000));
    for (what, v) in [("live", live), ("100 ms", often)] {
        let r = run(&v);
        assert_eq!(counter(&r, "vmstat.oom_kill"), 0, "{what}");
        assert_eq!(r.phases[1].accesses, 1_200_000, "{what}");
    }
}

#[test]
fn folios_in_the_lru_add_batch_are_not_a_scan_target() {
    // The same workload with no flush at all: the flushed sizes never say the inactive
    // list is low, so nothing deactivates and the inactive anon list drains through reference
    // activations alone. When only the last swapped-in folios are left inactive, they wait
    // in the task's lru_add batch (mm/lru_add.rs), lruvec_lru_size does not count them, and
    // limit reclaim has no scan target: OOM, as this host's 6.18 killed oom-v1-edge's runner
    // before any flush after the fill. Were those folios on the list, reclaim would evict
    // them again one by one and the run would complete.
    for page_cluster in [0u64, 3] {
        let mut v = scenario(&[("a", 6144, "text")], 300_000, 4096, true, false);
        flush(&mut v, None, None);
        v["kernel"]["vm"]["page_cluster"] = json!(page_cluster);
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
