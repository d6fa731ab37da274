//! The machine's physical memory behind Mm: a page_alloc::Zone that knows which pfn each
//! resident page occupies, and the THP fault path that needs it (mm/huge_memory.c
//! do_huge_pmd_anonymous_page and vma_thp_gfp_mask, mm/page_alloc.c __alloc_pages_slowpath
//! for a costly order, 6.12.117 / 6.18) → docs/model/compaction.md.
//!
//! Built only when some region can get transparent huge pages (kernel.transparent_hugepage
//! .enabled = always with anonymous memory, or madvise with a `thp = true` region) or some
//! process has a kernel_alloc phase (mm/kalloc.rs): without them every allocation is order 0, which the count in Mm::nr_free serves alone, and the
//! order-0 paths do not touch this file (one `Option` test when a page becomes resident or
//! leaves memory).
//!
//! Mm::nr_free stays the count every order-0 watermark check reads. The zone mirrors it:
//! resident pages (anon, file, tmpfs, swap cache) each hold a MOVABLE pfn from the moment
//! they become resident until they leave; every other page the count says is in use (page
//! tables, the zswap and zram pools, a frame between its allocation and its page becoming
//! resident) is an UNMOVABLE pfn of `kernel`, grown or shrunk to the count whenever the zone
//! is used ([`Phys::sync`]). Simplified: kernel pages are all unmovable and never migrated
//! (zsmalloc's movable zspages, zs_page_migrate, are not modelled yet), and a kernel page
//! freed gives back the most recently taken pfn, not the one the kernel would free.
//!
//! A THP is 512 page records on one order-9 block: reclaim handles the pages one by one, and
//! the first that leaves memory splits the block into order-0 pages (split_huge_page, as
//! reclaim does for an anonymous THP it swaps out page by page). THPs are not migrated by
//! compaction (the kernel migrates them whole).

use super::page::{pg, NONE};
use super::{Ctx, Mm, Oom, PTRS_PER_PTE};
use crate::compaction::{self, CompactPriority, CompactResult, CompactState};
use crate::error::ConfigError;
use crate::latency::Kind;
use crate::page_alloc::{MigrateType, PfnState, Watermarks, Wmark, Zone};

use crate::stats::{CompactEvents, KernelAllocEvents, ThpEvents};

/// HPAGE_PMD_ORDER on x86-64.
pub const HPAGE_PMD_ORDER: u8 = 9;

/// /sys/kernel/mm/transparent_hugepage/enabled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThpEnabled {
    Always,
    Madvise,
    Never,
}

impl ThpEnabled {
    /// Whether khugepaged runs, and so raises min_free_kbytes at its start: `always` or
    /// `madvise`. Same in 6.1 (hugepage_flags_enabled: the ALWAYS or REQ_MADV flag), 6.12 and
    /// 6.18 (hugepage_pmd_enabled: the PMD order's per-size setting, `inherit` by default,
    /// follows this global knob; the per-size files and READ_ONLY_THP_FOR_FS are not modelled).
    pub fn khugepaged_runs(self) -> bool {
        self != ThpEnabled::Never
    }
}

/// /sys/kernel/mm/transparent_hugepage/defrag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThpDefrag {
    Always,
    Defer,
    DeferMadvise,
    Madvise,
    Never,
}

/// The enabled knob's choices, in the kernel's order.
pub const THP_ENABLED: &[(&str, ThpEnabled)] = &[
    ("always", ThpEnabled::Always),
    ("madvise", ThpEnabled::Madvise),
    ("never", ThpEnabled::Never),
];
/// The defrag knob's choices, in the kernel's order.
pub const THP_DEFRAG: &[(&str, ThpDefrag)] = &[
    ("always", ThpDefrag::Always),
    ("defer", ThpDefrag::Defer),
    ("defer+madvise", ThpDefrag::DeferMadvise),
    ("madvise", ThpDefrag::Madvise),
    ("never", ThpDefrag::Never),
];

pub fn thp_enabled_names() -> Vec<&'static str> {
    THP_ENABLED.iter().map(|(n, _)| *n).collect()
}

pub fn thp_defrag_names() -> Vec<&'static str> {
    THP_DEFRAG.iter().map(|(n, _)| *n).collect()
}

