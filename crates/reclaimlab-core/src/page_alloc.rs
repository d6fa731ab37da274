//! Physical memory: one zone, its buddy allocator and its pageblocks (mm/page_alloc.c as of
//! 6.12.117 / 6.18, read in Debian's linux-source-6.12, which carries 6.18's split of the
//! fallback into __rmqueue_claim and __rmqueue_steal).
//!
//! Modelled: free areas of orders 0..=MAX_PAGE_ORDER (10) with one free list per migratetype
//! (UNMOVABLE, MOVABLE, RECLAIMABLE), expand (splitting a larger block, halves back on the
//! lists), __free_one_page (merging with the buddy while it is free and of the same order),
//! pageblocks of order 9 with a migratetype each (all MOVABLE at boot, as memmap_init sets
//! them), __rmqueue: __rmqueue_smallest, then __rmqueue_claim (largest fallback block first,
//! find_suitable_fallback's table and can_steal_fallback, try_to_steal_block's whole-block
//! claim when at least half the block is free or alike), then __rmqueue_steal (smallest
//! fallback block, the block keeps its type); __zone_watermark_ok with its per-order check;
//! /proc/buddyinfo and fragmentation_index (the extfrag index compaction_suitable reads).
//!
//! Simplified: one zone (ZONE_NORMAL) spanning the whole machine: no ZONE_DMA32, no
//! lowmem_reserve, no ALLOC_NOFRAGMENT (it only matters with a lower zone to fall back to);
//! no per-CPU page lists (their batching moves pages between the same lists, not between
//! types); no MIGRATE_HIGHATOMIC, MIGRATE_CMA or MIGRATE_ISOLATE; no watermark boosting
//! (boost_watermark); a freed page always goes to the head of its list (no buddy_merge_likely
//! tail placement). The state lives in per-pfn arrays (13 bytes a page), owned here; the
//! pages' owners are opaque u32 ids, so this file knows nothing of Mm.
//!
//! Free page reporting (mm/page_reporting.c, 6.12.117 / 6.18; docs/calibration.md "3d"), when
//! the machine declares it (`machine.page_reporting_order`): a VM's guest hands free blocks of
//! page_reporting_order or more to the hypervisor (virtio-balloon), which drops their backing,
//! so the guest's first touch of such a frame faults in the host. Tracked per pageblock: a
//! pageblock is `reported` from the start while it lies in a free block of that order (a
//! machine's long-free memory is reported: the host's steady state), and backed again once any
//! allocation takes frames from it. Simplified: no reporting pass during a run (the kernel's
//! page_reporting_process runs 2 s (PAGE_REPORTING_DELAY) after a free of such a block and
//! reports a part of each free list per pass; measured here: 52% of a freed 256 MiB of THPs
//! after 2 s, all after 10 s), so memory the scenario frees stays backed; the per-pass budget,
//! the low-watermark check and the tail placement of reported blocks (page_reporting_drain →
//! __putback_isolated_page, FPI_TO_TAIL) are not modelled. Only a huge page allocation pays
//! for it ([`Zone::last_reported`], mm/phys.rs): order-0 allocations take the smallest free
//! blocks first (__rmqueue_smallest), and on the measured host those are low-order blocks
//! below page_reporting_order, never reported, which this one pristine zone does not hold.

/// enum zone_type's names on x86-64 (the kernel's zone names, /proc/zoneinfo's).
pub const ZONE_NAMES: [&str; 4] = ["DMA", "DMA32", "Normal", "Movable"];
/// MAX_PAGE_ORDER (x86-64 default).
pub const MAX_PAGE_ORDER: u8 = 10;
/// NR_PAGE_ORDERS.
pub const NR_PAGE_ORDERS: usize = MAX_PAGE_ORDER as usize + 1;
/// pageblock_order on x86-64 with THP: HPAGE_PMD_ORDER.
pub const PAGEBLOCK_ORDER: u8 = 9;
pub const PAGEBLOCK_NR_PAGES: u32 = 1 << PAGEBLOCK_ORDER;
/// PAGE_ALLOC_COSTLY_ORDER.
pub const PAGE_ALLOC_COSTLY_ORDER: u8 = 3;
/// An owner id meaning "none" (free pages, tails, pages without a migratable owner).
pub const NO_OWNER: u32 = u32::MAX;
const NONE: u32 = u32::MAX;

