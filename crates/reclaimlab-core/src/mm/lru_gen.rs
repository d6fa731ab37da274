//! The multi-gen LRU (CONFIG_LRU_GEN, mm/vmscan.c "lru_gen", mm/workingset.c, the inline
//! helpers of include/linux/mm_inline.h), as of 6.12 (read in 6.12.117; the 6.18 delta — the
//! 6.14 rework of the tier bookkeeping — is not modelled). Beside the classic LRU in vmscan.rs,
//! behind the same reclaim seam: `kernel.lru_gen.enabled` (/sys/kernel/mm/lru_gen/enabled)
//! routes root reclaim (kswapd, direct) to [`Mm::lru_gen_shrink_node`], memcg reclaim to
//! [`Mm::lru_gen_shrink_lruvec`], kswapd's aging to [`Mm::lru_gen_age_node`], LRU adds and
//! removals to [`Mm::lru_gen_add_folio`]/[`Mm::lru_gen_del_folio`], folio_mark_accessed to
//! [`Mm::folio_inc_refs`] and the workingset shadows to [`Mm::lru_gen_eviction`] /
//! [`Mm::lru_gen_refault`]. The reclaim of a single isolated folio (shrink_folio_list: swap
//! slot, zswap or the swap device, page cache drop) is the classic LRU's, as in the kernel.
//!
//! Modelled: generations per lruvec and type (max_seq, min_seq[anon/file], MIN_NR_GENS = 2,
//! MAX_NR_GENS = 4) with the generation of each folio in its page record (`pg::LRU_GEN_MASK`),
//! updated lazily as the kernel does (folio_update_gen changes the flags, sort_folio and
//! inc_min_seq move the folio); tiers from the access count through file descriptors
//! (`pg::LRU_REFS_MASK` + PG_workingset) with refaulted/evicted/protected per tier and the PID
//! controller (read_ctrl_pos, positive_ctrl_err, get_tier_idx, get_type_to_scan); the aging
//! (try_to_inc_max_seq: a walk of every page table of the memcg's processes that clears young
//! bits and promotes to max_seq, charged as CPU per PTE table; inc_min_seq, try_to_inc_min_seq);
//! the eviction (isolate_folios, scan_folios, sort_folio, isolate_folio, evict_folios with its
//! retry and its rejected-folio placement); rmap look-around on a young PTE found at eviction;
//! should_run_aging, get_nr_to_scan, should_abort_scan, try_to_shrink_lruvec; the memcg LRU
//! (6.4+, shrink_many/shrink_one/lru_gen_rotate_memcg); set_initial_priority; lru_gen_age_node
//! with min_ttl_ms; lru_gen_eviction/lru_gen_refault; the active/inactive sizes as
//! lru_gen_update_size reports them (the two youngest generations are "active").
//!
//! Simplified (docs/model/mglru.md): the Bloom filter that lets the second walk of a
//! generation skip PTE tables with few young entries is not modelled (every table of the
//! memcg's processes is walked, and its cost charged); the walk is done at once, not spread
//! over concurrent walkers (iterate_mm_list); NR_HIST_GENS = 1 (no CONFIG_LRU_GEN_STATS); the
//! memcg LRU has one bin (the kernel starts at a random one of 8) and its third generation (for
//! offlined memcgs) is not needed; one zone; memory.min/low do not exist in the model;
//! mem_cgroup_get_nr_swap_pages is the node's free swap; no non-leaf PMD young bits.

use super::page::{list, pg, List, Page};
use super::vmscan::{Fate, Reclaimer, ScanControl, DEF_PRIORITY};
use super::{Ctx, Mm, PTRS_PER_PTE};

pub const MIN_NR_GENS: u64 = 2;
pub const MAX_NR_GENS: u64 = 4;
pub const MAX_NR_TIERS: usize = 4;
/// LRU_REFS_WIDTH on x86-64 (MAX_NR_TIERS - 2 spare flag bits).
const LRU_REFS_WIDTH: u32 = 2;
/// MIN_LRU_BATCH = BITS_PER_LONG.
const MIN_LRU_BATCH: u64 = 64;
const MAX_LRU_BATCH: u64 = MIN_LRU_BATCH * 64;
/// MAX_SWAPPINESS.
const MAX_SWAPPINESS: u64 = 200;
const ANON: usize = 0;
const FILE: usize = 1;

/// lru_gen_folio: one lruvec's generations.
#[derive(Clone, Debug)]
pub struct LruGen {
    pub max_seq: u64,
    /// min_seq per type (anon, file).
    pub min_seq: [u64; 2],
    /// Birth time (ns) of each generation (timestamps[], in jiffies in the kernel).
    pub timestamps: [u64; MAX_NR_GENS as usize],
    /// The folio lists, [gen][type]; a folio may sit on an older list than its flags say.
    folios: [[List; 2]; MAX_NR_GENS as usize],
    /// Pages per generation by the folios' flags (lrugen->nr_pages).
    pub nr_pages: [[u64; 2]; MAX_NR_GENS as usize],
    avg_refaulted: [[u64; MAX_NR_TIERS]; 2],
    avg_total: [[u64; MAX_NR_TIERS]; 2],
    refaulted: [[u64; MAX_NR_TIERS]; 2],
    evicted: [[u64; MAX_NR_TIERS]; 2],
    protected: [[u64; MAX_NR_TIERS - 1]; 2],
    /// lrugen->seg == MEMCG_LRU_TAIL (the memcg LRU's one-retry mark).
    seg_tail: bool,
}

impl Default for LruGen {
    fn default() -> Self {
        LruGen::new()
    }
}

impl LruGen {
    /// lru_gen_init_lruvec: max_seq = MIN_NR_GENS + 1, min_seq = 0, all born at time 0.
    pub fn new() -> LruGen {
        let folios = std::array::from_fn(|g| {
            std::array::from_fn(|t| List::new(list::LRU_GEN + 2 * g as u8 + t as u8))
        });
        LruGen {
            max_seq: MIN_NR_GENS + 1,
            min_seq: [0; 2],
            timestamps: [0; MAX_NR_GENS as usize],
            folios,
            nr_pages: [[0; 2]; MAX_NR_GENS as usize],
            avg_refaulted: [[0; MAX_NR_TIERS]; 2],
            avg_total: [[0; MAX_NR_TIERS]; 2],
            refaulted: [[0; MAX_NR_TIERS]; 2],
            evicted: [[0; MAX_NR_TIERS]; 2],
            protected: [[0; MAX_NR_TIERS - 1]; 2],
            seg_tail: false,
        }
    }

    /// lru_gen_is_active: the generations of max_seq and max_seq - 1.
    fn is_active(&self, gen: usize) -> bool {
        gen == gen_of(self.max_seq) || gen == gen_of(self.max_seq - 1)
    }

    /// Pages counted on classic list `which` (1..=4), as lru_gen_update_size keeps
    /// NR_{IN,}ACTIVE_{ANON,FILE} for /proc/vmstat and memory.stat.
    pub fn lru_size(&self, which: u8) -> u64 {
        let ty = (which >= list::INACTIVE_FILE) as usize;
        let active = which == list::ACTIVE_ANON || which == list::ACTIVE_FILE;
        (0..MAX_NR_GENS as usize)
            .filter(|&g| self.is_active(g) == active)
            .map(|g| self.nr_pages[g][ty])
            .sum()
    }

