//! zswap's kernel paths as of 6.18 (mm/zswap.c; kernel-model.md §9): store, load, invalidate,
//! writeback, the global shrink worker's steps, and the memory-pressure shrinker. The pool
//! itself (parameters, allocator pools, limits, counters, worker state) is crate::zswap.
//!
//! Simplified: one node (so shrink_memcg walks one LRU item per call); one pool (the
//! compressor never changes during a run); the entry's memcg is the page's memcg; no large
//! folios; compressor errors other than "output ≥ PAGE_SIZE" do not occur (real codecs on
//! 4 KiB inputs with a 2-page buffer); allocation failures happen only when no page is free.

use super::page::{list, pg, NONE};
use super::{Ctx, Mm, MAX_RECLAIM_RETRIES, PAGE_SIZE};
use crate::policy::{
    Incompressible, SameFilled, ShrinkWorker, ShrinkerProtection, ZswapLoad, ZswapLru,
};
use crate::sim::{EventKind, Time};
use crate::zpool::ZpoolError;
use crate::zswap::WorkerRun;

/// Why one writeback attempt failed (the kernel's errno).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WbError {
    /// -EEXIST: the slot already has a swap-cache folio (a racing swap-in).
    Exist,
    /// -ENOMEM: no folio could be allocated or charged, or the entry was invalidated.
    NoMem,
}

/// What shrink_memcg_cb did with the entry at the LRU head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Visit {
    /// Second chance: referenced bit cleared, entry rotated.
    Rotated,
    WrittenBack,
    Failed(WbError),
}

/// shrink_memcg's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShrinkResult {
    Ok,
    /// -ENOENT: writeback disabled or nothing on this memcg's LRU.
    NoEnt,
    /// -EAGAIN: visited entries, wrote none back (6.10: also an empty LRU).
    Again,
    /// -EINVAL (6.10 only): writeback disabled; aborts the 6.10 worker.
    Inval,
}

/// The zswap pool (crate::zswap) through its narrow methods.
impl Mm {
    pub fn zswap_max_pages(&self) -> u64 {
        self.zswap.max_pages()
    }

    pub fn zswap_accept_thr_pages(&self) -> u64 {
        self.zswap.accept_thr_pages()
    }

    pub fn zswap_total_pages(&self) -> u64 {
        self.zswap.total_pages()
    }

    pub fn zswap_check_limits(&mut self, now: Time) -> bool {
        self.zswap
            .check_limits(now, self.switches.proactive_shrink, &mut self.queue)
    }

    fn zswap_pool_malloc(&mut self, i: u32, len: u32) -> Result<u32, ZpoolError> {
        self.zswap.pool_malloc(i, len, &mut self.nr_free)
    }

    fn zswap_pool_free(&mut self, i: u32, h: u32) {
        self.zswap.pool_free(i, h, &mut self.nr_free);
    }

    pub fn queue_shrink_worker(&mut self, now: Time) {
        self.zswap.queue_shrink_worker(now, &mut self.queue);
    }

    pub fn zswap_worker_busy(&self) -> bool {
        self.zswap.worker_busy()
    }

    /// Funaki's patch 6: remember a store reject or load miss.
    pub fn note_zswap_contention(&mut self, now: Time) {
        if self.zswap.enabled && self.switches.writeback_pause_ms > 0 {
            self.zswap.last_contention = Some(now);
        }
    }

    /// The memcg whose zswap LRU holds page `i`'s entry (the root's list is the global LRU).
    pub(crate) fn zswap_lru_owner(&self, i: u32) -> u16 {
        match self.switches.lru {
            ZswapLru::Global => 0,
            ZswapLru::PerMemcg => self.pages[i as usize].memcg,
        }
    }

    /// zswap_store for an order-0 folio. True if stored (the caller frees the folio).
    pub fn zswap_store(&mut self, ctx: &mut Ctx, i: u32) -> bool {
        // ≤6.4 (non-exclusive loads): a dirtied swap-cache folio may still have the entry its
        // load left behind; __frontswap_store (6.1 mm/frontswap.c) invalidates a duplicate
        // before storing, whether or not the new store succeeds.
        if self.pages[i as usize].has(pg::ZSWAP) {
            self.zswap_entry_free(i);
        }
        if !self.zswap.enabled {
            return false;
        }
        let m = self.pages[i as usize].memcg;
        let stored = self.zswap_store_inner(ctx, i, m);
        if !stored {
            self.note_zswap_contention(ctx.now);
            if self.zswap.reached_full {
                self.queue_shrink_worker(ctx.now);
            }
        }
        stored
    }

