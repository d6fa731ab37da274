//! Memory cgroups: page counters, charging, limit reclaim, memory.high.
//!
//! Follows mm/memcontrol.c (6.12 ≈ 6.18): try_charge_memcg, mem_cgroup_handle_over_high,
//! calculate_overage/calculate_high_delay, and the v2-only zswap charging
//! (obj_cgroup_charge_zswap); v2 protection (memory.min/low: mem_cgroup_calculate_protection
//! and mm/page_counter.c's effective_protection, 6.12), the v2 swap counter (memory.swap.max:
//! __mem_cgroup_try_charge_swap, mem_cgroup_get_nr_swap_pages) and the page counters'
//! watermarks (memory.peak, memory.swap.peak; v1 memory.max_usage_in_bytes) and the memory
//! counter's failcnt (v1 memory.failcnt); slab objects are charged in bytes through the obj
//! stock in mm/objcg.rs. Simplifications: one CPU's charge stock per memcg
//! (the kernel has one per CPU), no memsw counter (v1 memory.memsw.*), no soft limits.

use super::page::{list, pg, List, NONE};
use super::{Actor, Ctx, Mm, Oom, MAX_RECLAIM_RETRIES, PAGE_SIZE, SWAP_CLUSTER_MAX};
use crate::config::Cgroups;
use crate::error::{self, ConfigError};
use crate::sim::JIFFY_NS;
use crate::stats::{MemcgEvents, MemcgFileEvents};

/// MEMCG_CHARGE_BATCH: charges are taken 64 pages at a time and cached in a per-CPU stock.
pub const MEMCG_CHARGE_BATCH: u64 = 64;
const MEMCG_DELAY_PRECISION_SHIFT: u32 = 20;
const MEMCG_DELAY_SCALING_SHIFT: u32 = 14;
/// MEMCG_MAX_HIGH_DELAY_JIFFIES = 2 s.
const MEMCG_MAX_HIGH_DELAY_JIFFIES: u64 = 2 * crate::sim::HZ;

pub struct Memcg {
    pub path: String,
    pub parent: Option<u16>,
    /// Pre-order: the subtree of memcg i is the index range [i, subtree_end).
    pub subtree_end: u16,
    /// Page counter limit (v1 memory.limit_in_bytes, v2 memory.max), pages.
    pub limit: u64,
    /// v2 memory.high, pages.
    pub high: u64,
    /// v2 memory.zswap.max in pages (as zswap_max_write stores it: page_counter_memparse
    /// rounds bytes down to pages); u64::MAX = max.
    pub zswap_max: u64,
    pub zswap_writeback: bool,
    pub swappiness: u32,
    /// v2 memory.min and memory.low, pages (0 = none).
    pub min: u64,
    pub low: u64,
    /// page_counter emin/elow: the effective protection as of the last
    /// mem_cgroup_calculate_protection of this memcg (stateful, as in the kernel).
    pub emin: u64,
    pub elow: u64,
    /// v2 memory.swap.max, pages (u64::MAX = max).
    pub swap_max: u64,
    /// v2 memory.oom.group (memcg->oom_group): an OOM kill in this subtree kills all of it.
    pub oom_group: bool,
    /// The v2 swap page counter (memcg->swap): swap slots charged to this memcg and its
    /// descendants; the root's is not charged (mem_cgroup_is_root).
    pub swap_usage: u64,
    /// page_counter watermarks of the memory and swap counters (memory.peak, memory.swap.peak
    /// read through a descriptor never written: the high-water mark since the cgroup was
    /// created).
    pub watermark: u64,
    pub swap_watermark: u64,
    /// page_counter local_watermark of the two counters (6.12): the high-water mark since the
    /// last write to a peak file of this memcg through any descriptor; never above the
    /// watermark.
    pub local_watermark: u64,
    pub swap_local_watermark: u64,
    /// The memory page counter's failcnt (v1 memory.failcnt): charges that found this counter
    /// at its limit (page_counter_try_charge, 6.12 mm/page_counter.c), every attempt counted,
    /// a batch that failed before its single page included.
    pub failcnt: u64,
    /// Page counter (memory.usage_in_bytes / memory.current in pages): charged folios, the
    /// charge stock, and (v2) zswap's compressed bytes rounded up to pages. Hierarchical.
    pub usage: u64,
    pub stock: u64,
    /// The obj stock (memcg_stock_pcp nr_bytes while it caches this memcg's objcg; None once
    /// drained) and objcg->nr_charged_bytes: bytes charged to the counter but not to any
    /// kernel object (mm/objcg.rs).
    pub obj_stock: Option<u64>,
    pub nr_charged_bytes: u64,
    /// v2: MEMCG_ZSWAP_B and MEMCG_ZSWAPPED of this memcg alone (not hierarchical).
    pub zswap_bytes: u64,
    pub zswapped: u64,
    /// Pages of this memcg charged for zswap bytes (v2), own only.
    pub zswap_charged: u64,
    /// LRU lists of this memcg's lruvec: inactive_anon, active_anon, inactive_file, active_file.
    pub lru: [List; 4],
    /// This lruvec's LRU_UNEVICTABLE list (mm/mlock.rs): mlocked folios, never scanned.
    pub unevictable: List,
    /// The multi-gen LRU of this memcg's lruvec (mm/lru_gen.rs); empty while it is off.
    pub lrugen: super::lru_gen::LruGen,
    pub zswap_lru: List,
    pub anon_cost: u64,
    pub file_cost: u64,
    /// lruvec->nonresident_age, the workingset clock (advanced here and in all ancestors).
    pub nonresident_age: u64,
    /// lruvec->refaults[ANON]: WORKINGSET_ACTIVATE_ANON at the last snapshot_refaults.
    pub refaults_snapshot: u64,
    /// zswap_lruvec_state.nr_disk_swapins (6.12+ shrinker feedback).
    pub nr_disk_swapins: u64,
    /// zswap_lruvec_state.nr_zswap_protected (6.8–6.11 shrinker protection).
    pub nr_zswap_protected: u64,
    /// The zswap shrinker's deferred work for this memcg (nr_deferred).
    pub zswap_shrinker_deferred: u64,
    pub events: MemcgEvents,
    /// File-page events (exported only by machines with a filesystem).
    pub file_events: MemcgFileEvents,
    /// lruvec->refaults[FILE]: WORKINGSET_ACTIVATE_FILE at the last snapshot_refaults.
    pub refaults_snapshot_file: u64,
    /// Pages of this memcg holding a swap slot (v1 `swap`).
    pub swap_pages: u64,
    /// Pages of this memcg in the swap cache.
    pub swapcached: u64,
    /// lruvec_stats->state as of the last stats flush (hierarchical): the LRU sizes and
    /// WORKINGSET_ACTIVATE_ANON that lruvec_page_state returns (see Mm::flush_memcg_stats).
    pub flushed_lru: [u64; 4],
    /// Folios of each LRU list that a process's lru_add batch still holds (mm/lru_add.rs):
    /// not counted by lruvec_lru_size or the statistics until the batch moves.
    pub lru_batched: [u64; 4],
    pub flushed_workingset_activate: u64,
    pub flushed_workingset_activate_file: u64,
    /// memcg->vmstats->stats_updates: statistic updates in this memcg's subtree since its
    /// statistics were last flushed (mm/memcg_stats.rs).
    pub stats_updates: u64,
    /// Updates in this memcg not yet added to `stats_updates` here and in the ancestors.
    pub stats_updates_own: u64,
}

