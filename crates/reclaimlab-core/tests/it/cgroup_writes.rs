//! Per-cgroup zswap files on nested v2 cgroups (6.12's obj_cgroup_may_zswap walks up to the
//! root, mem_cgroup_zswap_writeback_enabled checks every ancestor) and the phases that write
//! cgroup files during a run (memory.reclaim, memory.high, memory.max, memory.zswap.*).

use serde_json::{json, Value};

use crate::common::{self, counter, run, MIB};

/// /a and /a/b (v2); the process in /a/b fills 16 MiB of mix1024 pages under /a/b's
/// memory.max of 8 MiB, then runs `extra` phases. `a` and `b` are extra keys of the two groups.
fn nested(a: Value, b: Value, zswap: bool, extra: &[Value]) -> Value {
    let group = |path: &str, parent: u32, extra: &Value| {
        let mut g = json!({"path": path, "parent": parent, "limit_bytes": null, "high_bytes": null, "swappiness": null,
            "zswap_max_bytes": null, "zswap_writeback": true});
        for (k, v) in extra.as_object().unwrap() {
            g[k] = v.clone();
        }
        g
    };
    let mut b = b;
    if b.get("limit_bytes").is_none() {
        b["limit_bytes"] = json!(8 * MIB);
    }
    let mut phases = vec![json!({"name": "fill", "phase": {"kind": "fill", "region": 0}})];
    for (k, p) in extra.iter().enumerate() {
        phases.push(json!({"name": format!("p{k}"), "phase": p}));
    }
    // common::scenario's machine and kernel, with this file's seed, kernel, cgroups and process.
    let mut v = common::scenario(&[("r", 4096, "mix1024")], 1, 0, zswap, true);
    v["seed"] = json!(3);
    v["kernel"]["version"] = json!("6.12");
    v["cgroups"]["groups"] = json!([
        {"path": "/", "parent": null, "limit_bytes": null, "high_bytes": null, "swappiness": null, "zswap_max_bytes": null, "zswap_writeback": true},
        group("/a", 0, &a), group("/a/b", 1, &b)]);
    v["processes"][0]["cgroup"] = json!(2);
    v["processes"][0]["phases"] = json!(phases);
    v
}

fn outcomes(r: &reclaimlab_core::SimResult) -> Vec<&str> {
    r.phases.iter().map(|p| p.outcome).collect()
}

#[test]
fn parent_zswap_max_limits_the_child() {
    // Without a limit the child's pages all fit in zswap; the parent's 256 KiB caps the
    // subtree: the child's pool stays within one entry of it and the rest goes to disk.
    let free = run(&nested(json!({}), json!({}), true, &[]));
    assert!(
        counter(&free, "memcg[/a/b].memory.zswap.current") > MIB,
        "the unlimited run stores more than the cap"
    );
    assert_eq!(counter(&free, "memcg[/a/b].memory.stat.pswpout"), 0);
    let capped = run(&nested(
        json!({"zswap_max_bytes": 256 * 1024}),
        json!({}),
        true,
        &[],
    ));
    let current = counter(&capped, "memcg[/a/b].memory.zswap.current");
    assert!(
        current > 0 && current <= 256 * 1024 + 4096,
        "zswap.current {current}"
    );
    assert_eq!(counter(&capped, "memcg[/a].memory.zswap.current"), current);
    assert!(counter(&capped, "memcg[/a/b].memory.stat.pswpout") > 0);
}

#[test]
fn zswap_max_counts_whole_pages() {
    // zswap_max_write stores pages (6 KiB -> 1 page) and obj_cgroup_may_zswap compares the
    // usage in whole pages: stores stop once the subtree holds a full page, i.e. within one
    // entry of 4 KiB, not of 6 KiB.
    let r = run(&nested(
        json!({}),
        json!({"zswap_max_bytes": 6 * 1024}),
        true,
        &[],
    ));
    let current = counter(&r, "memcg[/a/b].memory.zswap.current");
    assert!(
        (4096..4096 + 1100).contains(&current),
        "zswap.current {current}"
    );
}

#[test]
fn parent_zswap_max_zero_keeps_the_child_out_of_zswap() {
    let r = run(&nested(json!({"zswap_max_bytes": 0}), json!({}), true, &[]));
    assert_eq!(counter(&r, "memcg[/a/b].memory.stat.zswpout"), 0);
    assert!(counter(&r, "memcg[/a/b].memory.stat.pswpout") > 0);
}

