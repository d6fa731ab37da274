//! The page cache of file regions: mm/filemap.c (filemap_read, filemap_fault,
//! filemap_map_pages, filemap_add_folio), mm/readahead.c (page_cache_sync_ra,
//! page_cache_async_ra, page_cache_ra_unbounded, get_init_ra_size, get_next_ra_size), the
//! mmap read-around of do_sync_mmap_readahead, and folio_mark_accessed (mm/swap.c), as of 6.18.
//! Kernel text read: mm/readahead.c as stored (an older version with ondemand_readahead; 6.10
//! split it into page_cache_sync_ra/page_cache_async_ra with the same window arithmetic, which
//! is what this follows).
//!
//! A file region is one file of its process on a named filesystem, read with read(2) one page
//! per call (`read` phases) or through a shared mapping (`mmap` phases). Its pages are page
//! cache folios while RESIDENT, on the memcg's file LRUs, charged to the process's memcg;
//! they stay cached (and charged) after the process exits, as the kernel's do.
//!
//! ra_pages is the file's device's `read_ahead_kb` (file_ra_state_init copies the bdi's
//! ra_pages, which is the queue's read_ahead_kb), VM_READAHEAD_PAGES (128 KiB) when the device
//! model leaves it out; a read window larger than the device's max_sectors_kb is split into
//! requests by the block layer (crate::block).
//!
//! Large folios (6.18: page_cache_ra_order, ra->order): on a filesystem whose mapping supports
//! them (ext4 since 6.16, xfs since 5.18: the `filemap.large_folios_*` switches) a read(2)
//! stream's readahead allocates folios of up to the order its window reached: the first window
//! order 0, every async window two orders more (ra->order += 2), capped by ilog2 of the window
//! and MAX_PAGECACHE_ORDER, naturally aligned, the window's end trimmed to that alignment. A
//! 2560 KiB read_ahead_kb reaches orders 7–9 after ~400 pages. The page, not the folio, stays
//! the unit of the page arena, the LRUs and reclaim (each page carries its folio's order,
//! `Page::folio_order`); the folio groups the work the kernel does once per folio: the page
//! cache insertion (`pagecache_add_ns`), the memcg charge and its v1 `pgpgin` event, the
//! reclaim of a clean folio (`reclaim_file_folio_ns`, shared by its pages) and its v1 `pgpgout`
//! event (counted at the folio's first page). Reclaim isolates a large folio whole, as
//! isolate_lru_folios does (shrink_inactive_list takes the folio's other pages on the same
//! list with the tail page and counts them all toward its batch: a 32-page reclaim call
//! frees a 128-page folio at once). What this simplifies: the kernel's folio is one LRU entry
//! whose references are checked once (a referenced page keeps all its pages); the model
//! checks each page, so a folio one of whose pages was activated alone splits.
//! mmap read-around and write(2) make order-0 folios (6.18's do_sync_mmap_readahead sets
//! ra->order 0; a 4 KiB write gets an order-0 folio from filemap_get_order). The window trim
//! and the ramp follow 6.18 also where an older preset enables xfs's large folios.
//!
//! Simplified: one open file per file region (one `file_ra_state`); no mmap_miss accounting
//! (MMAP_LOTSAMISS never stops read-around); no context readahead for interleaved streams;
//! readahead allocations reclaim like any page cache allocation (the kernel's
//! readahead_gfp_mask adds __GFP_NORETRY) and a readahead page that cannot be had ends the
//! window; files are laid out contiguously on their device, one after another.

use super::journal::{Ext4Geometry, InodeJournal, Jbd2};
use super::page::{list, pg, Page, PAGE_SIZE};
use super::page_writeback::{InodeWb, Wb};
use super::{Ctx, Mm, Oom};
use crate::block::{BlockDevice, Dir};
use crate::config::Filesystem as FsConfig;
use crate::error::{ConfigError, Result};
use crate::sim::Time;

/// VM_READAHEAD_PAGES (128 KiB): the default read_ahead_kb of a block device, file->f_ra->
/// ra_pages of a file on a device whose model does not give its own.
pub const RA_PAGES: u64 = (128 * 1024) / PAGE_SIZE;
/// fault_around_bytes (64 KiB): a read fault maps the cached pages of this aligned window.
pub const FAULT_AROUND_PAGES: u64 = (64 * 1024) / PAGE_SIZE;
/// MAX_PAGECACHE_ORDER on x86-64 with 4 KiB pages (HPAGE_PMD_ORDER), which is also ext4's
/// EXT4_MAX_PAGECACHE_ORDER with 4 KiB blocks: a 2 MiB folio.
pub const MAX_PAGECACHE_ORDER: u32 = 9;

/// The filesystem type: how it answers reclaim's writepage (seed 001) differs per type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsType {
    Ext4,
    Xfs,
    Btrfs,
}

