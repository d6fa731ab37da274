//! mlocked memory and the unevictable LRU (mm/mlock.rs): a `mlock` region is faulted in whole
//! before the first phase, reclaim never takes its pages, and the unevictable counters agree
//! with each other and with the pages.

use serde_json::{json, Value};

use crate::common::{build, counter, has, run, scenario};

const PAGE: u64 = 4096;

/// One process in `/t` (v1 limit or v2 high of `limit_pages`): region "m" of `mlocked` pages
/// with `mlock = true`, region "a" of `other` pages filled, then random reads over both.
fn mlock_scenario(mlocked: u64, other: u64, limit_pages: u64, v2: bool) -> Value {
    let mut v = scenario(
        &[("m", mlocked, "text"), ("a", other, "text")],
        20_000,
        limit_pages,
        true,
        v2,
    );
    v["processes"][0]["regions"][0]["mlock"] = json!(true);
    // The mlocked region needs no fill: mlock() faulted it in. Fill only "a".
    let phases = v["processes"][0]["phases"].as_array().unwrap().clone();
    v["processes"][0]["phases"] = json!(phases[1..]);
    v
}

/// Everything below the limit pressure: "a" is reclaimed (swapped or in zswap), the mlocked
/// region stays resident whole, on the unevictable list, and every page is accounted for.
fn check_mlocked_stay(v: &Value, mlocked: u64) {
    let mut s = build(v);
    let r = s.run_to_end();
    assert!(
        counter(&r, "vmstat.zswpout") + counter(&r, "vmstat.pswpout") > 1000,
        "the limit made reclaim swap"
    );
    // Still all mlocked (nothing munlocks before exit), and check_conservation ties every
    // PG_mlocked page to residence on its memcg's unevictable list.
    assert_eq!(counter(&r, "vmstat.nr_mlock"), mlocked);
    assert_eq!(counter(&r, "vmstat.nr_unevictable"), mlocked);
    assert_eq!(counter(&r, "meminfo.Mlocked"), mlocked * 4);
    assert_eq!(counter(&r, "meminfo.Unevictable"), mlocked * 4);
    assert_eq!(counter(&r, "vmstat.unevictable_pgs_mlocked"), mlocked);
    assert_eq!(counter(&r, "vmstat.unevictable_pgs_culled"), mlocked);
    assert_eq!(counter(&r, "vmstat.unevictable_pgs_munlocked"), 0);
    s.check_conservation().unwrap();
}

#[test]
fn mlocked_pages_are_never_reclaimed_v1_limit() {
    let v = mlock_scenario(2000, 4000, 3000, false);
    check_mlocked_stay(&v, 2000);
    let r = run(&v);
    assert_eq!(
        counter(&r, "memcg[/t].memory.stat.unevictable"),
        2000 * PAGE
    );
    assert_eq!(
        counter(&r, "memcg[/t].memory.stat.total_unevictable"),
        2000 * PAGE
    );
    assert_eq!(counter(&r, "memcg[/].memory.stat.unevictable"), 0);
    assert_eq!(
        counter(&r, "memcg[/].memory.stat.total_unevictable"),
        2000 * PAGE
    );
    // The mlocked pages are charged: they fill most of the limit, so "a" fits in the rest.
    assert!(
        counter(&r, "memcg[/t].memory.stat.total_inactive_anon")
            + counter(&r, "memcg[/t].memory.stat.total_active_anon")
            <= 1000 * PAGE
    );
}

#[test]
fn mlocked_pages_are_never_reclaimed_v2_high_and_lru_gen() {
    let v = mlock_scenario(2000, 4000, 3000, true);
    check_mlocked_stay(&v, 2000);
    assert_eq!(
        counter(&run(&v), "memcg[/t].memory.stat.unevictable"),
        2000 * PAGE
    );
    // The multi-gen LRU leaves unevictable folios to the classic list as well.
    let mut g = v.clone();
    g["kernel"]["lru_gen"] = json!({"enabled": true});
    check_mlocked_stay(&g, 2000);
}

#[test]
fn exit_munlocks_and_rescues_every_page() {
    let mut v = mlock_scenario(1500, 1000, 1 << 20, true);
    v["processes"][0]["phases"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "exit", "phase": {"kind": "exit"}}));
    let mut s = build(&v);
    let r = s.run_to_end();
    assert_eq!(counter(&r, "vmstat.unevictable_pgs_mlocked"), 1500);
    assert_eq!(counter(&r, "vmstat.unevictable_pgs_culled"), 1500);
    assert_eq!(counter(&r, "vmstat.unevictable_pgs_munlocked"), 1500);
    assert_eq!(counter(&r, "vmstat.unevictable_pgs_rescued"), 1500);
    assert_eq!(counter(&r, "vmstat.nr_mlock"), 0);
    assert_eq!(counter(&r, "vmstat.nr_unevictable"), 0);
    s.check_conservation().unwrap();
}

#[test]
fn no_mlock_region_no_unevictable_keys() {
    let r = run(&scenario(
        &[("a", 1000, "text")],
        1000,
        1 << 20,
        false,
        true,
    ));
    assert!(!has(&r, "vmstat.nr_mlock"));
    assert!(!has(&r, "memcg[/t].memory.stat.unevictable"));
}

#[test]
fn populate_is_one_kernel_entry_throttled_by_the_synchronous_high_check() {
    // memory.high of 1000 pages, 3000 mlocked pages and nothing else: only the synchronous
    // check in try_charge_memcg can act while mlock() runs, reclaim finds nothing evictable,
    // and the task is throttled (penalty sleeps) long before the 3000 pages are in. v2 without
    // swap and a time limit, as test_memcg_high_sync.
    let mut v = mlock_scenario(3000, 1, 1000, true);
    v["machine"]["swap"] = json!([]);
    v["max_time_ns"] = json!(2_000_000_000u64);
    let mut s = build(&v);
    let r = s.run_to_end();
    assert!(counter(&r, "memcg[/t].memory.events.high") > 0);
    assert_eq!(counter(&r, "memcg[/t].memory.events.max"), 0);
    let mlocked = counter(&r, "vmstat.nr_mlock");
    assert!(
        mlocked > 1000 && mlocked < 3000,
        "throttled inside mlock(): {mlocked} pages in"
    );
    // Nothing was reclaimed: the pages are all mlocked.
    assert_eq!(counter(&r, "vmstat.pgsteal_direct"), 0);
    s.check_conservation().unwrap();
}

#[test]
fn mlock_of_a_thp_region_is_refused_by_name() {
    let mut v = mlock_scenario(1000, 1000, 1 << 20, true);
    v["processes"][0]["regions"][0]["thp"] = json!(true);
    let cfg: reclaimlab_core::SimConfig = serde_json::from_value(v).unwrap();
    let e = reclaimlab_core::Simulation::new(&cfg)
        .err()
        .expect("refused");
    assert_eq!(e.path, "processes[0].regions[0].mlock");
}