/// enum migratetype, the three page-cache-types (MIGRATE_PCPTYPES).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum MigrateType {
    Unmovable = 0,
    Movable = 1,
    Reclaimable = 2,
}

/// MIGRATE_PCPTYPES.
pub const MIGRATE_PCPTYPES: usize = 3;

impl MigrateType {
    pub const ALL: [MigrateType; MIGRATE_PCPTYPES] = [
        MigrateType::Unmovable,
        MigrateType::Movable,
        MigrateType::Reclaimable,
    ];

    fn from_bits(b: u8) -> MigrateType {
        MigrateType::ALL[b as usize]
    }

    /// /proc/pagetypeinfo's name.
    pub fn name(self) -> &'static str {
        match self {
            MigrateType::Unmovable => "Unmovable",
            MigrateType::Movable => "Movable",
            MigrateType::Reclaimable => "Reclaimable",
        }
    }
}

/// fallbacks[]: which free lists an allocation of a type may take from, in order.
const FALLBACKS: [[MigrateType; 2]; MIGRATE_PCPTYPES] = [
    [MigrateType::Reclaimable, MigrateType::Movable],
    [MigrateType::Reclaimable, MigrateType::Unmovable],
    [MigrateType::Unmovable, MigrateType::Movable],
];

/// can_steal_fallback: may an allocation of `order` and `start` claim a whole fallback block.
fn can_steal_fallback(order: u8, start: MigrateType) -> bool {
    order >= PAGEBLOCK_ORDER / 2 || start != MigrateType::Movable
}

// pstate: one byte per pfn.
/// A pfn inside a block whose head is another pfn (or nothing known).
const TAIL: u8 = 0;
/// Head of a free block: FREE | order.
const FREE: u8 = 0x20;
/// Head of an allocated block: ALLOC | migratetype << 4 | order.
const ALLOC: u8 = 0x80;

/// What a pfn holds, as the compaction scanners see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PfnState {
    /// PageBuddy: head of a free block of this order.
    Free { order: u8 },
    /// Head of an allocated block.
    Alloc {
        order: u8,
        mt: MigrateType,
        owner: u32,
    },
    /// Inside a block that starts at a lower pfn.
    Tail,
}

/// The zone watermarks (min, low, high) in pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Watermarks {
    pub min: u64,
    pub low: u64,
    pub high: u64,
}

/// Which watermark an allocation checks (ALLOC_WMARK_MIN / LOW / HIGH).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wmark {
    Min,
    Low,
    High,
}

impl Watermarks {
    pub fn get(&self, w: Wmark) -> u64 {
        match w {
            Wmark::Min => self.min,
            Wmark::Low => self.low,
            Wmark::High => self.high,
        }
    }
}

/// One zone of physical memory: pfns 0..spanned.
pub struct Zone {
    spanned: u32,
    pstate: Vec<u8>,
    owner: Vec<u32>,
    prev: Vec<u32>,
    next: Vec<u32>,
    /// free_area[order].free_list[mt]: head pfn of each list.
    head: [[u32; MIGRATE_PCPTYPES]; NR_PAGE_ORDERS],
    /// Blocks on each list (free_area[order].nr_free split by type).
    nr_free: [[u64; MIGRATE_PCPTYPES]; NR_PAGE_ORDERS],
    /// The migratetype of each pageblock.
    block_mt: Vec<u8>,
    /// NR_FREE_PAGES.
    free_pages: u64,
    pub wmark: Watermarks,
    /// Free page reporting: per pageblock, whether its frames are reported (the hypervisor
    /// dropped their backing; PageReported on the free block holding it). Empty when the
    /// machine reports nothing.
    reported: Vec<bool>,
    /// Pages of the last allocation (`rmqueue`) that lay in reported pageblocks, for a caller
    /// that charges their first touch (the THP fault).
    pub last_reported: u64,
}

