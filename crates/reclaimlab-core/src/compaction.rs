//! Memory compaction on a page_alloc::Zone (mm/compaction.c and __alloc_pages_direct_compact of
//! mm/page_alloc.c as of 6.12.117, which 6.18 keeps for these paths).
//!
//! Modelled: __alloc_pages_direct_compact (compact_stall / compact_success / compact_fail,
//! compaction_defer_reset on success), try_to_compact_pages with compaction_deferred /
//! defer_compaction (compact_considered, compact_defer_shift up to COMPACT_MAX_DEFER_SHIFT,
//! compact_order_failed; only a failed sync compaction defers, as in the kernel) and a switch
//! that turns deferral off (the seed 004 configuration 4); compact_zone with
//! compaction_suit_allocation_order (the watermark already met → success;
//! compaction_suitable: min or low watermark plus compact_gap, and for costly orders the
//! fragmentation index against vm.extfrag_threshold), the cached scanner positions
//! (reset when the scanners meet), the migrate scanner (isolate_migratepages with
//! suitable_migration_source: async direct compaction takes only MOVABLE pageblocks;
//! isolate_migratepages_block: COMPACT_CLUSTER_MAX pages at a time, skipping free blocks and
//! unmovable or compound pages by their order), the free scanner (isolate_freepages from the
//! zone end down, suitable_migration_target, isolate_freepages_block with __isolate_free_page's
//! min-watermark check, free blocks split to order 0), migrate_pages (each page copied to a
//! free target, the source freed to the buddy where it merges), __compact_finished (scanners
//! met → COMPACT_COMPLETE or PARTIAL_SKIPPED; at pageblock boundaries a free block of the
//! order on the type's list, or one find_suitable_fallback may claim → COMPACT_SUCCESS) and
//! the release of unused isolated free pages.
//!
//! Simplified: no capture_control (the allocation is retried from the free lists after
//! compaction, which the kernel also does when capture missed); no pageblock skip bits
//! (PG_migrate_skip) and no fast_find_migrateblock / fast_isolate_freepages (the linear
//! scanners are what they shortcut); THP and other compound pages are not migrated (the
//! kernel migrates them whole; skipped here like unmovable pages); migration never fails
//! (no pinned, locked or writeback pages: sync-light vs sync differ only there). The pages'
//! owners are opaque ids: each migration is reported to the caller, who moves its page
//! record to the new pfn and charges the copy's time.

use crate::page_alloc::{
    MigrateType, PfnState, Wmark, Zone, MAX_PAGE_ORDER, NO_OWNER, PAGEBLOCK_NR_PAGES,
    PAGEBLOCK_ORDER, PAGE_ALLOC_COSTLY_ORDER,
};
use crate::stats::trace::{CompactTp, CompactTrace};
use crate::stats::CompactEvents;

/// enum zone_type's ZONE_NORMAL on x86-64 (the model's one zone).
pub const ZONE_NORMAL: u8 = 2;
/// COMPACT_MAX_DEFER_SHIFT.
pub const COMPACT_MAX_DEFER_SHIFT: u32 = 6;
/// COMPACT_CLUSTER_MAX (= SWAP_CLUSTER_MAX): pages isolated per migrate batch.
pub const COMPACT_CLUSTER_MAX: usize = 32;

/// enum compact_priority (lower is more thorough).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CompactPriority {
    /// COMPACT_PRIO_SYNC_FULL = MIN_COMPACT_PRIORITY.
    SyncFull,
    /// COMPACT_PRIO_SYNC_LIGHT.
    SyncLight,
    /// COMPACT_PRIO_ASYNC = INIT_COMPACT_PRIORITY.
    Async,
}

/// enum compact_result, in the kernel's order (try_to_compact_pages takes the max).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CompactResult {
    /// COMPACT_NOT_SUITABLE_ZONE (only in compaction_suitable's tracepoint here).
    NotSuitableZone,
    Skipped,
    Deferred,
    Continue,
    Complete,
    PartialSkipped,
    Success,
}

impl CompactResult {
    /// The enum's value in include/linux/compaction.h (6.12), the tracepoints' `ret`/`status`.
    pub fn kernel_value(self) -> u8 {
        match self {
            CompactResult::NotSuitableZone => 0,
            CompactResult::Skipped => 1,
            CompactResult::Deferred => 2,
            CompactResult::Continue => 4,
            CompactResult::Complete => 5,
            CompactResult::PartialSkipped => 6,
            CompactResult::Success => 8,
        }
    }
}

/// The zone's compaction state (struct zone's compact_* fields) and the deferral switch.
#[derive(Clone, Debug)]
pub struct CompactState {
    pub compact_considered: u32,
    pub compact_defer_shift: u32,
    pub compact_order_failed: u8,
    /// compact_cached_migrate_pfn (one for both modes) and compact_cached_free_pfn.
    cached_migrate_pfn: u32,
    cached_free_pfn: u32,
    /// Deferral on (the kernel's only behaviour); off is seed 004's configuration 4.
    pub deferral: bool,
    /// vm.extfrag_threshold (default 500).
    pub extfrag_threshold: i64,
    /// The zone's index (enum zone_type), for the tracepoints' `idx`.
    pub zone_idx: u8,
    /// The compaction tracepoints' counts (exported with the `compaction` trace group).
    pub trace: CompactTrace,
}

