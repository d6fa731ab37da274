//! Every seed-patch switch changes behaviour (docs/model/switches.md).
use reclaimlab_core::mm::page::pg;
use reclaimlab_core::mm::{Actor, Ctx, Mm};
use reclaimlab_core::Simulation;
use serde_json::{json, Value};

use crate::common::*;

/// One process in /t fills `pages` text pages under a limit of 100 pages, then idles, so that
/// most of them sit in zswap; extra empty cgroups stand for "tiny services under systemd".
fn filled_pool(version: &str, switches: Value, pages: u64, empty_cgroups: usize) -> Simulation {
    let mut v = scenario(&[("a", pages, "text")], 1, 100, true, false);
    v["kernel"]["version"] = json!(version);
    v["kernel"]["switches"] = switches;
    v["processes"][0]["phases"][1] =
        json!({"name": "idle", "phase": {"kind": "sleep", "duration_ns": 1_000_000_000_000u64}});
    for k in 0..empty_cgroups {
        v["cgroups"]["groups"].as_array_mut().unwrap().push(json!({"path": format!("/e{k}"), "parent": 0,
            "limit_bytes": null, "high_bytes": null, "swappiness": null, "zswap_max_bytes": null, "zswap_writeback": true}));
    }
    let mut s = build(&v);
    while s.mm().zswap().stored_pages < pages - 120 {
        assert!(!s.step(1), "finished before the pool filled");
    }
    s
}

/// Switch a v1-filled machine to cgroup v2 semantics, charging the stored entries to their
/// memcg as v2 would have (for switches that only exist on v2).
fn as_v2(mm: &mut Mm) {
    mm.set_cgroup_v2();
    // v2 charges zswap to the memcg: lift /t's limit so the extra charge does not OOM it.
    mm.memcgs_mut()[1].limit = u64::MAX;
    let stored: Vec<u32> = (0..mm.pages().len() as u32)
        .filter(|&i| mm.pages()[i as usize].has(pg::ZSWAP))
        .collect();
    for i in stored {
        let (m, len) = (
            mm.pages()[i as usize].memcg,
            mm.pages()[i as usize].zlen as u64,
        );
        mm.charge_zswap(m, len);
    }
}

/// Queue the worker and run it until it stops (one run, plus any run it re-queued).
fn run_worker(mm: &mut Mm, now: u64) -> u64 {
    mm.queue_shrink_worker(now);
    let mut ctx = Ctx::new(now, Actor::ZswapWorker, 1024);
    let before = mm.vm().zswpwb;
    for _ in 0..100_000 {
        if !mm.zswap_worker_busy() {
            break;
        }
        mm.zswap_worker_step(&mut ctx);
    }
    mm.vm().zswpwb - before
}

#[test]
fn shrink_worker_fix_keeps_writing_back_past_empty_memcgs() {
    let wb = |worker: &str| {
        let mut s = filled_pool("6.10", json!({"zswap.shrink_worker": worker}), 300, 20);
        s.mm_mut().zswap_mut().max_pool_percent = 0;
        run_worker(s.mm_mut(), 0)
    };
    let (old, fixed) = (wb("6.10"), wb("fixed"));
    assert!(
        old <= 2,
        "6.10 aborts after 16 failures, counting empty memcgs: {old}"
    );
    assert!(
        fixed >= 150,
        "the fix skips empty memcgs and writes back to the threshold: {fixed}"
    );
}

/// 6.10: a memcg with zswap writeback disabled (-EINVAL) aborts the whole worker run; the fix
/// just skips it.
#[test]
fn v6_10_worker_aborts_on_writeback_disabled_memcg() {
    let wb = |worker: &str| {
        let mut s = filled_pool("6.10", json!({"zswap.shrink_worker": worker}), 300, 1);
        let mm = s.mm_mut();
        mm.zswap_mut().max_pool_percent = 0;
        // memory.zswap.writeback is a cgroup v2 file: switch the tree to v2 semantics and
        // disable it on /e0, which the cursor reaches right after /t.
        as_v2(mm);
        mm.memcgs_mut()[2].zswap_writeback = false;
        run_worker(mm, 0)
    };
    assert_eq!(
        wb("6.10"),
        1,
        "root (empty: a failure), /t (one writeback), /e0 (-EINVAL: abort)"
    );
    assert!(wb("fixed") > 100);
}