    fn nr_gens(&self, ty: usize) -> u64 {
        self.max_seq - self.min_seq[ty] + 1
    }

    /// read_ctrl_pos (NR_HIST_GENS = 1).
    fn ctrl_pos(&self, ty: usize, tier: usize, gain: u64) -> CtrlPos {
        let mut total = self.avg_total[ty][tier] + self.evicted[ty][tier];
        if tier > 0 {
            total += self.protected[ty][tier - 1];
        }
        CtrlPos {
            refaulted: self.avg_refaulted[ty][tier] + self.refaulted[ty][tier],
            total,
            gain,
        }
    }

    /// reset_ctrl_pos(carryover = true) with NR_HIST_GENS = 1: fold the generation's figures
    /// into the moving averages (smoothing 1/2) and clear them. With carryover false (the
    /// aging) and one history generation it does nothing.
    fn reset_ctrl_pos(&mut self, ty: usize) {
        for tier in 0..MAX_NR_TIERS {
            self.avg_refaulted[ty][tier] =
                (self.avg_refaulted[ty][tier] + self.refaulted[ty][tier]) / 2;
            let mut sum = self.avg_total[ty][tier] + self.evicted[ty][tier];
            if tier > 0 {
                sum += self.protected[ty][tier - 1];
                self.protected[ty][tier - 1] = 0;
            }
            self.avg_total[ty][tier] = sum / 2;
            self.refaulted[ty][tier] = 0;
            self.evicted[ty][tier] = 0;
        }
    }
}

/// struct ctrl_pos.
#[derive(Clone, Copy)]
struct CtrlPos {
    refaulted: u64,
    total: u64,
    gain: u64,
}

/// positive_ctrl_err: the PV has few refaults, or a lower refaulted/total than the SP.
fn positive_ctrl_err(sp: CtrlPos, pv: CtrlPos) -> bool {
    pv.refaulted < MIN_LRU_BATCH
        || pv.refaulted as u128 * (sp.total + MIN_LRU_BATCH) as u128 * sp.gain as u128
            <= (sp.refaulted + 1) as u128 * pv.total as u128 * pv.gain as u128
}

/// lru_gen_from_seq.
#[inline]
fn gen_of(seq: u64) -> usize {
    (seq % MAX_NR_GENS) as usize
}

/// folio_lru_gen: the generation in the flags, None when not on an lrugen list.
#[inline]
fn folio_lru_gen(p: &Page) -> Option<usize> {
    let g = (p.flags & pg::LRU_GEN_MASK) >> pg::LRU_GEN_PGOFF;
    (g > 0).then(|| g as usize - 1)
}

/// folio_lru_refs: accesses beyond PG_referenced (the refs bits plus PG_workingset).
#[inline]
fn folio_lru_refs(p: &Page) -> u32 {
    ((p.flags & pg::LRU_REFS_MASK) >> pg::LRU_REFS_PGOFF) + p.has(pg::WORKINGSET) as u32
}

/// lru_tier_from_refs: order_base_2(refs + 1).
#[inline]
fn lru_tier_from_refs(refs: u32) -> usize {
    (refs + 1).next_power_of_two().trailing_zeros() as usize
}

#[inline]
fn type_of(p: &Page) -> usize {
    p.has(pg::FILE) as usize
}

/// The memcg LRU of the node (pgdat->memcg_lru, 6.4+): memcgs in the old generation, in
/// order, and those rotated to the young one. Plus the node-wide MGLRU state of a reclaim.
#[derive(Clone, Debug, Default)]
pub struct LruGenNode {
    old: Vec<u16>,
    young: Vec<u16>,
    /// current->in_lru_fault: a page fault is adding folios (they start in the youngest
    /// generation); cleared while the faulting task reclaims (PF_MEMALLOC).
    pub(crate) in_fault: bool,
    /// lru_gen_age_node found every generation younger than min_ttl_ms: kswapd calls
    /// out_of_memory (the engine kills the task with the highest badness).
    pub(crate) oom: bool,
}

impl LruGenNode {
    /// lru_gen_online_memcg for every memcg, in pre-order.
    pub fn new(nmemcg: usize) -> LruGenNode {
        LruGenNode {
            old: (0..nmemcg as u16).collect(),
            ..Default::default()
        }
    }
}

/// What shrink_one asks of the memcg LRU (lru_gen_rotate_memcg).
#[derive(Clone, Copy, PartialEq, Eq)]
enum MemcgOp {
    Stay,
    Tail,
    Young,
}

impl Mm {
    /// The PTE test of walk_pte_range and lru_gen_look_around (6.12): page `j` counts if it
    /// is mapped (not the zero page), its PTE is young, it belongs to memcg `m`, and it is a
    /// type the walk may age (anon only when swap is possible); then the young bit is cleared.
    fn test_and_clear_young(&mut self, j: u32, m: u16, can_swap: bool) -> bool {
        // Young bits drawn in bulk (mm/analytic.rs) are settled before they are read.
        self.analytic_young(j);
        let p = &mut self.pages[j as usize];
        if p.flags & (pg::MAPPED | pg::YOUNG | pg::ZERO_PFN) != pg::MAPPED | pg::YOUNG
            || p.memcg != m
        {
            return false;
        }
        if !can_swap && !p.has(pg::FILE) {
            return false;
        }
        p.clear(pg::YOUNG);
        true
    }

    #[inline]
    pub(crate) fn lru_gen_enabled(&self) -> bool {
        self.knobs.lru_gen.enabled
    }

    /// lru_gen_add_folio (and folio_add_lru's lru_gen_in_fault activation, `in_fault`): hot
    /// (active) folios go to max_seq, anon folios outside the swap cache and folios pending
    /// writeback for reclaim to max_seq - 1, folios rotated for reclaim (`reclaiming`) to the
    /// tail of the oldest generation, the rest to the second oldest (or oldest when only two
    /// generations exist). PG_active is never set on an lrugen list.
    pub(crate) fn lru_gen_add_folio(&mut self, i: u32, reclaiming: bool, in_fault: bool) {
        let p = &mut self.pages[i as usize];
        if in_fault {
            p.set(pg::ACTIVE);
        }
        let ty = type_of(p);
        let g = &mut self.memcgs[p.memcg as usize].lrugen;
        let active = p.has(pg::ACTIVE);
        let seq = if active {
            g.max_seq
        } else if (ty == ANON && !p.has(pg::SWAPCACHE))
            || (p.has(pg::RECLAIM) && p.has(pg::DIRTY | pg::WRITEBACK))
        {
            g.max_seq - 1
        } else if reclaiming || g.min_seq[ty] + MIN_NR_GENS >= g.max_seq {
            g.min_seq[ty]
        } else {
            g.min_seq[ty] + 1
        };
        let gen = gen_of(seq);
        let mut mask = pg::LRU_GEN_MASK;
        if active {
            mask |= pg::LRU_REFS_MASK | pg::REFERENCED | pg::ACTIVE;
        }
        p.flags = (p.flags & !mask) | ((gen as u32 + 1) << pg::LRU_GEN_PGOFF);
        g.nr_pages[gen][ty] += 1;
        if reclaiming {
            g.folios[gen][ty].push_tail(&mut self.pages, i);
        } else {
            g.folios[gen][ty].push_head(&mut self.pages, i);
        }
    }

