//! cgroup writeback on cgroup v2: the memcg dirty domain (CONFIG_CGROUP_WRITEBACK), as read in
//! mm/page-writeback.c and mm/memcontrol.c of 6.12 (unchanged in what is modelled here through
//! 6.18).
//!
//! On the default hierarchy an inode's dirty pages are written by the bdi_writeback of the
//! memcg that owns the inode (inode_attach_wb at its first dirtying: the folio's memcg), and
//! that wb belongs to a second dirty domain besides the global one: the memcg's wb_domain
//! (`mdtc` in balance_dirty_pages). Its limits are dirty_ratio / dirty_background_ratio of what
//! the memcg could hold of page cache (`mdtc_calc_avail`), so a writer in a memcg far smaller
//! than the machine is throttled at a fraction of its memcg, and its wb's background
//! writeback runs while the memcg's dirty pages are over that domain's background threshold
//! (`wb_over_bg_thresh`). Cgroup v1 has no memcg domain (the inodes are the bdi's root wb's
//! and only the global domain throttles), and neither has the root memcg
//! (`mem_cgroup_wb_domain` is NULL for it): both keep the global domain only
//! (page_writeback.rs).
//!
//! What this file gives page_writeback.rs:
//! * [`Mm::cgwb_memcg`]: the memcg whose wb writes a file region's inode, if it has a domain;
//! * [`Mm::mdtc`]: `balance_domain_limits(mdtc)` — `mem_cgroup_wb_stats`, `mdtc_calc_avail`,
//!   `domain_dirty_limits` for a memcg domain, and its freerun ceiling;
//! * [`Mm::memcg_over_bg_thresh`]: `domain_over_bg_thresh` on the memcg domain (the second
//!   half of `wb_over_bg_thresh`);
//! * [`Mm::oldest_dirty_inode_of`]: the memcg wb's b_io order (its own inodes only);
//! * [`wb_max_pause_jiffies`]: the longest pause when the memcg domain throttles.
//!
//! Simplified (each says what the kernel does instead):
//! * An inode's wb is the memcg of the process that owns the file region (the model's files
//!   are not shared between processes, and their folios are charged to that memcg); the
//!   kernel's foreign-inode detection and wb switching (inode_switch_wbs,
//!   mem_cgroup_track_foreign_dirty / mem_cgroup_flush_foreign) never has anything to do.
//! * The memcg's statistics are read now, not at the last ratelimited flush
//!   (mem_cgroup_flush_stats_ratelimited).
//! * One wb per memcg domain: its share of the domain's thresholds (`__wb_calc_thresh`, by
//!   recent writeout completions) is the whole domain, so the per-wb checks
//!   (`wb_dirty_limits`, `wb_bg_dirty_limits`) say what the domain's say and are left out;
//!   the domain's `dirty_limit` (hard_dirty_limit's slowly following limit) is its thresh.
//! * The memcg wb's flusher work runs on the filesystem's one flusher actor, after the global
//!   domain's background work (the kernel runs each wb's work item on its own kworker).

use super::page::{list, PAGE_SIZE};
use super::Mm;
use crate::sim::HZ;

/// A memcg dirty domain as balance_dirty_pages sees it (struct dirty_throttle_control, memcg
/// fields), in pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mdtc {
    /// The memcg whose domain this is (the wb's memcg).
    pub memcg: u16,
    /// mdtc->avail: what the memcg could hold of page cache (mdtc_calc_avail).
    pub avail: u64,
    /// mdtc->dirty: NR_FILE_DIRTY (+ NR_WRITEBACK with include_writeback) of the memcg.
    pub dirty: u64,
    pub thresh: u64,
    pub bg_thresh: u64,
}

impl Mdtc {
    /// dirty_freerun_ceiling: (thresh + bg_thresh) / 2.
    pub fn freerun_ceiling(&self) -> u64 {
        (self.thresh + self.bg_thresh) / 2
    }

    /// domain_dirty_freerun (!strictlimit): at or below the freerun ceiling.
    pub fn freerun(&self) -> bool {
        self.dirty <= self.freerun_ceiling()
    }
}

/// mdtc_calc_avail: the memcg's file pages plus what it could still allocate (its headroom),
/// capped by the clean memory of the rest of the system ("memory which can be further
/// allocated to a memcg domain is capped by system-wide clean memory excluding the amount
/// being used in the domain").
pub fn mdtc_calc_avail(
    filepages: u64,
    headroom: u64,
    m_dirty: u64,
    g_avail: u64,
    g_dirty: u64,
) -> u64 {
    let clean = filepages - filepages.min(m_dirty);
    let global_clean = g_avail - g_avail.min(g_dirty);
    let other_clean = global_clean - global_clean.min(clean);
    filepages + headroom.min(other_clean)
}

