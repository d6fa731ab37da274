//! Page faults and process exit: mm/memory.c (do_anonymous_page, do_wp_page on the zero page,
//! do_swap_page, should_try_to_free_swap) and the swap-in side of mm/swap_state.c
//! (swap_cache_get_folio, __read_swap_cache_async, swap_cluster_readahead,
//! swap_vma_readahead), as of 6.18.
//!
//! Simplified: regions are PMD-aligned VMAs with no THP; no fork, so every anonymous page is
//! exclusive (a swap-in maps it writable; a later write needs no fault, and a swap slot is
//! never shared, so SWP_SYNCHRONOUS_IO devices always skip readahead).

use super::page::{pg, NONE};
use super::swap::swapin_nr_pages;
use super::{Ctx, Mm, Oom};
use crate::latency::Kind;
use crate::sim::Time;

/// SWAP_RA_ORDER_CEILING.
const SWAP_RA_ORDER_CEILING: u32 = 5;
/// Pages per PMD: VMA readahead stays inside the faulting address's 2 MiB block.
const PMD_PAGES: u64 = 512;
/// How many pages ahead exit_process prefetches a swapped page's swap map entry and zsmalloc
/// handle (what the handle points to: half as far).
const EXIT_PREFETCH: u32 = 16;

impl Mm {
    /// One access by a process. Returns whether it faulted.
    ///
    /// The resident hit is the only part inlined into the scheduler's access loop; everything
    /// that faults is in [`Mm::access_fault`], kept out of line so the hit stays small enough
    /// to inline (most accesses of most scenarios are hits).
    #[inline]
    pub fn access(&mut self, ctx: &mut Ctx, i: u32, write: bool) -> Result<bool, Oom> {
        let p = &mut self.pages[i as usize];
        if p.flags & (pg::MAPPED | pg::ZERO_PFN) == pg::MAPPED
            && !(write && p.flags & (pg::FILE | pg::DIRTY) == pg::FILE)
        {
            p.flags |= pg::YOUNG | if write { pg::DIRTY } else { 0 };
            ctx.cpu(self.costs.access_ns);
            return Ok(false);
        }
        self.access_fault(ctx, i, write)
    }

    /// The rest of [`Mm::access`]: a store to a clean shared file page, a read of the zero
    /// page, and every fault.
    #[inline(never)]
    fn access_fault(&mut self, ctx: &mut Ctx, i: u32, write: bool) -> Result<bool, Oom> {
        let p = &mut self.pages[i as usize];
        if p.flags & (pg::MAPPED | pg::ZERO_PFN) == pg::MAPPED {
            // Mapped and not the zero page: `access` handled every other case, so this is a
            // store to a clean shared file page. Its PTE is write-protected (mapped read-only
            // by a read fault, or cleaned by folio_clear_dirty_for_io), so it faults:
            // do_wp_page → wp_page_shared → fault_dirty_shared_page.
            let m = p.memcg;
            p.flags |= pg::YOUNG;
            self.vm.pgfault += 1;
            self.memcgs[m as usize].events.pgfault += 1;
            let start = ctx.now;
            ctx.cpu(self.costs.fault_ns);
            self.fault_dirty_shared_page(ctx, i);
            self.latency(ctx, Kind::Fault, ctx.now - start);
            self.latency(ctx, Kind::FaultMinor, ctx.now - start);
            ctx.cpu(self.costs.access_ns);
            return Ok(true);
        }
        if p.has(pg::MAPPED) && !write {
            // Reading the shared zero page.
            ctx.cpu(self.costs.access_ns);
            return Ok(false);
        }
        // handle_mm_fault sets current->in_lru_fault (lru_gen_enter_fault): folios it adds
        // start in the youngest generation of the multi-gen LRU.
        self.lru_gen.in_fault = true;
        let (start, majfault, zswpin) = (ctx.now, self.vm.pgmajfault, self.vm.zswpin);
        let r = self.handle_mm_fault(ctx, i, write);
        self.lru_gen.in_fault = false;
        r?;
        // Fault latency: handle_mm_fault's entry to its return (docs/model/latency.md).
        let took = ctx.now - start;
        self.latency(ctx, Kind::Fault, took);
        if self.vm.pgmajfault == majfault {
            self.latency(ctx, Kind::FaultMinor, took);
        } else {
            self.latency(ctx, Kind::FaultMajor, took);
            if self.vm.zswpin != zswpin {
                self.latency(ctx, Kind::FaultZswap, took);
            }
        }
        ctx.cpu(self.costs.access_ns);
        Ok(true)
    }