    /// lru_gen_del_folio: off the list it sits on, out of the count of its flags' generation.
    pub(crate) fn lru_gen_del_folio(&mut self, i: u32) {
        let p = &mut self.pages[i as usize];
        let gen = folio_lru_gen(p).expect("a folio on an lrugen list has a generation");
        let ty = type_of(p);
        let id = p.list() - list::LRU_GEN;
        p.clear(pg::LRU_GEN_MASK);
        let g = &mut self.memcgs[p.memcg as usize].lrugen;
        g.nr_pages[gen][ty] -= 1;
        g.folios[id as usize / 2][id as usize % 2].remove(&mut self.pages, i);
    }

    /// folio_mark_accessed under the multi-gen LRU (folio_inc_refs, mm/swap.c): PG_referenced,
    /// then PG_workingset, then the refs bits count accesses through file descriptors; the
    /// folio stays in its generation (its tier rises).
    pub(crate) fn folio_inc_refs(&mut self, i: u32) {
        let p = &mut self.pages[i as usize];
        if !p.has(pg::REFERENCED) {
            p.set(pg::REFERENCED);
        } else if !p.has(pg::WORKINGSET) {
            p.set(pg::WORKINGSET);
        } else if p.flags & pg::LRU_REFS_MASK != pg::LRU_REFS_MASK {
            p.flags += 1 << pg::LRU_REFS_PGOFF;
        }
    }

    /// folio_update_gen: promote a folio found young by the aging or look-around to `gen`
    /// (flags and counts only; the list move waits for sort_folio). An isolated folio gets
    /// PG_referenced for shrink_folio_list instead.
    fn folio_update_gen(&mut self, i: u32, gen: usize) {
        let p = &mut self.pages[i as usize];
        let Some(old) = folio_lru_gen(p) else {
            p.set(pg::REFERENCED);
            return;
        };
        p.flags &= !(pg::LRU_GEN_MASK | pg::LRU_REFS_MASK | pg::REFERENCED | pg::WORKINGSET);
        p.flags |= (gen as u32 + 1) << pg::LRU_GEN_PGOFF;
        let ty = type_of(p);
        let g = &mut self.memcgs[p.memcg as usize].lrugen;
        g.nr_pages[old][ty] -= 1;
        g.nr_pages[gen][ty] += 1;
    }

    /// folio_inc_gen: move a folio of the oldest generation one generation up (protection or
    /// inc_min_seq), unless its flags say it was promoted already. Returns its generation.
    fn folio_inc_gen(&mut self, i: u32) -> usize {
        let p = &mut self.pages[i as usize];
        let ty = type_of(p);
        let g = &mut self.memcgs[p.memcg as usize].lrugen;
        let old = gen_of(g.min_seq[ty]);
        let cur = folio_lru_gen(p).expect("on an lrugen list");
        if cur != old {
            return cur;
        }
        let new = (old + 1) % MAX_NR_GENS as usize;
        p.flags &= !(pg::LRU_GEN_MASK | pg::LRU_REFS_MASK | pg::REFERENCED | pg::WORKINGSET);
        p.flags |= (new as u32 + 1) << pg::LRU_GEN_PGOFF;
        g.nr_pages[old][ty] -= 1;
        g.nr_pages[new][ty] += 1;
        new
    }

    /// Move folio `i` (on list `from`) to generation `gen`'s list, at the head or the tail.
    fn move_folio(&mut self, m: u16, i: u32, ty: usize, gen: usize, tail: bool) {
        let id = (self.pages[i as usize].list() - list::LRU_GEN) as usize;
        let g = &mut self.memcgs[m as usize].lrugen;
        g.folios[id / 2][id % 2].remove(&mut self.pages, i);
        if tail {
            g.folios[gen][ty].push_tail(&mut self.pages, i);
        } else {
            g.folios[gen][ty].push_head(&mut self.pages, i);
        }
    }

    /// walk_mm over every mm of memcg `m` (the mm_list), as walk_pte_range does it: every
    /// young, present PTE of a folio of this memcg (anon ones only if `can_swap`) is cleared
    /// and its folio promoted to generation `gen`. Each PTE table costs
    /// lru_gen_walk_pte_table_ns, each young PTE lru_gen_young_pte_ns. The Bloom filter that
    /// skips tables on the second walk of a generation is not modelled (docs/model/mglru.md).
    fn walk_mm(&mut self, ctx: &mut Ctx, m: u16, gen: usize, can_swap: bool) {
        let (mut tables, mut young) = (0u64, 0u64);
        for r in 0..self.regions.len() {
            if self.regions[r].memcg != m {
                continue;
            }
            let (base, n) = (self.regions[r].base, self.regions[r].pages);
            let tables_present = self.regions[r].page_tables.clone();
            for (t, &present) in tables_present.iter().enumerate() {
                if !present {
                    continue;
                }
                tables += 1;
                let start = base + t as u32 * PTRS_PER_PTE;
                let end = (start + PTRS_PER_PTE).min(base + n);
                for j in start..end {
                    if !self.test_and_clear_young(j, m, can_swap) {
                        continue;
                    }
                    young += 1;
                    self.folio_update_gen(j, gen);
                }
            }
        }
        ctx.cpu(
            tables * self.costs.lru_gen_walk_pte_table_ns + young * self.costs.lru_gen_young_pte_ns,
        );
    }

    /// lru_gen_look_around: a young PTE found by the rmap walk of shrink_folio_list; the
    /// other PTEs of its table within MIN_LRU_BATCH pages around it are tested and cleared,
    /// young folios of the same memcg promoted to max_seq (file folios only when evicting
    /// file). The folio's own young bit is left for folio_check_references. Only kswapd has an
    /// mm_walk during eviction (set_mm_walk gives one to kswapd and to proactive reclaim):
    /// it promotes through the flags (folio_update_gen). Direct and memcg reclaim have none
    /// and call folio_activate instead, which moves the folio to max_seq at once and counts
    /// pgactivate.
    fn lru_gen_look_around(&mut self, ctx: &mut Ctx, i: u32, walk: bool) {
        let r = &self.regions[self.region_index(i)];
        let (base, n) = (r.base, r.pages);
        let off = i - base;
        let table = off / PTRS_PER_PTE * PTRS_PER_PTE;
        let mut start = table;
        let mut end = (table + PTRS_PER_PTE).min(n);
        let batch = MIN_LRU_BATCH as u32;
        if end - start > batch {
            if off - start < batch / 2 {
                end = start + batch;
            } else if end - off < batch / 2 {
                start = end - batch;
            } else {
                start = off - batch / 2;
                end = off + batch / 2;
            }
        }
        let m = self.pages[i as usize].memcg;
        let can_swap = !self.pages[i as usize].has(pg::FILE);
        let gen = gen_of(self.memcgs[m as usize].lrugen.max_seq);
        let mut young = 0;
        for j in (base + start)..(base + end) {
            if j == i {
                continue;
            }
            if !self.test_and_clear_young(j, m, can_swap) {
                continue;
            }
            young += 1;
            if walk {
                self.folio_update_gen(j, gen);
            } else {
                self.folio_activate_young(j, gen);
            }
        }
        ctx.cpu(
            (end - start) as u64 * self.costs.lru_gen_walk_pte_table_ns / PTRS_PER_PTE as u64
                + young * self.costs.lru_gen_young_pte_ns,
        );
    }

