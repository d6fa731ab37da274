//! Page reclaim on the classic two-list LRU: mm/vmscan.c as of 6.18 (read in 6.12.107; the
//! 6.18 delta does not touch these paths for anonymous memory).
//!
//! Modelled: do_try_to_free_pages (direct and memcg limit reclaim) with its priority loop and
//! force_deactivate retry; try_to_free_mem_cgroup_pages; balance_pgdat one priority pass per
//! kswapd event, kswapd_age_node, kswapd_failures; shrink_node with the partial memcg walk;
//! prepare_scan_control (may_deactivate, file_is_tiny, cache_trim_mode); get_scan_count;
//! shrink_lruvec with its proportional cut; shrink_active_list; shrink_inactive_list;
//! shrink_folio_list for anonymous folios; lru_note_cost; shrink_slab for the zswap and
//! zsmalloc shrinkers.
//!
//! File pages (mm/filemap.rs) are scanned and reclaimed clean, without IO (shrink_file_folio);
//! dirty file pages and reclaim's writeback policy are not modelled yet.
//!
//! Simplified: one node and one zone (watermarks summed); no reclaim_throttle / too_many_isolated /
//! pfmemalloc throttling (they concern file writeback and highly parallel reclaim); no soft
//! limit reclaim; no compaction. memory.min/low protection (6.12) is applied in shrink_node's
//! memcg walk (shrink_node_memcgs), get_scan_count and do_try_to_free_pages' memcg_low retry. The multi-gen LRU is mm/lru_gen.rs,
//! entered from shrink_node, shrink_lruvec and kswapd_step when kernel.lru_gen.enabled.

use super::page::{list, pg, NONE};
use super::{Actor, Ctx, Mm, MAX_RECLAIM_RETRIES, SWAP_CLUSTER_MAX};
use crate::config::VmSysctls;
use crate::latency::Kind;
use crate::mm::page_io::Writeout;
use crate::page_alloc::PAGE_ALLOC_COSTLY_ORDER;
use crate::policy::{KswapdFileWriteback, WritebackThrottle};
use crate::sim::EventKind;
use crate::stats::trace::{prio, Shrinker};

pub const DEF_PRIORITY: i32 = 12;

/// folio_evictable (mm/internal.h, 6.12): a folio of an unevictable mapping (ramfs, SHM_LOCK;
/// not modelled) or an mlocked one (PG_mlocked, mm/mlock.rs) may not be reclaimed. The LRU add
/// paths put such a folio on LRU_UNEVICTABLE instead of a list reclaim scans, so no scan ever
/// sees it: the kernel's culling of mlocked folios that reclaim finds (vmscan's
/// folio_putback_lru of an unevictable folio) has nothing to do here.
#[inline]
pub(crate) fn folio_evictable(p: &super::page::Page) -> bool {
    !p.has(pg::MLOCKED)
}
/// MAX_SWAPPINESS.
const MAX_SWAPPINESS: u64 = 200;
/// SHRINK_BATCH: the generic shrinker batch.
const SHRINK_BATCH: u64 = 128;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reclaimer {
    Kswapd,
    Direct,
    /// Memcg limit (or memory.high) reclaim: cgroup_reclaim(sc).
    Memcg,
}

#[derive(Clone, Copy, Debug)]
pub struct ScanControl {
    pub nr_to_reclaim: u64,
    pub priority: i32,
    pub target: u16,
    pub kind: Reclaimer,
    pub may_writepage: bool,
    pub may_swap: bool,
    pub may_deactivate_anon: bool,
    pub may_deactivate_file: bool,
    pub force_deactivate: bool,
    pub skipped_deactivate: bool,
    pub file_is_tiny: bool,
    pub cache_trim_mode: bool,
    pub anon_cost: u64,
    pub file_cost: u64,
    pub nr_scanned: u64,
    pub nr_reclaimed: u64,
    /// sc->nr: what the scans of the current shrink_node pass met (dirty and writeback).
    pub nr: ReclaimStat,
    /// sc->memcg_low_reclaim: reclaim memcgs under their memory.low too (the retry when the
    /// first pass skipped some and reclaimed nothing).
    pub memcg_low_reclaim: bool,
    /// sc->memcg_low_skipped: a memcg was spared for its memory.low.
    pub memcg_low_skipped: bool,
    /// sc->memcg_full_walk: the shared partial walk reclaimed nothing; walk the whole subtree
    /// (the retry of do_try_to_free_pages, switch `vmscan.incremental_cgroup_iteration`).
    pub memcg_full_walk: bool,
    /// sc->proactive_swappiness: memory.reclaim's `swappiness=` argument (sc_swappiness).
    pub proactive_swappiness: Option<u64>,
    /// sc.order: the allocation order direct reclaim works for (0 but for a THP fault: its
    /// reclaim/compaction stops, compaction_ready and should_continue_reclaim in mm/phys.rs).
    pub order: u8,
}

/// struct reclaim_stat of shrink_folio_list, summed into sc->nr over a shrink_node pass.
/// Counted for file folios only (anonymous folios under swap writeback are not: see
/// shrink_folio).
#[derive(Clone, Copy, Debug, Default)]
pub struct ReclaimStat {
    pub dirty: u64,
    pub unqueued_dirty: u64,
    pub congested: u64,
    pub writeback: u64,
    pub immediate: u64,
    pub taken: u64,
    pub file_taken: u64,
}

/// The node's and lruvecs' reclaim flags about writeback (PGDAT_WRITEBACK, PGDAT_DIRTY,
/// LRUVEC_NODE_CONGESTED on the root lruvec, LRUVEC_CGROUP_CONGESTED per memcg).
#[derive(Clone, Debug, Default)]
pub struct PgdatFlags {
    pub writeback: bool,
    pub dirty: bool,
    pub node_congested: bool,
    pub cgroup_congested: Vec<bool>,
}

/// Why reclaim_throttle sleeps (enum vmscan_throttle_state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Throttle {
    Writeback,
    Congested,
}

impl ScanControl {
    pub fn new(kind: Reclaimer, target: u16, nr_to_reclaim: u64) -> ScanControl {
        ScanControl {
            nr_to_reclaim,
            priority: DEF_PRIORITY,
            target,
            kind,
            may_writepage: true,
            may_swap: true,
            may_deactivate_anon: false,
            may_deactivate_file: false,
            force_deactivate: false,
            skipped_deactivate: false,
            file_is_tiny: false,
            cache_trim_mode: false,
            anon_cost: 0,
            file_cost: 0,
            nr_scanned: 0,
            nr_reclaimed: 0,
            nr: ReclaimStat::default(),
            memcg_low_reclaim: false,
            memcg_low_skipped: false,
            memcg_full_walk: false,
            proactive_swappiness: None,
            order: 0,
        }
    }

    fn cgroup_reclaim(&self) -> bool {
        self.kind == Reclaimer::Memcg
    }

    /// writeback_throttling_sane: false only for cgroup v1 memcg reclaim, which has no dirty
    /// throttling of its own and waits on writeback in shrink_folio_list instead.
    fn writeback_throttling_sane(&self, v2: bool) -> bool {
        !self.cgroup_reclaim() || v2
    }
}

/// calculate_min_free_kbytes: sqrt(16 × lowmem KiB), clamped to [128, 262144]. It runs at
/// boot (init_per_zone_wmark_min) before any watermark is set, so lowmem is all of memory.
fn default_min_free_kbytes(pages: u64) -> u64 {
    let kb = pages * 4;
    ((16 * kb) as f64).sqrt().floor().clamp(128.0, 262_144.0) as u64
}

/// pageblock_nr_pages on x86-64 (pageblock_order = HPAGE_PMD_ORDER = 9).
const PAGEBLOCK_NR_PAGES: u64 = 512;
/// MIGRATE_PCPTYPES: UNMOVABLE, MOVABLE, RECLAIMABLE.
const MIGRATE_PCPTYPES: u64 = 3;
/// ZONE_DMA spans the first 16 MiB, ZONE_DMA32 the rest below 4 GiB (x86-64).
const DMA_END_PAGES: u64 = (16 << 20) / 4096;
const DMA32_END_PAGES: u64 = (4 << 30) / 4096;

/// The zones up to ZONE_NORMAL that a machine of `totalram` pages populates, as x86-64 lays
/// memory out: DMA always, DMA32 above 16 MiB, Normal above 4 GiB. Simplified: memory is
/// taken as one range from pfn 0, so the PCI hole below 4 GiB, which moves RAM above it (a
/// Normal zone) on most machines of 3 GiB or more, is not modelled; no ZONE_MOVABLE.
fn populated_zones(totalram: u64) -> u64 {
    1 + u64::from(totalram > DMA_END_PAGES) + u64::from(totalram > DMA32_END_PAGES)
}

