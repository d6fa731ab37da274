//! File pages (mm/filemap.rs): the page cache, readahead, use-once reclaim, refault
//! activation, mapped pages, and their counters.

use crate::common::*;
use serde_json::{json, Value};

/// One process in cgroup `/t` (limit `limit_pages`) with a 256-page anonymous heap (filled
/// first) and a file of `file_pages` on an ext4 filesystem, running `phases` on the file
/// (region index 1).
fn file_scenario(file_pages: u64, limit_pages: u64, phases: &[Value]) -> Value {
    let mut v = scenario(&[("heap", 256, "text")], 1, limit_pages, false, false);
    add_file(&mut v, "ext4", 1_000_000_000, file_pages, phases);
    v
}

fn read(passes: u32) -> Value {
    json!({"kind": "read", "region": 1, "passes": passes})
}

fn mmap(passes: u32) -> Value {
    json!({"kind": "mmap", "region": 1, "passes": passes})
}

#[test]
fn a_machine_without_files_exports_no_file_counters() {
    let r = run(&scenario(&[("a", 300, "text")], 1000, 1000, false, false));
    assert!(
        !has(&r, "vmstat.pgscan_file")
            && !has(&r, "vmstat.nr_file_pages")
            && !has(&r, "meminfo.Cached")
    );
    assert!(!has(&r, "memcg[/t].memory.stat.cache"));
}

#[test]
fn reading_twice_activates_and_readahead_reads_every_page_once() {
    let r = run(&file_scenario(2000, 100_000, &[read(2)]));
    // read-ahead brings each page in once: 4 KiB per page in pgpgin; no faults.
    assert_eq!(counter(&r, "vmstat.pgpgin"), 2000 * 4);
    assert_eq!(counter(&r, "vmstat.pgmajfault"), 0);
    // The second read of each page finds it PG_referenced and activates it.
    assert_eq!(counter(&r, "vmstat.nr_active_file"), 2000);
    assert_eq!(counter(&r, "vmstat.pgactivate"), 2000);
    assert_eq!(counter(&r, "vmstat.nr_file_pages"), 2000);
    assert_eq!(counter(&r, "meminfo.Cached"), 2000 * 4);
    assert_eq!(counter(&r, "vmstat.nr_mapped"), 0);
    assert_eq!(
        counter(&r, "memcg[/t].memory.stat.total_cache"),
        2000 * 4096
    );
}

#[test]
fn streaming_read_larger_than_the_memcg_is_use_once() {
    // 4000 pages through a 1500-page memcg, twice: reclaim takes clean file pages without IO
    // (the heap is never written out), nothing is activated, and the second pass refaults
    // every page (its distance exceeds the workingset).
    let r = run(&file_scenario(4000, 1500, &[read(2)]));
    assert!(counter(&r, "vmstat.pgsteal_file") >= 4000);
    assert_eq!(counter(&r, "vmstat.pgsteal_anon"), 0);
    assert_eq!(counter(&r, "vmstat.pswpout"), 0);
    assert_eq!(counter(&r, "vmstat.nr_vmscan_write"), 0);
    assert_eq!(counter(&r, "vmstat.pgactivate"), 0);
    assert_eq!(counter(&r, "vmstat.workingset_refault_file"), 4000);
    assert_eq!(counter(&r, "vmstat.workingset_activate_file"), 0);
    assert_eq!(counter(&r, "vmstat.pgpgin"), 2 * 4000 * 4);
    assert_eq!(
        counter(&r, "memcg[/t].memory.stat.workingset_refault_file"),
        4000
    );
}

#[test]
fn refaults_within_the_workingset_start_active() {
    // A file a little larger than the memcg's room for it, read three times: the second pass
    // refaults pages whose refault distance fits in the workingset, and they start active.
    let r = run(&file_scenario(1400, 1500, &[read(2), read(1)]));
    assert!(counter(&r, "vmstat.workingset_refault_file") > 0);
    assert!(counter(&r, "vmstat.workingset_activate_file") > 0);
    assert!(counter(&r, "memcg[/t].memory.stat.workingset_refault_file") > 0);
}

#[test]
fn mapped_pages_fault_around_and_count_as_mapped() {
    let r = run(&file_scenario(2048, 100_000, &[mmap(1)]));
    // Read-around reads every page once; each fault maps up to 16 cached pages.
    assert_eq!(counter(&r, "vmstat.pgpgin"), 2048 * 4);
    assert_eq!(counter(&r, "vmstat.nr_mapped"), 2048);
    assert_eq!(counter(&r, "meminfo.Mapped"), 2048 * 4);
    assert_eq!(
        counter(&r, "memcg[/t].memory.stat.mapped_file"),
        2048 * 4096
    );
    let faults = counter(&r, "vmstat.pgfault") - 256;
    assert!(faults < 2048 / 4, "{faults} faults for 2048 pages");
    assert!(counter(&r, "vmstat.pgmajfault") > 0);
}