impl Zone {
    /// A zone of `pages` pfns, all free, carved into the largest aligned blocks
    /// (memblock_free_all → __free_pages_core), every pageblock MOVABLE.
    pub fn new(pages: u32, wmark: Watermarks) -> Zone {
        let n = pages as usize;
        let mut z = Zone {
            spanned: pages,
            pstate: vec![TAIL; n],
            owner: vec![NO_OWNER; n],
            prev: vec![NONE; n],
            next: vec![NONE; n],
            head: [[NONE; MIGRATE_PCPTYPES]; NR_PAGE_ORDERS],
            nr_free: [[0; MIGRATE_PCPTYPES]; NR_PAGE_ORDERS],
            block_mt: vec![MigrateType::Movable as u8; n.div_ceil(PAGEBLOCK_NR_PAGES as usize)],
            free_pages: 0,
            wmark,
            reported: Vec::new(),
            last_reported: 0,
        };
        let mut pfn = 0u32;
        while pfn < pages {
            let mut order = MAX_PAGE_ORDER;
            while pfn & ((1 << order) - 1) != 0 || pfn + (1 << order) > pages {
                order -= 1;
            }
            z.add_to_free_list(pfn, order, MigrateType::Movable);
            z.free_pages += 1 << order;
            pfn += 1 << order;
        }
        z
    }

    pub fn spanned(&self) -> u32 {
        self.spanned
    }

    /// Free page reporting of blocks of `order` or more (page_reporting_register, with the
    /// hypervisor's steady state): every pageblock that lies in a free block of that order
    /// now is reported. `order` is a pageblock order or more (the state is per pageblock).
    pub fn enable_page_reporting(&mut self, order: u8) {
        assert!(
            (PAGEBLOCK_ORDER..=MAX_PAGE_ORDER).contains(&order),
            "page_reporting_order {order} outside {PAGEBLOCK_ORDER}..={MAX_PAGE_ORDER}"
        );
        self.reported = vec![false; self.block_mt.len()];
        let mut pfn = 0u32;
        while pfn < self.spanned {
            match self.state(pfn) {
                PfnState::Free { order: o } => {
                    if o >= order {
                        for b in 0..1u32 << (o - PAGEBLOCK_ORDER) {
                            self.reported[((pfn >> PAGEBLOCK_ORDER) + b) as usize] = true;
                        }
                    }
                    pfn += 1 << o;
                }
                PfnState::Alloc { order: o, .. } => pfn += 1 << o,
                PfnState::Tail => pfn += 1,
            }
        }
    }

    /// Pageblocks whose frames are reported (0 without free page reporting).
    pub fn reported_pageblocks(&self) -> u64 {
        self.reported.iter().filter(|&&r| r).count() as u64
    }

    /// The frames [pfn, pfn + 2^order) are taken: their pageblocks are backed from now on.
    /// Returns how many of them were in reported pageblocks (for an order below pageblock
    /// order, the whole pageblock is counted backed and nothing is returned: see the file
    /// comment).
    fn touch_reported(&mut self, pfn: u32, order: u8) -> u64 {
        if self.reported.is_empty() {
            return 0;
        }
        let first = (pfn >> PAGEBLOCK_ORDER) as usize;
        let blocks = 1usize << order.saturating_sub(PAGEBLOCK_ORDER);
        let mut n = 0;
        for r in &mut self.reported[first..first + blocks] {
            if std::mem::replace(r, false) && order >= PAGEBLOCK_ORDER {
                n += PAGEBLOCK_NR_PAGES as u64;
            }
        }
        n
    }

    /// A block that `rmqueue` handed out goes back unused to the hypervisor's side: its
    /// pageblocks are reported again (an allocation undone before its frames were touched,
    /// such as a THP whose memcg charge failed).
    pub fn restore_reported(&mut self, pfn: u32, order: u8, reported_pages: u64) {
        if reported_pages == 0 || self.reported.is_empty() {
            return;
        }
        let first = (pfn >> PAGEBLOCK_ORDER) as usize;
        let blocks = 1usize << order.saturating_sub(PAGEBLOCK_ORDER);
        for r in &mut self.reported[first..first + blocks] {
            *r = true;
        }
    }

    /// NR_FREE_PAGES.
    pub fn free_pages(&self) -> u64 {
        self.free_pages
    }

    pub fn pageblock_mt(&self, pfn: u32) -> MigrateType {
        MigrateType::from_bits(self.block_mt[(pfn >> PAGEBLOCK_ORDER) as usize])
    }

    fn set_pageblock_mt(&mut self, pfn: u32, mt: MigrateType) {
        self.block_mt[(pfn >> PAGEBLOCK_ORDER) as usize] = mt as u8;
    }

    pub fn state(&self, pfn: u32) -> PfnState {
        let s = self.pstate[pfn as usize];
        if s & ALLOC != 0 {
            PfnState::Alloc {
                order: s & 0xf,
                mt: MigrateType::from_bits((s >> 4) & 3),
                owner: self.owner[pfn as usize],
            }
        } else if s & FREE != 0 {
            PfnState::Free { order: s & 0xf }
        } else {
            PfnState::Tail
        }
    }