impl FsType {
    pub const NAMES: [&'static str; 3] = ["ext4", "xfs", "btrfs"];

    /// Whether ->writepage, called by reclaim's pageout, writes the folio (or redirties it
    /// and returns 0, which pageout still counts as a write), as the seed describes the
    /// filesystems of its time: xfs writes when the caller is kswapd and redirties for direct
    /// reclaim; ext4 redirties delayed-allocation folios, which every folio dirtied through
    /// write(2) or a mapping is with delalloc (the default); btrfs redirties every reclaim
    /// request.
    pub fn writepage_from_reclaim(self, kswapd: bool) -> bool {
        match self {
            FsType::Xfs => kswapd,
            FsType::Ext4 | FsType::Btrfs => false,
        }
    }

    /// Whether fsync(2) commits a jbd2 journal after the data (mm/journal.rs): ext4 with its
    /// default journal. xfs's log force (xfs_file_fsync → xfs_log_force_seq) and btrfs's log
    /// tree (btrfs_sync_log) are not modelled: their fsync writes and waits for the data only.
    pub fn jbd2(self) -> bool {
        match self {
            FsType::Ext4 => true,
            FsType::Xfs | FsType::Btrfs => false,
        }
    }

    fn parse(s: &str) -> Option<FsType> {
        match s {
            "ext4" => Some(FsType::Ext4),
            "xfs" => Some(FsType::Xfs),
            "btrfs" => Some(FsType::Btrfs),
            _ => None,
        }
    }
}

/// A mounted filesystem and the block device under it.
pub struct Filesystem {
    pub name: String,
    pub fstype: FsType,
    pub bdev: BlockDevice,
    /// Its bdi_writeback: the flusher (mm/page_writeback.rs).
    pub wb: Wb,
    /// Its jbd2 journal, if its type has one (mm/journal.rs).
    pub journal: Jbd2,
}

impl Filesystem {
    /// The block-device filesystems of the lowered `machine.filesystems`, in order (tmpfs
    /// entries are mm/shmem.rs's).
    pub(crate) fn from_config(fss: &[FsConfig]) -> Result<Vec<Filesystem>> {
        let mut out = Vec::new();
        for (k, f) in fss.iter().enumerate() {
            if f.fstype == super::shmem::TMPFS {
                continue;
            }
            let fstype = FsType::parse(&f.fstype).ok_or_else(|| {
                ConfigError::unknown(
                    format!("machine.filesystems[{k}].fstype"),
                    format!(
                        "unknown filesystem type {:?} (expected one of {}, {})",
                        f.fstype,
                        FsType::NAMES.join(", "),
                        super::shmem::TMPFS
                    ),
                )
            })?;
            let Some(device) = f.device.clone() else {
                return Err(ConfigError::invalid(
                    format!("machine.filesystems[{k}].device"),
                    format!("required for a {} filesystem", f.fstype),
                ));
            };
            if f.size_bytes.is_some() {
                return Err(ConfigError::invalid(
                    format!("machine.filesystems[{k}].size_bytes"),
                    format!(
                        "only a tmpfs has a size; a {} filesystem has its device's",
                        f.fstype
                    ),
                ));
            }
            let geom = f
                .image_bytes
                .map_or_else(Ext4Geometry::default, Ext4Geometry::mke2fs);
            out.push(Filesystem {
                name: f.name.clone(),
                fstype,
                bdev: BlockDevice::new(device).with_backing(f.backing.unwrap_or_default()),
                wb: Wb::default(),
                journal: Jbd2::new(geom),
            });
        }
        Ok(out)
    }
}

/// Per file region: where its file lives and its open file's readahead state (file->f_ra).
#[derive(Clone, Debug)]
pub struct FileState {
    pub fs: u16,
    /// Device offset (pages) of the file's first page.
    pub dev_off: u64,
    /// file_ra_state: start, size, async_size of the last readahead window.
    pub ra_start: u64,
    pub ra_size: u64,
    pub ra_async: u64,
    /// ra->order: the folio order readahead asks for next (large folios only).
    pub ra_order: u32,
    /// ra->prev_pos >> PAGE_SHIFT of the last read(2), None before the first.
    pub prev_index: Option<u64>,
    /// Page reads in flight. A folio is locked until its read completes; an access before
    /// that waits (folio_wait_locked).
    pub pending: ReadsInFlight,
    /// The inode's dirty pages and writeback state (mm/page_writeback.rs).
    pub wb: InodeWb,
    /// What the filesystem's journal needs of the inode (mm/journal.rs).
    pub journal: InodeJournal,
}

impl FileState {
    pub fn new(fs: u16, dev_off: u64) -> FileState {
        FileState {
            fs,
            dev_off,
            ra_start: 0,
            ra_size: 0,
            ra_async: 0,
            ra_order: 0,
            prev_index: None,
            pending: ReadsInFlight::default(),
            wb: InodeWb::default(),
            journal: InodeJournal::default(),
        }
    }
}

/// The page reads of a file in flight: (page, done) in the order issued, and what makes the
/// two questions asked on every access cheap (folio_wait_locked runs per read(2) and fault):
/// which read of a page came first (a binary search while the pages were issued in strictly
/// increasing order, as readahead windows are; a scan otherwise), and which reads have
/// completed (none before the earliest completion; a prefix, dropped in one step, while the
/// completions come in the order issued, as one device's do). A read handed over again (the
/// same page and time) is kept once.
#[derive(Debug, Clone)]
pub struct ReadsInFlight {
    /// The reads are `reads[head..]`; those before `head` are forgotten.
    reads: Vec<(u32, Time)>,
    head: usize,
    /// The earliest `done` among the reads (Time::MAX when there are none).
    min_done: Time,
    /// The reads' pages strictly increase: each page has at most one read, found by bisection.
    sorted: bool,
    /// The reads' `done` times never decrease: the completed ones are a prefix.
    in_order: bool,
    /// Where the last read handed over again was found.
    again: usize,
}

impl Default for ReadsInFlight {
    fn default() -> Self {
        ReadsInFlight {
            reads: Vec::new(),
            head: 0,
            min_done: Time::MAX,
            sorted: true,
            in_order: true,
            again: 0,
        }
    }
}

impl ReadsInFlight {
    fn live(&self) -> &[(u32, Time)] {
        &self.reads[self.head..]
    }