    fn handle_mm_fault(&mut self, ctx: &mut Ctx, i: u32, write: bool) -> Result<(), Oom> {
        let m = self.pages[i as usize].memcg;
        self.vm.pgfault += 1;
        self.memcgs[m as usize].events.pgfault += 1;
        ctx.cpu(self.costs.fault_ns);
        let p = self.pages[i as usize];
        if p.has(pg::SHMEM) {
            return self.shmem_fault(ctx, i, write);
        }
        if p.has(pg::FILE) {
            self.filemap_fault(ctx, i, write)?;
            if write {
                self.pages[i as usize].set(pg::MAPPED | pg::YOUNG);
                self.fault_dirty_shared_page(ctx, i);
            }
            return Ok(());
        }
        if p.has(pg::RESIDENT) {
            // A swap-cache folio whose PTE is still a swap entry: a minor swap fault.
            debug_assert!(p.has(pg::SWAPCACHE));
            self.swap_cache_hit(i);
            self.map_swapped_in(i, write);
            return Ok(());
        }
        if p.slot != NONE {
            return self.do_swap_page(ctx, i, write);
        }
        if !p.has(pg::ZERO_PFN) {
            // create_huge_pmd: a write fault in an empty 2 MiB range of a THP region tries a
            // huge page first (mm/phys.rs); a read maps the zero page at PTE level, as a
            // huge zero page would be split at the first write.
            if write && self.thp_fault_eligible(i) && self.do_huge_pmd_anonymous_page(ctx, i)? {
                return Ok(());
            }
            // do_anonymous_page: the first fault in a 2 MiB range allocates its page table.
            self.pte_alloc(ctx, i)?;
        }
        if !write && !p.has(pg::ZERO_PFN) {
            // do_anonymous_page, read: map the shared zero page, allocate nothing.
            self.pages[i as usize].set(pg::MAPPED | pg::ZERO_PFN);
            return Ok(());
        }
        // do_anonymous_page (write) or do_wp_page copying the zero page.
        self.alloc_charged_frame(ctx, m)?;
        ctx.cpu(self.costs.page_alloc_zero_ns);
        let p = &mut self.pages[i as usize];
        p.clear(pg::ZERO_PFN);
        p.set(pg::RESIDENT | pg::MAPPED | pg::YOUNG | pg::DIRTY | pg::ANON);
        self.resident_add(i);
        // folio_add_lru_vma: a VM_LOCKED region's new folio is mlocked (mm/mlock.rs).
        if self.regions[self.region_index(i)].mlock {
            self.mlock_new_folio(i);
        }
        self.folio_add_lru(ctx, i);
        Ok(())
    }

    /// pte_alloc → __pte_alloc → pte_alloc_one (mm/memory.c, 6.18): the page table page of
    /// the 2 MiB range holding page `i`, if it has none yet. User page tables are allocated
    /// with GFP_PGTABLE_USER, which includes __GFP_ACCOUNT: the page is charged to the memcg
    /// (memory.usage_in_bytes / memory.current) without being on an LRU, so a memcg reaches
    /// its limit that much earlier (~1 page per 512 mapped, plus the charge stock). Freed at
    /// exit. Simplified: the PMD/PUD/P4D levels (one page per 1 GiB and up) are not modelled,
    /// nor is the kernel's own memory of the process (VMAs, task struct, stack).
    pub(crate) fn pte_alloc(&mut self, ctx: &mut Ctx, i: u32) -> Result<(), Oom> {
        let region = self.region_index(i);
        let chunk = ((i - self.regions[region].base) / super::PTRS_PER_PTE) as usize;
        if self.regions[region].page_tables[chunk] {
            return Ok(());
        }
        let m = self.pages[i as usize].memcg;
        if !self.alloc_frame(ctx) {
            return Err(Oom { memcg: None });
        }
        if let Err(e) = self.try_charge(ctx, m) {
            self.free_frame();
            return Err(e);
        }
        self.regions[region].page_tables[chunk] = true;
        self.nr_page_table_pages += 1;
        Ok(())
    }

    /// A page frame from the page allocator, charged to memcg `m` (alloc, then
    /// mem_cgroup_charge, as do_anonymous_page and __read_swap_cache_async do).
    pub fn alloc_charged_frame(&mut self, ctx: &mut Ctx, m: u16) -> Result<(), Oom> {
        if !self.alloc_frame(ctx) {
            return Err(Oom { memcg: None });
        }
        if let Err(e) = self.try_charge(ctx, m) {
            self.free_frame();
            return Err(e);
        }
        self.commit_charge(m);
        Ok(())
    }