impl CompactState {
    pub fn new(zone: &Zone, deferral: bool, extfrag_threshold: i64) -> CompactState {
        let mut s = CompactState {
            compact_considered: 0,
            compact_defer_shift: 0,
            compact_order_failed: 0,
            cached_migrate_pfn: 0,
            cached_free_pfn: 0,
            deferral,
            extfrag_threshold,
            zone_idx: ZONE_NORMAL,
            trace: CompactTrace::default(),
        };
        s.reset_cached_positions(zone);
        s
    }

    /// reset_cached_positions: migrate scanner at the zone start, free scanner at the last
    /// pageblock.
    fn reset_cached_positions(&mut self, zone: &Zone) {
        self.cached_migrate_pfn = 0;
        self.cached_free_pfn = (zone.spanned() - 1) & !(PAGEBLOCK_NR_PAGES - 1);
    }

    /// defer_compaction.
    pub fn defer_compaction(&mut self, order: u8) {
        if !self.deferral {
            return;
        }
        self.compact_considered = 0;
        self.compact_defer_shift = (self.compact_defer_shift + 1).min(COMPACT_MAX_DEFER_SHIFT);
        if order < self.compact_order_failed {
            self.compact_order_failed = order;
        }
        self.trace
            .hit(CompactTp::DeferCompaction, self.zone_idx, order, 0);
    }

    /// compaction_deferred: skip this attempt unless 1 << compact_defer_shift attempts were
    /// considered since the last failure.
    pub fn compaction_deferred(&mut self, order: u8) -> bool {
        if !self.deferral {
            return false;
        }
        let limit = 1u32 << self.compact_defer_shift;
        if order < self.compact_order_failed {
            return false;
        }
        self.compact_considered += 1;
        if self.compact_considered >= limit {
            self.compact_considered = limit;
            return false;
        }
        self.trace.hit(CompactTp::Deferred, self.zone_idx, order, 0);
        true
    }

    /// compaction_defer_reset.
    pub fn compaction_defer_reset(&mut self, order: u8, alloc_success: bool) {
        if alloc_success {
            self.compact_considered = 0;
            self.compact_defer_shift = 0;
        }
        if order >= self.compact_order_failed {
            self.compact_order_failed = order + 1;
        }
    }
}

/// What one direct compaction did, for the caller's time and PSI accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactWork {
    pub migrate_scanned: u64,
    pub free_scanned: u64,
    pub migrated: u64,
}

/// struct compact_control.
struct CompactControl {
    order: u8,
    migratetype: MigrateType,
    sync: bool,
    direct: bool,
    migrate_pfn: u32,
    /// The pageblock the free scanner works in (it goes down from here).
    free_pfn: u32,
    whole_zone: bool,
    /// Isolated pages to migrate and isolated free targets (cc->migratepages, cc->freepages).
    migratepages: Vec<u32>,
    freepages: Vec<u32>,
    work: CompactWork,
    isolated: u64,
    /// Proactive compaction (cc->proactive_compaction, order -1): done once the zone's
    /// fragmentation score is at most this (fragmentation_score_wmark(true)).
    proactive_wmark_low: Option<u64>,
    /// mm_compaction_isolate_migratepages, _isolate_freepages (one per pageblock visit) and
    /// mm_compaction_migratepages (one per batch): calls and the two fields, for st.trace.
    tp_isolate_migrate: [u64; 3],
    tp_isolate_free: [u64; 3],
    tp_migrate: [u64; 3],
}

/// compact_gap: free memory compaction wants beyond the watermark (2 << order).
fn compact_gap(order: u8) -> u64 {
    2u64 << order
}

/// compaction_suitable: enough free memory for compaction to build the block (low watermark
/// for costly orders, min otherwise, plus compact_gap) and, for costly orders, a failure the
/// fragmentation index blames on fragmentation (above vm.extfrag_threshold) rather than on
/// lack of memory.
/// Counts mm_compaction_suitable with its verdict, as the kernel does on every call.
pub fn compaction_suitable(zone: &Zone, st: &mut CompactState, order: u8) -> bool {
    let mark = if order > PAGE_ALLOC_COSTLY_ORDER {
        zone.wmark.low
    } else {
        zone.wmark.min
    };
    let ret = if !zone.watermark_ok(0, mark + compact_gap(order), false) {
        CompactResult::Skipped
    } else if order > PAGE_ALLOC_COSTLY_ORDER && {
        let fragindex = zone.fragmentation_index(order);
        fragindex >= 0 && fragindex <= st.extfrag_threshold
    } {
        CompactResult::NotSuitableZone
    } else {
        CompactResult::Continue
    };
    st.trace
        .hit(CompactTp::Suitable, st.zone_idx, order, ret.kernel_value());
    ret == CompactResult::Continue
}

/// compaction_suit_allocation_order: already allocatable → success; not suitable → skipped.
fn suit_allocation_order(
    zone: &Zone,
    st: &mut CompactState,
    order: u8,
    mark: Wmark,
) -> CompactResult {
    if zone.watermark_ok(order, zone.wmark.get(mark), false) {
        return CompactResult::Success;
    }
    if !compaction_suitable(zone, st, order) {
        return CompactResult::Skipped;
    }
    CompactResult::Continue
}

