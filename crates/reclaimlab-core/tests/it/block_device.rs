//! The block device's request model: the IOPS cap, plug merging of consecutive swap slots
//! (crate::block), and that devices without the new figures behave exactly as before.

use reclaimlab_core::block::Dir;
use reclaimlab_core::mm::{Actor, Ctx};
use serde_json::json;

use crate::common::*;

const IOPS: u64 = 1000;
/// 1280 KiB: the kernel's default max_sectors_kb cap (BLK_DEF_MAX_SECTORS_CAP) in 6.10.
const MAX_SECTORS_KB: u64 = 1280;

/// A swap-only run whose device has `iops` and `max_sectors_kb` (null: absent).
fn swap_only(iops: Option<u64>, max_sectors_kb: Option<u64>) -> serde_json::Value {
    let mut v = scenario(
        &[("a", 1000, "text"), ("b", 2500, "random")],
        30_000,
        1200,
        false,
        false,
    );
    v["machine"]["swap"][0]["device"]["iops"] = json!(iops);
    v["machine"]["swap"][0]["device"]["max_sectors_kb"] = json!(max_sectors_kb);
    v
}

/// zswap at a 1% pool limit, so the worker writes entries back one by one.
fn zswap_writeback(iops: Option<u64>, max_sectors_kb: Option<u64>) -> serde_json::Value {
    let mut v = scenario(
        &[
            ("a", 1000, "text"),
            ("b", 2500, "random"),
            ("z", 300, "zero"),
        ],
        30_000,
        1200,
        true,
        false,
    );
    v["kernel"]["zswap"]["max_pool_percent"] = json!(1);
    v["processes"][0]["phases"][3]["phase"]["write_percent"] = json!(50);
    v["machine"]["swap"][0]["device"]["iops"] = json!(iops);
    v["machine"]["swap"][0]["device"]["max_sectors_kb"] = json!(max_sectors_kb);
    v
}

/// (a) N writes to scattered slots are N requests, served one after another at no more than
/// `iops` per second, whether or not the submitter holds a plug.
#[test]
fn iops_cap_makes_scattered_writes_take_n_over_iops() {
    const N: u32 = 200;
    for plugged in [false, true] {
        let mut sim = build(&swap_only(Some(IOPS), Some(MAX_SECTORS_KB)));
        let mm = sim.mm_mut();
        let mut ctx = Ctx::new(0, Actor::Kswapd, 1024);
        if plugged {
            mm.blk_start_plug();
        }
        for k in 0..N {
            // Every other slot: no two bios are adjacent.
            mm.submit_bio(&mut ctx, 0, Dir::Write, 1 + 2 * k, k);
        }
        if plugged {
            mm.blk_finish_plug(&ctx);
        }
        let dev = &mm.swap().devs[0];
        assert_eq!(
            (dev.bdev.stat.write_ios, dev.bdev.stat.write_merges),
            (N as u64, 0)
        );
        let last = dev.bdev.inflight.back().unwrap().0;
        assert!(
            last >= N as u64 * 1_000_000_000 / IOPS,
            "{N} requests at {IOPS} IOPS done at {last} ns"
        );
    }
}

/// (b) The same writes to consecutive slots under one plug merge into requests of up to
/// max_sectors_kb, and finish far sooner than the scattered ones.
#[test]
fn plugged_consecutive_writes_merge() {
    const N: u32 = 200;
    let per_request = (MAX_SECTORS_KB / 4) as u32;
    let mut sim = build(&swap_only(Some(IOPS), Some(MAX_SECTORS_KB)));
    let mm = sim.mm_mut();
    let mut ctx = Ctx::new(0, Actor::Kswapd, 1024);
    mm.blk_start_plug();
    for k in 0..N {
        mm.submit_bio(&mut ctx, 0, Dir::Write, 1 + k, k);
    }
    mm.blk_finish_plug(&ctx);
    let dev = &mm.swap().devs[0];
    let requests = N.div_ceil(per_request) as u64;
    assert_eq!(
        (dev.bdev.stat.write_ios, dev.bdev.stat.write_merges),
        (requests, N as u64 - requests)
    );
    let last = dev.bdev.inflight.back().unwrap().0;
    assert!(
        last < N as u64 * 1_000_000_000 / IOPS / 10,
        "merged writes done at {last} ns"
    );

    // Without a plug nothing merges, consecutive or not.
    let mut sim = build(&swap_only(Some(IOPS), Some(MAX_SECTORS_KB)));
    let mm = sim.mm_mut();
    let mut ctx = Ctx::new(0, Actor::Kswapd, 1024);
    for k in 0..N {
        mm.submit_bio(&mut ctx, 0, Dir::Write, 1 + k, k);
    }
    assert_eq!(mm.swap().devs[0].bdev.stat.write_ios, N as u64);
}

