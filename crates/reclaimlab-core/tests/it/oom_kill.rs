//! The OOM killer's victim and memory.oom.group (6.12's select_bad_process, oom_kill_process,
//! mem_cgroup_get_oom_group): oom_score_adj -1000 spares a task, a charging task at -1000
//! makes the killer take another task and the charge retry, group kills count per task, and
//! memory.events shows a descendant's kills in its ancestors.

use serde_json::{json, Value};

use crate::common::{self, counter, run};

/// /a (v2, memory.swap.max 0, `a` extra keys) holding /a/b; processes (name, cgroup index,
/// pages filled, oom_score_adj, sleep before the fill in ms) fill their region and then sleep
/// 10 s (the memory stays charged).
fn scenario(a: Value, procs: &[(&str, u32, u64, i16, u64)]) -> Value {
    let mut v = common::scenario(&[("r", 16, "zero")], 1, 0, false, true);
    v["kernel"]["version"] = json!("6.12");
    let mut ga = json!({"path": "/a", "parent": 0, "limit_bytes": null, "high_bytes": null, "swappiness": null,
        "zswap_max_bytes": null, "zswap_writeback": true, "swap_max_bytes": 0});
    for (k, x) in a.as_object().unwrap() {
        ga[k] = x.clone();
    }
    v["cgroups"]["groups"] = json!([
        {"path": "/", "parent": null, "limit_bytes": null, "high_bytes": null, "swappiness": null, "zswap_max_bytes": null, "zswap_writeback": true},
        ga,
        {"path": "/a/b", "parent": 1, "limit_bytes": null, "high_bytes": null, "swappiness": null, "zswap_max_bytes": null, "zswap_writeback": true}]);
    v["processes"] = json!(procs
        .iter()
        .map(|(name, cg, pages, adj, delay_ms)| json!({"name": name, "cgroup": cg, "oom_score_adj": adj,
            "regions": [{"name": "r", "pages": pages, "content": "zero", "variants": 1}],
            "phases": [
                {"name": "wait", "phase": {"kind": "sleep", "duration_ns": delay_ms * 1_000_000 + 1}},
                {"name": "fill", "phase": {"kind": "fill", "region": 0}},
                {"name": "hold", "phase": {"kind": "sleep", "duration_ns": 10_000_000_000u64}}]}))
        .collect::<Vec<_>>());
    v
}

fn outcome<'a>(r: &'a reclaimlab_core::SimResult, process: &str) -> Vec<&'a str> {
    r.phases
        .iter()
        .filter(|p| p.process == process)
        .map(|p| p.outcome)
        .collect()
}

const LIMIT: u64 = 2048 * 4096;

#[test]
fn unkillable_charging_task_makes_the_killer_take_another() {
    // "big" holds 1200 pages; "safe" (-1000) then needs 1200 more under 2048: the killer
    // cannot take it, takes "big", and safe's charge succeeds.
    let r = run(&scenario(
        json!({"limit_bytes": LIMIT}),
        &[("big", 1, 1200, 0, 0), ("safe", 1, 1200, -1000, 100)],
    ));
    assert_eq!(outcome(&r, "big"), ["completed", "completed", "oom_killed"]);
    assert_eq!(outcome(&r, "safe"), ["completed", "completed", "completed"]);
    assert_eq!(counter(&r, "memcg[/a].memory.events.oom_kill"), 1);
    assert_eq!(counter(&r, "vmstat.oom_kill"), 1);
}

#[test]
fn nothing_killable_fails_the_charge() {
    // Both at -1000: out_of_memory finds no victim; the charging task stops ("oom_failed"),
    // the other keeps its memory, nothing is counted as killed.
    let r = run(&scenario(
        json!({"limit_bytes": LIMIT}),
        &[("a", 1, 1200, -1000, 0), ("b", 1, 1200, -1000, 100)],
    ));
    assert_eq!(outcome(&r, "a"), ["completed", "completed", "completed"]);
    assert_eq!(outcome(&r, "b"), ["completed", "oom_failed"]);
    assert_eq!(counter(&r, "memcg[/a].memory.events.oom_kill"), 0);
    assert!(counter(&r, "memcg[/a].memory.events.oom") > 0);
}

#[test]
fn oom_group_kills_the_subtree_and_events_propagate() {
    // /a has memory.oom.group; the charging task is in /a/b: the group is /a, every task of
    // /a and /a/b dies but the -1000 one; oom_kill counts the victim twice (kernel: the group
    // scan meets it again), in /a/b and, hierarchically, in /a.
    let procs = [
        ("p_a", 1, 100, 0, 0),
        ("safe_a", 1, 100, -1000, 0),
        ("q_b", 2, 100, 0, 0),
        ("hog_b", 2, 4000, 0, 100),
    ];
    let r = run(&scenario(
        json!({"limit_bytes": LIMIT, "oom_group": true}),
        &procs,
    ));
    for p in ["p_a", "q_b", "hog_b"] {
        assert_eq!(outcome(&r, p).last(), Some(&"oom_killed"), "{p}");
    }
    assert_eq!(
        outcome(&r, "safe_a"),
        ["completed", "completed", "completed"]
    );
    assert_eq!(counter(&r, "memcg[/a/b].memory.events.oom_kill"), 3);
    assert_eq!(counter(&r, "memcg[/a].memory.events.oom_kill"), 4);
    assert_eq!(counter(&r, "memcg[/a].memory.events.oom_group_kill"), 1);
    assert_eq!(counter(&r, "memcg[/a/b].memory.events.oom_group_kill"), 0);
    // MEMCG_OOM goes to the memcg over its limit (/a), shown in /a only.
    assert_eq!(counter(&r, "memcg[/a].memory.events.oom"), 1);
    assert_eq!(counter(&r, "memcg[/a/b].memory.events.oom"), 0);
    assert_eq!(counter(&r, "vmstat.oom_kill"), 4);

    // Without memory.oom.group only the charging task dies.
    let r = run(&scenario(json!({"limit_bytes": LIMIT}), &procs));
    assert_eq!(outcome(&r, "hog_b").last(), Some(&"oom_killed"));
    for p in ["p_a", "safe_a", "q_b"] {
        assert_eq!(outcome(&r, p).last(), Some(&"completed"), "{p}");
    }
    assert_eq!(counter(&r, "memcg[/a].memory.events.oom_kill"), 1);
}
