//! memory.peak through kept descriptors (memcg_peak.rs, 6.12's peak_write/peak_show): each
//! written descriptor reads its own peak; a plain read the cgroup's; the phase records carry
//! what each cgroup_read read.

use serde_json::{json, Value};

use crate::common::{self, counter, MIB};

/// /t (v2, no limit): "hog" fills 4 MiB once "watch" has reset its first descriptor, then
/// exits; "watch" (no memory) runs `after` phases once the hog exited.
fn two(before: &[Value], after: &[Value]) -> Value {
    let mut v = common::scenario(&[("r", 1024, "text")], 1, 1 << 30, false, true);
    v["kernel"]["version"] = json!("6.12");
    let named = |pre: &str, ps: &[Value]| -> Vec<Value> {
        ps.iter()
            .enumerate()
            .map(|(k, p)| json!({"name": format!("{pre}{k}"), "phase": p}))
            .collect()
    };
    let mut watch = named("b", before);
    let mut later = named("a", after);
    later[0]["after"] = json!({"process": 0, "phase": 1});
    watch.append(&mut later);
    v["processes"][0]["phases"] = json!([
        {"name": "fill", "phase": {"kind": "fill", "region": 0}, "after": {"process": 1, "phase": before.len() - 1}},
        {"name": "exit", "phase": {"kind": "exit"}},
    ]);
    v["processes"][0]["name"] = json!("hog");
    v["processes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "watch", "cgroup": 1, "regions": [], "phases": watch}));
    v
}

fn reads(r: &reclaimlab_core::SimResult) -> Vec<(String, u64)> {
    r.phases
        .iter()
        .filter_map(|p| p.read.map(|v| (p.phase.clone(), v)))
        .collect()
}

fn open(fd: u32) -> Value {
    json!({"kind": "cgroup_open", "file": "memory.peak", "fd": fd})
}
fn reset(fd: u32) -> Value {
    json!({"kind": "cgroup_write", "file": "memory.peak", "value": {"kind": "reset"}, "fd": fd})
}
fn read_fd(fd: u32) -> Value {
    json!({"kind": "cgroup_read", "file": "memory.peak", "fd": fd})
}

#[test]
fn a_reset_descriptor_reads_its_own_peak_and_6_12s_peers_keep_only_the_usage() {
    let plain = json!({"kind": "cgroup_read", "file": "memory.peak"});
    let r = common::run(&two(
        &[open(0), reset(0)],
        &[
            read_fd(0),
            json!({"kind": "cgroup_read", "file": "memory.current"}),
            open(1),
            read_fd(1),
            reset(1),
            read_fd(0),
            read_fd(1),
            plain.clone(),
            json!({"kind": "cgroup_close", "fd": 1}),
            json!({"kind": "cgroup_write", "file": "memory.peak", "value": {"kind": "reset"}}),
            plain,
        ],
    ));
    let peak = counter(&r, "memcg[/t].memory.peak");
    assert!(peak >= 4 * MIB, "{peak}");
    let v = reads(&r);
    // What the hog left charged after its exit: its charge stock (not drained at exit).
    let left = v[1].1;
    assert!(left > 0 && left < 64 * 4096, "{left}");
    let want = [
        // fd0, reset before the hog: the hog's peak (local_watermark).
        ("a0", peak),
        ("a1", left),
        // fd1, never written: the cgroup's watermark.
        ("a3", peak),
        // fd1's reset drops local_watermark to the usage (what the hog left) and raises its
        // peers to the usage: 6.12's fd0 loses the 4 MiB it had seen.
        ("a5", left),
        ("a6", left),
        // A plain read: the watermark, which no descriptor's reset touches.
        ("a7", peak),
        // After a reset through a new descriptor (cg_write), still the watermark.
        ("a10", peak),
    ];
    assert_eq!(
        v,
        want.iter()
            .map(|(k, x)| (k.to_string(), *x))
            .collect::<Vec<_>>()
    );
    assert_eq!(counter(&r, "memcg[/t].memory.peak"), peak);
}

#[test]
fn descriptor_references_are_checked() {
    // A read through a descriptor never opened, a second open of an open one, a close of a
    // closed one: refused at build time, naming the phase.
    for (phases, what) in [
        (vec![read_fd(0)], "fd 0 is not open"),
        (vec![open(0), open(0)], "fd 0 is already open"),
        (
            vec![open(0), json!({"kind": "cgroup_close", "fd": 0}), reset(0)],
            "fd 0 is not open",
        ),
        (
            vec![
                open(0),
                json!({"kind": "cgroup_read", "file": "memory.swap.peak", "fd": 0}),
            ],
            "fd 0 is open on memory.peak, not memory.swap.peak",
        ),
    ] {
        let v = two(&phases, &[json!({"kind": "sleep", "duration_ns": 1})]);
        let cfg: reclaimlab_core::SimConfig = serde_json::from_value(v).unwrap();
        let e = reclaimlab_core::Simulation::new(&cfg)
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.contains("processes[1].phases[") && e.contains(what),
            "{e}"
        );
    }
}
