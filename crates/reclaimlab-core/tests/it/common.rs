use reclaimlab_core::{SimConfig, SimResult, Simulation};
use serde_json::{json, Value};

pub const MIB: u64 = 1 << 20;

/// A one-process scenario: `regions` (name, pages, content) filled, then `accesses` uniform
/// random reads over all of them, in cgroup `/t` limited to `limit_pages`.
pub fn scenario(
    regions: &[(&str, u64, &str)],
    accesses: u64,
    limit_pages: u64,
    zswap: bool,
    v2: bool,
) -> Value {
    let regs: Vec<Value> = regions
        .iter()
        .map(|(n, p, c)| json!({"name": n, "pages": p, "content": c, "variants": 64}))
        .collect();
    let mut phases: Vec<Value> = (0..regions.len())
        .map(|i| json!({"name": format!("fill{i}"), "phase": {"kind": "fill", "region": i}}))
        .collect();
    phases.push(json!({"name": "measure", "phase": {"kind": "random", "regions": (0..regions.len()).collect::<Vec<_>>(),
        "dist": {"kind": "uniform"}, "count": accesses, "duration_ns": null, "write_percent": 0}}));
    let limit = json!(limit_pages * 4096);
    let group = if v2 {
        json!({"path": "/t", "parent": 0, "limit_bytes": null, "high_bytes": limit, "swappiness": null, "zswap_max_bytes": null, "zswap_writeback": true})
    } else {
        json!({"path": "/t", "parent": 0, "limit_bytes": limit, "high_bytes": null, "swappiness": null, "zswap_max_bytes": null, "zswap_writeback": true})
    };
    json!({
        "seed": 7,
        "machine": {"memory_bytes": 512 * MIB, "cpus": 2, "swap": [{
            "name": "swapfile", "kind": "file", "size_bytes": 256 * MIB, "priority": -2, "comp_algorithm": null,
            "device": {"rotational": true, "read_latency_ns": 150000, "write_latency_ns": 100000,
                       "read_bytes_per_s": 1000000000u64, "write_bytes_per_s": 1000000000u64}}]},
        "kernel": {"version": "6.18",
            "zswap": {"enabled": zswap, "compressor": "lzo", "max_pool_percent": 20, "accept_threshold_percent": 90, "shrinker_enabled": false},
            "vm": {"swappiness": 60, "page_cluster": 3, "min_free_kbytes": null, "watermark_scale_factor": 10}},
        "cgroups": {"version": if v2 {2} else {1}, "groups": [
            {"path": "/", "parent": null, "limit_bytes": null, "high_bytes": null, "swappiness": null, "zswap_max_bytes": null, "zswap_writeback": true},
            group]},
        "processes": [{"name": "p", "cgroup": 1, "regions": regs, "phases": phases}],
    })
}

/// Give the one-process `scenario` a filesystem (`fstype` on an SSD-like device of `bytes_per_s`
/// both ways) holding a file of `file_pages` as region 1, and replace its phases after the first
/// fill with `phases`, run on that file.
pub fn add_file(v: &mut Value, fstype: &str, bytes_per_s: u64, file_pages: u64, phases: &[Value]) {
    v["machine"]["filesystems"] = json!([{"name": "data", "fstype": fstype, "device": {
        "rotational": false, "read_latency_ns": 100000, "write_latency_ns": 100000,
        "read_bytes_per_s": bytes_per_s, "write_bytes_per_s": bytes_per_s, "max_sectors_kb": 512}}]);
    v["processes"][0]["regions"].as_array_mut().unwrap().push(
        json!({"name": "f", "pages": file_pages, "content": "text", "variants": 64, "file": 0}),
    );
    let mut ph = vec![v["processes"][0]["phases"][0].clone()];
    for (k, p) in phases.iter().enumerate() {
        ph.push(json!({"name": format!("f{k}"), "phase": p}));
    }
    v["processes"][0]["phases"] = json!(ph);
}

pub fn build(v: &Value) -> Simulation {
    let cfg: SimConfig = serde_json::from_value(v.clone()).expect("valid config");
    Simulation::new(&cfg).expect("simulation builds")
}

pub fn run(v: &Value) -> SimResult {
    let mut s = build(v);
    s.run_to_end()
}

pub fn counter(r: &SimResult, key: &str) -> u64 {
    r.counters
        .iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("no counter {key}"))
        .1
}

pub fn has(r: &SimResult, key: &str) -> bool {
    r.counters.iter().any(|(k, _)| k == key)
}

/// Print a result's non-zero counters (for diagnosing a failing test with --nocapture).
#[allow(dead_code)]
pub fn dump(r: &SimResult) {
    for (k, v) in &r.counters {
        if *v != 0 {
            eprintln!("{k:<50} {v}");
        }
    }
}

/// Give the one-process `scenario` a tmpfs (size= `size_bytes`, None: the default) holding a
/// file of `file_pages` as region 1, and replace its phases after the first fill with
/// `phases`, run on that file.
pub fn add_tmpfs(v: &mut Value, size_bytes: Option<u64>, file_pages: u64, phases: &[Value]) {
    add_file(v, "ext4", 1, file_pages, phases);
    v["machine"]["filesystems"] =
        json!([{"name": "shm", "fstype": "tmpfs", "size_bytes": size_bytes}]);
}
