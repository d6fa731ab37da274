//! Workingset detection for anonymous and file pages (mm/workingset.c, classic LRU, 6.12 ≈ 6.18):
//! workingset_eviction leaves a shadow with the lruvec's nonresident_age; workingset_refault
//! compares the refault distance with the workingset size and activates the new folio.
//!
//! Simplifications: shadows keep the low 32 bits of the clock (no bucket_order: a simulated
//! machine's clock never wraps 2^32 evictions within one refault distance in practice); the
//! eviction memcg is the page's own memcg (no reparenting).

use super::page::{list, pg};
use super::Mm;

impl Mm {
    /// workingset_eviction: store the clock in the page's shadow and advance the clock.
    pub fn workingset_eviction(&mut self, i: u32) {
        if self.lru_gen_enabled() {
            return self.lru_gen_eviction(i);
        }
        let m = self.pages[i as usize].memcg;
        let clock = self.memcgs[m as usize].nonresident_age;
        let p = &mut self.pages[i as usize];
        p.shadow = clock as u32;
        p.set(pg::SHADOW);
        self.age_nonresident(m, 1);
    }

    /// workingset_refault for a swap-in or page cache insertion that found a shadow: counts
    /// the refault and decides whether the new folio starts active. Returns true if it was
    /// activated.
    pub fn workingset_refault(&mut self, i: u32) -> bool {
        if self.lru_gen_enabled() {
            return self.lru_gen_refault(i);
        }
        let (m, shadow, was_workingset, file) = {
            let p = &self.pages[i as usize];
            (p.memcg, p.shadow, p.has(pg::WORKINGSET), p.has(pg::FILE))
        };
        self.count_workingset_refault(m, file);
        // workingset_test_recent(flush = true): mem_cgroup_flush_stats_ratelimited of the
        // eviction memcg (6.12, 6.18; 6.1's mem_cgroup_flush_stats_delayed has the same test).
        self.mem_cgroup_flush_stats_ratelimited(m);
        let now = self.memcgs[m as usize].nonresident_age as u32;
        let distance = now.wrapping_sub(shadow) as u64;
        // workingset_test_recent: the workingset is active_file, plus inactive_file for an
        // anon refault, plus (swap available) active_anon, plus inactive_anon for a file
        // refault. lruvec_page_state: the sizes as of the last memcg stats flush.
        let mut workingset_size = self.lru_size_stat(m, list::ACTIVE_FILE);
        if !file {
            workingset_size += self.lru_size_stat(m, list::INACTIVE_FILE);
        }
        // mem_cgroup_get_nr_swap_pages of the eviction memcg: free swap under its memory.swap.max.
        if self.mem_cgroup_get_nr_swap_pages(m) > 0 {
            workingset_size += self.lru_size_stat(m, list::ACTIVE_ANON);
            if file {
                workingset_size += self.lru_size_stat(m, list::INACTIVE_ANON);
            }
        }
        // The new folio gets PG_workingset back only if the refault activates it.
        self.pages[i as usize].clear(pg::SHADOW | pg::WORKINGSET);
        if distance > workingset_size {
            return false;
        }
        self.pages[i as usize].set(pg::ACTIVE);
        self.age_nonresident(m, 1);
        if file {
            self.vm_file.workingset_activate_file += 1;
            self.memcgs[m as usize].file_events.workingset_activate_file += 1;
        } else {
            self.vm.workingset_activate_anon += 1;
            self.memcgs[m as usize].events.workingset_activate_anon += 1;
        }
        if was_workingset {
            // The page record kept PG_workingset across eviction: that is the shadow's bit.
            self.pages[i as usize].set(pg::WORKINGSET);
            if file {
                self.vm_file.workingset_restore_file += 1;
                self.memcgs[m as usize].file_events.workingset_restore_file += 1;
            } else {
                self.vm.workingset_restore_anon += 1;
                self.memcgs[m as usize].events.workingset_restore_anon += 1;
            }
            // lru_note_cost_refault.
            self.lru_note_cost(m, file, 1, 0);
        }
        true
    }

    /// WORKINGSET_REFAULT_{ANON,FILE}: a refault of a shadow entry, on the node and the memcg
    /// (workingset_refault in 6.12, and the multi-gen LRU's lru_gen_refault, count the same).
    pub(super) fn count_workingset_refault(&mut self, m: u16, file: bool) {
        if file {
            self.vm_file.workingset_refault_file += 1;
            self.memcgs[m as usize].file_events.workingset_refault_file += 1;
        } else {
            self.vm.workingset_refault_anon += 1;
            self.memcgs[m as usize].events.workingset_refault_anon += 1;
        }
    }
}
