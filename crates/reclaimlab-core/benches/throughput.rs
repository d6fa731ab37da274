//! `make bench`: simulated page events per second and resident bytes per simulated page, on a
//! swap-heavy scenario and a mostly-resident one, plus the footprint of a simulated 64 GiB
//! machine. Prints figures; asserts nothing (machines are noisy: compare ratios within a run).

use std::time::Instant;

use reclaimlab_core::{SimConfig, Simulation};
use serde_json::json;

const MIB: u64 = 1 << 20;

fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn config(memory: u64, region_pages: u64, limit_pages: Option<u64>, accesses: u64, zswap: bool) -> SimConfig {
    let limit = limit_pages.map(|p| p * 4096);
    let regions: Vec<_> = ["text", "text", "random"]
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"name": format!("r{i}"), "pages": region_pages, "content": c, "variants": 256}))
        .collect();
    let mut phases: Vec<_> = (0..3).map(|i| json!({"name": format!("fill{i}"), "phase": {"kind": "fill", "region": i}})).collect();
    phases.push(json!({"name": "measure", "phase": {"kind": "random", "regions": [0, 1, 2], "dist": {"kind": "uniform"},
        "count": accesses, "duration_ns": null, "write_percent": 0}}));
    serde_json::from_value(json!({
        "seed": 1,
        "machine": {"memory_bytes": memory, "cpus": 2, "swap": [{
            "name": "swapfile", "kind": "file", "size_bytes": 3 * region_pages * 4096 + 64 * MIB, "priority": -2, "comp_algorithm": null,
            "device": {"rotational": false, "read_latency_ns": 20000, "write_latency_ns": 20000,
                       "read_bytes_per_s": 2000000000u64, "write_bytes_per_s": 2000000000u64}}]},
        "kernel": {"version": "6.18",
            "zswap": {"enabled": zswap, "compressor": "lzo", "max_pool_percent": 20, "accept_threshold_percent": 90, "shrinker_enabled": false},
            "vm": {"swappiness": 60, "page_cluster": 3, "min_free_kbytes": null, "watermark_scale_factor": 10}},
        "cgroups": {"version": 1, "groups": [
            {"path": "/", "parent": null, "limit_bytes": null, "high_bytes": null, "swappiness": null, "zswap_max_bytes": null, "zswap_writeback": true},
            {"path": "/bench", "parent": 0, "limit_bytes": limit, "high_bytes": null, "swappiness": null, "zswap_max_bytes": null, "zswap_writeback": true}]},
        "processes": [{"name": "bench", "cgroup": 1, "regions": regions, "phases": phases}],
    }))
    .unwrap()
}

fn bench(name: &str, cfg: SimConfig) {
    let before = rss_bytes();
    let t0 = Instant::now();
    let mut sim = Simulation::new(&cfg).unwrap();
    let built = t0.elapsed();
    let after_build = rss_bytes();
    let t1 = Instant::now();
    while !sim.step(1 << 16) {}
    let wall = t1.elapsed().as_secs_f64();
    let r = sim.result();
    let pages = r.stats.pages;
    println!(
        "{name:<16} pages {pages:>10}  page events {:>11}  {:>6.2} M page events/s  ({:.1} M accesses/s)  build {:.2}s  rss/page {:>5.1} B  sim time {:.2}s",
        r.stats.page_events,
        r.stats.page_events as f64 / wall / 1e6,
        r.phases.iter().map(|p| p.accesses).sum::<u64>() as f64 / wall / 1e6,
        built.as_secs_f64(),
        after_build.saturating_sub(before) as f64 / pages as f64,
        r.stats.sim_time_ns as f64 / 1e9,
    );
}

fn main() {
    // Swap-heavy: working set 10% over a memcg limit, uniform random access (three-regions).
    let pages = 3 * 65_536;
    bench("swap-heavy zswap", config(4096 * MIB, 65_536, Some(pages * 9 / 10), 3_000_000, true));
    bench("swap-heavy swap", config(4096 * MIB, 65_536, Some(pages * 9 / 10), 300_000, false));
    // Mostly resident: no limit.
    bench("resident", config(4096 * MIB, 65_536, None, 20_000_000, true));

    // A simulated 64 GiB machine with 60 GiB of workload: build and fill only.
    let before = rss_bytes();
    let big = config(64 * 1024 * MIB, 20 * 262_144, None, 1, true);
    let mut sim = Simulation::new(&big).unwrap();
    let t = Instant::now();
    while !sim.step(1 << 16) {}
    let rss = rss_bytes().saturating_sub(before);
    println!(
        "64 GiB machine   pages {:>10}  resident {:.2} GiB ({:.1} B per simulated page)  fill {:.1}s",
        sim.result().stats.pages,
        rss as f64 / (1u64 << 30) as f64,
        rss as f64 / sim.result().stats.pages as f64,
        t.elapsed().as_secs_f64()
    );
}
