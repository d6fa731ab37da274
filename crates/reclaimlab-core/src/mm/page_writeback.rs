//! Dirty page cache and its writeback: mm/page-writeback.c (folio_account_dirtied,
//! domain_dirty_limits, balance_dirty_pages, balance_dirty_pages_ratelimited,
//! folio_clear_dirty_for_io, __folio_start_writeback, __folio_end_writeback), the write side of
//! mm/filemap.c (generic_perform_write, folio_end_writeback, file_write_and_wait_range) and the
//! flusher of fs/fs-writeback.c (__mark_inode_dirty, wb_wakeup_delayed, wb_workfn,
//! wb_check_start_all, wb_check_background_flush, wb_check_old_data_flush, writeback_sb_inodes,
//! wakeup_flusher_threads), as read in 6.12.
//!
//! A filesystem is one backing device (bdi) with one bdi_writeback and its flusher (an actor
//! with its own clock, run by `EventKind::Flusher` events). A file region is one inode:
//! its dirty pages are the mapping's PAGECACHE_TAG_DIRTY set (`FileState::dirty`, ordered by
//! index), `dirtied_when` is the inode's, and writeback submits one bio per page to the
//! filesystem's block device under a plug (the block layer merges them into requests);
//! completions come back through `device_done`, as swap writes do.
//!
//! Simplified (each says what the kernel does instead):
//! * balance_dirty_pages: the kernel's pos_ratio feedback control around the setpoint with an
//!   estimated per-bdi write bandwidth and dirty_ratelimit is replaced by its fixed point: the
//!   writer's rate is the device's write bandwidth times pos_ratio, the kernel's cubic
//!   (pos_ratio = 1 + ((setpoint − dirty) / (limit − setpoint))³, clamped to [0, 2]) over the
//!   global domain, and on cgroup v2 also over the writer's memcg domain (mm/cgwb.rs: the
//!   lower pos_ratio of the two throttles, freerun only under both ceilings); at or over the
//!   limit it sleeps until enough writeback completes to get below it, at most MAX_PAUSE.
//!   No per-bdi (wb) share of a domain, no strictlimit, no dirty_ratelimit estimation.
//! * Only file pages count in the dirty domain's NR_WRITEBACK (swap writeback is left out of
//!   `nr_file_writeback`; the exported vmstat nr_writeback counts both, as the kernel's does).
//! * The flusher writes one inode at a time, oldest dirtied_when first, MIN_WRITEBACK_PAGES
//!   per chunk (writeback_chunk_size without bandwidth estimation), range-cyclic from the
//!   inode's writeback_index; inodes are not moved between b_dirty/b_io/b_more_io lists.
//!   A start_all request (reclaim's wakeup_flusher_threads) follows 6.18: dropped while one is
//!   pending, sized when the flusher takes it, ended when its inodes are clean (`wb_workfn`);
//!   get_nr_dirty_inodes counts the scenario's files only (a real machine's inodes in use
//!   make the kernel's work larger).
//! * A dirty page costs one page of data write at its file offset; the metadata that delayed
//!   allocation dirties and the journal commit of an fsync are mm/journal.rs's.

use std::collections::BTreeSet;

use super::page::{list, pg, PAGE_SIZE};
use super::{Ctx, Mm, Oom};
use crate::block::Dir;
use crate::sim::{later, EventKind, Time, JIFFY_NS, NSEC_PER_MSEC, NSEC_PER_SEC};

/// MIN_WRITEBACK_PAGES: the flusher's write chunk (4 MiB).
pub const MIN_WRITEBACK_PAGES: u64 = (4096 * 1024) / PAGE_SIZE;
/// BIO_MAX_VECS (include/linux/bio.h): bio_vecs a bio holds, one per order-0 folio.
const BIO_MAX_VECS: usize = 256;
/// MAX_PAUSE: the longest balance_dirty_pages sleep (HZ / 5).
const MAX_PAUSE_NS: u64 = NSEC_PER_SEC / 5;
/// A filesystem's bdi_writeback: its flusher's state.
#[derive(Clone, Debug, Default)]
pub struct Wb {
    /// Time of the Flusher event queued for it, if any.
    pub scheduled: Option<Time>,
    /// The flusher thread's clock (it runs ahead of the queue while it submits).
    pub clock: Time,
    /// WB_start_all: a wakeup_flusher_threads request is pending or being written; further
    /// requests are dropped until wb_check_start_all has finished it (wb_start_writeback).
    pub start_all_pending: bool,
    /// The start_all work being written: (pages it still may write, its `dirtied_before`).
    /// wb_check_start_all sizes it when the flusher runs, not when it is woken.
    pub start_all: Option<(u64, Time)>,
    /// wb->last_old_flush.
    pub last_old_flush: Time,
}

/// The dirty state of one file (inode): dirty pages by page index, pages under writeback.
#[derive(Clone, Debug, Default)]
pub struct InodeWb {
    /// PAGECACHE_TAG_DIRTY: page indices (global page numbers) of the dirty folios.
    pub dirty: BTreeSet<u32>,
    /// Folios of this file under writeback.
    pub nr_writeback: u64,
    /// inode->dirtied_when: when the inode went from clean to dirty.
    pub dirtied_when: Option<Time>,
    /// mapping->writeback_index (range_cyclic writeback resumes here), a global page number.
    pub writeback_index: u32,
}