    /// Give an allocated block's head an owner (the id compaction hands back when it moves it).
    pub fn set_owner(&mut self, pfn: u32, owner: u32) {
        debug_assert!(self.pstate[pfn as usize] & ALLOC != 0);
        self.owner[pfn as usize] = owner;
    }

    fn add_to_free_list(&mut self, pfn: u32, order: u8, mt: MigrateType) {
        let (o, t) = (order as usize, mt as usize);
        let h = self.head[o][t];
        self.prev[pfn as usize] = NONE;
        self.next[pfn as usize] = h;
        if h != NONE {
            self.prev[h as usize] = pfn;
        }
        self.head[o][t] = pfn;
        self.nr_free[o][t] += 1;
        self.pstate[pfn as usize] = FREE | order;
    }

    fn del_from_free_list(&mut self, pfn: u32, order: u8, mt: MigrateType) {
        let (o, t) = (order as usize, mt as usize);
        let (p, n) = (self.prev[pfn as usize], self.next[pfn as usize]);
        if p != NONE {
            self.next[p as usize] = n;
        } else {
            self.head[o][t] = n;
        }
        if n != NONE {
            self.prev[n as usize] = p;
        }
        self.prev[pfn as usize] = NONE;
        self.next[pfn as usize] = NONE;
        self.nr_free[o][t] -= 1;
        self.pstate[pfn as usize] = TAIL;
    }

    /// Which list a free block of this head is on: its pageblock's type when the block lies
    /// within one pageblock, else the type it was put on with (a block of pageblock order or
    /// more spans whole pageblocks that all carry that type).
    fn free_list_mt(&self, pfn: u32) -> MigrateType {
        self.pageblock_mt(pfn)
    }

    /// expand: split a block of order `high` at `pfn` down to `low`, putting the upper halves
    /// on the `mt` lists. Returns the pages put back.
    fn expand(&mut self, pfn: u32, low: u8, high: u8, mt: MigrateType) -> u64 {
        let mut size = 1u32 << high;
        let mut h = high;
        let mut added = 0;
        while h > low {
            h -= 1;
            size >>= 1;
            self.add_to_free_list(pfn + size, h, mt);
            added += size as u64;
        }
        added
    }

    /// Mark the head of an allocated block.
    fn mark_alloc(&mut self, pfn: u32, order: u8, mt: MigrateType) {
        self.pstate[pfn as usize] = ALLOC | (mt as u8) << 4 | order;
        self.owner[pfn as usize] = NO_OWNER;
    }

    /// __rmqueue_smallest: the smallest block of this type that fits.
    fn rmqueue_smallest(&mut self, order: u8, mt: MigrateType) -> Option<u32> {
        for cur in order..=MAX_PAGE_ORDER {
            let pfn = self.head[cur as usize][mt as usize];
            if pfn == NONE {
                continue;
            }
            self.del_from_free_list(pfn, cur, mt);
            self.expand(pfn, order, cur, mt);
            return Some(pfn);
        }
        None
    }

    /// find_suitable_fallback (only_stealable = false): the first fallback type with a free
    /// block of this order, and whether the allocation may claim the whole block.
    pub fn find_suitable_fallback(
        &self,
        order: u8,
        mt: MigrateType,
    ) -> Option<(MigrateType, bool)> {
        let area = &self.nr_free[order as usize];
        if area.iter().all(|&n| n == 0) {
            return None;
        }
        FALLBACKS[mt as usize]
            .iter()
            .find(|&&f| area[f as usize] > 0)
            .map(|&f| (f, can_steal_fallback(order, mt)))
    }