/// set_recommended_min_free_kbytes (mm/khugepaged.c, 6.1 to 6.18 alike), which khugepaged's
/// start (start_stop_khugepaged, at boot and on every write of the enabled knob) applies:
/// per populated zone up to ZONE_NORMAL, 2 free pageblocks plus MIGRATE_PCPTYPES² pageblocks
/// for the fallbacks, at most 5% of nr_free_buffer_pages (the pages above each zone's high
/// watermark, which the boot value has set by then: here totalram less the boot high mark).
fn recommended_min_free_kbytes(totalram: u64, boot_high: u64) -> u64 {
    let zones = populated_zones(totalram);
    let recommended =
        PAGEBLOCK_NR_PAGES * zones * 2 + PAGEBLOCK_NR_PAGES * zones * MIGRATE_PCPTYPES.pow(2);
    recommended.min(totalram.saturating_sub(boot_high) / 20) * 4
}

/// (min, low, high) in pages from a min_free_kbytes, as __setup_per_zone_wmarks sets them
/// for one zone (the model's zone is the whole machine; see docs/model/vmscan.md).
fn wmarks_from(min_free_kbytes: u64, vm: &VmSysctls, totalram: u64) -> (u64, u64, u64) {
    let wmark_min = min_free_kbytes / 4;
    let gap = (wmark_min / 4).max(totalram * vm.watermark_scale_factor as u64 / 10_000);
    (wmark_min, wmark_min + gap, wmark_min + 2 * gap)
}

/// The effective vm.min_free_kbytes: the scenario's value if it sets one (a value written
/// after boot stays: khugepaged only raises it when its enabled knob is written again);
/// otherwise the boot value, raised to khugepaged's recommendation when THP is enabled
/// (`thp_khugepaged`: ThpEnabled::khugepaged_runs), as the kernel does at khugepaged's start.
pub(crate) fn min_free_kbytes(vm: &VmSysctls, thp_khugepaged: bool, totalram: u64) -> u64 {
    if let Some(kb) = vm.min_free_kbytes {
        return kb;
    }
    let boot = default_min_free_kbytes(totalram);
    if !thp_khugepaged {
        return boot;
    }
    let (_, _, boot_high) = wmarks_from(boot, vm, totalram);
    boot.max(recommended_min_free_kbytes(totalram, boot_high))
}

/// The zone watermarks (min, low, high) in pages, from the effective min_free_kbytes and
/// vm.watermark_scale_factor.
pub(crate) fn watermarks(vm: &VmSysctls, thp_khugepaged: bool, totalram: u64) -> (u64, u64, u64) {
    wmarks_from(min_free_kbytes(vm, thp_khugepaged, totalram), vm, totalram)
}

/// int_sqrt.
fn int_sqrt(x: u64) -> u64 {
    let mut r = (x as f64).sqrt() as u64;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r
}

/// Which of the reclaim outcomes shrink_folio_list reached for a page.
pub(super) enum Fate {
    Freed,
    Keep,
    Activate,
}

/// What folio_check_references decided (FOLIOREF_*): activate, keep on the inactive list, or
/// go on to reclaim; `referenced_folio` (PG_referenced was set) matters to dirty file folios.
enum References {
    Activate,
    Keep,
    Reclaim { referenced_folio: bool },
}

impl Mm {
    /// inactive_is_low: inactive × ratio < active, ratio = int_sqrt(10 × GiB) (1 below 1 GiB).
    fn inactive_is_low(&self, m: u16, inactive: u8) -> bool {
        let inact = self.lru_size_stat(m, inactive);
        let act = self.lru_size_stat(m, inactive + 1);
        let gb = (inact + act) >> (30 - 12);
        let ratio = if gb > 0 { int_sqrt(10 * gb) } else { 1 };
        inact * ratio < act
    }

    /// snapshot_refaults: remember WORKINGSET_ACTIVATE of the target lruvec.
    fn snapshot_refaults(&mut self, target: u16) {
        self.memcgs[target as usize].refaults_snapshot = self.workingset_activate_stat(target);
        self.memcgs[target as usize].refaults_snapshot_file =
            self.workingset_activate_file_stat(target);
    }

    /// lru_note_cost: IO costs 32 × the pages written, rotations 1 each; added to this lruvec
    /// and every ancestor, halving both costs whenever they exceed a quarter of the lists.
    pub fn lru_note_cost(&mut self, m: u16, file: bool, nr_io: u64, nr_rotated: u64) {
        let cost = nr_io * SWAP_CLUSTER_MAX + nr_rotated;
        let mut c = Some(m);
        while let Some(i) = c {
            let lrusize: u64 = (1..=4).map(|l| self.lru_size_stat(i, l)).sum();
            let mc = &mut self.memcgs[i as usize];
            if file {
                mc.file_cost += cost;
            } else {
                mc.anon_cost += cost;
            }
            if mc.file_cost + mc.anon_cost > lrusize / 4 {
                mc.file_cost /= 2;
                mc.anon_cost /= 2;
            }
            c = mc.parent;
        }
    }

    /// can_reclaim_anon_pages for the lruvec of memcg `m` (6.12 get_scan_count passes the
    /// lruvec's memcg): free swap under memory.swap.max exists (zswap sits behind slot
    /// allocation). No demotion.
    fn can_reclaim_anon(&self, m: u16) -> bool {
        self.mem_cgroup_get_nr_swap_pages(m) > 0
    }

    /// can_age_anon_pages: aging the anon LRU is worth it whenever swap exists at all.
    fn can_age_anon(&self) -> bool {
        self.swap.total_swap_pages > 0
    }

    pub(super) fn swappiness_of(&self, m: u16) -> u64 {
        // v1 uses the per-memcg memory.swappiness for non-root memcgs; v2 and root use vm.swappiness.
        if !self.cgroup_v2 && m != 0 {
            self.memcgs[m as usize].swappiness as u64
        } else {
            self.knobs.vm.swappiness as u64
        }
    }

    /// sc_swappiness (6.12): memory.reclaim's `swappiness=` if given, else the memcg's.
    pub(super) fn sc_swappiness(&self, sc: &ScanControl, m: u16) -> u64 {
        sc.proactive_swappiness
            .unwrap_or_else(|| self.swappiness_of(m))
    }

    /// prepare_scan_control.
    fn prepare_scan_control(&self, sc: &mut ScanControl) {
        let t = &self.memcgs[sc.target as usize];
        sc.anon_cost = t.anon_cost;
        sc.file_cost = t.file_cost;
        let refaults = self.workingset_activate_stat(sc.target);
        sc.may_deactivate_anon = sc.force_deactivate
            || refaults != t.refaults_snapshot
            || self.inactive_is_low(sc.target, list::INACTIVE_ANON);
        let refaults_file = self.workingset_activate_file_stat(sc.target);
        sc.may_deactivate_file = sc.force_deactivate
            || refaults_file != t.refaults_snapshot_file
            || self.inactive_is_low(sc.target, list::INACTIVE_FILE);
        let inactive_file = self.lru_size_stat(sc.target, list::INACTIVE_FILE);
        sc.cache_trim_mode = !sc.may_deactivate_file && (inactive_file >> sc.priority) > 0;
        sc.file_is_tiny = false;
        if !sc.cgroup_reclaim() {
            // The node's file pages, now (node_page_state).
            let file = self.lru_size_tree(0, list::INACTIVE_FILE)
                + self.lru_size_tree(0, list::ACTIVE_FILE);
            let anon = self.lru_size_tree(0, list::INACTIVE_ANON);
            sc.file_is_tiny = file + self.nr_free <= self.wmark_high
                && !sc.may_deactivate_anon
                && (anon >> sc.priority) > 0;
        }
    }

    /// get_scan_count → scan targets for [inactive_anon, active_anon, inactive_file, active_file].
    fn get_scan_count(&self, m: u16, sc: &mut ScanControl) -> [u64; 4] {
        #[derive(PartialEq)]
        enum Balance {
            Equal,
            Fract,
            File,
            Anon,
        }
        let swappiness = self.sc_swappiness(sc, m);
        let mut fraction = [0u64; 2];
        let mut denominator = 1u64;
        let balance = if !sc.may_swap
            || !self.can_reclaim_anon(m)
            || (sc.cgroup_reclaim() && swappiness == 0)
        {
            Balance::File
        } else if sc.priority == 0 && swappiness > 0 {
            Balance::Equal
        } else if sc.file_is_tiny {
            Balance::Anon
        } else if sc.cache_trim_mode {
            Balance::File
        } else {
            let total = sc.anon_cost + sc.file_cost;
            let anon_cost = total + sc.anon_cost;
            let file_cost = total + sc.file_cost;
            let total = anon_cost + file_cost;
            let ap = swappiness * (total + 1) / (anon_cost + 1);
            let fp = (MAX_SWAPPINESS - swappiness) * (total + 1) / (file_cost + 1);
            fraction = [ap, fp];
            denominator = ap + fp;
            Balance::Fract
        };
        let mut nr = [0u64; 4];
        let (min, low) = self.mem_cgroup_protection(sc.target, m);
        for (idx, which) in [
            list::INACTIVE_ANON,
            list::ACTIVE_ANON,
            list::INACTIVE_FILE,
            list::ACTIVE_FILE,
        ]
        .into_iter()
        .enumerate()
        {
            let file = which >= list::INACTIVE_FILE;
            // lruvec_lru_size: folios still in an lru_add batch are not on the list yet.
            let size = self.lruvec_lru_size(m, which);
            let scan = if min > 0 || low > 0 {
                // Proportional protection (6.12 get_scan_count; apply_proportional_protection
                // in later trees): scan only the share of the list that the memcg's usage
                // exceeds its protection by, at least SWAP_CLUSTER_MAX. memory.low counts
                // until the memcg_low retry, and asks for that retry.
                let protection = if !sc.memcg_low_reclaim && low > min {
                    sc.memcg_low_skipped = true;
                    low
                } else {
                    min
                };
                let cgroup_size = self.memcgs[m as usize].usage.max(protection);
                (size - (size as u128 * protection as u128 / (cgroup_size + 1) as u128) as u64)
                    .max(SWAP_CLUSTER_MAX)
            } else {
                size
            } >> sc.priority;
            nr[idx] = match balance {
                Balance::Equal => scan,
                Balance::Fract => scan * fraction[file as usize] / denominator.max(1),
                Balance::File => {
                    if file {
                        scan
                    } else {
                        0
                    }
                }
                Balance::Anon => {
                    if file {
                        0
                    } else {
                        scan
                    }
                }
            };
        }
        nr
    }