/// The node's dirty page counters (NR_FILE_DIRTY, the file part of NR_WRITEBACK) and each
/// task's ratelimit state (current->nr_dirtied, current->nr_dirtied_pause).
#[derive(Clone, Debug, Default)]
pub struct DirtyState {
    pub nr_file_dirty: u64,
    pub nr_file_writeback: u64,
    pub nr_dirtied: Vec<u64>,
    pub nr_dirtied_pause: Vec<u64>,
    /// balance_dirty_pages sleeps (trace_balance_dirty_pages events).
    pub throttled: u64,
    /// reclaim_throttle / congestion_wait sleeps (trace_mm_vmscan_throttled events).
    pub reclaim_throttled: u64,
    /// Pages pageout wrote (trace_mm_vmscan_write_folio events, 3.0's mm_vmscan_writepage):
    /// [kswapd?][file?], the seed's "Direct/Kswapd reclaim write file/anon" rows.
    pub reclaim_writes: [[u64; 2]; 2],
}

impl DirtyState {
    /// One pageout write (NR_VMSCAN_WRITE) by kswapd or another reclaimer, of a file or an
    /// anonymous (or tmpfs) folio.
    pub(crate) fn count_reclaim_write(&mut self, kswapd: bool, file: bool) {
        self.reclaim_writes[usize::from(kswapd)][usize::from(file)] += 1;
    }

    pub fn new(nprocs: usize) -> DirtyState {
        // The kernel starts every task at 128 >> (PAGE_SHIFT - 10) = 32 pages.
        DirtyState {
            nr_dirtied: vec![0; nprocs],
            nr_dirtied_pause: vec![32; nprocs],
            ..Default::default()
        }
    }
}

/// ilog2.
fn ilog2(x: u64) -> u32 {
    63 - x.max(1).leading_zeros()
}

/// dirty_poll_interval: below the freerun ceiling, a task checks its limits again after about
/// sqrt(thresh − dirty) pages.
fn dirty_poll_interval(dirty: u64, thresh: u64) -> u64 {
    if thresh > dirty {
        1 << (ilog2(thresh - dirty) >> 1)
    } else {
        1
    }
}

/// pos_control: the kernel's cubic position ratio ×1024 (1024 at the setpoint, 2048 at or
/// below freerun, 0 at the limit).
fn pos_ratio_1024(setpoint: u64, dirty: u64, limit: u64) -> u64 {
    if dirty >= limit {
        return 0;
    }
    let span = (limit - setpoint).max(1) as i128;
    let x = ((setpoint as i128 - dirty as i128) << 10) / span;
    let cubic = (x * x * x) >> 20;
    (1024 + cubic).clamp(0, 2048) as u64
}

impl Mm {
    fn inode(&mut self, region: usize) -> &mut InodeWb {
        &mut self.regions[region]
            .file
            .as_mut()
            .expect("a file region")
            .wb
    }

    pub(crate) fn fs_of_region(&self, region: usize) -> usize {
        self.regions[region]
            .file
            .as_ref()
            .expect("a file region")
            .fs as usize
    }

    /// The block-layer device number of filesystem `fs` (after the swap devices).
    pub(crate) fn fs_dev(&self, fs: usize) -> usize {
        self.swap.devs.len() + fs
    }

    /// global_dirtyable_memory: free pages and the file LRUs, less the reserves
    /// (totalreserve_pages ≈ the high watermark of the one zone).
    pub fn global_dirtyable_memory(&self) -> u64 {
        let file =
            self.lru_size_tree(0, list::INACTIVE_FILE) + self.lru_size_tree(0, list::ACTIVE_FILE);
        (self.nr_free + file).saturating_sub(self.wmark_high).max(1)
    }

    /// domain_dirty_limits for the global domain: (bg_thresh, thresh) in pages, from
    /// vm.dirty_bytes / vm.dirty_ratio and vm.dirty_background_bytes / _ratio (bytes win when
    /// set); a background threshold at or above the limit is halved.
    pub fn dirty_limits(&self) -> (u64, u64) {
        let vm = &self.knobs.vm;
        let avail = self.global_dirtyable_memory();
        let thresh = vm
            .dirty_bytes
            .map_or(avail * vm.dirty_ratio as u64 / 100, |b| {
                b.div_ceil(PAGE_SIZE)
            });
        let bg = vm
            .dirty_background_bytes
            .map_or(avail * vm.dirty_background_ratio as u64 / 100, |b| {
                b.div_ceil(PAGE_SIZE)
            });
        (if bg >= thresh { thresh / 2 } else { bg }, thresh)
    }

    /// NR_FILE_DIRTY + NR_WRITEBACK of the dirty domain.
    fn nr_dirty_domain(&self) -> u64 {
        self.dirty.nr_file_dirty + self.dirty.nr_file_writeback
    }