    /// lru_gen_look_around without an mm_walk: an isolated folio gets PG_referenced; one in
    /// another generation than `gen` (max_seq's) loses its tier and is activated
    /// (folio_activate → lru_activate: off its list, PG_active, into max_seq; pgactivate).
    fn folio_activate_young(&mut self, j: u32, gen: usize) {
        let p = &mut self.pages[j as usize];
        let Some(old) = folio_lru_gen(p) else {
            p.set(pg::REFERENCED);
            return;
        };
        if old == gen {
            return;
        }
        p.clear(pg::LRU_REFS_MASK | pg::REFERENCED | pg::WORKINGSET);
        let m = p.memcg;
        self.lru_gen_del_folio(j);
        self.pages[j as usize].set(pg::ACTIVE);
        self.lru_gen_add_folio(j, false, false);
        self.vm.pgactivate += 1;
        self.memcgs[m as usize].events.pgactivate += 1;
    }

    /// inc_min_seq: move what is left in the oldest generation of `ty` one up (anon stays
    /// behind when it cannot be swapped, the kernel's cold/hot inversion) and retire it.
    fn inc_min_seq(&mut self, m: u16, ty: usize, can_swap: bool) {
        if ty == FILE || can_swap {
            let old = gen_of(self.memcgs[m as usize].lrugen.min_seq[ty]);
            while let Some(i) = {
                let t = self.memcgs[m as usize].lrugen.folios[old][ty].tail;
                (t != super::page::NONE).then_some(t)
            } {
                let new = self.folio_inc_gen(i);
                self.move_folio(m, i, ty, new, true);
            }
        }
        let g = &mut self.memcgs[m as usize].lrugen;
        g.reset_ctrl_pos(ty);
        g.min_seq[ty] += 1;
    }

    /// try_to_inc_min_seq: retire empty oldest generations (keeping MIN_NR_GENS), with anon
    /// never older than file's when swapping is possible.
    // `ty` indexes min_seq, the lists and the counts alike, as the kernel's loops do.
    #[allow(clippy::needless_range_loop)]
    fn try_to_inc_min_seq(&mut self, m: u16, can_swap: bool) -> bool {
        let g = &mut self.memcgs[m as usize].lrugen;
        let mut min_seq = g.min_seq;
        for ty in (!can_swap as usize)..2 {
            while min_seq[ty] + MIN_NR_GENS <= g.max_seq {
                if g.folios[gen_of(min_seq[ty])][ty].len > 0 {
                    break;
                }
                min_seq[ty] += 1;
            }
        }
        if can_swap {
            min_seq[ANON] = min_seq[ANON].min(min_seq[FILE]);
            min_seq[FILE] = min_seq[ANON].max(g.min_seq[FILE]);
        }
        let mut success = false;
        for ty in (!can_swap as usize)..2 {
            if min_seq[ty] != g.min_seq[ty] {
                g.reset_ctrl_pos(ty);
                g.min_seq[ty] = min_seq[ty];
                success = true;
            }
        }
        success
    }

    /// try_to_inc_max_seq + inc_max_seq: walk the memcg's page tables (promoting young folios
    /// to the current max_seq), retire the oldest generation of a type that has MAX_NR_GENS,
    /// and open a new youngest generation born now.
    fn try_to_inc_max_seq(&mut self, ctx: &mut Ctx, m: u16, seq: u64, can_swap: bool) -> bool {
        if seq < self.memcgs[m as usize].lrugen.max_seq {
            return false;
        }
        self.walk_mm(ctx, m, gen_of(seq), can_swap);
        for ty in [FILE, ANON] {
            if self.memcgs[m as usize].lrugen.nr_gens(ty) == MAX_NR_GENS {
                self.inc_min_seq(m, ty, can_swap);
            }
        }
        let g = &mut self.memcgs[m as usize].lrugen;
        g.timestamps[gen_of(g.max_seq + 1)] = ctx.now;
        g.max_seq += 1;
        true
    }

    /// get_swappiness: 0 (file only) without may_swap or with less than MIN_LRU_BATCH free
    /// swap pages; else the memcg's swappiness (sc_swappiness).
    fn lru_gen_swappiness(&self, m: u16, sc: &ScanControl) -> u64 {
        if !sc.may_swap || self.mem_cgroup_get_nr_swap_pages(m) < MIN_LRU_BATCH {
            return 0;
        }
        self.sc_swappiness(sc, m)
    }

    /// get_tier_idx: the highest tier whose refault rate stays within twice the first tier's.
    fn get_tier_idx(&self, m: u16, ty: usize) -> usize {
        let g = &self.memcgs[m as usize].lrugen;
        let sp = g.ctrl_pos(ty, 0, 1);
        let mut tier = 1;
        while tier < MAX_NR_TIERS {
            if !positive_ctrl_err(sp, g.ctrl_pos(ty, tier, 2)) {
                break;
            }
            tier += 1;
        }
        tier - 1
    }

    /// get_type_to_scan: swappiness as the gains of the anon and file first tiers (its meaning
    /// under the multi-gen LRU: a weight on refault rates, not a scan ratio); then the last
    /// tier of the chosen type to evict.
    fn get_type_to_scan(&self, m: u16, swappiness: u64) -> (usize, usize) {
        let g = &self.memcgs[m as usize].lrugen;
        let gain = [swappiness, MAX_SWAPPINESS - swappiness];
        let ty = positive_ctrl_err(
            g.ctrl_pos(ANON, 0, gain[ANON]),
            g.ctrl_pos(FILE, 0, gain[FILE]),
        ) as usize;
        let sp = g.ctrl_pos(1 - ty, 0, gain[1 - ty]);
        let mut tier = 1;
        while tier < MAX_NR_TIERS {
            if !positive_ctrl_err(sp, g.ctrl_pos(ty, tier, gain[ty])) {
                break;
            }
            tier += 1;
        }
        (ty, tier - 1)
    }