pub(crate) fn lookup<T: Copy>(
    options: &[(&str, T)],
    key: &str,
    name: &str,
) -> Result<T, ConfigError> {
    options
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            let names: Vec<String> = options.iter().map(|(n, _)| format!("{n:?}")).collect();
            ConfigError::invalid(
                key,
                format!("expected one of {}, got {name:?}", names.join(", ")),
            )
        })
}

/// What vma_thp_gfp_mask gives a fault: may it reclaim and compact directly
/// (__GFP_DIRECT_RECLAIM), does it wake kswapd (and with it kcompactd; __GFP_KSWAPD_RECLAIM),
/// and does it give up after the first compaction (__GFP_NORETRY).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ThpGfp {
    direct: bool,
    kswapd: bool,
    noretry: bool,
}

fn vma_thp_gfp_mask(defrag: ThpDefrag, madvised: bool) -> ThpGfp {
    match defrag {
        // GFP_TRANSHUGE | __GFP_NORETRY unless madvised.
        ThpDefrag::Always => ThpGfp {
            direct: true,
            kswapd: false,
            noretry: !madvised,
        },
        // GFP_TRANSHUGE_LIGHT | __GFP_KSWAPD_RECLAIM.
        ThpDefrag::Defer => ThpGfp {
            direct: false,
            kswapd: true,
            noretry: false,
        },
        ThpDefrag::DeferMadvise => ThpGfp {
            direct: madvised,
            kswapd: !madvised,
            noretry: false,
        },
        // GFP_TRANSHUGE_LIGHT | __GFP_DIRECT_RECLAIM if madvised.
        ThpDefrag::Madvise => ThpGfp {
            direct: madvised,
            kswapd: false,
            noretry: false,
        },
        ThpDefrag::Never => ThpGfp {
            direct: false,
            kswapd: false,
            noretry: false,
        },
    }
}

pub struct Phys {
    pub zone: Zone,
    pub compact: CompactState,
    pub ev: CompactEvents,
    pub thp: ThpEvents,
    enabled: ThpEnabled,
    defrag: ThpDefrag,
    /// The pfn of each resident page (page index → pfn; NONE when not resident).
    pub(crate) pfn_of: Vec<u32>,
    /// Pfns of the pages in use that are not resident pages (see the file comment).
    kernel: Vec<u32>,
    /// Resident pages holding a pfn.
    mapped: u64,
    /// pgdat->kcompactd_max_order: the order kcompactd is to work for when kswapd sleeps.
    pub(crate) kcompactd_max_order: u8,
    /// Blocks held by kernel_alloc phases: (head pfn, process), in allocation order
    /// (mm/kalloc.rs); their order is the zone's.
    pub(crate) kblocks: Vec<(u32, u32)>,
    /// Pages in `kblocks`.
    pub(crate) kblock_pages: u64,
    /// Some when the scenario has kernel_alloc phases (their counters are exported then).
    pub(crate) kev: Option<KernelAllocEvents>,
}

impl Phys {
    /// The zone of a machine of `totalram` pages, if the config lets any region have THPs.
    /// `kernel_alloc`: some process has a kernel_alloc phase (the zone is needed then too).
    /// `page_reporting_order`: the machine's free page reporting (0: none), see
    /// crate::page_alloc.
    pub(crate) fn from_config(
        mm: &Mm,
        kernel_alloc: bool,
        page_reporting_order: u8,
    ) -> Result<Option<Box<Phys>>, ConfigError> {
        if page_reporting_order != 0
            && !(crate::page_alloc::PAGEBLOCK_ORDER..=crate::page_alloc::MAX_PAGE_ORDER)
                .contains(&page_reporting_order)
        {
            return Err(ConfigError::invalid(
                "machine.page_reporting_order",
                format!(
                    "0 (no free page reporting) or 9..=10 (the model tracks reported memory per \
                     pageblock of order 9); got {page_reporting_order}"
                ),
            ));
        }
        let t = &mm.knobs.transparent_hugepage;
        let enabled = lookup(
            THP_ENABLED,
            "kernel.transparent_hugepage.enabled",
            &t.enabled,
        )?;
        let defrag = lookup(THP_DEFRAG, "kernel.transparent_hugepage.defrag", &t.defrag)?;
        let any = mm.regions.iter().any(|r| {
            r.file.is_none()
                && r.shmem.is_none()
                && (enabled == ThpEnabled::Always || enabled == ThpEnabled::Madvise && r.thp)
        });
        if !kernel_alloc && (!any || enabled == ThpEnabled::Never) {
            return Ok(None);
        }
        let wmark = Watermarks {
            min: mm.wmark_min,
            low: mm.wmark_low,
            high: mm.wmark_high,
        };
        let mut zone = Zone::new(mm.totalram as u32, wmark);
        if page_reporting_order != 0 {
            zone.enable_page_reporting(page_reporting_order);
        }
        let compact = CompactState::new(
            &zone,
            mm.switches.compaction_defer,
            mm.knobs.vm.extfrag_threshold as i64,
        );
        Ok(Some(Box::new(Phys {
            zone,
            compact,
            ev: CompactEvents::default(),
            thp: ThpEvents::default(),
            enabled,
            defrag,
            pfn_of: vec![NONE; mm.pages.len()],
            kernel: Vec::new(),
            mapped: 0,
            kcompactd_max_order: 0,
            kblocks: Vec::new(),
            kblock_pages: 0,
            kev: kernel_alloc.then(KernelAllocEvents::default),
        })))
    }