    /// When the first read of page `j` issued (and not yet forgotten) completes.
    fn first(&self, j: u32) -> Option<Time> {
        self.find(j).map(|k| self.reads[k].1)
    }

    /// Where in `reads` the first read of page `j` (not yet forgotten) is.
    fn find(&self, j: u32) -> Option<usize> {
        let live = self.live();
        let k = if self.sorted {
            // The reader's next page is usually the oldest read, or past the newest.
            match (live.first(), live.last()) {
                (Some(&(p, _)), _) if p == j => Some(0),
                (Some(&(p, _)), Some(&(q, _))) if p < j && j <= q => {
                    live.binary_search_by_key(&j, |&(p, _)| p).ok()
                }
                _ => None,
            }
        } else {
            live.iter().position(|&(p, _)| p == j)
        };
        k.map(|k| self.head + k)
    }

    /// Forget the reads done by `now` (the others keep their order).
    fn forget_done(&mut self, now: Time) {
        if now < self.min_done {
            return;
        }
        if self.in_order {
            // Usually only the first few have completed.
            while self.head < self.reads.len() && self.reads[self.head].1 <= now {
                self.head += 1;
            }
            if self.head == self.reads.len() {
                self.reads.clear();
                self.head = 0;
            } else if self.head >= 64 && self.head * 2 >= self.reads.len() {
                self.reads.drain(..self.head);
                self.head = 0;
            }
            self.min_done = self.live().first().map_or(Time::MAX, |&(_, t)| t);
            return;
        }
        self.reads.drain(..self.head);
        self.head = 0;
        self.reads.retain(|&(_, t)| t > now);
        self.min_done = self
            .reads
            .iter()
            .map(|&(_, t)| t)
            .min()
            .unwrap_or(Time::MAX);
        self.sorted = self.reads.windows(2).all(|w| w[0].0 < w[1].0);
        self.in_order = self.reads.windows(2).all(|w| w[0].1 <= w[1].1);
    }

    fn push(&mut self, page: u32, done: Time) {
        // A read the same as one already here changes nothing (whichever is found first
        // has the same time, and both are forgotten at once); readahead hands each of its
        // reads over twice (as submitted, and again as its plug finishes).
        // The reads handed over again come in the order of the first time: try the one after
        // the last found first.
        let next = self.again + 1;
        let same = if next >= self.head && self.reads.get(next) == Some(&(page, done)) {
            Some(next)
        } else {
            self.find(page).filter(|&k| self.reads[k].1 == done)
        };
        if let Some(k) = same {
            self.again = k;
            return;
        }
        match self.live().last() {
            Some(&(p, t)) => {
                self.sorted &= p < page;
                self.in_order &= t <= done;
            }
            None => {
                self.sorted = true;
                self.in_order = true;
            }
        }
        self.min_done = self.min_done.min(done);
        self.reads.push((page, done));
    }
}

/// get_init_ra_size: the first window of a sequential stream, from the request size.
fn get_init_ra_size(size: u64, max: u64) -> u64 {
    let newsize = size.next_power_of_two();
    if newsize <= max / 32 {
        newsize * 4
    } else if newsize <= max / 4 {
        newsize * 2
    } else {
        max
    }
}

/// get_next_ra_size: ramp the window up (×4 while small, then ×2), at most `max`.
fn get_next_ra_size(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        (4 * cur).min(max)
    } else {
        (2 * cur).min(max)
    }
}

impl Mm {
    /// Whether the machine has file pages at all (a filesystem or a tmpfs): file counters
    /// are exported only then.
    pub fn has_files(&self) -> bool {
        !self.fs.is_empty() || !self.tmpfs.is_empty()
    }

    pub(super) fn file_of(&self, i: u32) -> (usize, u64) {
        let region = self.region_index(i);
        (region, (i - self.regions[region].base) as u64)
    }