/// suitable_migration_source.
fn suitable_migration_source(cc: &CompactControl, zone: &Zone, pfn: u32) -> bool {
    if cc.sync || !cc.direct {
        return true;
    }
    let block = zone.pageblock_mt(pfn);
    if cc.migratetype == MigrateType::Movable {
        block == MigrateType::Movable
    } else {
        block == cc.migratetype
    }
}

/// suitable_migration_target: a MOVABLE pageblock that does not start with a free block the
/// request (or a pageblock) could use as it is.
fn suitable_migration_target(cc: &CompactControl, zone: &Zone, pfn: u32) -> bool {
    if let PfnState::Free { order } = zone.state(pfn) {
        let o = if cc.order > 0 {
            cc.order
        } else {
            PAGEBLOCK_ORDER
        };
        if order >= o {
            return false;
        }
    }
    zone.pageblock_mt(pfn) == MigrateType::Movable
}

/// What a scanner does at the pfn it visits (see `scan_block`).
enum Step {
    /// Counted as scanned; go on this many pfns further (over a block by its order).
    Over(u32),
    /// Counted as scanned; stop here (isolate_freepages_block's failed watermark check).
    Stop,
    /// Not counted; stop before this pfn (the scanner has what it came for).
    Enough,
}

/// A pfn's extent: a free or allocated block by its order, a tail page alone.
fn extent(s: PfnState) -> u32 {
    match s {
        PfnState::Free { order } | PfnState::Alloc { order, .. } => 1 << order,
        PfnState::Tail => 1,
    }
}

/// The walk both scanners make over one pageblock (isolate_migratepages_block and
/// isolate_freepages_block): pfns of [pfn, end) one by one, stepping over free and allocated
/// blocks by their order, every pfn passed counted in `scanned`, `visit` deciding what to do
/// with each block. Returns the pfn where the walk stopped (`end` or beyond when it ran through).
fn scan_block<C>(
    cc: &mut C,
    zone: &mut Zone,
    mut pfn: u32,
    end: u32,
    scanned: fn(&mut C) -> &mut u64,
    mut visit: impl FnMut(&mut C, &mut Zone, u32, PfnState) -> Step,
) -> u32 {
    while pfn < end {
        let s = zone.state(pfn);
        match visit(cc, zone, pfn, s) {
            Step::Enough => break,
            Step::Stop => {
                *scanned(cc) += 1;
                break;
            }
            Step::Over(n) => {
                // Every pfn a free or compound block covers counts as scanned, as the
                // kernel's nr_scanned += (1 << order) - 1 (and isolated - 1) does.
                *scanned(cc) += n as u64;
                pfn += n;
            }
        }
    }
    pfn
}

/// isolate_migratepages: from migrate_pfn, the next suitable pageblock's movable order-0
/// pages, up to COMPACT_CLUSTER_MAX (isolate_migratepages_block). Never passes the free
/// scanner's block.
fn isolate_migratepages(cc: &mut CompactControl, zone: &mut Zone) {
    while cc.migrate_pfn < cc.free_pfn {
        let block_end = (cc.migrate_pfn | (PAGEBLOCK_NR_PAGES - 1)) + 1;
        if !suitable_migration_source(cc, zone, cc.migrate_pfn) {
            cc.migrate_pfn = block_end;
            continue;
        }
        let scanned_before = cc.work.migrate_scanned;
        let pfn = scan_block(
            cc,
            zone,
            cc.migrate_pfn,
            block_end,
            |cc| &mut cc.work.migrate_scanned,
            |cc, _, pfn, s| {
                if cc.migratepages.len() >= COMPACT_CLUSTER_MAX {
                    return Step::Enough;
                }
                if let PfnState::Alloc {
                    order: 0,
                    mt: MigrateType::Movable,
                    owner,
                } = s
                {
                    if owner != NO_OWNER {
                        cc.migratepages.push(pfn);
                    }
                }
                Step::Over(extent(s))
            },
        );
        cc.tp_isolate_migrate[0] += 1;
        cc.tp_isolate_migrate[1] += cc.work.migrate_scanned - scanned_before;
        cc.tp_isolate_migrate[2] += cc.migratepages.len() as u64;
        cc.migrate_pfn = pfn.min(block_end);
        cc.isolated += cc.migratepages.len() as u64;
        return;
    }
}

/// isolate_freepages: pageblocks from the free scanner's position down to the one after the
/// migrate scanner's, their free blocks split into order-0 targets, until there are as many
/// targets as pages to migrate. A block left part-scanned is scanned again next time.
fn isolate_freepages(cc: &mut CompactControl, zone: &mut Zone) {
    let low = (cc.migrate_pfn | (PAGEBLOCK_NR_PAGES - 1)) + 1;
    while cc.free_pfn >= low && cc.freepages.len() < cc.migratepages.len() {
        let start = cc.free_pfn;
        if suitable_migration_target(cc, zone, start) {
            let end = (start + PAGEBLOCK_NR_PAGES).min(zone.spanned());
            let (scanned_before, taken_before) = (cc.work.free_scanned, cc.freepages.len());
            let pfn = scan_block(
                cc,
                zone,
                start,
                end,
                |cc| &mut cc.work.free_scanned,
                |cc, zone, pfn, s| {
                    if cc.freepages.len() >= cc.migratepages.len() {
                        return Step::Enough;
                    }
                    let PfnState::Free { order } = s else {
                        return Step::Over(extent(s));
                    };
                    // __isolate_free_page: keep the zone above min after taking the block.
                    if !zone.watermark_ok(0, zone.wmark.min + (1 << order), false) {
                        return Step::Stop;
                    }
                    let got = zone.isolate_free_block(pfn);
                    cc.freepages.extend(pfn..pfn + (1 << got));
                    cc.isolated += 1 << got;
                    Step::Over(1 << got)
                },
            );
            cc.tp_isolate_free[0] += 1;
            cc.tp_isolate_free[1] += cc.work.free_scanned - scanned_before;
            cc.tp_isolate_free[2] += (cc.freepages.len() - taken_before) as u64;
            if pfn < end && cc.freepages.len() >= cc.migratepages.len() {
                // Stopped inside the block with enough targets: resume here next time.
                return;
            }
        }
        if start < PAGEBLOCK_NR_PAGES {
            cc.free_pfn = 0;
            break;
        }
        cc.free_pfn = start - PAGEBLOCK_NR_PAGES;
    }
}

