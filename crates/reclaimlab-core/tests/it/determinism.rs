use crate::common::*;

#[test]
fn same_seed_same_result() {
    let v = scenario(
        &[("a", 600, "text"), ("b", 600, "random")],
        20_000,
        900,
        true,
        false,
    );
    let a = run(&v);
    let b = run(&v);
    assert_eq!(a.counters, b.counters);
    assert_eq!(
        serde_json::to_string(&a.phases).unwrap(),
        serde_json::to_string(&b.phases).unwrap()
    );
}

/// The seed moves what it drives: with heavy reclaim, the access order (and so which pages
/// refault, are swapped in and written back) and the page bytes (compressed sizes) differ, so
/// the counters that follow them differ; what the seed does not drive (the pages filled, the
/// accesses made) stays the same.
#[test]
fn counters_move_with_the_seed() {
    let mut v = scenario(
        &[
            ("a", 1000, "text"),
            ("b", 2500, "random"),
            ("z", 300, "zero"),
        ],
        60_000,
        1200,
        true,
        false,
    );
    v["kernel"]["zswap"]["max_pool_percent"] = serde_json::json!(1);
    v["processes"][0]["phases"][3]["phase"]["write_percent"] = serde_json::json!(50);
    let a = run(&v);
    v["seed"] = serde_json::json!(8);
    let b = run(&v);
    for key in [
        "vmstat.zswpin",
        "vmstat.zswpwb",
        "vmstat.pswpin",
        "vmstat.workingset_refault_anon",
        "vmstat.pgmajfault",
        "zswap.pool_total_size",
    ] {
        assert!(counter(&a, key) > 0, "{key} should move in this run");
        assert_ne!(
            counter(&a, key),
            counter(&b, key),
            "{key} should depend on the seed"
        );
    }
    let accesses =
        |r: &reclaimlab_core::SimResult| r.phases.iter().map(|p| p.accesses).collect::<Vec<_>>();
    assert_eq!(
        accesses(&a),
        accesses(&b),
        "the seed does not change how many accesses each phase makes"
    );
}

/// Same seed, same result, bit for bit, under everything that makes a run complex at once:
/// two tenants (v2, memory.high and memory.max), heavy reclaim, zswap at its pool limit with
/// worker and shrinker writeback, and zram as the swap device, with writes.
#[test]
fn same_seed_same_result_heavy_reclaim_two_tenants_zram() {
    let mut v = scenario(
        &[
            ("a", 1500, "text"),
            ("b", 1500, "random"),
            ("z", 300, "zero"),
        ],
        40_000,
        1200,
        true,
        true,
    );
    v["kernel"]["zswap"]["max_pool_percent"] = serde_json::json!(1);
    v["kernel"]["zswap"]["shrinker_enabled"] = serde_json::json!(true);
    v["machine"]["swap"][0]["kind"] = serde_json::json!("zram");
    v["processes"][0]["phases"][3]["phase"]["write_percent"] = serde_json::json!(30);
    // A second tenant in its own cgroup under memory.max.
    let mut groups = v["cgroups"]["groups"].as_array().unwrap().clone();
    groups.push(serde_json::json!({"path": "/u", "parent": 0, "limit_bytes": 900 * 4096, "high_bytes": null, "swappiness": null,
        "zswap_max_bytes": null, "zswap_writeback": true}));
    v["cgroups"]["groups"] = serde_json::json!(groups);
    let mut second = v["processes"][0].clone();
    second["name"] = serde_json::json!("q");
    second["cgroup"] = serde_json::json!(2);
    v["processes"] = serde_json::json!([v["processes"][0].clone(), second]);
    let a = run(&v);
    for key in [
        "vmstat.zswpwb",
        "vmstat.pgscan_anon",
        "vmstat.workingset_refault_anon",
        "memcg[/t].memory.events.high",
        "memcg[/u].memory.events.max",
    ] {
        assert!(counter(&a, key) > 0, "{key}: the run should exercise it");
    }
    assert!(
        counter(&a, "zram0.mm_stat.orig_data_size") + counter(&a, "zram0.mm_stat.pages_compacted")
            > 0,
        "zram should be used"
    );
    let b = run(&v);
    assert_eq!(a.counters, b.counters);
    assert_eq!(
        serde_json::to_string(&a.phases).unwrap(),
        serde_json::to_string(&b.phases).unwrap()
    );
    assert_eq!(
        serde_json::to_string(&a.stats).unwrap(),
        serde_json::to_string(&b.stats).unwrap()
    );
}