    /// filemap_dirty_folio → __folio_mark_dirty (folio_account_dirtied: NR_FILE_DIRTY,
    /// NR_DIRTIED, the memcg's dirty count is read from the page flags at export) and
    /// __mark_inode_dirty: a clean inode gets dirtied_when = now, and a flusher with no work
    /// queued is woken after dirty_writeback_interval (wb_wakeup_delayed). True if the folio
    /// was clean.
    pub(crate) fn file_folio_mark_dirty(&mut self, now: Time, i: u32) -> bool {
        if self.pages[i as usize].has(pg::DIRTY) {
            return false;
        }
        self.pages[i as usize].set(pg::DIRTY);
        let region = self.region_index(i);
        self.dirty.nr_file_dirty += 1;
        self.vm_file.nr_dirtied += 1;
        let inode = self.inode(region);
        inode.dirty.insert(i);
        if inode.dirtied_when.is_none() {
            inode.dirtied_when = Some(now);
            let fs = self.fs_of_region(region);
            self.wb_wakeup_delayed(fs, now);
        }
        true
    }

    /// wb_wakeup_delayed: the flusher runs after dirty_writeback_interval unless it is queued
    /// already (vm.dirty_writeback_centisecs = 0 disables the periodic wakeup).
    fn wb_wakeup_delayed(&mut self, fs: usize, now: Time) {
        let cs = self.knobs.vm.dirty_writeback_centisecs as u64;
        if cs == 0 || self.fs[fs].wb.scheduled.is_some() {
            return;
        }
        self.wb_queue(fs, later(now, cs * 10 * NSEC_PER_MSEC));
    }

    /// wb_wakeup: run the flusher now (or as soon as its thread is free).
    fn wb_wakeup(&mut self, fs: usize, now: Time) {
        let at = now.max(self.fs[fs].wb.clock);
        if self.fs[fs].wb.scheduled.is_some_and(|t| t <= at) {
            return;
        }
        self.wb_queue(fs, at);
    }

    fn wb_queue(&mut self, fs: usize, at: Time) {
        // A later queued event finds `scheduled` changed and does nothing.
        self.fs[fs].wb.scheduled = Some(at);
        self.queue.push(at, EventKind::Flusher(fs as u16));
    }

    /// wakeup_flusher_threads(reason) → wb_start_writeback for every flusher with dirty
    /// inodes (wb_has_dirty_io): set WB_start_all and wake it, unless WB_start_all is set
    /// already (a request pending or being written: this one is dropped, as the kernel drops
    /// the high-frequency calls of reclaim). How much it writes is decided when it runs
    /// (`wb_check_start_all`).
    pub fn wakeup_flusher_threads(&mut self, now: Time) {
        for fs in 0..self.fs.len() {
            if self.fs[fs].wb.start_all_pending || self.fs_dirty_pages(fs) == 0 {
                continue;
            }
            self.fs[fs].wb.start_all_pending = true;
            self.wb_wakeup(fs, now);
        }
    }

    /// get_nr_dirty_pages (fs/fs-writeback.c, 6.18): NR_FILE_DIRTY of the whole machine plus
    /// get_nr_dirty_inodes, which is not a count of dirty inodes but of the inodes in use
    /// (nr_inodes − nr_unused, "a wild approximation"). Simplified: the inodes in use are the
    /// scenario's files on block-device filesystems; a real machine adds every inode it has
    /// in use (25,285 on the lab's host on 2026-11-25, /proc/sys/fs/inode-nr), so the
    /// kernel's start_all work there is larger.
    fn get_nr_dirty_pages(&self) -> u64 {
        let inodes = self.regions.iter().filter(|r| r.file.is_some()).count() as u64;
        self.dirty.nr_file_dirty + inodes
    }

    fn fs_dirty_pages(&self, fs: usize) -> u64 {
        self.regions
            .iter()
            .filter_map(|r| r.file.as_ref())
            .filter(|f| f.fs as usize == fs)
            .map(|f| f.wb.dirty.len() as u64)
            .sum()
    }

    /// generic_perform_write (6.18 mm/filemap.c) for one page (a write(2) of 4 KiB at page
    /// `i`'s offset): write_begin finds or creates the folio (a whole-page overwrite reads
    /// nothing; a read in flight holds the folio lock), copy_folio_from_iter, write_end marks
    /// it dirty, then balance_dirty_pages_ratelimited. FGP_WRITEBEGIN has no FGP_ACCESSED:
    /// writing does not mark the folio accessed, so written pages age on the inactive list.
    ///
    /// CPU, per page (the figures `calibrate`'s write stage measures on ext4): `write_page_ns`
    /// for the call on a folio the cache has (ext4_da_write_begin's lookup and lock,
    /// the copy, ext4_da_write_end); a folio it adds costs filemap_add_folio's
    /// `pagecache_add_ns` + `pagecache_add_page_ns` and `write_begin_folio_ns` for its buffer
    /// head and block lookup (ext4_da_get_block_prep on a block the file has); a folio that
    /// was clean costs `folio_account_dirtied_ns` (folio_account_dirtied,
    /// __mark_inode_dirty). Simplified: a write(2) always gets an order-0 folio (6.18's
    /// filemap_get_order for a 4 KiB write); a block the file does not have yet (delayed
    /// allocation's reservation, ext4_da_reserve_space) is charged as one it has; xfs and
    /// btrfs are charged ext4's figures.
    pub fn generic_perform_write(&mut self, ctx: &mut Ctx, i: u32) -> Result<(), Oom> {
        let region = self.region_index(i);
        // file_update_time (__generic_file_write_iter, before the copy): the new mtime dirties
        // the inode in the journal (mm/journal.rs).
        self.ext4_dirty_inode(ctx, region);
        if !self.pages[i as usize].has(pg::RESIDENT) {
            self.filemap_add_folio(ctx, i)?;
            ctx.cpu(self.costs.write_begin_folio_ns);
        }
        // write_begin attaches the folio's buffer heads (mm/objcg.rs).
        self.create_empty_buffers(ctx, i)?;
        self.folio_wait_locked(ctx, region, i);
        ctx.cpu(self.costs.write_page_ns);
        let newly = self.file_folio_mark_dirty(ctx.now, i);
        if newly {
            ctx.cpu(self.costs.folio_account_dirtied_ns);
        }
        self.balance_dirty_pages_ratelimited(ctx, region, newly);
        Ok(())
    }