    /// file->f_ra->ra_pages of file region `region`: its device's read_ahead_kb in pages
    /// (0: no readahead, each miss reads its page alone).
    fn ra_pages(&self, region: usize) -> u64 {
        let fs = self.regions[region]
            .file
            .as_ref()
            .expect("a file region")
            .fs as usize;
        self.fs[fs]
            .bdev
            .model
            .read_ahead_kb
            .map_or(RA_PAGES, |kb| kb as u64 * 1024 / PAGE_SIZE)
    }

    /// mapping_large_folio_support for file region `region`'s file: per filesystem type and
    /// kernel (the `filemap.large_folios_*` switches; btrfs's are experimental in 6.18, off).
    fn large_folios(&self, region: usize) -> bool {
        let fs = self.regions[region]
            .file
            .as_ref()
            .expect("a file region")
            .fs as usize;
        match self.fs[fs].fstype {
            FsType::Ext4 => self.switches.large_folios_ext4,
            FsType::Xfs => self.switches.large_folios_xfs,
            FsType::Btrfs => false,
        }
    }

    fn file_state(&mut self, region: usize) -> &mut FileState {
        self.regions[region].file.as_mut().expect("a file region")
    }

    /// filemap_read for one page (a read(2) of 4 KiB at page `i`'s offset): find the folio,
    /// or read it (and a readahead window) from the device and wait; hitting a PG_readahead
    /// folio starts the next window asynchronously; then copy and folio_mark_accessed.
    pub fn filemap_read(&mut self, ctx: &mut Ctx, i: u32) -> std::result::Result<(), Oom> {
        let (region, index) = self.file_of(i);
        let hit_marker = self.pages[i as usize].flags & (pg::RESIDENT | pg::READAHEAD)
            == pg::RESIDENT | pg::READAHEAD;
        if !self.pages[i as usize].has(pg::RESIDENT) {
            // filemap_get_pages: a miss runs page_cache_sync_ra (req_count 1).
            let prev = self.file_state(region).prev_index;
            self.page_cache_sync_ra(ctx, region, index, prev);
            if !self.pages[i as usize].has(pg::RESIDENT) {
                // filemap_create_folio: readahead could not get the page (or reclaim for a
                // later page of the window took it again); read it alone.
                self.do_page_cache_ra(ctx, region, index, 1, 0, 0)?;
            }
        }
        if hit_marker {
            // filemap_get_pages → filemap_readahead: the next window is submitted as soon as
            // the reader finds the PG_readahead folio in the cache, before it waits for that
            // folio's own read (filemap_update_page), so a reader faster than the device
            // keeps two windows in flight.
            self.page_cache_async_ra(ctx, region, index, i);
            if !self.pages[i as usize].has(pg::RESIDENT) {
                // The kernel holds a reference on the folio across the readahead, which keeps
                // reclaim from taking it; the model has none, so a folio that reclaim for the
                // new window took is read again.
                self.do_page_cache_ra(ctx, region, index, 1, 0, 0)?;
            }
        }
        self.folio_wait_locked(ctx, region, i);
        ctx.cpu(self.costs.read_page_ns);
        self.file_state(region).prev_index = Some(index);
        self.folio_mark_accessed(i);
        Ok(())
    }

    /// A fault on a page of a shared file mapping. A read (do_read_fault) maps the cached
    /// pages around it (do_fault_around → filemap_map_pages), and if the page itself is not
    /// among them, filemap_fault: a cache miss is a major fault that reads a window around the
    /// page (do_sync_mmap_readahead's read-around); a PG_readahead hit starts the next window.
    /// A store (do_shared_fault) has no fault-around: filemap_fault, then the caller dirties
    /// the folio (fault_dirty_shared_page).
    pub fn filemap_fault(
        &mut self,
        ctx: &mut Ctx,
        i: u32,
        write: bool,
    ) -> std::result::Result<(), Oom> {
        let (region, index) = self.file_of(i);
        self.pte_alloc(ctx, i)?;
        if !write {
            self.do_fault_around(ctx, region, index);
        }
        if self.pages[i as usize].has(pg::MAPPED) {
            return Ok(());
        }
        if !self.pages[i as usize].has(pg::RESIDENT) {
            let m = self.pages[i as usize].memcg;
            self.vm.pgmajfault += 1;
            self.memcgs[m as usize].events.pgmajfault += 1;
            // do_sync_mmap_readahead, read-around: ra_pages centred on the fault, the last
            // quarter asynchronous (none without ra_pages: the page alone, below).
            let ra_pages = self.ra_pages(region);
            let start = index.saturating_sub(ra_pages / 2);
            let st = self.file_state(region);
            st.ra_start = start;
            st.ra_size = ra_pages;
            st.ra_async = ra_pages / 4;
            st.ra_order = 0;
            self.do_page_cache_ra(ctx, region, start, ra_pages, ra_pages / 4, 0)?;
            if !self.pages[i as usize].has(pg::RESIDENT) {
                self.do_page_cache_ra(ctx, region, index, 1, 0, 0)?;
            }
        }
        let hit_marker = self.pages[i as usize].has(pg::READAHEAD);
        self.folio_wait_locked(ctx, region, i);
        let p = &mut self.pages[i as usize];
        p.set(pg::MAPPED | pg::YOUNG);
        if hit_marker {
            // do_async_mmap_readahead (after mapping: see filemap_read).
            self.page_cache_async_ra(ctx, region, index, i);
        }
        Ok(())
    }