#[test]
fn parent_writeback_off_rules_the_child() {
    // The child has memory.zswap.writeback = 1, the parent 0: with zswap full for the subtree
    // nothing may go to disk, neither written back from zswap nor swapped out directly.
    let r = run(&nested(
        json!({"zswap_writeback": false, "zswap_max_bytes": 256 * 1024}),
        json!({}),
        true,
        &[],
    ));
    assert_eq!(counter(&r, "memcg[/a/b].memory.stat.zswpwb"), 0);
    assert_eq!(counter(&r, "memcg[/a/b].memory.stat.pswpout"), 0);
    assert_eq!(
        outcomes(&r),
        ["oom_killed"],
        "nothing can leave memory, so the limit kills"
    );
    // With writeback on, the same cgroups swap to disk.
    let on = run(&nested(
        json!({"zswap_max_bytes": 256 * 1024}),
        json!({}),
        true,
        &[],
    ));
    assert!(counter(&on, "memcg[/a/b].memory.stat.pswpout") > 0);
}

#[test]
fn writeback_off_does_not_block_swap_while_zswap_is_off() {
    // mem_cgroup_zswap_writeback_enabled is true while zswap is disabled (6.12).
    let r = run(&nested(
        json!({"zswap_writeback": false}),
        json!({}),
        false,
        &[],
    ));
    assert!(counter(&r, "memcg[/a/b].memory.stat.pswpout") > 0);
    assert_eq!(outcomes(&r), ["completed"]);
}

#[test]
fn memory_reclaim_reclaims_or_fails_with_eagain() {
    let reclaim = |bytes: u64| json!({"kind": "reclaim", "amount": {"kind": "value", "value": bytes}, "swappiness": null});
    // No limit: 4 MiB of the 16 MiB go to zswap, the write succeeds.
    let r = run(&nested(
        json!({}),
        json!({"limit_bytes": null}),
        true,
        &[reclaim(4 * MIB)],
    ));
    let rec = &r.phases[1];
    assert_eq!((rec.outcome, rec.error), ("completed", None));
    assert!(rec.reclaimed_bytes.unwrap() >= 4 * MIB);
    assert_eq!(rec.written.as_deref(), Some("4194304"));
    assert!(counter(&r, "memcg[/a/b].memory.stat.zswpout") >= 1024);
    // Proactive reclaim counts as memcg reclaim by a task: pgsteal_direct (6.12).
    assert!(counter(&r, "memcg[/a/b].memory.stat.pgsteal_direct") >= 1024);
    // zswap.max 0 and writeback off: nothing can leave memory, -EAGAIN after the retries.
    let r = run(&nested(
        json!({}),
        json!({"limit_bytes": null, "zswap_max_bytes": 0, "zswap_writeback": false}),
        true,
        &[reclaim(4 * MIB)],
    ));
    let rec = &r.phases[1];
    assert_eq!(
        (rec.outcome, rec.error, rec.reclaimed_bytes),
        ("completed", Some("EAGAIN"), Some(0))
    );
}

#[test]
fn memory_reclaim_that_fails_walks_the_priorities_twice_from_6_11() {
    // Anon only and swappiness=0: every try_to_free_mem_cgroup_pages call of memory_reclaim
    // scans nothing (no list is shrunk, so no force_deactivate retry either) and there are 17
    // of them (MAX_RECLAIM_RETRIES retries after the first). With a shrink_node of 100 ms
    // everything else is negligible beside the passes: 13 per call without incremental
    // cgroup iteration, 26 with it (the memcg_full_walk round of 6.12's do_try_to_free_pages).
    let reclaim =
        json!({"kind": "reclaim", "amount": {"kind": "value", "value": 4 * MIB}, "swappiness": 0});
    let passes = |incremental: bool| {
        let mut v = nested(
            json!({}),
            json!({"limit_bytes": null}),
            true,
            std::slice::from_ref(&reclaim),
        );
        v["costs"] = json!({"shrink_node_ns": 100_000_000});
        v["kernel"]["switches"] = json!({"vmscan.incremental_cgroup_iteration": incremental});
        let r = run(&v);
        assert_eq!(r.phases[1].error, Some("EAGAIN"));
        (r.phases[1].end_ns - r.phases[1].start_ns) / 100_000_000
    };
    assert_eq!(passes(false), 17 * 13, "6.10-like");
    assert_eq!(passes(true), 17 * 26, "6.12");
}