    /// A store to a clean page of a shared file mapping: do_shared_fault (or do_wp_page →
    /// wp_page_shared on a PTE write-protected by folio_clear_dirty_for_io) →
    /// fault_dirty_shared_page: the folio is dirtied and the task ratelimited.
    pub(crate) fn fault_dirty_shared_page(&mut self, ctx: &mut Ctx, i: u32) {
        let region = self.region_index(i);
        // fault_dirty_shared_page's file_update_time (mm/journal.rs).
        self.ext4_dirty_inode(ctx, region);
        let newly = self.file_folio_mark_dirty(ctx.now, i);
        if newly {
            ctx.cpu(self.costs.folio_account_dirtied_ns);
        }
        self.balance_dirty_pages_ratelimited(ctx, region, newly);
    }

    /// balance_dirty_pages_ratelimited: count the task's dirtied pages; after
    /// current->nr_dirtied_pause of them, balance_dirty_pages. Kernel threads are not
    /// throttled.
    fn balance_dirty_pages_ratelimited(&mut self, ctx: &mut Ctx, region: usize, newly: bool) {
        let super::Actor::Process(p) = ctx.actor else {
            return;
        };
        if !newly {
            return;
        }
        let p = p as usize;
        self.dirty.nr_dirtied[p] += 1;
        if self.dirty.nr_dirtied[p] >= self.dirty.nr_dirtied_pause[p] {
            self.balance_dirty_pages(ctx, p, region);
        }
    }

    /// balance_dirty_pages (simplified, see the module doc): wake background writeback above
    /// the background threshold; below the freerun ceiling, run free and poll again after
    /// dirty_poll_interval pages; above it, sleep for the pages dirtied at the throttled
    /// rate (device write bandwidth × pos_ratio); at the limit, sleep until enough of the
    /// writeback in flight completes, at most MAX_PAUSE, and look again at the next page.
    /// On cgroup v2 the file's memcg domain (`mdtc`, mm/cgwb.rs) is a second constraint: the
    /// writer runs free only under both freerun ceilings, polls at the shorter interval, and is
    /// throttled by the domain with the lower pos_ratio.
    fn balance_dirty_pages(&mut self, ctx: &mut Ctx, p: usize, region: usize) {
        let fs = self.fs_of_region(region);
        let pages_dirtied = self.dirty.nr_dirtied[p];
        self.dirty.nr_dirtied[p] = 0;
        let (bg, thresh) = self.dirty_limits();
        let dirty = self.nr_dirty_domain();
        let freerun = (thresh + bg) / 2;
        let mdtc = self
            .cgwb_memcg(region)
            .map(|m| self.mdtc(m, true, self.global_dirtyable_memory(), dirty));
        if dirty > bg || mdtc.is_some_and(|d| !d.freerun()) {
            // wb_start_background_writeback (of the memcg's wb once over its freerun ceiling).
            self.wb_wakeup(fs, ctx.now);
        }
        if dirty <= freerun && mdtc.is_none_or(|d| d.freerun()) {
            self.dirty.nr_dirtied_pause[p] = mdtc.map_or(dirty_poll_interval(dirty, thresh), |d| {
                dirty_poll_interval(dirty, thresh).min(dirty_poll_interval(d.dirty, d.thresh))
            });
            return;
        }
        let setpoint = (freerun + thresh) / 2;
        let g_pos = pos_ratio_1024(setpoint, dirty, thresh);
        // sdtc: the memcg domain when its pos_ratio is the lower.
        let (pos, dirty, thresh, by_memcg) = match mdtc {
            Some(d) => {
                let m_setpoint = (d.freerun_ceiling() + d.thresh) / 2;
                let m_pos = pos_ratio_1024(m_setpoint, d.dirty, d.thresh);
                if m_pos < g_pos {
                    (m_pos, d.dirty, d.thresh, true)
                } else {
                    (g_pos, dirty, thresh, false)
                }
            }
            None => (g_pos, dirty, thresh, false),
        };
        // The memcg domain's pauses are the kernel's wb_max_pause for its wb (mm/cgwb.rs);
        // the global domain keeps MAX_PAUSE.
        let max_pause = if by_memcg {
            let bw = self.fs[fs].bdev.model.write_bytes_per_s / PAGE_SIZE;
            super::cgwb::wb_max_pause_jiffies(dirty, bw) * JIFFY_NS
        } else {
            MAX_PAUSE_NS
        };
        let until = if pos > 0 {
            let bw = self.fs[fs].bdev.model.write_bytes_per_s.max(PAGE_SIZE);
            let rate = (bw / PAGE_SIZE * pos / 1024).max(1);
            // The kernel aims at pauses of ~HZ/100 (dirty_ratelimit × pause); a 32-page
            // batch stands for it.
            self.dirty.nr_dirtied_pause[p] = 32;
            later(
                ctx.now,
                (pages_dirtied * NSEC_PER_SEC / rate).min(max_pause),
            )
        } else {
            // At the limit: sleep until `dirty − thresh + 1` of the writes in flight complete
            // (at least a jiffy, at most MAX_PAUSE), then return to user space: the next page
            // dirtied looks again. The kernel loops inside balance_dirty_pages; returning
            // lets the flusher's events run while this task sleeps.
            let need = (dirty - thresh + 1) as usize;
            if by_memcg {
                // The memcg wb woken above submits before the writer looks at what is in
                // flight (a small domain is written in one flusher chunk).
                self.run_flushers_until(ctx.now);
            }
            let inflight = &self.fs[fs].bdev.inflight;
            let max = later(ctx.now, max_pause);
            self.dirty.nr_dirtied_pause[p] = 1;
            inflight
                .get(need - 1)
                .or(inflight.back())
                .map_or(max, |&(t, _)| t)
                .clamp(later(ctx.now, JIFFY_NS), max)
        };
        // trace_balance_dirty_pages: one per sleep.
        self.dirty.throttled += 1;
        let start = ctx.now;
        self.io_schedule_until(ctx, until);
        self.latency(ctx, crate::latency::Kind::Throttle, ctx.now - start);
        self.complete_io_until(ctx.now);
    }

