//! `after`: a phase starts when a phase of another process has ended (sched.rs).

use serde_json::{json, Value};

use crate::common::{build, run, scenario};
use reclaimlab_core::{SimConfig, Simulation};

/// Two copies of the one-process scenario in one cgroup: "p" and "q", each a fill and a
/// random phase ("measure").
fn two() -> Value {
    let mut v = scenario(&[("a", 2048, "text")], 20_000, 1 << 20, true, false);
    let mut q = v["processes"][0].clone();
    q["name"] = json!("q");
    v["processes"].as_array_mut().unwrap().push(q);
    v
}

fn span(r: &reclaimlab_core::SimResult, process: &str, phase: &str) -> (u64, u64) {
    let p = r
        .phases
        .iter()
        .find(|p| p.process == process && p.phase == phase)
        .unwrap_or_else(|| panic!("no phase {process}/{phase}"));
    (p.start_ns, p.end_ns)
}

#[test]
fn a_process_starts_when_the_named_phase_ends() {
    let plain = run(&two());
    // Without `after` both start at 0 and run side by side.
    assert_eq!(span(&plain, "q", "fill0").0, 0);
    assert!(span(&plain, "q", "fill0").1 > span(&plain, "p", "fill0").0);

    let mut v = two();
    v["processes"][1]["phases"][0]["after"] = json!({"process": 0, "phase": 1});
    let r = run(&v);
    let (_, p_end) = span(&r, "p", "measure");
    let (q_start, _) = span(&r, "q", "fill0");
    assert_eq!(
        q_start, p_end,
        "q's first phase starts the moment p's measure ends"
    );
    assert!(r.phases.iter().all(|p| p.outcome == "completed"));
}

#[test]
fn a_later_phase_waits_and_earlier_ones_run() {
    let mut v = two();
    // q fills at once, then waits for p's fill before its random phase.
    v["processes"][1]["phases"][1]["after"] = json!({"process": 0, "phase": 0});
    v["processes"][0]["phases"][0]["phase"] =
        json!({"kind": "sleep", "duration_ns": 300_000_000u64});
    let r = run(&v);
    assert_eq!(span(&r, "q", "fill0").0, 0);
    let q_fill_end = span(&r, "q", "fill0").1;
    assert!(
        q_fill_end < 300_000_000,
        "q's fill ran while p slept ({q_fill_end} ns)"
    );
    assert_eq!(
        span(&r, "q", "measure").0,
        300_000_000,
        "q's measure waited for p's sleep to end"
    );
}

#[test]
fn a_wait_on_a_process_that_stops_first_ends_with_it() {
    let mut v = two();
    // p exits after its fill: q waits for p's measure, which never runs.
    v["processes"][0]["phases"][1]["phase"] = json!({"kind": "exit"});
    v["processes"][0]["phases"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "never", "phase": {"kind": "sleep", "duration_ns": 1}}));
    v["processes"][1]["phases"][0]["after"] = json!({"process": 0, "phase": 2});
    let r = run(&v);
    assert_eq!(span(&r, "q", "fill0").0, span(&r, "p", "measure").1);
    assert!(r.phases.iter().all(|p| p.phase != "never"));
}

#[test]
fn bad_references_and_cycles_are_refused() {
    let refuse = |v: &Value, want: &str| {
        let cfg: SimConfig = serde_json::from_value(v.clone()).expect("parses");
        let e = Simulation::new(&cfg)
            .err()
            .unwrap_or_else(|| panic!("accepted; wanted {want:?}"))
            .to_string();
        assert!(e.contains(want), "{e}");
    };
    let mut v = two();
    v["processes"][1]["phases"][0]["after"] = json!({"process": 5, "phase": 0});
    refuse(&v, "processes[1].phases[0].after");
    v["processes"][1]["phases"][0]["after"] = json!({"process": 0, "phase": 9});
    refuse(&v, "has no phase 9");
    v["processes"][1]["phases"][0]["after"] = json!({"process": 1, "phase": 0});
    refuse(&v, "its own process");
    // p's measure waits for q's measure, which waits for p's fill... and q's fill for p's measure.
    let mut v = two();
    v["processes"][0]["phases"][1]["after"] = json!({"process": 1, "phase": 1});
    v["processes"][1]["phases"][0]["after"] = json!({"process": 0, "phase": 1});
    refuse(&v, "waits, through `after`, on itself");
    // Not a cycle: q waits for p's fill, p's measure for q's fill.
    let mut v = two();
    v["processes"][1]["phases"][0]["after"] = json!({"process": 0, "phase": 0});
    v["processes"][0]["phases"][1]["after"] = json!({"process": 1, "phase": 0});
    let _ = build(&v);
}

/// A process started by `after` runs at the speed of one started by a sleep of the same length
/// (one event chain, not one per wake-up).
#[test]
fn a_woken_process_runs_at_its_own_speed() {
    let mut v = two();
    v["processes"][1]["phases"][0]["after"] = json!({"process": 0, "phase": 1});
    let r = run(&v);
    let (p0, p1) = span(&r, "p", "fill0");
    let (q0, q1) = span(&r, "q", "fill0");
    assert_eq!(
        q1 - q0,
        p1 - p0,
        "the same fill, alone on the machine, takes as long"
    );
}