    /// sort_folio: a folio promoted since (its flags' generation is newer) moves to that
    /// generation's list; one in a tier above `tier_idx` (or at the maximum count) is
    /// protected one generation up. Returns true if it was sorted, false to isolate it.
    fn sort_folio(&mut self, m: u16, i: u32, tier_idx: usize) -> bool {
        let p = &self.pages[i as usize];
        let ty = type_of(p);
        let gen = folio_lru_gen(p).expect("on an lrugen list");
        let refs = folio_lru_refs(p);
        let tier = lru_tier_from_refs(refs);
        let g = &self.memcgs[m as usize].lrugen;
        if gen != gen_of(g.min_seq[ty]) {
            self.move_folio(m, i, ty, gen, false);
            return true;
        }
        if tier > tier_idx || refs == 1 << LRU_REFS_WIDTH {
            let new = self.folio_inc_gen(i);
            self.move_folio(m, i, ty, new, true);
            self.memcgs[m as usize].lrugen.protected[ty][tier - 1] += 1;
            return true;
        }
        false
    }

    /// isolate_folio: clear the tier of a folio not referenced since (PG_referenced is the
    /// first access), clear PG_referenced for shrink_folio_list, take it off its list.
    fn isolate_folio(&mut self, i: u32) {
        let p = &mut self.pages[i as usize];
        if !p.has(pg::REFERENCED) {
            p.clear(pg::LRU_REFS_MASK | pg::REFERENCED | pg::WORKINGSET);
        }
        p.clear(pg::REFERENCED);
        self.lru_gen_del_folio(i);
        self.pages[i as usize].set(pg::ISOLATED);
    }

    /// scan_folios: from the tail of the oldest generation of `ty`, sort or isolate until
    /// MIN_LRU_BATCH are isolated or MAX_LRU_BATCH scanned. Counts pgscan_* (isolated) and
    /// pgrefill (sorted). Returns the number scanned, 0 when nothing could be isolated.
    fn scan_folios(
        &mut self,
        ctx: &mut Ctx,
        m: u16,
        sc: &ScanControl,
        ty: usize,
        tier: usize,
        taken: &mut Vec<u32>,
    ) -> u64 {
        let g = &self.memcgs[m as usize].lrugen;
        if g.nr_gens(ty) == MIN_NR_GENS {
            return 0;
        }
        let gen = gen_of(g.min_seq[ty]);
        let (mut scanned, mut sorted, mut isolated) = (0u64, 0u64, 0u64);
        let mut remaining = MAX_LRU_BATCH;
        loop {
            let i = self.memcgs[m as usize].lrugen.folios[gen][ty].tail;
            if i == super::page::NONE {
                break;
            }
            scanned += 1;
            if self.sort_folio(m, i, tier) {
                sorted += 1;
            } else {
                self.isolate_folio(i);
                taken.push(i);
                isolated += 1;
            }
            remaining -= 1;
            if remaining == 0 || isolated >= MIN_LRU_BATCH {
                break;
            }
        }
        ctx.cpu(isolated * self.costs.scan_page_ns);
        if sc.kind != Reclaimer::Memcg {
            match sc.kind {
                Reclaimer::Kswapd => self.vm.pgscan_kswapd += isolated,
                _ => self.vm.pgscan_direct += isolated,
            }
            self.vm.pgrefill += sorted;
        }
        let ev = &mut self.memcgs[m as usize].events;
        ev.pgscan += isolated;
        match sc.kind {
            Reclaimer::Kswapd => ev.pgscan_kswapd += isolated,
            _ => ev.pgscan_direct += isolated,
        }
        ev.pgrefill += sorted;
        if ty == FILE {
            self.vm_file.pgscan_file += isolated;
        } else {
            self.vm.pgscan_anon += isolated;
        }
        if isolated > 0 || remaining == 0 {
            scanned
        } else {
            0
        }
    }

    /// isolate_folios: which type to evict (the obvious choice first, else the PID
    /// controller), falling back to the other type when nothing could be scanned.
    fn isolate_folios(
        &mut self,
        ctx: &mut Ctx,
        m: u16,
        sc: &ScanControl,
        swappiness: u64,
        taken: &mut Vec<u32>,
    ) -> (u64, usize) {
        let min_seq = self.memcgs[m as usize].lrugen.min_seq;
        let mut tier = None;
        let mut ty = if swappiness == 0 {
            FILE
        } else if min_seq[ANON] < min_seq[FILE] {
            ANON
        } else if swappiness == 1 {
            FILE
        } else if swappiness == MAX_SWAPPINESS {
            ANON
        } else {
            let (t, tr) = self.get_type_to_scan(m, swappiness);
            tier = Some(tr);
            t
        };
        let mut scanned = 0;
        for _ in (swappiness == 0) as usize..2 {
            let tr = tier.unwrap_or_else(|| self.get_tier_idx(m, ty));
            scanned = self.scan_folios(ctx, m, sc, ty, tr, taken);
            if scanned > 0 {
                break;
            }
            ty = 1 - ty;
            tier = None;
        }
        (scanned, ty)
    }

    /// evict_folios: isolate a batch, retire empty generations, run shrink_folio_list (the
    /// classic one, after look-around on young mapped folios) and put the survivors back:
    /// folios pending reclaim writeback as they are, rejected ones (active, referenced,
    /// mapped, dirty) into the youngest generation, clean ones once more through
    /// shrink_folio_list. Returns the number scanned.
    fn evict_folios(
        &mut self,
        ctx: &mut Ctx,
        m: u16,
        sc: &mut ScanControl,
        swappiness: u64,
    ) -> u64 {
        self.complete_io_until(ctx.now);
        let mut list = Vec::with_capacity(MIN_LRU_BATCH as usize);
        let (mut scanned, ty) = self.isolate_folios(ctx, m, sc, swappiness, &mut list);
        scanned += self.try_to_inc_min_seq(m, swappiness != 0) as u64;
        if self.memcgs[m as usize]
            .lrugen
            .nr_gens((swappiness == 0) as usize)
            == MIN_NR_GENS
        {
            scanned = 0;
        }
        if list.is_empty() {
            return scanned;
        }
        let mut skip_retry = false;
        loop {
            let mut reclaimed = 0u64;
            let mut nr_pageout = 0u64;
            let mut nr_activate = 0u64;
            let mut clean = Vec::new();
            // shrink_folio_list's per-call stat: evict_folios keeps only unqueued_dirty.
            let mut stat = super::vmscan::ReclaimStat::default();
            sc.nr_scanned += list.len() as u64;
            for &i in &list {
                self.pages[i as usize].clear(pg::ISOLATED);
                self.analytic_young(i);
                let p = self.pages[i as usize];
                let fate = if p.has(pg::MAPPED) && p.has(pg::REFERENCED) {
                    // "folio_update_gen() tried to promote this page?"
                    Fate::Keep
                } else {
                    if p.has(pg::MAPPED) && p.has(pg::YOUNG) {
                        self.lru_gen_look_around(ctx, i, sc.kind == Reclaimer::Kswapd);
                    }
                    if p.has(pg::FILE) {
                        self.shrink_file_folio(ctx, i, sc, &mut stat, &mut nr_pageout)
                    } else {
                        self.shrink_folio(ctx, i, sc, &mut nr_pageout)
                    }
                };
                match fate {
                    Fate::Freed => reclaimed += 1,
                    Fate::Activate => {
                        nr_activate += 1;
                        self.pages[i as usize].set(pg::ACTIVE);
                        self.lru_gen_putback(i, &mut clean, skip_retry);
                    }
                    Fate::Keep => self.lru_gen_putback(i, &mut clean, skip_retry),
                }
            }
            if nr_activate > 0 {
                self.vm.pgactivate += nr_activate;
                self.memcgs[m as usize].events.pgactivate += nr_activate;
            }
            sc.nr_reclaimed += reclaimed;
            sc.nr.unqueued_dirty += stat.unqueued_dirty;
            if sc.kind != Reclaimer::Memcg {
                match sc.kind {
                    Reclaimer::Kswapd => self.vm.pgsteal_kswapd += reclaimed,
                    _ => self.vm.pgsteal_direct += reclaimed,
                }
            }
            let ev = &mut self.memcgs[m as usize].events;
            ev.pgsteal += reclaimed;
            match sc.kind {
                Reclaimer::Kswapd => ev.pgsteal_kswapd += reclaimed,
                _ => ev.pgsteal_direct += reclaimed,
            }
            if ty == FILE {
                self.vm_file.pgsteal_file += reclaimed;
            } else {
                self.vm.pgsteal_anon += reclaimed;
            }
            self.trace_lru_shrink_inactive(sc.priority, scanned, reclaimed);
            if clean.is_empty() {
                break;
            }
            skip_retry = true;
            list = clean;
        }
        scanned
    }

