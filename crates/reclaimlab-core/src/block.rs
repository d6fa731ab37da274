//! The block layer between swap IO and the device model: bios, the task's plug, and request
//! merging, as of 6.18: block/blk-core.c (blk_start_plug, blk_finish_plug, __blk_flush_plug),
//! block/blk-mq.c (blk_mq_submit_bio, blk_add_rq_to_plug, blk_mq_flush_plug_list) and
//! block/blk-merge.c (blk_attempt_plug_merge, ll_back_merge_fn). Device timing is
//! `SwapDev::issue` (mm/swap.rs, docs/model/time.md).
//!
//! Swap IO submits one bio per 4 KiB page (mm/page_io.c: swap_writepage_bdev_async,
//! swap_read_folio_bdev_async). While the submitting task holds a plug, blk_mq_submit_bio first
//! tries to merge the bio into the last request of the plug (a back merge: the bio starts where
//! the request ends, same direction, the result within max_sectors), else adds a new request
//! to the plug, flushing the plug first when it holds BLK_MAX_REQUEST_COUNT requests or its
//! last request is BLK_PLUG_FLUSH_SIZE or larger. The plug is flushed (its requests issued to
//! the device) at the outermost blk_finish_plug and when the task sleeps (schedule() →
//! sched_submit_work → blk_flush_plug). Without a plug a bio is issued at once.
//!
//! Who plugs (6.18): shrink_lruvec around its scan loop (mm/vmscan.c), so reclaim's swap-outs of
//! one reclaim pass to consecutive slots merge; swap_cluster_readahead and swap_vma_readahead
//! around the readahead window (mm/swap_state.c). zswap writeback does not: shrink_worker, the
//! zswap shrinker (called from shrink_slab, after shrink_lruvec finished its plug) and
//! zswap_writeback_entry hold none, so each written-back entry is its own 4 KiB request, unless
//! the writeback runs inside someone else's plug (zswap_store over memory.zswap.max, inside
//! shrink_lruvec).
//!
//! A request holds one of the queue's nr_requests tags from its creation to its completion;
//! without a free tag the submitting task sleeps (`blk_get_tag`), so a slow device throttles
//! everyone who submits to it, zswap's writeback included.
//!
//! Simplified: only devices whose model has `max_sectors_kb` plug and merge, and only those
//! with `nr_requests` limit their tags; on the others a bio is issued when submitted, as
//! before this model existed. No front merges (the model submits ascending slots), no
//! max_segments limit apart from max_sectors, no merging into requests already issued (an I/O
//! scheduler such as mq-deadline merges bios into requests it has not dispatched yet; here an
//! issued request is with the device, which serves requests in FIFO order), no plug callbacks,
//! no multiple-queue plug limit (one plug rarely sees two devices). Requests are issued at the
//! time of the flush; counters count a request when it is issued (the kernel counts ios at
//! completion). A thread sleeping for a tag sleeps inside its own event (docs/model/time.md,
//! open question 2).

use crate::mm::swap::SwapDev;
use crate::mm::{Ctx, Mm, PAGE_SIZE};
use crate::sim::{EventKind, Time};

/// BLK_MAX_REQUEST_COUNT (block/blk.h): requests a plug holds before it is flushed.
pub const BLK_MAX_REQUEST_COUNT: usize = 32;
/// BLK_PLUG_FLUSH_SIZE (block/blk.h): a plug whose last request has this many bytes is
/// flushed before the next request is added.
pub const BLK_PLUG_FLUSH_SIZE: u64 = 128 * 1024;

/// Data direction of a bio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Read,
    Write,
}

/// A request being built in the plug: consecutive offsets of one device, one page per bio.
#[derive(Debug)]
struct Request {
    dev: usize,
    dir: Dir,
    /// Device offset of the first page.
    off: u32,
    pages: Vec<u32>,
}

/// The running task's plug (current->plug). Plugs never outlive an event: the thread that
/// starts one finishes it before its event ends.
#[derive(Debug, Default)]
pub struct Plug {
    /// blk_start_plug calls not yet finished; only the outermost one plugs (a nested
    /// blk_start_plug finds current->plug set and does nothing).
    depth: u32,
    reqs: Vec<Request>,
    /// Completion of every read issued from this plug: (page, done).
    reads: Vec<(u32, Time)>,
}

impl Plug {
    pub fn is_idle(&self) -> bool {
        self.depth == 0 && self.reqs.is_empty() && self.reads.is_empty()
    }
}

impl SwapDev {
    /// /sys/block/<dev>/stat request counts, for devices with a request model (an IOPS cap or
    /// request merging). Without one every page is its own request and the counts would repeat
    /// pswpin/pswpout, so they are not exported.
    pub fn export_block_stat(&self, out: &mut Vec<(String, u64)>) {
        if self.zram.is_none() && (self.model.iops.is_some() || self.model.max_sectors_kb.is_some()) {
            self.stat.export(&format!("block[{}].stat.", self.name), out);
        }
    }
}