    /// shrink_lruvec. The scan loop runs under a block plug, so swap-outs of this pass to
    /// consecutive slots merge into larger requests (crate::block).
    fn shrink_lruvec(&mut self, ctx: &mut Ctx, m: u16, sc: &mut ScanControl) {
        if self.lru_gen_enabled() {
            // Only memcg reclaim gets here with the multi-gen LRU (root reclaim takes
            // lru_gen_shrink_node).
            return self.lru_gen_shrink_lruvec(ctx, m, sc);
        }
        let mut nr = self.get_scan_count(m, sc);
        let targets = nr;
        let proportional = sc.kind == Reclaimer::Direct && sc.priority == DEF_PRIORITY;
        let mut nr_reclaimed = 0;
        self.blk_start_plug();
        while nr[0] > 0 || nr[3] > 0 || nr[2] > 0 {
            for idx in 0..4 {
                if nr[idx] == 0 {
                    continue;
                }
                let n = nr[idx].min(SWAP_CLUSTER_MAX);
                nr[idx] -= n;
                let which = [
                    list::INACTIVE_ANON,
                    list::ACTIVE_ANON,
                    list::INACTIVE_FILE,
                    list::ACTIVE_FILE,
                ][idx];
                if which == list::ACTIVE_ANON || which == list::ACTIVE_FILE {
                    let may = if which == list::ACTIVE_ANON {
                        sc.may_deactivate_anon
                    } else {
                        sc.may_deactivate_file
                    };
                    if may {
                        self.shrink_active_list(ctx, n, m, which, sc);
                    } else {
                        sc.skipped_deactivate = true;
                    }
                } else {
                    nr_reclaimed += self.shrink_inactive_list(ctx, n, m, which, sc);
                }
            }
            if nr_reclaimed < sc.nr_to_reclaim || proportional {
                continue;
            }
            // Enough reclaimed: stop the smaller-remaining type and scale the other so that the
            // scan keeps the anon/file proportion of the original targets.
            let nr_file = nr[2] + nr[3];
            let nr_anon = nr[0] + nr[1];
            if nr_file == 0 || nr_anon == 0 {
                break;
            }
            let (stop, other, percentage) = if nr_file > nr_anon {
                (
                    0usize,
                    2usize,
                    nr_anon * 100 / (targets[0] + targets[1] + 1),
                )
            } else {
                (
                    2usize,
                    0usize,
                    nr_file * 100 / (targets[2] + targets[3] + 1),
                )
            };
            nr[stop] = 0;
            nr[stop + 1] = 0;
            for l in [other, other + 1] {
                let scanned = targets[l] - nr[l];
                nr[l] = targets[l] * (100 - percentage) / 100;
                nr[l] -= nr[l].min(scanned);
            }
        }
        self.blk_finish_plug(ctx);
        sc.nr_reclaimed += nr_reclaimed;
        if self.can_age_anon() && self.inactive_is_low(m, list::INACTIVE_ANON) {
            self.shrink_active_list(ctx, SWAP_CLUSTER_MAX, m, list::ACTIVE_ANON, sc);
        }
    }