impl Memcg {
    pub fn new(path: String, parent: Option<u16>) -> Memcg {
        Memcg {
            path,
            parent,
            subtree_end: 0,
            limit: u64::MAX,
            high: u64::MAX,
            zswap_max: u64::MAX,
            zswap_writeback: true,
            swappiness: 60,
            min: 0,
            low: 0,
            emin: 0,
            elow: 0,
            swap_max: u64::MAX,
            oom_group: false,
            swap_usage: 0,
            watermark: 0,
            swap_watermark: 0,
            local_watermark: 0,
            swap_local_watermark: 0,
            failcnt: 0,
            usage: 0,
            stock: 0,
            obj_stock: None,
            nr_charged_bytes: 0,
            zswap_bytes: 0,
            zswapped: 0,
            zswap_charged: 0,
            flushed_lru: [0; 4],
            lru_batched: [0; 4],
            flushed_workingset_activate: 0,
            flushed_workingset_activate_file: 0,
            stats_updates: 0,
            stats_updates_own: 0,
            file_events: MemcgFileEvents::default(),
            refaults_snapshot_file: 0,
            lru: [
                List::new(list::INACTIVE_ANON),
                List::new(list::ACTIVE_ANON),
                List::new(list::INACTIVE_FILE),
                List::new(list::ACTIVE_FILE),
            ],
            unevictable: List::new(list::UNEVICTABLE),
            zswap_lru: List::new(list::ZSWAP),
            lrugen: super::lru_gen::LruGen::new(),
            anon_cost: 0,
            file_cost: 0,
            nonresident_age: 0,
            refaults_snapshot: 0,
            nr_disk_swapins: 0,
            nr_zswap_protected: 0,
            zswap_shrinker_deferred: 0,
            events: MemcgEvents::default(),
            swap_pages: 0,
            swapcached: 0,
        }
    }
}

impl Memcg {
    /// This memcg's own pages on LRU list `which` (1..=4): the classic list, or with the
    /// multi-gen LRU the generations that count as that list (lru_gen_update_size). One of the
    /// two is always empty.
    pub fn nr_lru(&self, which: u8) -> u64 {
        self.lru[which as usize - 1].len + self.lrugen.lru_size(which)
    }

    /// The memcg tree of the lowered cgroups section (pre-order, root first) and whether it is
    /// cgroup v2. A memcg without its own swappiness inherits its parent's, the root vm.swappiness.
    pub(crate) fn tree_from_config(
        c: &Cgroups,
        vm_swappiness: u32,
    ) -> error::Result<(Vec<Memcg>, bool)> {
        let groups = &c.groups;
        if groups.is_empty() || groups[0].parent.is_some() {
            return Err(ConfigError::invalid(
                "cgroups.groups[0]",
                "must be the root cgroup",
            ));
        }
        let v2 = match c.version {
            1 => false,
            2 => true,
            v => {
                return Err(ConfigError::invalid(
                    "cgroups.version",
                    format!("expected 1 or 2, got {v}"),
                ))
            }
        };
        let mut memcgs: Vec<Memcg> = Vec::with_capacity(groups.len());
        for (idx, g) in groups.iter().enumerate() {
            if let Some(p) = g.parent {
                if p as usize >= idx {
                    return Err(ConfigError::invalid(
                        format!("cgroups.groups[{idx}].parent"),
                        format!("the parent must come before the child ({})", g.path),
                    ));
                }
            }
            let mut m = Memcg::new(g.path.clone(), g.parent.map(|p| p as u16));
            m.limit = g.limit_bytes.map_or(u64::MAX, |b| b / PAGE_SIZE);
            m.high = g.high_bytes.map_or(u64::MAX, |b| b / PAGE_SIZE);
            m.zswap_max = g.zswap_max_bytes.map_or(u64::MAX, |b| b / PAGE_SIZE);
            m.zswap_writeback = g.zswap_writeback;
            let v2_only = [
                ("min_bytes", g.min_bytes),
                ("low_bytes", g.low_bytes),
                ("swap_max_bytes", g.swap_max_bytes),
                ("oom_group", g.oom_group.map(u64::from)),
            ];
            if let (false, Some((key, _))) = (v2, v2_only.iter().find(|(_, v)| v.is_some())) {
                return Err(ConfigError::invalid(
                    format!("cgroups.groups[{idx}].{key}"),
                    "is a cgroup v2 file; cgroups.version is 1",
                ));
            }
            m.min = g.min_bytes.map_or(0, |b| b / PAGE_SIZE);
            m.low = g.low_bytes.map_or(0, |b| b / PAGE_SIZE);
            m.swap_max = g.swap_max_bytes.map_or(u64::MAX, |b| b / PAGE_SIZE);
            m.oom_group = g.oom_group.unwrap_or(false);
            m.swappiness = match (g.swappiness, g.parent) {
                (Some(s), _) => s,
                (None, Some(p)) => memcgs[p as usize].swappiness,
                (None, None) => vm_swappiness,
            };
            memcgs.push(m);
        }
        let is_descendant = |memcgs: &[Memcg], mut c: u16, ancestor: u16| loop {
            if c == ancestor {
                return true;
            }
            match memcgs[c as usize].parent {
                Some(p) => c = p,
                None => return false,
            }
        };
        for idx in (0..memcgs.len()).rev() {
            let end = (idx + 1..memcgs.len())
                .find(|&j| !is_descendant(&memcgs, j as u16, idx as u16))
                .unwrap_or(memcgs.len());
            memcgs[idx].subtree_end = end as u16;
        }
        Ok((memcgs, v2))
    }
}

/// calculate_overage: how far usage is over high, as a fixed-point fraction of high.
fn calculate_overage(usage: u64, high: u64) -> u64 {
    if usage <= high {
        return 0;
    }
    let high = high.max(1);
    ((usage - high) << MEMCG_DELAY_PRECISION_SHIFT) / high
}

