//! kernel_alloc phases: high-order kernel allocations made on a process's behalf (a fork's
//! kernel stack, SLUB slabs) through the zone of mm/phys.rs → docs/model/kernel_alloc.md.
//!
//! Follows 6.12.117's (and 6.18's) mm/page_alloc.c `__alloc_pages` → `get_page_from_freelist`
//! at the low watermark → `__alloc_pages_slowpath` for a GFP_KERNEL request of order ≤
//! PAGE_ALLOC_COSTLY_ORDER: wake kswapd (kcompactd for the order after it), the min
//! watermark, an initial async direct compaction (an order > 0 request that is not
//! MIGRATE_MOVABLE), then rounds of direct reclaim → allocation → direct compaction, raising
//! the compaction priority (async → sync-light → sync-full) after each failure as
//! should_compact_retry does; __GFP_NORETRY stops after the first round. And mm/slub.c's
//! allocate_slab: s->oo with __GFP_NORETRY (without __GFP_RECLAIM under the switch
//! `slub.nowait_high_order`), then s->min with the caller's flags (ORDER_FALLBACK).
//!
//! Simplified: should_reclaim_retry / should_compact_retry are one bound of
//! MAX_RECLAIM_RETRIES rounds; an allocation that still fails fails (the kernel would call
//! the OOM killer for such a "too small to fail" order: here the phase ends "enomem");
//! kernel stacks and slabs are not charged to the memcg (__GFP_ACCOUNT); the blocks are held
//! until the process exits (a slab's objects are the process's: task_struct, mm, vmas).

use super::{Ctx, Mm, MAX_RECLAIM_RETRIES};
use crate::compaction::CompactPriority;
use crate::latency::Kind;
use crate::page_alloc::{MigrateType, PfnState, Wmark};
use crate::sim::Actor;
use reclaimlab_workload::KernelMigrateType;

/// What a request's gfp mask allows here: __GFP_RECLAIM (direct reclaim and compaction, and
/// waking kswapd), and __GFP_NORETRY (one round of the slow path).
#[derive(Clone, Copy, Debug)]
struct Gfp {
    reclaim: bool,
    noretry: bool,
}

/// GFP_KERNEL.
const GFP_KERNEL: Gfp = Gfp {
    reclaim: true,
    noretry: false,
};

impl Mm {
    /// A kernel_alloc phase of process `process`: `count` blocks of 2^`order` pages (with
    /// `fallback`: slabs, s->oo = `order` and s->min = `fallback`). Returns how many were
    /// allocated: `count`, or fewer when one failed (the phase stops there).
    pub(crate) fn kernel_alloc(
        &mut self,
        ctx: &mut Ctx,
        process: u32,
        count: u32,
        order: u8,
        fallback: Option<u8>,
        mt: KernelMigrateType,
    ) -> u32 {
        let mt = match mt {
            KernelMigrateType::Unmovable => MigrateType::Unmovable,
            KernelMigrateType::Reclaimable => MigrateType::Reclaimable,
        };
        for n in 0..count {
            let got = match fallback {
                None => self.alloc_kernel_block(ctx, order, mt, GFP_KERNEL),
                Some(min) => {
                    // allocate_slab: alloc_gfp = flags | __GFP_NOWARN | __GFP_NORETRY, and with
                    // the 4.4 patch also & ~__GFP_RECLAIM when s->oo is above s->min.
                    let first = Gfp {
                        reclaim: !self.switches.slub_nowait_high_order,
                        noretry: true,
                    };
                    match self.alloc_kernel_block(ctx, order, mt, first) {
                        Some(p) => Some(p),
                        None => {
                            let p = self.alloc_kernel_block(ctx, min, mt, GFP_KERNEL);
                            if p.is_some() {
                                self.kalloc_events().order_fallback += 1;
                            }
                            p
                        }
                    }
                }
            };
            let Some(pfn) = got else { return n };
            self.phys
                .as_mut()
                .expect("kernel_alloc phases build the zone")
                .kblocks
                .push((pfn, process));
        }
        count
    }

    fn kalloc_events(&mut self) -> &mut crate::stats::KernelAllocEvents {
        self.phys
            .as_mut()
            .and_then(|ph| ph.kev.as_mut())
            .expect("kernel_alloc phases build the zone with its counters")
    }

    /// Process exit: its kernel_alloc blocks go back to the buddy allocator (free_pages).
    pub(crate) fn kernel_free_process(&mut self, process: u32) {
        let Some(ph) = &mut self.phys else { return };
        if ph.kblocks.is_empty() {
            return;
        }
        let blocks = std::mem::take(&mut ph.kblocks);
        let mut freed = 0u64;
        for &(pfn, p) in &blocks {
            if p != process {
                ph.kblocks.push((pfn, p));
                continue;
            }
            let PfnState::Alloc { order, .. } = ph.zone.state(pfn) else {
                panic!("kernel block {pfn} is not allocated")
            };
            ph.zone.free(pfn);
            freed += 1 << order;
        }
        ph.kblock_pages -= freed;
        self.nr_free += freed;
        let nr_free = self.nr_free;
        self.phys.as_mut().expect("checked").sync(nr_free);
    }

