//! zsmalloc as Linux 6.18 sizes, groups, allocates, frees and compacts it (mm/zsmalloc.c).
//!
//! Only the bookkeeping that moves counters is modelled: which size class an object lands in,
//! which zspage and slot it takes, when zspages are created and freed, and which objects
//! compaction moves where. Object bytes, page straddling, locking, page migration and the
//! deferred-free worker are not modelled (see docs/model/zsmalloc.md).
//!
//! Memory layout: the simulator may hold tens of millions of objects, so everything lives in
//! index arenas. Per live object there are 10 bytes: the handle table (zspage index u32 + slot
//! u16, one 6-byte entry so that a handle costs one cache miss, not two) and the slot word
//! (u32) in the zspage's slot region. Everything else is per zspage or
//! per class.

use super::api::{Handle, Zpool, ZpoolError, ZpoolInfo, ZsClassRow};

const PAGE_SIZE: u32 = 4096;
/// Every object carries its handle inline, so zs_malloc sizes the class for `size + 8`.
const ZS_HANDLE_SIZE: u32 = 8;
const ZS_MIN_ALLOC_SIZE: u32 = 32;
const ZS_MAX_ALLOC_SIZE: u32 = PAGE_SIZE;
const ZS_SIZE_CLASS_DELTA: u32 = 16;
const ZS_SIZE_CLASSES: usize = 255;

/// Fullness groups 0 (empty), 1..=10 (in-use ratio buckets of 10 %), 11 (full).
const NR_FULLNESS_GROUPS: usize = 12;
const GROUP_EMPTY: u8 = 0;
const GROUP_FULL: u8 = 11;
/// Groups allocation and compaction may pick from: partially used zspages only.
const PARTIAL_GROUPS_MASK: u16 = 0b0111_1111_1110;

/// Kconfig's range for CONFIG_ZSMALLOC_CHAIN_SIZE (≤6.2 kernels were fixed at 4). Below 2 no
/// class would be multi-page and huge_class_size would be 0; 16 keeps slot numbers
/// (≤ 16·4096/32 = 2048) far below the u16 sentinels used here.
const MIN_CHAIN_SIZE: u32 = 4;
const MAX_CHAIN_SIZE: u32 = 16;

const NIL: u32 = u32::MAX;
/// A slot word with this bit set is free and holds the next free slot (low 16 bits); without
/// it, the word is the owning handle, the way the kernel keeps the handle in the object header
/// so that compaction can find the handle of every object it moves.
const SLOT_FREE_TAG: u32 = 1 << 31;
const SLOT_NONE: u16 = u16::MAX;
/// Slot of a handle that is not live (freed, or the reserved handle 0).
const HANDLE_DEAD: u16 = u16::MAX;

/// A handle table entry: the zspage (u32, as two halves so that the entry is 6 bytes with
/// 2-byte alignment, not 8) and the slot of the handle's object. For a freed handle the zspage
/// field holds the next free handle and the slot is HANDLE_DEAD.
#[derive(Clone, Copy)]
struct HandleLoc([u16; 3]);

impl HandleLoc {
    fn new(zspage: u32, slot: u16) -> HandleLoc {
        HandleLoc([zspage as u16, (zspage >> 16) as u16, slot])
    }

    fn zspage(self) -> u32 {
        self.0[0] as u32 | (self.0[1] as u32) << 16
    }

    fn slot(self) -> u16 {
        self.0[2]
    }
}
/// `fullness` value of a zspage arena entry that is on the arena's free list.
const ZSPAGE_DEAD: u8 = u8::MAX;

/// How pages-per-zspage is chosen for a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainPolicy {
    /// 6.3+ `calculate_zspage_chain_size`: 1 page for power-of-two sizes, else the chain
    /// length with the least tail waste (first minimum wins).
    MinWaste,
    /// ≤6.2 `get_pages_per_zspage`: the chain length with the highest integer "used percent"
    /// (first maximum wins). With 4 pages this differs from `MinWaste` only for class 208.
    UsedPercent,
}

/// The class an allocation of a given caller size lands in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassInfo {
    pub class_size: u32,
    pub pages_per_zspage: u32,
    pub objs_per_zspage: u32,
    /// One object per one-page zspage (the kernel's ZsHugePage).
    pub huge: bool,
}

/// Per-class occupancy, for docs and debugging (one row per distinct class, ascending size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassStat {
    pub class_size: u32,
    pub pages_per_zspage: u32,
    pub objs_per_zspage: u32,
    pub zspages: u64,
    pub objs_used: u64,
    pub objs_allocated: u64,
}

#[derive(Clone, Debug)]
struct SizeClass {
    size: u32,
    pages: u32,
    objs: u32,
    /// List heads per fullness group; zspages are linked through `Zspage::{prev,next}`.
    heads: [u32; NR_FULLNESS_GROUPS],
    /// Bit g set iff group g's list is non-empty, so the fullest partial group is one
    /// leading-zeros count away instead of a scan.
    nonempty: u16,
    objs_allocated: u64,
    objs_used: u64,
    zspages: u64,
    /// Slot words of every zspage of this class: zspage with region r owns
    /// `slots[r*objs .. (r+1)*objs]`. Regions are recycled, never returned.
    slots: Vec<u32>,
    free_regions: Vec<u32>,
}

/// 20 bytes. `bump` lets a fresh zspage hand out slots 0,1,2,… without initialising a free
/// chain: the kernel's chain is always [recently freed slots, LIFO] followed by the untouched
/// run bump..objs, so "pop the freed stack, else take bump" is the same order.
#[derive(Clone, Copy, Debug)]
struct Zspage {
    prev: u32,
    next: u32,
    region: u32,
    inuse: u16,
    freeobj: u16,
    bump: u16,
    class: u8,
    fullness: u8,
}

#[derive(Clone)]
pub struct Zsmalloc {
    chain_size: u32,
    policy: ChainPolicy,
    /// Size-class index (0..255, size 32+16·i) to distinct class id; aliased indices share.
    class_of: [u8; ZS_SIZE_CLASSES],
    /// Distinct classes, ascending size.
    classes: Vec<SizeClass>,
    huge_class_size: u32,
    zspages: Vec<Zspage>,
    free_zspage: u32,
    /// Handle table: where each handle's object currently lives. Compaction rewrites these,
    /// so handles stay valid (the kernel's handle is the same indirection).
    handles: Vec<HandleLoc>,
    /// Freed handles, threaded through the table's zspage fields.
    free_handle: u32,
    pages_allocated: u64,
    pages_compacted: u64,
    objects: u64,
}