    /// folio_clear_dirty_for_io + __folio_start_writeback + submit: the folio leaves the
    /// dirty tag, its PTEs are write-protected (a store faults again), and it goes to the
    /// filesystem's device at the page's file offset: as the first of a bio of `bio_pages`
    /// folios, or with 0 added to the bio of the folio written just before it
    /// (ext4_bio_write_folio, iomap: consecutive folios of one writepages call share a bio;
    /// `bio_submit_ns` once per bio).
    pub(crate) fn writeback_file_folio(&mut self, ctx: &mut Ctx, i: u32, bio_pages: usize) {
        let region = self.region_index(i);
        let (fs, dev_off, base) = {
            let r = &self.regions[region];
            let f = r.file.as_ref().expect("a file region");
            (f.fs as usize, f.dev_off, r.base)
        };
        let p = &mut self.pages[i as usize];
        debug_assert!(p.has(pg::DIRTY) && !p.has(pg::WRITEBACK));
        p.clear(pg::DIRTY);
        p.set(pg::WRITEBACK);
        self.dirty.nr_file_dirty -= 1;
        self.dirty.nr_file_writeback += 1;
        let inode = self.inode(region);
        inode.dirty.remove(&i);
        inode.nr_writeback += 1;
        if inode.dirty.is_empty() {
            inode.dirtied_when = None;
        }
        self.vm.pgpgout += self.fs[fs].bdev.pgpg_kib(PAGE_SIZE);
        if bio_pages > 0 {
            ctx.cpu(self.costs.bio_submit_ns);
        }
        let dev = self.fs_dev(fs);
        self.submit_bio_page(
            ctx,
            dev,
            Dir::Write,
            (dev_off + (i - base) as u64) as u32,
            i,
            bio_pages,
        );
    }

    /// writeback_sb_inodes → do_writepages → write_cache_pages for one inode (WB_SYNC_NONE,
    /// range_cyclic): up to `nr` dirty folios not under writeback, from writeback_index on,
    /// wrapping once. Returns the number written.
    fn writeback_inode(&mut self, ctx: &mut Ctx, region: usize, nr: u64) -> u64 {
        let (start, base, end) = {
            let r = &self.regions[region];
            let f = r.file.as_ref().expect("a file region");
            (f.wb.writeback_index.max(r.base), r.base, r.base + r.pages)
        };
        let mut picked = Vec::new();
        {
            let d = &self.regions[region]
                .file
                .as_ref()
                .expect("a file region")
                .wb
                .dirty;
            for &j in d.range(start..end).chain(d.range(base..start)) {
                if picked.len() as u64 >= nr {
                    break;
                }
                // WB_SYNC_NONE skips a folio still under writeback (redirtied meanwhile).
                if !self.pages[j as usize].has(pg::WRITEBACK) {
                    picked.push(j);
                }
            }
        }
        // One bio per run of consecutive folios, at most BIO_MAX_VECS of them (order-0 folios:
        // one bio_vec each).
        let mut left = 0;
        for (k, &j) in picked.iter().enumerate() {
            let same_bio = left > 0 && picked[k - 1] + 1 == j;
            let bio_pages = if same_bio {
                0
            } else {
                // The new bio: this folio and the consecutive ones after it, at most BIO_MAX_VECS.
                let n = 1 + picked[k..]
                    .windows(2)
                    .take_while(|w| w[0] + 1 == w[1])
                    .count();
                left = n.min(BIO_MAX_VECS);
                left
            };
            left -= 1;
            // Delayed allocation of a block the file does not have yet (mm/journal.rs).
            self.ext4_map_blocks(region, (j - base) as u64);
            self.writeback_file_folio(ctx, j, bio_pages);
        }
        if let Some(&last) = picked.last() {
            let next = if last + 1 >= end { base } else { last + 1 };
            self.inode(region).writeback_index = next;
        }
        picked.len() as u64
    }