    /// do_fault_around → filemap_map_pages: map every cached, unlocked page (not marked
    /// PG_readahead) of the aligned
    /// fault_around_bytes window whose PTE is empty, within the region. x86 builds PTEs with
    /// the accessed bit set, so they are young (arch_wants_old_prefaulted_pte is false).
    pub(super) fn do_fault_around(&mut self, ctx: &mut Ctx, region: usize, index: u64) {
        let base = self.regions[region].base;
        let npages = self.regions[region].pages as u64;
        let start = index & !(FAULT_AROUND_PAGES - 1);
        let end = (start + FAULT_AROUND_PAGES).min(npages);
        let now = ctx.now;
        for x in start..end {
            let j = base + x as u32;
            let p = self.pages[j as usize];
            // next_uptodate_folio skips PG_readahead folios, so that touching one faults and
            // starts the next readahead window.
            // A tmpfs page in the swap cache is not in the file's mapping (its slot there
            // holds a swap entry, which filemap_map_pages skips).
            if !p.has(pg::RESIDENT)
                || p.has(pg::MAPPED | pg::READAHEAD | pg::SWAPCACHE)
                || self.file_locked_until(region, j).is_some_and(|t| t > now)
            {
                continue;
            }
            self.pages[j as usize].set(pg::MAPPED | pg::YOUNG);
            ctx.cpu(self.costs.access_ns);
        }
    }

    /// When page `j`'s read completes, if one is in flight.
    fn file_locked_until(&self, region: usize, j: u32) -> Option<Time> {
        self.regions[region]
            .file
            .as_ref()
            .and_then(|f| f.pending.first(j))
    }

    /// folio_wait_locked: wait for page `i`'s read if it is still in flight; forget the reads
    /// that completed.
    pub(crate) fn folio_wait_locked(&mut self, ctx: &mut Ctx, region: usize, i: u32) {
        if let Some(t) = self.file_locked_until(region, i) {
            self.io_schedule_until(ctx, t);
        }
        let now = ctx.now;
        self.file_state(region).pending.forget_done(now);
    }

    /// page_cache_sync_ra (req_count 1) on a read(2) miss at `index`: the start of the file,
    /// or a read next to the previous one, begins a sequential stream with the initial window
    /// (get_init_ra_size); any other miss reads just the page.
    fn page_cache_sync_ra(&mut self, ctx: &mut Ctx, region: usize, index: u64, prev: Option<u64>) {
        let sequential = index == 0 || prev.is_some_and(|p| index.wrapping_sub(p) <= 1);
        if !sequential {
            let _ = self.do_page_cache_ra(ctx, region, index, 1, 0, 0);
            return;
        }
        let size = get_init_ra_size(1, self.ra_pages(region));
        let async_size = if size > 1 { size - 1 } else { size };
        let st = self.file_state(region);
        st.ra_start = index;
        st.ra_size = size;
        st.ra_async = async_size;
        // readit: ra->order = 0 (6.18), then page_cache_ra_order.
        st.ra_order = 0;
        let _ = self.page_cache_ra_order(ctx, region);
    }

    /// page_cache_async_ra on a hit of PG_readahead folio `i` at `index`: clear the mark, and
    /// if it is where the last window expected it (rounded down to the marked folio),
    /// push the window forward and ramp it up. A marker elsewhere (the state was reset by a
    /// random read) starts a window there of the next size. Then (readit, 6.18) two orders
    /// more for the folios, and the window's end trimmed to their alignment (at most the
    /// lowest set bit of the largest window).
    fn page_cache_async_ra(&mut self, ctx: &mut Ctx, region: usize, index: u64, i: u32) {
        self.pages[i as usize].clear(pg::READAHEAD);
        let folio_pages = 1u64 << self.pages[i as usize].folio_order();
        let ra_pages = self.ra_pages(region);
        let st = self.file_state(region);
        let expected = (st.ra_start + st.ra_size - st.ra_async) & !(folio_pages - 1);
        if index == expected {
            st.ra_start += st.ra_size;
        } else {
            st.ra_start = index + 1;
        }
        st.ra_size = get_next_ra_size(st.ra_size.max(1), ra_pages);
        st.ra_order += 2;
        if ra_pages > 0 {
            let align = 1u64 << st.ra_order.min(ra_pages.trailing_zeros());
            let end = st.ra_start + st.ra_size;
            let aligned_end = end & !(align - 1);
            if aligned_end > st.ra_start {
                st.ra_size -= end - aligned_end;
            }
        }
        st.ra_async = st.ra_size;
        let _ = self.page_cache_ra_order(ctx, region);
    }

