//! The block layer between swap IO and the device model: bios, the task's plug, and request
//! merging, as of 6.18: block/blk-core.c (blk_start_plug, blk_finish_plug, __blk_flush_plug),
//! block/blk-mq.c (blk_mq_submit_bio, blk_add_rq_to_plug, blk_mq_flush_plug_list) and
//! block/blk-merge.c (blk_attempt_plug_merge, ll_back_merge_fn). Device timing is
//! [`BlockDevice::issue`] (docs/model/time.md).
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
//! before this model existed. No writeback throttling (block/blk-wbt.c: a device with
//! `wbt_lat_usec` set, as the lab's loop devices have at 2000, lets buffered writeback keep
//! only a few requests in flight, 4 to 16 at its default depth, scaled up to 3/4 of the
//! queue while only writes are seen); here writeback keeps up to `nr_requests` in flight. No front merges (the model submits ascending slots), no
//! max_segments limit apart from max_sectors, no merging into requests already issued (an I/O
//! scheduler such as mq-deadline merges bios into requests it has not dispatched yet; here an
//! issued request is with the device, which serves requests in FIFO order), no plug callbacks,
//! no multiple-queue plug limit (one plug rarely sees two devices). Requests are issued at the
//! time of the flush; counters count a request when it is issued (the kernel counts ios at
//! completion). A thread sleeping for a tag sleeps inside its own event (docs/model/time.md,
//! open question 2).

//!
//! Narrow context: the block layer knows nothing of the rest of the model. A task's [`Plug`]
//! works on a [`BlockIo`]: the block devices (through [`BlockDevices`]) and the event queue;
//! time comes from the task's [`Ctx`].

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::config::{Backing, DeviceModel};
use crate::sim::{later, Ctx, EventKind, EventQueue, Time, NSEC_PER_SEC, TIME_CEILING_NS};
use crate::stats::DiskStats;

const PAGE_SIZE: u64 = 4096;

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

/// A request being built in the plug: consecutive offsets of one device.
#[derive(Debug)]
struct Request {
    dev: usize,
    dir: Dir,
    /// Device offset of the first page.
    off: u32,
    pages: Vec<u32>,
    /// Bios in it: one per page for swap IO; a filesystem's read bio holds many pages.
    bios: u64,
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

/// A block device's request queue and timing model (under a swap area).
#[derive(Debug)]
pub struct BlockDevice {
    pub model: DeviceModel,
    /// The device is busy until then: requests are served one after another, each for its
    /// transfer time (at least 1/iops); latencies overlap.
    pipe_free: Time,
    /// Requests issued and bios merged into them (/sys/block/<dev>/stat).
    pub stat: DiskStats,
    /// Completion times of the requests in flight, when the model limits them (nr_requests):
    /// each holds a tag until then.
    pub tags: BinaryHeap<Reverse<Time>>,
    /// Writes in flight in completion order: (done, page).
    pub inflight: VecDeque<(Time, u32)>,
    /// Completion of the last write issued (page cache, swap or metadata): writes complete in
    /// submission order.
    last_write_done: Time,
    /// Time of the DeviceDone event already queued for this device, if any.
    pub scheduled: Option<Time>,
    /// What the device is made of: itself, or a loop device over an image file
    /// ([`BlockDevice::pgpg_kib`]).
    pub backing: Backing,
}

impl BlockDevice {
    pub fn new(model: DeviceModel) -> BlockDevice {
        BlockDevice {
            model,
            pipe_free: 0,
            stat: DiskStats::default(),
            tags: BinaryHeap::new(),
            inflight: VecDeque::new(),
            last_write_done: 0,
            scheduled: None,
            backing: Backing::Device,
        }
    }

    /// The device with `backing` under it.
    pub fn with_backing(self, backing: Backing) -> BlockDevice {
        BlockDevice { backing, ..self }
    }

    /// The KiB that vmstat `pgpgin` / `pgpgout` count for a read or write bio of `bytes` to
    /// this device: submit_bio (block/blk-core.c, 6.18) adds every REQ_OP_READ / REQ_OP_WRITE
    /// bio's sectors to PGPGIN / PGPGOUT, of whatever device. A loop device with direct IO
    /// counts twice: the bio submitted to it, then the bios its worker submits to the device
    /// under the image file for the same sectors (loop_queue_rq → lo_rw_aio, an IOCB_DIRECT
    /// read_iter/write_iter on the backing file → iomap_dio_rw → submit_bio). Measured on the
    /// lab's loop device: vmstat `pgpgout` 2.01–2.03 times the loop device's own sectors
    /// written in a streaming write, `pgpgin` 2.00–2.13 times its sectors read in file reads
    /// (docs/validation.md). Simplified: the host filesystem's own IO for the image (the
    /// journal commits of the loop worker's fsync on a flush, the conversion of the
    /// fallocated image's unwritten extents) is not modelled; the device's request counters
    /// (`block[<fs>].stat.*`) stay the loop device's.
    pub fn pgpg_kib(&self, bytes: u64) -> u64 {
        let kib = bytes / 1024;
        match self.backing {
            Backing::Device => kib,
            Backing::Loop => 2 * kib,
        }
    }