    /// evict_folios' placement of a folio shrink_folio_list kept: pending reclaim writeback
    /// stays as it is; rejected goes to the youngest generation; clean and unmapped is
    /// retried once (`clean`).
    fn lru_gen_putback(&mut self, i: u32, clean: &mut Vec<u32>, skip_retry: bool) {
        let p = &mut self.pages[i as usize];
        if p.has(pg::RECLAIM) && p.has(pg::DIRTY | pg::WRITEBACK) {
            if p.has(pg::WORKINGSET) {
                p.set(pg::REFERENCED);
            }
        } else if skip_retry
            || p.has(pg::ACTIVE | pg::REFERENCED | pg::MAPPED | pg::DIRTY | pg::WRITEBACK)
        {
            p.clear(pg::LRU_REFS_MASK | pg::REFERENCED | pg::WORKINGSET);
            p.set(pg::ACTIVE);
        } else {
            p.set(pg::ISOLATED);
            clean.push(i);
            return;
        }
        self.lru_gen_add_folio(i, false, false);
    }

    /// should_run_aging: age when fewer than MIN_NR_GENS + 1 generations are left, or when
    /// the young generation is over 1/MIN_NR_GENS or the old under 1/(MIN_NR_GENS + 2) of the
    /// pages. Returns (whether to age, the evictable pages).
    // `ty` indexes min_seq, the lists and the counts alike, as the kernel's loops do.
    #[allow(clippy::needless_range_loop)]
    fn should_run_aging(&self, m: u16, can_swap: bool) -> (bool, u64) {
        let g = &self.memcgs[m as usize].lrugen;
        let (max_seq, min_seq) = (g.max_seq, g.min_seq);
        if min_seq[!can_swap as usize] + MIN_NR_GENS > max_seq {
            return (true, 0);
        }
        let (mut old, mut young, mut total) = (0, 0, 0);
        for ty in (!can_swap as usize)..2 {
            for seq in min_seq[ty]..=max_seq {
                let size = g.nr_pages[gen_of(seq)][ty];
                total += size;
                if seq == max_seq {
                    young += size;
                } else if seq + MIN_NR_GENS == max_seq {
                    old += size;
                }
            }
        }
        if min_seq[!can_swap as usize] + MIN_NR_GENS < max_seq {
            return (false, total);
        }
        (
            young * MIN_NR_GENS > total || old * (MIN_NR_GENS + 2) < total,
            total,
        )
    }

    /// get_nr_to_scan: the pages to scan at this priority; at lower priorities, age first
    /// when should_run_aging says so (-1: aged, rotate this memcg; 0: stop).
    fn get_nr_to_scan(&mut self, ctx: &mut Ctx, m: u16, sc: &ScanControl, can_swap: bool) -> i64 {
        if self.mem_cgroup_below_min(sc.target, m) {
            return -1;
        }
        let (age, nr_to_scan) = self.should_run_aging(m, can_swap);
        if !age || sc.priority == DEF_PRIORITY {
            return (nr_to_scan >> sc.priority) as i64;
        }
        let max_seq = self.memcgs[m as usize].lrugen.max_seq;
        if self.try_to_inc_max_seq(ctx, m, max_seq, can_swap) {
            -1
        } else {
            0
        }
    }

    /// should_abort_scan: root reclaim stops once the goal is met; kswapd also once free
    /// memory is above the high watermark plus MIN_LRU_BATCH. Memcg reclaim never aborts.
    fn should_abort_scan(&self, sc: &ScanControl) -> bool {
        if sc.kind == Reclaimer::Memcg {
            return false;
        }
        if sc.nr_reclaimed >= sc.nr_to_reclaim {
            return true;
        }
        sc.kind == Reclaimer::Kswapd && self.nr_free > self.wmark_high + MIN_LRU_BATCH
    }

    /// try_to_shrink_lruvec: evict until the scan target is met or aging is due. Returns
    /// whether the memcg should be rotated (it aged).
    fn try_to_shrink_lruvec(&mut self, ctx: &mut Ctx, m: u16, sc: &mut ScanControl) -> bool {
        let swappiness = self.lru_gen_swappiness(m, sc);
        let mut scanned = 0u64;
        let mut nr_to_scan;
        loop {
            nr_to_scan = self.get_nr_to_scan(ctx, m, sc, swappiness != 0);
            if nr_to_scan <= 0 {
                break;
            }
            let delta = self.evict_folios(ctx, m, sc, swappiness);
            if delta == 0 {
                break;
            }
            scanned += delta;
            if scanned >= nr_to_scan as u64 || self.should_abort_scan(sc) {
                break;
            }
        }
        nr_to_scan < 0
    }

    /// lruvec_is_sizable: the evictable pages of the lruvec, shifted by the priority, are not 0.
    fn lruvec_is_sizable(&self, m: u16, sc: &ScanControl) -> bool {
        let can_swap = self.lru_gen_swappiness(m, sc) != 0;
        let g = &self.memcgs[m as usize].lrugen;
        let total: u64 = ((!can_swap as usize)..2)
            .flat_map(|ty| (g.min_seq[ty]..=g.max_seq).map(move |s| g.nr_pages[gen_of(s)][ty]))
            .sum();
        (total >> sc.priority) > 0
    }

    /// lru_gen_shrink_lruvec: memcg reclaim of one lruvec (from shrink_node's memcg walk),
    /// under a block plug; a memcg that aged is rotated to the memcg LRU's young generation.
    pub(crate) fn lru_gen_shrink_lruvec(&mut self, ctx: &mut Ctx, m: u16, sc: &mut ScanControl) {
        self.blk_start_plug();
        if self.try_to_shrink_lruvec(ctx, m, sc) {
            let _switched = self.lru_gen_rotate_memcg(m, MemcgOp::Young);
        }
        self.blk_finish_plug(ctx);
    }

