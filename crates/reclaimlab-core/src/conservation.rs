//! The page-conservation check: every page is in exactly one place and every count the model
//! keeps agrees with the pages. Debug builds run it every few thousand events (engine.rs);
//! a violation is a model bug, reported as text, never a configuration error.

use crate::mm::page::{list, pg, NONE};
use crate::mm::Mm;

impl Mm {
    /// Every page is in exactly one place, and every count agrees with the pages.
    pub fn check_conservation(&self) -> Result<(), String> {
        let mm = self;
        let mut resident = 0u64;
        let mut lru_count = vec![[0u64; 4]; mm.memcgs.len()];
        let mut zswap_lru = vec![0u64; mm.memcgs.len()];
        // LRU_UNEVICTABLE per memcg, and PG_mlocked pages (NR_MLOCK).
        let mut unevictable = vec![0u64; mm.memcgs.len()];
        let mut mlocked = 0u64;
        let mut stored = 0u64;
        let mut slots_held = 0u64;
        // Dirty and writeback file folios: the node's counts, and each inode's dirty tag and
        // writeback count (mm/page_writeback.rs).
        let mut file_dirty = 0u64;
        let mut file_writeback = 0u64;
        for (i, p) in mm.pages.iter().enumerate() {
            if p.has(pg::FILE) && p.has(pg::DIRTY | pg::WRITEBACK) {
                if !p.has(pg::RESIDENT) {
                    return Err(format!(
                        "file page {i} is dirty or under writeback but not cached (flags {:#x})",
                        p.flags
                    ));
                }
                let wb = &mm.regions[mm.region_index(i as u32)]
                    .file
                    .as_ref()
                    .expect("file pages are in file regions")
                    .wb;
                if p.has(pg::DIRTY) != wb.dirty.contains(&(i as u32)) {
                    return Err(format!(
                        "file page {i}: dirty flag and the inode's dirty tag disagree"
                    ));
                }
                file_dirty += u64::from(p.has(pg::DIRTY));
                file_writeback += u64::from(p.has(pg::WRITEBACK));
            }
            // ≤6.4 non-exclusive loads: a resident swap-cache folio may keep its zswap entry.
            let kept = mm.switches.load == crate::policy::ZswapLoad::NonExclusive
                && p.has(pg::RESIDENT)
                && p.has(pg::SWAPCACHE);
            let places = [
                p.has(pg::RESIDENT),
                p.has(pg::ZSWAP) && !kept,
                p.has(pg::ZEROMAP) && !p.has(pg::RESIDENT),
            ];
            if places.iter().filter(|&&x| x).count() > 1 {
                return Err(format!(
                    "page {i} is in more than one place (flags {:#x})",
                    p.flags
                ));
            }
            if p.has(pg::FILE) && p.has(pg::SWAPCACHE | pg::ZSWAP | pg::ZEROMAP | pg::ZERO_PFN) {
                return Err(format!(
                    "file page {i} has anonymous state (flags {:#x})",
                    p.flags
                ));
            }
            // A tmpfs page is in its file's mapping (resident, no swap state) or in swap.
            if p.has(pg::SHMEM) && p.has(pg::FILE) {
                return Err(format!(
                    "tmpfs page {i} is on the file LRUs (flags {:#x})",
                    p.flags
                ));
            }
            if p.has(pg::SHMEM)
                && p.has(pg::RESIDENT)
                && !p.has(pg::SWAPCACHE)
                && (p.slot != NONE || p.has(pg::ZSWAP | pg::ZEROMAP))
            {
                return Err(format!(
                    "tmpfs page {i} is in its mapping and in swap (flags {:#x})",
                    p.flags
                ));
            }
            if p.has(pg::ISOLATED) {
                return Err(format!("page {i} left isolated"));
            }
            if p.slot != NONE {
                slots_held += 1;
                if mm.swap.slot_page[p.slot as usize] != i as u32 {
                    return Err(format!(
                        "page {i} holds slot {} which maps to another page",
                        p.slot
                    ));
                }
            } else if p.has(pg::ZSWAP | pg::ZEROMAP | pg::SWAPCACHE)
                || (p.has(pg::SHADOW) && !p.has(pg::FILE))
            {
                return Err(format!(
                    "page {i} has swap state without a slot (flags {:#x})",
                    p.flags
                ));
            }
            if p.has(pg::MLOCKED) {
                mlocked += 1;
                if !p.has(pg::RESIDENT) || p.list() != list::UNEVICTABLE {
                    return Err(format!("mlocked page {i} is not resident on the unevictable list (flags {:#x}, list {})", p.flags, p.list()));
                }
            }
            if p.has(pg::RESIDENT) {
                resident += 1;
                if p.has(pg::ZSWAP) {
                    stored += 1;
                }
                if p.list() == list::UNEVICTABLE {
                    if !p.has(pg::MLOCKED) {
                        return Err(format!(
                            "page {i} is on the unevictable list but not mlocked"
                        ));
                    }
                    unevictable[p.memcg as usize] += 1;
                    continue;
                }
                if list::is_gen(p.list()) {
                    // Checked by check_lru_gen (mm/lru_gen.rs).
                    continue;
                }
                if !(list::INACTIVE_ANON..=list::ACTIVE_FILE).contains(&p.list()) {
                    return Err(format!("resident page {i} is on list {}", p.list()));
                }
                if p.list() != p.lru_list() {
                    return Err(format!("page {i}: active flag and list disagree"));
                }
                lru_count[p.memcg as usize][p.list() as usize - 1] += 1;
            } else {
                if p.has(pg::MAPPED) && !p.has(pg::ZERO_PFN) {
                    return Err(format!("page {i} mapped but not resident"));
                }
                if p.has(pg::ZSWAP) {
                    stored += 1;
                    if p.handle != NONE {
                        if p.list() != list::ZSWAP {
                            return Err(format!("zswap page {i} is not on the zswap LRU"));
                        }
                        // The list that holds it: the root's with the global LRU (≤6.7), the
                        // page's memcg's otherwise.
                        zswap_lru[mm.zswap_lru_owner(i as u32) as usize] += 1;
                    }
                } else if p.list() != list::NONE {
                    return Err(format!("non-resident page {i} is on list {}", p.list()));
                }
            }
        }
        for (m, mc) in mm.memcgs.iter().enumerate() {
            for (l, (list, counted)) in mc.lru.iter().zip(lru_count[m]).enumerate() {
                if list.len != counted {
                    return Err(format!(
                        "memcg {} list {} has len {} but {counted} pages",
                        mc.path,
                        l + 1,
                        list.len
                    ));
                }
            }
            if mc.unevictable.len != unevictable[m] {
                return Err(format!(
                    "memcg {} unevictable list has len {} but {} pages",
                    mc.path, mc.unevictable.len, unevictable[m]
                ));
            }
            if mc.zswap_lru.len != zswap_lru[m] {
                return Err(format!(
                    "memcg {} zswap LRU len {} but {} entries",
                    mc.path, mc.zswap_lru.len, zswap_lru[m]
                ));
            }
        }
        self.check_lru_gen()?;
        let tagged: u64 = mm
            .regions
            .iter()
            .filter_map(|r| r.file.as_ref())
            .map(|f| f.wb.dirty.len() as u64)
            .sum();
        let inode_wb: u64 = mm
            .regions
            .iter()
            .filter_map(|r| r.file.as_ref())
            .map(|f| f.wb.nr_writeback)
            .sum();
        if (file_dirty, file_writeback) != (mm.dirty.nr_file_dirty, mm.dirty.nr_file_writeback)
            || tagged != file_dirty
            || inode_wb != file_writeback
        {
            return Err(format!(
                "file pages: {file_dirty} dirty and {file_writeback} under writeback, but NR_FILE_DIRTY {} / {tagged} tagged, writeback {} / {inode_wb} by inode",
                mm.dirty.nr_file_dirty, mm.dirty.nr_file_writeback
            ));
        }
        if mlocked != mm.nr_mlock {
            return Err(format!(
                "NR_MLOCK {} but {mlocked} mlocked pages",
                mm.nr_mlock
            ));
        }
        if resident != mm.nr_resident {
            return Err(format!(
                "nr_resident {} but {} resident pages",
                mm.nr_resident, resident
            ));
        }
        if stored != mm.zswap.stored_pages {
            return Err(format!(
                "zswap stored_pages {} but {} entries",
                mm.zswap.stored_pages, stored
            ));
        }
        let pool = mm.pool_pages();
        let tables: u64 = mm
            .regions
            .iter()
            .map(|r| r.page_tables.iter().filter(|&&t| t).count() as u64)
            .sum();
        if tables != mm.nr_page_table_pages {
            return Err(format!(
                "nr_page_table_pages {} but {tables} tables allocated",
                mm.nr_page_table_pages
            ));
        }
        // Blocks held by kernel_alloc phases (mm/kalloc.rs; Phys::check counts them).
        let kernel = mm.phys.as_ref().map_or(0, |ph| ph.kblock_pages);
        if mm.nr_free + resident + pool + mm.reserved + tables + kernel != mm.totalram {
            return Err(format!(
                "frames: free {} + resident {resident} + pools {pool} + reserved {} + page tables {tables} + kernel_alloc {kernel} != total {}",
                mm.nr_free, mm.reserved, mm.totalram
            ));
        }
        if mm.swap.total_swap_pages - mm.swap.nr_swap_pages != slots_held {
            return Err(format!(
                "{} slots in use but {slots_held} held by pages",
                mm.swap.total_swap_pages - mm.swap.nr_swap_pages
            ));
        }
        if let Some(ph) = &mm.phys {
            ph.check(mm)?;
        }
        mm.check_analytic()?;
        Ok(())
    }
}