/// A plug holds at most BLK_MAX_REQUEST_COUNT requests, and a request stops growing at
/// max_sectors_kb.
#[test]
fn plug_limits() {
    let mut sim = build(&swap_only(None, Some(8)));
    let mm = sim.mm_mut();
    let mut ctx = Ctx::new(0, Actor::Kswapd, 1024);
    mm.blk_start_plug();
    // Pairs of adjacent slots (8 KiB = two pages per request), 40 pairs apart from each other.
    for k in 0..40u32 {
        mm.submit_bio(&mut ctx, 0, Dir::Write, 1 + 4 * k, 2 * k);
        mm.submit_bio(&mut ctx, 0, Dir::Write, 2 + 4 * k, 2 * k + 1);
        if k == 31 {
            assert_eq!(
                mm.swap().devs[0].bdev.stat.write_ios,
                0,
                "32 requests wait in the plug"
            );
        }
        if k == 32 {
            assert_eq!(
                mm.swap().devs[0].bdev.stat.write_ios,
                32,
                "the 33rd request flushed the plug"
            );
        }
    }
    mm.blk_finish_plug(&ctx);
    let s = &mm.swap().devs[0].bdev.stat;
    assert_eq!((s.write_ios, s.write_merges), (40, 40));
}

/// With nr_requests tags, a submitter finding them all in flight sleeps until one completes:
/// N scattered writes at `IOPS` keep the submitter busy until the (N − nr_requests)-th has
/// completed, and never more than nr_requests are in flight.
#[test]
fn nr_requests_makes_the_submitter_wait() {
    const N: u32 = 100;
    const TAGS: u32 = 4;
    let mut v = swap_only(Some(IOPS), Some(MAX_SECTORS_KB));
    v["machine"]["swap"][0]["device"]["nr_requests"] = json!(TAGS);
    let mut sim = build(&v);
    let mm = sim.mm_mut();
    let mut ctx = Ctx::new(0, Actor::Kswapd, 1024);
    mm.blk_start_plug();
    for k in 0..N {
        mm.submit_bio(&mut ctx, 0, Dir::Write, 1 + 2 * k, k);
        assert!(mm.swap().devs[0].bdev.tags.len() <= TAGS as usize);
    }
    mm.blk_finish_plug(&ctx);
    let per_request = 1_000_000_000 / IOPS;
    assert!(
        ctx.now >= (N - TAGS) as u64 * per_request,
        "submitter free at {} ns",
        ctx.now
    );
    assert!(ctx.now < (N - TAGS + 1) as u64 * per_request + 1_000_000);
    assert_eq!(mm.swap().devs[0].bdev.stat.write_ios, N as u64);

    // In a whole run, the zswap worker's writeback waits for tags like everyone else.
    let mut v = zswap_writeback(Some(IOPS), Some(MAX_SECTORS_KB));
    let free = run(&v);
    v["machine"]["swap"][0]["device"]["nr_requests"] = json!(TAGS);
    let limited = run(&v);
    assert!(counter(&limited, "vmstat.zswpwb") > 0);
    assert_ne!(free.counters, limited.counters);
}

/// In whole runs: reclaim's swap-outs under shrink_lruvec's plug merge; zswap writeback, which
/// holds no plug, is one request per page. ios + merges count every page sent to the device.
#[test]
fn reclaim_merges_writeback_does_not() {
    let r = run(&swap_only(None, Some(MAX_SECTORS_KB)));
    let (ios, merges) = (
        counter(&r, "block[swapfile].stat.write_ios"),
        counter(&r, "block[swapfile].stat.write_merges"),
    );
    assert_eq!(ios + merges, counter(&r, "vmstat.pswpout"));
    assert!(
        ios * 4 < counter(&r, "vmstat.pswpout"),
        "reclaim writes should merge: {ios} requests, {merges} merges"
    );
    let (rios, rmerges) = (
        counter(&r, "block[swapfile].stat.read_ios"),
        counter(&r, "block[swapfile].stat.read_merges"),
    );
    assert_eq!(rios + rmerges, counter(&r, "vmstat.pswpin"));
    assert!(
        rmerges > 0,
        "readahead windows of consecutive slots should merge"
    );

    let r = run(&zswap_writeback(None, Some(MAX_SECTORS_KB)));
    let ios = counter(&r, "block[swapfile].stat.write_ios");
    assert_eq!(
        ios + counter(&r, "block[swapfile].stat.write_merges"),
        counter(&r, "vmstat.pswpout")
    );
    assert!(counter(&r, "vmstat.zswpwb") > 0);
    assert!(
        ios >= counter(&r, "vmstat.zswpwb"),
        "every writeback is a request of its own"
    );
}