/// CONFIG_ZSMALLOC_CHAIN_SIZE: pages per zspage at most (8, the default since 6.3; the older
/// zsmalloc had 4).
pub const CHAIN_SIZE: u32 = 8;

fn new_pool() -> Box<dyn Zpool> {
    Box::new(Zsmalloc::new(CHAIN_SIZE))
}

/// zsmalloc exists in every kernel we model; since 6.15 it is the only allocator.
pub const ZPOOL: ZpoolInfo = ZpoolInfo {
    name: "zsmalloc",
    until: None,
    doc: "size classes over multi-page zspages, compactable",
    new: new_pool,
};

impl std::fmt::Debug for Zsmalloc {
    // The arenas can hold millions of entries; a derived Debug would print all of them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zsmalloc")
            .field("chain_size", &self.chain_size)
            .field("policy", &self.policy)
            .field("distinct_classes", &self.classes.len())
            .field("huge_class_size", &self.huge_class_size)
            .field("pages_allocated", &self.pages_allocated)
            .field("pages_compacted", &self.pages_compacted)
            .field("objects", &self.objects)
            .finish()
    }
}

fn chain_pages(size: u32, chain_size: u32, policy: ChainPolicy) -> u32 {
    match policy {
        ChainPolicy::MinWaste => {
            if size.is_power_of_two() {
                return 1;
            }
            let mut best = 1;
            let mut min_waste = u32::MAX;
            for k in 1..=chain_size {
                let waste = (k * PAGE_SIZE) % size;
                if waste < min_waste {
                    min_waste = waste;
                    best = k;
                }
            }
            best
        }
        ChainPolicy::UsedPercent => {
            let mut best = 1;
            let mut max_used_pc = 0;
            for k in 1..=chain_size {
                let zspage_size = k * PAGE_SIZE;
                let used_pc = (zspage_size - zspage_size % size) * 100 / zspage_size;
                if used_pc > max_used_pc {
                    max_used_pc = used_pc;
                    best = k;
                }
            }
            best
        }
    }
}

fn fullness_group(inuse: u32, objs: u32) -> u8 {
    if inuse == 0 {
        GROUP_EMPTY
    } else if inuse == objs {
        GROUP_FULL
    } else {
        // +1 so that a zspage holding 1 of 128 objects (ratio 0) is not mistaken for empty.
        (100 * inuse / objs / 10 + 1) as u8
    }
}

fn size_class_index(size_with_handle: u32) -> usize {
    let idx = if size_with_handle <= ZS_MIN_ALLOC_SIZE {
        0
    } else {
        (size_with_handle - ZS_MIN_ALLOC_SIZE).div_ceil(ZS_SIZE_CLASS_DELTA) as usize
    };
    // Sizes 4089..=4096 become 4097..=4104 with the handle; the kernel clamps to the last class.
    idx.min(ZS_SIZE_CLASSES - 1)
}

impl Zsmalloc {
    /// A pool as a 6.18 kernel with CONFIG_ZSMALLOC_CHAIN_SIZE = `chain_size` builds it.
    pub fn new(chain_size: u32) -> Self {
        Self::with_chain_policy(chain_size, ChainPolicy::MinWaste)
    }

    /// A pool whose class table uses `policy`; `ChainPolicy::UsedPercent` with 4 pages is the
    /// ≤6.2 table (only the table: fullness groups and compaction stay 6.18's).
    pub fn with_chain_policy(chain_size: u32, policy: ChainPolicy) -> Self {
        assert!(
            (MIN_CHAIN_SIZE..=MAX_CHAIN_SIZE).contains(&chain_size),
            "zsmalloc chain size {chain_size} outside {MIN_CHAIN_SIZE}..={MAX_CHAIN_SIZE}"
        );
        // Built from the largest class down, as zs_create_pool does, because an index may only
        // alias the next larger distinct class, and the huge threshold is set by the first
        // class from the top that holds neither one page nor one object.
        let mut desc: Vec<SizeClass> = Vec::new();
        let mut desc_of = [0usize; ZS_SIZE_CLASSES];
        let mut huge_class_size = 0;
        for i in (0..ZS_SIZE_CLASSES).rev() {
            let size = (ZS_MIN_ALLOC_SIZE + i as u32 * ZS_SIZE_CLASS_DELTA).min(ZS_MAX_ALLOC_SIZE);
            let pages = chain_pages(size, chain_size, policy);
            let objs = pages * PAGE_SIZE / size;
            if pages != 1 && objs != 1 && huge_class_size == 0 {
                // zs_malloc adds the handle before the lookup, so the caller-visible threshold
                // is 7 bytes lower than the class size.
                huge_class_size = size - (ZS_HANDLE_SIZE - 1);
            }
            if let Some(prev) = desc.last() {
                if prev.pages == pages && prev.objs == objs {
                    desc_of[i] = desc.len() - 1;
                    continue;
                }
            }
            desc.push(SizeClass {
                size,
                pages,
                objs,
                heads: [NIL; NR_FULLNESS_GROUPS],
                nonempty: 0,
                objs_allocated: 0,
                objs_used: 0,
                zspages: 0,
                slots: Vec::new(),
                free_regions: Vec::new(),
            });
            desc_of[i] = desc.len() - 1;
        }
        let n = desc.len();
        let mut class_of = [0u8; ZS_SIZE_CLASSES];
        for (i, d) in desc_of.iter().enumerate() {
            class_of[i] = (n - 1 - d) as u8;
        }
        desc.reverse();
        Zsmalloc {
            chain_size,
            policy,
            class_of,
            classes: desc,
            huge_class_size,
            zspages: Vec::new(),
            free_zspage: NIL,
            // Handle 0 is reserved so a zero handle is never valid, as in the kernel.
            handles: vec![HandleLoc::new(NIL, HANDLE_DEAD)],
            free_handle: NIL,
            pages_allocated: 0,
            pages_compacted: 0,
            objects: 0,
        }
    }

    pub fn chain_size(&self) -> u32 {
        self.chain_size
    }

    pub fn chain_policy(&self) -> ChainPolicy {
        self.policy
    }