/// __compact_finished.
fn compact_finished(cc: &CompactControl, zone: &Zone) -> CompactResult {
    // compact_scanners_met: the scanners are in the same pageblock or have crossed.
    if cc.free_pfn >> PAGEBLOCK_ORDER <= cc.migrate_pfn >> PAGEBLOCK_ORDER {
        return if cc.whole_zone {
            CompactResult::Complete
        } else {
            CompactResult::PartialSkipped
        };
    }
    if let Some(wmark_low) = cc.proactive_wmark_low {
        // kswapd does not run while this synchronous compaction does (the kernel's
        // kswapd_is_running check).
        return if fragmentation_score_zone(zone) > wmark_low {
            CompactResult::Continue
        } else {
            CompactResult::Success
        };
    }
    if cc.migrate_pfn & (PAGEBLOCK_NR_PAGES - 1) != 0 {
        return CompactResult::Continue;
    }
    for o in cc.order..=MAX_PAGE_ORDER {
        if zone.nr_free(o, cc.migratetype) > 0 {
            return CompactResult::Success;
        }
        if matches!(
            zone.find_suitable_fallback(o, cc.migratetype),
            Some((_, true))
        ) {
            return CompactResult::Success;
        }
    }
    CompactResult::Continue
}

/// compact_zone: one compaction of the zone for an order-`order` request of `mt`. Each page
/// moved is reported as (owner, old pfn, new pfn).
#[allow(clippy::too_many_arguments)]
fn compact_zone(
    zone: &mut Zone,
    st: &mut CompactState,
    ev: &mut CompactEvents,
    order: u8,
    mt: MigrateType,
    prio: CompactPriority,
    direct: bool,
    mark: Wmark,
    proactive_wmark_low: Option<u64>,
    moved: &mut dyn FnMut(u32, u32, u32),
) -> (CompactResult, CompactWork) {
    let last_block = (zone.spanned() - 1) & !(PAGEBLOCK_NR_PAGES - 1);
    // Proactive compaction (proactive_compact_node) sets cc->whole_zone: both scanners start
    // at the zone's ends, whatever the cached positions say.
    let (migrate_pfn, free_pfn) = if proactive_wmark_low.is_some() {
        (0, last_block)
    } else {
        let r = suit_allocation_order(zone, st, order, mark);
        if r != CompactResult::Continue {
            return (r, CompactWork::default());
        }
        (st.cached_migrate_pfn, st.cached_free_pfn)
    };
    let mut cc = CompactControl {
        order,
        migratetype: mt,
        sync: prio != CompactPriority::Async,
        direct,
        migrate_pfn,
        free_pfn,
        whole_zone: migrate_pfn == 0 && free_pfn == last_block,
        proactive_wmark_low,
        migratepages: Vec::with_capacity(COMPACT_CLUSTER_MAX),
        freepages: Vec::new(),
        work: CompactWork::default(),
        isolated: 0,
        tp_isolate_migrate: [0; 3],
        tp_isolate_free: [0; 3],
        tp_migrate: [0; 3],
    };
    let ret = loop {
        let r = compact_finished(&cc, zone);
        if r != CompactResult::Continue {
            break r;
        }
        isolate_migratepages(&mut cc, zone);
        if cc.migratepages.is_empty() {
            continue;
        }
        isolate_freepages(&mut cc, zone);
        let (nr_all, migrated_before) = (cc.migratepages.len() as u64, cc.work.migrated);
        // migrate_pages: one target per page while targets last; the rest go back
        // (putback_movable_pages) and the scanners have met.
        for src in std::mem::take(&mut cc.migratepages) {
            let Some(dst) = cc.freepages.pop() else { break };
            let PfnState::Alloc { owner, .. } = zone.state(src) else {
                unreachable!("isolated page {src} is not allocated")
            };
            zone.set_owner(dst, owner);
            moved(owner, src, dst);
            zone.free(src);
            cc.work.migrated += 1;
        }
        // mm_compaction_migratepages: the batch and how many of it found a target (the
        // rest go back: nr_failed).
        let ok = cc.work.migrated - migrated_before;
        cc.tp_migrate[0] += 1;
        cc.tp_migrate[1] += ok;
        cc.tp_migrate[2] += nr_all - ok;
    };
    // release_free_list: unused targets go back to the buddy.
    for p in cc.freepages.drain(..) {
        zone.free(p);
    }
    st.trace
        .hit(CompactTp::End, cc.sync as u8, ret.kernel_value(), 0);
    for k in 0..3 {
        st.trace.isolate_migrate[k] += cc.tp_isolate_migrate[k];
        st.trace.isolate_free[k] += cc.tp_isolate_free[k];
        st.trace.migratepages[k] += cc.tp_migrate[k];
    }
    if matches!(ret, CompactResult::Complete | CompactResult::PartialSkipped) {
        st.reset_cached_positions(zone);
    } else {
        st.cached_migrate_pfn = cc.migrate_pfn;
        st.cached_free_pfn = cc.free_pfn;
    }
    ev.compact_migrate_scanned += cc.work.migrate_scanned;
    ev.compact_free_scanned += cc.work.free_scanned;
    ev.compact_isolated += cc.isolated;
    ev.pgmigrate_success += cc.work.migrated;
    (ret, cc.work)
}

