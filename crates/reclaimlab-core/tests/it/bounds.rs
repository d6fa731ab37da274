//! The bounds of crate::limits: every value at its largest runs without overflow (these tests
//! run in the debug build, where overflow panics), one past it is refused naming the key, and
//! the time limit holds whatever the quantum.

use crate::common::*;
use reclaimlab_core::limits;
use reclaimlab_core::mm::memcg_stats::FLUSHER_PERIOD_NS;
use reclaimlab_core::SimConfig;
use serde_json::{json, Value};

fn small() -> Value {
    scenario(
        &[("a", 300, "text"), ("b", 300, "random")],
        2_000,
        200,
        true,
        false,
    )
}

fn refused(v: &Value) -> reclaimlab_core::ConfigError {
    let cfg: SimConfig = serde_json::from_value(v.clone()).expect("parses");
    match reclaimlab_core::Simulation::new(&cfg) {
        Ok(_) => panic!("should be refused"),
        Err(e) => e,
    }
}

/// Every time-like value at its bound together: the run ends (at the horizon at the latest),
/// without an overflow panic, and no clock goes backwards.
#[test]
fn every_time_at_its_bound_runs_without_overflow() {
    let mut v = small();
    for (k, cost) in [
        ("access_ns", limits::MAX_COST_NS),
        ("scan_page_ns", limits::MAX_COST_NS),
        ("process_quantum_ns", limits::MAX_COST_NS),
    ] {
        v["costs"][k] = json!(cost);
    }
    let dev = &mut v["machine"]["swap"][0]["device"];
    dev["write_latency_ns"] = json!(limits::MAX_LATENCY_NS);
    dev["read_latency_ns"] = json!(limits::MAX_LATENCY_NS);
    dev["write_bytes_per_s"] = json!(1);
    dev["read_bytes_per_s"] = json!(1);
    v["kernel"]["switches"] = json!({"zswap.writeback_pause_ms": limits::MAX_PAUSE_MS});
    v["cgroups"]["stats_flush"] =
        json!({"dwork_phase_ns": FLUSHER_PERIOD_NS - 1, "read_ns": limits::MAX_STATS_READ_NS});
    v["processes"][0]["phases"][2]["phase"] = json!({"kind": "random", "regions": [0, 1], "dist": {"kind": "uniform"},
        "count": null, "duration_ns": limits::MAX_DURATION_NS, "write_percent": 50});
    let mut s = build(&v);
    s.set_check_interval(1);
    let r = s.run_to_end();
    assert!(
        r.stats.sim_time_ns <= limits::TIME_HORIZON_NS,
        "{}",
        r.stats.sim_time_ns
    );
    for p in &r.phases {
        assert!(
            p.start_ns <= p.end_ns && p.end_ns <= limits::TIME_HORIZON_NS,
            "{p:?}"
        );
    }
}

/// A quantum far longer than max_time: the run still stops at max_time, and the time is not 0.
#[test]
fn a_huge_quantum_does_not_skip_max_time() {
    let mut v = small();
    v["costs"]["process_quantum_ns"] = json!(limits::MAX_COST_NS);
    v["max_time_ns"] = json!(1_000_000);
    let r = run(&v);
    assert_eq!(r.stats.sim_time_ns, 1_000_000);
    let last = r.phases.last().unwrap();
    assert_eq!(
        (last.outcome, last.end_ns),
        ("time_limit", 1_000_000),
        "{last:?}"
    );
    // Without max_time the run's time is when its work ended, not the start of its one event.
    v["max_time_ns"] = Value::Null;
    let r = run(&v);
    assert!(
        r.stats.sim_time_ns > 0
            && r.stats.sim_time_ns == r.phases.iter().map(|p| p.end_ns).max().unwrap()
    );
}