#[test]
fn proactive_shrinking_accepts_in_the_band_and_starts_early() {
    let mut v = scenario(&[("a", 10, "text")], 1, 10_000, true, false);
    v["kernel"]["zswap"]["max_pool_percent"] = json!(1);
    v["kernel"]["zswap"]["accept_threshold_percent"] = json!(50);
    v["kernel"]["switches"] = json!({"zswap.proactive_shrink": true});
    let mut s = build(&v);
    let mm = s.mm_mut();
    // max 1310 pages; the worker starts at 51% = 668 pages.
    let mut handles: Vec<u32> = (0..667)
        .map(|_| mm.zswap_mut().pools[0].malloc(4096).unwrap())
        .collect();
    assert!(!mm.zswap_check_limits(0));
    assert!(!mm.zswap_worker_busy());
    handles.push(mm.zswap_mut().pools[0].malloc(4096).unwrap());
    assert!(
        !mm.zswap_check_limits(0),
        "between the start threshold and the max: accepted"
    );
    assert!(mm.zswap_worker_busy(), "and the worker was started");
    while mm.zswap_total_pages() < 1310 {
        handles.push(mm.zswap_mut().pools[0].malloc(4096).unwrap());
    }
    assert!(mm.zswap_check_limits(0));
    assert_eq!(mm.zswap().ev.pool_limit_hit, 1);
    handles.truncate(handles.len() - 1);
    for h in handles.split_off(1300) {
        mm.zswap_mut().pools[0].free(h);
    }
    assert!(
        !mm.zswap_check_limits(0),
        "no hysteresis: below the max is accepted at once"
    );
}

#[test]
fn writeback_pause_after_a_load_miss() {
    let mut s = filled_pool(
        "6.10",
        json!({"zswap.shrink_worker": "fixed", "zswap.writeback_pause_ms": 500}),
        300,
        0,
    );
    let mm = s.mm_mut();
    mm.zswap_mut().max_pool_percent = 0;
    mm.note_zswap_contention(1_000_000);
    assert_eq!(
        run_worker(mm, 2_000_000),
        0,
        "within 500 ms of the miss: no writeback"
    );
    let mut ctx = Ctx::new(600_000_000, Actor::ZswapWorker, 1024);
    let before = mm.vm().zswpwb;
    // Writeback charges folios to the full memcg, whose reclaim then refuses stores (the pool
    // limit is 0 here) and so restarts the pause: follow the worker's own clock.
    for _ in 0..1000 {
        ctx.now = ctx.now.max(mm.zswap().worker_clock);
        mm.zswap_worker_step(&mut ctx);
    }
    assert!(mm.vm().zswpwb > before, "after the pause it writes back");
}

#[test]
fn background_worker_yields_to_busy_cpus() {
    let mut s = filled_pool(
        "6.10",
        json!({"zswap.shrink_worker": "fixed", "zswap.worker_mem_reclaim": false}),
        300,
        0,
    );
    let mm = s.mm_mut();
    mm.zswap_mut().max_pool_percent = 0;
    mm.zswap_mut().cpus_saturated = true;
    mm.queue_shrink_worker(0);
    let mut ctx = Ctx::new(0, Actor::ZswapWorker, 1024);
    for _ in 0..100 {
        mm.zswap_worker_step(&mut ctx);
    }
    assert_eq!(
        mm.vm().zswpwb,
        0,
        "no CPU to spare: the background worker waits"
    );
    mm.zswap_mut().cpus_saturated = false;
    assert!(run_worker(mm, ctx.now) > 0);
}

/// Two cgroups: /a's pages are stored first (older), then /b's. A global LRU writes back the
/// oldest entries whatever their cgroup; per-memcg LRUs are walked round robin.
#[test]
fn global_lru_writes_back_oldest_first() {
    let per_cgroup = |lru: &str| {
        let mut v = scenario(&[("a", 300, "text")], 1, 100, true, false);
        v["kernel"]["version"] = json!("6.10");
        v["kernel"]["switches"] = json!({"zswap.lru": lru, "zswap.shrink_worker": "fixed"});
        let idle = json!({"name": "idle", "phase": {"kind": "sleep", "duration_ns": 1_000_000_000_000u64}});
        v["processes"][0]["phases"][1] = idle.clone();
        let mut second = v["processes"][0].clone();
        second["name"] = json!("q");
        second["cgroup"] = json!(2);
        second["phases"] = json!([{"name": "wait", "phase": {"kind": "sleep", "duration_ns": 50_000_000u64}},
            {"name": "fill", "phase": {"kind": "fill", "region": 0}}, idle]);
        v["processes"].as_array_mut().unwrap().push(second);
        let mut g = v["cgroups"]["groups"][1].clone();
        g["path"] = json!("/b");
        v["cgroups"]["groups"].as_array_mut().unwrap().push(g);
        let mut s = build(&v);
        while s.mm().memcgs()[2].events.zswpout < 150 {
            assert!(!s.step(1));
        }
        let mm = s.mm_mut();
        mm.zswap_mut().max_pool_percent = 0;
        mm.queue_shrink_worker(0);
        let mut ctx = Ctx::new(0, Actor::ZswapWorker, 1024);
        while mm.vm().zswpwb < 60 {
            mm.zswap_worker_step(&mut ctx);
        }
        (mm.memcgs()[1].events.zswpwb, mm.memcgs()[2].events.zswpwb)
    };
    let (a, b) = per_cgroup("global");
    assert_eq!(
        (a, b),
        (60, 0),
        "global LRU: the older cgroup's entries go first"
    );
    let (a, b) = per_cgroup("per_memcg");
    assert!(
        a > 20 && b > 20,
        "per-memcg LRUs: round robin over cgroups ({a}, {b})"
    );
}

