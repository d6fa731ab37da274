//! tmpfs files (shmem): mm/shmem.c as read in 6.12 (shmem_file_read_iter, shmem_write_begin /
//! shmem_write_end, shmem_fault, shmem_get_folio_gfp, shmem_alloc_and_add_folio,
//! shmem_swapin_folio, shmem_swapin_cluster, shmem_writepage), with the vmscan side in
//! mm/vmscan.rs ([`Mm::shmem_pageout_prepare`]).
//!
//! A tmpfs file region's pages are swap-backed: while in memory they are folios of the file's
//! mapping on the memcg's *anonymous* LRUs (folio_is_file_lru is false), counted in
//! NR_SHMEM and NR_FILE_PAGES (meminfo Shmem and Cached, memcg `shmem` and v1 `cache` /
//! v2 `file`), never in the dirty domain (tmpfs has no BDI_CAP_WRITEBACK: no NR_FILE_DIRTY,
//! no balance_dirty_pages, no flusher; fsync is a no-op). Reclaim sends a dirty one to
//! shmem_writepage, which moves it from the mapping to the swap cache and writes it like an
//! anonymous page (zswap, zram or a swap device); a clean one (read-faulted and never
//! written) is dropped, leaving a hole. An access to a swapped-out page reads it back with
//! swap_cluster_readahead (shmem_swapin_cluster), then takes it out of the swap cache and
//! frees its slot (shmem_swapin_folio: delete_from_swap_cache, folio_mark_dirty, swap_free).
//! Shadow entries are the swap cache's, as for anonymous pages: a refault counts as
//! workingset_refault_anon, as the kernel's folio_is_file_lru test decides.
//!
//! Simplified: order-0 folios only (no huge=, no large folios); the swap-in readahead window
//! is always swap_cluster_readahead's (6.14's skipping of the swap cache for
//! SWP_SYNCHRONOUS_IO devices is not modelled, for any preset); a read(2) of a hole copies
//! zeros without allocating (SGP_READ), as the kernel does; files have a fixed size, so the
//! size= limit is checked when the scenario is loaded (ENOSPC never happens at run time); no
//! inode or dentry memory; the file outlives its process and is never deleted.

use super::page::{pg, NONE};
use super::{Ctx, Mm, Oom};
use crate::config::Filesystem as FsConfig;

/// The `fstype` of a tmpfs in `machine.filesystems`.
pub const TMPFS: &str = "tmpfs";

/// A mounted tmpfs.
#[derive(Clone, Debug)]
pub struct Tmpfs {
    pub name: String,
    /// size=: the most pages its files may hold (sbinfo->max_blocks).
    pub max_pages: u64,
}

impl Tmpfs {
    /// The tmpfs entries of the lowered `machine.filesystems`, in order.
    pub(crate) fn from_config(fss: &[FsConfig], totalram: u64) -> crate::error::Result<Vec<Tmpfs>> {
        let mut out = Vec::new();
        for (k, f) in fss.iter().enumerate().filter(|(_, f)| f.fstype == TMPFS) {
            if f.device.is_some() {
                return Err(crate::error::ConfigError::invalid(
                    format!("machine.filesystems[{k}].device"),
                    "a tmpfs has no block device",
                ));
            }
            out.push(Tmpfs {
                name: f.name.clone(),
                max_pages: Tmpfs::max_pages(f, totalram),
            });
        }
        Ok(out)
    }

    /// size= in pages; unset: shmem_default_max_blocks, half of RAM.
    pub(crate) fn max_pages(f: &FsConfig, totalram: u64) -> u64 {
        f.size_bytes
            .map_or(totalram / 2, |b| b.div_ceil(super::PAGE_SIZE))
    }
}

impl Mm {
    /// Whether page `i` is in its tmpfs file's mapping (not a hole, not only in swap).
    #[inline]
    fn shmem_in_mapping(&self, i: u32) -> bool {
        let p = &self.pages[i as usize];
        p.has(pg::RESIDENT) && !p.has(pg::SWAPCACHE)
    }

    /// Whether page `i`'s data is in swap (swapped out, or in the swap cache).
    #[inline]
    fn shmem_swapped(&self, i: u32) -> bool {
        let p = &self.pages[i as usize];
        p.slot != NONE && (!p.has(pg::RESIDENT) || p.has(pg::SWAPCACHE))
    }