/// try_to_compact_pages for our one zone: deferred (for all but the most thorough priority),
/// else compact_zone; a success resets the failed order, a failed sync compaction defers.
#[allow(clippy::too_many_arguments)]
pub fn try_to_compact_pages(
    zone: &mut Zone,
    st: &mut CompactState,
    ev: &mut CompactEvents,
    order: u8,
    mt: MigrateType,
    prio: CompactPriority,
    mark: Wmark,
    moved: &mut dyn FnMut(u32, u32, u32),
) -> (CompactResult, CompactWork) {
    st.trace
        .hit(CompactTp::TryToCompactPages, order, prio as u8, 0);
    if prio > CompactPriority::SyncFull && st.compaction_deferred(order) {
        return (CompactResult::Deferred, CompactWork::default());
    }
    let (status, work) = compact_zone(zone, st, ev, order, mt, prio, true, mark, None, moved);
    if status == CompactResult::Success {
        st.compaction_defer_reset(order, false);
    } else if prio != CompactPriority::Async
        && matches!(
            status,
            CompactResult::Complete | CompactResult::PartialSkipped
        )
    {
        st.defer_compaction(order);
    }
    (status, work)
}

/// __alloc_pages_direct_compact: compact, then allocate from the free lists with the
/// caller's watermark. compact_stall unless compaction was skipped; compact_success with a
/// page (and the deferral reset), compact_fail without.
#[allow(clippy::too_many_arguments)]
pub fn alloc_pages_direct_compact(
    zone: &mut Zone,
    st: &mut CompactState,
    ev: &mut CompactEvents,
    order: u8,
    mt: MigrateType,
    prio: CompactPriority,
    mark: Wmark,
    moved: &mut dyn FnMut(u32, u32, u32),
) -> (Option<u32>, CompactResult, CompactWork) {
    if order == 0 {
        return (None, CompactResult::Skipped, CompactWork::default());
    }
    let (r, work) = try_to_compact_pages(zone, st, ev, order, mt, prio, mark, moved);
    if r == CompactResult::Skipped {
        return (None, r, work);
    }
    ev.compact_stall += 1;
    let page = if zone.watermark_ok(order, zone.wmark.get(mark), false) {
        zone.rmqueue(order, mt)
    } else {
        None
    };
    if page.is_some() {
        st.compaction_defer_reset(order, true);
        ev.compact_success += 1;
    } else {
        ev.compact_fail += 1;
    }
    (page, r, work)
}

/// kcompactd_do_work: kcompactd, woken for `order` (pgdat->kcompactd_max_order), compacts
/// the zone in sync-light mode from every pageblock (not a direct compaction: no
/// suitable_migration_source filter) unless deferred or the order is already allocatable at
/// the min watermark or compaction is unsuitable; success resets the failed order, a
/// complete run defers like sync direct compaction. Counts compact_daemon_wake and its own
/// scanned pages besides the common counters.
pub fn kcompactd_do_work(
    zone: &mut Zone,
    st: &mut CompactState,
    ev: &mut CompactEvents,
    order: u8,
    moved: &mut dyn FnMut(u32, u32, u32),
) -> CompactWork {
    ev.compact_daemon_wake += 1;
    st.trace.hit(CompactTp::KcompactdWake, order, 0, 0);
    if st.compaction_deferred(order)
        || suit_allocation_order(zone, st, order, Wmark::Min) != CompactResult::Continue
    {
        return CompactWork::default();
    }
    let (status, work) = compact_zone(
        zone,
        st,
        ev,
        order,
        MigrateType::Movable,
        CompactPriority::SyncLight,
        false,
        Wmark::Min,
        None,
        moved,
    );
    if status == CompactResult::Success {
        st.compaction_defer_reset(order, false);
    } else if matches!(
        status,
        CompactResult::Complete | CompactResult::PartialSkipped
    ) {
        st.defer_compaction(order);
    }
    ev.compact_daemon_migrate_scanned += work.migrate_scanned;
    ev.compact_daemon_free_scanned += work.free_scanned;
    work
}

/// COMPACTION_HPAGE_ORDER: the order proactive compaction scores fragmentation for.
pub const COMPACTION_HPAGE_ORDER: u8 = PAGEBLOCK_ORDER;
/// HPAGE_FRAG_CHECK_INTERVAL_MSEC: kcompactd's proactive check interval.
pub const HPAGE_FRAG_CHECK_INTERVAL_MSEC: u64 = 500;

