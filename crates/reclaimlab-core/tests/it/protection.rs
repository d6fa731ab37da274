//! memory.min / memory.low protection, memory.swap.max and the peaks (v2; mm/memcg.rs,
//! mm/vmscan.rs). Each test also runs the scenario without the setting, so it fails if the
//! setting were ignored.

use serde_json::{json, Value};

use crate::common::*;

const PAGE: u64 = 4096;

fn group(path: &str, parent: u32, extra: Value) -> Value {
    let mut g = json!({"path": path, "parent": parent, "limit_bytes": null, "high_bytes": null, "swappiness": null,
        "zswap_max_bytes": null, "zswap_writeback": true});
    for (k, v) in extra.as_object().unwrap() {
        g[k] = v.clone();
    }
    g
}

fn fill_then(
    name: &str,
    cgroup: u32,
    pages: u64,
    sleep_before_ns: u64,
    sleep_after_ns: u64,
) -> Value {
    json!({"name": name, "cgroup": cgroup,
        "regions": [{"name": "r", "pages": pages, "content": "text", "variants": 64}],
        "phases": [
            {"name": "wait", "phase": {"kind": "sleep", "duration_ns": sleep_before_ns.max(1)}},
            {"name": "fill", "phase": {"kind": "fill", "region": 0}},
            {"name": "hold", "phase": {"kind": "sleep", "duration_ns": sleep_after_ns.max(1)}}]})
}

/// /p (memory.max 8000 pages) with children /p/a (`a`'s files) and /p/b (`b`'s): a fills 3000
/// pages, then b fills `b_pages`, so reclaim of /p must take the excess from a or b.
fn siblings(a: Value, b: Value, b_pages: u64) -> Value {
    let mut v = scenario(&[("x", 1, "text")], 1, 1, false, true);
    v["cgroups"]["groups"] = json!([
        group("/", 0, json!({"parent": null})),
        group("/p", 0, json!({"limit_bytes": 8000 * PAGE})),
        group("/p/a", 1, a),
        group("/p/b", 1, b),
    ]);
    v["processes"] = json!([
        fill_then("a", 2, 3000, 0, 4_000_000_000),
        fill_then("b", 3, b_pages, 1_000_000_000, 1)
    ]);
    v
}

#[test]
fn memory_min_is_not_reclaimed() {
    let r = run(&siblings(
        json!({"min_bytes": 3000 * PAGE}),
        json!({}),
        7000,
    ));
    let a = counter(&r, "memcg[/p/a].memory.current") / PAGE;
    assert!(a >= 3000, "a kept its memory.min: {a} pages");
    assert_eq!(
        counter(&r, "memcg[/p/a].memory.events.low"),
        0,
        "min is not an event"
    );
    let r = run(&siblings(json!({}), json!({}), 7000));
    let a = counter(&r, "memcg[/p/a].memory.current") / PAGE;
    assert!(a < 2900, "without memory.min a is reclaimed: {a} pages");
}

#[test]
fn memory_low_is_skipped_while_others_are_reclaimable() {
    let r = run(&siblings(
        json!({"low_bytes": 3000 * PAGE}),
        json!({}),
        7000,
    ));
    let a = counter(&r, "memcg[/p/a].memory.current") / PAGE;
    assert!(
        a >= 3000,
        "b was reclaimable, so a kept its memory.low: {a} pages"
    );
    assert_eq!(counter(&r, "memcg[/p/a].memory.events.low"), 0);
}