    /// swap_use_vma_readahead (mm/swap_state.c, 6.18): VMA readahead unless the knob turns it off
    /// or any active swap device is rotational (nr_rotate_swap).
    fn swap_use_vma_readahead(&self) -> bool {
        self.knobs.swap.vma_ra_enabled && !self.swap.rotational
    }

    /// folio_test_clear_readahead on a swap-cache folio. PG_readahead is PG_reclaim
    /// (include/linux/page-flags.h, 6.18), so a folio that reclaim marked for rotation while
    /// its write is in flight (pageout to a block device, zswap_writeback_entry) reads as a
    /// readahead folio too: a fault on it counts `swap_ra_hit` and feeds the readahead window,
    /// and clearing the bit means the end of its write no longer rotates it (folio_end_writeback
    /// tests PG_reclaim). The model keeps two flags (the file side uses READAHEAD alone); on the
    /// swap side they act as the kernel's one bit through this function and
    /// [`Mm::end_swap_writeback`].
    pub(super) fn folio_test_clear_readahead(&mut self, i: u32) -> bool {
        let p = &mut self.pages[i as usize];
        let set = p.has(pg::READAHEAD) || p.has(pg::RECLAIM);
        p.clear(pg::READAHEAD | pg::RECLAIM);
        set
    }

    /// swap_update_readahead (6.18; swap_cache_get_folio's accounting in 6.12) for a hit.
    fn swap_cache_hit(&mut self, i: u32) {
        let readahead = self.folio_test_clear_readahead(i);
        let vma_ra = self.swap_use_vma_readahead();
        if vma_ra {
            let base = self.region_of(i).base;
            let ri = self.region_index(i);
            let r = &mut self.regions[ri];
            let (_, win, hits) = r.ra_info.unwrap_or((0, 0, 4));
            let hits = if readahead { (hits + 1).min(63) } else { hits };
            r.ra_info = Some(((i - base) as u64, win, hits));
        }
        if readahead {
            self.vm.swap_ra_hit += 1;
            if !vma_ra {
                self.swap.ra_hits += 1;
            }
        }
    }

    /// Map a swap-cache folio into the faulting PTE; free its swap slot if should_try_to_free_swap.
    fn map_swapped_in(&mut self, i: u32, write: bool) {
        let p = &mut self.pages[i as usize];
        // A folio read into the swap cache becomes anon at its first mapping
        // (folio_add_new_anon_rmap in do_swap_page's `!folio_test_anon` case).
        p.set(pg::MAPPED | pg::YOUNG | pg::ANON);
        if write {
            p.set(pg::DIRTY);
        }
        // should_try_to_free_swap: always for SWP_SYNCHRONOUS_IO devices (the swap cache does
        // not help zram and holds memory twice), when swap is half full, or on a write fault
        // on an exclusive page; "half full" is mem_cgroup_swap_full (the memcg's own
        // memory.swap.max counts on v2).
        let slot = self.pages[i as usize].slot;
        let synchronous = slot != NONE && self.swap.devs[self.swap.dev_of(slot)].synchronous();
        if synchronous || self.mem_cgroup_swap_full(self.pages[i as usize].memcg) || write {
            self.folio_free_swap(i);
        }
    }

    /// do_swap_page on a swap-cache miss: a major fault that reads the page (and a readahead
    /// window around it) into the swap cache, then maps it.
    fn do_swap_page(&mut self, ctx: &mut Ctx, i: u32, write: bool) -> Result<(), Oom> {
        let m = self.pages[i as usize].memcg;
        self.vm.pgmajfault += 1;
        self.memcgs[m as usize].events.pgmajfault += 1;
        // SWP_SYNCHRONOUS_IO devices (zram) read just the faulting page when it is mapped once.
        let dev = self.swap.dev_of(self.pages[i as usize].slot);
        let window = if self.swap.devs[dev].synchronous() {
            vec![i]
        } else if self.swap_use_vma_readahead() {
            self.vma_ra_window(i)
        } else {
            self.cluster_ra_window(i)
        };
        self.swapin_window(ctx, i, window)?;
        // A write fault on a folio still in the lru_add batch (!folio_test_lru) drains it, to
        // see whether the task holds the only reference (mm/lru_add.rs).
        if write && self.folio_in_lru_add_batch(ctx, i) {
            self.lru_add_drain(ctx);
        }
        self.map_swapped_in(i, write);
        Ok(())
    }