    /// Pages one request may hold: max_sectors_kb / 4 (at least one page); None when the
    /// device model does not merge.
    pub fn max_request_pages(&self) -> Option<usize> {
        self.model
            .max_sectors_kb
            .map(|kb| ((kb as u64 * 1024 / PAGE_SIZE).max(1)) as usize)
    }

    /// Issue one request of consecutive pages (in slot order) to the device; returns when it
    /// completes. The device serves requests one after another (FIFO): each occupies it for
    /// the transfer of its bytes at the bandwidth, and at least 1/iops; the latency overlaps
    /// with later requests. Writes complete in submission order and are queued in `inflight`
    /// (every page of a request completes with it). One page and no `iops`: exactly the
    /// per-page model of earlier versions.
    pub fn issue(&mut self, now: Time, dir: Dir, pages: &[u32]) -> Time {
        self.issue_request(now, dir, pages, pages.len() as u64)
    }

    /// [`BlockDevice::issue`] for a request built from `bios` bios (its merges: bios − 1).
    pub fn issue_request(&mut self, now: Time, dir: Dir, pages: &[u32], bios: u64) -> Time {
        let done = self.serve(now, dir, pages.len() as u64, bios);
        if dir == Dir::Write {
            self.inflight.extend(pages.iter().map(|&p| (done, p)));
        }
        done
    }

    /// A request of `blocks` 4 KiB blocks built from `bios` bios that carries no page of the
    /// page arena: a filesystem's metadata, such as a journal's descriptor, metadata and
    /// commit blocks (submit_bh). Timed and counted as any request; nothing to complete.
    pub fn issue_blocks(&mut self, now: Time, dir: Dir, blocks: u64, bios: u64) -> Time {
        self.serve(now, dir, blocks, bios)
    }

    /// A cache flush (REQ_OP_FLUSH: blkdev_issue_flush, a REQ_PREFLUSH, or the post-flush
    /// with which blk-flush.c emulates REQ_FUA on a device without FUA). It reaches the device
    /// after the requests issued before it and occupies it for `flush_ns`; its completion.
    /// None when the model has no `flush_ns`: a device without a volatile write cache, for
    /// which blk_flush_policy drops flushes (REQ_PREFLUSH and REQ_FUA become plain writes).
    pub fn issue_flush(&mut self, now: Time) -> Option<Time> {
        let ns = self.model.flush_ns?;
        let start = now.max(self.pipe_free);
        self.pipe_free = later(start, ns);
        self.stat.flush_ios += 1;
        if self.model.nr_requests.is_some() {
            self.tags.push(Reverse(self.pipe_free));
        }
        Some(self.pipe_free)
    }

    /// blkdev_issue_flush: an empty REQ_OP_WRITE | REQ_PREFLUSH bio. On a device with a
    /// volatile cache its request is the flush (as [`BlockDevice::issue_flush`]) and, once the
    /// flush machinery hands it back (blk_flush_restore_request), is accounted as a write of
    /// no sectors: one `write_ios` and one `flush_ios` (a traced ext4 checkpoint on the lab's
    /// loop device: docs/model/time.md#flushes-and-the-journal). None without a cache.
    pub fn blkdev_issue_flush(&mut self, now: Time) -> Option<Time> {
        let done = self.issue_flush(now)?;
        self.stat.write_ios += 1;
        Some(done)
    }

