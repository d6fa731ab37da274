//! tmpfs files (mm/shmem.rs): swap-backed page cache on the anonymous LRUs, written out by
//! reclaim to swap (and zswap), read back by swap-in, counted as Shmem; never file cache.

use crate::common::*;
use reclaimlab_core::{SimConfig, Simulation};
use serde_json::{json, Value};

/// One process in v1 cgroup `/t` (limit `limit_pages`) with a 256-page anonymous heap (filled
/// first) and a tmpfs file of `file_pages` (region 1) running `phases`.
fn tmpfs_scenario(file_pages: u64, limit_pages: u64, zswap: bool, phases: &[Value]) -> Value {
    let mut v = scenario(&[("heap", 256, "text")], 1, limit_pages, zswap, false);
    add_tmpfs(&mut v, None, file_pages, phases);
    v
}

fn write() -> Value {
    json!({"kind": "write", "region": 1, "passes": 1})
}

fn read() -> Value {
    json!({"kind": "read", "region": 1, "passes": 1})
}

fn mmap(write_percent: u8) -> Value {
    json!({"kind": "mmap", "region": 1, "passes": 1, "write_percent": write_percent})
}

#[test]
fn tmpfs_pages_are_reclaimed_as_swap_backed_not_as_file_cache() {
    // 4000 tmpfs pages written in a 1500-page memcg: reclaim finds them on the anonymous LRUs
    // and writes them to swap; the file LRUs stay empty and nothing is dirty page cache.
    let r = run(&tmpfs_scenario(4000, 1500, false, &[write()]));
    assert_eq!(counter(&r, "vmstat.pgscan_file"), 0);
    assert_eq!(counter(&r, "vmstat.pgsteal_file"), 0);
    assert_eq!(
        counter(&r, "vmstat.nr_inactive_file") + counter(&r, "vmstat.nr_active_file"),
        0
    );
    assert!(
        counter(&r, "vmstat.pgsteal_anon") >= 2500,
        "{}",
        counter(&r, "vmstat.pgsteal_anon")
    );
    assert!(counter(&r, "vmstat.pswpout") >= 2500);
    // Every write by reclaim is a swap write (pageout → shmem_writepage → swap_writepage).
    assert_eq!(
        counter(&r, "vmstat.nr_vmscan_write"),
        counter(&r, "vmstat.pswpout")
    );
    assert_eq!(
        counter(&r, "vmstat.nr_dirty") + counter(&r, "vmstat.nr_dirtied"),
        0
    );
    assert_eq!(
        counter(&r, "vmstat.pgpgout"),
        counter(&r, "vmstat.pswpout") * 4
    );
    // Shmem is part of NR_FILE_PAGES and Cached; the rest of the memcg is the heap.
    let shmem = counter(&r, "vmstat.nr_shmem");
    assert!(shmem > 0 && shmem <= 1500, "{shmem}");
    assert_eq!(counter(&r, "meminfo.Shmem"), shmem * 4);
    let swapcached = counter(&r, "vmstat.nr_swapcached");
    assert_eq!(counter(&r, "vmstat.nr_file_pages"), shmem + swapcached);
    assert_eq!(counter(&r, "meminfo.Cached"), shmem * 4);
    assert_eq!(counter(&r, "memcg[/t].memory.stat.shmem"), shmem * 4096);
    assert_eq!(
        counter(&r, "memcg[/t].memory.stat.cache"),
        (shmem + swapcached) * 4096
    );
    // Every page (the file's and the heap's) is in memory, in the swap cache or in swap;
    // mapped heap pages are rss, tmpfs pages never are.
    let swapped = counter(&r, "memcg[/t].memory.stat.swap") / 4096;
    let rss = counter(&r, "memcg[/t].memory.stat.rss") / 4096;
    assert_eq!(shmem + swapped + swapcached + rss, 4000 + 256);
}

#[test]
fn tmpfs_data_goes_to_zswap() {
    let r = run(&tmpfs_scenario(4000, 1500, true, &[write()]));
    assert!(
        counter(&r, "vmstat.zswpout") >= 2500,
        "{}",
        counter(&r, "vmstat.zswpout")
    );
    assert_eq!(counter(&r, "vmstat.pgsteal_file"), 0);
}

