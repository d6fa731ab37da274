//! zswap's allocator is selected by `kernel.zswap.zpool`, within what the kernel version has.

use reclaimlab_core::{ErrorKind, SimConfig, Simulation};
use serde_json::{json, Value};

use crate::common::*;

/// 6.12 (zbud still exists), text pages (~3:1), the pool limited to 1% of memory so that it
/// fills: 20000 pages through a cgroup of 5000.
fn filling_pool(zpool: &str) -> Value {
    let mut v = scenario(&[("a", 20_000, "text")], 20_000, 5_000, true, false);
    v["kernel"]["version"] = json!("6.12");
    v["kernel"]["zswap"]["max_pool_percent"] = json!(1);
    v["kernel"]["zswap"]["zpool"] = json!(zpool);
    v
}

#[test]
fn zbud_holds_two_objects_per_page_and_fills_sooner_than_zsmalloc() {
    let zbud = run(&filling_pool("zbud"));
    let zs = run(&filling_pool("zsmalloc"));
    let pool = |r| counter(r, "zswap.pool_total_size") / 4096;
    let stored = |r| counter(r, "zswap.stored_pages");
    assert!(
        stored(&zbud) > 1000 && stored(&zs) > 1000,
        "both pools in use"
    );
    // zbud: at most two buddies per page; ~1.3 KiB text objects still take a half page each.
    assert!(
        2 * pool(&zbud) >= stored(&zbud),
        "zbud: {} pages for {} objects",
        pool(&zbud),
        stored(&zbud)
    );
    // zsmalloc packs ~3 such objects per page: more pages per stored page with zbud.
    assert!(
        pool(&zbud) * stored(&zs) > pool(&zs) * stored(&zbud),
        "zbud pages/object above zsmalloc's"
    );
    // Both pools reach the same page limit, so zbud stores fewer pages and writes more to disk.
    assert!(
        stored(&zbud) < stored(&zs),
        "zbud {} vs zsmalloc {}",
        stored(&zbud),
        stored(&zs)
    );
    assert!(counter(&zbud, "vmstat.pswpout") > counter(&zs, "vmstat.pswpout"));
    // NR_ZSPAGES counts zsmalloc's pages only.
    assert_eq!(counter(&zbud, "vmstat.nr_zspages"), 0);
    assert!(counter(&zs, "vmstat.nr_zspages") > 0);
    assert!(sim_conserves(&filling_pool("zbud")));
}

fn sim_conserves(v: &Value) -> bool {
    let mut s = build(v);
    s.set_check_interval(512);
    s.run_to_end();
    s.check_conservation().is_ok()
}

fn error_of(v: Value) -> reclaimlab_core::ConfigError {
    let cfg: SimConfig = serde_json::from_value(v).expect("valid JSON shape");
    Simulation::new(&cfg).err().expect("rejected")
}

#[test]
fn unavailable_and_unknown_allocators_are_typed_errors_naming_the_key() {
    let mut v = filling_pool("zbud");
    v["kernel"]["version"] = json!("6.18");
    let e = error_of(v);
    assert_eq!(
        (e.kind, e.path.as_str()),
        (ErrorKind::Unavailable, "kernel.zswap.zpool")
    );
    assert!(e.reason.contains("6.8, 6.10, 6.12"), "{e}");
    let e = error_of(filling_pool("z3fold"));
    assert_eq!(e.kind, ErrorKind::Unavailable);
    assert!(e.reason.contains("not modelled"), "{e}");
    let e = error_of(filling_pool("zsmallok"));
    assert_eq!(
        (e.kind, e.path.as_str()),
        (ErrorKind::Unknown, "kernel.zswap.zpool")
    );
    let mut v = scenario(&[("a", 10, "text")], 1, 100, false, false);
    v["machine"]["swap"][0]["kind"] = json!("zram");
    v["machine"]["swap"][0]["allocator"] = json!("zbud");
    let e = error_of(v);
    assert_eq!(
        (e.kind, e.path.as_str()),
        (ErrorKind::Unavailable, "machine.swap[0].allocator")
    );
    assert!(
        e.reason.contains("mainline zram has only zsmalloc") && e.reason.contains("zram.zpool_api"),
        "{e}"
    );
}

/// zram as the only swap, no zswap, 6.12 (zbud exists), `content` pages through a v1 limit of
/// 3000 pages; `allocator` under seed 004's switch `zram.zpool_api`.
fn zram_on(allocator: &str, content: &str) -> Value {
    let mut v = scenario(&[("a", 8_000, content)], 8_000, 3_000, false, false);
    v["kernel"]["version"] = json!("6.12");
    v["kernel"]["switches"] = json!({"zram.zpool_api": true});
    v["machine"]["swap"][0]["kind"] = json!("zram");
    v["machine"]["swap"][0]["allocator"] = json!(allocator);
    v
}