impl Mm {
    /// Ancestors of `m` including itself, leaf first.
    pub fn memcg_ancestry(&self, m: u16) -> impl Iterator<Item = u16> + '_ {
        std::iter::successors(Some(m), move |&c| self.memcgs[c as usize].parent)
    }

    /// Sum of an LRU list size over the subtree, now (the lists themselves).
    pub fn lru_size_tree(&self, m: u16, which: u8) -> u64 {
        let end = self.memcgs[m as usize].subtree_end;
        (m..end)
            .map(|c| self.memcgs[c as usize].nr_lru(which))
            .sum()
    }

    /// WORKINGSET_ACTIVATE_ANON summed over the subtree, now.
    pub(super) fn workingset_activate_tree(&self, m: u16) -> u64 {
        let end = self.memcgs[m as usize].subtree_end;
        (m..end)
            .map(|c| self.memcgs[c as usize].events.workingset_activate_anon)
            .sum()
    }

    /// WORKINGSET_ACTIVATE_FILE summed over the subtree, now.
    pub(super) fn workingset_activate_file_tree(&self, m: u16) -> u64 {
        let end = self.memcgs[m as usize].subtree_end;
        (m..end)
            .map(|c| self.memcgs[c as usize].file_events.workingset_activate_file)
            .sum()
    }

    pub fn zswap_tree(&self, m: u16) -> (u64, u64) {
        let end = self.memcgs[m as usize].subtree_end;
        (m..end).fold((0, 0), |(b, n), c| {
            (
                b + self.memcgs[c as usize].zswap_bytes,
                n + self.memcgs[c as usize].zswapped,
            )
        })
    }

    /// memory.swap.current in bytes: the subtree's pages holding a swap slot.
    pub fn swap_current_bytes(&self, m: u16) -> u64 {
        let end = self.memcgs[m as usize].subtree_end;
        (m..end)
            .map(|c| self.memcgs[c as usize].swap_pages)
            .sum::<u64>()
            * PAGE_SIZE
    }

    /// The workingset clock advances in the lruvec and all its ancestors.
    pub fn age_nonresident(&mut self, m: u16, nr: u64) {
        let mut c = Some(m);
        while let Some(i) = c {
            self.memcgs[i as usize].nonresident_age += nr;
            c = self.memcgs[i as usize].parent;
        }
    }

    /// page_counter_try_charge up the hierarchy; on failure returns the memcg over its limit,
    /// whose failcnt counts the attempt (the lowest counter over its limit, where the kernel's
    /// walk from the child up stops).
    fn page_counter_try_charge(&mut self, m: u16, nr: u64) -> Result<(), u16> {
        // Two walks up the parent links (check, then charge): no list built per charge.
        let over = self.memcg_ancestry(m).find(|&c| {
            let mc = &self.memcgs[c as usize];
            mc.usage + nr > mc.limit
        });
        if let Some(c) = over {
            self.memcgs[c as usize].failcnt += 1;
            return Err(c);
        }
        self.page_counter_charge_force(m, nr);
        Ok(())
    }

    /// page_counter_charge: usage up the hierarchy, each counter's watermark (memory.peak)
    /// following it.
    fn page_counter_charge_force(&mut self, m: u16, nr: u64) {
        let mut c = Some(m);
        while let Some(i) = c {
            let mc = &mut self.memcgs[i as usize];
            mc.usage += nr;
            mc.local_watermark = mc.local_watermark.max(mc.usage);
            mc.watermark = mc.watermark.max(mc.usage);
            c = mc.parent;
        }
    }

    pub(crate) fn page_counter_uncharge(&mut self, m: u16, nr: u64) {
        let mut c = Some(m);
        while let Some(i) = c {
            let mc = &mut self.memcgs[i as usize];
            mc.usage = mc.usage.saturating_sub(nr);
            c = mc.parent;
        }
    }

    /// try_charge_memcg for one page (mm/memcontrol.c). Reclaims from the memcg over its limit
    /// in the caller's context; inside reclaim (PF_MEMALLOC) the charge is forced.
    pub fn try_charge(&mut self, ctx: &mut Ctx, m: u16) -> Result<(), Oom> {
        if m == 0 {
            // The root memcg has no page counter limit and no stock to manage. Its watermark
            // follows: the lab's "/" is a cgroup of its own, whose max_usage_in_bytes does.
            let root = &mut self.memcgs[0];
            root.usage += 1;
            root.local_watermark = root.local_watermark.max(root.usage);
            root.watermark = root.watermark.max(root.usage);
            return Ok(());
        }
        let nr = 1;
        if self.memcgs[m as usize].stock >= nr {
            self.memcgs[m as usize].stock -= nr;
            return Ok(());
        }
        let mut batch = MEMCG_CHARGE_BATCH.max(nr);
        let mut retries = MAX_RECLAIM_RETRIES;
        let mut drained = false;
        // The kernel retries without bound while reclaim reports progress; a charge whose
        // reclaim "progresses" without ever making room (e.g. v2 pages going to zswap as-is,
        // each charging back a full page) would spin forever, so bound the total.
        let mut guard = 64 * MAX_RECLAIM_RETRIES;
        // When the charge first entered reclaim: its stall latency runs from there.
        let mut stalled: Option<crate::sim::Time> = None;
        let r = self.try_charge_slow(
            ctx,
            m,
            nr,
            &mut batch,
            &mut retries,
            &mut drained,
            &mut guard,
            &mut stalled,
        );
        if let Some(start) = stalled {
            self.latency(ctx, crate::latency::Kind::AllocStall, ctx.now - start);
        }
        r?;
        self.memcgs[m as usize].stock += batch - nr;
        if self.cgroup_v2 {
            self.note_over_high(ctx, m, batch);
        }
        Ok(())
    }

    /// try_charge_memcg's retry loop (after the stock): charge, or reclaim and retry.
    #[allow(clippy::too_many_arguments)]
    fn try_charge_slow(
        &mut self,
        ctx: &mut Ctx,
        m: u16,
        nr: u64,
        batch: &mut u64,
        retries: &mut u32,
        drained: &mut bool,
        guard: &mut u32,
        stalled: &mut Option<crate::sim::Time>,
    ) -> Result<(), Oom> {
        loop {
            match self.page_counter_try_charge(m, *batch) {
                Ok(()) => return Ok(()),
                Err(_) if *batch > nr => *batch = nr,
                Err(over) => {
                    if ctx.memalloc {
                        // The force path raises MEMCG_MAX too (6.12 try_charge_memcg: "if
                        // (!raised_max_event)"): a charge inside reclaim at the limit counts.
                        self.memcgs[over as usize].events.max_events += 1;
                        self.page_counter_charge_force(m, *batch);
                        return Ok(());
                    }
                    self.memcgs[over as usize].events.max_events += 1;
                    stalled.get_or_insert(ctx.now);
                    let memstall = self.psi_memstall_enter(ctx);
                    let reclaimed = self.try_to_free_mem_cgroup_pages(ctx, over, nr);
                    self.psi_memstall_leave(ctx, memstall);
                    if self.memcg_margin(over) >= nr {
                        continue;
                    }
                    if !*drained {
                        *drained = true;
                        self.drain_all_stock(over);
                        continue;
                    }
                    *guard -= 1;
                    if reclaimed > 0 && *guard > 0 {
                        continue;
                    }
                    if *retries == 0 || *guard == 0 {
                        // mem_cgroup_oom counts MEMCG_OOM; the caller picks the victim and
                        // kills it (the scheduler's oom_kill_process counts MEMCG_OOM_KILL).
                        self.memcgs[over as usize].events.oom_events += 1;
                        return Err(Oom { memcg: Some(over) });
                    }
                    *retries -= 1;
                }
            }
        }
    }

    /// Smallest margin below the limit along the ancestry, pages.
    fn memcg_margin(&self, m: u16) -> u64 {
        self.memcg_ancestry(m)
            .map(|c| {
                let mc = &self.memcgs[c as usize];
                mc.limit.saturating_sub(mc.usage)
            })
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Account a newly charged resident page's memcg statistics.
    pub fn commit_charge(&mut self, m: u16) {
        self.memcgs[m as usize].events.pgpgin += 1;
    }

    pub fn uncharge(&mut self, m: u16) {
        self.memcgs[m as usize].events.pgpgout += 1;
        self.page_counter_uncharge(m, 1);
    }

    /// Uncharge `nr` pages of kernel memory (page tables): the page counter only; they were
    /// never folios, so no pgpgout (memcg_account_kmem's counterpart of uncharge).
    pub fn uncharge_kmem(&mut self, m: u16, nr: u64) {
        if m == 0 {
            self.memcgs[0].usage = self.memcgs[0].usage.saturating_sub(nr);
        } else {
            self.page_counter_uncharge(m, nr);
        }
    }

    /// Drop the stock (on exit): stock pages go back to the counter.
    pub fn drain_stock(&mut self, m: u16) {
        let s = std::mem::take(&mut self.memcgs[m as usize].stock);
        self.page_counter_uncharge(m, s);
    }

    /// The high check at the end of try_charge_memcg: accumulate memcg_nr_pages_over_high, and
    /// reclaim synchronously once more than a batch is pending.
    fn note_over_high(&mut self, ctx: &mut Ctx, m: u16, batch: u64) {
        let Actor::Process(p) = ctx.actor else { return };
        let over = self.memcg_ancestry(m).any(|c| {
            let mc = &self.memcgs[c as usize];
            mc.usage > mc.high
        });
        if over {
            self.over_high[p as usize] += batch;
            if self.over_high[p as usize] > MEMCG_CHARGE_BATCH && !ctx.memalloc {
                self.mem_cgroup_handle_over_high(ctx, m);
            }
        }
    }

    /// mem_cgroup_handle_over_high: reclaim from every over-high ancestor, then sleep the
    /// penalty (overage² scaled, ≤ 2 s) unless it is ≤ 10 ms or reclaim keeps making progress.
    /// Called on return to user space and when over-high charges exceed a batch.
    pub fn mem_cgroup_handle_over_high(&mut self, ctx: &mut Ctx, m: u16) {
        let Actor::Process(p) = ctx.actor else { return };
        let nr_pages = std::mem::take(&mut self.over_high[p as usize]);
        if nr_pages == 0 {
            return;
        }
        let start = ctx.now;
        self.handle_over_high(ctx, m, nr_pages);
        self.latency(ctx, crate::latency::Kind::HighReclaim, ctx.now - start);
    }

    fn handle_over_high(&mut self, ctx: &mut Ctx, m: u16, nr_pages: u64) {
        let mut retries = MAX_RECLAIM_RETRIES;
        let mut in_retry = false;
        loop {
            let goal = if in_retry { SWAP_CLUSTER_MAX } else { nr_pages };
            let mut nr_reclaimed = 0;
            // reclaim_high: each ancestor over its high, leaf first.
            for c in self.memcg_ancestry(m).collect::<Vec<_>>() {
                let mc = &self.memcgs[c as usize];
                if mc.usage <= mc.high {
                    continue;
                }
                self.memcgs[c as usize].events.high_events += 1;
                let memstall = self.psi_memstall_enter(ctx);
                nr_reclaimed += self.try_to_free_mem_cgroup_pages(ctx, c, goal);
                self.psi_memstall_leave(ctx, memstall);
            }
            let max_overage = self
                .memcg_ancestry(m)
                .map(|c| {
                    let mc = &self.memcgs[c as usize];
                    calculate_overage(mc.usage, mc.high)
                })
                .max()
                .unwrap_or(0);
            let penalty = if max_overage == 0 {
                0
            } else {
                let j = ((max_overage * max_overage * crate::sim::HZ)
                    >> MEMCG_DELAY_PRECISION_SHIFT)
                    >> MEMCG_DELAY_SCALING_SHIFT;
                j * nr_pages / MEMCG_CHARGE_BATCH
            }
            .min(MEMCG_MAX_HIGH_DELAY_JIFFIES);
            if penalty <= crate::sim::HZ / 100 {
                return;
            }
            if nr_reclaimed > 0 || retries > 0 {
                if nr_reclaimed == 0 {
                    retries -= 1;
                }
                in_retry = true;
                continue;
            }
            // Reclaim did not make enough progress: sleep the penalty.
            if let Some(t) = self.trace.as_deref_mut() {
                t.high_penalty.sleeps += 1;
                t.high_penalty.jiffies += penalty;
            }
            let t = ctx.now + penalty * JIFFY_NS;
            let (start, memstall) = (ctx.now, self.psi_memstall_enter(ctx));
            self.psi_sleep(ctx, t);
            self.psi_memstall_leave(ctx, memstall);
            self.latency(ctx, crate::latency::Kind::Throttle, ctx.now - start);
            return;
        }
    }

    /// v2 zswap charge of `bytes` (obj_cgroup_charge_zswap): forced, inside reclaim.
    pub fn charge_zswap(&mut self, m: u16, bytes: u64) {
        if !self.cgroup_v2 {
            return;
        }
        let mc = &mut self.memcgs[m as usize];
        mc.zswap_bytes += bytes;
        mc.zswapped += 1;
        let need = mc.zswap_bytes.div_ceil(PAGE_SIZE);
        if need > mc.zswap_charged {
            let d = need - mc.zswap_charged;
            mc.zswap_charged = need;
            if m != 0 {
                for _ in 0..d {
                    self.charge_memalloc_page(m);
                }
            }
        }
    }

    /// One page charged in PF_MEMALLOC context (obj_cgroup_charge_zswap's page charge through
    /// obj_cgroup_charge_pages → try_charge_memcg, 6.12): the per-CPU stock first (which
    /// zswap's uncharges refill), else a batch, else one page; at the limit the charge is
    /// forced and raises MEMCG_MAX. Simplified: the stock is per memcg, not per CPU.
    fn charge_memalloc_page(&mut self, m: u16) {
        if self.memcgs[m as usize].stock > 0 {
            self.memcgs[m as usize].stock -= 1;
            return;
        }
        if self.page_counter_try_charge(m, MEMCG_CHARGE_BATCH).is_ok() {
            self.memcgs[m as usize].stock += MEMCG_CHARGE_BATCH - 1;
            return;
        }
        if let Err(over) = self.page_counter_try_charge(m, 1) {
            self.memcgs[over as usize].events.max_events += 1;
            self.page_counter_charge_force(m, 1);
        }
    }

    /// refill_stock: uncharged pages go to the stock, which is drained back to the counter
    /// once it holds more than a batch.
    pub(super) fn refill_stock(&mut self, m: u16, nr: u64) {
        self.memcgs[m as usize].stock += nr;
        if self.memcgs[m as usize].stock > MEMCG_CHARGE_BATCH {
            self.drain_stock(m);
        }
    }

    pub fn uncharge_zswap(&mut self, m: u16, bytes: u64) {
        if !self.cgroup_v2 {
            return;
        }
        let mc = &mut self.memcgs[m as usize];
        mc.zswap_bytes -= bytes;
        mc.zswapped -= 1;
        let need = mc.zswap_bytes.div_ceil(PAGE_SIZE);
        if need < mc.zswap_charged {
            let d = mc.zswap_charged - need;
            mc.zswap_charged = need;
            if m != 0 {
                // obj_cgroup_uncharge_zswap → refill_obj_stock → obj_cgroup_uncharge_pages →
                // refill_stock: the pages stay charged in the stock for the next charges.
                self.refill_stock(m, d);
            }
        }
    }

    /// obj_cgroup_may_zswap (mm/memcontrol.c, 6.12): walking from this memcg up to (not
    /// including) the root, false at the first memory.zswap.max that is 0 or that the
    /// subtree's zswap usage, in whole pages (MEMCG_ZSWAP_B / PAGE_SIZE, flushed), has
    /// reached. Always true on v1.
    pub fn memcg_may_zswap(&mut self, m: u16) -> bool {
        if !self.cgroup_v2 {
            return true;
        }
        let mut c = m;
        while c != 0 {
            let max = self.memcgs[c as usize].zswap_max;
            if max != u64::MAX {
                if max == 0 {
                    return false;
                }
                // "Force flush to get accurate stats for charging": the whole subtree's
                // statistics, LRU sizes included, are flushed here.
                self.flush_memcg_subtree(c);
                let (bytes, _) = self.zswap_tree(c);
                if bytes / PAGE_SIZE >= max {
                    return false;
                }
            }
            match self.memcgs[c as usize].parent {
                Some(p) => c = p,
                None => break,
            }
        }
        true
    }

    /// mem_cgroup_zswap_writeback_enabled (6.12): true while zswap is disabled ("do not block
    /// pages going to the swapping device"); else only if this memcg and every ancestor, the
    /// root included, has memory.zswap.writeback = 1. Always true on v1.
    pub fn zswap_writeback_enabled(&self, m: u16) -> bool {
        !self.cgroup_v2
            || !self.zswap.enabled
            || self
                .memcg_ancestry(m)
                .all(|c| self.memcgs[c as usize].zswap_writeback)
    }

    /// One pass of memory_reclaim's loop (mm/memcontrol.c, 6.12): reclaim a quarter of what is
    /// left (try_to_free_mem_cgroup_pages raises it to SWAP_CLUSTER_MAX) with
    /// MEMCG_RECLAIM_PROACTIVE; a pass that reclaims nothing uses up one of
    /// MAX_RECLAIM_RETRIES, and one more ends the write with -EAGAIN. Returns true when the
    /// write returns (`st.eagain` says how). The caller runs passes until then, yielding the
    /// CPU between them (the kernel checks for signals there). The final pass first drains
    /// every lru_add batch (lru_add_drain_all, mm/lru_add.rs).
    pub fn memory_reclaim_pass(&mut self, ctx: &mut Ctx, m: u16, st: &mut MemoryReclaim) -> bool {
        if st.nr_reclaimed >= st.nr_to_reclaim {
            return true;
        }
        if st.nr_retries == 0 {
            self.lru_add_drain_all();
        }
        let batch = (st.nr_to_reclaim - st.nr_reclaimed) / 4;
        let reclaimed = self.try_to_free_mem_cgroup_pages_proactive(ctx, m, batch, st.swappiness);
        if reclaimed == 0 {
            if st.nr_retries == 0 {
                st.eagain = true;
                return true;
            }
            st.nr_retries -= 1;
        }
        st.nr_reclaimed += reclaimed;
        st.nr_reclaimed >= st.nr_to_reclaim
    }

    /// memory_high_write (6.12): set memory.high, then reclaim the excess: drain the stocks
    /// once, then try_to_free_mem_cgroup_pages(usage − high) until usage ≤ high or
    /// MAX_RECLAIM_RETRIES passes reclaimed nothing. Never OOM-kills.
    pub fn memory_high_write(&mut self, ctx: &mut Ctx, m: u16, high: u64) {
        self.memcgs[m as usize].high = high;
        let mut nr_retries = MAX_RECLAIM_RETRIES;
        let mut drained = false;
        loop {
            let usage = self.memcgs[m as usize].usage;
            if usage <= high {
                return;
            }
            if !drained {
                self.drain_all_stock(m);
                drained = true;
                continue;
            }
            let reclaimed = self.try_to_free_mem_cgroup_pages(ctx, m, usage - high);
            if reclaimed == 0 {
                if nr_retries == 0 {
                    return;
                }
                nr_retries -= 1;
            }
        }
    }

    /// memory_max_write (6.12): set memory.max, drain the stocks once, reclaim the excess with
    /// up to MAX_RECLAIM_RETRIES passes that reclaim nothing, then count MEMCG_OOM and ask
    /// `oom` to kill a task of the memcg (mem_cgroup_out_of_memory); stop when usage ≤ max
    /// or no task could be killed.
    pub fn memory_max_write(
        &mut self,
        ctx: &mut Ctx,
        m: u16,
        max: u64,
        oom: &mut dyn FnMut(&mut Mm, u64) -> bool,
    ) {
        self.memcgs[m as usize].limit = max;
        let mut nr_reclaims = MAX_RECLAIM_RETRIES;
        let mut drained = false;
        loop {
            let usage = self.memcgs[m as usize].usage;
            if usage <= max {
                return;
            }
            if !drained {
                self.drain_all_stock(m);
                drained = true;
                continue;
            }
            if nr_reclaims > 0 {
                if self.try_to_free_mem_cgroup_pages(ctx, m, usage - max) == 0 {
                    nr_reclaims -= 1;
                }
                continue;
            }
            self.memcgs[m as usize].events.oom_events += 1;
            if !oom(self, ctx.now) {
                return;
            }
        }
    }

    /// drain_all_stock(memcg): the charge stocks of the memcg's subtree go back to the counter
    /// (drain_local_stock: the obj stock's whole pages first, its bytes stay charged).
    fn drain_all_stock(&mut self, m: u16) {
        for c in m..self.memcgs[m as usize].subtree_end {
            self.drain_obj_stock(c);
            self.drain_stock(c);
        }
    }
}

