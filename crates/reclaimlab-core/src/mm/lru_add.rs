//! folio_add_lru's per-CPU batch (mm/swap.c `cpu_fbatches.lru_add`, 6.12 and 6.18).
//!
//! A folio that a fault adds to the LRU (do_anonymous_page's folio_add_lru_vma, a swap-in's
//! folio_add_lru in __read_swap_cache_async) first goes into the CPU's `lru_add` folio batch;
//! it reaches its LRU list when the batch is full (`folio_batch_add` leaves no space:
//! PAGEVEC_SIZE = 31 folios, `__folio_batch_add_and_move` → `folio_batch_move_lru`) or when the
//! CPU drains it (`lru_add_drain`). Until then it is on no list: `lruvec_lru_size` does not
//! count it and no reclaimer can isolate it.
//!
//! Why it matters (docs/model/memcg.md, "When limit reclaim gives up"): when cgroup v1 limit
//! reclaim has emptied a memcg's inactive anon list, the only inactive folios left are the
//! ones the faulting task swapped in last. In the kernel they sit in its CPU's batch, so
//! get_scan_count finds no scan target, shrink_lruvec's loop never runs (and never reaches the
//! `lru_add_drain` at the start of shrink_inactive_list / shrink_active_list), reclaim frees
//! nothing and the charge ends in the memcg OOM killer. Without the batch, every such folio is
//! on the inactive list at once and reclaim evicts it again, one page of progress per charge.
//!
//! Modelled: the folios stay physically on their list (at its head; reclaim takes from the
//! tail and drains first), and each memcg counts per list the folios that batches hold
//! (`Memcg::lru_batched`); `get_scan_count` and the statistics flush subtract them. One batch
//! per process stands for the CPU it faults on. Drains: the batch is full (31); the start of
//! shrink_inactive_list and shrink_active_list (the reclaiming process's own batch); a swap-in
//! that took the readahead path (swap_cluster_readahead / swap_vma_readahead end with
//! `lru_add_drain()` when the window is more than the faulting page; the faulting folio of a
//! window of 1 takes the `skip:` path and stays batched); a write fault on a folio still in the
//! batch (do_swap_page's `!folio_test_lru` case); process exit; every batch at the start of
//! memory.reclaim's final pass (lru_add_drain_all). Simplified: only the two fault paths
//! batch (anonymous faults and swap-ins, also tmpfs swap-ins); new page cache and tmpfs
//! folios, zswap writeback's folio and kswapd's additions go straight to their list, and
//! nothing is batched with the multi-gen LRU; no other lru_add_drain_all (v1 force_empty and
//! charge moving are not modelled); a folio that leaves its list while batched (another
//! process's reclaim, mlock, exit) keeps its count until the drain, and sizes are clamped at 0.

use super::{Actor, Ctx, Mm};

/// PAGEVEC_SIZE (include/linux/pagevec.h): a folio batch holds 31 folios.
pub const PAGEVEC_SIZE: usize = 31;

impl Mm {
    /// folio_add_lru from a fault: onto the list (see the module comment) and into the
    /// faulting process's batch, which moves to the LRU when it is full.
    pub fn folio_add_lru(&mut self, ctx: &Ctx, i: u32) {
        self.lru_add(i);
        let Actor::Process(p) = ctx.actor else { return };
        let page = &self.pages[i as usize];
        let which = page.list();
        if self.lru_gen_enabled() || !(1..=4).contains(&which) {
            return;
        }
        let m = page.memcg;
        self.memcgs[m as usize].lru_batched[which as usize - 1] += 1;
        let batch = &mut self.lru_add_fbatch[p as usize];
        batch.push((i, m, which));
        if batch.len() >= PAGEVEC_SIZE {
            self.lru_add_drain_process(p);
        }
    }

    /// lru_add_drain: the calling process's batch goes onto the LRU (no-op for kswapd and
    /// other actors, whose batches the model does not keep).
    pub fn lru_add_drain(&mut self, ctx: &Ctx) {
        if let Actor::Process(p) = ctx.actor {
            self.lru_add_drain_process(p);
        }
    }

    /// lru_add_drain_all: every batch (memory.reclaim's final attempt).
    pub fn lru_add_drain_all(&mut self) {
        for p in 0..self.lru_add_fbatch.len() as u32 {
            self.lru_add_drain_process(p);
        }
    }

    /// lru_add_drain_cpu for process `p`'s batch (folio_batch_move_lru).
    pub fn lru_add_drain_process(&mut self, p: u32) {
        for (_, m, which) in std::mem::take(&mut self.lru_add_fbatch[p as usize]) {
            let c = &mut self.memcgs[m as usize].lru_batched[which as usize - 1];
            *c = c.saturating_sub(1);
        }
    }

    /// Whether folio `i` is still in the calling process's batch (!folio_test_lru).
    pub fn folio_in_lru_add_batch(&self, ctx: &Ctx, i: u32) -> bool {
        match ctx.actor {
            Actor::Process(p) => self.lru_add_fbatch[p as usize]
                .iter()
                .any(|&(j, _, _)| j == i),
            _ => false,
        }
    }

    /// lruvec_lru_size for the list `which` (1..=4) of memcg `m`'s own lruvec: the folios on
    /// the list, without those a batch still holds.
    pub fn lruvec_lru_size(&self, m: u16, which: u8) -> u64 {
        let mc = &self.memcgs[m as usize];
        let l = which as usize - 1;
        mc.lru[l].len.saturating_sub(mc.lru_batched[l])
    }

    /// The folios of list `which` that batches hold, summed over memcg `m`'s subtree.
    pub fn lru_batched_tree(&self, m: u16, which: u8) -> u64 {
        let end = self.memcgs[m as usize].subtree_end;
        (m..end)
            .map(|c| self.memcgs[c as usize].lru_batched[which as usize - 1])
            .sum()
    }
}