    /// page_cache_ra_order (6.18) for the file's current window: on a mapping with large
    /// folios and a window of at least 4 pages, folios of order min(ra->order, ilog2(size),
    /// MAX_PAGECACHE_ORDER) (recorded back in ra->order); else order 0
    /// (the fallback, do_page_cache_ra).
    fn page_cache_ra_order(
        &mut self,
        ctx: &mut Ctx,
        region: usize,
    ) -> std::result::Result<(), Oom> {
        let large = self.large_folios(region);
        let st = self.file_state(region);
        let (start, size, async_size) = (st.ra_start, st.ra_size, st.ra_async);
        let order = if large && size >= 4 {
            let o = st.ra_order.min(size.ilog2()).min(MAX_PAGECACHE_ORDER);
            st.ra_order = o;
            o
        } else {
            0
        };
        self.do_page_cache_ra(ctx, region, start, size, async_size, order)
    }

    /// page_cache_ra_unbounded (order 0) and page_cache_ra_order's folio loop (`order` > 0):
    /// allocate and add the uncached pages of [start, start + nr) within the file as folios,
    /// mark the folio holding the page `lookahead` from the end PG_readahead, and read them
    /// under a plug (read_pages), so consecutive pages merge into requests. A large folio is
    /// naturally aligned (an unaligned index gets the order of its alignment) and ends within
    /// the window; where one would cover a cached page (filemap_add_folio's -EEXIST) or
    /// cannot be had, the rest of the window falls back to order 0 (6.18's fallback to
    /// do_page_cache_ra). Stops at the first order-0 page it cannot allocate (an error only
    /// if that was the first).
    fn do_page_cache_ra(
        &mut self,
        ctx: &mut Ctx,
        region: usize,
        start: u64,
        nr: u64,
        lookahead: u64,
        order: u32,
    ) -> std::result::Result<(), Oom> {
        let r = &self.regions[region];
        let (base, npages) = (r.base, r.pages as u64);
        let end = (start + nr).min(npages);
        let mark = (start + nr)
            .checked_sub(lookahead)
            .filter(|_| lookahead > 0);
        let (fs, dev_off) = {
            let f = r.file.as_ref().expect("a file region");
            (f.fs as usize, f.dev_off)
        };
        let dev = self.swap.devs.len() + fs;
        self.blk_start_plug();
        let mut result = Ok(());
        // read_pages → the filesystem's readahead (ext4_mpage_readpages, mpage_readahead):
        // consecutive new folios go into one bio, submitted when a cached page breaks the run
        // (or at the end); bio_submit_ns is charged per bio. Simplified: no BIO_MAX_VECS
        // limit (256 folios: with the kernel's large page cache folios a window is far below
        // it; with order-0 folios it would cut bios at 1 MiB).
        let resident = |mm: &Mm, y: u64| mm.pages[(base + y as u32) as usize].has(pg::RESIDENT);
        // The end of the last folio added: a folio starting there continues its bio.
        let mut prev_end: Option<u64> = None;
        let mut max_order = order;
        let mut x = start;
        while x < end {
            let j = base + x as u32;
            if resident(self, x) {
                x += 1;
                continue;
            }
            let mut o = max_order;
            if o > 0 {
                o = o.min(x.trailing_zeros());
                while o > 0 && x + (1u64 << o) > end {
                    o -= 1;
                }
                if o > 0 && (x..x + (1u64 << o)).any(|y| resident(self, y)) {
                    max_order = 0;
                    o = 0;
                }
            }
            let nr = 1u64 << o;
            if let Err(e) = self.filemap_add_folio_order(ctx, j, o) {
                if o > 0 {
                    max_order = 0;
                    continue;
                }
                if x == start {
                    result = Err(e);
                }
                break;
            }
            // ra_alloc_folio: the mark, rounded down to the folio, marks the folio's first page.
            if mark.is_some_and(|m| (x..x + nr).contains(&m)) {
                self.pages[j as usize].set(pg::READAHEAD);
            }
            // submit_bio's PGPGIN (twice on a loop device: block.rs).
            self.vm.pgpgin += self.fs[fs].bdev.pgpg_kib(nr * PAGE_SIZE);
            let first_bio_pages = if prev_end == Some(x) {
                0
            } else {
                ctx.cpu(self.costs.bio_submit_ns);
                // The new bio: this folio and the uncached pages after it in the window.
                nr as usize + (x + nr..end).take_while(|&y| !resident(self, y)).count()
            };
            prev_end = Some(x + nr);
            for y in x..x + nr {
                let jy = base + y as u32;
                let bio_pages = if y == x { first_bio_pages } else { 0 };
                if let Some(done) =
                    self.submit_bio_page(ctx, dev, Dir::Read, (dev_off + y) as u32, jy, bio_pages)
                {
                    self.file_state(region).pending.push(jy, done);
                }
            }
            x += nr;
        }
        for (page, done) in self.blk_finish_plug(ctx) {
            self.file_state(region).pending.push(page, done);
        }
        result
    }

