use reclaimlab_core::mm::page::pg;
use reclaimlab_core::mm::{Actor, Ctx};

use crate::common::*;

/// zswap_check_limits: pool_limit_hit counts store attempts at or over max_pages; attempts in
/// the band between the accept threshold and the limit are refused without counting; the
/// refusal ends only at or below the accept threshold.
#[test]
fn pool_limit_hysteresis() {
    let mut v = scenario(&[("a", 10, "text")], 1, 10_000, true, false);
    // 512 MiB = 131072 pages; 1% → max 1310 pages, accept 90% → 1179 pages.
    v["kernel"]["zswap"]["max_pool_percent"] = serde_json::json!(1);
    let mut s = build(&v);
    let mm = s.mm_mut();
    assert_eq!(mm.zswap_max_pages(), 1310);
    assert_eq!(mm.zswap_accept_thr_pages(), 1179);
    // Huge objects take one zsmalloc page each.
    let mut handles: Vec<u32> = (0..1309).map(|_| mm.zswap_mut().pools[0].malloc(4096).unwrap()).collect();
    assert!(!mm.zswap_check_limits(0));
    assert_eq!(mm.zswap().ev.pool_limit_hit, 0);
    handles.push(mm.zswap_mut().pools[0].malloc(4096).unwrap());
    assert!(mm.zswap_check_limits(0), "at the limit: refused");
    assert!(mm.zswap_check_limits(0));
    assert_eq!(mm.zswap().ev.pool_limit_hit, 2, "every attempt at the limit counts");
    for _ in 0..100 {
        mm.zswap_mut().pools[0].free(handles.pop().unwrap());
    }
    assert_eq!(mm.zswap().pools[0].total_pages(), 1210);
    assert!(mm.zswap_check_limits(0), "in the band: still refused");
    assert_eq!(mm.zswap().ev.pool_limit_hit, 2, "band attempts do not count");
    for _ in 0..31 {
        mm.zswap_mut().pools[0].free(handles.pop().unwrap());
    }
    assert_eq!(mm.zswap().pools[0].total_pages(), 1179);
    assert!(!mm.zswap_check_limits(0), "at the accept threshold: accepted again");
    assert!(!mm.zswap_check_limits(0));
    assert_eq!(mm.zswap().ev.pool_limit_hit, 2);
}

/// The shrink worker gives up after 16 failures. On a freshly filled pool every LRU head is
/// referenced, so a run only clears 16 referenced bits (second chance) and writes nothing back;
/// once the heads are unreferenced, runs write back.
#[test]
fn worker_aborts_after_16_failures() {
    let mut v = scenario(&[("a", 300, "text")], 1, 100, true, false);
    // Replace the random phase by a long sleep so the pool stays populated.
    v["processes"][0]["phases"][1] = serde_json::json!({"name": "idle", "phase": {"kind": "sleep", "duration_ns": 1_000_000_000_000u64}});
    let mut s = build(&v);
    while s.mm().zswap().stored_pages < 200 {
        assert!(!s.step(1), "finished before the pool filled");
    }
    let stored = s.mm().zswap().stored_pages;
    let referenced = |s: &reclaimlab_core::Simulation| {
        s.mm().pages().iter().filter(|p| p.has(pg::ZSWAP) && p.has(pg::REFERENCED)).count() as u64
    };
    assert_eq!(referenced(&s), stored, "every new entry starts referenced");
    let mm = s.mm_mut();
    mm.zswap_mut().max_pool_percent = 0; // any pool is over the accept threshold now
    let run_worker = |mm: &mut reclaimlab_core::mm::Mm| {
        mm.queue_shrink_worker(0);
        let mut ctx = Ctx::new(0, Actor::ZswapWorker, 1024);
        let mut steps = 0;
        while mm.zswap_worker_busy() {
            mm.zswap_worker_step(&mut ctx);
            steps += 1;
            assert!(steps < 10_000);
        }
    };
    run_worker(mm);
    assert_eq!(mm.vm().zswpwb, 0);
    assert_eq!(mm.zswap().ev.reject_reclaim_fail, 0, "rotations are not writeback failures");
    assert_eq!(referenced(&s), stored - 16);
    // Keep running: after stored/16 runs every head has had its second chance.
    let mm = s.mm_mut();
    for _ in 0..(stored / 16 + 1) {
        run_worker(mm);
    }
    assert!(mm.vm().zswpwb > 0);
    assert_eq!(mm.vm().zswpwb, mm.zswap().ev.written_back_pages);
}
