//! Run a lowered scenario (JSON, as `reclaimlab` produces it) and print counters and phases:
//! `cargo run --release -p reclaimlab-core --example simulate -- config.json`.
fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: simulate CONFIG.json");
    let json = std::fs::read_to_string(&path).expect("readable config");
    let mut sim =
        reclaimlab_core::simulation_from_json(&json).unwrap_or_else(|e| panic!("{path}: {e}"));
    let r = sim.run_to_end();
    for (k, v) in &r.counters {
        if *v != 0 {
            println!("{k:<50} {v}");
        }
    }
    for p in &r.phases {
        let secs = (p.end_ns - p.start_ns) as f64 / 1e9;
        println!(
            "{:<10} {:<10} {:>10.3}s {:>12} accesses {:>12.0}/s {}",
            p.process,
            p.phase,
            secs,
            p.accesses,
            p.accesses as f64 / secs.max(1e-12),
            p.outcome
        );
    }
    println!(
        "events {} sim {:.3}s",
        r.stats.events,
        r.stats.sim_time_ns as f64 / 1e9
    );
}