    /// The class `malloc(size)` would use. Panics unless 1 ≤ size ≤ 4096.
    pub fn class_info(&self, size: u32) -> ClassInfo {
        assert!(
            (1..=ZS_MAX_ALLOC_SIZE).contains(&size),
            "zsmalloc object size {size} outside 1..={ZS_MAX_ALLOC_SIZE}"
        );
        let c = &self.classes[self.class_id(size) as usize];
        ClassInfo {
            class_size: c.size,
            pages_per_zspage: c.pages,
            objs_per_zspage: c.objs,
            huge: c.pages == 1 && c.objs == 1,
        }
    }

    /// zs_huge_class_size: objects of at least this many bytes take a whole page.
    pub fn huge_class_size(&self) -> u32 {
        self.huge_class_size
    }

    pub fn distinct_classes(&self) -> usize {
        self.classes.len()
    }

    pub fn stats_by_class(&self) -> Vec<ClassStat> {
        self.classes
            .iter()
            .map(|c| ClassStat {
                class_size: c.size,
                pages_per_zspage: c.pages,
                objs_per_zspage: c.objs,
                zspages: c.zspages,
                objs_used: c.objs_used,
                objs_allocated: c.objs_allocated,
            })
            .collect()
    }

    /// Heap bytes held by the allocator's own bookkeeping (Vec capacities included).
    pub fn metadata_bytes(&self) -> usize {
        use std::mem::size_of;
        let classes: usize = self
            .classes
            .iter()
            .map(|c| {
                size_of::<SizeClass>()
                    + c.slots.capacity() * size_of::<u32>()
                    + c.free_regions.capacity() * size_of::<u32>()
            })
            .sum();
        classes
            + self.zspages.capacity() * size_of::<Zspage>()
            + self.handles.capacity() * size_of::<HandleLoc>()
    }

    fn class_id(&self, size: u32) -> u8 {
        self.class_of[size_class_index(size + ZS_HANDLE_SIZE)]
    }

    fn list_add(&mut self, z: u32, group: u8) {
        let zs = &mut self.zspages;
        let class = &mut self.classes[zs[z as usize].class as usize];
        let head = class.heads[group as usize];
        // list_add: at the head, so "first entry" is the most recently inserted zspage.
        zs[z as usize].prev = NIL;
        zs[z as usize].next = head;
        zs[z as usize].fullness = group;
        if head != NIL {
            zs[head as usize].prev = z;
        }
        class.heads[group as usize] = z;
        class.nonempty |= 1 << group;
    }

    fn list_del(&mut self, z: u32) {
        let zs = &mut self.zspages;
        let Zspage {
            prev,
            next,
            class,
            fullness,
            ..
        } = zs[z as usize];
        let class = &mut self.classes[class as usize];
        if prev != NIL {
            zs[prev as usize].next = next;
        } else {
            class.heads[fullness as usize] = next;
            if next == NIL {
                class.nonempty &= !(1 << fullness);
            }
        }
        if next != NIL {
            zs[next as usize].prev = prev;
        }
        zs[z as usize].prev = NIL;
        zs[z as usize].next = NIL;
    }

    fn group_of(&self, z: u32) -> u8 {
        let zp = &self.zspages[z as usize];
        fullness_group(zp.inuse as u32, self.classes[zp.class as usize].objs)
    }

    /// fix_fullness_group: a zspage keeps its list position unless its group changes.
    fn fix_fullness(&mut self, z: u32) -> u8 {
        let g = self.group_of(z);
        if g != self.zspages[z as usize].fullness {
            self.list_del(z);
            self.list_add(z, g);
        }
        g
    }

    /// find_get_zspage: head of the fullest partial group.
    fn find_zspage(&self, c: u8) -> u32 {
        let mask = self.classes[c as usize].nonempty & PARTIAL_GROUPS_MASK;
        if mask == 0 {
            return NIL;
        }
        let g = 15 - mask.leading_zeros();
        self.classes[c as usize].heads[g as usize]
    }

    fn alloc_zspage(&mut self, c: u8) -> u32 {
        let class = &mut self.classes[c as usize];
        let region = match class.free_regions.pop() {
            Some(r) => r,
            None => {
                let r = (class.slots.len() / class.objs as usize) as u32;
                // No need to initialise: slots at or above `bump` are never read.
                class
                    .slots
                    .resize(class.slots.len() + class.objs as usize, 0);
                r
            }
        };
        class.objs_allocated += class.objs as u64;
        class.zspages += 1;
        self.pages_allocated += class.pages as u64;
        let zp = Zspage {
            prev: NIL,
            next: NIL,
            region,
            inuse: 0,
            freeobj: SLOT_NONE,
            bump: 0,
            class: c,
            fullness: GROUP_EMPTY,
        };
        let z = if self.free_zspage != NIL {
            let z = self.free_zspage;
            self.free_zspage = self.zspages[z as usize].next;
            self.zspages[z as usize] = zp;
            z
        } else {
            assert!(
                self.zspages.len() < NIL as usize,
                "zsmalloc zspage arena exhausted"
            );
            self.zspages.push(zp);
            (self.zspages.len() - 1) as u32
        };
        // Parked in the empty group until its first object moves it to its real group; the
        // result equals the kernel's insert-after-obj_malloc.
        self.list_add(z, GROUP_EMPTY);
        z
    }

    fn free_zspage(&mut self, z: u32) {
        self.list_del(z);
        let zp = self.zspages[z as usize];
        let class = &mut self.classes[zp.class as usize];
        class.objs_allocated -= class.objs as u64;
        class.zspages -= 1;
        class.free_regions.push(zp.region);
        self.pages_allocated -= class.pages as u64;
        let zp = &mut self.zspages[z as usize];
        zp.fullness = ZSPAGE_DEAD;
        zp.next = self.free_zspage;
        self.free_zspage = z;
    }

    /// obj_malloc: take the head of the zspage's free chain and record the handle in it.
    fn obj_malloc(&mut self, z: u32, h: Handle) -> u16 {
        let zp = &mut self.zspages[z as usize];
        let class = &mut self.classes[zp.class as usize];
        let base = zp.region as usize * class.objs as usize;
        let slot = if zp.freeobj != SLOT_NONE {
            let s = zp.freeobj;
            zp.freeobj = (class.slots[base + s as usize] & 0xFFFF) as u16;
            s
        } else {
            let s = zp.bump;
            zp.bump += 1;
            s
        };
        debug_assert!((slot as u32) < class.objs);
        class.slots[base + slot as usize] = h;
        zp.inuse += 1;
        slot
    }