    /// Read page `i` and its readahead `window` into the swap cache (the second half of
    /// swap_cluster_readahead / swap_vma_readahead); returns when `i`'s data is there.
    pub(super) fn swapin_window(
        &mut self,
        ctx: &mut Ctx,
        i: u32,
        window: Vec<u32>,
    ) -> Result<Time, Oom> {
        // swap_cluster_readahead and swap_vma_readahead read the window under a plug, so reads
        // of consecutive slots merge into one request (crate::block).
        self.blk_start_plug();
        // A workingset refault's read and wait is a memory stall (swap_read_folio and
        // folio_wait_bit_common's thrashing case): read_swap_cache_async enters it.
        let memstall = ctx.memstall;
        let mut mine: Result<Option<Time>, Oom> = Ok(Some(ctx.now));
        // The readahead path ends with lru_add_drain(); a window of the faulting page alone
        // takes `skip:` and leaves its folio in the batch (mm/lru_add.rs).
        let drain = window.len() > 1;
        for j in window {
            if j == i {
                mine = self.read_swap_cache_async(ctx, i, false);
                if mine.is_err() {
                    break;
                }
            } else {
                // Readahead allocation failures just skip the page.
                let _ = self.read_swap_cache_async(ctx, j, true);
            }
        }
        let plugged_reads = self.blk_finish_plug(ctx);
        if drain {
            self.lru_add_drain(ctx);
        }
        if mine.is_err() {
            self.psi_memstall_leave(ctx, memstall);
        }
        // A read that waited in the plug completes with the request it joined (the last read
        // of the page, if it was read twice).
        let mut ready = mine?
            .or_else(|| plugged_reads.iter().rev().find(|r| r.0 == i).map(|r| r.1))
            .unwrap_or(ctx.now);
        if !self.pages[i as usize].has(pg::RESIDENT) {
            // Unplugged now: issued at once.
            ready = match self.read_swap_cache_async(ctx, i, false) {
                Ok(r) => r.unwrap_or(ctx.now),
                Err(e) => {
                    self.psi_memstall_leave(ctx, memstall);
                    return Err(e);
                }
            };
        }
        // The fault (or shmem swap-in) sleeps until the data is there: I/O wait, and a memory
        // stall for PSI while it is a workingset refault.
        if ready > ctx.now {
            self.latency(ctx, Kind::IoWait, ready - ctx.now);
        }
        self.psi_sleep(ctx, ready);
        self.psi_memstall_leave(ctx, memstall);
        Ok(ready)
    }

    /// __read_swap_cache_async + swap_read_folio for page `j` if its PTE holds a swap entry
    /// and it is not in the swap cache yet. Returns when its data is there (now, if someone
    /// else brought it in meanwhile), or None if its device read waits in the plug.
    fn read_swap_cache_async(
        &mut self,
        ctx: &mut Ctx,
        j: u32,
        readahead: bool,
    ) -> Result<Option<Time>, Oom> {
        let p = self.pages[j as usize];
        if p.has(pg::RESIDENT) || p.slot == NONE {
            return Ok(Some(ctx.now));
        }
        let m = p.memcg;
        self.alloc_charged_frame(ctx, m)?;
        if self.pages[j as usize].has(pg::RESIDENT) || self.pages[j as usize].slot == NONE {
            // The allocation's reclaim brought `j` into the swap cache itself (zswap writeback)
            // or freed its slot: like swapcache_prepare's -EEXIST, drop our folio and use theirs.
            self.uncharge(m);
            self.free_frame();
            return Ok(Some(ctx.now));
        }
        // The faulting page is read and mapped (swapin_page_ns); a readahead page is only read
        // into the swap cache now and mapped by a later minor fault (swap_ra_page_ns holds both).
        ctx.cpu(if readahead {
            self.costs.swap_ra_page_ns
        } else {
            self.costs.swapin_page_ns
        });
        // A new folio: not anon until a fault maps it (pg::ANON).
        self.pages[j as usize].clear(pg::ANON);
        self.pages[j as usize].set(pg::RESIDENT | pg::SWAPCACHE);
        self.memcgs[m as usize].swapcached += 1;
        self.resident_add(j);
        if self.pages[j as usize].has(pg::SHADOW) {
            self.workingset_refault(j);
        }
        if !readahead && self.pages[j as usize].has(pg::WORKINGSET) {
            // swap_read_folio: psi_memstall_enter for a workingset folio; do_swap_page leaves
            // after the wait.
            self.psi_memstall_enter(ctx);
        }
        // Read before the LRU add: a zswap entry's links must be released first (one set of
        // links serves both LRUs).
        let done = self.swap_read_folio(ctx, j);
        self.folio_add_lru(ctx, j);
        if readahead {
            self.pages[j as usize].set(pg::READAHEAD);
            self.vm.swap_ra += 1;
        }
        Ok(done)
    }