#[test]
fn zram_on_zbud_keeps_two_objects_per_page_and_needs_more_pages_than_zsmalloc() {
    let zbud = run(&zram_on("zbud", "text"));
    let zs = run(&zram_on("zsmalloc", "text"));
    let mm = |r: &reclaimlab_core::SimResult, k: &str| counter(r, &format!("zram0.mm_stat.{k}"));
    let objects = |r| mm(r, "orig_data_size") / 4096 - mm(r, "same_pages");
    let pages = |r| mm(r, "mem_used_total") / 4096;
    assert!(
        objects(&zbud) > 1000 && objects(&zs) > 1000,
        "both devices in use"
    );
    // zbud: at most two buddies per page, so at least objects/2 pages.
    assert!(
        2 * pages(&zbud) >= objects(&zbud),
        "zbud: {} pages for {} objects",
        pages(&zbud),
        objects(&zbud)
    );
    // zsmalloc's size classes pack ~3 text objects per page: fewer pages per object.
    assert!(
        pages(&zbud) * objects(&zs) > pages(&zs) * objects(&zbud),
        "zbud {} / {}, zsmalloc {} / {}",
        pages(&zbud),
        objects(&zbud),
        pages(&zs),
        objects(&zs)
    );
    // The same stores: the compressed bytes per stored object agree (the codec decides them).
    assert_eq!(
        counter(&zbud, "vmstat.pswpout"),
        counter(&zs, "vmstat.pswpout")
    );
    // zbud cannot compact; NR_ZSPAGES is zsmalloc's only.
    assert_eq!(mm(&zbud, "pages_compacted"), 0);
    assert_eq!(counter(&zbud, "vmstat.nr_zspages"), 0);
    assert!(sim_conserves(&zram_on("zbud", "text")));
    // The switch on with zsmalloc changes nothing: zram through the zpool API is the same pool.
    let mut plain = zram_on("zsmalloc", "text");
    plain["kernel"]["switches"] = json!({});
    assert_eq!(run(&plain).counters, zs.counters);
}

#[test]
fn zram_on_zbud_fails_the_writes_of_pages_stored_uncompressed() {
    // Random pages do not compress: zram stores them as PAGE_SIZE objects (huge), which zbud
    // refuses (more than PAGE_SIZE − header − one chunk): the writes fail.
    let zbud = run(&zram_on("zbud", "random"));
    let zs = run(&zram_on("zsmalloc", "random"));
    let mm = |r: &reclaimlab_core::SimResult, k: &str| counter(r, &format!("zram0.mm_stat.{k}"));
    assert!(
        mm(&zs, "huge_pages") > 1000,
        "zsmalloc keeps them as huge objects"
    );
    assert_eq!(mm(&zbud, "huge_pages"), 0);
    assert_eq!(mm(&zbud, "mem_used_total"), 0);
    assert!(counter(&zbud, "zram0.io_stat.failed_writes") > 1000);
    assert_eq!(counter(&zs, "zram0.io_stat.failed_writes"), 0);
    assert!(sim_conserves(&zram_on("zbud", "random")));
}

#[test]
fn zram_allocator_under_the_switch_must_exist_in_the_version() {
    let mut v = zram_on("zbud", "text");
    v["kernel"]["version"] = json!("6.18");
    let e = error_of(v);
    assert_eq!(
        (e.kind, e.path.as_str()),
        (ErrorKind::Unavailable, "machine.swap[0].allocator")
    );
    assert!(e.reason.contains("does not exist in kernel 6.18"), "{e}");
    let e = error_of(zram_on("zsmallok", "text"));
    assert_eq!(
        (e.kind, e.path.as_str()),
        (ErrorKind::Unknown, "machine.swap[0].allocator")
    );
}

#[test]
fn lowered_json_errors_carry_the_path() {
    let mut v = scenario(&[("a", 10, "text")], 1, 100, false, false);
    v["processes"][0]["regions"][0]["pages"] = json!("many");
    let e = reclaimlab_core::simulation_from_json(&v.to_string())
        .err()
        .expect("rejected");
    assert_eq!(
        (e.kind, e.path.as_str()),
        (ErrorKind::Parse, "processes[0].regions[0].pages")
    );
    let mut v = scenario(&[("a", 10, "text")], 1, 100, false, false);
    v["processes"][0]["regions"][0]["variants"] = json!(0);
    let e = reclaimlab_core::simulation_from_json(&v.to_string())
        .err()
        .expect("rejected");
    assert_eq!(
        e.to_string(),
        "processes[0].regions[0].variants: must be > 0"
    );
}

