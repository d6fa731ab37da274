use reclaimlab_core::mm::page::pg;
use reclaimlab_core::mm::{Actor, Ctx};
use serde_json::json;

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
    let mut handles: Vec<u32> = (0..1309)
        .map(|_| mm.zswap_mut().pools[0].malloc(4096).unwrap())
        .collect();
    assert!(!mm.zswap_check_limits(0));
    assert_eq!(mm.zswap().ev.pool_limit_hit, 0);
    handles.push(mm.zswap_mut().pools[0].malloc(4096).unwrap());
    assert!(mm.zswap_check_limits(0), "at the limit: refused");
    assert!(mm.zswap_check_limits(0));
    assert_eq!(
        mm.zswap().ev.pool_limit_hit,
        2,
        "every attempt at the limit counts"
    );
    for _ in 0..100 {
        mm.zswap_mut().pools[0].free(handles.pop().unwrap());
    }
    assert_eq!(mm.zswap().pools[0].total_pages(), 1210);
    assert!(mm.zswap_check_limits(0), "in the band: still refused");
    assert_eq!(
        mm.zswap().ev.pool_limit_hit,
        2,
        "band attempts do not count"
    );
    for _ in 0..31 {
        mm.zswap_mut().pools[0].free(handles.pop().unwrap());
    }
    assert_eq!(mm.zswap().pools[0].total_pages(), 1179);
    assert!(
        !mm.zswap_check_limits(0),
        "at the accept threshold: accepted again"
    );
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
        s.mm()
            .pages()
            .iter()
            .filter(|p| p.has(pg::ZSWAP) && p.has(pg::REFERENCED))
            .count() as u64
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
    assert_eq!(
        mm.zswap().ev.reject_reclaim_fail,
        0,
        "rotations are not writeback failures"
    );
    assert_eq!(referenced(&s), stored - 16);
    // Keep running: after stored/16 runs every head has had its second chance.
    let mm = s.mm_mut();
    for _ in 0..(stored / 16 + 1) {
        run_worker(mm);
    }
    assert!(mm.vm().zswpwb > 0);
    assert_eq!(mm.vm().zswpwb, mm.zswap().ev.written_back_pages);
}

/// memory.events max as 6.12's try_charge_memcg raises it: a charge at memory.max inside reclaim
/// (PF_MEMALLOC) is forced and counted too; zswap's compressed charges come from the stock that
/// its uncharges refill (refill_stock), and raise the event only when the stock is empty and
/// the counter is at the limit.
#[test]
fn forced_charges_at_the_limit_count_memory_events_max() {
    let mut v = scenario(&[("a", 100, "text")], 1, 64, true, true);
    v["cgroups"]["groups"][1]["limit_bytes"] = json!(64 * 4096);
    v["cgroups"]["groups"][1]["high_bytes"] = json!(null);
    let mut s = build(&v);
    let mm = s.mm_mut();
    mm.memcgs_mut()[1].usage = 64;
    let mut ctx = Ctx::new(0, Actor::Process(0), 1024);
    ctx.memalloc = true;
    mm.try_charge(&mut ctx, 1).unwrap();
    assert_eq!(
        (mm.memcgs()[1].events.max_events, mm.memcgs()[1].usage),
        (1, 65),
        "forced, and counted"
    );
    // A zswap page charge at the limit with an empty stock: forced and counted.
    mm.charge_zswap(1, 1000);
    assert_eq!(
        (mm.memcgs()[1].events.max_events, mm.memcgs()[1].usage),
        (2, 66)
    );
    // Uncharging it refills the stock (usage unchanged); the next zswap charge takes the stock.
    mm.uncharge_zswap(1, 1000);
    assert_eq!((mm.memcgs()[1].stock, mm.memcgs()[1].usage), (1, 66));
    mm.charge_zswap(1, 1000);
    assert_eq!(
        (mm.memcgs()[1].events.max_events, mm.memcgs()[1].stock),
        (2, 0),
        "served by the stock"
    );
}

/// machine.host_memcgs: the worker's walk visits the host's other memcgs between the root and
/// the scenario's; 6.12+ skips them (-ENOENT: no attempt, no failure) at one step each. A run
/// on a freshly filled pool still ends after the same 16 rotations, 16 walks later, each walk
/// longer by the host's memcgs.
#[test]
fn host_memcgs_lengthen_the_workers_walk() {
    let steps_with = |host: u32| {
        let mut v = scenario(&[("a", 300, "text")], 1, 100, true, false);
        v["processes"][0]["phases"][1] = json!({"name": "idle", "phase": {"kind": "sleep", "duration_ns": 1_000_000_000_000u64}});
        v["machine"]["host_memcgs"] = json!(host);
        let mut s = build(&v);
        while s.mm().zswap().stored_pages < 200 {
            assert!(!s.step(1), "finished before the pool filled");
        }
        let mm = s.mm_mut();
        mm.zswap_mut().max_pool_percent = 0;
        mm.queue_shrink_worker(0);
        let mut ctx = Ctx::new(0, Actor::ZswapWorker, 1024);
        let mut steps = 0u64;
        while mm.zswap_worker_busy() {
            mm.zswap_worker_step(&mut ctx);
            steps += 1;
        }
        let rotated = mm
            .pages()
            .iter()
            .filter(|p| p.has(pg::ZSWAP) && !p.has(pg::REFERENCED))
            .count();
        (steps, rotated, mm.vm().zswpwb, ctx.now)
    };
    let (s0, r0, wb0, t0) = steps_with(0);
    let (s50, r50, wb50, t50) = steps_with(50);
    assert_eq!((r0, wb0), (16, 0));
    assert_eq!(
        (r50, wb50),
        (16, 0),
        "the host's memcgs neither fail nor count as attempts"
    );
    assert_eq!(
        s50 - s0,
        16 * 50,
        "each of the 16 walks visits the 50 host memcgs"
    );
    assert!(t50 > t0);
}