    /// Time and count one request of `n` pages made of `bios` bios; its completion.
    fn serve(&mut self, now: Time, dir: Dir, n: u64, bios: u64) -> Time {
        debug_assert!(n > 0);
        let (bytes_per_s, latency) = match dir {
            Dir::Read => (self.model.read_bytes_per_s, self.model.read_latency_ns),
            Dir::Write => (self.model.write_bytes_per_s, self.model.write_latency_ns),
        };
        // u128: a large max_sectors_kb times 4096 × 10^9 overflows u64.
        // Clamped to the clock's ceiling (1 byte/s moves a page in 4096 s): times saturate.
        let transfer = (n as u128 * PAGE_SIZE as u128 * NSEC_PER_SEC as u128)
            .div_ceil(bytes_per_s.max(1) as u128)
            .min(TIME_CEILING_NS as u128) as u64;
        let min_busy = self
            .model
            .iops
            .map_or(0, |iops| NSEC_PER_SEC.div_ceil(iops.max(1)));
        let start = now.max(self.pipe_free);
        self.pipe_free = later(start, transfer.max(min_busy));
        let mut done = later(self.pipe_free, latency);
        match dir {
            Dir::Read => {
                self.stat.read_ios += 1;
                self.stat.read_merges += bios.max(1) - 1;
            }
            Dir::Write => {
                self.stat.write_ios += 1;
                self.stat.write_merges += bios.max(1) - 1;
                // Writes complete in submission order.
                done = done.max(self.last_write_done);
                self.last_write_done = done;
            }
        }
        if self.model.nr_requests.is_some() {
            // The request holds its tag until it completes.
            self.tags.push(Reverse(done));
        }
        done
    }

    /// /sys/block/<dev>/stat request counts of device `name`, for devices with a request model
    /// (an IOPS cap or request merging). Without one every page is its own request and the
    /// counts would repeat pswpin/pswpout, so they are not exported.
    pub fn export_stat(&self, name: &str, out: &mut Vec<(String, u64)>) {
        if self.model.iops.is_some() || self.model.max_sectors_kb.is_some() {
            self.stat.export(&format!("block[{name}].stat."), out);
        }
    }
}

/// The block devices, by index (the swap devices' order).
pub trait BlockDevices {
    fn bdev(&mut self, dev: usize) -> &mut BlockDevice;
}

/// What a task's plug may touch: the devices and the event queue (DeviceDone events).
pub struct BlockIo<'a, D: BlockDevices + ?Sized> {
    pub devs: &'a mut D,
    pub queue: &'a mut EventQueue,
}

impl Plug {
    /// blk_start_plug.
    pub fn start(&mut self) {
        self.depth += 1;
    }

    /// blk_finish_plug: the outermost one issues the plugged requests. Returns the completion
    /// times of the reads this plug issued (empty for a nested plug).
    pub fn finish<D: BlockDevices + ?Sized>(
        &mut self,
        ctx: &Ctx,
        io: &mut BlockIo<'_, D>,
    ) -> Vec<(u32, Time)> {
        debug_assert!(self.depth > 0, "blk_finish_plug without blk_start_plug");
        if self.depth > 1 {
            self.depth -= 1;
            return Vec::new();
        }
        // Flush while still plugged, so that the reads it issues are reported too.
        self.flush(ctx.now, io);
        self.depth = 0;
        std::mem::take(&mut self.reads)
    }

    /// blk_flush_plug: issue the plugged requests, in the order they were added (their tags
    /// were taken when they were created).
    pub fn flush<D: BlockDevices + ?Sized>(&mut self, now: Time, io: &mut BlockIo<'_, D>) {
        for r in std::mem::take(&mut self.reqs) {
            self.issue(now, io, r.dev, r.dir, &r.pages, r.bios);
        }
    }

    /// A task going to sleep until `t` (schedule → sched_submit_work) flushes its plug first.
    pub fn io_schedule_until<D: BlockDevices + ?Sized>(
        &mut self,
        ctx: &mut Ctx,
        t: Time,
        io: &mut BlockIo<'_, D>,
    ) {
        self.flush(ctx.now, io);
        ctx.wait_until(t);
    }

    /// submit_bio for page `page` at offset `off` of block device `dev`. Returns its
    /// completion if it was issued at once, None if it waits in the plug (its completion is
    /// known when the plug is flushed; reads are reported by `finish`). A bio that needs a new
    /// request may first sleep for a tag (`blk_get_tag`).
    ///
    /// `bio_pages`: the page starts a bio of that many consecutive pages (1 for swap IO; the
    /// filesystem's readahead and writeback build bios of consecutive folios, bio_add_folio),
    /// which back-merges into the plug's last request only if the whole bio fits within
    /// max_sectors_kb (ll_back_merge_fn); 0: the page continues the bio of the page submitted
    /// just before it, joining that request without a merge, and where the request is full the
    /// bio is split there (bio_split_to_limits) and the rest starts a new request.
    pub fn submit_bio<D: BlockDevices + ?Sized>(
        &mut self,
        ctx: &mut Ctx,
        io: &mut BlockIo<'_, D>,
        bio: (usize, Dir, u32, u32),
        bio_pages: usize,
    ) -> Option<Time> {
        let (dev, dir, off, page) = bio;
        let max_pages = io.devs.bdev(dev).max_request_pages();
        if max_pages.is_none() || self.depth == 0 {
            self.get_tag(ctx, io, dev);
            return Some(self.issue(ctx.now, io, dev, dir, &[page], 1));
        }
        let max_pages = max_pages.unwrap_or(1);
        let held = self.reqs.len();
        if let Some(last) = self.reqs.last_mut() {
            // blk_attempt_plug_merge: only the plug's last request is tried.
            if last.dev == dev
                && last.dir == dir
                && last.off + last.pages.len() as u32 == off
                && last.pages.len() + bio_pages.max(1) <= max_pages
            {
                last.pages.push(page);
                last.bios += u64::from(bio_pages > 0);
                return None;
            }
            // blk_add_rq_to_plug.
            if held >= BLK_MAX_REQUEST_COUNT
                || last.pages.len() as u64 * PAGE_SIZE >= BLK_PLUG_FLUSH_SIZE
            {
                self.flush(ctx.now, io);
            }
        }
        self.get_tag(ctx, io, dev);
        self.reqs.push(Request {
            dev,
            dir,
            off,
            pages: vec![page],
            bios: 1,
        });
        None
    }