/// fragmentation_score_zone: extfrag_for_order at COMPACTION_HPAGE_ORDER.
pub fn fragmentation_score_zone(zone: &Zone) -> u64 {
    zone.extfrag_for_order(COMPACTION_HPAGE_ORDER)
}

/// fragmentation_score_node for a node of this one zone: the zone's score weighted by its
/// share of the node's present pages (fragmentation_score_zone_weighted: present / (node
/// present + 1), integer arithmetic as the kernel's).
pub fn fragmentation_score_node(zone: &Zone) -> u64 {
    let present = zone.spanned() as u64;
    fragmentation_score_zone(zone) * present / (present + 1)
}

/// fragmentation_score_wmark: low = max(100 - proactiveness, 5), high = min(low + 10, 100).
pub fn fragmentation_score_wmark(proactiveness: u32, low: bool) -> u64 {
    let wmark_low = 100u64.saturating_sub(proactiveness as u64).max(5);
    if low {
        wmark_low
    } else {
        (wmark_low + 10).min(100)
    }
}

/// kcompactd's timeout branch (6.12 kcompactd): when should_proactive_compact_node (the
/// knob is on, kswapd is not running, the node's score is above the high mark),
/// proactive_compact_node: the whole zone compacted in sync-light mode with order -1, every
/// pageblock a migration source, until the zone's score is at most the low mark or the
/// scanners meet; no deferral of the zone, no compact_daemon_wake. Returns whether it ran and
/// whether the node's score went down (the kernel waits 1 << COMPACT_MAX_DEFER_SHIFT
/// intervals after a run that did not lower it).
pub fn kcompactd_proactive(
    zone: &mut Zone,
    st: &mut CompactState,
    ev: &mut CompactEvents,
    proactiveness: u32,
    kswapd_running: bool,
    moved: &mut dyn FnMut(u32, u32, u32),
) -> Option<bool> {
    if proactiveness == 0
        || kswapd_running
        || fragmentation_score_node(zone) <= fragmentation_score_wmark(proactiveness, false)
    {
        return None;
    }
    let prev = fragmentation_score_node(zone);
    let (_, work) = compact_zone(
        zone,
        st,
        ev,
        0,
        MigrateType::Unmovable,
        CompactPriority::SyncLight,
        false,
        Wmark::Min,
        Some(fragmentation_score_wmark(proactiveness, true)),
        moved,
    );
    ev.compact_daemon_migrate_scanned += work.migrate_scanned;
    ev.compact_daemon_free_scanned += work.free_scanned;
    Some(fragmentation_score_node(zone) < prev)
}

/// compaction_ready (mm/vmscan.c): reclaim for a high-order allocation may stop in favour
/// of compaction: the order is already allocatable at min, or compaction is suitable and
/// free memory is above high + compact_gap.
pub fn compaction_ready(zone: &Zone, st: &mut CompactState, order: u8) -> bool {
    if zone.watermark_ok(order, zone.wmark.min, false) {
        return true;
    }
    if !compaction_suitable(zone, st, order) {
        return false;
    }
    zone.watermark_ok(0, zone.wmark.high + compact_gap(order), false)
}