#[test]
fn global_lru_has_no_memory_pressure_shrinker() {
    let mut v = scenario(&[("a", 10, "text")], 1, 100, true, true);
    v["kernel"]["zswap"]["shrinker_enabled"] = json!(true);
    v["kernel"]["switches"] = json!({"zswap.lru": "global"});
    let cfg: reclaimlab_core::SimConfig = serde_json::from_value(v).unwrap();
    let e = Simulation::new(&cfg).err().unwrap();
    assert_eq!(e.path, "kernel.zswap.shrinker_enabled", "{e}");
}

#[test]
fn protection_modes_differ() {
    let count = |version: &str| {
        let mut s = filled_pool(version, json!({}), 300, 0);
        let mm = s.mm_mut();
        as_v2(mm); // the shrinker counts only with v2 memcg statistics
        mm.zswap_mut().shrinker_enabled = true;
        (mm.zswap_shrinker_count(1), mm.memcgs()[1].zswap_lru.len)
    };
    let (referenced, lru) = count("6.18");
    let (protected, lru2) = count("6.10");
    assert_eq!(lru, lru2);
    assert!(referenced > 0);
    assert!(
        protected < referenced,
        "nr_zswap_protected shields part of the LRU: {protected} vs {referenced}"
    );
}

#[test]
fn thirty_two_zpools_take_more_pages() {
    let pool = |zpools: u64| {
        let mut v = scenario(
            &[("a", 3000, "text"), ("r", 1000, "mix1024")],
            20_000,
            1000,
            true,
            false,
        );
        v["kernel"]["switches"] = json!({"zswap.zpools": zpools});
        counter(&run(&v), "zswap.pool_total_size")
    };
    assert!(
        pool(32) > pool(1),
        "32 pools leave more partially filled zspages"
    );
}

/// /sys/kernel/mm/swap/vma_ra_enabled: off, a non-rotational swap device gets cluster readahead
/// (what a rotational one always gets), so the readahead counters change; on a rotational
/// device the knob changes nothing (swap_use_vma_readahead also needs nr_rotate_swap == 0).
#[test]
fn vma_ra_enabled_chooses_the_readahead_path() {
    let run_with = |rotational: bool, vma_ra: bool| {
        let mut v = scenario(&[("a", 8192, "mix1024")], 40_000, 2048, false, false);
        v["machine"]["swap"][0]["device"]["rotational"] = json!(rotational);
        v["kernel"]["swap"] = json!({"vma_ra_enabled": vma_ra});
        run(&v)
    };
    let ra = |r: &reclaimlab_core::SimResult| {
        (
            counter(r, "vmstat.swap_ra"),
            counter(r, "vmstat.swap_ra_hit"),
        )
    };
    let (ssd_on, ssd_off) = (run_with(false, true), run_with(false, false));
    assert!(
        counter(&ssd_on, "vmstat.pswpin") > 1000,
        "the test must swap in"
    );
    assert_ne!(
        ra(&ssd_on),
        ra(&ssd_off),
        "the knob switches VMA readahead off on an SSD"
    );
    let (hdd_on, hdd_off) = (run_with(true, true), run_with(true, false));
    assert_eq!(
        hdd_on.counters, hdd_off.counters,
        "a rotational device always uses cluster readahead"
    );
}

/// 6.1's non-exclusive loads: a page read back from zswap keeps its entry and stays clean, so a
/// read-only workload under a limit stores each page exactly once (the guest's 6.1 runs:
/// zswpout = the pages filled, docs/vmlab.md); exclusive loads store it again at every
/// reclaim. The 6.1 preset also takes zbud as zswap's default allocator.
#[test]
fn non_exclusive_loads_store_each_clean_page_once() {
    let run_with = |version: &str, load: &str| {
        let mut v = scenario(&[("a", 1200, "text")], 20_000, 600, true, true);
        v["kernel"]["version"] = json!(version);
        v["kernel"]["switches"] = json!({"zswap.load": load});
        run(&v)
    };
    let kept = run_with("6.1", "non_exclusive");
    let (out, inn) = (
        counter(&kept, "vmstat.zswpout"),
        counter(&kept, "vmstat.zswpin"),
    );
    assert!(inn > 1000, "the workload reloads pages ({inn})");
    assert!(
        out <= 1200,
        "each page stored at most once ({out} stores of 1200 pages)"
    );
    assert_eq!(
        counter(&kept, "vmstat.nr_zspages"),
        0,
        "6.1's default allocator is zbud"
    );
    let exclusive = run_with("6.1", "exclusive");
    assert!(
        counter(&exclusive, "vmstat.zswpout") > out + inn / 2,
        "exclusive loads store again at every reclaim"
    );
    let s = reclaimlab_core::policy::Switches::preset("6.1").unwrap();
    assert_eq!(
        (s.lru, s.load),
        (
            reclaimlab_core::policy::ZswapLru::Global,
            reclaimlab_core::policy::ZswapLoad::NonExclusive
        )
    );
}