    /// blk_mq_get_tag (block/blk-mq-tag.c): a new request takes one of the device's
    /// nr_requests tags, held until it completes (requests waiting in the plug hold theirs
    /// already). With every tag taken, the task sleeps (io_schedule, which flushes its plug)
    /// until the earliest request in flight completes. Simplified: sleepers are woken in the
    /// order they run, not in the order they slept; no per-hctx tag sets, no reserved tags.
    fn get_tag<D: BlockDevices + ?Sized>(
        &mut self,
        ctx: &mut Ctx,
        io: &mut BlockIo<'_, D>,
        dev: usize,
    ) {
        let Some(nr) = io.devs.bdev(dev).model.nr_requests else {
            return;
        };
        loop {
            let held = self.reqs.iter().filter(|r| r.dev == dev).count();
            let tags = &mut io.devs.bdev(dev).tags;
            while tags.peek().is_some_and(|t| t.0 <= ctx.now) {
                tags.pop();
            }
            if tags.len() + held < nr as usize {
                return;
            }
            let Some(&Reverse(first)) = tags.peek() else {
                // Every tag is in the plug: issuing the plug puts them in flight.
                self.flush(ctx.now, io);
                continue;
            };
            self.io_schedule_until(ctx, first, io);
        }
    }

    /// Hand one request to the device. A write's pages complete through DeviceDone events
    /// (armed here when none is pending); a read's completion is returned, and remembered for
    /// the plug's owner when it came from a plug.
    fn issue<D: BlockDevices + ?Sized>(
        &mut self,
        now: Time,
        io: &mut BlockIo<'_, D>,
        dev: usize,
        dir: Dir,
        pages: &[u32],
        bios: u64,
    ) -> Time {
        let d = io.devs.bdev(dev);
        let done = d.issue_request(now, dir, pages, bios);
        match dir {
            Dir::Write => {
                if d.scheduled.is_none() {
                    d.scheduled = Some(done);
                    io.queue.push(done, EventKind::DeviceDone(dev as u16));
                }
            }
            Dir::Read => {
                if self.depth > 0 {
                    self.reads.extend(pages.iter().map(|&p| (p, done)));
                }
            }
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> DeviceModel {
        DeviceModel::test_fast()
    }

    #[test]
    fn writes_complete_in_order() {
        let mut d = BlockDevice::new(model());
        let a = d.issue(0, Dir::Write, &[1]);
        let b = d.issue(0, Dir::Write, &[2]);
        assert!(b > a);
        assert_eq!(d.inflight.len(), 2);
    }

    #[test]
    fn request_occupies_at_least_one_iops_slot() {
        // 1000 ns per page at the bandwidth, 1 ms per request at 1000 IOPS.
        let mut d = BlockDevice::new(DeviceModel {
            iops: Some(1000),
            ..model()
        });
        assert_eq!(d.issue(0, Dir::Write, &[1]), 1_000_000 + 100);
        assert_eq!(d.issue(0, Dir::Write, &[2, 3, 4]), 2_000_000 + 100);
        assert_eq!(d.issue(0, Dir::Read, &[5]), 3_000_000 + 100);
        assert_eq!(
            (d.stat.write_ios, d.stat.write_merges, d.stat.read_ios),
            (2, 2, 1)
        );
        // Without the cap a request of three pages takes three page transfers.
        let mut d = BlockDevice::new(model());
        assert_eq!(d.issue(0, Dir::Write, &[1, 2, 3]), 3_000 + 100);
    }
}
