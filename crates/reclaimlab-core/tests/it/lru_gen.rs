//! The multi-gen LRU (mm/lru_gen.rs, `kernel.lru_gen.enabled`): conservation with its lists and
//! per-generation counts, its counters, aging and generations, the memcg and root reclaim
//! paths, file pages, min_ttl_ms, and that turning it off changes nothing.

use crate::common::*;
use serde_json::{json, Value};

fn mglru(mut v: Value) -> Value {
    v["kernel"]["lru_gen"] = json!({"enabled": true});
    v
}

/// Global pressure: no memcg limit, a machine of `mib` MiB.
fn global(mut v: Value, mib: u64) -> Value {
    v["machine"]["memory_bytes"] = json!(mib * MIB);
    v["cgroups"]["groups"][1]["limit_bytes"] = Value::Null;
    v["cgroups"]["groups"][1]["high_bytes"] = Value::Null;
    v
}

#[test]
fn conservation_every_event_memcg_reclaim_v1_zswap() {
    let mut v = mglru(scenario(
        &[
            ("a", 1000, "text"),
            ("b", 2500, "random"),
            ("z", 300, "zero"),
        ],
        40_000,
        1200,
        true,
        false,
    ));
    v["kernel"]["zswap"]["max_pool_percent"] = json!(1);
    v["processes"][0]["phases"][3]["phase"]["write_percent"] = json!(50);
    let mut s = build(&v);
    s.set_check_interval(1);
    let r = s.run_to_end();
    s.check_conservation().unwrap();
    // Memcg reclaim: not in pgscan_kswapd/direct of /proc/vmstat, but in pgscan_anon; pgsteal
    // never exceeds pgscan (both count isolated folios).
    assert!(counter(&r, "vmstat.pgscan_anon") > 1000);
    assert_eq!(
        counter(&r, "vmstat.pgscan_kswapd") + counter(&r, "vmstat.pgscan_direct"),
        0
    );
    assert!(counter(&r, "vmstat.pgsteal_anon") <= counter(&r, "vmstat.pgscan_anon"));
    assert!(counter(&r, "vmstat.zswpout") > 0 && counter(&r, "vmstat.pswpout") > 0);
    // The aging ran: max_seq started at MIN_NR_GENS + 1 = 3.
    assert!(counter(&r, "lru_gen.memcg[/t].max_seq") > 3);
    assert!(counter(&r, "vmstat.workingset_refault_anon") > 0);
}

#[test]
fn conservation_every_event_global_reclaim_kswapd_and_direct() {
    let v = mglru(global(
        scenario(
            &[("a", 3000, "text"), ("b", 3000, "random")],
            40_000,
            0,
            false,
            true,
        ),
        24,
    ));
    let mut s = build(&v);
    s.set_check_interval(1);
    let r = s.run_to_end();
    s.check_conservation().unwrap();
    assert!(
        counter(&r, "vmstat.pgscan_kswapd") > 0,
        "kswapd should reclaim"
    );
    assert!(counter(&r, "vmstat.pgsteal_kswapd") + counter(&r, "vmstat.pgsteal_direct") > 500);
    assert_eq!(
        counter(&r, "vmstat.pgdeactivate"),
        0,
        "the multi-gen LRU never deactivates"
    );
    // The histogram covers max_seq - min_seq + 1 generations (2..=4) and sums to the LRU sizes.
    let hist: u64 = (0..4)
        .filter(|k| has(&r, &format!("lru_gen.memcg[/t].gen{k}.anon")))
        .map(|k| counter(&r, &format!("lru_gen.memcg[/t].gen{k}.anon")))
        .sum();
    let lru = counter(&r, "memcg[/t].memory.stat.inactive_anon")
        + counter(&r, "memcg[/t].memory.stat.active_anon");
    assert_eq!(hist * 4096, lru);
}