    fn zswap_store_inner(&mut self, ctx: &mut Ctx, i: u32, m: u16) -> bool {
        // Over memory.zswap.max: write back one of the memcg's own entries first (6.8+); with
        // the global LRU (≤6.7) the store is simply refused.
        if !self.memcg_may_zswap(m)
            && (self.switches.lru == ZswapLru::Global
                || self.shrink_memcg(ctx, m) != ShrinkResult::Ok)
        {
            return false;
        }
        if self.zswap_check_limits(ctx.now) {
            return false;
        }
        ctx.cpu(self.costs.zswap_entry_ns);
        let v = self.variant(i);
        let (same, dlen) = {
            let r = self.region_of(i);
            (r.same_filled[v], r.zlen[0][v] as u32)
        };
        if self.switches.same_filled == SameFilled::Zswap && same {
            // ≤6.11: a length-0 entry, no zpool memory, not on the LRU.
            let p = &mut self.pages[i as usize];
            p.set(pg::ZSWAP);
            p.zlen = 0;
            p.handle = NONE;
            self.zswap.stored_pages += 1;
            self.zswap.same_filled_pages += 1;
            self.count_zswpout(m);
            return true;
        }
        ctx.cpu(
            self.costs
                .compress_ns(self.zswap.codec, self.region_of(i).content),
        );
        let len = if dlen >= PAGE_SIZE as u32 {
            match self.switches.incompressible {
                Incompressible::StoreRaw if self.zswap_writeback_enabled(m) => PAGE_SIZE as u32,
                Incompressible::StoreRaw => {
                    self.zswap.ev.reject_compress_fail += 1;
                    return false;
                }
                // zsmalloc takes at most PAGE_SIZE: a larger output is -ENOSPC.
                Incompressible::Reject if dlen > PAGE_SIZE as u32 => {
                    self.zswap.ev.reject_compress_poor += 1;
                    return false;
                }
                Incompressible::Reject => dlen,
                // The compressor was given PAGE_SIZE of room: more is a compression failure.
                Incompressible::RejectFail if dlen > PAGE_SIZE as u32 => {
                    self.zswap.ev.reject_compress_fail += 1;
                    return false;
                }
                Incompressible::RejectFail => dlen,
            }
        } else {
            dlen
        };
        // zswap_compress: -ENOSPC from the allocator (an object larger than it holds: zbud's
        // 3968 bytes) is a poor compression, any other failure an allocation failure.
        let h = match self.zswap_pool_malloc(i, len) {
            Ok(h) => h,
            Err(ZpoolError::NoSpace) => {
                self.zswap.ev.reject_compress_poor += 1;
                return false;
            }
            Err(_) => {
                self.zswap.ev.reject_alloc_fail += 1;
                return false;
            }
        };
        if len == PAGE_SIZE as u32 {
            ctx.cpu(self.costs.zswap_copy_ns);
            self.zswap.stored_incompressible_pages += 1;
        }
        self.zswap.stored_pages += 1;
        let p = &mut self.pages[i as usize];
        p.set(pg::ZSWAP | pg::REFERENCED);
        p.handle = h;
        p.zlen = len as u16;
        // Entries join the LRU tail and are walked from the head (oldest first).
        let owner = self.zswap_lru_owner(i);
        self.memcgs[owner as usize]
            .zswap_lru
            .push_tail(&mut self.pages, i);
        if self.switches.shrinker_protection == ShrinkerProtection::NrZswapProtected {
            // zswap_lru_add: grow the protected area, halving it above a quarter of the LRU.
            let lru_size = self.memcgs[owner as usize].zswap_lru.len;
            let mc = &mut self.memcgs[owner as usize];
            mc.nr_zswap_protected += 1;
            if mc.nr_zswap_protected > lru_size / 4 {
                mc.nr_zswap_protected /= 2;
            }
        }
        self.charge_zswap(m, len as u64);
        self.count_zswpout(m);
        true
    }

    fn count_zswpout(&mut self, m: u16) {
        self.vm.zswpout += 1;
        self.memcgs[m as usize].events.zswpout += 1;
    }

