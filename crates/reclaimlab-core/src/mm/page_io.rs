//! Swap IO: mm/page_io.c as of 6.18 (swap_writeout, __swap_writepage, swap_read_folio) and the
//! end of writeback (folio_end_writeback → folio_rotate_reclaimable in mm/swap.c).
//!
//! Simplified: one bio per page (the block layer, crate::block, merges bios of one plug into
//! requests); a read completes for the faulting task at the device model's completion time
//! while the folio is treated as uptodate from submission on (nothing else could observe the
//! difference except a second fault on it, which then does not wait).

use super::page::{list, pg};
use super::{Ctx, Mm};
use crate::block::{BlockDevices, BlockIo, Dir};
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
        self.pages[i as usize].stamp = (ctx.now / crate::sim::NSEC_PER_MSEC) as u32;
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
        if self.zswap.enabled && self.zswap.stored_pages > 0 {
            // LRU inversion: a page just reclaimed goes to the device while older ones stay in
            // the pool.
            self.lru_inversion_swapouts += 1;
        }
        self.swap_writepage(ctx, i)
    }

    /// __swap_writepage: submit the write. A block device leaves the folio under writeback
    /// until it completes (swap_writepage_bdev_async: one bio for the page, merged by the
    /// block layer when the caller holds a plug); zram (SWP_SYNCHRONOUS_IO) completes it inline.
    pub fn swap_writepage(&mut self, ctx: &mut Ctx, i: u32) -> Writeout {
        let m = self.pages[i as usize].memcg;
        self.vm.pswpout += 1;
        self.vm.pgpgout += 4;
        self.memcgs[m as usize].events.pswpout += 1;
        ctx.cpu(self.costs.bio_submit_ns);
        let slot = self.pages[i as usize].slot;
        let d = self.swap.dev_of(slot);
        if self.swap.devs[d].synchronous() {
            return self.zram_write(ctx, d, i);
        }
        // The asynchronous write's own work besides the submission: end_swap_bio_write,
        // folio_end_writeback and folio_rotate_reclaimable (6.18), which zram's inline
        // completion does not do. The kernel runs it in the completion's softirq; charged here
        // to the submitting thread (the model has no softirq context), so that a reclaimer
        // writing to a disk pays it as the CPUs do.
        ctx.cpu(self.costs.swap_write_end_ns);
        self.pages[i as usize].set(pg::WRITEBACK);
        let off = slot - self.swap.devs[d].base;
        self.submit_bio(ctx, d, Dir::Write, off, i);
        Writeout::Io
    }

    /// zram_bio_write for one page, completed inline (the folio's writeback ends at once).
    fn zram_write(&mut self, ctx: &mut Ctx, d: usize, i: u32) -> Writeout {
        let off = self.pages[i as usize].slot - self.swap.devs[d].base;
        let v = self.variant(i);
        let same = self.region_of(i).same_filled[v];
        let zram = self.swap.devs[d]
            .zram
            .as_ref()
            .expect("synchronous device is zram");
        let codec_slot = zram.codec_slot;
        let comp_len = self.compressed_len(i, codec_slot);
        if !same {
            let content = self.region_of(i).content;
            ctx.cpu(self.costs.compress_ns(self.codecs[codec_slot], content));
        }
        let before = self.pool_pages();
        let huge = self.zram_huge_class_size;
        let zram = self.swap.devs[d].zram.as_mut().expect("zram");
        let ok = matches!(
            zram.write(off, same, comp_len, huge),
            crate::zram::ZramWrite::Stored
        );
        let after = self.pool_pages();
        // The pool grows from free pages (GFP_NOIO, may use reserves in reclaim).
        if after > before && after - before > self.nr_free {
            let zram = self.swap.devs[d].zram.as_mut().expect("zram");
            zram.free_slot(off, false);
            zram.failed_writes += 1;
            return Writeout::Activate;
        }
        // after ≤ before + nr_free here, so this cannot underflow.
        self.nr_free = self.nr_free + before - after;
        if !ok {
            return Writeout::Activate;
        }
        // folio_end_writeback, inline.
        self.pages[i as usize].set(pg::WRITEBACK);
        self.end_swap_writeback(i);
        Writeout::Done
    }

    /// swap_read_folio: zeromap, then zswap, then the device. Returns when the data is there,
    /// or None for a device read waiting in the task's plug (blk_finish_plug reports it).
    pub fn swap_read_folio(&mut self, ctx: &mut Ctx, i: u32) -> Option<Time> {
        let m = self.pages[i as usize].memcg;
        if self.pages[i as usize].has(pg::ZEROMAP) {
            self.vm.swpin_zero += 1;
            self.memcgs[m as usize].events.swpin_zero += 1;
            return Some(ctx.now);
        }
        if self.zswap_load(ctx, i) {
            return Some(ctx.now);
        }
        // A zswap miss: shrinker feedback (6.12+ nr_disk_swapins, 6.8–6.11 protection) and
        // Funaki's writeback pause.
        self.memcgs[m as usize].nr_disk_swapins += 1;
        self.memcgs[m as usize].nr_zswap_protected += 1;
        self.note_zswap_contention(ctx.now);
        self.vm.pswpin += 1;
        self.vm.pgpgin += 4;
        self.memcgs[m as usize].events.pswpin += 1;
        ctx.cpu(self.costs.bio_submit_ns);
        let slot = self.pages[i as usize].slot;
        let d = self.swap.dev_of(slot);
        if let Some(zram) = &self.swap.devs[d].zram {
            // zram_read_page: same-element fill, plain copy of a huge page, or decompression.
            let s = zram.slot(slot - self.swap.devs[d].base);
            if s.flags & crate::zram::SLOT_HUGE != 0 {
                ctx.cpu(self.costs.zswap_copy_ns);
            } else if s.flags & crate::zram::SLOT_SAME == 0 {
                let codec = self.codecs[zram.codec_slot];
                ctx.cpu(self.costs.decompress_ns(codec, self.region_of(i).content));
            }
            return Some(ctx.now);
        }
        let off = slot - self.swap.devs[d].base;
        self.submit_bio(ctx, d, Dir::Read, off, i)
    }

    /// Complete every device write due by `t`, a running thread's own clock (which runs ahead of
    /// the event queue within its time slice): what it would find finished when it looks. The
    /// queued DeviceDone events then find less to do and re-arm themselves.
    pub fn complete_io_until(&mut self, t: Time) {
        self.run_flushers_until(t);
        for d in 0..self.swap.devs.len() + self.fs.len() {
            self.complete_dev_until(d, t);
        }
    }

    /// DeviceDone event of block device `d` (swap devices, then filesystems): complete every
    /// write due by `now`, then re-arm for the next one.
    pub fn device_done(&mut self, d: usize, now: Time) {
        let n = self.swap.devs.len();
        self.complete_dev_until(d, now);
        let bdev = if d < n {
            &mut self.swap.devs[d].bdev
        } else {
            &mut self.fs[d - n].bdev
        };
        bdev.scheduled = bdev.inflight.front().map(|&(done, _)| done);
        if let Some(done) = bdev.scheduled {
            self.queue.push(done, EventKind::DeviceDone(d as u16));
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
        // folio_clear_reclaim clears PG_readahead too: one bit in the kernel.
        p.clear(pg::RECLAIM | pg::READAHEAD);
        let on_lru = list::is_lru(p.list());
        if on_lru && !p.has(pg::DIRTY) {
            self.lru_del(i);
            self.pages[i as usize].clear(pg::ACTIVE);
            self.lru_add_tail(i);
            self.vm.pgrotated += 1;
        }
    }
}

