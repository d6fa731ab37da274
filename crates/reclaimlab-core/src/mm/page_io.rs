//! Swap IO: mm/page_io.c as of 6.18 (swap_writeout, __swap_writepage, swap_read_folio) and the
//! end of writeback (folio_end_writeback → folio_rotate_reclaimable in mm/swap.c).
//!
//! Simplified: one bio per page; a read completes for the faulting task at the device model's
//! completion time while the folio is treated as uptodate from submission on (nothing else
//! could observe the difference except a second fault on it, which then does not wait).

use super::page::{list, pg};
use super::{Ctx, Mm};
use crate::policy::SameFilled;
use crate::sim::{EventKind, Time};

/// The outcome of pageout for a swap-cache folio.
pub enum Writeout {
    /// Stored without IO (zeromap or zswap): the folio is clean and can be freed now.
    Done,
    /// A device write was submitted: the folio stays under writeback.
    Io,
    /// Not written (zswap refused and the memcg's zswap writeback is disabled): activate.
    Activate,
}

impl Mm {
    /// swap_writeout (≤6.16 swap_writepage): zeromap, then zswap, then the device.
    pub fn swap_writeout(&mut self, ctx: &mut Ctx, i: u32) -> Writeout {
        let v = self.variant(i);
        let r = self.region_of(i);
        if self.switches.same_filled == SameFilled::Zeromap && r.zero[v] {
            let m = self.pages[i as usize].memcg;
            self.pages[i as usize].set(pg::ZEROMAP);
            self.vm.swpout_zero += 1;
            self.memcgs[m as usize].events.swpout_zero += 1;
            return Writeout::Done;
        }
        self.pages[i as usize].clear(pg::ZEROMAP);
        if self.zswap_store(ctx, i) {
            return Writeout::Done;
        }
        let m = self.pages[i as usize].memcg;
        if !self.zswap_writeback_enabled(m) {
            return Writeout::Activate;
        }
        self.swap_writepage(ctx, i);
        Writeout::Io
    }

    /// __swap_writepage: submit the write; the folio is under writeback until the device
    /// completes it.
    pub fn swap_writepage(&mut self, ctx: &mut Ctx, i: u32) {
        let m = self.pages[i as usize].memcg;
        self.vm.pswpout += 1;
        self.vm.pgpgout += 4;
        self.memcgs[m as usize].events.pswpout += 1;
        ctx.cpu(self.costs.bio_submit_ns);
        let slot = self.pages[i as usize].slot;
        let d = self.swap.dev_of(slot);
        let done = self.swap.devs[d].submit_write(ctx.now, i);
        self.pages[i as usize].set(pg::WRITEBACK);
        if self.swap.devs[d].scheduled.is_none() {
            self.swap.devs[d].scheduled = Some(done);
            self.queue.push(done, EventKind::DeviceDone(d as u16));
        }
    }

    /// swap_read_folio: zeromap, then zswap, then the device. Returns when the data is there.
    pub fn swap_read_folio(&mut self, ctx: &mut Ctx, i: u32) -> Time {
        let m = self.pages[i as usize].memcg;
        if self.pages[i as usize].has(pg::ZEROMAP) {
            self.vm.swpin_zero += 1;
            self.memcgs[m as usize].events.swpin_zero += 1;
            return ctx.now;
        }
        if self.zswap_load(ctx, i) {
            return ctx.now;
        }
        self.memcgs[m as usize].nr_disk_swapins += 1;
        self.vm.pswpin += 1;
        self.vm.pgpgin += 4;
        self.memcgs[m as usize].events.pswpin += 1;
        ctx.cpu(self.costs.bio_submit_ns);
        let slot = self.pages[i as usize].slot;
        let d = self.swap.dev_of(slot);
        self.swap.devs[d].submit_read(ctx.now)
    }

    /// DeviceDone event: complete every write due by `now`, then re-arm for the next one.
    pub fn device_done(&mut self, d: usize, now: Time) {
        self.swap.devs[d].scheduled = None;
        while let Some(&(done, page)) = self.swap.devs[d].inflight.front() {
            if done > now {
                self.swap.devs[d].scheduled = Some(done);
                self.queue.push(done, EventKind::DeviceDone(d as u16));
                break;
            }
            self.swap.devs[d].inflight.pop_front();
            self.end_swap_writeback(page);
        }
    }

    /// folio_end_writeback: a PG_reclaim folio still on the LRU and clean goes to the inactive
    /// tail (pgrotated), to be freed by the next scan without IO.
    pub fn end_swap_writeback(&mut self, i: u32) {
        let p = &mut self.pages[i as usize];
        if !p.has(pg::WRITEBACK) {
            // Completed early (reclaim waited on it) or its process exited.
            return;
        }
        p.clear(pg::WRITEBACK);
        if !p.has(pg::RECLAIM) {
            return;
        }
        p.clear(pg::RECLAIM);
        let on_lru = (list::INACTIVE_ANON..=list::ACTIVE_FILE).contains(&p.list);
        if on_lru && !p.has(pg::DIRTY) {
            self.lru_del(i);
            self.pages[i as usize].clear(pg::ACTIVE);
            self.lru_add_tail(i);
            self.vm.pgrotated += 1;
        }
    }
}