impl Mm {
    /// blk_start_plug.
    pub fn blk_start_plug(&mut self) {
        self.plug.depth += 1;
    }

    /// blk_finish_plug: the outermost one issues the plugged requests. Returns the completion
    /// times of the reads this plug issued (empty for a nested plug).
    pub fn blk_finish_plug(&mut self, ctx: &Ctx) -> Vec<(u32, Time)> {
        debug_assert!(self.plug.depth > 0, "blk_finish_plug without blk_start_plug");
        if self.plug.depth > 1 {
            self.plug.depth -= 1;
            return Vec::new();
        }
        // Flush while still plugged, so that the reads it issues are reported too.
        self.blk_flush_plug(ctx.now);
        self.plug.depth = 0;
        std::mem::take(&mut self.plug.reads)
    }

    /// blk_flush_plug: issue the plugged requests, in the order they were added (their tags
    /// were taken when they were created).
    pub fn blk_flush_plug(&mut self, now: Time) {
        for r in std::mem::take(&mut self.plug.reqs) {
            self.blk_issue(now, r.dev, r.dir, &r.pages);
        }
    }

    /// A task going to sleep until `t` (schedule → sched_submit_work) flushes its plug first.
    pub fn io_schedule_until(&mut self, ctx: &mut Ctx, t: Time) {
        self.blk_flush_plug(ctx.now);
        ctx.wait_until(t);
    }

    /// submit_bio for page `page` at offset `off` of block device `dev`. Returns its
    /// completion if it was issued at once, None if it waits in the plug (its completion is
    /// known when the plug is flushed; reads are reported by `blk_finish_plug`). A bio that
    /// needs a new request may first sleep for a tag (`blk_get_tag`).
    pub fn submit_bio(&mut self, ctx: &mut Ctx, dev: usize, dir: Dir, off: u32, page: u32) -> Option<Time> {
        let max_pages = self.swap.devs[dev].max_request_pages();
        if max_pages.is_none() || self.plug.depth == 0 {
            self.blk_get_tag(ctx, dev);
            return Some(self.blk_issue(ctx.now, dev, dir, &[page]));
        }
        let max_pages = max_pages.unwrap_or(1);
        let held = self.plug.reqs.len();
        if let Some(last) = self.plug.reqs.last_mut() {
            // blk_attempt_plug_merge: only the plug's last request is tried.
            if last.dev == dev && last.dir == dir && last.off + last.pages.len() as u32 == off && last.pages.len() < max_pages {
                last.pages.push(page);
                return None;
            }
            // blk_add_rq_to_plug.
            if held >= BLK_MAX_REQUEST_COUNT || last.pages.len() as u64 * PAGE_SIZE >= BLK_PLUG_FLUSH_SIZE {
                self.blk_flush_plug(ctx.now);
            }
        }
        self.blk_get_tag(ctx, dev);
        self.plug.reqs.push(Request { dev, dir, off, pages: vec![page] });
        None
    }

    /// blk_mq_get_tag (block/blk-mq-tag.c): a new request takes one of the device's
    /// nr_requests tags, held until it completes (requests waiting in the plug hold theirs
    /// already). With every tag taken, the task sleeps (io_schedule, which flushes its plug)
    /// until the earliest request in flight completes. Simplified: sleepers are woken in the
    /// order they run, not in the order they slept; no per-hctx tag sets, no reserved tags.
    fn blk_get_tag(&mut self, ctx: &mut Ctx, dev: usize) {
        let Some(nr) = self.swap.devs[dev].model.nr_requests else { return };
        loop {
            let held = self.plug.reqs.iter().filter(|r| r.dev == dev).count();
            let tags = &mut self.swap.devs[dev].tags;
            while tags.peek().is_some_and(|t| t.0 <= ctx.now) {
                tags.pop();
            }
            if tags.len() + held < nr as usize {
                return;
            }
            let Some(&std::cmp::Reverse(first)) = tags.peek() else {
                // Every tag is in the plug: issuing the plug puts them in flight.
                self.blk_flush_plug(ctx.now);
                continue;
            };
            self.io_schedule_until(ctx, first);
        }
    }

    /// Hand one request to the device. A write's pages complete through DeviceDone events
    /// (armed here when none is pending); a read's completion is returned, and remembered for
    /// the plug's owner when it came from a plug.
    fn blk_issue(&mut self, now: Time, dev: usize, dir: Dir, pages: &[u32]) -> Time {
        let done = self.swap.devs[dev].issue(now, dir, pages);
        match dir {
            Dir::Write => {
                if self.swap.devs[dev].scheduled.is_none() {
                    self.swap.devs[dev].scheduled = Some(done);
                    self.queue.push(done, EventKind::DeviceDone(dev as u16));
                }
            }
            Dir::Read => {
                if self.plug.depth > 0 {
                    self.plug.reads.extend(pages.iter().map(|&p| (p, done)));
                }
            }
        }
        done
    }
}
