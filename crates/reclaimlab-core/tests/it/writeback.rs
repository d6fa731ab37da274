//! Dirty page cache and writeback (mm/page_writeback.rs) and reclaim's writeback policy
//! (mm/vmscan.rs, seed 001): write phases, stores through shared mappings, the dirty limits,
//! the flusher, fsync, immediate reclaim and the era switches.

use crate::common::*;
use serde_json::{json, Value};

/// One process in cgroup `/t` (limit `limit_pages`, v1) on a machine of `memory_mib`, with a
/// 16-page heap (filled first) and a file of `file_pages` on filesystem `fstype` (region 1),
/// running `phases` on the file.
fn write_scenario(
    memory_mib: u64,
    file_pages: u64,
    limit_pages: u64,
    fstype: &str,
    phases: &[Value],
) -> Value {
    let mut v = scenario(&[("heap", 16, "text")], 1, limit_pages, false, false);
    v["machine"]["memory_bytes"] = json!(memory_mib * MIB);
    add_file(&mut v, fstype, 200_000_000, file_pages, phases);
    v
}

fn write(fsync_bytes: Option<u64>) -> Value {
    json!({"kind": "write", "region": 1, "passes": 1, "fsync_bytes": fsync_bytes})
}

fn sleep(ms: u64) -> Value {
    json!({"kind": "sleep", "duration_ns": ms * 1_000_000})
}

fn phase_ns(r: &reclaimlab_core::SimResult, name: &str) -> u64 {
    let p = r.phases.iter().find(|p| p.phase == name).expect("phase");
    p.end_ns - p.start_ns
}

#[test]
fn fsync_writes_and_waits_for_every_dirty_page() {
    // 2000 pages, an fsync every 1000 pages: everything is written and clean at the end.
    let r = run(&write_scenario(
        512,
        2000,
        100_000,
        "ext4",
        &[write(Some(1000 * 4096))],
    ));
    assert_eq!(counter(&r, "vmstat.nr_dirtied"), 2000);
    assert_eq!(counter(&r, "vmstat.nr_written"), 2000);
    assert_eq!(
        (
            counter(&r, "vmstat.nr_dirty"),
            counter(&r, "vmstat.nr_writeback")
        ),
        (0, 0)
    );
    // The data, and each fsync's journal commit of the inode (descriptor, inode table block,
    // commit block: mm/journal.rs).
    assert_eq!(counter(&r, "vmstat.pgpgout"), (2000 + 2 * 3) * 4);
    assert_eq!(counter(&r, "memcg[/t].memory.stat.dirty"), 0);
    // Whole-page writes read nothing; the writes merge into 512 KiB requests.
    assert_eq!(counter(&r, "vmstat.pgpgin"), 0);
    let ios = counter(&r, "block[data].stat.write_ios");
    assert!(
        (16..=40).contains(&ios),
        "{ios} write requests for 2000 pages"
    );
    // Two fsyncs of 1000 pages each at 200 MB/s take at least 2 × 20 ms.
    assert!(phase_ns(&r, "f0") >= 40_000_000);
}

#[test]
fn without_fsync_dirty_pages_wait_for_the_flusher() {
    // Below the background threshold nothing is written until the inode expires (30 s) and
    // the periodic flusher (every 5 s) writes it; with periodic writeback off it stays dirty.
    let r = run(&write_scenario(512, 1000, 100_000, "ext4", &[write(None)]));
    assert_eq!(
        (
            counter(&r, "vmstat.nr_dirty"),
            counter(&r, "vmstat.nr_written")
        ),
        (1000, 0)
    );
    assert_eq!(counter(&r, "memcg[/t].memory.stat.dirty"), 1000 * 4096);
    assert_eq!(counter(&r, "meminfo.Dirty"), 1000 * 4);
    let r = run(&write_scenario(
        512,
        1000,
        100_000,
        "ext4",
        &[write(None), sleep(36_000)],
    ));
    assert_eq!(
        (
            counter(&r, "vmstat.nr_dirty"),
            counter(&r, "vmstat.nr_written")
        ),
        (0, 1000)
    );
    // One writepages call: bios of 256, 256, 256 and 232 consecutive pages (BIO_MAX_VECS),
    // each split at max_sectors_kb 512 (128 pages) into two requests; no bio merges into a
    // request it does not fit whole.
    assert_eq!(
        (
            counter(&r, "block[data].stat.write_ios"),
            counter(&r, "block[data].stat.write_merges")
        ),
        (8, 0)
    );
    let mut v = write_scenario(512, 1000, 100_000, "ext4", &[write(None), sleep(36_000)]);
    v["kernel"]["vm"]["dirty_writeback_centisecs"] = json!(0);
    let r = run(&v);
    assert_eq!(counter(&r, "vmstat.nr_written"), 0);
}