    /// swap_cluster_readahead's window: an aligned block of swap offsets around the fault.
    pub(super) fn cluster_ra_window(&mut self, i: u32) -> Vec<u32> {
        let slot = self.pages[i as usize].slot;
        let d = self.swap.dev_of(slot);
        let (base, max) = (self.swap.devs[d].base, self.swap.devs[d].max);
        let off = (slot - base) as u64;
        let max_pages = 1u32 << self.knobs.vm.page_cluster;
        let pages = if max_pages <= 1 {
            1
        } else {
            let hits = std::mem::take(&mut self.swap.ra_hits);
            let pages = swapin_nr_pages(
                self.swap.ra_prev_offset,
                off,
                hits,
                max_pages,
                self.swap.ra_last_pages,
            );
            if hits == 0 {
                self.swap.ra_prev_offset = off;
            }
            self.swap.ra_last_pages = pages;
            pages
        };
        let mask = pages as u64 - 1;
        if mask == 0 {
            return vec![i];
        }
        let start = (off & !mask).max(1);
        let end = (off | mask).min(max as u64 - 1);
        (start..=end)
            .filter_map(|o| {
                let s = base + o as u32;
                if !self.swap.devs[d].slot_used(o as u32) {
                    return None;
                }
                let j = self.swap.slot_page[s as usize];
                (j != NONE).then_some(j)
            })
            .collect()
    }

    /// swap_vma_readahead's window: pages of the faulting VMA around the fault whose PTEs hold
    /// swap entries.
    fn vma_ra_window(&mut self, i: u32) -> Vec<u32> {
        let r = &self.regions[self.region_index(i)];
        let (base, npages) = (r.base, r.pages as u64);
        let fpfn = (i - base) as u64;
        let max_win = 1u32 << self.knobs.vm.page_cluster.min(SWAP_RA_ORDER_CEILING);
        if max_win == 1 {
            return vec![i];
        }
        let (pfn, prev_win, hits) = r.ra_info.unwrap_or((0, 0, 4));
        let win = swapin_nr_pages(pfn, fpfn, hits, max_win, prev_win) as u64;
        let ri = self.region_index(i);
        self.regions[ri].ra_info = Some((fpfn, win as u32, 0));
        if win == 1 {
            return vec![i];
        }
        let (l, r) = if fpfn == pfn + 1 {
            (fpfn as i64, (fpfn + win) as i64)
        } else if pfn == fpfn + 1 {
            (fpfn as i64 - win as i64 + 1, fpfn as i64 + 1)
        } else {
            let left = ((win - 1) / 2) as i64;
            (fpfn as i64 - left, fpfn as i64 + win as i64 - left)
        };
        let pmd = (fpfn & !(PMD_PAGES - 1)) as i64;
        let start = l.max(0).max(pmd);
        let end = r.min(npages as i64).min(pmd + PMD_PAGES as i64);
        (start..end)
            .map(|x| base + x as u32)
            .filter(|&j| {
                let p = &self.pages[j as usize];
                p.slot != NONE && !p.has(pg::MAPPED)
            })
            .collect()
    }

    /// folio_free_swap for a resident swap-cache folio: release the slot; the folio is dirty
    /// again since no copy remains.
    pub fn folio_free_swap(&mut self, i: u32) -> bool {
        let p = self.pages[i as usize];
        if !p.has(pg::SWAPCACHE) || p.has(pg::WRITEBACK) {
            return false;
        }
        let m = p.memcg;
        self.memcgs[m as usize].swapcached -= 1;
        self.release_swap_entry(i);
        let p = &mut self.pages[i as usize];
        p.clear(pg::SWAPCACHE);
        p.set(pg::DIRTY);
        self.analytic_sync(i);
        true
    }