    /// try_to_steal_block: claim the pageblock of the fallback block at `pfn` for `start`
    /// when the block is of pageblock order or more, or when at least half its pages are free
    /// or alike (prep_move_freepages_block's counts); then allocate from `start`'s lists.
    fn try_to_steal_block(
        &mut self,
        pfn: u32,
        cur: u8,
        order: u8,
        start: MigrateType,
        fallback: MigrateType,
    ) -> Option<u32> {
        if cur >= PAGEBLOCK_ORDER {
            self.del_from_free_list(pfn, cur, fallback);
            // change_pageblock_range
            for b in 0..(1u32 << (cur - PAGEBLOCK_ORDER)) {
                self.set_pageblock_mt(pfn + b * PAGEBLOCK_NR_PAGES, start);
            }
            self.expand(pfn, order, cur, start);
            return Some(pfn);
        }
        let block_type = self.pageblock_mt(pfn);
        let start_pfn = pfn & !(PAGEBLOCK_NR_PAGES - 1);
        let end = (start_pfn + PAGEBLOCK_NR_PAGES).min(self.spanned);
        if end - start_pfn < PAGEBLOCK_NR_PAGES {
            // prep_move_freepages_block: a block cut by the zone end cannot be moved whole.
            return None;
        }
        let (mut free, mut movable) = (0u32, 0u32);
        let mut p = start_pfn;
        while p < end {
            match self.state(p) {
                PfnState::Free { order } => {
                    free += 1 << order;
                    p += 1 << order;
                }
                PfnState::Alloc { order, mt, .. } => {
                    if mt == MigrateType::Movable {
                        movable += 1 << order;
                    }
                    p += 1 << order;
                }
                PfnState::Tail => p += 1,
            }
        }
        let alike = if start == MigrateType::Movable {
            movable
        } else if block_type == MigrateType::Movable {
            PAGEBLOCK_NR_PAGES - (free + movable)
        } else {
            0
        };
        if free + alike >= PAGEBLOCK_NR_PAGES / 2 {
            self.move_freepages_block(start_pfn, block_type, start);
            return self.rmqueue_smallest(order, start);
        }
        None
    }

    /// __move_freepages_block: the block's free pages go to `new`'s lists, the block is `new`.
    fn move_freepages_block(&mut self, start_pfn: u32, old: MigrateType, new: MigrateType) -> u64 {
        let mut moved = 0;
        let mut p = start_pfn;
        while p < start_pfn + PAGEBLOCK_NR_PAGES {
            match self.state(p) {
                PfnState::Free { order } => {
                    self.del_from_free_list(p, order, old);
                    self.add_to_free_list(p, order, new);
                    moved += 1u64 << order;
                    p += 1 << order;
                }
                PfnState::Alloc { order, .. } => p += 1 << order,
                PfnState::Tail => p += 1,
            }
        }
        self.set_pageblock_mt(start_pfn, new);
        moved
    }

    /// __rmqueue_claim: from the largest order down, a fallback block whose pageblock the
    /// allocation may claim.
    fn rmqueue_claim(&mut self, order: u8, start: MigrateType) -> Option<u32> {
        for cur in (order..=MAX_PAGE_ORDER).rev() {
            let Some((fallback, can_steal)) = self.find_suitable_fallback(cur, start) else {
                continue;
            };
            if !can_steal {
                break;
            }
            let pfn = self.head[cur as usize][fallback as usize];
            if let Some(p) = self.try_to_steal_block(pfn, cur, order, start, fallback) {
                return Some(p);
            }
        }
        None
    }

    /// __rmqueue_steal: the smallest fallback block, split; the pageblock keeps its type.
    fn rmqueue_steal(&mut self, order: u8, start: MigrateType) -> Option<u32> {
        for cur in order..=MAX_PAGE_ORDER {
            let Some((fallback, _)) = self.find_suitable_fallback(cur, start) else {
                continue;
            };
            let pfn = self.head[cur as usize][fallback as usize];
            self.del_from_free_list(pfn, cur, fallback);
            self.expand(pfn, order, cur, fallback);
            return Some(pfn);
        }
        None
    }

    /// __rmqueue, then the block is allocated (no watermark check: the caller made it).
    pub fn rmqueue(&mut self, order: u8, mt: MigrateType) -> Option<u32> {
        let pfn = self
            .rmqueue_smallest(order, mt)
            .or_else(|| self.rmqueue_claim(order, mt))
            .or_else(|| self.rmqueue_steal(order, mt))?;
        self.mark_alloc(pfn, order, mt);
        self.free_pages -= 1 << order;
        self.last_reported = self.touch_reported(pfn, order);
        Some(pfn)
    }