#[test]
fn dirty_bytes_throttles_the_writer() {
    // 8000 pages (31 MiB) against a 4 MiB dirty limit: background writeback starts at 2 MiB
    // and the writer is held to the device's rate, so the phase takes about the device time.
    let mut v = write_scenario(512, 8000, 100_000, "ext4", &[write(None)]);
    let free = run(&v);
    v["kernel"]["vm"]["dirty_bytes"] = json!(4 * MIB);
    let limited = run(&v);
    assert_eq!(
        counter(&free, "vmstat.nr_written"),
        0,
        "8000 pages stay below the default thresholds"
    );
    assert!(
        counter(&limited, "vmstat.nr_written") >= 8000 - 1024,
        "{}",
        counter(&limited, "vmstat.nr_written")
    );
    assert!(
        counter(&limited, "vmstat.nr_dirty") + counter(&limited, "vmstat.nr_writeback")
            <= 1024 + 32
    );
    // 8000 pages at 200 MB/s is 164 ms; without the limit the copy alone takes a few ms.
    assert!(phase_ns(&limited, "f0") > 100_000_000 && phase_ns(&free, "f0") < 50_000_000);
}

#[test]
fn stores_through_a_shared_mapping_dirty_the_file() {
    let v = write_scenario(
        512,
        1000,
        100_000,
        "ext4",
        &[json!({"kind": "mmap", "region": 1, "passes": 2, "write_percent": 100})],
    );
    let r = run(&v);
    // Each page is dirtied once (the second pass finds it dirty: no fault).
    assert_eq!(counter(&r, "vmstat.nr_dirtied"), 1000);
    assert_eq!(counter(&r, "vmstat.nr_dirty"), 1000);
    assert_eq!(counter(&r, "vmstat.nr_mapped"), 1000);
}

/// The kernel run in small: a streaming write through a v1 memcg far smaller than
/// the global dirty limit.
fn streaming(fstype: &str) -> Value {
    write_scenario(512, 20_000, 4000, fstype, &[write(None)])
}

#[test]
fn streaming_write_in_a_v1_memcg_reclaims_written_pages_without_writing_any() {
    let mut s = build(&streaming("ext4"));
    s.set_check_interval(64);
    let r = s.run_to_end();
    assert_eq!(counter(&r, "vmstat.oom_kill"), 0);
    // 6.18: reclaim writes no file page (what nr_vmscan_write counts is the few heap pages it
    // swapped out); it marks dirty ones for immediate reclaim, wakes the flushers, and frees
    // them once written (rotated to the inactive tail).
    assert_eq!(
        counter(&r, "vmstat.nr_vmscan_write"),
        counter(&r, "vmstat.pswpout")
    );
    assert!(counter(&r, "vmstat.nr_vmscan_immediate_reclaim") > 0);
    assert!(counter(&r, "vmstat.pgrotated") > 0);
    assert!(counter(&r, "vmstat.pgsteal_file") >= 20_000 - 4000);
    assert!(counter(&r, "vmstat.nr_written") >= 20_000 - 4000);
    s.check_conservation().unwrap();
}