    /// Grow or shrink the kernel pfns so the zone's free pages equal `nr_free`.
    pub(crate) fn sync(&mut self, nr_free: u64) {
        let want =
            (self.zone.spanned() as u64).saturating_sub(nr_free + self.mapped + self.kblock_pages);
        while (self.kernel.len() as u64) < want {
            let p = self
                .zone
                .rmqueue(0, MigrateType::Unmovable)
                .expect("the zone has the free pages the count says");
            self.kernel.push(p);
        }
        while self.kernel.len() as u64 > want {
            let p = self.kernel.pop().expect("len > want ≥ 0");
            self.zone.free(p);
        }
    }

    /// Page `i` became resident: give it a movable pfn.
    fn map(&mut self, i: u32, nr_free: u64) {
        if self.zone.free_pages() == 0 {
            // The count took this frame already: it is among the kernel pfns until now.
            let p = self
                .kernel
                .pop()
                .expect("a page in use is counted somewhere");
            self.zone.free(p);
        }
        let p = self
            .zone
            .rmqueue(0, MigrateType::Movable)
            .expect("a free page");
        self.zone.set_owner(p, i);
        self.pfn_of[i as usize] = p;
        self.mapped += 1;
        self.sync(nr_free);
    }

    /// Page `i` left memory: free its pfn, splitting its THP first.
    fn unmap(&mut self, i: u32) {
        let pfn = self.pfn_of[i as usize];
        debug_assert_ne!(pfn, NONE, "page {i} left memory without a pfn");
        let head = pfn & !((1 << HPAGE_PMD_ORDER) - 1);
        if let PfnState::Alloc { order, owner, .. } = self.zone.state(head) {
            if order == HPAGE_PMD_ORDER {
                // split_huge_page: 512 order-0 pages, page owner + k at pfn head + k.
                self.zone.split_alloc(head, |k| owner + k);
            }
        }
        self.zone.free(pfn);
        self.pfn_of[i as usize] = NONE;
        self.mapped -= 1;
    }

    /// The consistency of the zone and of its agreement with the page records.
    pub(crate) fn check(&self, mm: &Mm) -> Result<(), String> {
        self.zone.check()?;
        let used = self.zone.spanned() as u64 - self.zone.free_pages();
        if used != self.mapped + self.kernel.len() as u64 + self.kblock_pages {
            return Err(format!(
                "zone: {used} pages in use, {} resident + {} kernel + {} in kernel_alloc blocks",
                self.mapped,
                self.kernel.len(),
                self.kblock_pages
            ));
        }
        let mut held = 0u64;
        for &(pfn, p) in &self.kblocks {
            let PfnState::Alloc { order, .. } = self.zone.state(pfn) else {
                return Err(format!(
                    "kernel_alloc block {pfn} of process {p} is not allocated"
                ));
            };
            held += 1 << order;
        }
        if held != self.kblock_pages {
            return Err(format!(
                "kernel_alloc: {held} pages in blocks, {} counted",
                self.kblock_pages
            ));
        }
        let resident = mm.pages.iter().filter(|p| p.has(pg::RESIDENT)).count() as u64;
        if resident != self.mapped {
            return Err(format!(
                "zone: {} pfns of resident pages, {resident} resident pages",
                self.mapped
            ));
        }
        for (i, p) in mm.pages.iter().enumerate() {
            if p.has(pg::RESIDENT) != (self.pfn_of[i] != NONE) {
                return Err(format!(
                    "page {i}: resident {} but pfn {}",
                    p.has(pg::RESIDENT),
                    self.pfn_of[i]
                ));
            }
        }
        Ok(())
    }
}