/// domain_dirty_limits for a memcg domain: (bg_thresh, thresh) in pages. The ratios are kept
/// per PAGE_SIZE for precision, as the kernel keeps them; vm.dirty_bytes and
/// vm.dirty_background_bytes become ratios of the global domain's available memory (they
/// "can't be applied directly to memcg domains"). A background threshold at or over the
/// limit is halved. (No rt task boost: the model's tasks are not realtime.)
pub fn memcg_dirty_limits(
    avail: u64,
    g_avail: u64,
    dirty_ratio: u64,
    dirty_background_ratio: u64,
    dirty_bytes: Option<u64>,
    dirty_background_bytes: Option<u64>,
) -> (u64, u64) {
    let per_page = |bytes: Option<u64>, ratio: u64| {
        bytes.map_or(ratio * PAGE_SIZE / 100, |b| {
            b.div_ceil(g_avail.max(1)).min(PAGE_SIZE)
        })
    };
    let ratio = per_page(dirty_bytes, dirty_ratio);
    let bg_ratio = per_page(dirty_background_bytes, dirty_background_ratio);
    let thresh = (ratio * avail / PAGE_SIZE).min(u32::MAX as u64);
    let bg = bg_ratio * avail / PAGE_SIZE;
    (if bg >= thresh { thresh / 2 } else { bg }, thresh)
}

/// wb_max_pause: the longest balance_dirty_pages sleep, in jiffies, for a wb with `wb_dirty`
/// dirty and writeback pages that writes `bw` pages a second: `wb_dirty / (1 + bw /
/// roundup_pow_of_two(1 + HZ / 8)) + 1`, at most MAX_PAUSE (HZ / 5) — "if sleeping for too
/// long, a small pool of dirty/writeback pages may go empty and disk go idle". The device's
/// write bandwidth stands for the wb's estimated avg_write_bandwidth, as in
/// page_writeback.rs. Used when the memcg domain throttles (its wb's pool is small).
pub fn wb_max_pause_jiffies(wb_dirty: u64, bw: u64) -> u64 {
    let t = wb_dirty / (1 + bw / (1 + HZ / 8).next_power_of_two()) + 1;
    t.min(HZ / 5)
}

impl Mm {
    /// The memcg whose wb owns file region `region`'s inode when that wb has a memcg dirty
    /// domain (cgroup v2, a memcg other than the root; `mdtc_valid`), else None.
    pub(crate) fn cgwb_memcg(&self, region: usize) -> Option<u16> {
        let m = self.regions[region].memcg;
        (self.cgroup_v2 && m != 0).then_some(m)
    }

    /// mem_cgroup_wb_stats for memcg `m`: (file pages, headroom, dirty, writeback) in pages.
    /// File, dirty and writeback are the memcg's and its descendants' (memcg_page_state is
    /// hierarchical); the headroom is the least `min(max, high) − usage` of the memcg and its
    /// ancestors below the root.
    pub(crate) fn mem_cgroup_wb_stats(&self, m: u16) -> (u64, u64, u64, u64) {
        let filepages =
            self.lru_size_tree(m, list::INACTIVE_FILE) + self.lru_size_tree(m, list::ACTIVE_FILE);
        let end = self.memcgs[m as usize].subtree_end;
        let (mut dirty, mut writeback) = (0, 0);
        for r in self.regions.iter() {
            if let Some(f) = r.file.as_ref().filter(|_| (m..end).contains(&r.memcg)) {
                dirty += f.wb.dirty.len() as u64;
                writeback += f.wb.nr_writeback;
            }
        }
        let headroom = self
            .memcg_ancestry(m)
            .filter(|&c| c != 0)
            .map(|c| {
                let mc = &self.memcgs[c as usize];
                let ceiling = mc.limit.min(mc.high);
                ceiling - ceiling.min(mc.usage)
            })
            .min()
            .unwrap_or(u64::MAX);
        (filepages, headroom, dirty, writeback)
    }

    /// domain_dirty_avail + domain_dirty_limits for memcg `m`'s domain (balance_domain_limits
    /// with include_writeback, or domain_over_bg_thresh's view without), given the global
    /// domain's available memory and dirty pages as balance_dirty_pages computed them.
    pub(crate) fn mdtc(&self, m: u16, include_writeback: bool, g_avail: u64, g_dirty: u64) -> Mdtc {
        let (filepages, headroom, dirty, writeback) = self.mem_cgroup_wb_stats(m);
        let dirty = dirty + if include_writeback { writeback } else { 0 };
        let avail = mdtc_calc_avail(filepages, headroom, dirty, g_avail, g_dirty);
        let vm = &self.knobs.vm;
        let (bg_thresh, thresh) = memcg_dirty_limits(
            avail,
            g_avail,
            vm.dirty_ratio as u64,
            vm.dirty_background_ratio as u64,
            vm.dirty_bytes,
            vm.dirty_background_bytes,
        );
        Mdtc {
            memcg: m,
            avail,
            dirty,
            thresh,
            bg_thresh,
        }
    }