#[test]
fn before_the_seed_direct_reclaim_calls_writepage() {
    // vmscan.direct_file_writeback (≤3.1): memcg reclaim reaches pageout; xfs and ext4 refuse
    // it from direct reclaim (redirty), but pageout counts each call; no immediate reclaim.
    for fs in ["ext4", "xfs"] {
        let mut v = streaming(fs);
        v["kernel"]["switches"] =
            json!({"vmscan.direct_file_writeback": true, "vmscan.kswapd_file_writeback": "always"});
        let r = run(&v);
        assert!(counter(&r, "vmstat.nr_vmscan_write") > 0, "{fs}");
        assert_eq!(counter(&r, "vmstat.nr_vmscan_immediate_reclaim"), 0, "{fs}");
    }
    // Without immediate reclaim (before seed patch 4) dirty pages go back unmarked: nothing
    // counts as immediate reclaim, where the same run with it marks hundreds. Rotations at
    // writeback's end still happen in both: v1 memcg reclaim marks the folios it meets under
    // writeback to wait for (the memcg wait logic of 3.6+, which the switch leaves on); how
    // many depends on how the flusher and reclaim interleave, not on the switch alone.
    let on = run(&streaming("ext4"));
    let mut v = streaming("ext4");
    v["kernel"]["switches"] = json!({"vmscan.immediate_reclaim": false});
    let r = run(&v);
    assert!(counter(&on, "vmstat.nr_vmscan_immediate_reclaim") > 0);
    assert_eq!(counter(&r, "vmstat.nr_vmscan_immediate_reclaim"), 0);
    assert!(counter(&r, "vmstat.pgrotated") > 0);
}

#[test]
fn dirty_writeback_runs_are_deterministic() {
    let a = run(&streaming("xfs"));
    let b = run(&streaming("xfs"));
    assert_eq!(a.counters, b.counters);
    assert_eq!(
        a.phases.iter().map(|p| p.end_ns).collect::<Vec<_>>(),
        b.phases.iter().map(|p| p.end_ns).collect::<Vec<_>>()
    );
}

/// `add_file`'s filesystem with a volatile write cache: a flush occupies the device 1 ms.
fn with_flush(mut v: Value) -> Value {
    v["machine"]["filesystems"][0]["device"]["flush_ns"] = json!(1_000_000);
    v
}

#[test]
fn fsync_of_a_new_ext4_file_commits_its_metadata_with_two_flushes() {
    // 8 new files of 32 pages, each written, fsynced and closed (create_files): every fsync
    // writes the file's 32 pages (one request), the journal's descriptor and the 6 metadata
    // blocks a create and its allocation dirty (inode bitmap, inode table block, group
    // descriptor, directory block, the directory's inode table block, block bitmap; one
    // request of 7 bios), then the commit block between two flushes (REQ_PREFLUSH | REQ_FUA on
    // a device without FUA). The files' inodes are 12..19; those up to 16 share the root
    // directory's inode table block (16 inodes per block): 5 files log 5 metadata blocks, 3
    // log 6.
    let mut v = scenario(&[("heap", 16, "text")], 1, 100_000, false, false);
    v["machine"]["memory_bytes"] = json!(512 * MIB);
    add_file(&mut v, "ext4", 200_000_000, 32, &[]);
    add_create_loop(&mut v, 8);
    let r = run(&with_flush(v.clone()));
    // Data (one bio), journal (descriptor and metadata: one bio each, merged) and commit:
    // 3 requests a file.
    assert_eq!(counter(&r, "block[data].stat.write_ios"), 8 * 3);
    assert_eq!(counter(&r, "block[data].stat.write_merges"), 5 * 5 + 3 * 6);
    assert_eq!(counter(&r, "block[data].stat.flush_ios"), 8 * 2);
    // pgpgout counts the journal's KiB too: descriptor + metadata + commit blocks.
    assert_eq!(
        counter(&r, "vmstat.pgpgout"),
        (8 * 32 + 5 * (1 + 5 + 1) + 3 * (1 + 6 + 1)) * 4
    );
    // Each file waits for at least its two flushes.
    assert!(phase_ns(&r, "create") >= 8 * 2_000_000);
    // Without a volatile cache (no flush_ns) the commit block is a plain write: no flush.
    let plain = run(&v);
    assert_eq!(counter(&plain, "block[data].stat.flush_ios"), 0);
    assert_eq!(counter(&plain, "block[data].stat.write_ios"), 8 * 3);
    assert!(phase_ns(&plain, "create") + 8 * 2_000_000 <= phase_ns(&r, "create"));
    // xfs's log force is not modelled: its fsync writes the data only.
    let xfs = {
        let mut x = with_flush(v);
        x["machine"]["filesystems"][0]["fstype"] = json!("xfs");
        run(&x)
    };
    assert_eq!(counter(&xfs, "block[data].stat.write_ios"), 8);
    assert_eq!(counter(&xfs, "block[data].stat.flush_ios"), 0);
}