    /// The file region of filesystem `fs` with the oldest dirtied_when (the b_io order),
    /// optionally only inodes dirtied at or before `older_than`.
    fn oldest_dirty_inode(&self, fs: usize, older_than: Option<Time>) -> Option<usize> {
        self.oldest_dirty_inode_where(fs, |_, when| older_than.is_none_or(|t| when <= t))
    }

    /// The dirty file region of filesystem `fs` with the oldest dirtied_when among those
    /// `keep(region, dirtied_when)` accepts (the b_io order of a wb's inodes).
    pub(crate) fn oldest_dirty_inode_where(
        &self,
        fs: usize,
        keep: impl Fn(usize, Time) -> bool,
    ) -> Option<usize> {
        self.regions
            .iter()
            .enumerate()
            .filter_map(|(k, r)| {
                let f = r.file.as_ref()?;
                let when = f.wb.dirtied_when?;
                (f.fs as usize == fs && keep(k, when)).then_some((when, k))
            })
            .min()
            .map(|(_, k)| k)
    }

    /// wb_workfn → wb_do_writeback (fs/fs-writeback.c, 6.18), one chunk of MIN_WRITEBACK_PAGES
    /// per event, its work in the kernel's order: a start_all request (wb_check_start_all),
    /// else kupdate writeback of inodes dirtied more than dirty_expire_interval ago, at most
    /// every dirty_writeback_interval (wb_check_old_data_flush), else background writeback
    /// while over the background threshold (wb_check_background_flush). With work left the
    /// flusher runs again at its own clock; otherwise, with dirty pages left, after
    /// dirty_writeback_interval (wb_wakeup_delayed).
    ///
    /// start_all: when the flusher takes the request it sizes the work, get_nr_dirty_pages()
    /// at that moment, and notes its start (wb_writeback's `dirtied_before`); it then writes
    /// inodes dirtied before that start, oldest first, through pages dirtied meanwhile (the
    /// dirty tag is live: a writer ahead of the flusher is followed), until it has written
    /// that many pages or no such inode has dirty pages left (it caught up); then WB_start_all
    /// is cleared and reclaim's next wakeup_flusher_threads starts another.
    /// Simplified: writeback_chunk_size's chunk (half the estimated write bandwidth, at most
    /// dirty_limit / DIRTY_SCOPE) is the event's MIN_WRITEBACK_PAGES; inodes take turns
    /// oldest first instead of through b_io / b_more_io.
    pub fn wb_workfn(&mut self, ctx: &mut Ctx, fs: usize) {
        self.fs[fs].wb.scheduled = None;
        let mut written = 0;
        self.blk_start_plug();
        if self.fs[fs].wb.start_all_pending {
            let (left, since) = match self.fs[fs].wb.start_all {
                Some(work) => work,
                None => (self.get_nr_dirty_pages(), ctx.now),
            };
            if let Some(r) = self.oldest_dirty_inode(fs, Some(since)) {
                written = self.writeback_inode(ctx, r, left.min(MIN_WRITEBACK_PAGES));
            }
            let left = left - written.min(left);
            if written == 0 || left == 0 {
                // wb_check_start_all: the work is done; clear_bit(WB_start_all).
                self.fs[fs].wb.start_all = None;
                self.fs[fs].wb.start_all_pending = false;
            } else {
                self.fs[fs].wb.start_all = Some((left, since));
            }
        }
        if written == 0 {
            // The memcg wbs' background writeback (cgroup v2, mm/cgwb.rs): wb_over_bg_thresh
            // on each one's memcg domain, its own inodes oldest first.
            for m in self.cgwb_memcgs(fs) {
                let over = self.memcg_over_bg_thresh(m);
                if over > 0 {
                    if let Some(r) = self.oldest_dirty_inode_of(fs, m) {
                        written = self.writeback_inode(ctx, r, over.min(MIN_WRITEBACK_PAGES));
                        break;
                    }
                }
            }
        }
        if written == 0 {
            let interval = self.knobs.vm.dirty_writeback_centisecs as u64 * 10 * NSEC_PER_MSEC;
            if interval > 0 && ctx.now >= later(self.fs[fs].wb.last_old_flush, interval) {
                let expire = self.knobs.vm.dirty_expire_centisecs as u64 * 10 * NSEC_PER_MSEC;
                let older_than = ctx.now.checked_sub(expire);
                if let Some(r) = older_than.and_then(|t| self.oldest_dirty_inode(fs, Some(t))) {
                    written = self.writeback_inode(ctx, r, MIN_WRITEBACK_PAGES);
                }
                if written == 0 {
                    self.fs[fs].wb.last_old_flush = ctx.now;
                }
            }
        }
        if written == 0 {
            let (bg, _) = self.dirty_limits();
            if self.nr_dirty_domain() > bg {
                if let Some(r) = self.oldest_dirty_inode(fs, None) {
                    let over = self.nr_dirty_domain() - bg;
                    written = self.writeback_inode(ctx, r, over.min(MIN_WRITEBACK_PAGES));
                }
            }
        }
        self.blk_finish_plug(ctx);
        self.fs[fs].wb.clock = ctx.now;
        if written > 0 {
            self.wb_queue(fs, ctx.now);
        } else if self.fs_dirty_pages(fs) > 0 {
            self.wb_wakeup_delayed(fs, ctx.now);
        }
    }