/// The block layer (crate::block) through its narrow context: the task's plug, the block
/// devices (those under the swap areas, then those under the filesystems) and the event queue.
impl Mm {
    /// blk_start_plug.
    pub fn blk_start_plug(&mut self) {
        self.plug.start();
    }

    /// blk_finish_plug: the completion times of the reads the plug issued.
    pub fn blk_finish_plug(&mut self, ctx: &Ctx) -> Vec<(u32, Time)> {
        let mut devs = MmDevs {
            swap: &mut self.swap.devs,
            fs: &mut self.fs,
        };
        let mut io = BlockIo {
            devs: &mut devs,
            queue: &mut self.queue,
        };
        self.plug.finish(ctx, &mut io)
    }

    /// blk_flush_plug.
    pub fn blk_flush_plug(&mut self, now: Time) {
        let mut devs = MmDevs {
            swap: &mut self.swap.devs,
            fs: &mut self.fs,
        };
        let mut io = BlockIo {
            devs: &mut devs,
            queue: &mut self.queue,
        };
        self.plug.flush(now, &mut io);
    }

    /// Sleep until `t`, flushing the plug first.
    pub fn io_schedule_until(&mut self, ctx: &mut Ctx, t: Time) {
        let start = ctx.now;
        let mut devs = MmDevs {
            swap: &mut self.swap.devs,
            fs: &mut self.fs,
        };
        let mut io = BlockIo {
            devs: &mut devs,
            queue: &mut self.queue,
        };
        self.plug.io_schedule_until(ctx, t, &mut io);
        self.psi_slept(ctx, start);
    }

    /// submit_bio for page `page` at offset `off` of block device `dev` (swap devices first,
    /// then filesystems): a bio of its own.
    pub fn submit_bio(
        &mut self,
        ctx: &mut Ctx,
        dev: usize,
        dir: Dir,
        off: u32,
        page: u32,
    ) -> Option<Time> {
        self.submit_bio_page(ctx, dev, dir, off, page, 1)
    }

    /// submit_bio of page `page` as the first of a bio of `bio_pages` consecutive pages, or
    /// with 0 added to the bio of the page submitted just before it
    /// (crate::block::Plug::submit_bio).
    pub fn submit_bio_page(
        &mut self,
        ctx: &mut Ctx,
        dev: usize,
        dir: Dir,
        off: u32,
        page: u32,
        bio_pages: usize,
    ) -> Option<Time> {
        let start = ctx.now;
        let mut devs = MmDevs {
            swap: &mut self.swap.devs,
            fs: &mut self.fs,
        };
        let mut io = BlockIo {
            devs: &mut devs,
            queue: &mut self.queue,
        };
        let done = self
            .plug
            .submit_bio(ctx, &mut io, (dev, dir, off, page), bio_pages);
        // A sleep for a request tag (blk_get_tag): from the submission to the last wake-up.
        self.psi_slept(ctx, start);
        done
    }
}

/// Every block device of the machine, numbered swap devices first, then filesystems.
struct MmDevs<'a> {
    swap: &'a mut [super::swap::SwapDev],
    fs: &'a mut [super::filemap::Filesystem],
}

impl BlockDevices for MmDevs<'_> {
    fn bdev(&mut self, dev: usize) -> &mut crate::block::BlockDevice {
        let n = self.swap.len();
        if dev < n {
            &mut self.swap[dev].bdev
        } else {
            &mut self.fs[dev - n].bdev
        }
    }
}