    /// Take a block of `order` off the lists if the zone is above `mark` for that order
    /// (get_page_from_freelist), the count paying for it.
    fn kalloc_take(&mut self, order: u8, mt: MigrateType, mark: Wmark) -> Option<u32> {
        let nr_free = self.nr_free;
        let ph = self.phys.as_mut()?;
        ph.sync(nr_free);
        if !ph.zone.watermark_ok(order, ph.zone.wmark.get(mark), false) {
            return None;
        }
        let pfn = ph.zone.rmqueue(order, mt)?;
        ph.kblock_pages += 1 << order;
        self.nr_free -= 1 << order;
        Some(pfn)
    }

    /// __alloc_pages for one kernel block (see the file comment).
    fn alloc_kernel_block(
        &mut self,
        ctx: &mut Ctx,
        order: u8,
        mt: MigrateType,
        gfp: Gfp,
    ) -> Option<u32> {
        if let Some(p) = self.kalloc_take(order, mt, Wmark::Low) {
            return Some(p);
        }
        if gfp.reclaim {
            // wake_all_kswapds for the order: kcompactd follows kswapd's run, or runs now if
            // the node is balanced at order 0.
            let ph = self.phys.as_mut()?;
            ph.kcompactd_max_order = ph.kcompactd_max_order.max(order);
            if self.node_balanced() {
                self.wakeup_kcompactd();
            } else {
                self.wakeup_kswapd(ctx.now);
            }
        }
        if let Some(p) = self.kalloc_take(order, mt, Wmark::Min) {
            return Some(p);
        }
        if !gfp.reclaim || ctx.memalloc || ctx.actor == Actor::Kswapd {
            return None;
        }
        let (start, memstall) = (ctx.now, self.psi_memstall_enter(ctx));
        let mut prio = CompactPriority::Async;
        // The initial compaction: order > 0 and not MIGRATE_MOVABLE.
        let mut got = if order > 0 {
            self.kalloc_direct_compact(ctx, order, mt, prio)
        } else {
            None
        };
        let mut rounds = 0;
        while got.is_none() {
            self.kalloc_direct_reclaim(ctx);
            got = self.kalloc_take(order, mt, Wmark::Min);
            if got.is_some() {
                break;
            }
            got = self.kalloc_direct_compact(ctx, order, mt, prio);
            rounds += 1;
            if got.is_some() || gfp.noretry || rounds >= MAX_RECLAIM_RETRIES {
                break;
            }
            // should_compact_retry: a failed compaction raises the priority down to
            // MIN_COMPACT_PRIORITY (sync-full) for a non-costly order.
            prio = match prio {
                CompactPriority::Async => CompactPriority::SyncLight,
                _ => CompactPriority::SyncFull,
            };
        }
        self.psi_memstall_leave(ctx, memstall);
        self.latency(ctx, Kind::AllocStall, ctx.now - start);
        got
    }

    /// __alloc_pages_direct_reclaim: one try_to_free_pages (SWAP_CLUSTER_MAX; sc.order ≤
    /// PAGE_ALLOC_COSTLY_ORDER at DEF_PRIORITY is not in reclaim/compaction mode, so
    /// should_continue_reclaim does not extend it).
    fn kalloc_direct_reclaim(&mut self, ctx: &mut Ctx) {
        // try_to_free_pages counts ALLOCSTALL in the zone of a user page's request
        // (allocstall_movable: GFP_HIGHUSER_MOVABLE); a GFP_KERNEL request's reclaim_idx is
        // ZONE_NORMAL, so its stalls move to allocstall_normal.
        let before = self.vm.allocstall_movable;
        self.try_to_free_pages(ctx);
        let n = self.vm.allocstall_movable - before;
        self.vm.allocstall_movable = before;
        self.kalloc_events().allocstall_normal += n;
    }

    /// direct_compact (mm/phys.rs) for a kernel block, which the process then holds.
    fn kalloc_direct_compact(
        &mut self,
        ctx: &mut Ctx,
        order: u8,
        mt: MigrateType,
        prio: CompactPriority,
    ) -> Option<u32> {
        let (page, _) = self.direct_compact(ctx, order, mt, prio);
        let pfn = page?;
        let ph = self.phys.as_mut().expect("checked");
        ph.kblock_pages += 1 << order;
        self.nr_free -= 1 << order;
        Some(pfn)
    }
}