    /// Run every flusher whose work is due by `t`, a running thread's own clock (which runs
    /// ahead of the event queue within its time slice): the flusher threads run on other
    /// CPUs meanwhile, so a thread that looks (reclaim) or sleeps (throttling) finds their
    /// writeback submitted, as `complete_io_until` finds IO completed. The queued Flusher
    /// events then find another time scheduled and do nothing. The caller's plug is set
    /// aside: the flusher has its own.
    pub(crate) fn run_flushers_until(&mut self, t: Time) {
        if self.fs.is_empty() {
            return;
        }
        let saved = std::mem::take(&mut self.plug);
        for fs in 0..self.fs.len() {
            while let Some(at) = self.fs[fs].wb.scheduled.filter(|&at| at <= t) {
                let mut ctx = Ctx::new(at.max(self.fs[fs].wb.clock), super::Actor::Flusher, 1024);
                self.wb_workfn(&mut ctx, fs);
            }
        }
        self.plug = saved;
    }

    /// folio_end_writeback for a page cache folio: NR_WRITEBACK down, NR_WRITTEN up, and a
    /// PG_reclaim folio rotates to the inactive tail (folio_rotate_reclaimable, pgrotated),
    /// to be freed by the next scan (the seed's immediate reclaim).
    pub(crate) fn end_file_writeback(&mut self, i: u32) {
        if !self.pages[i as usize].has(pg::WRITEBACK) {
            return;
        }
        let region = self.region_index(i);
        self.dirty.nr_file_writeback -= 1;
        self.vm_file.nr_written += 1;
        self.inode(region).nr_writeback -= 1;
        // The rotation is the swap path's (same flags, same lists).
        self.end_swap_writeback(i);
    }

    /// Complete block device `dev`'s writes due by `t`.
    pub(crate) fn complete_dev_until(&mut self, dev: usize, t: Time) {
        let n = self.swap.devs.len();
        loop {
            let bdev = if dev < n {
                &mut self.swap.devs[dev].bdev
            } else {
                &mut self.fs[dev - n].bdev
            };
            let Some(&(done, page)) = bdev.inflight.front() else {
                break;
            };
            if done > t {
                break;
            }
            bdev.inflight.pop_front();
            if dev < n {
                self.end_swap_writeback(page);
            } else {
                self.end_file_writeback(page);
            }
        }
    }

    /// Wait for writeback of page `i` of filesystem `fs` (folio_wait_writeback): complete the
    /// device's writes in order up to and including it, sleeping until each is done.
    pub(crate) fn wait_on_file_writeback(&mut self, ctx: &mut Ctx, fs: usize, i: u32) {
        self.blk_flush_plug(ctx.now);
        while self.pages[i as usize].has(pg::WRITEBACK) {
            let Some((done, page)) = self.fs[fs].bdev.inflight.pop_front() else {
                break;
            };
            self.psi_sleep(ctx, done);
            self.end_file_writeback(page);
        }
    }

    /// vfs_fsync → file_write_and_wait_range (WB_SYNC_ALL over the whole file): wait for
    /// folios already under writeback, write every dirty folio, then wait for all of them.
    pub fn vfs_fsync(&mut self, ctx: &mut Ctx, region: usize) {
        let fs = self.fs_of_region(region);
        let dev = self.fs_dev(fs);
        self.wait_inode_writeback(ctx, region, fs);
        self.blk_start_plug();
        loop {
            let n = self.writeback_inode(ctx, region, u64::MAX);
            if n == 0 {
                break;
            }
        }
        self.blk_finish_plug(ctx);
        self.wait_inode_writeback(ctx, region, fs);
        self.complete_dev_until(dev, ctx.now);
        // ext4_sync_file: then the journal (mm/journal.rs).
        self.ext4_fsync_journal(ctx, region);
        self.complete_dev_until(dev, ctx.now);
    }

    /// filemap_fdatawait: sleep until no folio of the file is under writeback.
    fn wait_inode_writeback(&mut self, ctx: &mut Ctx, region: usize, fs: usize) {
        self.blk_flush_plug(ctx.now);
        while self.inode(region).nr_writeback > 0 {
            let Some((done, page)) = self.fs[fs].bdev.inflight.pop_front() else {
                break;
            };
            self.psi_sleep(ctx, done);
            self.end_file_writeback(page);
        }
    }