#[test]
fn memory_low_yields_when_nothing_else_is_reclaimable() {
    // b may not swap (memory.swap.max 0), so its 7000 pages need a below its low: the
    // memcg_low retry reclaims a and counts MEMCG_LOW; memory.min OOM-kills b instead.
    let b = json!({"swap_max_bytes": 0});
    let r = run(&siblings(
        json!({"low_bytes": 3000 * PAGE}),
        b.clone(),
        7000,
    ));
    assert!(counter(&r, "memcg[/p/a].memory.events.low") > 0);
    assert!(counter(&r, "memcg[/p/a].memory.current") / PAGE < 3000);
    assert_eq!(counter(&r, "memcg[/p/b].memory.events.oom_kill"), 0);
    let r = run(&siblings(json!({"min_bytes": 3000 * PAGE}), b, 7000));
    assert!(counter(&r, "memcg[/p/a].memory.current") / PAGE >= 3000);
    assert_eq!(
        counter(&r, "memcg[/p].memory.events.oom_kill"),
        1,
        "b cannot fit above a's memory.min"
    );
}

#[test]
fn recursiveprot_shares_unclaimed_protection_by_usage() {
    // /p/a has memory.low on its parent /p only: without memory_recursiveprot the children of
    // /p have no protection of their own, with it /p's unclaimed low covers them.
    let mk = |recursive: bool| {
        let mut v = scenario(&[("x", 1, "text")], 1, 1, false, true);
        v["cgroups"]["memory_recursiveprot"] = json!(recursive);
        v["cgroups"]["groups"] = json!([
            group("/", 0, json!({"parent": null})),
            group("/top", 0, json!({"limit_bytes": 8000 * PAGE})),
            group("/top/p", 1, json!({"low_bytes": 3000 * PAGE})),
            group("/top/p/a", 2, json!({})),
            group("/top/b", 1, json!({})),
        ]);
        v["processes"] = json!([
            fill_then("a", 3, 3000, 0, 4_000_000_000),
            fill_then("b", 4, 7000, 1_000_000_000, 1)
        ]);
        run(&v)
    };
    let with = counter(&mk(true), "memcg[/top/p/a].memory.current") / PAGE;
    let without = counter(&mk(false), "memcg[/top/p/a].memory.current") / PAGE;
    assert!(
        with >= 3000,
        "recursiveprot: a is covered by /top/p's low ({with} pages)"
    );
    assert!(
        without < 2900,
        "no recursiveprot: a has no protection ({without} pages)"
    );
}

/// /t with memory.max 2000 pages and memory.swap.max `swap_max` pages fills 5000 pages.
fn swap_limited(swap_max: Option<u64>) -> reclaimlab_core::SimResult {
    let mut v = scenario(&[("x", 1, "text")], 1, 1, false, true);
    v["cgroups"]["groups"] = json!([
        group("/", 0, json!({"parent": null})),
        group(
            "/t",
            0,
            json!({"limit_bytes": 2000 * PAGE, "swap_max_bytes": swap_max.map(|p| p * PAGE)})
        ),
    ]);
    v["processes"] = json!([fill_then("p", 1, 5000, 0, 1)]);
    run(&v)
}

#[test]
fn swap_max_limits_swap_and_ooms() {
    let r = swap_limited(Some(1000));
    assert_eq!(
        counter(&r, "memcg[/t].memory.events.oom_kill"),
        1,
        "5000 pages do not fit in 2000 + 1000"
    );
    assert_eq!(
        counter(&r, "memcg[/t].memory.swap.peak") / PAGE,
        1000,
        "swap usage reached memory.swap.max"
    );
    assert!(counter(&r, "memcg[/t].memory.swap.current") / PAGE <= 1000);
    assert!(counter(&r, "memcg[/t].memory.peak") / PAGE >= 2000);
    let (max, fail) = (
        counter(&r, "memcg[/t].memory.swap.events.max"),
        counter(&r, "memcg[/t].memory.swap.events.fail"),
    );
    assert!(max > 0 && fail >= max, "swap.events max {max}, fail {fail}");
    let r = swap_limited(None);
    assert_eq!(
        counter(&r, "memcg[/t].memory.events.oom_kill"),
        0,
        "without memory.swap.max it swaps"
    );
    assert!(counter(&r, "memcg[/t].memory.swap.peak") / PAGE >= 3000);
    assert_eq!(counter(&r, "memcg[/t].memory.swap.events.max"), 0);
}