    /// domain_over_bg_thresh on memcg `m`'s domain: its dirty pages (not those under
    /// writeback: "dirty background will ignore pages being written") over its background
    /// threshold. Returns how many pages over, 0 if not.
    pub(crate) fn memcg_over_bg_thresh(&self, m: u16) -> u64 {
        let g_avail = self.global_dirtyable_memory();
        // The global domain's dirty count as domain_dirty_avail(gdtc, false) reads it.
        let d = self.mdtc(m, false, g_avail, self.dirty.nr_file_dirty);
        d.dirty.saturating_sub(d.bg_thresh)
    }

    /// The memcg wbs of filesystem `fs` (the distinct owners of its dirty inodes that have a
    /// memcg domain), in memcg order.
    pub(crate) fn cgwb_memcgs(&self, fs: usize) -> Vec<u16> {
        if !self.cgroup_v2 {
            return Vec::new();
        }
        let mut out: Vec<u16> = self
            .regions
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                r.file
                    .as_ref()
                    .is_some_and(|f| f.fs as usize == fs && f.wb.dirtied_when.is_some())
            })
            .filter_map(|(k, _)| self.cgwb_memcg(k))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The dirty inode of filesystem `fs` owned by memcg `m`'s wb with the oldest
    /// dirtied_when (that wb's b_io order).
    pub(crate) fn oldest_dirty_inode_of(&self, fs: usize, m: u16) -> Option<usize> {
        self.oldest_dirty_inode_where(fs, |k, _| self.cgwb_memcg(k) == Some(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avail_is_the_memcgs_file_pages_plus_headroom_capped_by_other_clean_memory() {
        // 1000 file pages (400 dirty) and 5000 pages of headroom, in a system with 100000
        // dirtyable pages of which 1000 are dirty: the headroom fits in the others' clean.
        assert_eq!(mdtc_calc_avail(1000, 5000, 400, 100_000, 1000), 6000);
        // Little clean memory elsewhere: 2000 clean globally, 600 of them the memcg's own.
        assert_eq!(mdtc_calc_avail(1000, 5000, 400, 3000, 1000), 1000 + 1400);
        // No headroom (at memory.max): only its own file pages.
        assert_eq!(mdtc_calc_avail(1000, 0, 400, 100_000, 1000), 1000);
    }

    #[test]
    fn limits_are_per_page_ratios_and_bytes_scale_by_global_avail() {
        // 20% and 10% as 819 and 409 per 4096: slightly below a fifth and a tenth.
        assert_eq!(
            memcg_dirty_limits(32768, 250_000, 20, 10, None, None),
            (409 * 32768 / 4096, 819 * 32768 / 4096)
        );
        // dirty_bytes of 100 MiB over 250000 available pages: ceil(104857600 / 250000) = 420
        // per 4096 (about 10.3%); background ratio 10% stays.
        assert_eq!(
            memcg_dirty_limits(32768, 250_000, 20, 10, Some(100 << 20), None),
            (409 * 8, 420 * 8)
        );
        // A background threshold at the limit is halved.
        assert_eq!(
            memcg_dirty_limits(4096, 250_000, 10, 10, None, None),
            (409 / 2, 409)
        );
    }

    #[test]
    fn max_pause_follows_the_wbs_pool_and_bandwidth() {
        // 1 GB/s = 244140 pages/s: 1000 pages take 1000 / (1 + 244140 / 32) + 1 = 1 jiffy.
        assert_eq!(wb_max_pause_jiffies(1000, 244_140), 1);
        // 20 MB/s = 4882 pages/s: 50000 pages, 50000 / 153 + 1 = 327, capped at HZ / 5 = 50.
        assert_eq!(wb_max_pause_jiffies(50_000, 4882), 50);
        assert_eq!(wb_max_pause_jiffies(2000, 4882), 2000 / 153 + 1);
    }

    #[test]
    fn freerun_ceiling_is_the_mean_of_the_thresholds() {
        let d = Mdtc {
            memcg: 1,
            avail: 0,
            dirty: 300,
            thresh: 400,
            bg_thresh: 200,
        };
        assert!(d.freerun());
        assert!(!Mdtc { dirty: 301, ..d }.freerun());
    }
}