    /// obj_free: the slot goes to the head of the free chain (LIFO reuse).
    fn obj_free(&mut self, z: u32, slot: u16) {
        let zp = &mut self.zspages[z as usize];
        let class = &mut self.classes[zp.class as usize];
        let base = zp.region as usize * class.objs as usize;
        class.slots[base + slot as usize] = SLOT_FREE_TAG | zp.freeobj as u32;
        zp.freeobj = slot;
        zp.inuse -= 1;
    }

    fn alloc_handle(&mut self) -> Handle {
        if self.free_handle != NIL {
            let h = self.free_handle;
            self.free_handle = self.handles[h as usize].zspage();
            h
        } else {
            // Handles share the slot word with the free tag bit.
            assert!(
                self.handles.len() < SLOT_FREE_TAG as usize,
                "zsmalloc handle space exhausted"
            );
            self.handles.push(HandleLoc::new(NIL, HANDLE_DEAD));
            (self.handles.len() - 1) as Handle
        }
    }

    fn zs_can_compact(&self, c: usize) -> u64 {
        let class = &self.classes[c];
        if class.objs_allocated <= class.objs_used {
            return 0;
        }
        (class.objs_allocated - class.objs_used) / class.objs as u64 * class.pages as u64
    }

    fn isolate(&mut self, c: usize, groups: impl Iterator<Item = u8>) -> u32 {
        for g in groups {
            let z = self.classes[c].heads[g as usize];
            if z != NIL {
                self.list_del(z);
                return z;
            }
        }
        NIL
    }

    fn putback(&mut self, z: u32) -> u8 {
        let g = self.group_of(z);
        self.list_add(z, g);
        g
    }

    /// migrate_zspage: walk the source's slots in index order, moving each live object into
    /// the destination, until the destination is full or the source empty.
    fn migrate(&mut self, src: u32, dst: u32) {
        let c = self.zspages[src as usize].class as usize;
        let objs = self.classes[c].objs as u16;
        let base = self.zspages[src as usize].region as usize * objs as usize;
        let mut i = 0u16;
        while i < self.zspages[src as usize].bump {
            let word = self.classes[c].slots[base + i as usize];
            if word & SLOT_FREE_TAG == 0 {
                let h = word;
                let new_slot = self.obj_malloc(dst, h);
                self.handles[h as usize] = HandleLoc::new(dst, new_slot);
                self.obj_free(src, i);
                if self.zspages[dst as usize].inuse == objs || self.zspages[src as usize].inuse == 0
                {
                    break;
                }
            }
            i += 1;
        }
    }

    /// __zs_compact for one class, assuming the pool lock is never contended.
    fn compact_class(&mut self, c: usize) -> u64 {
        let mut freed = 0;
        let mut dst = NIL;
        while self.zs_can_compact(c) > 0 {
            if dst == NIL {
                dst = self.isolate(c, (1..=10).rev());
                if dst == NIL {
                    break;
                }
            }
            let src = self.isolate(c, 1..=10);
            if src == NIL {
                break;
            }
            self.migrate(src, dst);
            if self.putback(src) == GROUP_EMPTY {
                self.free_zspage(src);
                freed += self.classes[c].pages as u64;
            }
            if self.group_of(dst) == GROUP_FULL {
                self.putback(dst);
                dst = NIL;
            }
        }
        if dst != NIL {
            self.putback(dst);
        }
        freed
    }
}