    /// zswap_entry_free: unlink, free the object, uncharge.
    fn zswap_entry_free(&mut self, i: u32) {
        let p = self.pages[i as usize];
        debug_assert!(p.has(pg::ZSWAP));
        let m = p.memcg;
        if p.list() == list::ZSWAP {
            let owner = self.zswap_lru_owner(i);
            self.memcgs[owner as usize]
                .zswap_lru
                .remove(&mut self.pages, i);
        }
        if p.handle != NONE {
            self.zswap_pool_free(i, p.handle);
            self.uncharge_zswap(m, p.zlen as u64);
            if p.zlen as u64 == PAGE_SIZE {
                self.zswap.stored_incompressible_pages -= 1;
            }
        } else {
            self.zswap.same_filled_pages -= 1;
        }
        self.zswap.stored_pages -= 1;
        let p = &mut self.pages[i as usize];
        // A folio on the memory LRU (≤6.4: its entry was kept at load) owns PG_referenced;
        // otherwise the bit was the entry's.
        let on_lru = (list::INACTIVE_ANON..=list::ACTIVE_FILE).contains(&p.list());
        p.clear(if on_lru {
            pg::ZSWAP
        } else {
            pg::ZSWAP | pg::REFERENCED
        });
        p.handle = NONE;
        p.zlen = 0;
    }

    /// zswap_invalidate: the swap slot is being freed.
    pub fn zswap_invalidate(&mut self, i: u32) {
        if self.pages[i as usize].has(pg::ZSWAP) {
            self.zswap_entry_free(i);
        }
    }

    /// zswap_load into a newly allocated swap-cache folio: decompress, count zswpin, free the
    /// entry and dirty the folio (6.5+ exclusive loads). ≤6.4 (zswap_frontswap_load in 6.1) the
    /// entry stays in the pool and the folio clean; the entry leaves the zswap LRU while its
    /// folio is resident (one set of links; the kernel's writeback would find the folio in the
    /// swap cache and fail with -EEXIST) and rejoins it at the tail if the folio is reclaimed
    /// clean (vmscan's remove_from_swap_cache_for_reclaim).
    pub fn zswap_load(&mut self, ctx: &mut Ctx, i: u32) -> bool {
        let p = self.pages[i as usize];
        if !p.has(pg::ZSWAP) {
            return false;
        }
        ctx.cpu(self.costs.zswap_entry_ns);
        if p.handle != NONE {
            if p.zlen as u64 == PAGE_SIZE {
                ctx.cpu(self.costs.zswap_copy_ns);
            } else {
                ctx.cpu(
                    self.costs
                        .decompress_ns(self.zswap.codec, self.region_of(i).content),
                );
            }
        }
        self.vm.zswpin += 1;
        self.memcgs[p.memcg as usize].events.zswpin += 1;
        match self.switches.load {
            ZswapLoad::Exclusive => {
                self.zswap_entry_free(i);
                self.pages[i as usize].set(pg::DIRTY);
            }
            ZswapLoad::NonExclusive => {
                if p.list() == list::ZSWAP {
                    let owner = self.zswap_lru_owner(i);
                    self.memcgs[owner as usize]
                        .zswap_lru
                        .remove(&mut self.pages, i);
                }
                self.pages[i as usize].clear(pg::REFERENCED);
            }
        }
        true
    }

    /// ≤6.4: a clean swap-cache folio with a kept entry leaves memory; the entry, the only copy
    /// again, goes back on the zswap LRU (at the tail: the model does not keep its old place).
    pub(crate) fn zswap_entry_unshadow(&mut self, i: u32) {
        let p = self.pages[i as usize];
        if p.has(pg::ZSWAP) && p.handle != NONE && p.list() == list::NONE {
            let owner = self.zswap_lru_owner(i);
            self.memcgs[owner as usize]
                .zswap_lru
                .push_tail(&mut self.pages, i);
        }
    }