    /// __free_pages → __free_one_page: merge with the buddy while it is a free block of the
    /// same order (in 6.12 also of a compatible pageblock type: ours always are, having no
    /// isolation), then onto the list of the merged block's pageblock type.
    pub fn free(&mut self, pfn: u32) {
        let s = self.pstate[pfn as usize];
        assert!(
            s & ALLOC != 0,
            "freeing pfn {pfn} that is not an allocated head"
        );
        let mut order = s & 0xf;
        self.free_pages += 1 << order;
        self.pstate[pfn as usize] = TAIL;
        self.owner[pfn as usize] = NO_OWNER;
        let mut pfn = pfn;
        while order < MAX_PAGE_ORDER {
            let buddy = pfn ^ (1 << order);
            if buddy >= self.spanned || self.pstate[buddy as usize] != FREE | order {
                break;
            }
            let bmt = self.free_list_mt(buddy);
            self.del_from_free_list(buddy, order, bmt);
            pfn &= buddy;
            order += 1;
        }
        let mt = self.free_list_mt(pfn);
        self.add_to_free_list(pfn, order, mt);
    }

    /// split_page of an allocated block: each pfn becomes an allocated order-0 page of the
    /// block's type, page k owned by `owner(k)`.
    pub fn split_alloc(&mut self, head: u32, owner: impl Fn(u32) -> u32) {
        let PfnState::Alloc { order, mt, .. } = self.state(head) else {
            panic!("pfn {head} is not an allocated head")
        };
        for k in 0..1u32 << order {
            self.mark_alloc(head + k, 0, mt);
            self.owner[(head + k) as usize] = owner(k);
        }
    }

    /// Take one free block off its list without the allocator (__isolate_free_page for the
    /// compaction free scanner): it becomes allocated MOVABLE pages of order 0 each.
    pub(crate) fn isolate_free_block(&mut self, pfn: u32) -> u8 {
        let PfnState::Free { order } = self.state(pfn) else {
            panic!("pfn {pfn} is not free")
        };
        let mt = self.free_list_mt(pfn);
        self.del_from_free_list(pfn, order, mt);
        self.free_pages -= 1 << order;
        // The migration copies into these frames (their first touch is not charged).
        self.touch_reported(pfn, order);
        for p in pfn..pfn + (1 << order) {
            self.mark_alloc(p, 0, MigrateType::Movable);
        }
        order
    }

    /// __zone_watermark_ok: free pages (less those an order-`order` block would leave
    /// unusable) above `mark`, and for order > 0 a free block of at least that order on some
    /// list. `harder` (ALLOC_HARDER/ALLOC_HIGH: atomic, or inside reclaim) lowers min by half.
    pub fn watermark_ok(&self, order: u8, mark: u64, harder: bool) -> bool {
        let free = self.free_pages as i64 - ((1i64 << order) - 1);
        let min = if harder { mark - mark / 2 } else { mark } as i64;
        if free <= min {
            return false;
        }
        if order == 0 {
            return true;
        }
        (order..=MAX_PAGE_ORDER).any(|o| self.nr_free[o as usize].iter().any(|&n| n > 0))
    }

    /// /proc/buddyinfo: free blocks of each order (all types).
    pub fn buddyinfo(&self) -> [u64; NR_PAGE_ORDERS] {
        let mut out = [0; NR_PAGE_ORDERS];
        for (o, area) in self.nr_free.iter().enumerate() {
            out[o] = area.iter().sum();
        }
        out
    }

    /// Free blocks of one order and type (/proc/pagetypeinfo).
    pub fn nr_free(&self, order: u8, mt: MigrateType) -> u64 {
        self.nr_free[order as usize][mt as usize]
    }

    /// Pageblocks of each type (/proc/pagetypeinfo's "Number of blocks type").
    pub fn pageblocks(&self) -> [u64; MIGRATE_PCPTYPES] {
        let mut out = [0; MIGRATE_PCPTYPES];
        for &b in &self.block_mt {
            out[b as usize] += 1;
        }
        out
    }

    /// fragmentation_index (__fragmentation_index × 1000): 0 when allocations of `order`
    /// would fail for lack of memory, towards 1000 when for fragmentation; -1000 when a
    /// suitable block exists.
    pub fn fragmentation_index(&self, order: u8) -> i64 {
        let requested = 1u64 << order;
        let (mut total, mut suitable, mut free) = (0u64, 0u64, 0u64);
        for o in 0..NR_PAGE_ORDERS {
            let blocks: u64 = self.nr_free[o].iter().sum();
            total += blocks;
            free += blocks << o;
            if o >= order as usize {
                suitable += blocks << (o - order as usize);
            }
        }
        if total == 0 {
            return 0;
        }
        if suitable > 0 {
            return -1000;
        }
        1000 - ((1000 + free * 1000 / requested) / total) as i64
    }