impl Zpool for Zsmalloc {
    fn name(&self) -> &'static str {
        "zsmalloc"
    }

    fn malloc(&mut self, size: u32) -> Result<Handle, ZpoolError> {
        if size == 0 {
            return Err(ZpoolError::Invalid);
        }
        if size > ZS_MAX_ALLOC_SIZE {
            return Err(ZpoolError::NoSpace);
        }
        let c = self.class_id(size);
        let mut z = self.find_zspage(c);
        if z == NIL {
            z = self.alloc_zspage(c);
        }
        let h = self.alloc_handle();
        let slot = self.obj_malloc(z, h);
        self.handles[h as usize] = HandleLoc::new(z, slot);
        self.fix_fullness(z);
        self.classes[c as usize].objs_used += 1;
        self.objects += 1;
        Ok(h)
    }

    fn free(&mut self, handle: Handle) {
        let hi = handle as usize;
        assert!(
            hi < self.handles.len() && self.handles[hi].slot() != HANDLE_DEAD,
            "zs_free of handle {handle} that is not live"
        );
        let z = self.handles[hi].zspage();
        let slot = self.handles[hi].slot();
        let c = self.zspages[z as usize].class as usize;
        self.classes[c].objs_used -= 1;
        self.obj_free(z, slot);
        if self.fix_fullness(z) == GROUP_EMPTY {
            self.free_zspage(z);
        }
        self.handles[hi] = HandleLoc::new(self.free_handle, HANDLE_DEAD);
        self.free_handle = handle;
        self.objects -= 1;
    }

    fn prefetch(&self, handle: Handle, deep: bool) {
        let Some(h) = self.handles.get(handle as usize) else {
            return;
        };
        if !deep {
            crate::prefetch::prefetch(h);
        } else if let Some(z) = self.zspages.get(h.zspage() as usize) {
            crate::prefetch::prefetch(z);
        }
    }

    fn total_pages(&self) -> u64 {
        self.pages_allocated
    }

    fn compactable_pages(&self) -> u64 {
        (0..self.classes.len())
            .map(|c| self.zs_can_compact(c))
            .sum()
    }

    fn compact(&mut self) -> u64 {
        let mut freed = 0;
        for c in (0..self.classes.len()).rev() {
            freed += self.compact_class(c);
        }
        self.pages_compacted += freed;
        freed
    }

    fn pages_compacted(&self) -> u64 {
        self.pages_compacted
    }

    fn objects(&self) -> u64 {
        self.objects
    }

    /// zs_stats_size_show (6.12): per distinct class, the zspages in each in-use-ratio group
    /// (counted by walking the class's fullness lists), objects allocated and used, pages and
    /// zs_can_compact. Simplified: no "Total" row (the sum of the rows).
    fn classes(&self) -> Vec<ZsClassRow> {
        (0..self.classes.len())
            .map(|c| {
                let class = &self.classes[c];
                let mut inuse_ratio = [0u64; 11];
                for (g, n) in inuse_ratio.iter_mut().enumerate() {
                    let mut z = class.heads[g + 1];
                    while z != NIL {
                        *n += 1;
                        z = self.zspages[z as usize].next;
                    }
                }
                ZsClassRow {
                    class: (class.size - ZS_MIN_ALLOC_SIZE) / ZS_SIZE_CLASS_DELTA,
                    size: class.size,
                    inuse_ratio,
                    obj_allocated: class.objs_allocated,
                    obj_used: class.objs_used,
                    pages_used: class.objs_allocated / class.objs as u64 * class.pages as u64,
                    pages_per_zspage: class.pages,
                    freeable: self.zs_can_compact(c),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rebuilds every counter from the arenas and checks the lists and the handle table
    /// against each other; returns (objects, pages).
    fn recount(zs: &Zsmalloc) -> (u64, u64) {
        let mut objects = 0u64;
        let mut pages = 0u64;
        let mut per_class = vec![(0u64, 0u64, 0u64); zs.classes.len()]; // zspages, used, alloc
        let mut live_zspages = 0usize;
        for zp in zs.zspages.iter() {
            if zp.fullness == ZSPAGE_DEAD {
                continue;
            }
            live_zspages += 1;
            let class = &zs.classes[zp.class as usize];
            assert!(zp.inuse > 0, "an empty zspage outlived its last free");
            assert!(zp.inuse as u32 <= class.objs);
            assert!(zp.bump as u32 <= class.objs);
            assert_eq!(zp.fullness, fullness_group(zp.inuse as u32, class.objs));
            // inuse = slots ever handed out minus those on the free chain.
            let mut chain = 0u32;
            let mut s = zp.freeobj;
            let base = zp.region as usize * class.objs as usize;
            while s != SLOT_NONE {
                assert!(s < zp.bump);
                let w = class.slots[base + s as usize];
                assert!(w & SLOT_FREE_TAG != 0);
                chain += 1;
                s = (w & 0xFFFF) as u16;
            }
            assert_eq!(zp.inuse as u32 + chain, zp.bump as u32);
            objects += zp.inuse as u64;
            pages += class.pages as u64;
            let e = &mut per_class[zp.class as usize];
            e.0 += 1;
            e.1 += zp.inuse as u64;
            e.2 += class.objs as u64;
        }
        let mut listed = 0usize;
        for (ci, class) in zs.classes.iter().enumerate() {
            assert_eq!(
                (class.zspages, class.objs_used, class.objs_allocated),
                per_class[ci]
            );
            for g in 0..NR_FULLNESS_GROUPS {
                assert_eq!(
                    class.heads[g] != NIL,
                    class.nonempty & (1 << g) != 0,
                    "nonempty bit of group {g}"
                );
                let mut prev = NIL;
                let mut z = class.heads[g];
                while z != NIL {
                    let zp = &zs.zspages[z as usize];
                    assert_eq!(zp.prev, prev);
                    assert_eq!(zp.class as usize, ci);
                    assert_eq!(zp.fullness as usize, g);
                    listed += 1;
                    prev = z;
                    z = zp.next;
                }
            }
        }
        assert_eq!(
            listed, live_zspages,
            "every live zspage is on exactly one list"
        );
        let mut live_handles = 0u64;
        for h in 0..zs.handles.len() {
            if zs.handles[h].slot() == HANDLE_DEAD {
                continue;
            }
            live_handles += 1;
            let zp = &zs.zspages[zs.handles[h].zspage() as usize];
            let class = &zs.classes[zp.class as usize];
            let w = class.slots
                [zp.region as usize * class.objs as usize + zs.handles[h].slot() as usize];
            assert_eq!(w, h as u32, "slot of handle {h} does not point back at it");
        }
        assert_eq!(live_handles, objects);
        (objects, pages)
    }

    fn check(zs: &Zsmalloc) {
        let (objects, pages) = recount(zs);
        assert_eq!(zs.objects(), objects);
        assert_eq!(zs.total_pages(), pages);
    }

    fn info(zs: &Zsmalloc, class_size: u32) -> (u32, u32, u32) {
        // The largest caller size that lands exactly in `class_size`.
        let ci = zs.class_info(class_size.min(4096) - ZS_HANDLE_SIZE);
        (ci.class_size, ci.pages_per_zspage, ci.objs_per_zspage)
    }

    #[test]
    fn chain8_class_table() {
        let zs = Zsmalloc::new(8);
        assert_eq!(zs.distinct_classes(), 119);
        assert_eq!(zs.huge_class_size(), 3625);
        for &(size, pages, objs) in &[
            (32, 1, 128),
            (48, 3, 256),
            (64, 1, 64),
            (160, 5, 128),
            (560, 7, 51),
            (1088, 4, 15),
            (1632, 2, 5),
            (2176, 8, 15),
            (2592, 7, 11),
            (3184, 7, 9),
            (3632, 8, 9),
            (4096, 1, 1),
        ] {
            assert_eq!(info(&zs, size), (size, pages, objs), "class {size}");
        }
        assert_eq!(zs.stats_by_class().len(), 119);
        let sizes: Vec<u32> = zs.stats_by_class().iter().map(|s| s.class_size).collect();
        assert!(sizes.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn class_lookup_adds_the_handle_and_clamps() {
        let zs = Zsmalloc::new(8);
        assert_eq!(zs.class_info(1).class_size, 32);
        assert_eq!(zs.class_info(24).class_size, 32);
        assert_eq!(zs.class_info(25).class_size, 48);
        assert_eq!(zs.class_info(40).class_size, 48);
        assert_eq!(zs.class_info(41).class_size, 64);
        // 4089..=4096 exceed 4096 once the handle is added: the last class takes them.
        assert_eq!(zs.class_info(4089).class_size, 4096);
        assert_eq!(zs.class_info(4096).class_size, 4096);
        assert!(zs.class_info(4096).huge);
    }

    #[test]
    fn huge_threshold_chain8() {
        let zs = Zsmalloc::new(8);
        let below = zs.class_info(3624);
        assert_eq!((below.class_size, below.huge), (3632, false));
        let at = zs.class_info(3625);
        assert_eq!((at.class_size, at.huge), (4096, true));
    }

    #[test]
    fn aliased_classes_use_the_next_larger_class() {
        let zs = Zsmalloc::new(8);
        // 2064..=2160 all have 8 pages / 15 objects, like 2176: one class.
        for cls in (2064..=2176).step_by(16) {
            assert_eq!(info(&zs, cls), (2176, 8, 15), "index of size {cls}");
        }
        assert_eq!(info(&zs, 2048), (2048, 1, 2));
        assert_eq!(info(&zs, 1936), (2048, 1, 2));
        assert_eq!(info(&zs, 1312), (1360, 1, 3));
        assert_eq!(info(&zs, 800), (816, 1, 5));
        // Everything above 3632 is one object per page: all of it is the 4096 class.
        for cls in (3648..=4096).step_by(16) {
            assert_eq!(info(&zs, cls), (4096, 1, 1));
        }
        // Aliased sizes share the allocator state: one zspage serves both.
        let mut zs = Zsmalloc::new(8);
        zs.malloc(2064 - 8).unwrap();
        zs.malloc(2176 - 8).unwrap();
        assert_eq!(zs.total_pages(), 8);
    }

    #[test]
    fn chain4_class_table_and_old_policy() {
        let new = Zsmalloc::new(4);
        assert_eq!(new.distinct_classes(), 69);
        assert_eq!(new.huge_class_size(), 3257);
        let old = Zsmalloc::with_chain_policy(4, ChainPolicy::UsedPercent);
        assert_eq!(old.distinct_classes(), 69);
        assert_eq!(old.huge_class_size(), 3257);
        // ≤6.2 used-percent and 6.3+ min-waste differ only for class 208: 3 pages waste 16
        // bytes (99.87 %), 2 pages waste 80 (99.02 %); both truncate to 99 %, so used-percent
        // keeps the first, 2 pages.
        let mut differing = Vec::new();
        for size in 1..=4096 {
            let (a, b) = (new.class_info(size), old.class_info(size));
            if a != b {
                differing.push((size, a, b));
            }
        }
        assert_eq!(differing.first().map(|d| d.0), Some(185));
        assert_eq!(differing.last().map(|d| d.0), Some(200));
        assert_eq!(differing.len(), 16);
        for (_, a, b) in &differing {
            assert_eq!(
                (a.class_size, a.pages_per_zspage, a.objs_per_zspage),
                (208, 3, 59)
            );
            assert_eq!(
                (b.class_size, b.pages_per_zspage, b.objs_per_zspage),
                (208, 2, 39)
            );
        }
        assert!(new.class_info(3257).huge && !new.class_info(3256).huge);
        // With chain 8 the two policies really diverge (123 vs 119 classes).
        let old8 = Zsmalloc::with_chain_policy(8, ChainPolicy::UsedPercent);
        assert_eq!(old8.distinct_classes(), 123);
    }

    #[test]
    #[should_panic(expected = "chain size")]
    fn chain_size_outside_kconfig_range_panics() {
        Zsmalloc::new(3);
    }

    #[test]
    fn live_zram_page_counts() {
        // §10.2: 200 objects per size; pages = ceil(200/objs) · pages_per_zspage.
        for &(size, expect) in &[
            (138, 10),
            (552, 28),
            (1070, 56),
            (1588, 80),
            (2085, 112),
            (2581, 133),
            (3101, 161),
            (3614, 184),
            (3624, 184),
            (3625, 200),
            (4096, 200),
        ] {
            let mut zs = Zsmalloc::new(8);
            for _ in 0..200 {
                zs.malloc(size).unwrap();
            }
            let ci = zs.class_info(size);
            assert_eq!(
                200u64.div_ceil(ci.objs_per_zspage as u64) * ci.pages_per_zspage as u64,
                expect
            );
            assert_eq!(zs.total_pages(), expect, "size {size}");
            assert_eq!(zs.objects(), 200);
            check(&zs);
        }
    }

    #[test]
    fn malloc_errors() {
        let mut zs = Zsmalloc::new(8);
        assert_eq!(zs.malloc(0), Err(ZpoolError::Invalid));
        assert_eq!(zs.malloc(4097), Err(ZpoolError::NoSpace));
        assert_eq!(zs.malloc(u32::MAX), Err(ZpoolError::NoSpace));
        assert_eq!(zs.objects(), 0);
        assert_eq!(zs.total_pages(), 0);
        let h = zs.malloc(4096).unwrap();
        assert_ne!(h, 0, "handle 0 is never handed out");
        assert_eq!(zs.total_pages(), 1);
    }

    #[test]
    #[should_panic(expected = "not live")]
    fn double_free_panics() {
        let mut zs = Zsmalloc::new(8);
        let h = zs.malloc(100).unwrap();
        zs.free(h);
        zs.free(h);
    }

    #[test]
    fn compaction_example() {
        // §10.4 live check: 1500 objects of class 1088 (4 pages / 15 objects).
        let mut zs = Zsmalloc::new(8);
        let handles: Vec<Handle> = (0..1500).map(|_| zs.malloc(1070).unwrap()).collect();
        assert_eq!(zs.total_pages(), 400);
        assert_eq!(zs.compactable_pages(), 0);
        for h in handles.iter().step_by(2) {
            zs.free(*h);
        }
        assert_eq!(zs.objects(), 750);
        assert_eq!(zs.total_pages(), 400, "no zspage became empty");
        assert_eq!(zs.compactable_pages(), 200);
        check(&zs);
        assert_eq!(zs.compact(), 200);
        assert_eq!(zs.total_pages(), 200);
        assert_eq!(zs.pages_compacted(), 200);
        assert_eq!(zs.compactable_pages(), 0);
        check(&zs);
        let stat = zs
            .stats_by_class()
            .into_iter()
            .find(|s| s.class_size == 1088)
            .unwrap();
        assert_eq!(
            (stat.zspages, stat.objs_used, stat.objs_allocated),
            (50, 750, 750)
        );
        // Nothing left to do: a second pass frees nothing and leaves the counter alone.
        assert_eq!(zs.compact(), 0);
        assert_eq!(zs.pages_compacted(), 200);
    }

    #[test]
    fn classes_rows_show_fullness_and_compaction_empties_the_sparse_groups() {
        // Class 1088 (index 66, 4 pages / 15 objects): 100 zspages full, then every second
        // object freed: each zspage at 7 or 8 of 15 (46 % or 53 %: groups 50% and 60%).
        let mut zs = Zsmalloc::new(8);
        let handles: Vec<Handle> = (0..1500).map(|_| zs.malloc(1070).unwrap()).collect();
        let row = |zs: &Zsmalloc| zs.classes().into_iter().find(|r| r.size == 1088).unwrap();
        let full = row(&zs);
        assert_eq!((full.class, full.pages_per_zspage), (66, 4));
        assert_eq!(full.inuse_ratio[10], 100, "all in the 100% column");
        assert_eq!(
            (
                full.obj_allocated,
                full.obj_used,
                full.pages_used,
                full.freeable
            ),
            (1500, 1500, 400, 0)
        );
        for h in handles.iter().step_by(2) {
            zs.free(*h);
        }
        let sparse = row(&zs);
        assert_eq!(sparse.inuse_ratio[10], 0);
        assert_eq!(
            sparse.inuse_ratio[4] + sparse.inuse_ratio[5],
            100,
            "{:?}",
            sparse.inuse_ratio
        );
        assert_eq!(
            (sparse.obj_used, sparse.pages_used, sparse.freeable),
            (750, 400, 200)
        );
        zs.compact();
        let dense = row(&zs);
        assert_eq!(
            dense.inuse_ratio[10], 50,
            "compaction filled 50 zspages: {:?}",
            dense.inuse_ratio
        );
        assert_eq!(dense.inuse_ratio.iter().sum::<u64>(), 50);
        assert_eq!(
            (
                dense.obj_allocated,
                dense.obj_used,
                dense.pages_used,
                dense.freeable
            ),
            (750, 750, 200, 0)
        );
        // Only distinct classes, ascending; totals agree with the pool.
        let rows = zs.classes();
        assert_eq!(rows.len(), zs.distinct_classes());
        assert!(rows.windows(2).all(|w| w[0].size < w[1].size));
        assert_eq!(
            rows.iter().map(|r| r.pages_used).sum::<u64>(),
            zs.total_pages()
        );
    }

    #[test]
    fn handles_survive_compaction() {
        let mut zs = Zsmalloc::new(8);
        let handles: Vec<Handle> = (0..1500).map(|_| zs.malloc(1070).unwrap()).collect();
        for h in handles.iter().step_by(2) {
            zs.free(*h);
        }
        let survivors: Vec<Handle> = handles.iter().skip(1).step_by(2).copied().collect();
        let before: Vec<(u32, u16)> = survivors
            .iter()
            .map(|&h| {
                (
                    zs.handles[h as usize].zspage(),
                    zs.handles[h as usize].slot(),
                )
            })
            .collect();
        zs.compact();
        let moved = survivors
            .iter()
            .zip(&before)
            .filter(|(&h, &loc)| {
                (
                    zs.handles[h as usize].zspage(),
                    zs.handles[h as usize].slot(),
                ) != loc
            })
            .count();
        assert!(
            moved >= 350,
            "half of the zspages were drained, moved {moved}"
        );
        check(&zs);
        // Free the moved objects first, then the rest; counts must stay consistent throughout.
        let (moved_h, stayed_h): (Vec<_>, Vec<_>) =
            survivors.iter().zip(&before).partition(|(&h, &loc)| {
                (
                    zs.handles[h as usize].zspage(),
                    zs.handles[h as usize].slot(),
                ) != loc
            });
        for (&h, _) in moved_h.iter().chain(stayed_h.iter()) {
            zs.free(h);
            check(&zs);
        }
        assert_eq!(zs.objects(), 0);
        assert_eq!(zs.total_pages(), 0);
        assert_eq!(zs.compactable_pages(), 0);
    }

    #[test]
    fn compaction_moves_from_emptiest_into_fullest() {
        // Class 1088: zspages A (13 objects), B (2), C (8). The emptiest (B) drains into the
        // fullest (A); can_compact is then 0, so C is left alone.
        let mut zs = Zsmalloc::new(8);
        let hs: Vec<Handle> = (0..45).map(|_| zs.malloc(1070).unwrap()).collect();
        let zsp = |zs: &Zsmalloc, h: Handle| zs.handles[h as usize].zspage();
        let (a, b, c) = (zsp(&zs, hs[0]), zsp(&zs, hs[15]), zsp(&zs, hs[30]));
        for &h in &hs[13..15] {
            zs.free(h);
        }
        for &h in &hs[17..30] {
            zs.free(h);
        }
        for &h in &hs[38..45] {
            zs.free(h);
        }
        assert_eq!(zs.compactable_pages(), 4);
        assert_eq!(zs.compact(), 4);
        assert_eq!(zs.zspages[a as usize].inuse, 15);
        assert_eq!(zs.zspages[b as usize].fullness, ZSPAGE_DEAD);
        assert_eq!(zs.zspages[c as usize].inuse, 8);
        assert_eq!(zsp(&zs, hs[15]), a);
        assert_eq!(zsp(&zs, hs[16]), a);
        check(&zs);
    }

    #[test]
    fn partial_zspage_is_reused_before_a_new_one() {
        let mut zs = Zsmalloc::new(8);
        let hs: Vec<Handle> = (0..16).map(|_| zs.malloc(1070).unwrap()).collect();
        assert_eq!(zs.total_pages(), 8);
        let first = zs.handles[hs[0] as usize].zspage();
        let second = zs.handles[hs[15] as usize].zspage();
        assert_ne!(first, second);
        // first: 14/15 (group 10), second: 1/15 (group 1). The fuller one is chosen.
        zs.free(hs[3]);
        let h = zs.malloc(1070).unwrap();
        assert_eq!(zs.handles[h as usize].zspage(), first);
        assert_eq!(zs.total_pages(), 8);
        // first is full again; the partial second is used before a third zspage is made.
        let h = zs.malloc(1070).unwrap();
        assert_eq!(zs.handles[h as usize].zspage(), second);
        assert_eq!(zs.total_pages(), 8);
        check(&zs);
    }

    #[test]
    fn same_group_takes_most_recently_inserted() {
        let mut zs = Zsmalloc::new(8);
        let hs: Vec<Handle> = (0..30).map(|_| zs.malloc(1070).unwrap()).collect();
        let a = zs.handles[hs[0] as usize].zspage();
        let b = zs.handles[hs[15] as usize].zspage();
        // Both end at 12/15 (ratio 80, group 9); B entered group 9 after A.
        for &h in &hs[0..3] {
            zs.free(h);
        }
        for &h in &hs[15..18] {
            zs.free(h);
        }
        assert_eq!(zs.zspages[a as usize].fullness, 9);
        assert_eq!(zs.zspages[b as usize].fullness, 9);
        let h = zs.malloc(1070).unwrap();
        assert_eq!(zs.handles[h as usize].zspage(), b);
        // At 13/15 (86 %) B is still in group 9 and kept its place at the head.
        assert_eq!(zs.zspages[b as usize].fullness, 9);
        let h = zs.malloc(1070).unwrap();
        assert_eq!(zs.handles[h as usize].zspage(), b);
        // 14/15 moved B to group 10, the fullest partial group; it fills up first.
        assert_eq!(zs.zspages[b as usize].fullness, 10);
        let h = zs.malloc(1070).unwrap();
        assert_eq!(zs.handles[h as usize].zspage(), b);
        assert_eq!(zs.zspages[b as usize].fullness, GROUP_FULL);
        let h = zs.malloc(1070).unwrap();
        assert_eq!(zs.handles[h as usize].zspage(), a);
        check(&zs);
    }

    #[test]
    fn fullness_groups_match_the_kernel_formula() {
        assert_eq!(fullness_group(0, 128), 0);
        assert_eq!(fullness_group(1, 128), 1);
        assert_eq!(fullness_group(12, 128), 1); // 9 %
        assert_eq!(fullness_group(13, 128), 2); // 10 %
        assert_eq!(fullness_group(127, 128), 10); // 99 %
        assert_eq!(fullness_group(128, 128), 11);
        assert_eq!(fullness_group(1, 2), 6);
        assert_eq!(fullness_group(14, 15), 10);
    }

    #[test]
    fn slots_are_reused_lifo() {
        let mut zs = Zsmalloc::new(8);
        let hs: Vec<Handle> = (0..4).map(|_| zs.malloc(100).unwrap()).collect();
        let slot = |zs: &Zsmalloc, h: Handle| zs.handles[h as usize].slot();
        assert_eq!(
            hs.iter().map(|&h| slot(&zs, h)).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        zs.free(hs[0]);
        zs.free(hs[2]);
        let a = zs.malloc(100).unwrap();
        let b = zs.malloc(100).unwrap();
        let c = zs.malloc(100).unwrap();
        assert_eq!((slot(&zs, a), slot(&zs, b), slot(&zs, c)), (2, 0, 4));
        check(&zs);
    }

    #[test]
    fn empty_zspage_is_freed_at_once_and_its_slots_restart() {
        let mut zs = Zsmalloc::new(8);
        let hs: Vec<Handle> = (0..3).map(|_| zs.malloc(3000).unwrap()).collect();
        assert_eq!(zs.total_pages(), 3);
        for &h in &hs {
            zs.free(h);
        }
        assert_eq!(zs.total_pages(), 0);
        assert_eq!(zs.objects(), 0);
        // The recycled region must not leak the old free chain: a new zspage starts at slot 0.
        let h = zs.malloc(3000).unwrap();
        assert_eq!(zs.handles[h as usize].slot(), 0);
        check(&zs);
    }

    /// xorshift64*: deterministic and dependency-free.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    #[test]
    fn randomized_consistency() {
        for (seed, chain) in [(0x9E37_79B9_7F4A_7C15u64, 8), (42, 4), (7, 16)] {
            let mut rng = Rng(seed);
            let mut zs = Zsmalloc::new(chain);
            let mut live: Vec<Handle> = Vec::new();
            let mut compacted = 0;
            for step in 0..6000 {
                let r = rng.below(100);
                if r < 55 || live.is_empty() {
                    // Mostly a few hot sizes so zspages fill and drain, plus a long tail.
                    let size = match rng.below(4) {
                        0 => 1 + rng.below(4096) as u32,
                        1 => 3000 + rng.below(1097) as u32,
                        2 => 100 + rng.below(32) as u32,
                        _ => 1000 + rng.below(100) as u32,
                    };
                    let h = zs.malloc(size).unwrap();
                    assert!(!live.contains(&h));
                    live.push(h);
                } else if r < 99 {
                    let i = rng.below(live.len() as u64) as usize;
                    zs.free(live.swap_remove(i));
                } else {
                    let expect = zs.compactable_pages();
                    let before = zs.total_pages();
                    let freed = zs.compact();
                    // Without lock contention a class is compacted until can_compact is 0,
                    // which frees exactly what the shrinker counted.
                    assert_eq!(freed, expect, "step {step}");
                    assert_eq!(zs.total_pages(), before - freed);
                    compacted += freed;
                    assert_eq!(zs.pages_compacted(), compacted);
                }
                assert_eq!(zs.objects(), live.len() as u64);
                check(&zs);
            }
            for h in live.drain(..) {
                zs.free(h);
            }
            check(&zs);
            assert_eq!(zs.total_pages(), 0);
        }
    }

    #[test]
    fn full_compaction_leaves_nothing_compactable() {
        // zs_compact stops a class only when can_compact is 0 or no source/destination pair
        // exists; with no contention it always reaches can_compact == 0.
        let mut rng = Rng(3);
        let mut zs = Zsmalloc::new(8);
        let mut live: Vec<Handle> = (0..20_000)
            .map(|_| zs.malloc(1 + rng.below(3600) as u32).unwrap())
            .collect();
        for _ in 0..12_000 {
            let i = rng.below(live.len() as u64) as usize;
            zs.free(live.swap_remove(i));
        }
        let expect = zs.compactable_pages();
        assert!(expect > 0);
        assert_eq!(zs.compact(), expect);
        assert_eq!(zs.compactable_pages(), 0);
        check(&zs);
    }

    #[test]
    fn metadata_per_object() {
        // Dense pool: the per-object part is 4 + 2 (handle table) + 4 (slot word) = 10 bytes.
        let mut rng = Rng(11);
        let mut zs = Zsmalloc::new(8);
        let n = 1_000_000u64;
        for _ in 0..n {
            zs.malloc(200 + rng.below(3000) as u32).unwrap();
        }
        let slots: usize = zs.classes.iter().map(|c| c.slots.len()).sum();
        let per_object_bytes = (zs.handles.len() * 6 + slots * 4) as f64 / n as f64;
        let zspage_bytes = zs.zspages.len() * std::mem::size_of::<Zspage>();
        assert_eq!(std::mem::size_of::<Zspage>(), 20);
        let total = per_object_bytes + zspage_bytes as f64 / n as f64;
        eprintln!(
            "metadata: {per_object_bytes:.2} B/object (handles + slots) + {:.2} B/object \
             (zspages) = {total:.2}; with Vec slack {:.2}",
            zspage_bytes as f64 / n as f64,
            zs.metadata_bytes() as f64 / n as f64
        );
        assert!(per_object_bytes < 10.1, "{per_object_bytes}");
    }
}