    /// zswap_writeback_entry: bring the entry into a new swap-cache folio and write it to the
    /// swap device. The folio goes on the inactive LRU with PG_reclaim, so the end of the write
    /// rotates it to the tail and the next scan frees it without IO. The write is one 4 KiB bio
    /// (`__swap_writepage(folio, NULL)` in 6.18) and neither shrink_worker nor the shrinker
    /// plugs, so on a device that merges it is a request of its own: only writeback from a
    /// store over memory.zswap.max runs inside reclaim's plug (crate::block).
    fn zswap_writeback_entry(&mut self, ctx: &mut Ctx, i: u32) -> Result<(), WbError> {
        let p = self.pages[i as usize];
        if p.has(pg::RESIDENT) {
            return Err(WbError::Exist);
        }
        let m = p.memcg;
        if self.alloc_charged_frame(ctx, m).is_err() {
            return Err(WbError::NoMem);
        }
        // The allocation may have reclaimed, and that reclaim may have written this entry back
        // or freed it: the kernel re-checks the tree (-ENOMEM when the entry is gone).
        let now = self.pages[i as usize];
        if now.has(pg::RESIDENT) || !now.has(pg::ZSWAP) || now.handle != p.handle {
            self.uncharge(m);
            self.free_frame();
            return Err(if now.has(pg::RESIDENT) {
                WbError::Exist
            } else {
                WbError::NoMem
            });
        }
        ctx.cpu(self.costs.swapin_page_ns);
        if p.zlen as u64 == PAGE_SIZE {
            ctx.cpu(self.costs.zswap_copy_ns);
        } else if p.handle != NONE {
            ctx.cpu(
                self.costs
                    .decompress_ns(self.zswap.codec, self.region_of(i).content),
            );
        }
        // The entry leaves the zswap LRU before the folio joins the memory LRU: one set of links.
        self.zswap_entry_free(i);
        self.vm.zswpwb += 1;
        self.memcgs[m as usize].events.zswpwb += 1;
        // A new folio, never mapped: not anon (pg::ANON).
        self.pages[i as usize].clear(pg::ANON);
        self.pages[i as usize].set(pg::RESIDENT | pg::SWAPCACHE);
        self.memcgs[m as usize].swapcached += 1;
        self.resident_add(i);
        if self.pages[i as usize].has(pg::SHADOW) {
            self.workingset_refault(i);
        }
        self.lru_add(i);
        self.pages[i as usize].set(pg::RECLAIM);
        self.swap_writepage(ctx, i);
        Ok(())
    }

    /// shrink_memcg_cb on the entry at the head of memcg `m`'s zswap LRU.
    fn shrink_memcg_cb(&mut self, ctx: &mut Ctx, m: u16) -> Option<Visit> {
        let e = self.memcgs[m as usize].zswap_lru.head;
        if e == NONE {
            return None;
        }
        // Rotate first: failures leave the entry rotated, successes unlink it anyway.
        self.memcgs[m as usize].zswap_lru.remove(&mut self.pages, e);
        self.memcgs[m as usize]
            .zswap_lru
            .push_tail(&mut self.pages, e);
        if self.switches.shrinker_protection == ShrinkerProtection::Referenced
            && self.pages[e as usize].has(pg::REFERENCED)
        {
            self.pages[e as usize].clear(pg::REFERENCED);
            ctx.cpu(self.costs.zswap_lru_visit_ns);
            return Some(Visit::Rotated);
        }
        match self.zswap_writeback_entry(ctx, e) {
            Ok(()) => {
                self.zswap.ev.written_back_pages += 1;
                Some(Visit::WrittenBack)
            }
            Err(err) => {
                self.zswap.ev.reject_reclaim_fail += 1;
                Some(Visit::Failed(err))
            }
        }
    }

    /// shrink_memcg: walk one LRU item (one node, nr_to_walk = 1 in 6.10–6.18).
    /// 6.10 returned -EINVAL for writeback disabled and -EAGAIN for an empty LRU; the fix made
    /// both -ENOENT ("not a candidate").
    pub fn shrink_memcg(&mut self, ctx: &mut Ctx, m: u16) -> ShrinkResult {
        let v6_10 = self.switches.shrink_worker == ShrinkWorker::V6_10;
        if !self.zswap_writeback_enabled(m) {
            return if v6_10 {
                ShrinkResult::Inval
            } else {
                ShrinkResult::NoEnt
            };
        }
        match self.shrink_memcg_cb(ctx, m) {
            None if v6_10 => ShrinkResult::Again,
            None => ShrinkResult::NoEnt,
            Some(Visit::WrittenBack) => ShrinkResult::Ok,
            Some(_) => ShrinkResult::Again,
        }
    }

    /// shrink_memcg on the memcg at position `pos` of the worker's walk (root, then `host`
    /// memcgs of the machine, then the scenario's). The host's memcgs hold none of the
    /// scenario's zswap entries: shrink_memcg finds their LRUs empty (6.12+: -ENOENT, skipped
    /// without counting an attempt; 6.10: -EAGAIN, a failure), at the cost of one visit.
    /// Simplified: they are online, with writeback enabled and nothing in zswap.
    fn shrink_memcg_at(&mut self, ctx: &mut Ctx, pos: u32, host: u32) -> ShrinkResult {
        match pos {
            0 => self.shrink_memcg(ctx, 0),
            p if p <= host => {
                if self.switches.shrink_worker == ShrinkWorker::V6_10 {
                    ShrinkResult::Again
                } else {
                    ShrinkResult::NoEnt
                }
            }
            p => self.shrink_memcg(ctx, (p - host) as u16),
        }
    }