/// The state of one write to memory.reclaim (memory_reclaim's locals), kept across the
/// writer's CPU slices.
#[derive(Clone, Debug)]
pub struct MemoryReclaim {
    /// The number written (bytes).
    pub bytes: u64,
    pub nr_to_reclaim: u64,
    pub nr_reclaimed: u64,
    pub nr_retries: u32,
    pub swappiness: Option<u64>,
    /// The write failed with -EAGAIN (reclaim fell short).
    pub eagain: bool,
}

impl MemoryReclaim {
    /// A write of `bytes` (memparse(buf) / PAGE_SIZE pages).
    pub fn new(bytes: u64, swappiness: Option<u64>) -> MemoryReclaim {
        MemoryReclaim {
            bytes,
            nr_to_reclaim: bytes / PAGE_SIZE,
            nr_reclaimed: 0,
            nr_retries: MAX_RECLAIM_RETRIES,
            swappiness,
            eagain: false,
        }
    }
}

/// effective_protection (mm/page_counter.c, 6.12): a memcg's share of its parent's effective
/// memory.min or memory.low. Its own setting, capped by what it uses; scaled down in proportion
/// when the siblings together claim (and use) more than the parent has; with
/// memory_recursiveprot, plus a share of the parent's unclaimed protection in proportion to the
/// memcg's unprotected usage.
fn effective_protection(
    usage: u64,
    parent_usage: u64,
    setting: u64,
    parent_effective: u64,
    siblings_protected: u64,
    recursive: bool,
) -> u64 {
    let protected = usage.min(setting);
    if siblings_protected > parent_effective {
        // u128: pages × pages can exceed u64 on large machines.
        return (protected as u128 * parent_effective as u128 / siblings_protected as u128) as u64;
    }
    let mut ep = protected;
    if recursive
        && parent_effective > siblings_protected
        && parent_usage > siblings_protected
        && usage > protected
    {
        let unclaimed =
            (parent_effective - siblings_protected) as u128 * (usage - protected) as u128;
        ep += (unclaimed / (parent_usage - siblings_protected) as u128) as u64;
    }
    ep
}