impl Mm {
    /// Page `i` became resident (nr_resident and its pfn).
    #[inline]
    pub(crate) fn resident_add(&mut self, i: u32) {
        self.nr_resident += 1;
        if let Some(ph) = &mut self.phys {
            ph.map(i, self.nr_free);
        }
    }

    /// Page `i` left memory (its frame went back with free_frame).
    #[inline]
    pub(crate) fn resident_del(&mut self, i: u32) {
        self.nr_resident -= 1;
        if let Some(ph) = &mut self.phys {
            ph.unmap(i);
        }
    }

    /// Whether a write fault on page `i` may try a THP (__handle_mm_fault → create_huge_pmd:
    /// an anonymous region THP is enabled for, whose PMD is still empty: no page table
    /// for its 2 MiB yet, which also means none of its pages was ever mapped).
    pub(crate) fn thp_fault_eligible(&self, i: u32) -> bool {
        let Some(ph) = &self.phys else { return false };
        let r = &self.regions[self.region_index(i)];
        if r.file.is_some() || r.shmem.is_some() {
            return false;
        }
        let madvised = r.thp;
        if !(ph.enabled == ThpEnabled::Always || ph.enabled == ThpEnabled::Madvise && madvised) {
            return false;
        }
        let chunk = (i - r.base) / PTRS_PER_PTE;
        // thp_vma_suitable_order: the huge page must lie within the region.
        (chunk + 1) * PTRS_PER_PTE <= r.pages && !r.page_tables[chunk as usize]
    }

    /// do_huge_pmd_anonymous_page for the 2 MiB range holding page `i` (a write fault;
    /// thp_fault_eligible was true): an order-9 MOVABLE block per vma_thp_gfp_mask, charged
    /// 512 pages, zeroed, all pages resident, mapped and dirty; its page table deposited
    /// (pte_alloc, as pgtable_trans_huge_deposit needs one). Ok(false): no huge page
    /// (thp_fault_fallback, or thp_fault_fallback_charge too), the caller goes on with
    /// order 0.
    pub(crate) fn do_huge_pmd_anonymous_page(
        &mut self,
        ctx: &mut Ctx,
        i: u32,
    ) -> Result<bool, Oom> {
        let region = self.region_index(i);
        let r = &self.regions[region];
        let base = r.base + (i - r.base) / PTRS_PER_PTE * PTRS_PER_PTE;
        let m = r.memcg;
        // The page table first (the kernel allocates it after the folio; its failure frees
        // the folio): a failed THP leaves it for the order-0 fault that follows.
        self.pte_alloc(ctx, i)?;
        self.phys.as_mut().expect("eligible").zone.last_reported = 0;
        let Some(pfn) = self.alloc_thp(ctx, self.regions[region].thp) else {
            self.phys.as_mut().expect("eligible").thp.thp_fault_fallback += 1;
            return Ok(false);
        };
        // mem_cgroup_charge of the folio: page by page here (the batch and the reclaim it may
        // need are the same), all or nothing. A failed charge took nothing back out of a folio
        // (no pgpgout); a committed one is one v1 charge event (memcg1_commit_charge counts
        // PGPGIN once per folio: a THP's pgpgin is 1, not 512).
        // Free page reporting: pages of the block the hypervisor no longer backs (mm/page_alloc
        // and crate::page_alloc: only a block taken off the free lists whole is counted).
        let reported = self.phys.as_ref().expect("eligible").zone.last_reported;
        for k in 0..PTRS_PER_PTE {
            if self.try_charge(ctx, m).is_err() {
                self.page_counter_uncharge(m, u64::from(k));
                self.nr_free += 1 << HPAGE_PMD_ORDER;
                let ph = self.phys.as_mut().expect("eligible");
                // The kernel charges the folio before clearing it: its frames were not touched.
                ph.zone.restore_reported(pfn, HPAGE_PMD_ORDER, reported);
                ph.zone.free(pfn);
                ph.mapped -= 1 << HPAGE_PMD_ORDER;
                ph.sync(self.nr_free);
                ph.thp.thp_fault_fallback += 1;
                ph.thp.thp_fault_fallback_charge += 1;
                return Ok(false);
            }
        }
        self.commit_charge(m);
        // folio_zero_user touches every page: each reported one faults in the hypervisor.
        ctx.cpu(
            self.costs.page_alloc_zero_ns * PTRS_PER_PTE as u64
                + self.costs.page_reported_touch_ns * reported,
        );
        let ph = self.phys.as_mut().expect("eligible");
        ph.zone.set_owner(pfn, base);
        for k in 0..PTRS_PER_PTE {
            ph.pfn_of[(base + k) as usize] = pfn + k;
        }
        ph.thp.thp_fault_alloc += 1;
        for j in base..base + PTRS_PER_PTE {
            let p = &mut self.pages[j as usize];
            p.set(pg::RESIDENT | pg::MAPPED | pg::YOUNG | pg::DIRTY | pg::ANON);
            self.nr_resident += 1;
            self.lru_add(j);
            self.analytic_sync(j);
        }
        Ok(true)
    }