    /// One iteration of shrink_worker's loop: advance the memcg cursor (pre-order, root
    /// included), shrink that memcg, count failures; stop at the accept threshold or after
    /// MAX_RECLAIM_RETRIES failures. 6.12+: memcgs with nothing to write back are skipped for
    /// free and a tree walk is a failure only if it made no attempt. 6.10: every wrap and every
    /// non-zero return counts, and -EINVAL (writeback disabled) aborts. With the global LRU
    /// (≤6.7) the worker only ever walks the one list.
    pub fn zswap_worker_step(&mut self, ctx: &mut Ctx) {
        // Patch 6: no writeback until the pause after the last reject or load miss has passed.
        if let Some(t) = self.zswap.last_contention {
            let resume = crate::sim::later(
                t,
                self.switches
                    .writeback_pause_ms
                    .saturating_mul(crate::sim::NSEC_PER_MSEC),
            );
            if ctx.now < resume {
                self.zswap.worker_clock = resume;
                self.queue.push(resume, EventKind::ZswapWorker);
                return;
            }
        }
        // Patch 4: without WQ_MEM_RECLAIM the worker runs in the background and yields the CPU
        // while user tasks (faulting, reclaiming) occupy every CPU.
        if !self.switches.worker_mem_reclaim && self.zswap.cpus_saturated {
            let later = crate::sim::later(ctx.now, self.costs.process_quantum_ns);
            self.zswap.worker_clock = later;
            self.queue.push(later, EventKind::ZswapWorker);
            return;
        }
        let mut run = match self.zswap.worker {
            Some(r) => r,
            None => {
                self.zswap.worker_pending = false;
                WorkerRun {
                    thr: self.zswap_accept_thr_pages(),
                    failures: 0,
                    attempts: 0,
                    started: ctx.now,
                }
            }
        };
        // Running from here on: a store that fails during this step (reclaim inside writeback)
        // marks the work pending instead of starting a second event chain.
        self.zswap.worker = Some(run);
        // mem_cgroup_iter(NULL, zswap_next_shrink, NULL): a pre-order walk from the root. The
        // host's other memcgs (machine.host_memcgs) were made before the scenario's, so they come
        // right after the root; None at the end of a walk.
        let host = self.zswap.host_memcgs;
        let next = if self.switches.lru == ZswapLru::Global {
            Some(0u32)
        } else {
            match self.zswap.next_shrink {
                None => Some(0u32),
                Some(c) if (c as usize) + 1 < self.memcgs.len() + host as usize => Some(c + 1),
                Some(_) => None,
            }
        };
        self.zswap.next_shrink = next;
        let fail = |run: &mut WorkerRun| {
            run.failures += 1;
            run.failures == MAX_RECLAIM_RETRIES
        };
        let v6_10 = self.switches.shrink_worker == ShrinkWorker::V6_10;
        let done = match next {
            None if v6_10 => fail(&mut run),
            None => {
                let abort = run.attempts == 0 && fail(&mut run);
                run.attempts = 0;
                abort
            }
            Some(pos) => match self.shrink_memcg_at(ctx, pos, host) {
                ShrinkResult::Inval => true,
                ShrinkResult::NoEnt => false,
                ShrinkResult::Ok => {
                    run.attempts += 1;
                    false
                }
                ShrinkResult::Again => {
                    run.attempts += 1;
                    fail(&mut run)
                }
            },
        };
        ctx.cpu(self.costs.zswap_lru_visit_ns);
        self.zswap.worker_clock = ctx.now;
        if !done && self.zswap_total_pages() > run.thr {
            self.zswap.worker = Some(run);
            self.queue.push(ctx.now, EventKind::ZswapWorker);
            return;
        }
        self.zswap.worker = None;
        // queue_work on a running work item makes it run again. A store that asked for the
        // worker at a time after this run started asked during it, even if the process (which
        // runs ahead by up to a quantum) made that request before this run began in event order.
        if self.zswap.worker_pending || self.zswap.last_queue_request > run.started {
            self.zswap.worker_pending = true;
            self.queue.push(ctx.now, EventKind::ZswapWorker);
        }
    }