impl Mm {
    /// The children of memcg `p`, in pre-order.
    fn memcg_children(&self, p: u16) -> impl Iterator<Item = u16> + '_ {
        let end = self.memcgs[p as usize].subtree_end;
        // Each child's subtree ends where its next sibling starts.
        std::iter::successors(Some(p + 1).filter(|&c| c < end), move |&c| {
            Some(self.memcgs[c as usize].subtree_end).filter(|&n| n < end)
        })
    }

    /// page_counter children_min_usage and children_low_usage of `p`: the sum over its
    /// children of min(usage, memory.min) and min(usage, memory.low). The kernel keeps the sums
    /// current at every charge (propagate_protected_usage); they are computed here when read.
    fn children_protected_usage(&self, p: u16) -> (u64, u64) {
        self.memcg_children(p).fold((0, 0), |(min, low), c| {
            let mc = &self.memcgs[c as usize];
            (min + mc.usage.min(mc.min), low + mc.usage.min(mc.low))
        })
    }

    /// mem_cgroup_calculate_protection → page_counter_calculate_protection (6.12): refresh
    /// emin/elow of `m` for a reclaim of the subtree of `root`, from its parent's values (so
    /// only meaningful in a top-down walk, as the kernel warns). The reclaim root's own values
    /// are left stale (they are ignored, see mem_cgroup_protection); an empty memcg keeps its
    /// old ones. Skipped when no memcg sets memory.min or memory.low (all effective values
    /// then stay 0; see mem_cgroup_below_min for the one consequence).
    pub(super) fn mem_cgroup_calculate_protection(&mut self, root: u16, m: u16) {
        if !self.memcg_protection || root == m {
            return;
        }
        let mc = &self.memcgs[m as usize];
        let (usage, parent) = (
            mc.usage,
            mc.parent
                .expect("only the root has no parent, and it is every reclaim's root"),
        );
        if usage == 0 {
            return;
        }
        if parent == root {
            let mc = &mut self.memcgs[m as usize];
            (mc.emin, mc.elow) = (mc.min, mc.low);
            return;
        }
        let (children_min, children_low) = self.children_protected_usage(parent);
        let pc = &self.memcgs[parent as usize];
        let r = self.memory_recursiveprot;
        let emin = effective_protection(
            usage,
            pc.usage,
            self.memcgs[m as usize].min,
            pc.emin,
            children_min,
            r,
        );
        let elow = effective_protection(
            usage,
            pc.usage,
            self.memcgs[m as usize].low,
            pc.elow,
            children_low,
            r,
        );
        let mc = &mut self.memcgs[m as usize];
        (mc.emin, mc.elow) = (emin, elow);
    }

    /// mem_cgroup_unprotected: the root and the reclaim target itself are never protected.
    fn mem_cgroup_unprotected(&self, target: u16, m: u16) -> bool {
        !self.memcg_protection || m == 0 || m == target
    }

    /// mem_cgroup_below_min: usage at or under the effective memory.min. In the kernel this is
    /// also true for every empty memcg (emin 0 >= usage 0), which shrink_node_memcgs then
    /// skips; the model checks only when protection is configured somewhere, so without it
    /// empty memcgs are still visited (their shrink_slab can matter on v1, where zswap
    /// entries are not charged).
    pub(super) fn mem_cgroup_below_min(&self, target: u16, m: u16) -> bool {
        !self.mem_cgroup_unprotected(target, m)
            && self.memcgs[m as usize].emin >= self.memcgs[m as usize].usage
    }

    /// mem_cgroup_below_low: usage at or under the effective memory.low.
    pub(super) fn mem_cgroup_below_low(&self, target: u16, m: u16) -> bool {
        !self.mem_cgroup_unprotected(target, m)
            && self.memcgs[m as usize].elow >= self.memcgs[m as usize].usage
    }

    /// mem_cgroup_protection: (emin, elow) of `m` as get_scan_count scales by them; none for
    /// the reclaim target itself.
    pub(super) fn mem_cgroup_protection(&self, target: u16, m: u16) -> (u64, u64) {
        if !self.memcg_protection || target == m {
            return (0, 0);
        }
        let mc = &self.memcgs[m as usize];
        (mc.emin, mc.elow)
    }

    /// MEMCG_LOW (memcg_memory_event): a memcg under its memory.low reclaimed anyway.
    pub(super) fn memcg_low_event(&mut self, m: u16) {
        self.memcgs[m as usize].events.low_events += 1;
    }

    /// __mem_cgroup_try_charge_swap (6.12) for one page of memcg `m`, after a slot was found:
    /// v2 charges the memcg's swap counter (and its ancestors'); at memory.swap.max it fails
    /// with MEMCG_SWAP_MAX and MEMCG_SWAP_FAIL and the caller gives the slot back. v1 (the
    /// memsw counter, not modelled) and the root charge nothing.
    pub(super) fn mem_cgroup_try_charge_swap(&mut self, m: u16) -> bool {
        if !self.cgroup_v2 || m == 0 {
            return true;
        }
        let over = self.memcg_ancestry(m).filter(|&c| c != 0).any(|c| {
            let mc = &self.memcgs[c as usize];
            mc.swap_usage + 1 > mc.swap_max
        });
        if over {
            let ev = &mut self.memcgs[m as usize].events;
            ev.swap_max_events += 1;
            ev.swap_fail_events += 1;
            return false;
        }
        for c in self
            .memcg_ancestry(m)
            .filter(|&c| c != 0)
            .collect::<Vec<_>>()
        {
            let mc = &mut self.memcgs[c as usize];
            mc.swap_usage += 1;
            mc.swap_local_watermark = mc.swap_local_watermark.max(mc.swap_usage);
            mc.swap_watermark = mc.swap_watermark.max(mc.swap_usage);
        }
        true
    }

    /// folio_alloc_swap found no free slot: mem_cgroup_try_charge_swap with entry 0 counts
    /// MEMCG_SWAP_FAIL (v2).
    pub(super) fn mem_cgroup_swap_fail(&mut self, m: u16) {
        if self.cgroup_v2 {
            self.memcgs[m as usize].events.swap_fail_events += 1;
        }
    }

    /// __mem_cgroup_uncharge_swap: a slot of memcg `m` is freed.
    pub(super) fn mem_cgroup_uncharge_swap(&mut self, m: u16) {
        if !self.cgroup_v2 || m == 0 {
            return;
        }
        let mut c = Some(m);
        while let Some(i) = c.filter(|&i| i != 0) {
            let mc = &mut self.memcgs[i as usize];
            mc.swap_usage -= 1;
            c = mc.parent;
        }
    }

    /// mem_cgroup_swap_full (6.12): swap is half full globally (vm_swap_full), or (v2) the memcg
    /// or an ancestor below the root uses half its memory.swap.max (memory.swap.high, the
    /// other bound of the kernel's test, is not modelled). Swap-in and reclaim then free a
    /// swap-cache folio's slot rather than keep both copies.
    pub(super) fn mem_cgroup_swap_full(&self, m: u16) -> bool {
        if self.swap.vm_swap_full() {
            return true;
        }
        self.memcg_swap_max
            && self.memcg_ancestry(m).filter(|&c| c != 0).any(|c| {
                let mc = &self.memcgs[c as usize];
                mc.swap_usage.saturating_mul(2) >= mc.swap_max
            })
    }

    /// mem_cgroup_get_nr_swap_pages (6.12): free swap slots, limited by the room under
    /// memory.swap.max of the memcg and every ancestor below the root (v2).
    pub(super) fn mem_cgroup_get_nr_swap_pages(&self, m: u16) -> u64 {
        let free = self.swap.nr_swap_pages;
        if !self.memcg_swap_max {
            return free;
        }
        self.memcg_ancestry(m)
            .filter(|&c| c != 0)
            .map(|c| {
                let mc = &self.memcgs[c as usize];
                mc.swap_max.saturating_sub(mc.swap_usage)
            })
            .fold(free, u64::min)
    }
}