    /// extfrag_for_order (mm/vmstat.c): the percentage of free pages that are not in blocks of
    /// at least `order` (0 without free pages); proactive compaction's fragmentation score.
    pub fn extfrag_for_order(&self, order: u8) -> u64 {
        let (mut suitable, mut free) = (0u64, 0u64);
        for o in 0..NR_PAGE_ORDERS {
            let blocks: u64 = self.nr_free[o].iter().sum();
            free += blocks << o;
            if o >= order as usize {
                suitable += blocks << (o - order as usize);
            }
        }
        if free == 0 {
            return 0;
        }
        (free - (suitable << order)) * 100 / free
    }

    /// The consistency of every list, count and pfn state (tests; the debug conservation
    /// check once the zone backs Mm): free blocks are aligned, on the list of their
    /// pageblock's type, never have a free buddy of the same order, and sum to free_pages.
    pub fn check(&self) -> Result<(), String> {
        let mut free = 0u64;
        let mut counted = [[0u64; MIGRATE_PCPTYPES]; NR_PAGE_ORDERS];
        let mut p = 0u32;
        while p < self.spanned {
            match self.state(p) {
                PfnState::Free { order } => {
                    if p & ((1 << order) - 1) != 0 {
                        return Err(format!("free block at {p} of order {order} is not aligned"));
                    }
                    let buddy = p ^ (1 << order);
                    if order < MAX_PAGE_ORDER
                        && buddy < self.spanned
                        && self.pstate[buddy as usize] == FREE | order
                    {
                        return Err(format!(
                            "free blocks {p} and {buddy} of order {order} were not merged"
                        ));
                    }
                    counted[order as usize][self.free_list_mt(p) as usize] += 1;
                    free += 1 << order;
                    p += 1 << order;
                }
                PfnState::Alloc { order, .. } => p += 1 << order,
                PfnState::Tail => return Err(format!("pfn {p} belongs to no block")),
            }
        }
        if free != self.free_pages {
            return Err(format!(
                "free blocks hold {free} pages, NR_FREE_PAGES is {}",
                self.free_pages
            ));
        }
        for (o, (heads, counts)) in self.head.iter().zip(&counted).enumerate() {
            for (t, (&h, &c)) in heads.iter().zip(counts).enumerate() {
                let mut n = 0;
                let mut q = h;
                while q != NONE {
                    n += 1;
                    q = self.next[q as usize];
                }
                if n != c || n != self.nr_free[o][t] {
                    return Err(format!(
                        "order {o} type {t}: list holds {n}, blocks {c}, count {}",
                        self.nr_free[o][t]
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

    fn zone(pages: u32) -> Zone {
        Zone::new(
            pages,
            Watermarks {
                min: 16,
                low: 20,
                high: 24,
            },
        )
    }

    #[test]
    fn boot_carves_the_largest_aligned_blocks() {
        // 3 × 1024 + 512 + 3: orders 10, 10, 10, 9, 1, 0.
        let z = zone(3 * 1024 + 512 + 3);
        let b = z.buddyinfo();
        assert_eq!(b[10], 3);
        assert_eq!(b[9], 1);
        assert_eq!(b[1], 1);
        assert_eq!(b[0], 1);
        assert_eq!(z.free_pages(), 3 * 1024 + 512 + 3);
        z.check().unwrap();
    }

    #[test]
    fn split_then_free_merges_back() {
        let mut z = zone(1024);
        let a = z.rmqueue(0, MigrateType::Movable).unwrap();
        assert_eq!(a, 0);
        // One order-0 page splits the order-10 block into one block of each order 0..=9.
        assert_eq!(z.buddyinfo(), [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0]);
        let b = z.rmqueue(0, MigrateType::Movable).unwrap();
        assert_eq!(b, 1);
        z.check().unwrap();
        z.free(a);
        assert_eq!(z.buddyinfo()[0], 1);
        z.free(b);
        assert_eq!(z.buddyinfo(), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(z.free_pages(), 1024);
        z.check().unwrap();
    }

    #[test]
    fn pages_are_conserved_over_a_random_sequence() {
        let mut z = zone(4096);
        let mut held: Vec<u32> = Vec::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if !x.is_multiple_of(3) || held.is_empty() {
                let order = [0u8, 0, 0, 0, 1, 2, 3, 9][(x >> 8) as usize % 8];
                let mt = MigrateType::ALL[(x >> 16) as usize % 3];
                if let Some(p) = z.rmqueue(order, mt) {
                    held.push(p);
                }
            } else {
                let i = (x >> 24) as usize % held.len();
                z.free(held.swap_remove(i));
            }
            if step % 997 == 0 {
                z.check().unwrap();
            }
        }
        let used: u64 = held
            .iter()
            .map(|&p| match z.state(p) {
                PfnState::Alloc { order, .. } => 1u64 << order,
                s => panic!("{s:?}"),
            })
            .sum();
        assert_eq!(used + z.free_pages(), 4096);
        for p in held {
            z.free(p);
        }
        z.check().unwrap();
        assert_eq!(z.buddyinfo()[10], 4);
    }

    #[test]
    fn reported_pageblocks_are_backed_once_taken() {
        // 4096 pages: 4 order-10 blocks, 8 pageblocks, all reported at the start.
        let mut z = zone(4096);
        z.enable_page_reporting(9);
        assert_eq!(z.reported_pageblocks(), 8);
        let thp = z.rmqueue(9, MigrateType::Movable).unwrap();
        assert_eq!(z.last_reported, 512);
        // The order-0 page splits the other half of that order-10 block: its pageblock is
        // counted backed, and an order-0 allocation reports nothing.
        z.rmqueue(0, MigrateType::Movable).unwrap();
        assert_eq!(z.last_reported, 0);
        assert_eq!(z.reported_pageblocks(), 6);
        // Freed and taken again within the run: no reporting pass, still backed.
        z.free(thp);
        let again = z.rmqueue(9, MigrateType::Movable).unwrap();
        assert_eq!((again, z.last_reported), (thp, 0));
        // An allocation undone before its first touch leaves it reported.
        let next = z.rmqueue(9, MigrateType::Movable).unwrap();
        assert_eq!(z.last_reported, 512);
        z.restore_reported(next, 9, 512);
        z.free(next);
        assert_eq!(z.reported_pageblocks(), 6);
        z.check().unwrap();
    }

    #[test]
    fn unmovable_claims_a_movable_pageblock() {
        let mut z = zone(2048);
        // An unmovable order-0 request finds only MOVABLE blocks: can_steal_fallback, and the
        // order-10 block is ≥ pageblock order, so both its pageblocks become UNMOVABLE.
        z.rmqueue(0, MigrateType::Unmovable).unwrap();
        assert_eq!(z.pageblocks(), [2, 2, 0]);
        z.check().unwrap();
    }

    #[test]
    fn movable_steals_without_claiming() {
        let mut z = zone(1024);
        // Make both pageblocks UNMOVABLE, then fill all but a few scattered pages.
        let pages: Vec<u32> = (0..1024)
            .map(|_| z.rmqueue(0, MigrateType::Unmovable).unwrap())
            .collect();
        assert_eq!(z.pageblocks(), [2, 0, 0]);
        for &p in pages.iter().step_by(64) {
            z.free(p);
        }
        // A movable order-0 request: no MOVABLE list, can_steal_fallback is false for
        // movable order 0, so __rmqueue_steal takes a page and the block stays UNMOVABLE.
        let p = z.rmqueue(0, MigrateType::Movable).unwrap();
        assert!(matches!(
            z.state(p),
            PfnState::Alloc {
                mt: MigrateType::Movable,
                ..
            }
        ));
        assert_eq!(z.pageblocks(), [2, 0, 0]);
        z.check().unwrap();
    }

    #[test]
    fn watermark_ok_needs_a_block_of_the_order() {
        let mut z = zone(1024);
        let pages: Vec<u32> = (0..1024)
            .map(|_| z.rmqueue(0, MigrateType::Movable).unwrap())
            .collect();
        // Free every other page: 512 free pages, none of order > 0.
        for &p in pages.iter().step_by(2) {
            z.free(p);
        }
        assert_eq!(z.free_pages(), 512);
        assert!(z.watermark_ok(0, 100, false));
        assert!(!z.watermark_ok(1, 100, false));
        assert!(!z.watermark_ok(0, 512, false));
        assert!(z.watermark_ok(0, 600, true));
        // All memory free, but in order-0 blocks: the index says fragmentation, not lack.
        assert!(z.fragmentation_index(9) > 900);
        assert_eq!(z.fragmentation_index(0), -1000);
    }
}