    /// zswap_shrinker_count for memcg `m` (one node): entries on its LRU less the protected
    /// ones, scaled by the compression ratio. Protection is the 6.12+ disk swap-in count
    /// (consumed here) or the 6.8–6.11 nr_zswap_protected.
    pub fn zswap_shrinker_count(&mut self, m: u16) -> u64 {
        if !self.zswap.shrinker_enabled || !self.zswap_writeback_enabled(m) {
            return 0;
        }
        // memcg ZSWAP_B / ZSWAPPED are cgroup-v2 statistics: zero on v1, so the shrinker is inert.
        let (bytes, nr_stored) = self.zswap_tree(m);
        if nr_stored == 0 {
            return 0;
        }
        let nr_backing = bytes / PAGE_SIZE;
        let mut nr_freeable = self.memcgs[m as usize].zswap_lru.len;
        if nr_freeable == 0 {
            return 0;
        }
        match self.switches.shrinker_protection {
            ShrinkerProtection::Referenced => {
                let swapins = self.memcgs[m as usize].nr_disk_swapins;
                let take = swapins.min(nr_freeable);
                self.memcgs[m as usize].nr_disk_swapins = swapins - take;
                nr_freeable -= take;
            }
            ShrinkerProtection::NrZswapProtected => {
                nr_freeable =
                    nr_freeable.saturating_sub(self.memcgs[m as usize].nr_zswap_protected);
            }
        }
        if nr_freeable == 0 {
            return 0;
        }
        // mult_frac(nr_freeable, nr_backing, nr_stored).
        let q = nr_freeable / nr_stored;
        let r = nr_freeable % nr_stored;
        q * nr_backing + r * nr_backing / nr_stored
    }

    /// zswap_shrinker_scan: walk `nr_to_scan` entries of memcg `m`'s LRU. None = SHRINK_STOP.
    pub fn zswap_shrinker_scan(&mut self, ctx: &mut Ctx, m: u16, nr_to_scan: u64) -> Option<u64> {
        if !self.zswap.shrinker_enabled || !self.zswap_writeback_enabled(m) {
            return None;
        }
        if self.switches.shrinker_protection == ShrinkerProtection::NrZswapProtected {
            // Abort rather than shrink into the protected region (unsigned arithmetic, as in C).
            let lru_size = self.memcgs[m as usize].zswap_lru.len;
            if self.memcgs[m as usize].nr_zswap_protected >= lru_size.wrapping_sub(nr_to_scan) {
                return None;
            }
        }
        let mut freed = 0;
        for _ in 0..nr_to_scan {
            match self.shrink_memcg_cb(ctx, m) {
                None => break,
                Some(Visit::WrittenBack) => freed += 1,
                Some(Visit::Failed(WbError::Exist)) => return None,
                Some(_) => {}
            }
        }
        (freed > 0).then_some(freed)
    }
}

impl Mm {
    /// zswap's files ([`Zswap::export`]) and (not kernel counters) the seeds' LRU-inversion
    /// complaint made measurable: ages of the data now in the pool and now on swap devices,
    /// since it left memory.
    pub(crate) fn export_zswap(&self, now: Time, out: &mut Vec<(String, u64)>) {
        self.zswap.export(&self.switches, out);
        if self.zswap.enabled {
            let now_ms = now / crate::sim::NSEC_PER_MSEC;
            let (mut pool, mut disk) = ((0u64, 0u64), (0u64, 0u64));
            for p in self
                .pages
                .iter()
                .filter(|p| p.slot != NONE && !p.has(pg::RESIDENT) && !p.has(pg::ZEROMAP))
            {
                let bucket = if p.has(pg::ZSWAP) {
                    &mut pool
                } else {
                    &mut disk
                };
                bucket.0 += now_ms.saturating_sub(p.stamp as u64);
                bucket.1 += 1;
            }
            out.push((
                "lru_inversion.device_swapouts_while_pool_nonempty".into(),
                self.lru_inversion_swapouts,
            ));
            if let Some(age) = pool.0.checked_div(pool.1) {
                out.push(("lru_inversion.pool_mean_age_ms".into(), age));
            }
            if let Some(age) = disk.0.checked_div(disk.1) {
                out.push(("lru_inversion.device_mean_age_ms".into(), age));
            }
        }
    }
}