#[test]
fn memory_reclaim_swappiness_zero_leaves_anon_alone() {
    let r = run(&nested(
        json!({}),
        json!({"limit_bytes": null}),
        true,
        &[
            json!({"kind": "reclaim", "amount": {"kind": "value", "value": 4 * MIB}, "swappiness": 0}),
        ],
    ));
    assert_eq!(
        r.phases[1].error,
        Some("EAGAIN"),
        "anon only and swappiness=0: nothing to reclaim"
    );
    assert_eq!(counter(&r, "memcg[/a/b].memory.stat.zswpout"), 0);
}

#[test]
fn cgroup_writes_during_the_run() {
    let write =
        |file: &str, value: Value| json!({"kind": "cgroup_write", "file": file, "value": value});
    // memory.high below usage: memory_high_write reclaims down to it, no OOM. (Not below the
    // ~4.4 MiB that zswap's compressed copies of the 16 MiB charge.)
    let r = run(&nested(
        json!({}),
        json!({"limit_bytes": null}),
        true,
        &[write(
            "memory.high",
            json!({"kind": "value", "value": 8 * MIB}),
        )],
    ));
    assert_eq!(outcomes(&r), ["completed", "completed"]);
    assert!(counter(&r, "memcg[/a/b].memory.current") <= 8 * MIB);
    assert_eq!(r.phases[1].written.as_deref(), Some("8388608"));
    // memory.max = half of memory.current, zswap off and no swap room (zswap.writeback 0 does
    // not matter then): memory_max_write reclaims to disk.
    let r = run(&nested(
        json!({}),
        json!({"limit_bytes": null}),
        false,
        &[write(
            "memory.max",
            json!({"kind": "of", "of": "memory.current", "times": 0.5, "minus": 0}),
        )],
    ));
    assert_eq!(outcomes(&r), ["completed", "completed"]);
    let max: u64 = r.phases[1].written.as_deref().unwrap().parse().unwrap();
    assert!(max > 7 * MIB && max < 9 * MIB, "half of ~16 MiB: {max}");
    assert!(counter(&r, "memcg[/a/b].memory.current") <= max);
    // memory.max far below what can be reclaimed (zswap.max 0, writeback off): the write
    // OOM-kills the process, counting oom and oom_kill.
    let r = run(&nested(
        json!({"zswap_writeback": false}),
        json!({"limit_bytes": null, "zswap_max_bytes": 0}),
        true,
        &[write("memory.max", json!({"kind": "value", "value": MIB}))],
    ));
    assert_eq!(outcomes(&r), ["completed", "oom_killed"]);
    assert_eq!(counter(&r, "memcg[/a/b].memory.events.oom"), 1);
    assert_eq!(counter(&r, "memcg[/a/b].memory.events.oom_kill"), 1);
    // zswap.writeback and zswap.max written during the run take effect for later stores.
    let r = run(&nested(
        json!({}),
        json!({"limit_bytes": null}),
        true,
        &[
            write("memory.zswap.max", json!({"kind": "value", "value": 0})),
            json!({"kind": "reclaim", "amount": {"kind": "value", "value": 4 * MIB}, "swappiness": null}),
        ],
    ));
    assert_eq!(counter(&r, "memcg[/a/b].memory.stat.zswpout"), 0);
    assert!(counter(&r, "memcg[/a/b].memory.stat.pswpout") > 0);
}

#[test]
fn cgroup_phases_are_refused_where_the_file_does_not_exist() {
    let mut v = nested(
        json!({}),
        json!({}),
        true,
        &[json!({"kind": "cgroup_write", "file": "memory.high", "value": {"kind": "max"}})],
    );
    v["processes"][0]["cgroup"] = json!(0);
    let cfg: reclaimlab_core::SimConfig = serde_json::from_value(v.clone()).unwrap();
    let e = reclaimlab_core::Simulation::new(&cfg)
        .err()
        .expect("root has no memory.high")
        .to_string();
    assert!(e.contains("root cgroup"), "{e}");
    let mut v = nested(
        json!({}),
        json!({}),
        true,
        &[json!({"kind": "reclaim", "amount": {"kind": "value", "value": 4096}, "swappiness": 10})],
    );
    v["kernel"]["version"] = json!("6.10");
    let cfg: reclaimlab_core::SimConfig = serde_json::from_value(v).unwrap();
    let e = reclaimlab_core::Simulation::new(&cfg)
        .err()
        .expect("no swappiness= before 6.12")
        .to_string();
    assert!(e.contains("memcg.reclaim_swappiness"), "{e}");
}