/// The global zswap LRU (≤6.7) keeps every entry on the root's list: the conservation check
/// counts them there (it once counted them per page's memcg and fired on the nhat-cold-data
/// baseline).
#[test]
fn page_conservation_every_event_global_zswap_lru() {
    let mut v = scenario(
        &[
            ("a", 1000, "text"),
            ("b", 2500, "random"),
            ("z", 300, "zero"),
        ],
        60_000,
        1200,
        true,
        false,
    );
    v["kernel"]["version"] = serde_json::json!("6.8");
    v["kernel"]["zswap"]["max_pool_percent"] = serde_json::json!(1);
    v["processes"][0]["phases"][3]["phase"]["write_percent"] = serde_json::json!(50);
    v["kernel"]["switches"] = serde_json::json!({"zswap.lru": "global"});
    let mut s = build(&v);
    s.set_check_interval(1);
    let r = s.run_to_end();
    // Entries of a memcg other than the root, all on the root's list.
    assert!(
        counter(&r, "vmstat.zswpout") > 1000,
        "zswap should store pages of /t (the only process is there)"
    );
    s.check_conservation().unwrap();
}

/// Every page is in exactly one place after every event of a long run with swap, zswap at its
/// pool limit (worker writeback), readahead and the zeromap all active (cgroup v1 limit).
#[test]
fn page_conservation_every_event_v1() {
    let mut v = scenario(
        &[
            ("a", 1000, "text"),
            ("b", 2500, "random"),
            ("z", 300, "zero"),
        ],
        60_000,
        1200,
        true,
        false,
    );
    v["kernel"]["zswap"]["max_pool_percent"] = serde_json::json!(1);
    // Writes free the swap copies of pages (write faults free the slot), so pages keep
    // returning to zswap and the pool stays at its limit.
    v["processes"][0]["phases"][3]["phase"]["write_percent"] = serde_json::json!(50);
    let mut s = build(&v);
    s.set_check_interval(1);
    let r = s.run_to_end();
    assert!(
        counter(&r, "vmstat.zswpwb") > 0,
        "the run should exercise writeback"
    );
    assert!(counter(&r, "vmstat.swpout_zero") > 0);
    assert!(counter(&r, "vmstat.pswpin") > 0);
    s.check_conservation().unwrap();
}

/// The same under cgroup v2 memory.high with the zswap shrinker on.
#[test]
fn page_conservation_every_event_v2_shrinker() {
    let mut v = scenario(
        &[
            ("a", 1500, "text"),
            ("b", 1500, "random"),
            ("z", 300, "zero"),
        ],
        30_000,
        1200,
        true,
        true,
    );
    v["kernel"]["zswap"]["shrinker_enabled"] = serde_json::json!(true);
    let mut s = build(&v);
    s.set_check_interval(1);
    let r = s.run_to_end();
    assert!(
        counter(&r, "vmstat.zswpwb") > 0,
        "the shrinker should write back"
    );
    assert!(counter(&r, "memcg[/t].memory.events.high") > 0);
    s.check_conservation().unwrap();
}

/// Conservation with zram as the swap device and zswap in front of it.
#[test]
fn page_conservation_every_event_zram() {
    let mut v = scenario(
        &[
            ("a", 1000, "text"),
            ("b", 2500, "random"),
            ("z", 300, "zero"),
        ],
        30_000,
        1200,
        true,
        false,
    );
    v["kernel"]["zswap"]["max_pool_percent"] = serde_json::json!(1);
    v["machine"]["swap"][0]["kind"] = serde_json::json!("zram");
    v["processes"][0]["phases"][3]["phase"]["write_percent"] = serde_json::json!(50);
    let mut s = build(&v);
    s.set_check_interval(1);
    let r = s.run_to_end();
    assert!(counter(&r, "vmstat.zswpwb") > 0);
    assert!(
        counter(&r, "zram0.mm_stat.pages_compacted") + counter(&r, "zram0.mm_stat.orig_data_size")
            > 0
    );
    s.check_conservation().unwrap();
}

/// v2 memory.max with the zswap shrinker: the reclaim that a swap-in's own charge triggers may
/// write back the very entry being brought in; the swap-in must then use that folio.
#[test]
fn page_conservation_v2_memory_max_shrinker() {
    let mut v = scenario(
        &[("a", 1500, "text"), ("b", 1500, "random")],
        30_000,
        1200,
        true,
        true,
    );
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