/// zram (zsmalloc) as the only swap, text pages: a fill through a v1 limit, random reads that
/// swap pages back in (each swap-in from zram frees its slot, thinning the zspages), then a
/// write to zram0's `compact` when `compact` is set.
fn zram_fragmented(compact: bool) -> Value {
    let mut v = scenario(&[("a", 8_000, "text")], 6_000, 3_000, false, false);
    v["kernel"]["version"] = json!("6.12");
    v["machine"]["swap"][0]["kind"] = json!("zram");
    if compact {
        let phases = v["processes"][0]["phases"].as_array_mut().unwrap();
        phases.push(json!({"name": "compact", "phase": {"kind": "zram_write", "device": 0, "file": "compact"}}));
    }
    v
}

#[test]
fn zram_compact_write_frees_the_sparse_zspages_and_counts_pages_compacted() {
    let before = run(&zram_fragmented(false));
    let after = run(&zram_fragmented(true));
    let mm = |r: &reclaimlab_core::SimResult, k: &str| counter(r, &format!("zram0.mm_stat.{k}"));
    // Nothing else ran compaction (no global reclaim: a v1 limit's reclaim has no zsmalloc
    // shrinker), so before the write there was something to compact and nothing compacted.
    assert_eq!(mm(&before, "pages_compacted"), 0);
    let freed = mm(&after, "pages_compacted");
    assert!(freed > 0, "the swap-ins left partial zspages");
    // The same objects in fewer pages: mem_used_total falls by exactly what was compacted.
    assert_eq!(mm(&after, "orig_data_size"), mm(&before, "orig_data_size"));
    assert_eq!(
        mm(&after, "compr_data_size"),
        mm(&before, "compr_data_size")
    );
    assert_eq!(
        mm(&after, "mem_used_total") + freed * 4096,
        mm(&before, "mem_used_total")
    );
    assert_eq!(
        mm(&after, "mem_used_max"),
        mm(&before, "mem_used_max"),
        "a maximum, not a gauge"
    );
    assert_eq!(
        counter(&after, "vmstat.nr_zspages") + freed,
        counter(&before, "vmstat.nr_zspages")
    );
    // The pages went back to the free pages.
    assert_eq!(
        counter(&after, "vmstat.nr_free_pages"),
        counter(&before, "vmstat.nr_free_pages") + freed
    );
    // zs_compact leaves nothing freeable: a classes table shows no freeable page.
    let mut s = build(&zram_fragmented(true));
    s.set_check_interval(256);
    s.run_to_end();
    s.check_conservation().unwrap();
    let pools = s.zsmalloc_classes();
    let zram = pools.iter().find(|p| p.pool == "zram0").unwrap();
    assert_eq!(zram.classes.iter().map(|c| c.freeable).sum::<u64>(), 0);
    assert_eq!(
        zram.classes.iter().map(|c| c.pages_used).sum::<u64>(),
        mm(&after, "mem_used_total") / 4096
    );
    let mut sparse = build(&zram_fragmented(false));
    sparse.run_to_end();
    let zram = sparse
        .zsmalloc_classes()
        .into_iter()
        .find(|p| p.pool == "zram0")
        .unwrap();
    assert_eq!(
        zram.classes.iter().map(|c| c.freeable).sum::<u64>(),
        freed,
        "the table's freeable is what compaction frees"
    );
}

#[test]
fn zram_write_needs_a_zram_device() {
    let mut v = zram_fragmented(true);
    v["processes"][0]["phases"][2]["phase"]["device"] = json!(1);
    let e = error_of(v);
    assert_eq!(e.path, "processes[0].phases[2]");
    assert!(
        e.reason.contains("zram1/compact") && e.reason.contains("1 zram device"),
        "{e}"
    );
}

#[test]
fn global_reclaim_compacts_zswaps_pool_through_the_zsmalloc_shrinker() {
    // No memcg limit: 64 MiB of text through 48 MiB of RAM, so kswapd and direct reclaim run
    // shrink_slab on the root, which calls zswap's pool's compaction shrinker; random reads
    // load (and free) entries and thin the zspages it compacts.
    let mut v = scenario(&[("a", 16_384, "text")], 60_000, 1 << 30, true, false);
    v["machine"]["memory_bytes"] = json!(48 * MIB);
    v["trace"] = json!(["shrinker"]);
    let r = run(&v);
    let freed = counter(&r, "trace.mm_shrink_slab_end.zs_shrinker_scan.retval");
    assert!(
        counter(&r, "vmstat.zswpin") > 10_000,
        "entries were loaded and freed"
    );
    assert!(freed > 0, "the shrinker compacted zswap's pool");
    // The pool's pages are the zspages that remain: pool_total_size is NR_ZSPAGES.
    assert_eq!(
        counter(&r, "zswap.pool_total_size"),
        counter(&r, "vmstat.nr_zspages") * 4096
    );
    let mut s = build(&v);
    s.set_check_interval(1024);
    s.run_to_end();
    s.check_conservation().unwrap();
}