#[test]
fn fsync_of_an_existing_file_logs_its_inode() {
    // A file made before the run, rewritten with an fsync every 1000 pages: its blocks are
    // allocated, so each commit logs the inode's table block (the new mtime) only:
    // descriptor, inode block, commit block.
    let r = run(&with_flush(write_scenario(
        512,
        2000,
        100_000,
        "ext4",
        &[write(Some(1000 * 4096))],
    )));
    assert_eq!(counter(&r, "block[data].stat.flush_ios"), 2 * 2);
    assert_eq!(counter(&r, "vmstat.pgpgout"), (2000 + 2 * 3) * 4);
}

/// fs_mark's loop on the scenario's file region 1: `n` new files like it (region 1 and `n - 1`
/// copies), each created, written, fsynced and closed by one `create_files` phase.
fn add_create_loop(v: &mut serde_json::Value, n: u64) {
    let regs = v["processes"][0]["regions"].as_array_mut().unwrap();
    let file = regs[1].clone();
    for k in 1..n {
        let mut f = file.clone();
        f["name"] = json!(format!("f{k}"));
        regs.push(f);
    }
    v["processes"][0]["phases"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "create",
        "phase": {"kind": "create_files", "regions": (1..=n).collect::<Vec<_>>(), "fsync": true}}));
}

#[test]
fn a_create_loop_that_fills_the_journal_checkpoints_and_moves_its_tail() {
    // 600 new files of 32 pages on a 100 MiB ext4 image (1 KiB blocks, 4 inodes an inode
    // table block, a 4096-block journal): each commit logs 8-9 blocks, so after ~340 commits
    // less than a quarter of the log is free and every create waits for space. Then the
    // oldest checkpoint list is the transaction whose inode completed an inode table block
    // (one in four; the others' blocks were all logged again): one block written home, then
    // a flush and the journal superblock with REQ_FUA (an empty PREFLUSH write and a flush,
    // the superblock write and its post-flush) — as a traced kernel run did
    // (docs/model/time.md#flushes-and-the-journal).
    let n = 600;
    let mut v = scenario(&[("heap", 16, "text")], 1, 100_000, false, false);
    v["machine"]["memory_bytes"] = json!(512 * MIB);
    add_file(&mut v, "ext4", 200_000_000, 32, &[]);
    add_create_loop(&mut v, n);
    let no_size = run(&with_flush(v.clone()));
    v["machine"]["filesystems"][0]["image_bytes"] = json!(100 * MIB);
    let r = run(&with_flush(v));
    // Without a known size the journal never fills: 3 requests and 2 flushes a file.
    assert_eq!(counter(&no_size, "block[data].stat.write_ios"), 3 * n);
    assert_eq!(counter(&no_size, "block[data].stat.flush_ios"), 2 * n);
    let tail_updates = (counter(&r, "block[data].stat.flush_ios") - 2 * n) / 2;
    assert_eq!(
        counter(&r, "block[data].stat.flush_ios"),
        2 * n + 2 * tail_updates
    );
    let home_writes = counter(&r, "block[data].stat.write_ios") - 3 * n - 2 * tail_updates;
    // One home write and one tail update per wait, each freeing about four transactions
    // (8-9 blocks each) of the ~260 commits past the threshold.
    assert!(
        (55..=85).contains(&tail_updates),
        "{tail_updates} tail updates"
    );
    assert_eq!(home_writes, tail_updates);
}

#[test]
fn new_files_charge_their_inode_dentry_mapping_and_buffer_heads() {
    // 200 files of 32 pages created in a v1 memcg of 2048 pages (8 MiB) on a small ext4
    // (1 KiB blocks: 4 buffer heads a page): the limit holds the page cache and the kernel
    // memory of the files, 1928 bytes a file (dentry 200, ext4 inode 1136, one xarray node
    // 592) and 448 a cached page (4 buffer heads of 112).
    let n = 200u64;
    let mut v = scenario(&[("heap", 1, "text")], 1, 2048, false, false);
    add_file(&mut v, "ext4", 200_000_000, 32, &[]);
    v["machine"]["filesystems"][0]["image_bytes"] = json!(100 * MIB);
    add_create_loop(&mut v, n);
    let r = run(&v);
    let cache = counter(&r, "memcg[/t].memory.stat.cache");
    let usage = counter(&r, "memcg[/t].memory.usage_in_bytes");
    let kmem = n * 1928 + cache / 4096 * 448;
    // usage = cache + the heap's page + kernel memory, whole pages (the obj stock's rest).
    let other = usage - cache - 4096;
    assert!(
        other >= kmem && other < kmem + 2 * 4096,
        "usage {usage} cache {cache}: {other} bytes beyond, kernel objects {kmem}"
    );
}

