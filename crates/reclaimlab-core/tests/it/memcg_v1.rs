//! cgroup v1's page counter files: memory.failcnt (page_counter_try_charge's failed charges,
//! 6.12 mm/page_counter.c) and memory.max_usage_in_bytes (the counter's watermark,
//! mem_cgroup_read_u64 RES_MAX_USAGE in mm/memcontrol-v1.c).

use serde_json::json;

use crate::common::{counter, run, scenario};

/// v1: /a limited to `limit_pages`, its child /a/b unlimited, the process in /a/b filling
/// `pages` pages.
fn nested_v1(pages: u64, limit_pages: u64) -> serde_json::Value {
    let mut v = scenario(&[("r", pages, "mix1024")], 0, limit_pages, false, false);
    let groups = v["cgroups"]["groups"].as_array_mut().unwrap();
    groups[1]["path"] = json!("/a");
    let mut child = groups[1].clone();
    child["path"] = json!("/a/b");
    child["parent"] = json!(1);
    child["limit_bytes"] = json!(null);
    groups.push(child);
    v["processes"][0]["cgroup"] = json!(2);
    v["processes"][0]["phases"] = json!([{"name": "fill", "phase": {"kind": "fill", "region": 0}}]);
    v
}

#[test]
fn failcnt_counts_each_failed_try_at_the_limited_ancestor() {
    // 90 pages plus their page table: 91 charges under /a's 100-page limit. The first takes a
    // batch of 64 (MEMCG_CHARGE_BATCH) into the stock, which serves the next 63; each of the
    // other 27 first tries a batch, which no longer fits under 100 (one failure, counted by
    // /a, the counter over its limit), then its single page, which does. Nothing is reclaimed.
    let r = run(&nested_v1(90, 100));
    assert_eq!(counter(&r, "memcg[/a].memory.failcnt"), 27);
    assert_eq!(
        counter(&r, "memcg[/a/b].memory.failcnt"),
        0,
        "/a/b has no limit of its own"
    );
    assert_eq!(counter(&r, "memcg[/].memory.failcnt"), 0);
    assert_eq!(
        counter(&r, "memcg[/a].memory.stat.pgpgout"),
        0,
        "no reclaim"
    );
    for g in ["/", "/a", "/a/b"] {
        assert_eq!(
            counter(&r, &format!("memcg[{g}].memory.max_usage_in_bytes")),
            91 * 4096,
            "{g}"
        );
    }
}

#[test]
fn max_usage_is_the_watermark_under_reclaim() {
    // 4096 pages through a 1024-page limit: charges fail and reclaim (swap) makes room; the
    // watermark reaches the limit and never passes it, the usage at the end is below it.
    let r = run(&nested_v1(4096, 1024));
    let failcnt = counter(&r, "memcg[/a].memory.failcnt");
    assert!(
        failcnt >= 4096 - 1024,
        "at least one failed try per page charged beyond the limit: {failcnt}"
    );
    let max_usage = counter(&r, "memcg[/a].memory.max_usage_in_bytes");
    assert_eq!(max_usage, 1024 * 4096);
    assert!(counter(&r, "memcg[/a].memory.usage_in_bytes") <= max_usage);
    assert!(counter(&r, "memcg[/a].memory.stat.total_swap") > 0);
}

#[test]
fn v2_has_no_v1_files() {
    let r = run(&scenario(&[("r", 256, "mix1024")], 100, 128, false, true));
    assert!(!r
        .counters
        .iter()
        .any(|(k, _)| k.ends_with("memory.failcnt") || k.ends_with("memory.max_usage_in_bytes")));
}