#[test]
fn young_mapped_pages_survive_a_scan_that_unmapped_ones_do_not() {
    // 1000 pages of a file, then 900 pages of another streamed by read(2) through a
    // 1500-page memcg. Mapped first (young PTEs), the first file's pages are rotated once by
    // reclaim and outlive the use-once read pages; read with read(2) (PG_referenced only:
    // FOLIOREF_RECLAIM_CLEAN) they are the first to go.
    let resident_of_first_file = |first: Value| {
        let mut v = file_scenario(1000, 1500, &[first, read(1)]);
        v["processes"][0]["regions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "g", "pages": 900, "content": "text", "variants": 64, "file": 0}));
        v["processes"][0]["phases"][2]["phase"]["region"] = json!(2);
        let mut s = build(&v);
        let r = s.run_to_end();
        assert!(
            counter(&r, "vmstat.pgsteal_file") > 500,
            "{}",
            counter(&r, "vmstat.pgsteal_file")
        );
        // The heap's 256 pages come first in the arena, then the first file's 1000.
        s.mm().pages()[256..1256]
            .iter()
            .filter(|p| p.has(reclaimlab_core::mm::page::pg::RESIDENT))
            .count()
    };
    let mapped = resident_of_first_file(mmap(1));
    let read = resident_of_first_file(read(1));
    assert!(
        mapped > read + 150,
        "mapped {mapped} vs read {read} pages left"
    );
}

#[test]
fn page_conservation_every_event_with_file_pages() {
    let mut v = file_scenario(3000, 1200, &[read(1), mmap(1), read(1)]);
    v["processes"][0]["phases"][0]["phase"] = json!({"kind": "fill", "region": 0});
    let mut s = build(&v);
    s.set_check_interval(1);
    let r = s.run_to_end();
    assert!(counter(&r, "vmstat.pgsteal_file") > 0);
    s.check_conservation().unwrap();
}

#[test]
fn file_runs_are_deterministic() {
    let v = file_scenario(3000, 1200, &[read(1), mmap(2)]);
    let (a, b) = (run(&v), run(&v));
    assert_eq!(a.counters, b.counters);
    assert_eq!(
        serde_json::to_string(&a.phases).unwrap(),
        serde_json::to_string(&b.phases).unwrap()
    );
}

#[test]
fn file_phases_need_file_regions_and_filesystems_a_known_type() {
    let err = |v: Value| {
        let cfg: reclaimlab_core::SimConfig = serde_json::from_value(v).unwrap();
        Simulation_new_err(&cfg)
    };
    let mut v = file_scenario(100, 1000, &[read(1)]);
    v["processes"][0]["phases"][1]["phase"]["region"] = json!(0);
    assert_eq!(err(v).path, "processes[0].phases[1]");
    let mut v = file_scenario(100, 1000, &[read(1)]);
    v["machine"]["filesystems"][0]["fstype"] = json!("ntfs");
    assert_eq!(err(v).path, "machine.filesystems[0].fstype");
    let mut v = file_scenario(100, 1000, &[read(1)]);
    v["processes"][0]["regions"][1]["file"] = json!(3);
    assert_eq!(err(v).path, "processes[0].regions[1].file");
}

#[allow(non_snake_case)]
fn Simulation_new_err(cfg: &reclaimlab_core::SimConfig) -> reclaimlab_core::ConfigError {
    match reclaimlab_core::Simulation::new(cfg) {
        Ok(_) => panic!("expected a config error"),
        Err(e) => e,
    }
}

/// The readahead window follows the device's read_ahead_kb, each window is one bio (no
/// merges), and a bio larger than max_sectors_kb is split into requests of that size.
/// Order-0 folios (ext4 before 6.16); 6.18's page_cache_async_ra raises ra->order and trims
/// each window's end to that alignment (at most the lowest set bit of the largest window)
/// whether or not the mapping has large folios.
#[test]
fn readahead_windows_follow_read_ahead_kb_and_split_at_max_sectors_kb() {
    // 6400 pages read once, nothing reclaimed.
    let requests = |read_ahead_kb: Option<u64>, max_sectors_kb: u64| {
        let mut v = file_scenario(6400, 100_000, &[read(1)]);
        v["kernel"]["switches"] = json!({"filemap.large_folios_ext4": false});
        let dev = &mut v["machine"]["filesystems"][0]["device"];
        dev["max_sectors_kb"] = json!(max_sectors_kb);
        if let Some(kb) = read_ahead_kb {
            dev["read_ahead_kb"] = json!(kb);
        }
        let r = run(&v);
        assert_eq!(counter(&r, "vmstat.pgpgin"), 6400 * 4);
        assert_eq!(counter(&r, "block[data].stat.read_merges"), 0);
        counter(&r, "block[data].stat.read_ios")
    };
    // Default (128 KiB, 32 pages): ra->order 2, 4, 6, ... aligns the ends to 4, 16, then 32
    // pages: windows [0,4) [4,12) [12,16) [16,24) [24,32) [32,48) [48,64), then 198 of 32.
    assert_eq!(requests(None, 512), 7 + 198);
    assert_eq!(requests(Some(128), 512), 7 + 198);
    // 2560 KiB (the lab's loop device, 640 pages, aligned to at most 128): 4, 16, 60, 112,
    // 192, 384, then 8 windows of 640 pages and the last 512; the 384, 640 and 512-page
    // windows are split at 1280 KiB (320 pages) into two requests each.
    assert_eq!(requests(Some(2560), 1280), 5 + 2 + 8 * 2 + 2);
    // Without readahead every page is read alone.
    assert_eq!(requests(Some(0), 1280), 6400);
}

/// Large folios (6.18's ext4, page_cache_ra_order): ra->order rises by 2 per async window,
/// each window's end is trimmed to the folio alignment (at most 128 pages for a 640-page
/// maximum), and the folios are naturally aligned and within the window. Worked by hand
/// from mm/readahead.c: windows [0,4) [4,20) [20,80) [80,192) [192,384) [384,768), then
/// 640 pages from 768 and the last 512 from 5888; folios per window 4, 4, 5, 3, 2, 2, 3,
/// 2, 2, 3, 3, 2, 2, 3, 2: 42 for 6400 pages. The memcg is charged once per folio (v1
/// pgpgin counts charge events) and pays pagecache_add_ns once per folio.
#[test]
fn large_folios_follow_the_readahead_order_ramp() {
    let run_with = |large: bool, add_ns: u64| {
        let mut v = file_scenario(6400, 100_000, &[read(1)]);
        v["kernel"]["switches"] = json!({"filemap.large_folios_ext4": large});
        v["costs"] = json!({"pagecache_add_ns": add_ns});
        let dev = &mut v["machine"]["filesystems"][0]["device"];
        dev["max_sectors_kb"] = json!(1280);
        dev["read_ahead_kb"] = json!(2560);
        run(&v)
    };
    let (small, large) = (run_with(false, 800), run_with(true, 800));
    for r in [&small, &large] {
        assert_eq!(counter(r, "vmstat.pgpgin"), 6400 * 4);
        assert_eq!(counter(r, "vmstat.nr_file_pages"), 6400);
        assert_eq!(counter(r, "block[data].stat.read_merges"), 0);
    }
    // The last window has 512 pages (two requests) instead of 300 (one).
    assert_eq!(
        counter(&large, "block[data].stat.read_ios"),
        5 + 2 + 8 * 2 + 2
    );
    let charges = |r: &reclaimlab_core::SimResult| counter(r, "memcg[/t].memory.stat.pgpgin");
    assert_eq!(charges(&small) - charges(&large), 6400 - 42);
    // The reference host's kernel (6.18, ext4 on a disk with read_ahead_kb 8192 and
    // max_sectors_kb 4096) read a 65536-page file through 148 folios (/proc/kpageflags,
    // docs/calibration.md); the model's ramp makes the same number.
    let mut v = file_scenario(65536, 100_000, &[read(1)]);
    let dev = &mut v["machine"]["filesystems"][0]["device"];
    dev["max_sectors_kb"] = json!(4096);
    dev["read_ahead_kb"] = json!(8192);
    let host = run(&v);
    // The heap's charges are the same in both runs.
    assert_eq!(charges(&host), charges(&small) - 6400 + 148);
    // The insertion cost is paid per folio: on a device that takes no time, 1 µs more per
    // insertion makes the read phase 42 µs longer (6.4 ms with order-0 folios).
    let phase_ns = |large: bool, add_ns: u64| {
        let mut v = file_scenario(6400, 100_000, &[read(1)]);
        v["kernel"]["switches"] = json!({"filemap.large_folios_ext4": large});
        v["costs"] = json!({"pagecache_add_ns": add_ns});
        let dev = &mut v["machine"]["filesystems"][0]["device"];
        dev["max_sectors_kb"] = json!(1280);
        dev["read_ahead_kb"] = json!(2560);
        dev["read_latency_ns"] = json!(0);
        dev["read_bytes_per_s"] = json!(1u64 << 60);
        let r = run(&v);
        let p = r
            .phases
            .iter()
            .find(|p| p.phase == "f0")
            .expect("the read phase");
        (p.end_ns - p.start_ns) as i64
    };
    let added = |large: bool| phase_ns(large, 1800) - phase_ns(large, 800);
    assert!((added(true) - 42_000).abs() < 1_000, "{}", added(true));
    assert!(
        (added(false) - 6_400_000).abs() < 10_000,
        "{}",
        added(false)
    );
}