impl Mm {
    /// memory.stat (v1: own and total_ rows; v2: hierarchical) and the v2 memory.current,
    /// memory.swap.current, memory.zswap.current and memory.events files of every memcg, under
    /// `memcg[<path>].`. Event counters come from [`MemcgEvents`]' declaration (its tags say
    /// which file shows which); the gauges are read from the pages and lists now.
    pub(crate) fn export_memcgs(&self, out: &mut Vec<(String, u64)>) {
        // Per memcg: mapped anonymous pages (NR_ANON_MAPPED: rss / anon) and pages out of
        // memory holding a swap slot (v1 MEMCG_SWAP counts only those).
        let mut mapped = vec![0u64; self.memcgs.len()];
        let mut swapped_out = vec![0u64; self.memcgs.len()];
        // NR_FILE_MAPPED per memcg: page cache pages mapped by a process.
        let mut file_mapped = vec![0u64; self.memcgs.len()];
        // NR_FILE_DIRTY and NR_WRITEBACK (page cache and swap cache folios) per memcg.
        let mut file_dirty = vec![0u64; self.memcgs.len()];
        let mut writeback = vec![0u64; self.memcgs.len()];
        // NR_SHMEM per memcg: tmpfs pages in their files' mappings (part of NR_FILE_PAGES).
        let shmem = if self.tmpfs.is_empty() {
            vec![0u64; self.memcgs.len()]
        } else {
            self.nr_shmem_by_memcg()
        };
        for p in &self.pages {
            if p.has(pg::RESIDENT) && p.has(pg::WRITEBACK) {
                writeback[p.memcg as usize] += 1;
            }
            if p.has(pg::FILE) {
                if p.has(pg::RESIDENT) && p.has(pg::DIRTY) {
                    file_dirty[p.memcg as usize] += 1;
                }
                if p.has(pg::RESIDENT) && p.has(pg::MAPPED) {
                    file_mapped[p.memcg as usize] += 1;
                }
            } else if p.has(pg::RESIDENT) && p.has(pg::MAPPED) && !p.has(pg::SHMEM) {
                // NR_ANON_MAPPED: a mapped tmpfs page is NR_FILE_MAPPED (and NR_SHMEM).
                mapped[p.memcg as usize] += 1;
            } else if p.has(pg::RESIDENT) && p.has(pg::MAPPED) {
                file_mapped[p.memcg as usize] += 1;
            } else if !p.has(pg::RESIDENT) && p.slot != NONE {
                swapped_out[p.memcg as usize] += 1;
            }
        }
        for (idx, m) in self.memcgs.iter().enumerate() {
            let idx = idx as u16;
            let pre = format!("memcg[{}].", m.path);
            let stat = format!("{pre}memory.stat.");
            let tree = || (idx..m.subtree_end).map(|c| &self.memcgs[c as usize]);
            let sum = |f: &dyn Fn(&Memcg) -> u64| tree().map(f).sum::<u64>();
            let sum_of = |v: &[u64]| (idx..m.subtree_end).map(|c| v[c as usize]).sum::<u64>();
            let lru = |which: u8| self.lru_size_tree(idx, which) * PAGE_SIZE;
            let total = MemcgEvents::sum(tree().map(|c| &c.events));
            if self.cgroup_v2 {
                let gauges = [
                    ("anon", sum_of(&mapped) * PAGE_SIZE),
                    ("swapcached", sum(&|m| m.swapcached) * PAGE_SIZE),
                    ("zswap", sum(&|m| m.zswap_bytes)),
                    ("zswapped", sum(&|m| m.zswapped) * PAGE_SIZE),
                    ("inactive_anon", lru(list::INACTIVE_ANON)),
                    ("active_anon", lru(list::ACTIVE_ANON)),
                ];
                out.extend(gauges.into_iter().map(|(k, v)| (format!("{stat}{k}"), v)));
                if self.has_mlock() {
                    // NR_UNEVICTABLE's memory.stat row (mm/mlock.rs), with an mlocked region only.
                    out.push((
                        format!("{stat}unevictable"),
                        self.unevictable_tree(idx) * PAGE_SIZE,
                    ));
                }
                total.export_tagged("v2", &stat, out);
                if self.has_files() {
                    // NR_FILE_PAGES: page cache and swap cache; NR_FILE_MAPPED.
                    let file = lru(list::INACTIVE_FILE)
                        + lru(list::ACTIVE_FILE)
                        + (sum(&|m| m.swapcached) + sum_of(&shmem)) * PAGE_SIZE;
                    if !self.tmpfs.is_empty() {
                        out.push((format!("{stat}shmem"), sum_of(&shmem) * PAGE_SIZE));
                    }
                    let gauges = [
                        ("file", file),
                        ("file_mapped", sum_of(&file_mapped) * PAGE_SIZE),
                        ("file_dirty", sum_of(&file_dirty) * PAGE_SIZE),
                        ("file_writeback", sum_of(&writeback) * PAGE_SIZE),
                        ("inactive_file", lru(list::INACTIVE_FILE)),
                        ("active_file", lru(list::ACTIVE_FILE)),
                    ];
                    out.extend(gauges.into_iter().map(|(k, v)| (format!("{stat}{k}"), v)));
                    MemcgFileEvents::sum(tree().map(|c| &c.file_events))
                        .export_tagged("v2", &stat, out);
                }
                // The root cgroup has no memory.current, memory.events or *.current files.
                if idx != 0 {
                    out.push((format!("{pre}memory.current"), m.usage * PAGE_SIZE));
                    out.push((format!("{pre}memory.peak"), m.watermark * PAGE_SIZE));
                    out.push((
                        format!("{pre}memory.swap.current"),
                        sum(&|m| m.swap_pages) * PAGE_SIZE,
                    ));
                    out.push((
                        format!("{pre}memory.swap.peak"),
                        m.swap_watermark * PAGE_SIZE,
                    ));
                    out.push((
                        format!("{pre}memory.zswap.current"),
                        sum(&|m| m.zswap_bytes),
                    ));
                    // memcg_memory_event (6.12 include/linux/memcontrol.h) counts an event in
                    // the memcg and every ancestor below the root (on cgroup v2, without the
                    // memory_localevents mount option): the file shows the subtree's sum.
                    total.export_tagged("events", &format!("{pre}memory.events."), out);
                    total.export_tagged("swap_events", &format!("{pre}memory.swap.events."), out);
                }
            } else {
                let i = idx as usize;
                let own_lru = |which: u8| m.nr_lru(which) * PAGE_SIZE;
                let gauges = [
                    ("rss", mapped[i] * PAGE_SIZE, sum_of(&mapped) * PAGE_SIZE),
                    (
                        "swap",
                        swapped_out[i] * PAGE_SIZE,
                        sum_of(&swapped_out) * PAGE_SIZE,
                    ),
                    (
                        "swapcached",
                        m.swapcached * PAGE_SIZE,
                        sum(&|m| m.swapcached) * PAGE_SIZE,
                    ),
                    (
                        "inactive_anon",
                        own_lru(list::INACTIVE_ANON),
                        lru(list::INACTIVE_ANON),
                    ),
                    (
                        "active_anon",
                        own_lru(list::ACTIVE_ANON),
                        lru(list::ACTIVE_ANON),
                    ),
                ];
                for (k, v, t) in gauges {
                    out.push((format!("{stat}{k}"), v));
                    out.push((format!("{stat}total_{k}"), t));
                }
                if self.has_mlock() {
                    // v1's LRU_UNEVICTABLE rows (memcg1_stat_format), with an mlocked region only.
                    out.push((format!("{stat}unevictable"), m.unevictable.len * PAGE_SIZE));
                    out.push((
                        format!("{stat}total_unevictable"),
                        self.unevictable_tree(idx) * PAGE_SIZE,
                    ));
                }
                if self.has_files() {
                    // v1 cache = NR_FILE_PAGES (page cache and swap cache), mapped_file = NR_FILE_MAPPED.
                    let cache = |c: &Memcg| {
                        c.nr_lru(list::INACTIVE_FILE) + c.nr_lru(list::ACTIVE_FILE) + c.swapcached
                    };
                    if !self.tmpfs.is_empty() {
                        out.push((format!("{stat}shmem"), shmem[i] * PAGE_SIZE));
                        out.push((format!("{stat}total_shmem"), sum_of(&shmem) * PAGE_SIZE));
                    }
                    let gauges = [
                        (
                            "cache",
                            (cache(m) + shmem[i]) * PAGE_SIZE,
                            (sum(&cache) + sum_of(&shmem)) * PAGE_SIZE,
                        ),
                        (
                            "mapped_file",
                            file_mapped[i] * PAGE_SIZE,
                            sum_of(&file_mapped) * PAGE_SIZE,
                        ),
                        (
                            "dirty",
                            file_dirty[i] * PAGE_SIZE,
                            sum_of(&file_dirty) * PAGE_SIZE,
                        ),
                        (
                            "writeback",
                            writeback[i] * PAGE_SIZE,
                            sum_of(&writeback) * PAGE_SIZE,
                        ),
                        (
                            "inactive_file",
                            own_lru(list::INACTIVE_FILE),
                            lru(list::INACTIVE_FILE),
                        ),
                        (
                            "active_file",
                            own_lru(list::ACTIVE_FILE),
                            lru(list::ACTIVE_FILE),
                        ),
                    ];
                    for (k, v, t) in gauges {
                        out.push((format!("{stat}{k}"), v));
                        out.push((format!("{stat}total_{k}"), t));
                    }
                    m.file_events.export_tagged("v1", &stat, out);
                    MemcgFileEvents::sum(tree().map(|c| &c.file_events)).export_tagged(
                        "v1",
                        &format!("{stat}total_"),
                        out,
                    );
                }
                m.events.export_tagged("v1", &stat, out);
                total.export_tagged("v1", &format!("{stat}total_"), out);
                out.push((format!("{pre}memory.usage_in_bytes"), m.usage * PAGE_SIZE));
                // mem_cgroup_read_u64 (6.12 mm/memcontrol-v1.c): RES_MAX_USAGE is the memory
                // counter's watermark, RES_FAILCNT its failcnt (the memsw counter, not modelled,
                // has its own).
                out.push((
                    format!("{pre}memory.max_usage_in_bytes"),
                    m.watermark * PAGE_SIZE,
                ));
                out.push((format!("{pre}memory.failcnt"), m.failcnt));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::effective_protection;

    #[test]
    fn effective_protection_follows_page_counter_c() {
        // Under the parent's budget: the own setting, capped by usage.
        assert_eq!(effective_protection(40, 100, 30, 50, 30, false), 30);
        assert_eq!(effective_protection(20, 100, 30, 50, 30, false), 20);
        // Overcommitted (siblings claim 75 of 50): shares in proportion to protected usage,
        // test_memcg_min's 50/25 children under 50M -> 33 and 16.
        assert_eq!(effective_protection(50, 150, 75, 50, 75, false), 33);
        assert_eq!(effective_protection(50, 150, 25, 50, 75, false), 16);
        // memory_recursiveprot: unclaimed parent protection (50 - 20) by unprotected usage
        // (10 of parent_usage - siblings_protected = 60): 0 + 30 * 10 / 60 = 5.
        assert_eq!(effective_protection(10, 80, 0, 50, 20, true), 5);
        assert_eq!(effective_protection(10, 80, 0, 50, 20, false), 0);
    }
}
