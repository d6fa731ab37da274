//! Unnamed files (`tmpfile`: O_TMPFILE, or unlinked while open): their page cache is freed and
//! uncharged when the process exits (filemap.rs truncate_inode_page); a named file's stays.

use crate::common::*;
use serde_json::{json, Value};

/// /t (v1, no real limit): a 256-page heap filled, then a 2000-page file read, then `exit`.
fn read_then_exit(tmpfile: bool) -> Value {
    let mut v = scenario(&[("heap", 256, "text")], 1, 1 << 20, false, false);
    add_file(
        &mut v,
        "ext4",
        1_000_000_000,
        2000,
        &[
            json!({"kind": "read", "region": 1, "passes": 1}),
            json!({"kind": "exit"}),
        ],
    );
    v["processes"][0]["regions"][1]["tmpfile"] = json!(tmpfile);
    v
}

#[test]
fn a_tmpfile_is_freed_and_uncharged_at_exit() {
    let named = run(&read_then_exit(false));
    assert_eq!(counter(&named, "vmstat.nr_file_pages"), 2000);
    assert_eq!(
        counter(&named, "memcg[/t].memory.stat.total_cache"),
        2000 * 4096
    );
    let tmp = run(&read_then_exit(true));
    assert_eq!(counter(&tmp, "vmstat.nr_file_pages"), 0);
    assert_eq!(counter(&tmp, "memcg[/t].memory.stat.total_cache"), 0);
    // Truncation is not reclaim: nothing was stolen.
    assert_eq!(
        counter(&tmp, "vmstat.pgsteal_file"),
        counter(&named, "vmstat.pgsteal_file")
    );
    // What stays charged is the stock of the last batch (not drained at exit), the same in
    // both runs minus the named file's pages.
    let usage = |r| counter(r, "memcg[/t].memory.usage_in_bytes");
    assert_eq!(usage(&named) - usage(&tmp), 2000 * 4096);
    assert!(usage(&tmp) < 64 * 4096, "{}", usage(&tmp));
}

#[test]
fn tmpfile_writes_and_anonymous_tmpfiles_are_refused() {
    let build_err = |v: &Value| {
        let cfg: reclaimlab_core::SimConfig = serde_json::from_value(v.clone()).unwrap();
        reclaimlab_core::Simulation::new(&cfg)
            .err()
            .expect("refused")
            .to_string()
    };
    let mut v = read_then_exit(true);
    v["processes"][0]["phases"][1]["phase"] =
        json!({"kind": "write", "region": 1, "passes": 1, "fsync_bytes": null});
    let e = build_err(&v);
    assert!(
        e.contains("processes[0].phases[1]") && e.contains("a tmpfile"),
        "{e}"
    );
    let mut v = read_then_exit(false);
    v["processes"][0]["regions"][0]["tmpfile"] = json!(true);
    let e = build_err(&v);
    assert!(
        e.contains("processes[0].regions[0].tmpfile") && e.contains("only a file region"),
        "{e}"
    );
}