    /// filemap_add_folio: a new page cache folio for page `i`, charged to its memcg; a shadow
    /// entry left by its eviction makes it a refault (workingset_refault), which may start it
    /// on the active list. Then folio_add_lru.
    pub(crate) fn filemap_add_folio(
        &mut self,
        ctx: &mut Ctx,
        i: u32,
    ) -> std::result::Result<(), Oom> {
        let m = self.pages[i as usize].memcg;
        self.alloc_charged_frame(ctx, m)?;
        ctx.cpu(self.costs.pagecache_add_ns + self.costs.pagecache_add_page_ns);
        self.filemap_insert_page(i, 0);
        Ok(())
    }

    /// filemap_add_folio for a folio of order `order` starting at page `first` (order 0:
    /// [`Mm::filemap_add_folio`]): its frames and its memcg charge are all or nothing (one
    /// charge event, memcg v1 `pgpgin`), the insertion is paid once (`pagecache_add_ns`, and
    /// `pagecache_add_page_ns` per page), and
    /// each page goes on the LRU as the model's unit (see the module comment).
    fn filemap_add_folio_order(
        &mut self,
        ctx: &mut Ctx,
        first: u32,
        order: u32,
    ) -> std::result::Result<(), Oom> {
        if order == 0 {
            return self.filemap_add_folio(ctx, first);
        }
        let nr = 1u32 << order;
        let m = self.pages[first as usize].memcg;
        for k in 0..nr {
            let err = if !self.alloc_frame(ctx) {
                Some(Oom { memcg: None })
            } else if let Err(e) = self.try_charge(ctx, m) {
                self.free_frame();
                Some(e)
            } else {
                None
            };
            if let Some(e) = err {
                self.page_counter_uncharge(m, k as u64);
                for _ in 0..k {
                    self.free_frame();
                }
                return Err(e);
            }
        }
        self.commit_charge(m);
        ctx.cpu(self.costs.pagecache_add_ns + nr as u64 * self.costs.pagecache_add_page_ns);
        for k in 0..nr {
            self.filemap_insert_page(first + k, order as u8);
        }
        Ok(())
    }

    /// Page `i` of a new folio of order `order` enters the page cache: a shadow entry left by
    /// its eviction makes it a refault (workingset_refault); then folio_add_lru.
    fn filemap_insert_page(&mut self, i: u32, order: u8) {
        let p = &mut self.pages[i as usize];
        p.set(pg::RESIDENT);
        p.clear(pg::ACTIVE | pg::REFERENCED | pg::READAHEAD);
        p.set_folio_order(order);
        self.resident_add(i);
        if self.pages[i as usize].has(pg::SHADOW) {
            self.workingset_refault(i);
        }
        self.lru_add(i);
    }

    /// folio_mark_accessed (mm/swap.c): the first access sets PG_referenced; a second one on
    /// an inactive folio activates it (folio_activate: pgactivate, and workingset_activation
    /// ages the nonresident clock).
    pub fn folio_mark_accessed(&mut self, i: u32) {
        if self.lru_gen_enabled() {
            return self.folio_inc_refs(i);
        }
        let p = &mut self.pages[i as usize];
        if !p.has(pg::REFERENCED) {
            p.set(pg::REFERENCED);
            return;
        }
        if p.has(pg::ACTIVE) {
            return;
        }
        let m = p.memcg;
        self.lru_del(i);
        let p = &mut self.pages[i as usize];
        p.set(pg::ACTIVE);
        p.clear(pg::REFERENCED);
        self.lru_add(i);
        self.vm.pgactivate += 1;
        self.memcgs[m as usize].events.pgactivate += 1;
        self.age_nonresident(m, 1);
    }

    /// __remove_mapping for a clean, unmapped page cache folio: a shadow entry replaces it in
    /// the mapping (workingset_eviction), the memcg is uncharged and the frame freed. A page
    /// of a large folio is removed alone (see the module comment); the folio's one uncharge
    /// event (memcg v1 `pgpgout`) is counted at its first page.
    pub(crate) fn remove_file_folio_for_reclaim(&mut self, i: u32) {
        let m = self.pages[i as usize].memcg;
        let order = self.pages[i as usize].folio_order();
        self.free_buffers(i);
        self.workingset_eviction(i);
        let p = &mut self.pages[i as usize];
        p.clear(
            pg::RESIDENT
                | pg::ACTIVE
                | pg::YOUNG
                | pg::RECLAIM
                | pg::READAHEAD
                | pg::MAPPED
                | pg::REFERENCED,
        );
        p.set_folio_order(0);
        self.resident_del(i);
        let (_, index) = self.file_of(i);
        if index & ((1u64 << order) - 1) == 0 {
            self.uncharge(m);
        } else {
            self.page_counter_uncharge(m, 1);
        }
        self.free_frame();
    }