#[test]
fn conservation_every_event_with_file_pages() {
    let mut v = mglru(scenario(&[("heap", 256, "text")], 1, 1200, false, false));
    v["machine"]["filesystems"] = json!([{"name": "data", "fstype": "ext4", "device": {
        "rotational": false, "read_latency_ns": 100000, "write_latency_ns": 100000,
        "read_bytes_per_s": 1000000000u64, "write_bytes_per_s": 1000000000u64, "max_sectors_kb": 512}}]);
    v["processes"][0]["regions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "f", "pages": 3000, "content": "text", "variants": 64, "file": 0}));
    v["processes"][0]["phases"] = json!([
        {"name": "fill", "phase": {"kind": "fill", "region": 0}},
        {"name": "r1", "phase": {"kind": "read", "region": 1, "passes": 2}},
        {"name": "m1", "phase": {"kind": "mmap", "region": 1, "passes": 1}},
        {"name": "r2", "phase": {"kind": "read", "region": 1, "passes": 1}}]);
    let mut s = build(&v);
    s.set_check_interval(1);
    let r = s.run_to_end();
    s.check_conservation().unwrap();
    assert!(counter(&r, "vmstat.pgsteal_file") > 0);
    assert!(counter(&r, "vmstat.workingset_refault_file") > 0);
    // Reading twice marks folios accessed: under the multi-gen LRU that raises their tier
    // (folio_inc_refs), it never moves them to an active list: no pgactivate from reads.
    assert!(counter(&r, "vmstat.pgactivate") < counter(&r, "vmstat.pgsteal_file"));
}

#[test]
fn off_by_default_and_off_is_the_classic_lru() {
    let v = scenario(
        &[("a", 1000, "text"), ("b", 2500, "random")],
        20_000,
        1200,
        true,
        false,
    );
    let mut off = v.clone();
    off["kernel"]["lru_gen"] = json!({"enabled": false, "min_ttl_ms": 0});
    let (a, b) = (run(&v), run(&off));
    assert_eq!(a.counters, b.counters);
    assert!(!has(&a, "lru_gen.memcg[/t].max_seq"));
    assert!(counter(&a, "vmstat.pgdeactivate") > 0);
    let on = run(&mglru(v));
    assert_ne!(on.counters, a.counters);
}

#[test]
fn deterministic() {
    let v = mglru(scenario(
        &[("a", 1000, "text"), ("b", 2500, "random")],
        20_000,
        1200,
        true,
        true,
    ));
    let (a, b) = (run(&v), run(&v));
    assert_eq!(a.counters, b.counters);
}

/// min_ttl_ms: with every generation younger than the TTL, kswapd OOM-kills instead of
/// thrashing; without it the same run completes.
#[test]
fn min_ttl_ms_oom_kills_from_kswapd() {
    let v = mglru(global(
        scenario(
            &[("a", 3000, "text"), ("b", 3000, "random")],
            40_000,
            0,
            false,
            true,
        ),
        24,
    ));
    let r = run(&v);
    assert_eq!(counter(&r, "vmstat.oom_kill"), 0);
    let mut ttl = v.clone();
    ttl["kernel"]["lru_gen"]["min_ttl_ms"] = json!(60_000);
    let r = run(&ttl);
    assert_eq!(counter(&r, "vmstat.oom_kill"), 1);
    assert_eq!(
        r.phases
            .iter()
            .filter(|p| p.outcome == "oom_killed")
            .count(),
        1
    );
}

/// The hot pages of a skewed workload stay: the multi-gen LRU (aging by page table walks)
/// swaps out fewer pages than it would with no notion of recency at all (a uniform workload
/// over the same memory).
#[test]
fn recency_protects_a_hot_set() {
    let mut hot = mglru(scenario(&[("a", 3000, "text")], 40_000, 1500, false, true));
    hot["processes"][0]["phases"][1]["phase"]["dist"] = json!({"kind": "zipf", "theta": 1.2});
    let uniform = mglru(scenario(&[("a", 3000, "text")], 40_000, 1500, false, true));
    let (h, u) = (run(&hot), run(&uniform));
    assert!(
        counter(&h, "vmstat.pswpin") * 2 < counter(&u, "vmstat.pswpin"),
        "{} vs {}",
        counter(&h, "vmstat.pswpin"),
        counter(&u, "vmstat.pswpin")
    );
}