#[test]
fn a_loop_device_counts_its_io_twice_in_pgpgin_and_pgpgout() {
    // The fsync test's workload (2000 pages written, an fsync every 1000, each committing 3
    // journal blocks) in a 1200-page memcg, then a read of the file, whose first pages reclaim
    // evicted: on a loop device over an image file (the lab's filesystems) submit_bio counts
    // every bio to the loop device and again its worker's direct IO bio to the device under
    // the image; the loop device's own request counts and the time model do not change.
    let phases = [
        write(Some(1000 * 4096)),
        json!({"kind": "read", "region": 1, "passes": 1}),
    ];
    let mut v = write_scenario(512, 2000, 1200, "ext4", &phases);
    v["machine"]["filesystems"][0]["backing"] = json!("device");
    let own = run(&v);
    v["machine"]["filesystems"][0]["backing"] = json!("loop");
    let looped = run(&v);
    assert_eq!(counter(&own, "vmstat.pgpgout"), (2000 + 2 * 3) * 4);
    assert!(counter(&own, "vmstat.pgpgin") >= 800 * 4);
    assert_eq!(
        counter(&looped, "vmstat.pgpgout"),
        2 * counter(&own, "vmstat.pgpgout")
    );
    assert_eq!(
        counter(&looped, "vmstat.pgpgin"),
        2 * counter(&own, "vmstat.pgpgin")
    );
    for key in [
        "block[data].stat.write_ios",
        "block[data].stat.read_ios",
        "vmstat.nr_written",
    ] {
        assert_eq!(counter(&looped, key), counter(&own, key), "{key}");
    }
    assert_eq!(phase_ns(&looped, "f0"), phase_ns(&own, "f0"));
    // A config without the key (written before it existed): the filesystem on its device.
    v["machine"]["filesystems"][0]
        .as_object_mut()
        .unwrap()
        .remove("backing");
    assert_eq!(
        counter(&run(&v), "vmstat.pgpgout"),
        counter(&own, "vmstat.pgpgout")
    );
}

#[test]
fn on_v2_the_memcg_dirty_domain_keeps_the_memcgs_dirty_pages_at_its_share() {
    // The streaming write through a 4000-page memcg, v1 against v2 (memory.max). v1 has the
    // global domain only (20% of ~120k dirtyable pages, far above the memcg): the memcg's page
    // cache goes mostly dirty. v2's memcg domain (mm/cgwb.rs) throttles the writer and
    // flushes the memcg's inode at 20% / 10% of what the memcg can hold (its file pages, no
    // headroom at the limit): about 800 / 400 pages.
    // memory.stat: v1's dirty / writeback, v2's file_dirty / file_writeback.
    let dirty_wb = |r: &reclaimlab_core::SimResult, prefix: &str| {
        (counter(r, &format!("memcg[/t].memory.stat.{prefix}dirty"))
            + counter(r, &format!("memcg[/t].memory.stat.{prefix}writeback")))
            / 4096
    };
    let v1 = run(&streaming("ext4"));
    let mut v = streaming("ext4");
    v["cgroups"]["version"] = json!(2);
    let v2 = run(&v);
    assert!(dirty_wb(&v1, "") > 2000, "v1: {}", dirty_wb(&v1, ""));
    assert!(
        dirty_wb(&v2, "file_") <= 900,
        "v2: {}",
        dirty_wb(&v2, "file_")
    );
    // Everything was written back either way but what is still dirty or being written.
    for r in [&v1, &v2] {
        assert_eq!(
            counter(r, "vmstat.nr_written")
                + counter(r, "vmstat.nr_dirty")
                + counter(r, "vmstat.nr_writeback"),
            counter(r, "vmstat.nr_dirtied"),
            "written {} dirty {} writeback {}",
            counter(r, "vmstat.nr_written"),
            counter(r, "vmstat.nr_dirty"),
            counter(r, "vmstat.nr_writeback")
        );
    }
    // The memcg's flusher work was throttling-driven: v2's writer slept in balance_dirty_pages.
    assert!(phase_ns(&v2, "f0") > phase_ns(&v1, "f0"));
}