/// The IOPS cap slows a run that writes, and bounds its request rate.
#[test]
fn iops_cap_slows_the_run() {
    let end = |r: &reclaimlab_core::SimResult| r.phases.last().unwrap().end_ns;
    let free = run(&zswap_writeback(None, None));
    let capped = run(&zswap_writeback(Some(IOPS), None));
    assert!(end(&capped) > end(&free));
    let requests = counter(&capped, "block[swapfile].stat.write_ios")
        + counter(&capped, "block[swapfile].stat.read_ios");
    // Every request is served before the last completion, one per millisecond at most.
    assert!(
        requests * 1_000_000_000 / IOPS <= end(&capped) + 1_000_000_000,
        "{requests} requests by {} ns",
        end(&capped)
    );
}

/// (c) Without `iops` and `max_sectors_kb` the device is the per-page model it was before
/// they existed (up to commit b35bbf2: `SwapDev::submit_read`/`submit_write`), reimplemented here:
/// one request per page, issued at submission, served in order at the bandwidth, latency
/// overlapped, writes completing in order.
#[test]
fn no_figures_is_the_per_page_model() {
    struct PerPage {
        pipe_free: u64,
        last_write: u64,
    }
    let m = swap_only(None, None)["machine"]["swap"][0]["device"].clone();
    let (rl, wl) = (
        m["read_latency_ns"].as_u64().unwrap(),
        m["write_latency_ns"].as_u64().unwrap(),
    );
    let (rbw, wbw) = (
        m["read_bytes_per_s"].as_u64().unwrap(),
        m["write_bytes_per_s"].as_u64().unwrap(),
    );
    let transfer = |bw: u64| (4096 * 1_000_000_000u64).div_ceil(bw);
    let mut old = PerPage {
        pipe_free: 0,
        last_write: 0,
    };
    let mut sim = build(&swap_only(None, None));
    let mm = sim.mm_mut();
    let mut ctx = Ctx::new(0, Actor::Kswapd, 1024);
    // Plugs change nothing on such a device: bios go out as they come.
    mm.blk_start_plug();
    let (mut now, mut x) = (0u64, 12345u64);
    for k in 0..2000u32 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        now += (x >> 33) % 10_000;
        let write = (x >> 20) & 1 == 1;
        let off = 1 + k; // consecutive: would merge on a device that merges
        let start = now.max(old.pipe_free);
        let want = if write {
            old.pipe_free = start + transfer(wbw);
            old.last_write = (old.pipe_free + wl).max(old.last_write);
            old.last_write
        } else {
            old.pipe_free = start + transfer(rbw);
            old.pipe_free + rl
        };
        let dir = if write { Dir::Write } else { Dir::Read };
        ctx.now = now;
        assert_eq!(
            mm.submit_bio(&mut ctx, 0, dir, off, k),
            Some(want),
            "bio {k}"
        );
    }
    assert!(mm.blk_finish_plug(&ctx).iter().all(|&(_, t)| t > 0));
    let s = &mm.swap().devs[0].bdev.stat;
    assert_eq!(s.read_merges + s.write_merges, 0);
}

/// (c) In whole runs: absent and null figures are the same device, deterministic, and no
/// block[...] counters are exported for it (they would repeat pswpin/pswpout).
#[test]
fn no_figures_same_run_no_block_counters() {
    let mut absent = swap_only(None, None);
    let dev = absent["machine"]["swap"][0]["device"]
        .as_object_mut()
        .unwrap();
    dev.remove("iops");
    dev.remove("max_sectors_kb");
    let a = run(&absent);
    let b = run(&swap_only(None, None));
    assert_eq!(a.counters, b.counters);
    assert_eq!(
        serde_json::to_string(&a.phases).unwrap(),
        serde_json::to_string(&b.phases).unwrap()
    );
    assert!(!a.counters.iter().any(|(k, _)| k.starts_with("block[")));
}

/// Every page stays in exactly one place after every event when writes wait in plugs and
/// submitters sleep for tags.
#[test]
fn page_conservation_every_event_with_request_model() {
    let mut v = zswap_writeback(Some(IOPS), Some(MAX_SECTORS_KB));
    v["machine"]["swap"][0]["device"]["nr_requests"] = json!(8);
    let mut s = build(&v);
    s.set_check_interval(1);
    let r = s.run_to_end();
    assert!(counter(&r, "block[swapfile].stat.write_merges") > 0);
    assert!(counter(&r, "vmstat.zswpwb") > 0);
    s.check_conservation().unwrap();
}

/// Runs with the request model are deterministic too.
#[test]
fn request_model_is_deterministic() {
    let v = zswap_writeback(Some(IOPS), Some(MAX_SECTORS_KB));
    let (a, b) = (run(&v), run(&v));
    assert_eq!(a.counters, b.counters);
    assert_eq!(
        serde_json::to_string(&a.phases).unwrap(),
        serde_json::to_string(&b.phases).unwrap()
    );
}