/// should_continue_reclaim (mm/vmscan.c) for reclaim/compaction (in_reclaim_compaction: an
/// order above PAGE_ALLOC_COSTLY_ORDER, or a lower order once priority fell below
/// DEF_PRIORITY - 2): go on while the last pass reclaimed something, the order is neither
/// allocatable nor ready for compaction, and the inactive lists (anon only with swap) hold
/// more than compact_gap.
pub fn should_continue_reclaim(
    zone: &Zone,
    st: &mut CompactState,
    order: u8,
    priority: i32,
    nr_reclaimed: u64,
    inactive_lru_pages: u64,
) -> bool {
    let in_reclaim_compaction = order > 0
        && (order > PAGE_ALLOC_COSTLY_ORDER || priority < crate::mm::vmscan::DEF_PRIORITY - 2);
    if !in_reclaim_compaction || nr_reclaimed == 0 {
        return false;
    }
    if zone.watermark_ok(order, zone.wmark.min, false) || compaction_suitable(zone, st, order) {
        return false;
    }
    inactive_lru_pages > compact_gap(order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page_alloc::Watermarks;

    /// A zone of `blocks` pageblocks filled with movable order-0 pages, every other one of
    /// them freed: half the memory free, no free block above order 0.
    fn fragmented(blocks: u32) -> (Zone, Vec<u32>) {
        let n = blocks * PAGEBLOCK_NR_PAGES;
        let mut z = Zone::new(
            n,
            Watermarks {
                min: 32,
                low: 40,
                high: 48,
            },
        );
        let mut owner_of = vec![NO_OWNER; n as usize];
        let mut held = Vec::new();
        for i in 0..n {
            let p = z.rmqueue(0, MigrateType::Movable).unwrap();
            z.set_owner(p, i);
            owner_of[p as usize] = i;
            held.push(p);
        }
        let mut kept = Vec::new();
        for p in held {
            if p % 2 == 0 {
                z.free(p);
            } else {
                kept.push(p);
            }
        }
        (z, kept)
    }

    #[test]
    fn compaction_makes_an_order_9_block() {
        let (mut z, kept) = fragmented(8);
        let mut st = CompactState::new(&z, true, 500);
        let mut ev = CompactEvents::default();
        assert_eq!(z.buddyinfo()[9], 0);
        assert!(!z.watermark_ok(9, z.wmark.min, false));
        assert!(compaction_suitable(&z, &mut st, 9));
        // Where each owner lives; migrations move them.
        let mut at: Vec<u32> = vec![u32::MAX; 8 * 512];
        for &p in &kept {
            let PfnState::Alloc { owner, .. } = z.state(p) else {
                panic!()
            };
            at[owner as usize] = p;
        }
        let mut moves = 0;
        let (page, r, work) = alloc_pages_direct_compact(
            &mut z,
            &mut st,
            &mut ev,
            9,
            MigrateType::Movable,
            CompactPriority::Async,
            Wmark::Min,
            &mut |owner, old, new| {
                assert_eq!(at[owner as usize], old);
                at[owner as usize] = new;
                moves += 1;
            },
        );
        assert_eq!(r, CompactResult::Success);
        let page = page.expect("an order-9 block after compaction");
        assert_eq!(page % 512, 0);
        assert_eq!(ev.compact_stall, 1);
        assert_eq!(ev.compact_success, 1);
        assert_eq!(ev.compact_fail, 0);
        // The first pageblock's 256 pages moved up to the last block's holes.
        assert_eq!(moves, 256);
        assert_eq!(ev.pgmigrate_success, 256);
        assert_eq!(work.migrated, 256);
        assert!(ev.compact_migrate_scanned >= 512);
        assert!(ev.compact_free_scanned >= 512);
        // Isolated: 256 sources and 256 targets.
        assert_eq!(ev.compact_isolated, 512);
        // Every owner still has exactly one page, at an allocated pfn it owns.
        for (o, &p) in at.iter().enumerate().filter(|(_, &p)| p != u32::MAX) {
            assert_eq!(
                z.state(p),
                PfnState::Alloc {
                    order: 0,
                    mt: MigrateType::Movable,
                    owner: o as u32
                }
            );
        }
        z.check().unwrap();
        assert_eq!(z.free_pages(), 8 * 512 / 2 - 512);
    }

    /// Four pageblocks of unmovable order-0 pages with every fourth page kept: a quarter of
    /// every pageblock pinned, so no compaction can free a block.
    fn pinned_by_unmovable() -> Zone {
        let n = 4 * PAGEBLOCK_NR_PAGES;
        let mut z = Zone::new(
            n,
            Watermarks {
                min: 8,
                low: 10,
                high: 12,
            },
        );
        let all: Vec<u32> = (0..n)
            .map(|_| z.rmqueue(0, MigrateType::Unmovable).unwrap())
            .collect();
        for &p in all.iter().filter(|&&p| p % 4 != 3) {
            z.free(p);
        }
        z
    }

    #[test]
    fn nothing_movable_fails_and_sync_failure_defers() {
        // A quarter of every pageblock held by unmovable pages: compaction cannot free any block.
        let mut z = pinned_by_unmovable();
        let mut st = CompactState::new(&z, true, 500);
        let mut ev = CompactEvents::default();
        let mut never = |_: u32, _: u32, _: u32| panic!("nothing is movable");
        let (page, r, _) = alloc_pages_direct_compact(
            &mut z,
            &mut st,
            &mut ev,
            9,
            MigrateType::Movable,
            CompactPriority::SyncLight,
            Wmark::Min,
            &mut never,
        );
        assert!(page.is_none());
        assert_eq!(r, CompactResult::Complete);
        assert_eq!(
            (ev.compact_stall, ev.compact_fail, ev.compact_success),
            (1, 1, 0)
        );
        assert_eq!(st.compact_defer_shift, 1);
        assert_eq!(st.compact_order_failed, 0);
        // Shift 1: the next attempt is deferred (it still counts a stall and a failure,
        // as __alloc_pages_direct_compact does for COMPACT_DEFERRED), the one after runs.
        let (_, r, _) = alloc_pages_direct_compact(
            &mut z,
            &mut st,
            &mut ev,
            9,
            MigrateType::Movable,
            CompactPriority::SyncLight,
            Wmark::Min,
            &mut never,
        );
        assert_eq!(r, CompactResult::Deferred);
        assert_eq!((ev.compact_stall, ev.compact_fail), (2, 2));
        let scanned = ev.compact_migrate_scanned;
        let (_, r, _) = alloc_pages_direct_compact(
            &mut z,
            &mut st,
            &mut ev,
            9,
            MigrateType::Movable,
            CompactPriority::SyncLight,
            Wmark::Min,
            &mut never,
        );
        assert_eq!(r, CompactResult::Complete);
        assert!(ev.compact_migrate_scanned > scanned);
        assert_eq!(st.compact_defer_shift, 2);
        // The shift saturates at COMPACT_MAX_DEFER_SHIFT.
        for _ in 0..200 {
            alloc_pages_direct_compact(
                &mut z,
                &mut st,
                &mut ev,
                9,
                MigrateType::Movable,
                CompactPriority::SyncLight,
                Wmark::Min,
                &mut never,
            );
        }
        assert_eq!(st.compact_defer_shift, COMPACT_MAX_DEFER_SHIFT);
        z.check().unwrap();
    }

    #[test]
    fn deferral_off_compacts_every_time() {
        let mut z = pinned_by_unmovable();
        let mut st = CompactState::new(&z, false, 500);
        let mut ev = CompactEvents::default();
        for _ in 0..10 {
            let (_, r, _) = alloc_pages_direct_compact(
                &mut z,
                &mut st,
                &mut ev,
                9,
                MigrateType::Movable,
                CompactPriority::SyncLight,
                Wmark::Min,
                &mut |_, _, _| {},
            );
            assert_eq!(r, CompactResult::Complete);
        }
        assert_eq!((ev.compact_stall, ev.compact_fail), (10, 10));
        assert_eq!(st.compact_defer_shift, 0);
    }

    #[test]
    fn async_direct_compaction_skips_unmovable_pageblocks() {
        // Same fragmented zone, but async: the unmovable pageblocks are not migration
        // sources, so nothing is scanned by the migrate scanner.
        let mut z = pinned_by_unmovable();
        let mut st = CompactState::new(&z, true, 500);
        let mut ev = CompactEvents::default();
        let (_, r, _) = alloc_pages_direct_compact(
            &mut z,
            &mut st,
            &mut ev,
            9,
            MigrateType::Movable,
            CompactPriority::Async,
            Wmark::Min,
            &mut |_, _, _| {},
        );
        assert_eq!(r, CompactResult::Complete);
        assert_eq!(ev.compact_migrate_scanned, 0);
        // An async failure does not defer.
        assert_eq!(st.compact_defer_shift, 0);
    }

    #[test]
    fn kcompactd_compacts_unmovable_blocks_too_and_defers() {
        // kcompactd is not a direct compactor: unmovable pageblocks are migration sources
        // (their unmovable pages still cannot move), and its complete run defers.
        let mut z = pinned_by_unmovable();
        let mut st = CompactState::new(&z, true, 500);
        let mut ev = CompactEvents::default();
        let work = kcompactd_do_work(&mut z, &mut st, &mut ev, 9, &mut |_, _, _| {});
        assert_eq!(ev.compact_daemon_wake, 1);
        // The migrate scanner walks pageblocks 0..=2 (it stops at the free scanner's block).
        // Every pfn of them counts, free blocks by their order (nr_scanned += (1 << order) - 1).
        assert_eq!(work.migrate_scanned, 3 * 512);
        assert_eq!(ev.compact_daemon_migrate_scanned, work.migrate_scanned);
        assert_eq!(ev.compact_migrate_scanned, work.migrate_scanned);
        assert_eq!(ev.compact_stall, 0);
        assert_eq!(st.compact_defer_shift, 1);
        // Deferred next time: woken, but nothing scanned.
        let work = kcompactd_do_work(&mut z, &mut st, &mut ev, 9, &mut |_, _, _| {});
        assert_eq!(work, CompactWork::default());
        assert_eq!(ev.compact_daemon_wake, 2);
    }

    #[test]
    fn reclaim_stops_for_compaction_when_it_can_go_ahead() {
        let (z, _) = fragmented(8);
        let mut st = CompactState::new(&z, true, 500);
        // 2048 free pages ≥ high + compact_gap(9) = 48 + 1024: compaction may run now.
        assert!(compaction_ready(&z, &mut st, 9));
        assert!(!should_continue_reclaim(&z, &mut st, 9, 12, 32, 10_000));
        // Order 2 at the default priority is not reclaim/compaction.
        assert!(!should_continue_reclaim(&z, &mut st, 2, 12, 32, 10_000));
        // A zone with too little free memory for compaction: reclaim goes on while the
        // inactive lists hold more than compact_gap.
        let n = 4 * PAGEBLOCK_NR_PAGES;
        let mut z = Zone::new(
            n,
            Watermarks {
                min: 8,
                low: 10,
                high: 12,
            },
        );
        let all: Vec<u32> = (0..n)
            .map(|_| z.rmqueue(0, MigrateType::Movable).unwrap())
            .collect();
        for &p in all.iter().take(512).filter(|&&p| p % 2 == 0) {
            z.free(p);
        }
        let mut st = CompactState::new(&z, true, 500);
        assert!(!compaction_ready(&z, &mut st, 9));
        assert!(should_continue_reclaim(&z, &mut st, 9, 12, 32, 2000));
        assert!(!should_continue_reclaim(&z, &mut st, 9, 12, 32, 1024));
        assert!(!should_continue_reclaim(&z, &mut st, 9, 12, 0, 2000));
    }

    #[test]
    fn lack_of_memory_is_not_for_compaction() {
        // Nearly full zone: below the low watermark + compact_gap, compaction is skipped and
        // no stall is counted.
        let n = 2 * PAGEBLOCK_NR_PAGES;
        let mut z = Zone::new(
            n,
            Watermarks {
                min: 8,
                low: 10,
                high: 12,
            },
        );
        let all: Vec<u32> = (0..n)
            .map(|_| z.rmqueue(0, MigrateType::Movable).unwrap())
            .collect();
        for &p in all.iter().take(64).filter(|&&p| p % 2 == 0) {
            z.free(p);
        }
        let mut st = CompactState::new(&z, true, 500);
        let mut ev = CompactEvents::default();
        let (page, r, _) = alloc_pages_direct_compact(
            &mut z,
            &mut st,
            &mut ev,
            9,
            MigrateType::Movable,
            CompactPriority::Async,
            Wmark::Min,
            &mut |_, _, _| {},
        );
        assert!(page.is_none());
        assert_eq!(r, CompactResult::Skipped);
        assert_eq!(ev, CompactEvents::default());
    }
}