    /// shrink_active_list: deactivate from the tail of an active list. Referenced anon pages are
    /// deactivated too (only executable file pages stay active); they get PG_workingset.
    fn shrink_active_list(&mut self, ctx: &mut Ctx, n: u64, m: u16, which: u8, sc: &ScanControl) {
        self.lru_add_drain(ctx);
        let mut moved = 0;
        let mut taken = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let Some(i) = self.memcgs[m as usize].lru[which as usize - 1].pop_tail(&mut self.pages)
            else {
                break;
            };
            taken.push(i);
        }
        let nr_taken = taken.len() as u64;
        // Taken off the active list and (below) put on the inactive one: update_lru_sizes
        // and move_folios_to_lru, one statistic update each.
        self.memcg_rstat_updated(m, 2 * nr_taken);
        if !sc.cgroup_reclaim() {
            self.vm.pgrefill += nr_taken;
        }
        self.memcgs[m as usize].events.pgrefill += nr_taken;
        ctx.cpu(nr_taken * self.costs.scan_page_ns);
        self.analytic_prefetch(&taken);
        for i in taken {
            // Young bits drawn in bulk (mm/analytic.rs) go with the bit cleared here.
            self.analytic_clear_young(i);
            let p = &mut self.pages[i as usize];
            // folio_referenced clears the young bits as it reads them.
            p.clear(pg::YOUNG | pg::ACTIVE);
            p.set(pg::WORKINGSET);
            self.memcgs[m as usize].lru[which as usize - 2].push_head(&mut self.pages, i);
            moved += 1;
        }
        self.vm.pgdeactivate += moved;
        self.memcgs[m as usize].events.pgdeactivate += moved;
        if let Some(t) = self.trace.as_deref_mut() {
            let e = &mut t.active[prio(sc.priority)];
            e.calls += 1;
            e.nr_taken += nr_taken;
            e.nr_deactivated += moved;
        }
    }

    /// shrink_inactive_list: isolate up to `n` from the tail and run shrink_folio_list.
    fn shrink_inactive_list(
        &mut self,
        ctx: &mut Ctx,
        n: u64,
        m: u16,
        which: u8,
        sc: &mut ScanControl,
    ) -> u64 {
        // Swap writes issued earlier in this reclaim complete while it runs (the completion
        // interrupt does not wait for the reclaimer): folio_end_writeback rotates those folios
        // to the inactive tail, clean, where this batch frees them instead of writing more.
        // Without this a reclaim that outlasts the device latency wrote the whole memcg out
        // within one invocation (5x the kernel's pswpout during a fill, docs/validation.md).
        self.complete_io_until(ctx.now);
        // lru_add_drain: this CPU's batched folios go onto their lists first (mm/lru_add.rs).
        self.lru_add_drain(ctx);
        let file = which == list::INACTIVE_FILE;
        let mut taken = Vec::with_capacity(n as usize);
        // isolate_lru_folios: folios from the tail until their pages reach the batch (a large
        // folio is taken whole and counts its nr_pages, even past the batch).
        while (taken.len() as u64) < n {
            let Some(i) = self.memcgs[m as usize].lru[which as usize - 1].pop_tail(&mut self.pages)
            else {
                break;
            };
            self.pages[i as usize].set(pg::ISOLATED);
            taken.push(i);
            if file {
                self.isolate_folio_siblings(i, which, &mut taken);
            }
        }
        let nr_scanned = taken.len() as u64;
        // isolate_lru_folios' update_lru_sizes: one statistic update per folio taken off.
        self.memcg_rstat_updated(m, nr_scanned);
        if nr_scanned == 0 {
            return 0;
        }
        sc.nr_scanned += nr_scanned;
        match sc.kind {
            Reclaimer::Kswapd => self.vm.pgscan_kswapd += nr_scanned,
            Reclaimer::Direct => self.vm.pgscan_direct += nr_scanned,
            Reclaimer::Memcg => {}
        }
        if file {
            self.vm_file.pgscan_file += nr_scanned;
        } else {
            self.vm.pgscan_anon += nr_scanned;
        }
        {
            let ev = &mut self.memcgs[m as usize].events;
            ev.pgscan += nr_scanned;
            match sc.kind {
                Reclaimer::Kswapd => ev.pgscan_kswapd += nr_scanned,
                _ => ev.pgscan_direct += nr_scanned,
            }
        }
        ctx.cpu(nr_scanned * self.costs.scan_page_ns);

        let mut nr_reclaimed = 0;
        let mut nr_pageout = 0;
        let mut nr_activate = 0;
        let mut stat = ReclaimStat::default();
        self.analytic_prefetch(&taken);
        for &i in &taken {
            self.pages[i as usize].clear(pg::ISOLATED);
            let fate = if file {
                self.shrink_file_folio(ctx, i, sc, &mut stat, &mut nr_pageout)
            } else {
                self.shrink_folio(ctx, i, sc, &mut nr_pageout)
            };
            match fate {
                Fate::Freed => nr_reclaimed += 1,
                Fate::Keep => self.lru_add(i),
                Fate::Activate => {
                    self.pages[i as usize].set(pg::ACTIVE);
                    nr_activate += 1;
                    self.lru_add(i);
                }
            }
        }
        if nr_activate > 0 {
            // move_folios_to_lru: active folios going back age the workingset clock.
            self.age_nonresident(m, nr_activate);
            self.vm.pgactivate += nr_activate;
            self.memcgs[m as usize].events.pgactivate += nr_activate;
        }
        match sc.kind {
            Reclaimer::Kswapd => self.vm.pgsteal_kswapd += nr_reclaimed,
            Reclaimer::Direct => self.vm.pgsteal_direct += nr_reclaimed,
            Reclaimer::Memcg => {}
        }
        if file {
            self.vm_file.pgsteal_file += nr_reclaimed;
        } else {
            self.vm.pgsteal_anon += nr_reclaimed;
        }
        {
            let ev = &mut self.memcgs[m as usize].events;
            ev.pgsteal += nr_reclaimed;
            match sc.kind {
                Reclaimer::Kswapd => ev.pgsteal_kswapd += nr_reclaimed,
                _ => ev.pgsteal_direct += nr_reclaimed,
            }
        }
        self.lru_note_cost(m, file, nr_pageout, nr_scanned - nr_reclaimed);
        if file {
            // Only dirty folios not queued for IO: the flushers are not doing their job.
            if stat.unqueued_dirty == nr_scanned {
                self.wakeup_flusher_threads(ctx.now);
                if !sc.writeback_throttling_sane(self.cgroup_v2) {
                    self.reclaim_throttle(ctx, Throttle::Writeback);
                }
            }
            stat.taken = nr_scanned;
            stat.file_taken = nr_scanned;
            let n = &mut sc.nr;
            n.dirty += stat.dirty;
            n.unqueued_dirty += stat.unqueued_dirty;
            n.congested += stat.congested;
            n.writeback += stat.writeback;
            n.immediate += stat.immediate;
            n.file_taken += stat.file_taken;
        }
        sc.nr.taken += nr_scanned;
        self.trace_lru_shrink_inactive(sc.priority, nr_scanned, nr_reclaimed);
        nr_reclaimed
    }

    /// The other pages of page `i`'s large page cache folio that are on list `which` with it:
    /// isolated with it, as the kernel isolates and reclaims the folio as one (the model's
    /// LRU holds pages; a folio's pages are added together and stay adjacent unless one of
    /// them was activated or rotated alone, which the model allows and the kernel does not:
    /// those stay where they are).
    fn isolate_folio_siblings(&mut self, i: u32, which: u8, taken: &mut Vec<u32>) {
        let order = self.pages[i as usize].folio_order();
        if order == 0 {
            return;
        }
        let (_, index) = self.file_of(i);
        let first = i - (index & ((1u64 << order) - 1)) as u32;
        for j in first..first + (1u32 << order) {
            let p = &self.pages[j as usize];
            if j != i && p.list() == which && p.folio_order() == order && !p.has(pg::ISOLATED) {
                self.lru_del(j);
                self.pages[j as usize].set(pg::ISOLATED);
                taken.push(j);
            }
        }
    }

    /// The mm_vmscan_lru_shrink_inactive tracepoint (shrink_inactive_list, evict_folios).
    pub(super) fn trace_lru_shrink_inactive(
        &mut self,
        priority: i32,
        nr_scanned: u64,
        nr_reclaimed: u64,
    ) {
        if let Some(t) = self.trace.as_deref_mut() {
            let e = &mut t.inactive[prio(priority)];
            e.calls += 1;
            e.nr_scanned += nr_scanned;
            e.nr_reclaimed += nr_reclaimed;
        }
    }

    /// The mm_vmscan_kswapd_wake tracepoint: kswapd() starts a balance_pgdat run.
    pub(super) fn trace_kswapd_wake(&mut self) {
        if let Some(t) = self.trace.as_deref_mut() {
            t.reclaim.kswapd_wake += 1;
        }
    }

    /// folio_check_references (6.12), for both LRUs: consumes the young PTE bit and
    /// PG_referenced. A young PTE keeps the folio (and sets PG_referenced), or activates it if
    /// PG_referenced was set already; otherwise reclaim goes on. Simplified: no VM_EXEC rule.
    fn folio_check_references(&mut self, i: u32) -> References {
        // Young bits drawn in bulk (mm/analytic.rs) are settled before they are read.
        self.analytic_young(i);
        let p = &mut self.pages[i as usize];
        let referenced_ptes = p.has(pg::MAPPED) && p.has(pg::YOUNG);
        p.clear(pg::YOUNG);
        let referenced_folio = p.has(pg::REFERENCED);
        p.clear(pg::REFERENCED);
        if referenced_ptes {
            p.set(pg::REFERENCED);
            return if referenced_folio {
                References::Activate
            } else {
                References::Keep
            };
        }
        References::Reclaim { referenced_folio }
    }

    /// shrink_folio_list for one isolated anonymous folio (6.18 order, kernel-model.md §5.7).
    pub(super) fn shrink_folio(
        &mut self,
        ctx: &mut Ctx,
        i: u32,
        sc: &ScanControl,
        nr_pageout: &mut u64,
    ) -> Fate {
        // Under writeback (a swap write in flight).
        if self.pages[i as usize].has(pg::WRITEBACK) {
            let v1_memcg = sc.cgroup_reclaim() && !self.cgroup_v2;
            if !v1_memcg || !self.pages[i as usize].has(pg::RECLAIM) {
                // Cases 1 and 2: kswapd's nr_immediate or everyone's nr_writeback → activate.
                self.pages[i as usize].set(pg::RECLAIM);
                return self.activate_locked(i);
            }
            // Case 3: v1 memcg reclaim waits for the write to finish, then retries the folio.
            self.wait_on_writeback(ctx, i);
        }

        match self.folio_check_references(i) {
            References::Activate => return self.activate_locked(i),
            References::Keep => return Fate::Keep,
            References::Reclaim { .. } => {}
        }
        // A swap-cache folio no fault has mapped since it was read in (a readahead folio not
        // hit yet, zswap writeback's folio): !folio_test_anon, and its mapping is the swap
        // space, not a shmem mapping. Taken before shmem_pageout_prepare moves a tmpfs folio
        // from its shmem mapping into the swap cache.
        let never_mapped_swapcache =
            self.pages[i as usize].flags & (pg::SWAPCACHE | pg::ANON) == pg::SWAPCACHE;

        // A tmpfs folio in its mapping: dropped if clean, else moved to the swap cache by
        // shmem_writepage on its way to swap_writepage (mm/shmem.rs).
        if self.pages[i as usize].flags & (pg::SHMEM | pg::SWAPCACHE) == pg::SHMEM {
            if let Err(fate) = self.shmem_pageout_prepare(ctx, i, sc.may_writepage) {
                return fate;
            }
        }

        // Anonymous, not yet in the swap cache: allocate a slot (folio_alloc_swap).
        if !self.pages[i as usize].has(pg::SWAPCACHE) {
            if !sc.may_swap {
                return Fate::Keep;
            }
            ctx.cpu(self.costs.swap_alloc_ns);
            let m = self.pages[i as usize].memcg;
            let Some(slot) = self.swap.alloc_slot(i) else {
                self.mem_cgroup_swap_fail(m);
                return self.activate_locked(i);
            };
            // folio_alloc_swap → mem_cgroup_try_charge_swap: over memory.swap.max the slot
            // goes back and the folio is activated, as when no slot is free.
            if !self.mem_cgroup_try_charge_swap(m) {
                self.swap.free_slot(slot);
                return self.activate_locked(i);
            }
            let p = &mut self.pages[i as usize];
            p.slot = slot;
            p.set(pg::SWAPCACHE | pg::DIRTY);
            p.clear(pg::ZEROMAP | pg::ZSWAP | pg::SHADOW);
            self.memcgs[m as usize].swap_pages += 1;
            self.memcgs[m as usize].swapcached += 1;
        }

        // try_to_unmap: the PTE becomes a swap entry; a dirty PTE dirties the folio (DIRTY is
        // already the folio's bit here).
        self.pages[i as usize].clear(pg::MAPPED);
        self.analytic_sync(i);

        if self.pages[i as usize].has(pg::DIRTY) {
            if !sc.may_writepage {
                return Fate::Keep;
            }
            // 6.16+ pageout (6.18 mm/vmscan.c: `if (!shmem_mapping(mapping) &&
            // !folio_test_anon(folio)) return PAGE_ACTIVATE;`, the check that stops reclaim
            // from writing file folios) also meets a dirty swap-cache folio that was never
            // mapped: a readahead folio loaded from zswap (zswap_load dirties it) that no fault
            // has hit yet. It is activated, not stored again, every time it reaches the
            // inactive tail, so it stays in memory until a fault maps it (or it is freed with
            // its slot). Before 6.16 pageout called swap_writepage for every swap-cache folio.
            // Switch vmscan.pageout_anon_check (off in every preset for now, policy.rs).
            if never_mapped_swapcache && self.switches.pageout_anon_check {
                return self.activate_locked(i);
            }
            // pageout → swap_writeout.
            let p = &mut self.pages[i as usize];
            p.clear(pg::DIRTY);
            p.set(pg::RECLAIM);
            match self.swap_writeout(ctx, i) {
                Writeout::Activate => {
                    let p = &mut self.pages[i as usize];
                    p.clear(pg::RECLAIM);
                    p.set(pg::DIRTY);
                    return self.activate_locked(i);
                }
                Writeout::Io => {
                    self.vm.nr_vmscan_write += 1;
                    self.dirty
                        .count_reclaim_write(sc.kind == Reclaimer::Kswapd, false);
                    *nr_pageout += 1;
                    return Fate::Keep;
                }
                Writeout::Done => {
                    self.vm.nr_vmscan_write += 1;
                    self.dirty
                        .count_reclaim_write(sc.kind == Reclaimer::Kswapd, false);
                    *nr_pageout += 1;
                    self.pages[i as usize].clear(pg::RECLAIM);
                }
            }
        }

        // __remove_mapping: leave a shadow in the swap cache and free the folio.
        ctx.cpu(self.costs.reclaim_page_ns);
        self.remove_from_swap_cache_for_reclaim(i);
        Fate::Freed
    }

    /// shrink_folio_list for one isolated page cache folio (6.12 order, 6.18 pageout).
    ///
    /// folio_check_dirty_writeback feeds `stat`. A folio under writeback: kswapd on a node
    /// flagged PGDAT_WRITEBACK counts a PG_reclaim one as nr_immediate; otherwise (and
    /// always outside v1 memcg reclaim) it gets PG_reclaim and nr_writeback; v1 memcg reclaim
    /// waits for a PG_reclaim folio's writeback and goes on with it. Both go to the active
    /// list (activate_locked). folio_check_references: a young PTE keeps it (activates it if
    /// PG_referenced was set too); PG_referenced alone is FOLIOREF_RECLAIM_CLEAN. A dirty
    /// folio reaches pageout only as the writeback switches allow (see
    /// [`Mm::file_pageout_allowed`]); otherwise it is marked PG_reclaim and activated
    /// (NR_VMSCAN_IMMEDIATE: the flusher's completion rotates it to the inactive tail). A clean
    /// one leaves a shadow entry and is freed.
    pub(super) fn shrink_file_folio(
        &mut self,
        ctx: &mut Ctx,
        i: u32,
        sc: &ScanControl,
        stat: &mut ReclaimStat,
        nr_pageout: &mut u64,
    ) -> Fate {
        let p = self.pages[i as usize];
        let (dirty, writeback) = (p.has(pg::DIRTY), p.has(pg::WRITEBACK));
        stat.dirty += u64::from(dirty || writeback);
        stat.unqueued_dirty += u64::from(dirty && !writeback);
        stat.congested += u64::from(writeback && p.has(pg::RECLAIM));
        if writeback {
            let kswapd = sc.kind == Reclaimer::Kswapd;
            if kswapd && p.has(pg::RECLAIM) && self.pgdat.writeback {
                stat.immediate += 1;
                return Fate::Activate;
            }
            if sc.writeback_throttling_sane(self.cgroup_v2) || !p.has(pg::RECLAIM) {
                self.pages[i as usize].set(pg::RECLAIM);
                stat.writeback += 1;
                return Fate::Activate;
            }
            let fs = self.regions[self.region_index(i)]
                .file
                .as_ref()
                .expect("a file region")
                .fs as usize;
            self.wait_on_file_writeback(ctx, fs, i);
        }
        let referenced_folio = match self.folio_check_references(i) {
            References::Activate => return Fate::Activate,
            References::Keep => return Fate::Keep,
            References::Reclaim { referenced_folio } => referenced_folio,
        };
        let p = &mut self.pages[i as usize];
        // try_to_unmap (the dirty PTE bit is already the folio's).
        p.clear(pg::MAPPED);
        if p.has(pg::DIRTY) {
            if !self.file_pageout_allowed(sc, i) {
                if !self.switches.immediate_reclaim {
                    return Fate::Keep;
                }
                self.vm_file.nr_vmscan_immediate_reclaim += 1;
                self.pages[i as usize].set(pg::RECLAIM);
                return Fate::Activate;
            }
            if referenced_folio || !sc.may_writepage {
                return Fate::Keep;
            }
            return self.file_pageout(ctx, i, sc, nr_pageout);
        }
        // A large folio's pages share its reclaim (mm/filemap.rs): each of its 2^order pages
        // is charged that share.
        ctx.cpu(self.costs.reclaim_file_folio_ns >> self.pages[i as usize].folio_order());
        self.remove_file_folio_for_reclaim(i);
        Fate::Freed
    }

    /// Whether a dirty file folio goes on to pageout. Direct and memcg reclaim: only with
    /// vmscan.direct_file_writeback (before seed patch 1). kswapd: per
    /// vmscan.kswapd_file_writeback (6.12: `!current_is_kswapd() || !folio_test_reclaim ||
    /// !test_bit(PGDAT_DIRTY)` sends it to immediate reclaim instead).
    fn file_pageout_allowed(&self, sc: &ScanControl, i: u32) -> bool {
        if sc.kind != Reclaimer::Kswapd {
            return self.switches.direct_file_writeback;
        }
        match self.switches.kswapd_file_writeback {
            KswapdFileWriteback::Always => true,
            KswapdFileWriteback::RaisedPriority => sc.priority < DEF_PRIORITY - 2,
            KswapdFileWriteback::PgdatDirty | KswapdFileWriteback::Never => {
                self.pages[i as usize].has(pg::RECLAIM) && self.pgdat.dirty
            }
        }
    }

    /// pageout for a dirty file folio: 6.16+ has no ->writepage for file folios (PAGE_ACTIVATE);
    /// before, the filesystem's writepage either writes it (PG_reclaim, under writeback,
    /// kept) or redirties it; pageout counts NR_VMSCAN_WRITE either way, as writepage
    /// returned 0.
    fn file_pageout(
        &mut self,
        ctx: &mut Ctx,
        i: u32,
        sc: &ScanControl,
        nr_pageout: &mut u64,
    ) -> Fate {
        if self.switches.kswapd_file_writeback == KswapdFileWriteback::Never {
            return Fate::Activate;
        }
        let fs = self.regions[self.region_index(i)]
            .file
            .as_ref()
            .expect("a file region")
            .fs as usize;
        self.vm.nr_vmscan_write += 1;
        self.dirty
            .count_reclaim_write(sc.kind == Reclaimer::Kswapd, true);
        *nr_pageout += 1;
        if self.fs[fs]
            .fstype
            .writepage_from_reclaim(sc.kind == Reclaimer::Kswapd)
        {
            self.pages[i as usize].set(pg::RECLAIM);
            self.writeback_file_folio(ctx, i, 1);
        }
        Fate::Keep
    }

    /// reclaim_throttle (5.16+): sleep until SWAP_CLUSTER_MAX folios of any device finished
    /// writeback (acct_reclaim_writeback with one throttled task) or the timeout (WRITEBACK:
    /// HZ/10; CONGESTED: one jiffy). congestion_wait (3.2–5.15) sleeps HZ/10 whatever the
    /// reason; before seed patch 3 reclaim does not sleep here.
    fn reclaim_throttle(&mut self, ctx: &mut Ctx, reason: Throttle) {
        let timeout = match (self.switches.writeback_throttle, reason) {
            (WritebackThrottle::None, _) => return,
            (WritebackThrottle::CongestionWait, _)
            | (WritebackThrottle::ReclaimThrottle, Throttle::Writeback) => {
                crate::sim::NSEC_PER_SEC / 10
            }
            (WritebackThrottle::ReclaimThrottle, Throttle::Congested) => crate::sim::JIFFY_NS,
        };
        let mut until = crate::sim::later(ctx.now, timeout);
        if self.switches.writeback_throttle == WritebackThrottle::ReclaimThrottle {
            // The flushers this reclaim just woke (wakeup_flusher_threads) run on other CPUs
            // while it sleeps: the writeback they submit now is what completes and wakes it
            // (__acct_reclaim_writeback from folio_end_writeback), not only what was in flight
            // when it went to sleep (which, right after the wakeup, is often nothing: it then
            // slept the whole HZ/10).
            self.run_flushers_until(ctx.now);
            let mut done: Vec<crate::sim::Time> = Vec::new();
            for d in &self.swap.devs {
                done.extend(
                    d.bdev
                        .inflight
                        .iter()
                        .take(SWAP_CLUSTER_MAX as usize)
                        .map(|&(t, _)| t),
                );
            }
            for f in &self.fs {
                done.extend(
                    f.bdev
                        .inflight
                        .iter()
                        .take(SWAP_CLUSTER_MAX as usize)
                        .map(|&(t, _)| t),
                );
            }
            done.sort_unstable();
            if let Some(&t) = done.get(SWAP_CLUSTER_MAX as usize - 1) {
                until = until.min(t.max(ctx.now));
            }
        }
        self.dirty.reclaim_throttled += 1;
        if let Some(t) = self.trace.as_deref_mut() {
            match reason {
                Throttle::Writeback => t.reclaim.throttled_writeback += 1,
                Throttle::Congested => t.reclaim.throttled_congested += 1,
            }
        }
        let start = ctx.now;
        self.io_schedule_until(ctx, until);
        self.latency(ctx, Kind::Throttle, ctx.now - start);
        self.complete_io_until(ctx.now);
    }

    /// activate_locked: free the swap slot of a swap-cache folio when swap is half full
    /// (mem_cgroup_swap_full; folio_free_swap), then activate.
    fn activate_locked(&mut self, i: u32) -> Fate {
        let p = &self.pages[i as usize];
        if p.has(pg::SWAPCACHE)
            && !p.has(pg::WRITEBACK)
            && p.has(pg::MAPPED)
            && self.mem_cgroup_swap_full(p.memcg)
        {
            self.folio_free_swap(i);
        }
        Fate::Activate
    }

    /// A clean, unmapped swap-cache folio leaves memory: shadow entry, uncharge, free frame.
    fn remove_from_swap_cache_for_reclaim(&mut self, i: u32) {
        let m = self.pages[i as usize].memcg;
        self.workingset_eviction(i);
        let p = &mut self.pages[i as usize];
        // PG_referenced was already test-and-cleared by folio_check_references; the bit now
        // belongs to the zswap entry if there is one.
        p.clear(
            pg::RESIDENT
                | pg::SWAPCACHE
                | pg::ACTIVE
                | pg::YOUNG
                | pg::RECLAIM
                | pg::READAHEAD
                | pg::MAPPED
                | pg::ANON,
        );
        self.analytic_sync(i);
        // ≤6.4: a folio reclaimed clean after a non-exclusive zswap load: its entry is the copy.
        self.zswap_entry_unshadow(i);
        self.memcgs[m as usize].swapcached -= 1;
        self.resident_del(i);
        self.uncharge(m);
        self.free_frame();
    }

    /// Direct reclaim from the page allocator (try_to_free_pages).
    pub fn try_to_free_pages(&mut self, ctx: &mut Ctx) -> u64 {
        self.try_to_free_pages_order(ctx, 0)
    }

    /// try_to_free_pages for an allocation of `order` (sc.order; one ALLOCSTALL as for any).
    pub fn try_to_free_pages_order(&mut self, ctx: &mut Ctx, order: u8) -> u64 {
        let mut sc = ScanControl::new(Reclaimer::Direct, 0, SWAP_CLUSTER_MAX);
        sc.order = order;
        let saved = (ctx.memalloc, std::mem::take(&mut self.lru_gen.in_fault));
        ctx.memalloc = true;
        let r = self.do_try_to_free_pages(ctx, &mut sc);
        (ctx.memalloc, self.lru_gen.in_fault) = saved;
        if let Some(t) = self.trace.as_deref_mut() {
            t.reclaim.direct_begin += 1;
            t.reclaim.direct_end += r;
        }
        r
    }

    /// Memcg limit / memory.high reclaim (try_to_free_mem_cgroup_pages).
    pub fn try_to_free_mem_cgroup_pages(&mut self, ctx: &mut Ctx, m: u16, nr_pages: u64) -> u64 {
        self.try_to_free_mem_cgroup_pages_sc(ctx, m, nr_pages, None)
    }

    /// try_to_free_mem_cgroup_pages with MEMCG_RECLAIM_PROACTIVE (memory.reclaim) and its
    /// optional swappiness. In 6.12 `sc->proactive` changes only what the model does not have
    /// (vmpressure, demotion, MGLRU's mm-walk allocation); the counters go, as for limit
    /// reclaim, under pgscan_direct/pgsteal_direct (reclaimer_offset; the `_proactive`
    /// counters came after 6.12).
    pub fn try_to_free_mem_cgroup_pages_proactive(
        &mut self,
        ctx: &mut Ctx,
        m: u16,
        nr_pages: u64,
        swappiness: Option<u64>,
    ) -> u64 {
        self.try_to_free_mem_cgroup_pages_sc(ctx, m, nr_pages, swappiness)
    }

    fn try_to_free_mem_cgroup_pages_sc(
        &mut self,
        ctx: &mut Ctx,
        m: u16,
        nr_pages: u64,
        swappiness: Option<u64>,
    ) -> u64 {
        let mut sc = ScanControl::new(Reclaimer::Memcg, m, nr_pages.max(SWAP_CLUSTER_MAX));
        sc.proactive_swappiness = swappiness;
        // PF_MEMALLOC: folios added while reclaiming are not "in fault" (folio_add_lru).
        let saved = (ctx.memalloc, std::mem::take(&mut self.lru_gen.in_fault));
        ctx.memalloc = true;
        let r = self.do_try_to_free_pages(ctx, &mut sc);
        (ctx.memalloc, self.lru_gen.in_fault) = saved;
        if let Some(t) = self.trace.as_deref_mut() {
            t.reclaim.memcg_begin += 1;
            t.reclaim.memcg_end += r;
        }
        r
    }

    /// do_try_to_free_pages (6.12): priority 12 → 0 until the goal is met; if nothing was
    /// reclaimed, the memcg_full_walk retry (with incremental cgroup iteration), then the
    /// force_deactivate retry if active lists were skipped, then the memcg_low one. Each retry
    /// counts allocstall again for direct reclaim, as the kernel's `retry:` label does.
    fn do_try_to_free_pages(&mut self, ctx: &mut Ctx, sc: &mut ScanControl) -> u64 {
        self.complete_io_until(ctx.now);
        let mut compaction_ready = false;
        loop {
            if sc.kind == Reclaimer::Direct {
                self.vm.allocstall_movable += 1;
            }
            sc.priority = DEF_PRIORITY;
            loop {
                sc.nr_scanned = 0;
                // shrink_zones: a costly order skips the node once compaction_ready (and
                // do_try_to_free_pages stops); shrink_node repeats while
                // should_continue_reclaim (mm/phys.rs, the zone's compaction state).
                if sc.order > PAGE_ALLOC_COSTLY_ORDER && self.compaction_ready(sc.order) {
                    compaction_ready = true;
                    break;
                }
                loop {
                    let before = sc.nr_reclaimed;
                    self.shrink_node(ctx, sc);
                    if sc.order == 0
                        || !self.should_continue_reclaim(
                            sc.order,
                            sc.priority,
                            sc.nr_reclaimed - before,
                        )
                    {
                        break;
                    }
                }
                if sc.nr_reclaimed >= sc.nr_to_reclaim {
                    break;
                }
                if sc.priority < DEF_PRIORITY - 2 {
                    sc.may_writepage = true;
                }
                if sc.priority == 0 {
                    break;
                }
                sc.priority -= 1;
            }
            self.snapshot_refaults(sc.target);
            if sc.cgroup_reclaim() {
                self.pgdat.cgroup_congested[sc.target as usize] = false;
            }
            if sc.nr_reclaimed > 0 {
                return sc.nr_reclaimed;
            }
            // Aborted reclaim to try compaction: no retry (and no OOM).
            if compaction_ready {
                return 1;
            }
            // 6.11+: the shared partial walks may have shown this call too few memcgs (other
            // reclaimers moved the cursor); before declaring failure, all priorities again
            // over the whole subtree. Its shrink_node passes cost time like any others.
            if self.switches.incremental_cgroup_iteration && !sc.memcg_full_walk {
                sc.memcg_full_walk = true;
                continue;
            }
            if sc.skipped_deactivate && !sc.force_deactivate {
                sc.force_deactivate = true;
                sc.skipped_deactivate = false;
                continue;
            }
            // Untapped memory.low reserves: retry reclaiming the protected memcgs too
            // rather than fail (and OOM).
            if sc.memcg_low_skipped {
                sc.force_deactivate = false;
                sc.memcg_low_reclaim = true;
                sc.memcg_low_skipped = false;
                continue;
            }
            return 0;
        }
    }

    /// shrink_node: the memcgs of the target's subtree (pre-order), with shrink_slab after each
    /// lruvec. With incremental cgroup iteration (6.11+) reclaimers other than kswapd resume a
    /// shared cursor, walk to the subtree's end and stop once the goal is met; otherwise (and on
    /// the memcg_full_walk retry) the whole subtree.
    fn shrink_node(&mut self, ctx: &mut Ctx, sc: &mut ScanControl) {
        sc.nr = ReclaimStat::default();
        // Every call costs its fixed overhead, also one that finds nothing to scan: a reclaimer
        // that retries over empty or busy lists takes time, as the kernel's does.
        ctx.cpu(self.costs.shrink_node_ns);
        if self.lru_gen_enabled() && !sc.cgroup_reclaim() {
            return self.lru_gen_shrink_node(ctx, sc);
        }
        if self.switches.reclaim_stats_flush {
            // 6.1 shrink_node: mem_cgroup_flush_stats() "so that we read accurate per-memcg
            // lruvec stats for heuristics" (the whole tree, when enough updates are pending:
            // 6.1's threshold is global, the root's count here).
            self.mem_cgroup_flush_stats(0);
        } else {
            // 6.12/6.18 prepare_scan_control: mem_cgroup_flush_stats_ratelimited of the target.
            self.mem_cgroup_flush_stats_ratelimited(sc.target);
        }
        self.prepare_scan_control(sc);
        let start = sc.target;
        let end = self.memcgs[start as usize].subtree_end;
        // shrink_node_memcgs (6.12): with incremental iteration, reclaimers other than kswapd
        // (and the memcg_full_walk retry) join the walk shared through the target's cursor
        // (mem_cgroup_iter with a reclaim cookie): from the memcg after the last one any walk
        // visited to the end of the pre-order subtree, not wrapping; at the end the cursor
        // returns to the target. Simplified: no concurrent walker ends a walk early (the
        // kernel's iterator generation), since one reclaim call runs at one instant here.
        let partial = self.switches.incremental_cgroup_iteration
            && sc.kind != Reclaimer::Kswapd
            && !sc.memcg_full_walk;
        let first = if partial {
            self.reclaim_cursor[start as usize].max(start).min(end - 1)
        } else {
            start
        };
        let before = sc.nr_reclaimed;
        for m in first..end {
            if partial {
                self.reclaim_cursor[start as usize] = if m + 1 >= end { start } else { m + 1 };
            }
            // shrink_node_memcgs (6.12): hard protection skips the memcg; soft protection
            // too, unless this is the memcg_low retry, which counts MEMCG_LOW.
            self.mem_cgroup_calculate_protection(start, m);
            if self.mem_cgroup_below_min(start, m) {
                continue;
            }
            if self.mem_cgroup_below_low(start, m) {
                if !sc.memcg_low_reclaim {
                    sc.memcg_low_skipped = true;
                    continue;
                }
                self.memcg_low_event(m);
            }
            self.shrink_lruvec(ctx, m, sc);
            self.shrink_slab(ctx, m, sc);
            if partial && sc.nr_reclaimed >= sc.nr_to_reclaim {
                break;
            }
        }
        if sc.nr_reclaimed > before {
            self.kswapd.failures = 0;
        }
        self.shrink_node_writeback(ctx, sc);
    }

    /// The end of shrink_node (6.12) about dirty and writeback folios: kswapd flags the node
    /// PGDAT_WRITEBACK when everything it took was under writeback, PGDAT_DIRTY when every
    /// file folio it took was dirty and not queued, and throttles on nr_immediate; when every
    /// dirty folio met was already under writeback for reclaim, the lruvec is congested, and
    /// direct or memcg reclaim then throttles.
    fn shrink_node_writeback(&mut self, ctx: &mut Ctx, sc: &ScanControl) {
        if !self.has_files() {
            return;
        }
        let n = sc.nr;
        let kswapd = sc.kind == Reclaimer::Kswapd;
        if kswapd {
            if n.writeback > 0 && n.writeback == n.taken {
                self.pgdat.writeback = true;
            }
            if n.unqueued_dirty == n.file_taken {
                self.pgdat.dirty = true;
            }
            if n.immediate > 0 {
                self.reclaim_throttle(ctx, Throttle::Writeback);
            }
        }
        let target = sc.target as usize;
        if n.dirty > 0 && n.dirty == n.congested {
            if sc.cgroup_reclaim() && sc.writeback_throttling_sane(self.cgroup_v2) {
                self.pgdat.cgroup_congested[target] = true;
            }
            if kswapd {
                self.pgdat.node_congested = true;
            }
        }
        let node_congested = target == 0 && self.pgdat.node_congested;
        if !kswapd && (self.pgdat.cgroup_congested[target] || node_congested) {
            self.reclaim_throttle(ctx, Throttle::Congested);
        }
    }

    /// shrink_slab for memcg `m`: the zswap shrinker (memcg-aware) for every memcg, and each
    /// zsmalloc pool's compaction shrinker (zswap's, every zram device's) when `m` is the root.
    pub(super) fn shrink_slab(&mut self, ctx: &mut Ctx, m: u16, sc: &ScanControl) {
        let freeable = self.zswap_shrinker_count(m);
        if freeable > 0 {
            let deferred = std::mem::take(&mut self.memcgs[m as usize].zswap_shrinker_deferred);
            self.memcgs[m as usize].zswap_shrinker_deferred = self.do_shrink_slab(
                ctx,
                Shrinker::Zswap,
                freeable,
                deferred,
                sc.priority,
                |mm, ctx, nr| mm.zswap_shrinker_scan(ctx, m, nr),
            );
        }
        if m != 0 {
            return;
        }
        // Pools 0..n are zswap's zsmalloc pools, then one per swap device (zram only).
        for k in 0..self.zswap.pools.len() + self.swap.devs.len() {
            let Some((pool, deferred)) = self.zsmalloc_pool(k) else {
                continue;
            };
            let freeable = pool.compactable_pages();
            if freeable == 0 {
                continue;
            }
            let deferred = std::mem::take(deferred);
            let next = self.do_shrink_slab(
                ctx,
                Shrinker::Zsmalloc,
                freeable,
                deferred,
                sc.priority,
                |mm, _ctx, _nr| {
                    let (pool, _) = mm.zsmalloc_pool(k).expect("pool exists");
                    let freed = pool.compact();
                    mm.nr_free += freed;
                    (freed > 0).then_some(freed)
                },
            );
            *self.zsmalloc_pool(k).expect("pool exists").1 = next;
        }
    }

    /// A write to zram device `n`'s `compact` attribute: compact_store → zs_compact on its
    /// pool (6.12 drivers/block/zram/zram_drv.c), the freed zspage pages back to the free
    /// pages; mm_stat's pages_compacted counts them. Simplified: it costs the writer no time
    /// (the kernel's migration copies each moved object).
    pub(crate) fn zram_compact(&mut self, n: usize) {
        let zram = self
            .swap
            .devs
            .iter_mut()
            .filter_map(|d| d.zram.as_mut())
            .nth(n)
            .expect("Proc::from_config checked the device");
        let freed = zram.pool.compact();
        self.nr_free += freed;
    }

    /// A zsmalloc pool and its compaction shrinker's deferred count (see shrink_slab).
    fn zsmalloc_pool(
        &mut self,
        k: usize,
    ) -> Option<(&mut (dyn crate::zpool::Zpool + 'static), &mut u64)> {
        let n = self.zswap.pools.len();
        if k < n {
            return Some((
                self.zswap.pools[k].as_mut(),
                &mut self.zswap.compact_deferred[k],
            ));
        }
        self.swap.devs[k - n]
            .zram
            .as_mut()
            .map(|z| (z.pool.as_mut(), &mut z.compact_deferred))
    }

    /// do_shrink_slab arithmetic (seeks = DEFAULT_SEEKS, batch = SHRINK_BATCH): scan
    /// `(deferred >> priority) + 2 × (freeable >> priority)` objects (at most 2 × freeable) in
    /// batches; `scan` returns None for SHRINK_STOP. Returns the new deferred count. Counts the
    /// mm_shrink_slab_start/end tracepoints of `shrinker`.
    #[allow(clippy::too_many_arguments)]
    fn do_shrink_slab(
        &mut self,
        ctx: &mut Ctx,
        shrinker: Shrinker,
        freeable: u64,
        deferred: u64,
        priority: i32,
        mut scan: impl FnMut(&mut Mm, &mut Ctx, u64) -> Option<u64>,
    ) -> u64 {
        let delta = (freeable >> priority) * 4 / 2;
        let mut total = ((deferred >> priority) + delta).min(2 * freeable);
        if let Some(t) = self.trace.as_deref_mut() {
            let e = &mut t.slab_start[shrinker as usize][prio(priority)];
            e.calls += 1;
            e.total_scan += total;
        }
        let mut scanned = 0;
        let mut freed = 0;
        while total >= SHRINK_BATCH || total >= freeable {
            let nr = total.min(SHRINK_BATCH);
            let Some(ret) = scan(self, ctx, nr) else {
                break;
            };
            freed += ret;
            // slabs_scanned in the kernel also counts every other slab shrinker (dentries,
            // inodes, ...), which the model cannot produce; keep our share unexported.
            self.shrinker_objects_scanned += nr;
            total -= nr;
            scanned += nr;
            if total == 0 {
                break;
            }
        }
        if let Some(t) = self.trace.as_deref_mut() {
            let e = &mut t.slab_end[shrinker as usize];
            e.calls += 1;
            e.retval += freed;
        }
        (deferred + delta).saturating_sub(scanned).min(2 * freeable)
    }

    /// One balance_pgdat priority pass; kswapd reschedules itself until the node is balanced.
    pub fn kswapd_step(&mut self, ctx: &mut Ctx) {
        if self.node_balanced() {
            self.kswapd_finish_run(ctx, true);
            return;
        }
        let mut sc = ScanControl::new(Reclaimer::Kswapd, 0, self.wmark_high.max(SWAP_CLUSTER_MAX));
        sc.priority = self.kswapd.priority;
        // kswapd_age_node: keep the inactive anon list from running empty; with the
        // multi-gen LRU, lru_gen_age_node (its priority carries over, as sc does).
        if self.lru_gen_enabled() {
            self.lru_gen_age_node(ctx, &mut sc);
        } else if self.can_age_anon() && self.inactive_is_low(0, list::INACTIVE_ANON) {
            for m in 0..self.memcgs.len() as u16 {
                self.shrink_active_list(ctx, SWAP_CLUSTER_MAX, m, list::ACTIVE_ANON, &sc);
            }
        }
        self.shrink_node(ctx, &mut sc);
        if self.lru_gen_enabled() {
            // set_initial_priority changed balance_pgdat's sc.priority.
            self.kswapd.priority = sc.priority;
        }
        let raise_priority = sc.nr_scanned < sc.nr_to_reclaim;
        self.kswapd.nr_reclaimed += sc.nr_reclaimed;
        if raise_priority || sc.nr_reclaimed == 0 {
            self.kswapd.priority -= 1;
        }
        if self.kswapd.priority < 1 {
            self.kswapd_finish_run(ctx, false);
        } else {
            self.kswapd.clock = ctx.now;
            self.queue.push(ctx.now, EventKind::Kswapd);
        }
    }

    /// pgdat_balanced: free pages above the high watermark (zone_watermark_ok is strict).
    pub fn node_balanced(&self) -> bool {
        self.nr_free > self.wmark_high
    }

    /// End of balance_pgdat, then kswapd_try_to_sleep: sleep if balanced or hopeless,
    /// otherwise start another run. A run that ran out of priorities without reclaiming
    /// anything is a failure; one that found the node balanced is not.
    fn kswapd_finish_run(&mut self, ctx: &mut Ctx, balanced: bool) {
        if !balanced && self.kswapd.nr_reclaimed == 0 {
            self.kswapd.failures += 1;
        }
        self.snapshot_refaults(0);
        self.kswapd.clock = ctx.now;
        if self.node_balanced() {
            // prepare_kswapd_sleep → clear_pgdat_congested.
            self.pgdat.writeback = false;
            self.pgdat.dirty = false;
            self.pgdat.node_congested = false;
            self.pgdat.cgroup_congested[0] = false;
        }
        if self.node_balanced() || self.kswapd.failures >= MAX_RECLAIM_RETRIES {
            self.kswapd.running = false;
            // kswapd_try_to_sleep → wakeup_kcompactd for the order kswapd was woken for
            // (mm/phys.rs; nothing without a zone).
            if self.phys.is_some() {
                self.wakeup_kcompactd();
            }
            return;
        }
        self.vm.pageoutrun += 1;
        self.trace_kswapd_wake();
        self.kswapd.priority = DEF_PRIORITY;
        self.kswapd.nr_reclaimed = 0;
        self.queue.push(ctx.now, EventKind::Kswapd);
    }

    /// The page allocator for one order-0 user page (__alloc_pages): low watermark fast path,
    /// wake kswapd, min watermark, then direct reclaim up to MAX_RECLAIM_RETRIES rounds without
    /// progress. Allocations inside reclaim (PF_MEMALLOC) may use the reserves.
    pub fn alloc_frame(&mut self, ctx: &mut Ctx) -> bool {
        if self.nr_free > self.wmark_low {
            self.nr_free -= 1;
            return true;
        }
        self.wakeup_kswapd(ctx.now);
        if self.nr_free > self.wmark_min || (ctx.memalloc && self.nr_free > 0) {
            self.nr_free -= 1;
            return true;
        }
        // kswapd and everything already inside reclaim must not recurse into direct reclaim.
        if ctx.memalloc || ctx.actor == Actor::Kswapd {
            return false;
        }
        // __alloc_pages_direct_reclaim: a memory stall (psi_memstall_enter) from the first
        // reclaim to the allocation's return; its length is the allocation's stall latency.
        let (start, memstall) = (ctx.now, self.psi_memstall_enter(ctx));
        let got = self.alloc_frame_direct_reclaim(ctx);
        self.psi_memstall_leave(ctx, memstall);
        self.latency(ctx, Kind::AllocStall, ctx.now - start);
        got
    }

    fn alloc_frame_direct_reclaim(&mut self, ctx: &mut Ctx) -> bool {
        let mut no_progress = 0;
        // The kernel retries without bound while reclaim reports progress; progress that never
        // frees a page (pages stored as-is in zswap cost a pool page each) would spin forever.
        let mut rounds = 0;
        while no_progress < MAX_RECLAIM_RETRIES && rounds < 64 * MAX_RECLAIM_RETRIES {
            rounds += 1;
            let got = self.try_to_free_pages(ctx);
            if self.nr_free > self.wmark_min {
                self.nr_free -= 1;
                return true;
            }
            if got == 0 {
                no_progress += 1;
                // reclaim_throttle(NOPROGRESS) and should_reclaim_retry: the task sleeps a
                // jiffy while swap writes in flight complete, then tries again.
                self.io_schedule_until(ctx, ctx.now + crate::sim::JIFFY_NS);
            } else {
                no_progress = 0;
            }
        }
        false
    }

    pub fn free_frame(&mut self) {
        self.nr_free += 1;
    }

    /// Reclaim waits on a folio's writeback (v1 memcg reclaim, case 3): complete the device's
    /// writes up to and including this one at their completion time. Going to sleep flushes
    /// the task's plug first (schedule → blk_flush_plug), which may hold this very write.
    pub(super) fn wait_on_writeback(&mut self, ctx: &mut Ctx, i: u32) {
        let slot = self.pages[i as usize].slot;
        debug_assert_ne!(slot, NONE);
        let d = self.swap.dev_of(slot);
        self.blk_flush_plug(ctx.now);
        while let Some((done, page)) = self.swap.devs[d].bdev.inflight.pop_front() {
            self.psi_sleep(ctx, done);
            self.end_swap_writeback(page);
            if page == i {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pages_of_kib(kib: u64) -> u64 {
        kib / 4
    }

    /// Values read from kernels with THP `madvise` and min_free_kbytes never written: this
    /// host (6.18, MemTotal 24684092 kB, zones DMA, DMA32, Normal) and the VM lab's 1 GiB
    /// guests (6.1.0-56 and 6.12.117, results/conformance/debian-6.1{,2}.json: DMA and DMA32).
    #[test]
    fn thp_raises_min_free_kbytes_to_the_kernels_values() {
        let vm = VmSysctls::default();
        assert_eq!(min_free_kbytes(&vm, true, pages_of_kib(24_684_092)), 67_584);
        assert_eq!(min_free_kbytes(&vm, true, (1 << 30) / 4096), 45_056);
        // The same guests' MemTotal (990500 kB): the cap does not bind.
        assert_eq!(min_free_kbytes(&vm, true, pages_of_kib(990_500)), 45_056);
        // Without khugepaged: calculate_min_free_kbytes alone.
        assert_eq!(
            min_free_kbytes(&vm, false, pages_of_kib(24_684_092)),
            19_873
        );
        assert_eq!(min_free_kbytes(&vm, false, (1 << 30) / 4096), 4_096);
    }

    #[test]
    fn recommendation_is_capped_at_5_percent_and_never_lowers_a_written_value() {
        let vm = VmSysctls::default();
        // 128 MiB: 2 zones want 11264 pages; 5% of the pages above the boot high mark win.
        let totalram = (128 << 20) / 4096;
        let boot = default_min_free_kbytes(totalram);
        let (_, _, high) = wmarks_from(boot, &vm, totalram);
        let got = min_free_kbytes(&vm, true, totalram);
        assert_eq!(got, (totalram - high) / 20 * 4);
        assert!(got > boot && got < 11_264 * 4);
        // The VM lab's 384 MiB guest (6.12.117, tests/vm/tiny-v2.toml): the cap binds; its
        // MemTotal of 346412 kB (the pages the kernel manages) gives the guest's 17144 exactly.
        assert_eq!(min_free_kbytes(&vm, true, pages_of_kib(346_412)), 17_144);
        // A written value is kept, even below the recommendation.
        let written = VmSysctls {
            min_free_kbytes: Some(1024),
            ..VmSysctls::default()
        };
        assert_eq!(min_free_kbytes(&written, true, totalram), 1024);
        assert_eq!(populated_zones((5u64 << 30) / 4096), 3);
        assert_eq!(populated_zones(DMA_END_PAGES), 1);
    }
}
