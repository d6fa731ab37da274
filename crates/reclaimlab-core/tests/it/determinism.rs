use crate::common::*;

#[test]
fn same_seed_same_result() {
    let v = scenario(&[("a", 600, "text"), ("b", 600, "random")], 20_000, 900, true, false);
    let a = run(&v);
    let b = run(&v);
    assert_eq!(a.counters, b.counters);
    assert_eq!(serde_json::to_string(&a.phases).unwrap(), serde_json::to_string(&b.phases).unwrap());
}

#[test]
fn different_seed_different_access_order() {
    let v = scenario(&[("a", 600, "text"), ("b", 600, "random")], 20_000, 900, true, false);
    let mut w = v.clone();
    w["seed"] = serde_json::json!(8);
    assert_ne!(run(&v).counters, run(&w).counters);
}

/// Every page is in exactly one place after every event of a long run with swap, zswap at its
/// pool limit (worker writeback), readahead and the zeromap all active (cgroup v1 limit).
#[test]
fn page_conservation_every_event_v1() {
    let mut v = scenario(&[("a", 1000, "text"), ("b", 2500, "random"), ("z", 300, "zero")], 60_000, 1200, true, false);
    v["kernel"]["zswap"]["max_pool_percent"] = serde_json::json!(1);
    // Writes free the swap copies of pages (write faults free the slot), so pages keep
    // returning to zswap and the pool stays at its limit.
    v["processes"][0]["phases"][3]["phase"]["write_percent"] = serde_json::json!(50);
    let mut s = build(&v);
    s.set_check_interval(1);
    let r = s.run_to_end();
    assert!(counter(&r, "vmstat.zswpwb") > 0, "the run should exercise writeback");
    assert!(counter(&r, "vmstat.swpout_zero") > 0);
    assert!(counter(&r, "vmstat.pswpin") > 0);
    s.check_conservation().unwrap();
}

/// The same under cgroup v2 memory.high with the zswap shrinker on.
#[test]
fn page_conservation_every_event_v2_shrinker() {
    let mut v = scenario(&[("a", 1500, "text"), ("b", 1500, "random"), ("z", 300, "zero")], 30_000, 1200, true, true);
    v["kernel"]["zswap"]["shrinker_enabled"] = serde_json::json!(true);
    let mut s = build(&v);
    s.set_check_interval(1);
    let r = s.run_to_end();
    assert!(counter(&r, "vmstat.zswpwb") > 0, "the shrinker should write back");
    assert!(counter(&r, "memcg[/t].memory.events.high") > 0);
    s.check_conservation().unwrap();
}

/// Conservation with zram as the swap device and zswap in front of it.
#[test]
fn page_conservation_every_event_zram() {
    let mut v = scenario(&[("a", 1000, "text"), ("b", 2500, "random"), ("z", 300, "zero")], 30_000, 1200, true, false);
    v["kernel"]["zswap"]["max_pool_percent"] = serde_json::json!(1);
    v["machine"]["swap"][0]["kind"] = serde_json::json!("zram");
    v["processes"][0]["phases"][3]["phase"]["write_percent"] = serde_json::json!(50);
    let mut s = build(&v);
    s.set_check_interval(1);
    let r = s.run_to_end();
    assert!(counter(&r, "vmstat.zswpwb") > 0);
    assert!(counter(&r, "zram0.mm_stat.pages_compacted") + counter(&r, "zram0.mm_stat.orig_data_size") > 0);
    s.check_conservation().unwrap();
}

/// v2 memory.max with the zswap shrinker: the reclaim that a swap-in's own charge triggers may
/// write back the very entry being brought in; the swap-in must then use that folio.
#[test]
fn page_conservation_v2_memory_max_shrinker() {
    let mut v = scenario(&[("a", 1500, "text"), ("b", 1500, "random")], 30_000, 1200, true, true);
    v["cgroups"]["groups"][1]["limit_bytes"] = v["cgroups"]["groups"][1]["high_bytes"].clone();
    v["cgroups"]["groups"][1]["high_bytes"] = serde_json::Value::Null;
    v["kernel"]["zswap"]["shrinker_enabled"] = serde_json::json!(true);
    v["processes"][0]["phases"][2]["phase"]["write_percent"] = serde_json::json!(30);
    for seed in 1..=4 {
        v["seed"] = serde_json::json!(seed);
        let mut s = build(&v);
        s.set_check_interval(1);
        let r = s.run_to_end();
        assert!(counter(&r, "vmstat.zswpwb") > 0);
        s.check_conservation().unwrap();
    }
}
