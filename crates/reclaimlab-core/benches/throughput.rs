//! `make bench`: simulated page events per second and resident bytes per simulated page, on a
//! swap-heavy scenario and a mostly-resident one, plus the footprint of a simulated 64 GiB
//! machine. Prints figures; asserts nothing (machines are noisy: compare ratios within a run).

use std::time::Instant;

use reclaimlab_core::{SimConfig, Simulation};
use serde_json::json;

const MIB: u64 = 1 << 20;

/// A field of /proc/self/status in bytes (VmRSS: now, VmHWM: peak).
fn status_bytes(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
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

/// File-heavy: a streaming write of `file_pages` through a v1 memcg of `limit_pages` (the
/// issue 10 kernel run: reclaim meets dirty pages, the flusher writes them), then a read
/// pass over the same file (refaults, readahead).
fn file_config(memory: u64, file_pages: u64, limit_pages: u64) -> SimConfig {
    let device = json!({"rotational": false, "read_latency_ns": 20000, "write_latency_ns": 20000,
        "read_bytes_per_s": 2000000000u64, "write_bytes_per_s": 2000000000u64, "max_sectors_kb": 512});
    serde_json::from_value(json!({
        "seed": 1,
        "machine": {"memory_bytes": memory, "cpus": 2, "swap": [],
            "filesystems": [{"name": "data", "fstype": "ext4", "device": device}]},
        "kernel": {"version": "6.18"},
        "cgroups": {"version": 1, "groups": [
            {"path": "/", "parent": null, "limit_bytes": null, "high_bytes": null, "swappiness": null, "zswap_max_bytes": null, "zswap_writeback": true},
            {"path": "/bench", "parent": 0, "limit_bytes": limit_pages * 4096, "high_bytes": null, "swappiness": null, "zswap_max_bytes": null, "zswap_writeback": true}]},
        "processes": [{"name": "bench", "cgroup": 1,
            "regions": [{"name": "f", "pages": file_pages, "content": "text", "variants": 256, "file": 0}],
            "phases": [{"name": "write", "phase": {"kind": "write", "region": 0, "passes": 1}},
                       {"name": "read", "phase": {"kind": "read", "region": 0, "passes": 1}}]}],
    }))
    .unwrap()
}

/// Runs in a child process of its own, so that its peak RSS is its own.
fn bench(name: &str, cfg: SimConfig) {
    let base = status_bytes("VmRSS:");
    let t0 = Instant::now();
    let mut sim = Simulation::new(&cfg).unwrap();
    let built = t0.elapsed();
    let t1 = Instant::now();
    while !sim.step(1 << 16) {}
    let wall = t1.elapsed().as_secs_f64();
    let peak = status_bytes("VmHWM:").saturating_sub(base);
    let r = sim.result();
    let pages = r.stats.pages;
    println!(
        "{name:<17} pages {pages:>9}  {:>6.2} M page events/s ({:>5.1} M accesses/s)  peak {:>6.1} MiB = {:>5.1} B/page  build {:.2}s  run {:.2}s  simulated {:.2}s",
        r.stats.page_events as f64 / wall / 1e6,
        r.phases.iter().map(|p| p.accesses).sum::<u64>() as f64 / wall / 1e6,
        peak as f64 / (1u64 << 20) as f64,
        peak as f64 / pages as f64,
        built.as_secs_f64(),
        wall,
        r.stats.sim_time_ns as f64 / 1e9,
    );
}

fn case(name: &str) {
    let pages = 3 * 65_536;
    match name {
        // Swap-heavy: the working set 10% over a memcg limit, uniform random reads (three-regions).
        "swap-heavy-zswap" => bench(name, config(4096 * MIB, 65_536, Some(pages * 9 / 10), 3_000_000, true)),
        "swap-heavy-swap" => bench(name, config(4096 * MIB, 65_536, Some(pages * 9 / 10), 300_000, false)),
        // Mostly resident: no limit.
        "resident" => bench(name, config(4096 * MIB, 65_536, None, 20_000_000, true)),
        // A simulated 64 GiB machine with 60 GiB of workload, filled once.
        "64GiB-machine" => bench(name, config(64 * 1024 * MIB, 20 * 262_144, None, 1, true)),
        // 2 GiB written then read through a 256 MiB v1 memcg on a 4 GiB machine.
        "file-stream" => bench(name, file_config(4096 * MIB, 524_288, 65_536)),
        _ => panic!("unknown case {name}"),
    }
}

fn main() {
    if let Some(name) = std::env::args().nth(1).filter(|a| !a.starts_with('-')) {
        return case(&name);
    }
    println!("reclaimlab-core throughput (one core; targets: >= 5 M page events/s, <= 64 B per simulated page)");
    let exe = std::env::current_exe().unwrap();
    for name in ["swap-heavy-zswap", "swap-heavy-swap", "resident", "64GiB-machine", "file-stream"] {
        let out = std::process::Command::new(&exe).arg(name).output().expect("bench child runs");
        print!("{}", String::from_utf8_lossy(&out.stdout));
        if !out.status.success() {
            eprint!("{}", String::from_utf8_lossy(&out.stderr));
            std::process::exit(1);
        }
    }
}