    /// Gauges of the dirty state: (file pages dirty, pages under writeback of any kind).
    pub fn nr_dirty_writeback(&self) -> (u64, u64) {
        let mut dirty = 0;
        let mut wb = 0;
        for p in &self.pages {
            if p.flags & (pg::FILE | pg::RESIDENT | pg::DIRTY)
                == pg::FILE | pg::RESIDENT | pg::DIRTY
            {
                dirty += 1;
            }
            if p.flags & (pg::RESIDENT | pg::WRITEBACK) == pg::RESIDENT | pg::WRITEBACK {
                wb += 1;
            }
        }
        (dirty, wb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pos_ratio_is_the_kernels_cubic() {
        // 2 at freerun (setpoint − (limit − setpoint)), 1 at the setpoint, 0 at the limit.
        assert_eq!(pos_ratio_1024(1000, 1000, 1500), 1024);
        assert_eq!(pos_ratio_1024(1000, 500, 1500), 2048);
        assert_eq!(pos_ratio_1024(1000, 1500, 1500), 0);
        assert_eq!(pos_ratio_1024(1000, 1250, 1500), 1024 - 128);
    }

    /// A machine of 512 MiB with one process in cgroup `/t` and a 1000-page file on ext4 (its
    /// region 1); nothing has run.
    fn file_machine() -> (crate::Simulation, usize) {
        let dev = serde_json::json!({"rotational": false, "read_latency_ns": 100000,
            "write_latency_ns": 100000, "read_bytes_per_s": 200_000_000u64,
            "write_bytes_per_s": 200_000_000u64, "max_sectors_kb": 512});
        let cfg = serde_json::json!({
            "seed": 7,
            "machine": {"memory_bytes": 512u64 << 20, "cpus": 2,
                "filesystems": [{"name": "data", "fstype": "ext4", "device": dev}]},
            "kernel": {"version": "6.18"},
            "cgroups": {"version": 1, "groups": [
                {"path": "/", "parent": null, "limit_bytes": null, "high_bytes": null, "swappiness": null, "zswap_max_bytes": null, "zswap_writeback": true},
                {"path": "/t", "parent": 0, "limit_bytes": null, "high_bytes": null, "swappiness": null, "zswap_max_bytes": null, "zswap_writeback": true}]},
            "processes": [{"name": "p", "cgroup": 1, "regions": [
                {"name": "heap", "pages": 16, "content": "text", "variants": 64},
                {"name": "f", "pages": 1000, "content": "text", "variants": 64, "file": 0}],
                "phases": [{"name": "fill0", "phase": {"kind": "fill", "region": 0}}]}],
        });
        let cfg = crate::config_from_json(&cfg.to_string()).expect("valid config");
        let sim = crate::Simulation::new(&cfg).expect("simulation builds");
        let r = sim
            .mm()
            .regions
            .iter()
            .position(|r| r.file.is_some())
            .expect("a file region");
        (sim, r)
    }

    #[test]
    fn start_all_is_sized_when_the_flusher_runs_and_ends_where_it_caught_up() {
        let (mut sim, r) = file_machine();
        let mm = sim.mm_mut();
        let base = mm.regions[r].base;
        let mut ctx = Ctx::new(0, crate::mm::Actor::Process(0), 1024);
        let write = |mm: &mut Mm, ctx: &mut Ctx, pages: std::ops::Range<u32>| {
            for k in pages {
                mm.generic_perform_write(ctx, base + k).expect("no OOM");
            }
        };
        write(mm, &mut ctx, 0..100);
        mm.wakeup_flusher_threads(ctx.now);
        assert!(mm.fs[0].wb.start_all_pending);
        // Pages dirtied between the wakeup and the flusher's run are in its work
        // (wb_check_start_all counts get_nr_dirty_pages() then, not at the wakeup).
        write(mm, &mut ctx, 100..150);
        let mut fl = Ctx::new(ctx.now, crate::mm::Actor::Flusher, 1024);
        mm.wb_workfn(&mut fl, 0);
        assert_eq!(
            (mm.dirty.nr_file_dirty, mm.dirty.nr_file_writeback),
            (0, 150)
        );
        // It wrote all the file had (150 pages, less than its 151: the one inode in use
        // counts too) and the inode is clean. Pages dirtied from now on make the inode dirty
        // after the work's start: not this work's (wb_writeback's dirtied_before). It ends, and
        // reclaim's next wakeup starts another, which writes them.
        let mut ctx = Ctx::new(fl.now + 1, crate::mm::Actor::Process(0), 1024);
        write(mm, &mut ctx, 150..160);
        let mut fl = Ctx::new(ctx.now, crate::mm::Actor::Flusher, 1024);
        mm.wb_workfn(&mut fl, 0);
        assert_eq!(mm.dirty.nr_file_dirty, 10);
        assert!(!mm.fs[0].wb.start_all_pending && mm.fs[0].wb.start_all.is_none());
        mm.wakeup_flusher_threads(fl.now);
        mm.wb_workfn(&mut fl, 0);
        assert_eq!(mm.dirty.nr_file_dirty, 0);
    }

    #[test]
    fn poll_interval_is_sqrt_of_headroom() {
        assert_eq!(dirty_poll_interval(0, 1 << 16), 256);
        assert_eq!(dirty_poll_interval(100, 100), 1);
        assert_eq!(dirty_poll_interval(0, 3), 1);
    }
}