    /// The THP's allocation as vma_alloc_folio makes it for a local mempolicy
    /// (alloc_pages_mpol, 6.12): first __alloc_pages with __GFP_THISNODE | __GFP_NORETRY
    /// ("don't reclaim unnecessarily, just compact"), then, if the gfp allows direct reclaim,
    /// __alloc_pages again with the gfp as it is. The count (nr_free) pays for the block.
    fn alloc_thp(&mut self, ctx: &mut Ctx, madvised: bool) -> Option<u32> {
        let gfp = vma_thp_gfp_mask(self.phys.as_ref()?.defrag, madvised);
        if let Some(pfn) = self.thp_alloc_pages(ctx, gfp, true) {
            return Some(pfn);
        }
        if !gfp.direct {
            return None;
        }
        self.thp_alloc_pages(ctx, gfp, false)
    }

    /// __alloc_pages for the THP (an order above PAGE_ALLOC_COSTLY_ORDER): the low watermark
    /// fast path, then __alloc_pages_slowpath: wake kswapd if the gfp says so, the min
    /// watermark; with direct reclaim allowed, async direct compaction (INIT_COMPACT_PRIORITY);
    /// with __GFP_NORETRY a skipped or deferred compaction ends it, and so does __GFP_THISNODE
    /// (`thisnode`: the first attempt), and the later compaction stays async; then the min
    /// watermark again, one direct reclaim (try_to_free_pages with sc.order = 9) and the
    /// allocation after it, and direct compaction at DEF_COMPACT_PRIORITY (sync-light) or
    /// async; a costly order without __GFP_RETRY_MAYFAIL stops there (no retry loop).
    fn thp_alloc_pages(&mut self, ctx: &mut Ctx, gfp: ThpGfp, thisnode: bool) -> Option<u32> {
        const NR: u64 = 1 << HPAGE_PMD_ORDER;
        let noretry = gfp.noretry || thisnode;
        // The count pays for the block, and the block counts as resident pages' from now on
        // (so a sync before its pages are marked resident does not count it twice).
        let take = |mm: &mut Mm, pfn: u32| {
            mm.nr_free -= NR;
            mm.phys.as_mut().expect("eligible").mapped += NR;
            Some(pfn)
        };
        if let Some(pfn) = self.thp_get_page(Wmark::Low) {
            return take(self, pfn);
        }
        if gfp.kswapd {
            // wakeup_kswapd for order 9: kcompactd follows kswapd's run, or runs now if
            // the node is balanced at order 0 (kswapd has nothing to reclaim).
            self.phys.as_mut()?.kcompactd_max_order = HPAGE_PMD_ORDER;
            if self.node_balanced() {
                self.wakeup_kcompactd();
            } else {
                self.wakeup_kswapd(ctx.now);
            }
        }
        if let Some(pfn) = self.thp_get_page(Wmark::Min) {
            return take(self, pfn);
        }
        if !gfp.direct || ctx.memalloc {
            return None;
        }
        let (start, memstall) = (ctx.now, self.psi_memstall_enter(ctx));
        let got = 'slow: {
            let (page, result) = self.direct_compact(
                ctx,
                HPAGE_PMD_ORDER,
                MigrateType::Movable,
                CompactPriority::Async,
            );
            if page.is_some() {
                break 'slow page;
            }
            let mut prio = CompactPriority::SyncLight;
            if noretry {
                if matches!(result, CompactResult::Skipped | CompactResult::Deferred) || thisnode {
                    break 'slow None;
                }
                prio = CompactPriority::Async;
            }
            if let Some(pfn) = self.thp_get_page(Wmark::Min) {
                break 'slow Some(pfn);
            }
            // __alloc_pages_direct_reclaim: __perform_reclaim, then the allocation.
            self.try_to_free_pages_order(ctx, HPAGE_PMD_ORDER);
            self.phys_sync();
            if let Some(pfn) = self.thp_get_page(Wmark::Min) {
                break 'slow Some(pfn);
            }
            self.direct_compact(ctx, HPAGE_PMD_ORDER, MigrateType::Movable, prio)
                .0
        };
        self.psi_memstall_leave(ctx, memstall);
        self.latency(ctx, Kind::AllocStall, ctx.now - start);
        take(self, got?)
    }

    /// get_page_from_freelist for the THP at `mark`: an order-9 MOVABLE block if the zone
    /// passes the order-9 watermark check.
    fn thp_get_page(&mut self, mark: Wmark) -> Option<u32> {
        let nr_free = self.nr_free;
        let ph = self.phys.as_mut()?;
        ph.sync(nr_free);
        if !ph
            .zone
            .watermark_ok(HPAGE_PMD_ORDER, ph.zone.wmark.get(mark), false)
        {
            return None;
        }
        ph.zone.rmqueue(HPAGE_PMD_ORDER, MigrateType::Movable)
    }

    /// compaction_ready for direct reclaim of `order` (shrink_zones; false without a zone).
    pub(super) fn compaction_ready(&mut self, order: u8) -> bool {
        self.phys_sync();
        let Some(ph) = self.phys.as_deref_mut() else {
            return false;
        };
        compaction::compaction_ready(&ph.zone, &mut ph.compact, order)
    }

    /// should_continue_reclaim for direct reclaim of `order` after a shrink_node pass that
    /// reclaimed `nr_reclaimed`: the node's inactive lists (anon only with swap, as
    /// can_reclaim_anon_pages) against compact_gap.
    pub(super) fn should_continue_reclaim(
        &mut self,
        order: u8,
        priority: i32,
        nr_reclaimed: u64,
    ) -> bool {
        self.phys_sync();
        let mut inactive = self.lru_size_tree(0, super::page::list::INACTIVE_FILE);
        if self.mem_cgroup_get_nr_swap_pages(0) > 0 {
            inactive += self.lru_size_tree(0, super::page::list::INACTIVE_ANON);
        }
        let Some(ph) = self.phys.as_deref_mut() else {
            return false;
        };
        compaction::should_continue_reclaim(
            &ph.zone,
            &mut ph.compact,
            order,
            priority,
            nr_reclaimed,
            inactive,
        )
    }

    /// __alloc_pages_direct_compact at `prio`: the block of `order` on success at the min
    /// watermark, each migrated page moving its record's pfn and costing a page copy. Shared
    /// by THP faults and kernel allocations (mm/kalloc.rs).
    pub(super) fn direct_compact(
        &mut self,
        ctx: &mut Ctx,
        order: u8,
        mt: MigrateType,
        prio: CompactPriority,
    ) -> (Option<u32>, CompactResult) {
        let nr_free = self.nr_free;
        let Some(ph) = self.phys.as_mut() else {
            return (None, CompactResult::Skipped);
        };
        ph.sync(nr_free);
        let Phys {
            zone,
            compact,
            ev,
            pfn_of,
            ..
        } = &mut **ph;
        let (page, result, work) = compaction::alloc_pages_direct_compact(
            zone,
            compact,
            ev,
            order,
            mt,
            prio,
            Wmark::Min,
            &mut |owner, _, new| {
                pfn_of[owner as usize] = new;
            },
        );
        ctx.cpu(work.migrated * self.costs.migrate_page_ns);
        (page, result)
    }

    /// wakeup_kcompactd + kcompactd_do_work, when an order is pending and
    /// kcompactd_node_suitable (compaction_suitable and the order not yet allocatable at
    /// min). Simplified: kcompactd runs at once, to completion, and its CPU time is not
    /// charged (it is a thread of its own; the processes' CPUs are not taken).
    pub(crate) fn wakeup_kcompactd(&mut self) {
        let Some(ph) = &mut self.phys else { return };
        let order = std::mem::take(&mut ph.kcompactd_max_order);
        if order == 0 {
            return;
        }
        let nr_free = self.nr_free;
        ph.sync(nr_free);
        if ph.zone.watermark_ok(order, ph.zone.wmark.min, false)
            || !compaction::compaction_suitable(&ph.zone, &mut ph.compact, order)
        {
            return;
        }
        let Phys {
            zone,
            compact,
            ev,
            pfn_of,
            ..
        } = &mut **ph;
        compaction::kcompactd_do_work(zone, compact, ev, order, &mut |owner, _, new| {
            pfn_of[owner as usize] = new;
        });
    }

    /// The first kcompactd timeout (HPAGE_FRAG_CHECK_INTERVAL_MSEC after the start) when
    /// proactive compaction can run: a zone exists and vm.compaction_proactiveness is not 0.
    pub(crate) fn kcompactd_first_timeout(&self) -> Option<crate::sim::Time> {
        (self.phys.is_some() && self.knobs.vm.compaction_proactiveness > 0)
            .then_some(compaction::HPAGE_FRAG_CHECK_INTERVAL_MSEC * crate::sim::NSEC_PER_MSEC)
    }

    /// kcompactd's timeout (6.12 kcompactd: wait_event_freezable_timeout expired with no work
    /// requested): proactive compaction if the node's fragmentation score calls for it
    /// (compaction::kcompactd_proactive), and the next timeout: HPAGE_FRAG_CHECK_INTERVAL_MSEC,
    /// 1 << COMPACT_MAX_DEFER_SHIFT times that after a run that did not lower the score.
    /// Simplified: a wakeup for work (wakeup_kcompactd, run at once here) does not restart
    /// the timeout; kcompactd's CPU time is not charged (a thread of its own, as there).
    pub(crate) fn kcompactd_timer(&mut self, now: crate::sim::Time) -> Option<crate::sim::Time> {
        let proactiveness = self.knobs.vm.compaction_proactiveness;
        let kswapd_running = self.kswapd.running;
        let nr_free = self.nr_free;
        let ph = self.phys.as_deref_mut()?;
        ph.sync(nr_free);
        let Phys {
            zone,
            compact,
            ev,
            pfn_of,
            ..
        } = ph;
        let ran = compaction::kcompactd_proactive(
            zone,
            compact,
            ev,
            proactiveness,
            kswapd_running,
            &mut |owner, _, new| {
                pfn_of[owner as usize] = new;
            },
        );
        let interval = compaction::HPAGE_FRAG_CHECK_INTERVAL_MSEC * crate::sim::NSEC_PER_MSEC;
        let wait = if ran == Some(false) {
            interval << compaction::COMPACT_MAX_DEFER_SHIFT
        } else {
            interval
        };
        Some(crate::sim::later(now, wait))
    }

    /// /proc/buddyinfo, /proc/vmstat's compaction and THP counters, when the zone exists.
    pub(crate) fn export_phys(&self, out: &mut Vec<(String, u64)>) {
        let Some(ph) = &self.phys else { return };
        ph.ev.export("vmstat.", out);
        if self.trace.as_ref().is_some_and(|t| t.compaction) {
            ph.compact.trace.export(&crate::page_alloc::ZONE_NAMES, out);
        }
        ph.thp.export("vmstat.", out);
        if let Some(k) = &ph.kev {
            k.export_tagged("vmstat", "vmstat.", out);
            k.export_tagged("slub", "slub.", out);
        }
        // The zone as the count has it now (pool growth since the last sync is not yet in the
        // kernel pfns: it shows as free order-0 pages at most).
        for (o, n) in ph.zone.buddyinfo().iter().enumerate() {
            out.push((format!("buddyinfo.Normal.{o}"), *n));
        }
    }

    /// Bring the zone to the count (before a snapshot or a check).
    pub(crate) fn phys_sync(&mut self) {
        let nr_free = self.nr_free;
        if let Some(ph) = &mut self.phys {
            ph.sync(nr_free);
        }
    }
}