    /// shmem_file_read_iter for one page (a read(2) of 4 KiB at page `i`'s offset), SGP_READ:
    /// a page in swap is read back (no major fault is counted: there is no fault), a cached
    /// page is marked accessed (the read starts at the page's beginning), a hole is copied as
    /// zeros with nothing allocated.
    pub fn shmem_file_read(&mut self, ctx: &mut Ctx, i: u32) -> Result<(), Oom> {
        if self.shmem_swapped(i) {
            self.shmem_swapin_folio(ctx, i, false, false)?;
        }
        if self.shmem_in_mapping(i) {
            self.folio_mark_accessed(i);
        }
        ctx.cpu(self.costs.read_page_ns);
        Ok(())
    }

    /// shmem_write_begin (shmem_get_folio, SGP_WRITE) + copy + shmem_write_end for one page: a
    /// cached folio is marked accessed, one in swap is read back (and marked accessed), a hole
    /// gets a new folio with PG_referenced set; write_end dirties it. No dirty accounting and
    /// no balance_dirty_pages: tmpfs's bdi has no BDI_CAP_WRITEBACK. CPU: `shmem_write_page_ns`
    /// per call (measured by `calibrate`'s write stage on a cached tmpfs file); a hole's new
    /// folio `pagecache_add_ns` + `pagecache_add_page_ns` and no zeroing (SGP_WRITE leaves
    /// clearing to shmem_write_end, which clears nothing of a whole-page write).
    pub fn shmem_file_write(&mut self, ctx: &mut Ctx, i: u32) -> Result<(), Oom> {
        if self.shmem_swapped(i) {
            self.shmem_swapin_folio(ctx, i, false, true)?;
        } else if self.shmem_in_mapping(i) {
            self.folio_mark_accessed(i);
        } else {
            self.shmem_alloc_and_add_folio(ctx, i, false)?;
            self.pages[i as usize].set(pg::REFERENCED);
        }
        ctx.cpu(self.costs.shmem_write_page_ns);
        self.pages[i as usize].set(pg::DIRTY);
        Ok(())
    }

    /// shmem_fault (SGP_CACHE) on page `i` of a shared mapping of a tmpfs file. A read fault
    /// first maps the cached pages around it (shmem's map_pages is filemap_map_pages); then a
    /// page in swap is read back (a major fault), a hole gets a new zeroed folio (also on a
    /// read: shmem has no zero-page mapping), and the page is mapped. The PTE is writable
    /// either way (no dirty accounting, so no write notification): a store dirties the folio.
    pub(crate) fn shmem_fault(&mut self, ctx: &mut Ctx, i: u32, write: bool) -> Result<(), Oom> {
        let region = self.region_index(i);
        let index = (i - self.regions[region].base) as u64;
        self.pte_alloc(ctx, i)?;
        if !write {
            self.do_fault_around(ctx, region, index);
        }
        if !self.pages[i as usize].has(pg::MAPPED) {
            if self.shmem_swapped(i) {
                self.shmem_swapin_folio(ctx, i, true, false)?;
            } else if !self.shmem_in_mapping(i) {
                self.shmem_alloc_and_add_folio(ctx, i, true)?;
            }
        }
        let p = &mut self.pages[i as usize];
        p.set(pg::MAPPED | pg::YOUNG);
        if write {
            p.set(pg::DIRTY);
        }
        Ok(())
    }

    /// shmem_alloc_and_add_folio for a hole: a folio charged to the page's memcg, added to the
    /// mapping and to the LRU (folio_add_lru: the inactive anonymous list); `zero`: cleared
    /// (shmem_get_folio_gfp clears a new folio for SGP_CACHE, i.e. a fault, not for
    /// SGP_WRITE), charged as an anonymous page's allocation and zeroing.
    fn shmem_alloc_and_add_folio(&mut self, ctx: &mut Ctx, i: u32, zero: bool) -> Result<(), Oom> {
        let m = self.pages[i as usize].memcg;
        self.alloc_charged_frame(ctx, m)?;
        let zero_ns = if zero {
            self.costs.page_alloc_zero_ns
        } else {
            0
        };
        ctx.cpu(zero_ns + self.costs.pagecache_add_ns + self.costs.pagecache_add_page_ns);
        let p = &mut self.pages[i as usize];
        p.set(pg::RESIDENT);
        p.clear(pg::ACTIVE | pg::REFERENCED | pg::READAHEAD | pg::DIRTY);
        self.resident_add(i);
        self.lru_add(i);
        Ok(())
    }

