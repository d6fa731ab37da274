//! mlocked memory and the unevictable LRU: mm/mlock.c of 6.12 (read in Debian's 6.12.117).
//!
//! A region with `mlock = true` is mlock()ed right after it is mapped, as the cgroup
//! selftests' alloc_anon_mlock does (mmap, then one mlock() over the whole range): mlock_fixup
//! sets VM_LOCKED and __mm_populate faults every page in, inside that one system call. The
//! scheduler drives the populate (sched.rs, `Proc::populate`); each fault goes through
//! do_anonymous_page, whose folio_add_lru_vma sees VM_LOCKED and calls mlock_new_folio:
//! PG_mlocked set, NR_MLOCK and unevictable_pgs_mlocked counted, and (__mlock_new_folio) the
//! folio, not evictable, goes on LRU_UNEVICTABLE with unevictable_pgs_culled. Reclaim never
//! scans that list (vmscan.rs folio_evictable), so an mlocked page stays resident until exit.
//! At exit, zap_pte_range's munlock_vma_folio → __munlock_folio clears PG_mlocked
//! (unevictable_pgs_munlocked, NR_MLOCK down), the folio is evictable again and moves back
//! to an evictable list (unevictable_pgs_rescued) just before it is freed.
//!
//! Simplified: only anonymous regions, mlocked whole from the start (no munlock(2) or
//! mlock(2) of part of a region later, no MLOCK_ONFAULT, no mlockall); a page is mapped once,
//! so folio->mlock_count is always 1 and not kept; the per-CPU mlock folio batch is drained at
//! once; no RLIMIT_MEMLOCK (the lab runs as root, whose CAP_IPC_LOCK lifts it). mlock() of a
//! THP region is refused by the configuration (huge-page mlock is not modelled).

use super::page::{list, pg};
use super::Mm;

impl Mm {
    /// Whether some region is mlocked: the unevictable counters and gauges are exported then
    /// only, so runs without one keep their keys.
    pub(crate) fn has_mlock(&self) -> bool {
        self.regions.iter().any(|r| r.mlock)
    }

    /// mlock_new_folio (6.12): a new folio faulted into a VM_LOCKED region, before it is
    /// added to the LRU (which then picks LRU_UNEVICTABLE: __mlock_new_folio).
    pub(crate) fn mlock_new_folio(&mut self, i: u32) {
        self.pages[i as usize].set(pg::MLOCKED);
        self.nr_mlock += 1;
        self.mlock.unevictable_pgs_mlocked += 1;
    }

    /// The unevictable half of folio_add_lru for a folio that is not evictable
    /// (__mlock_new_folio: folio_set_unevictable, unevictable_pgs_culled, lruvec_add_folio).
    pub(crate) fn add_unevictable(&mut self, i: u32) {
        self.mlock.unevictable_pgs_culled += 1;
        let m = self.pages[i as usize].memcg as usize;
        self.memcgs[m].unevictable.push_head(&mut self.pages, i);
    }

    /// munlock_vma_folio → __munlock_folio (6.12) as the mapping is zapped: the last mlock of
    /// the folio goes, PG_mlocked is cleared (unevictable_pgs_munlocked, NR_MLOCK), and the
    /// now evictable folio moves off LRU_UNEVICTABLE to its evictable list
    /// (unevictable_pgs_rescued). The caller frees it next.
    pub(crate) fn munlock_folio(&mut self, i: u32) {
        debug_assert_eq!(self.pages[i as usize].list(), list::UNEVICTABLE);
        self.lru_del(i);
        self.pages[i as usize].clear(pg::MLOCKED);
        self.nr_mlock -= 1;
        self.mlock.unevictable_pgs_munlocked += 1;
        self.mlock.unevictable_pgs_rescued += 1;
        self.lru_add(i);
    }

    /// NR_UNEVICTABLE of memcg `m`'s subtree (the node's when `m` is the root), pages.
    pub(crate) fn unevictable_tree(&self, m: u16) -> u64 {
        let end = self.memcgs[m as usize].subtree_end;
        (m..end)
            .map(|c| self.memcgs[c as usize].unevictable.len)
            .sum()
    }

    /// /proc/vmstat nr_mlock, nr_unevictable and the unevictable_pgs_* events; /proc/meminfo
    /// Mlocked and Unevictable (kB).
    pub(crate) fn export_mlock(&self, out: &mut Vec<(String, u64)>) {
        if !self.has_mlock() {
            return;
        }
        self.mlock.export("vmstat.", out);
        let unevictable = self.unevictable_tree(0);
        let gauges = [
            ("vmstat.nr_mlock", self.nr_mlock),
            ("vmstat.nr_unevictable", unevictable),
            ("meminfo.Mlocked", self.nr_mlock * 4),
            ("meminfo.Unevictable", unevictable * 4),
        ];
        out.extend(gauges.into_iter().map(|(k, v)| (k.to_string(), v)));
    }
}