/// One past each bound is refused, naming the lowered key, the unit and the bound.
#[test]
fn one_past_each_bound_is_refused_with_key_unit_and_bound() {
    type Set = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Set, &str)> = vec![
        (
            "costs.access_ns",
            Box::new(|v| v["costs"]["access_ns"] = json!(limits::MAX_COST_NS + 1)),
            "ns",
        ),
        (
            "machine.swap[0].device.write_latency_ns",
            Box::new(|v| v["machine"]["swap"][0]["device"]["write_latency_ns"] = json!(u64::MAX)),
            "ns",
        ),
        (
            "max_time_ns",
            Box::new(|v| v["max_time_ns"] = json!(limits::TIME_HORIZON_NS + 1)),
            "ns",
        ),
        (
            "kernel.switches.zswap.writeback_pause_ms",
            Box::new(|v| v["kernel"]["switches"] = json!({"zswap.writeback_pause_ms": i64::MAX})),
            "ms",
        ),
        (
            "cgroups.stats_flush.read_ns",
            Box::new(|v| {
                v["cgroups"]["stats_flush"] = json!({"dwork_phase_ns": 0, "read_ns": u64::MAX})
            }),
            "ns",
        ),
        (
            "cgroups.stats_flush.dwork_phase_ns",
            Box::new(|v| {
                v["cgroups"]["stats_flush"] = json!({"dwork_phase_ns": FLUSHER_PERIOD_NS})
            }),
            "ns",
        ),
        (
            "processes[0].phases[2]",
            Box::new(|v| {
                v["processes"][0]["phases"][2]["phase"]["count"] = json!(limits::MAX_ACCESSES + 1)
            }),
            "accesses",
        ),
        (
            "processes[0].phases[0]",
            Box::new(|v| {
                v["processes"][0]["phases"][0]["phase"] =
                    json!({"kind": "sleep", "duration_ns": u64::MAX})
            }),
            "ns",
        ),
        (
            "processes[0].regions[1].pages",
            Box::new(|v| v["processes"][0]["regions"][1]["pages"] = json!(limits::MAX_PAGES)),
            "pages",
        ),
        (
            "machine.swap[0].size_bytes",
            Box::new(|v| v["machine"]["swap"][0]["size_bytes"] = json!(u64::MAX)),
            "slots",
        ),
    ];
    for (key, set, unit) in cases {
        let mut v = small();
        set(&mut v);
        let e = refused(&v);
        assert_eq!(e.path, key, "{e}");
        assert!(
            e.reason.contains(unit) && e.reason.contains("at most"),
            "{key}: {e}"
        );
    }
}

/// Index types: more cgroups, regions or processes than the page record and events can name
/// are refused with the real limit, before anything is allocated.
#[test]
fn index_limits_name_the_key_and_the_real_limit() {
    let mut v = small();
    let root = v["cgroups"]["groups"][0].clone();
    let mut groups = vec![root];
    for i in 0..limits::MAX_CGROUPS {
        groups.push(json!({"path": format!("/g{i}"), "parent": 0, "limit_bytes": null, "high_bytes": null, "swappiness": null,
            "zswap_max_bytes": null, "zswap_writeback": true}));
    }
    v["cgroups"]["groups"] = json!(groups);
    let e = refused(&v);
    assert_eq!(e.path, "cgroups.groups");
    assert!(e.reason.contains(&limits::MAX_CGROUPS.to_string()), "{e}");

    let mut v = small();
    let region = json!({"name": "r", "pages": 1, "content": "zero", "variants": 1});
    v["processes"][0]["regions"] = json!(vec![region; limits::MAX_REGIONS + 1]);
    let e = refused(&v);
    assert_eq!(
        e.path,
        format!("processes[0].regions[{}]", limits::MAX_REGIONS)
    );
    assert!(
        e.reason.contains(&limits::MAX_REGIONS.to_string()) && !e.reason.contains("2^32"),
        "{e}"
    );

    let mut v = small();
    let p = v["processes"][0].clone();
    v["processes"] = json!(vec![p; limits::MAX_PROCESSES + 1]);
    let e = refused(&v);
    assert_eq!(e.path, "processes");
    assert!(e.reason.contains(&limits::MAX_PROCESSES.to_string()), "{e}");
}

/// The estimate counts what the run allocates: one page record per page at least.
#[test]
fn the_estimate_covers_the_page_arena_and_the_slot_map() {
    let v = small();
    let cfg: SimConfig = serde_json::from_value(v).unwrap();
    let e = limits::estimate(&cfg);
    assert_eq!(e.pages, 600);
    assert_eq!(e.swap_slots, 256 * MIB / 4096);
    // A 24-byte record and 8 bytes of list links per page, 4 bytes of slot map per slot.
    assert!(e.bytes >= e.pages * 32 + e.swap_slots * 4, "{e:?}");
    assert_eq!(e.accesses, 600 + 2_000);
}