    /// shmem_swapin_folio: find the page in the swap cache (swap_cache_get_folio without a
    /// VMA: a PG_readahead hit counts swap_ra_hit and the cluster readahead's hits) or read it
    /// and a swap_cluster_readahead window around its slot (shmem_swapin_cluster; a major
    /// fault when it comes from a fault); wait for a write in flight; then SGP_WRITE marks it
    /// accessed, and it leaves the swap cache for the mapping, dirty, its slot freed.
    fn shmem_swapin_folio(
        &mut self,
        ctx: &mut Ctx,
        i: u32,
        fault: bool,
        sgp_write: bool,
    ) -> Result<(), Oom> {
        if self.pages[i as usize].has(pg::RESIDENT) {
            if self.folio_test_clear_readahead(i) {
                self.vm.swap_ra_hit += 1;
                self.swap.ra_hits += 1;
            }
        } else {
            if fault {
                let m = self.pages[i as usize].memcg;
                self.vm.pgmajfault += 1;
                self.memcgs[m as usize].events.pgmajfault += 1;
            }
            let window = self.cluster_ra_window(i);
            // Sleeps until the page's data is there (I/O wait, PSI), as do_swap_page.
            self.swapin_window(ctx, i, window)?;
        }
        if self.pages[i as usize].has(pg::WRITEBACK) {
            self.wait_on_writeback(ctx, i);
        }
        if sgp_write {
            self.folio_mark_accessed(i);
        }
        // delete_from_swap_cache + folio_mark_dirty + swap_free.
        let freed = self.folio_free_swap(i);
        debug_assert!(
            freed,
            "a shmem folio out of writeback leaves the swap cache"
        );
        Ok(())
    }

    /// Reclaim of a shmem folio still in its mapping, up to pageout (shrink_folio_list after
    /// try_to_unmap; shmem_writepage up to swap_writepage). Returns Ok to go on to pageout
    /// (the folio is now in the swap cache with a slot, dirty), or the folio's fate: a clean
    /// folio is dropped from the mapping (__remove_mapping; no shadow: folio_is_file_lru is
    /// false) and freed; without may_writepage it is kept; with no free slot
    /// shmem_writepage redirties it and returns AOP_WRITEPAGE_ACTIVATE.
    pub(super) fn shmem_pageout_prepare(
        &mut self,
        ctx: &mut Ctx,
        i: u32,
        may_writepage: bool,
    ) -> Result<(), super::vmscan::Fate> {
        use super::vmscan::Fate;
        self.pages[i as usize].clear(pg::MAPPED);
        if !self.pages[i as usize].has(pg::DIRTY) {
            ctx.cpu(self.costs.reclaim_page_ns);
            let m = self.pages[i as usize].memcg;
            let p = &mut self.pages[i as usize];
            *p = super::page::Page::new_shmem(p.memcg);
            self.resident_del(i);
            self.uncharge(m);
            self.free_frame();
            return Err(Fate::Freed);
        }
        if !may_writepage {
            return Err(Fate::Keep);
        }
        ctx.cpu(self.costs.swap_alloc_ns);
        let slot = self.swap.alloc_slot(i).ok_or(Fate::Activate)?;
        let m = self.pages[i as usize].memcg;
        let p = &mut self.pages[i as usize];
        p.slot = slot;
        p.set(pg::SWAPCACHE);
        p.clear(pg::ZEROMAP | pg::ZSWAP | pg::SHADOW);
        self.memcgs[m as usize].swap_pages += 1;
        self.memcgs[m as usize].swapcached += 1;
        Ok(())
    }

    /// NR_SHMEM per memcg (pages of tmpfs files in their mappings).
    pub(crate) fn nr_shmem_by_memcg(&self) -> Vec<u64> {
        let mut v = vec![0u64; self.memcgs.len()];
        for p in &self.pages {
            if p.flags & (pg::SHMEM | pg::RESIDENT | pg::SWAPCACHE) == pg::SHMEM | pg::RESIDENT {
                v[p.memcg as usize] += 1;
            }
        }
        v
    }
}