    /// Free page `i`'s swap slot and whatever holds its data (zswap entry, zeromap bit, shadow).
    pub fn release_swap_entry(&mut self, i: u32) {
        let p = self.pages[i as usize];
        if p.slot == NONE {
            return;
        }
        if p.has(pg::ZSWAP) {
            self.zswap_invalidate(i);
        }
        let d = self.swap.dev_of(p.slot);
        let off = p.slot - self.swap.devs[d].base;
        if let Some(zram) = self.swap.devs[d].zram.as_mut() {
            // The swap slot-free notification frees the zram object at once.
            let before = zram.pool.total_pages();
            zram.free_slot(off, true);
            self.nr_free += before - zram.pool.total_pages();
        }
        self.swap.free_slot(p.slot);
        self.memcgs[p.memcg as usize].swap_pages -= 1;
        self.mem_cgroup_uncharge_swap(p.memcg);
        let p = &mut self.pages[i as usize];
        p.slot = NONE;
        p.clear(pg::ZEROMAP | pg::SHADOW);
    }

    /// Process exit (exit_mmap): free every page, swap slot and zswap entry of its regions.
    pub fn exit_process(&mut self, process: u32) {
        // The exiting task's batch goes to the LRU (its folios are freed below).
        self.lru_add_drain_process(process);
        self.kernel_free_process(process);
        let regions: Vec<(u32, u32, bool)> = self
            .regions
            .iter()
            .filter(|r| r.process == process)
            .map(|r| (r.base, r.pages, r.tmpfile))
            .collect();
        for &(base, pages, tmpfile) in &regions {
            for i in base..base + pages {
                // Cache hints for the swapped pages a few steps on: their swap map entries and
                // zsmalloc handles, then what the handles point to (freeing walks those in
                // slot and handle order, not page order). Never changes a result.
                self.prefetch_fault(i + EXIT_PREFETCH, false);
                self.prefetch_fault(i + EXIT_PREFETCH / 2, true);
                if self.pages[i as usize].has(pg::MLOCKED) {
                    // zap_pte_range munlocks a VM_LOCKED region's folios first (mm/mlock.rs).
                    self.munlock_folio(i);
                }
                let p = self.pages[i as usize];
                if p.has(pg::FILE) && tmpfile {
                    // An unnamed file: the exit's last close evicts the inode
                    // (truncate_inode_pages_final, mm/filemap.rs).
                    self.truncate_inode_page(i);
                    continue;
                }
                if p.has(pg::FILE | pg::SHMEM) {
                    // Page cache folios, and tmpfs files whether in memory or in swap, outlive
                    // the process (and stay charged): only the mapping goes.
                    self.pages[i as usize].clear(pg::MAPPED | pg::YOUNG);
                    continue;
                }
                if p.has(pg::RESIDENT) {
                    if p.list() != super::page::list::NONE {
                        self.lru_del(i);
                    }
                    if p.has(pg::SWAPCACHE) {
                        self.memcgs[p.memcg as usize].swapcached -= 1;
                    }
                    self.uncharge(p.memcg);
                    self.free_frame();
                    self.resident_del(i);
                }
                self.release_swap_entry(i);
                let q = &mut self.pages[i as usize];
                *q = super::page::Page::new(q.memcg);
                self.analytic_sync(i);
            }
        }
        // free_pgtables: the regions' page tables go back, uncharged.
        let tables: Vec<(u16, u64)> = self
            .regions
            .iter_mut()
            .filter(|r| r.process == process)
            .map(|r| {
                let n = r.page_tables.iter().filter(|&&t| t).count() as u64;
                r.page_tables.fill(false);
                (r.memcg, n)
            })
            .collect();
        for (m, n) in tables {
            self.nr_page_table_pages -= n;
            for _ in 0..n {
                self.free_frame();
            }
            self.uncharge_kmem(m, n);
        }
        // exit_files, after exit_mm: the last close of each tmpfile (__fput) frees its kernel
        // objects, through the obj stock (mm/objcg.rs).
        for r in 0..self.regions.len() {
            if self.regions[r].process == process && self.regions[r].kobjs > 0 {
                self.free_tmpfile_objects(r);
            }
        }
        // The memcg's charge stock is not drained: 6.12 drains a CPU's memcg_stock when another
        // memcg refills it, on drain_all_stock (a charge at the limit, a memory.high or
        // memory.max write) and at CPU hotplug, never at task exit (mem_cgroup_exit only drops
        // the task's objcg). What the process precharged stays in memory.current.
    }
}