#[test]
fn swap_max_zero_means_no_swap() {
    let r = swap_limited(Some(0));
    assert_eq!(counter(&r, "memcg[/t].memory.swap.peak"), 0);
    assert_eq!(counter(&r, "memcg[/t].memory.stat.pswpout"), 0);
    assert_eq!(counter(&r, "memcg[/t].memory.events.oom_kill"), 1);
}

#[test]
fn protection_in_the_last_subtree_of_the_tree() {
    // The protected memcg is the last one of the pre-order list and its parent's subtree ends
    // at the end of the list (the walk over a parent's children must stop there).
    let mut v = scenario(&[("x", 1, "text")], 1, 1, false, true);
    v["cgroups"]["memory_recursiveprot"] = json!(true);
    v["cgroups"]["groups"] = json!([
        group("/", 0, json!({"parent": null})),
        group("/b", 0, json!({})),
        group("/p", 0, json!({"low_bytes": 3000 * PAGE})),
        group("/p/a", 2, json!({})),
    ]);
    // b (in /b) fills more than the machine's memory: global reclaim walks every memcg, and
    // /p/a's protection comes from /p's low (memory_recursiveprot).
    v["processes"] = json!([
        fill_then("a", 3, 3000, 0, 4_000_000_000),
        fill_then("b", 1, 140_000, 1_000_000_000, 1)
    ]);
    let r = run(&v);
    assert!(
        counter(&r, "memcg[/p/a].memory.current") / PAGE >= 3000,
        "/p/a kept /p's memory.low"
    );
    assert!(
        counter(&r, "memcg[/b].memory.swap.current") > 0,
        "b was swapped out instead"
    );
}

#[test]
fn mglru_respects_memory_min_in_memcg_and_global_reclaim() {
    // Memcg reclaim (shrink_node's walk, then lru_gen_shrink_lruvec). The MGLRU has no
    // proportional scan (get_scan_count's): a memcg just above its min is evicted from until
    // the next visit finds it at or below, so it can end a batch (MIN_LRU_BATCH) under.
    let memcg = |a: Value| {
        let mut v = siblings(a, json!({}), 7000);
        v["kernel"]["lru_gen"] = json!({"enabled": true});
        counter(&run(&v), "memcg[/p/a].memory.current") / PAGE
    };
    let (with, without) = (memcg(json!({"min_bytes": 3000 * PAGE})), memcg(json!({})));
    assert!(
        with >= 3000 - 64,
        "memcg reclaim kept a's memory.min within a batch: {with} pages"
    );
    assert!(
        without < 2800,
        "without memory.min a is reclaimed: {without} pages"
    );
    // Global reclaim: kswapd's lru_gen_age_node computes the protection, shrink_one skips a.
    // b may not swap (memory.swap.max 0), so a's pages are the only reclaimable ones.
    let mk = |min: bool| {
        let mut v = scenario(&[("x", 1, "text")], 1, 1, false, true);
        v["kernel"]["lru_gen"] = json!({"enabled": true});
        let a = if min {
            json!({"min_bytes": 3000 * PAGE})
        } else {
            json!({})
        };
        v["cgroups"]["groups"] = json!([
            group("/", 0, json!({"parent": null})),
            group("/a", 0, a),
            group("/b", 0, json!({"swap_max_bytes": 0}))
        ]);
        v["processes"] = json!([
            fill_then("a", 1, 3000, 0, 4_000_000_000),
            fill_then("b", 2, 128_000, 1_000_000_000, 1)
        ]);
        counter(&run(&v), "memcg[/a].memory.current") / PAGE
    };
    let (with, without) = (mk(true), mk(false));
    assert!(
        with >= 3000 - 64,
        "global MGLRU reclaim kept a's memory.min within a batch: {with} pages"
    );
    assert!(
        without < 2900,
        "without memory.min a is reclaimed: {without} pages"
    );
}