    /// One page of truncate_inode_pages_final (mm/truncate.c, 6.12), at the eviction of an
    /// unnamed file's inode when its process exits: a cached folio leaves the LRU and the
    /// mapping and is uncharged (one memcg v1 `pgpgout` per folio, at its first page) and
    /// freed; a shadow entry is deleted with the mapping. No workingset eviction: nothing is
    /// remembered of a deleted file. The file's readahead state and reads in flight go with
    /// it (a read completing later finds no page; its device time was already spent). The
    /// loader refuses writes to these files (Proc::from_config), so no folio is dirty or under
    /// writeback here; the kernel would cancel the dirty state and wait for writeback.
    pub(crate) fn truncate_inode_page(&mut self, i: u32) {
        let p = self.pages[i as usize];
        debug_assert!(
            !p.has(pg::DIRTY | pg::WRITEBACK),
            "tmpfile pages are never written"
        );
        if p.has(pg::RESIDENT) {
            let m = p.memcg;
            if p.list() != list::NONE {
                self.lru_del(i);
            }
            self.resident_del(i);
            let (_, index) = self.file_of(i);
            if index & ((1u64 << p.folio_order()) - 1) == 0 {
                self.uncharge(m);
            } else {
                self.page_counter_uncharge(m, 1);
            }
            self.free_frame();
        }
        let r = self.region_index(i);
        self.pages[i as usize] = Page::new_file(p.memcg);
        let base = self.regions[r].base;
        if let Some(f) = self.regions[r].file.as_mut() {
            if i == base {
                // Once per file: a new inode's state (file_ra_state_init).
                let (fs, dev_off) = (f.fs, f.dev_off);
                *f = FileState::new(fs, dev_off);
            }
        }
    }

    /// NR_FILE_MAPPED: page cache pages (tmpfs ones included) mapped by a process.
    pub fn nr_file_mapped(&self) -> u64 {
        self.pages
            .iter()
            .filter(|p| {
                p.has(pg::FILE | pg::SHMEM)
                    && p.flags & (pg::RESIDENT | pg::MAPPED) == pg::RESIDENT | pg::MAPPED
            })
            .count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ReadsInFlight answers as the plain list it replaces (find the first read of a page
    /// in issue order; retain the reads not done): windows of increasing pages handed over
    /// twice, and reads out of page and completion order (a random miss, a slower request).
    #[test]
    fn reads_in_flight_answers_as_the_plain_list() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut rnd = |n: u64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        let (mut fast, mut plain) = (ReadsInFlight::default(), Vec::<(u32, Time)>::new());
        let (mut now, mut next_page) = (0u64, 0u32);
        for _ in 0..20_000 {
            match rnd(8) {
                0..=2 => {
                    // A window: increasing pages, increasing completions, often handed over
                    // again; now and then out of order.
                    let n = 1 + rnd(6) as u32;
                    let window: Vec<(u32, Time)> = (0..n)
                        .map(|k| {
                            let page = if rnd(10) == 0 {
                                rnd(64) as u32
                            } else {
                                next_page + k
                            };
                            let done =
                                now + 10 * (k as u64 + 1) + if rnd(10) == 0 { rnd(100) } else { 0 };
                            (page, done)
                        })
                        .collect();
                    next_page = (next_page + n) % 96;
                    let times = if rnd(2) == 0 { 2 } else { 1 };
                    for _ in 0..times {
                        for &(p, t) in &window {
                            fast.push(p, t);
                            plain.push((p, t));
                        }
                    }
                }
                3..=5 => {
                    let j = rnd(100) as u32;
                    let want = plain.iter().find(|(p, _)| *p == j).map(|&(_, t)| t);
                    assert_eq!(fast.first(j), want, "page {j} at {now}");
                }
                _ => {
                    now += rnd(30);
                    fast.forget_done(now);
                    plain.retain(|&(_, t)| t > now);
                }
            }
            for j in 0..100 {
                let want = plain.iter().find(|(p, _)| *p == j).map(|&(_, t)| t);
                assert_eq!(fast.first(j), want, "page {j} at {now}");
            }
        }
    }

    #[test]
    fn readahead_window_ramps_to_ra_pages() {
        // A 4 KiB read at the start of a file: 4 pages, then 8, 16, 32, 32.
        assert_eq!(get_init_ra_size(1, RA_PAGES), 4);
        let mut sizes = vec![4];
        for _ in 0..4 {
            sizes.push(get_next_ra_size(*sizes.last().unwrap(), RA_PAGES));
        }
        assert_eq!(sizes, [4, 8, 16, 32, 32]);
        assert_eq!(get_init_ra_size(32, RA_PAGES), 32);
        assert_eq!(get_init_ra_size(4, RA_PAGES), 8);
    }

    #[test]
    fn readahead_window_ramps_to_a_larger_read_ahead_kb() {
        // read_ahead_kb 2560 (the lab's loop device): 4, 16, 64 (×4 below max/16 = 40), then
        // doubling to 640 pages.
        let max = 2560 * 1024 / PAGE_SIZE;
        assert_eq!(get_init_ra_size(1, max), 4);
        let mut sizes = vec![4];
        for _ in 0..6 {
            sizes.push(get_next_ra_size(*sizes.last().unwrap(), max));
        }
        assert_eq!(sizes, [4, 16, 64, 128, 256, 512, 640]);
    }
}