    /// set_initial_priority: start where (reclaimable >> priority) roughly meets the goal,
    /// within [DEF_PRIORITY / 2, DEF_PRIORITY], when at DEF_PRIORITY with a goal of at least
    /// MIN_LRU_BATCH.
    fn set_initial_priority(&self, sc: &mut ScanControl) {
        if sc.priority != DEF_PRIORITY || sc.nr_to_reclaim < MIN_LRU_BATCH {
            return;
        }
        let mut reclaimable = self.lru_size_tree(0, list::INACTIVE_FILE);
        if self.swap.nr_swap_pages > 0 {
            reclaimable += self.lru_size_tree(0, list::INACTIVE_ANON);
        }
        let fls = |x: u64| 64 - x.leading_zeros() as i32;
        let priority = fls(reclaimable) - 1 - fls(sc.nr_to_reclaim - 1);
        sc.priority = priority.clamp(DEF_PRIORITY / 2, DEF_PRIORITY);
    }

    /// lru_gen_rotate_memcg: YOUNG moves the memcg to the young generation of the memcg LRU
    /// (not visited again until the old one is done), TAIL to the old one's tail.
    /// Returns true when the old generation ran empty and the generations switched.
    fn lru_gen_rotate_memcg(&mut self, m: u16, op: MemcgOp) -> bool {
        let node = &mut self.lru_gen;
        if op == MemcgOp::Stay {
            return false;
        }
        if let Some(k) = node.old.iter().position(|&x| x == m) {
            node.old.remove(k);
        } else if let Some(k) = node.young.iter().position(|&x| x == m) {
            node.young.remove(k);
        }
        if op == MemcgOp::Tail {
            node.old.push(m);
        } else {
            node.young.push(m);
        }
        self.memcgs[m as usize].lrugen.seg_tail = op == MemcgOp::Tail;
        if node.old.is_empty() {
            // The old generation is empty: the memcg LRU's seq advances.
            std::mem::swap(&mut node.old, &mut node.young);
            return true;
        }
        false
    }

    /// shrink_one: evict from one memcg's lruvec, then its shrinkers; what the memcg LRU does
    /// with it next.
    fn shrink_one(&mut self, ctx: &mut Ctx, m: u16, sc: &mut ScanControl) -> MemcgOp {
        // Protection as lru_gen_age_node last computed it (6.12): under memory.min the memcg
        // goes to the young generation; under memory.low to the tail first, and reclaimed on
        // its second visit with MEMCG_LOW.
        if self.mem_cgroup_below_min(0, m) {
            return MemcgOp::Young;
        }
        if self.mem_cgroup_below_low(0, m) {
            if !self.memcgs[m as usize].lrugen.seg_tail {
                return MemcgOp::Tail;
            }
            self.memcg_low_event(m);
        }
        let success = self.try_to_shrink_lruvec(ctx, m, sc);
        self.shrink_slab(ctx, m, sc);
        if success {
            return MemcgOp::Young;
        }
        if self.lruvec_is_sizable(m, sc) {
            return MemcgOp::Stay;
        }
        if self.memcgs[m as usize].lrugen.seg_tail {
            MemcgOp::Young
        } else {
            MemcgOp::Tail
        }
    }

    /// shrink_many: the memcgs of the memcg LRU's old generation in order, until
    /// should_abort_scan. Each memcg is visited at most twice (TAIL gives one retry).
    fn shrink_many(&mut self, ctx: &mut Ctx, sc: &mut ScanControl) {
        let mut k = 0;
        while k < self.lru_gen.old.len() {
            let m = self.lru_gen.old[k];
            let op = self.shrink_one(ctx, m, sc);
            if op == MemcgOp::Stay {
                k += 1;
            } else if self.lru_gen_rotate_memcg(m, op) {
                // Every memcg of the old generation was rotated: this pass is over.
                break;
            }
            if self.should_abort_scan(sc) {
                break;
            }
        }
    }

    /// lru_gen_shrink_node: root reclaim (kswapd, direct) over the memcg LRU, under a block
    /// plug, from set_initial_priority's priority.
    pub(crate) fn lru_gen_shrink_node(&mut self, ctx: &mut Ctx, sc: &mut ScanControl) {
        let before = sc.nr_reclaimed;
        self.blk_start_plug();
        self.set_initial_priority(sc);
        self.shrink_many(ctx, sc);
        self.blk_finish_plug(ctx);
        if sc.nr_reclaimed > before {
            self.kswapd.failures = 0;
        }
    }

    /// lru_gen_age_node (kswapd, each balance_pgdat pass): set_initial_priority, and with
    /// min_ttl_ms, ask for an OOM kill when no memcg has a sizable lruvec whose oldest file
    /// generation is older than min_ttl_ms.
    pub(crate) fn lru_gen_age_node(&mut self, ctx: &mut Ctx, sc: &mut ScanControl) {
        self.set_initial_priority(sc);
        for m in 0..self.memcgs.len() as u16 {
            self.mem_cgroup_calculate_protection(0, m);
        }
        let min_ttl = self.knobs.lru_gen.min_ttl_ms.saturating_mul(1_000_000);
        if min_ttl == 0 {
            return;
        }
        let reclaimable = (0..self.memcgs.len() as u16).any(|m| {
            let g = &self.memcgs[m as usize].lrugen;
            let birth = g.timestamps[gen_of(g.min_seq[FILE])];
            !self.mem_cgroup_below_min(0, m)
                && self.lruvec_is_sizable(m, sc)
                && birth.saturating_add(min_ttl) < ctx.now
        });
        if !reclaimable {
            self.lru_gen.oom = true;
        }
    }

    /// lru_gen_eviction: the shadow keeps min_seq of the folio's type with its access count
    /// (refs - 1), and PG_workingset when it had any refs; evicted[tier] counts it.
    pub(crate) fn lru_gen_eviction(&mut self, i: u32) {
        let p = &mut self.pages[i as usize];
        let ty = type_of(p);
        let refs = folio_lru_refs(p);
        let tier = lru_tier_from_refs(refs);
        let g = &mut self.memcgs[p.memcg as usize].lrugen;
        let token = (g.min_seq[ty] << LRU_REFS_WIDTH) | refs.saturating_sub(1) as u64;
        p.shadow = token as u32;
        p.clear(pg::LRU_REFS_MASK | pg::WORKINGSET);
        if refs != 0 {
            p.set(pg::WORKINGSET);
        }
        p.set(pg::SHADOW);
        g.evicted[ty][tier] += 1;
    }