#[test]
fn swapped_tmpfs_pages_refault_as_anon_and_only_faults_are_major() {
    // read(2) brings swapped pages back without a fault; a mapping's loads fault them in.
    let r = run(&tmpfs_scenario(4000, 1500, false, &[write(), read()]));
    assert!(counter(&r, "vmstat.pswpin") > 0);
    assert!(counter(&r, "vmstat.workingset_refault_anon") > 0);
    assert_eq!(counter(&r, "vmstat.workingset_refault_file"), 0);
    assert_eq!(counter(&r, "vmstat.pgmajfault"), 0);
    // shmem_swapin_cluster: cluster readahead, whose pages are found in the swap cache later.
    assert!(counter(&r, "vmstat.swap_ra") > 0 && counter(&r, "vmstat.swap_ra_hit") > 0);
    let r = run(&tmpfs_scenario(4000, 1500, false, &[write(), mmap(0)]));
    assert!(counter(&r, "vmstat.pgmajfault") > 0);
    assert!(counter(&r, "vmstat.nr_mapped") > 0);
}

#[test]
fn reading_a_hole_allocates_nothing_but_faulting_it_does() {
    let r = run(&tmpfs_scenario(1000, 100_000, false, &[read()]));
    assert_eq!(counter(&r, "vmstat.nr_shmem"), 0);
    let r = run(&tmpfs_scenario(1000, 100_000, false, &[mmap(0)]));
    assert_eq!(counter(&r, "vmstat.nr_shmem"), 1000);
    assert_eq!(counter(&r, "vmstat.nr_mapped"), 1000);
    assert_eq!(counter(&r, "vmstat.pgmajfault"), 0);
}

#[test]
fn clean_tmpfs_pages_are_dropped_without_swap_io() {
    // Read-faulted, never-written tmpfs pages are zero-filled and clean: reclaim drops them
    // (only the 256 heap pages can be swap writes).
    let r = run(&tmpfs_scenario(4000, 1500, false, &[mmap(0)]));
    assert!(counter(&r, "vmstat.pgsteal_anon") >= 2500);
    assert!(
        counter(&r, "vmstat.pswpout") <= 256,
        "{}",
        counter(&r, "vmstat.pswpout")
    );
    assert_eq!(
        counter(&r, "memcg[/t].memory.stat.swap") / 4096 + counter(&r, "vmstat.nr_swapcached"),
        counter(&r, "vmstat.pswpout")
    );
}

#[test]
fn without_swap_tmpfs_pages_stay_in_memory() {
    // No swap device: the anonymous LRUs (tmpfs included) are not scanned; the file fits in
    // the memcg and nothing is reclaimed from it.
    let mut v = tmpfs_scenario(1000, 100_000, false, &[write()]);
    v["machine"]["swap"] = json!([]);
    let r = run(&v);
    assert_eq!(counter(&r, "vmstat.nr_shmem"), 1000);
    assert_eq!(counter(&r, "vmstat.pgsteal_anon"), 0);
}

fn build_error(v: &Value) -> String {
    let cfg: SimConfig = serde_json::from_value(v.clone()).expect("valid config");
    match Simulation::new(&cfg) {
        Ok(_) => panic!("built"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn files_over_the_tmpfs_size_and_a_device_on_tmpfs_are_errors() {
    let mut v = tmpfs_scenario(1000, 100_000, false, &[write()]);
    v["machine"]["filesystems"][0]["size_bytes"] = json!(999 * 4096);
    let e = build_error(&v);
    assert!(
        e.contains("processes[0].regions[1].pages") && e.contains("tmpfs \"shm\""),
        "{e}"
    );
    let mut v = tmpfs_scenario(1000, 100_000, false, &[write()]);
    v["machine"]["filesystems"][0]["device"] = json!({"rotational": false, "read_latency_ns": 1, "write_latency_ns": 1, "read_bytes_per_s": 1, "write_bytes_per_s": 1});
    assert!(build_error(&v).contains("machine.filesystems[0].device"));
    let mut v = tmpfs_scenario(1000, 100_000, false, &[write()]);
    v["machine"]["filesystems"][0]["fstype"] = json!("ext4");
    assert!(build_error(&v).contains("machine.filesystems[0].device"));
}