    /// lru_gen_refault: counts the refault; one evicted from the generation still oldest is
    /// recent (workingset_activate, refaulted[tier]); a recent refault in a page fault, or of
    /// a folio at the maximum count, is a workingset restore and gets its tier back. The
    /// folio is never activated here (the fault places it in the youngest generation).
    pub(crate) fn lru_gen_refault(&mut self, i: u32) -> bool {
        let in_fault = self.lru_gen.in_fault;
        let p = &mut self.pages[i as usize];
        let (m, ty, shadow, workingset) = (p.memcg, type_of(p), p.shadow, p.has(pg::WORKINGSET));
        p.clear(pg::SHADOW | pg::WORKINGSET);
        let file = ty == FILE;
        self.count_workingset_refault(m, file);
        let g = &mut self.memcgs[m as usize].lrugen;
        let recent =
            (shadow >> LRU_REFS_WIDTH) == (g.min_seq[ty] as u32 & (u32::MAX >> LRU_REFS_WIDTH));
        if !recent {
            return false;
        }
        let refs = (shadow & ((1 << LRU_REFS_WIDTH) - 1)) + workingset as u32;
        g.refaulted[ty][lru_tier_from_refs(refs)] += 1;
        let restore = in_fault || refs >= (1 << LRU_REFS_WIDTH) - 1;
        if restore {
            self.pages[i as usize].set(pg::LRU_REFS_MASK | pg::WORKINGSET);
        }
        let mc = &mut self.memcgs[m as usize];
        if file {
            self.vm_file.workingset_activate_file += 1;
            mc.file_events.workingset_activate_file += 1;
            if restore {
                self.vm_file.workingset_restore_file += 1;
                mc.file_events.workingset_restore_file += 1;
            }
        } else {
            self.vm.workingset_activate_anon += 1;
            mc.events.workingset_activate_anon += 1;
            if restore {
                self.vm.workingset_restore_anon += 1;
                mc.events.workingset_restore_anon += 1;
            }
        }
        false
    }

    /// oom_badness's share of one region: its resident pages, swap entries and page tables.
    pub(crate) fn oom_badness_of_region(&self, r: usize) -> u64 {
        let reg = &self.regions[r];
        let pages = &self.pages[reg.base as usize..(reg.base + reg.pages) as usize];
        let rss_swap = pages
            .iter()
            .filter(|p| (p.has(pg::MAPPED) && !p.has(pg::ZERO_PFN)) || p.slot != super::page::NONE)
            .count();
        rss_swap as u64 + reg.page_tables.iter().filter(|&&t| t).count() as u64
    }

    /// The /sys/kernel/debug/lru_gen histogram: per memcg, pages per generation and type,
    /// `lru_gen.memcg[<path>].gen<k>.{anon,file}` with k = max_seq - seq (0 the youngest), and
    /// max_seq (the debugfs file's sequence numbers: aging passes since boot, plus 3).
    pub(crate) fn export_lru_gen(&self, out: &mut Vec<(String, u64)>) {
        for m in &self.memcgs {
            let g = &m.lrugen;
            let oldest = g.min_seq[ANON].min(g.min_seq[FILE]);
            for seq in oldest..=g.max_seq {
                let k = g.max_seq - seq;
                for (ty, name) in [(ANON, "anon"), (FILE, "file")] {
                    out.push((
                        format!("lru_gen.memcg[{}].gen{k}.{name}", m.path),
                        g.nr_pages[gen_of(seq)][ty],
                    ));
                }
            }
            out.push((format!("lru_gen.memcg[{}].max_seq", m.path), g.max_seq));
        }
    }

    /// The multi-gen LRU part of the conservation check: every resident page on an lrugen list
    /// has a generation, and the per-generation counts and list lengths agree with the pages.
    pub(crate) fn check_lru_gen(&self) -> Result<(), String> {
        let mut by_flags = vec![[[0u64; 2]; MAX_NR_GENS as usize]; self.memcgs.len()];
        let mut by_list = vec![[[0u64; 2]; MAX_NR_GENS as usize]; self.memcgs.len()];
        for (i, p) in self.pages.iter().enumerate() {
            if !list::is_gen(p.list()) {
                if p.has(pg::RESIDENT) && folio_lru_gen(p).is_some() {
                    return Err(format!(
                        "page {i} has a generation but is on list {}",
                        p.list()
                    ));
                }
                continue;
            }
            let Some(gen) = folio_lru_gen(p) else {
                return Err(format!("page {i} on an lrugen list without a generation"));
            };
            if p.has(pg::ACTIVE) {
                return Err(format!("page {i}: PG_active on an lrugen list"));
            }
            let id = (p.list() - list::LRU_GEN) as usize;
            if id % 2 != type_of(p) {
                return Err(format!("page {i} on the wrong type's list"));
            }
            by_flags[p.memcg as usize][gen][type_of(p)] += 1;
            by_list[p.memcg as usize][id / 2][id % 2] += 1;
        }
        for (m, mc) in self.memcgs.iter().enumerate() {
            let g = &mc.lrugen;
            for gen in 0..MAX_NR_GENS as usize {
                for ty in 0..2 {
                    if g.nr_pages[gen][ty] != by_flags[m][gen][ty]
                        || g.folios[gen][ty].len != by_list[m][gen][ty]
                    {
                        return Err(format!(
                            "memcg {} gen {gen} type {ty}: counts disagree with the pages",
                            mc.path
                        ));
                    }
                }
            }
            for ty in 0..2 {
                if g.min_seq[ty] > g.max_seq
                    || g.nr_gens(ty) > MAX_NR_GENS
                    || (ty == FILE && g.nr_gens(ty) < MIN_NR_GENS)
                {
                    return Err(format!(
                        "memcg {}: invalid seqs {:?} {}",
                        mc.path, g.min_seq, g.max_seq
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_follow_order_base_2() {
        assert_eq!([0, 1, 2, 3, 4].map(lru_tier_from_refs), [0, 1, 2, 2, 3]);
    }

    #[test]
    fn sizes_split_active_and_inactive_by_generation() {
        let mut g = LruGen::new();
        g.nr_pages = [[1, 10], [2, 20], [4, 40], [8, 80]];
        // max_seq = 3: gens 3 and 2 are active.
        assert_eq!(g.lru_size(list::ACTIVE_ANON), 12);
        assert_eq!(g.lru_size(list::INACTIVE_ANON), 3);
        assert_eq!(g.lru_size(list::ACTIVE_FILE), 120);
        assert_eq!(g.lru_size(list::INACTIVE_FILE), 30);
    }

    #[test]
    fn pid_controller_protects_tiers_refaulting_less_than_twice_the_first() {
        let sp = CtrlPos {
            refaulted: 100,
            total: 1000,
            gain: 1,
        };
        // Few refaults: always positive (protect).
        assert!(positive_ctrl_err(
            sp,
            CtrlPos {
                refaulted: 63,
                total: 64,
                gain: 2
            }
        ));
        // 15% refaults vs 10% with gain 2: within the margin (twice the SP's rate, less the
        // MIN_LRU_BATCH added to the SP's total: 200/1000 is just beyond it).
        assert!(positive_ctrl_err(
            sp,
            CtrlPos {
                refaulted: 150,
                total: 1000,
                gain: 2
            }
        ));
        assert!(!positive_ctrl_err(
            sp,
            CtrlPos {
                refaulted: 200,
                total: 1000,
                gain: 2
            }
        ));
        // 30% vs 10%: beyond it.
        assert!(!positive_ctrl_err(
            sp,
            CtrlPos {
                refaulted: 300,
                total: 1000,
                gain: 2
            }
        ));
    }
}
