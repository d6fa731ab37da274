//! Pages (one record per virtual page of every workload region) and intrusive lists by index.
//!
//! A page record carries both the virtual page (PTE state, swap entry) and, while resident,
//! its folio (LRU flags). There is no fork and no sharing, so the mapping is 1:1. The same two
//! links serve the memory LRU while the page is resident and the zswap LRU while its data
//! sits in zswap: a page is never on both (kernel-model.md §2, §9.1).
//!
//! The links live in an array of their own beside the records ([`Pages`]): reclaim walks an
//! LRU from its tail, one dependent load per page, and over a large machine each of those loads
//! misses the CPU caches. 8-byte links pack eight to a cache line where records with the links in
//! them (36 bytes) held under two, so the walk stays in the caches several times longer (and the record of each
//! isolated page is fetched beside it, not on the walk's chain).

/// Bytes per page (x86-64 base pages).
pub const PAGE_SIZE: u64 = 4096;

pub const NONE: u32 = u32::MAX;

/// Page flags. Names follow the kernel's folio flags where one exists.
pub mod pg {
    /// Occupies a page frame (a folio exists).
    pub const RESIDENT: u32 = 1 << 0;
    /// PTE present: accesses need no fault.
    pub const MAPPED: u32 = 1 << 1;
    /// PG_swapcache: the folio is in the swap cache, `slot` is its swap entry.
    pub const SWAPCACHE: u32 = 1 << 2;
    pub const ACTIVE: u32 = 1 << 3;
    /// PG_referenced while resident; zswap_entry->referenced while in zswap.
    pub const REFERENCED: u32 = 1 << 4;
    /// PTE accessed ("young") bit, read and cleared by folio_referenced.
    pub const YOUNG: u32 = 1 << 5;
    pub const WORKINGSET: u32 = 1 << 6;
    /// Folio or PTE dirty (the PTE bit is transferred to the folio at unmap).
    pub const DIRTY: u32 = 1 << 7;
    pub const WRITEBACK: u32 = 1 << 8;
    /// PG_reclaim: written back for reclaim; rotate to the inactive tail when the write ends.
    pub const RECLAIM: u32 = 1 << 9;
    /// PG_readahead. In the kernel it is the same bit as PG_reclaim (page-flags.h:
    /// `PG_readahead = PG_reclaim`); the swap-in side reads the two as one bit
    /// ([`crate::mm::Mm::folio_test_clear_readahead`]), the file side keeps them apart.
    pub const READAHEAD: u32 = 1 << 10;
    /// The swap slot's data is a zswap entry (`handle`, `zlen`).
    pub const ZSWAP: u32 = 1 << 11;
    /// The swap slot's zeromap bit (6.12+).
    pub const ZEROMAP: u32 = 1 << 12;
    /// A workingset shadow entry sits in the swap cache slot (`shadow`).
    pub const SHADOW: u32 = 1 << 13;
    /// The PTE maps the shared zero page (read fault on never-written anonymous memory).
    pub const ZERO_PFN: u32 = 1 << 14;
    /// Isolated from its LRU by reclaim (off every list for the duration of a batch).
    pub const ISOLATED: u32 = 1 << 15;
    /// A page of a file region: in the page cache while RESIDENT, on the file LRUs
    /// (folio_is_file_lru); SHADOW then means a shadow entry in the file's mapping.
    pub const FILE: u32 = 1 << 16;
    /// The multi-gen LRU's generation of a folio on an lrugen list, plus one (0: not on one):
    /// LRU_GEN_MASK of folio->flags (mm/lru_gen.rs).
    pub const LRU_GEN_PGOFF: u32 = 17;
    pub const LRU_GEN_MASK: u32 = 0b111 << LRU_GEN_PGOFF;
    /// The multi-gen LRU's access count through file descriptors beyond PG_referenced and
    /// PG_workingset (LRU_REFS_MASK, LRU_REFS_WIDTH = 2 on x86-64).
    pub const LRU_REFS_PGOFF: u32 = 20;
    pub const LRU_REFS_MASK: u32 = 0b11 << LRU_REFS_PGOFF;
    /// A page of a tmpfs file (shmem, mm/shmem.rs): swap-backed, so on the anonymous LRUs.
    /// RESIDENT without SWAPCACHE: a folio of the file's mapping (NR_SHMEM); RESIDENT with
    /// SWAPCACHE: in the swap cache (written out or read ahead), `slot` its entry; not
    /// RESIDENT with a slot: swapped out; neither: a hole (never written, or dropped clean).
    pub const SHMEM: u32 = 1 << 22;
    /// PG_mlocked: a page of an mlock()ed (VM_LOCKED) region (mm/mlock.rs). Such a folio is
    /// not evictable (vmscan.rs folio_evictable) and sits on the unevictable list.
    pub const MLOCKED: u32 = 1 << 23;
    /// folio_test_anon: the folio has been mapped into an anonymous VMA since it was allocated
    /// (folio->mapping holds the anon_vma from the first folio_add_new_anon_rmap until the folio
    /// is freed). A folio that swap-in readahead or zswap writeback brings into the swap cache is
    /// not anon until a fault maps it; 6.16+ pageout activates such a folio when it is dirty
    /// (mm/vmscan.rs, `Mm::shrink_folio`).
    pub const ANON: u32 = 1 << 24;
    /// PG_private of a page cache folio: buffer heads attached (an ext4 folio written through
    /// write_begin), charged to its memcg (mm/objcg.rs).
    pub const PRIVATE: u32 = 1 << 25;
    /// Not a flag: the list the page's links are on ([`super::list`], 0..=14), kept in the
    /// flags word's spare bits so the record is 24 bytes ([`Page::list`]).
    pub const LIST_PGOFF: u32 = 26;
    pub const LIST_MASK: u32 = 0xf << LIST_PGOFF;
}

/// Which list a page's links are on.
pub mod list {
    pub const NONE: u8 = 0;
    pub const INACTIVE_ANON: u8 = 1;
    pub const ACTIVE_ANON: u8 = 2;
    pub const INACTIVE_FILE: u8 = 3;
    pub const ACTIVE_FILE: u8 = 4;
    pub const ZSWAP: u8 = 5;
    /// The multi-gen LRU's lists (mm/lru_gen.rs): `LRU_GEN + 2 × gen + type` (type 0 anon,
    /// 1 file), gen 0..MAX_NR_GENS: ids 6..=13.
    pub const LRU_GEN: u8 = 6;
    /// LRU_UNEVICTABLE: folios reclaim must not take (mlocked ones here). Not a list reclaim
    /// scans, so not [`is_lru`]; the classic and the multi-gen LRU share it, as in the kernel
    /// (lru_gen_add_folio leaves unevictable folios to the classic list).
    pub const UNEVICTABLE: u8 = 14;

    /// A multi-gen LRU list.
    #[inline]
    pub fn is_gen(id: u8) -> bool {
        (LRU_GEN..LRU_GEN + 8).contains(&id)
    }

    /// Any memory LRU list: the classic four or a multi-gen LRU list.
    #[inline]
    pub fn is_lru(id: u8) -> bool {
        (INACTIVE_ANON..=ACTIVE_FILE).contains(&id) || is_gen(id)
    }
}

/// 24 bytes. The region is not kept: [`crate::mm::Mm::region_index`] finds it from the page
/// index. The list id lives in the flags word's top bits, a file page's folio order in `zlen`.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Page {
    /// Global swap slot id (see swap.rs), or NONE.
    pub slot: u32,
    /// Workingset shadow: the lruvec's nonresident_age at eviction (low 32 bits).
    pub shadow: u32,
    /// zsmalloc handle of the zswap entry.
    pub handle: u32,
    /// [`pg`] flags in bits 0..26; the list id in bits 26..30.
    pub flags: u32,
    /// Virtual time (ms) at which the page's data last left memory for zswap or a swap
    /// device: the age behind the LRU-inversion metric.
    pub stamp: u32,
    /// zswap entry length in bytes (0: same-filled entry of ≤6.11); for a file page, which
    /// never has zswap data, the order of its page cache folio ([`Page::folio_order`]).
    pub zlen: u16,
    pub memcg: u16,
}

impl Page {
    pub fn new(memcg: u16) -> Page {
        Page {
            slot: NONE,
            shadow: 0,
            handle: NONE,
            flags: 0,
            stamp: 0,
            zlen: 0,
            memcg,
        }
    }

    /// A page of a file region, not in the page cache yet.
    pub fn new_file(memcg: u16) -> Page {
        Page {
            flags: pg::FILE,
            ..Page::new(memcg)
        }
    }

    /// A page of a tmpfs file, not in memory yet (a hole).
    pub fn new_shmem(memcg: u16) -> Page {
        Page {
            flags: pg::SHMEM,
            ..Page::new(memcg)
        }
    }

    /// Which list the page's links are on ([`list`]; NONE: none).
    #[inline]
    pub fn list(&self) -> u8 {
        ((self.flags & pg::LIST_MASK) >> pg::LIST_PGOFF) as u8
    }

    #[inline]
    fn set_list(&mut self, id: u8) {
        debug_assert!(u32::from(id) <= pg::LIST_MASK >> pg::LIST_PGOFF);
        self.flags = (self.flags & !pg::LIST_MASK) | u32::from(id) << pg::LIST_PGOFF;
    }

    /// Order of the page cache folio holding this file page (0: an order-0 folio, and every
    /// page that is not a file page). The page, not the folio, stays the LRU unit: see
    /// mm/filemap.rs for what the model groups by folio.
    /// A file page never has zswap data, so the order lives in `zlen`, as the kernel's
    /// struct page keeps unrelated fields in one union by the page's use.
    #[inline]
    pub fn folio_order(&self) -> u8 {
        if self.has(pg::FILE) {
            self.zlen as u8
        } else {
            0
        }
    }

    #[inline]
    pub fn set_folio_order(&mut self, order: u8) {
        debug_assert!(
            self.has(pg::FILE) && order <= 9,
            "folio order {order} of a non-file page"
        );
        self.zlen = u16::from(order);
    }

    /// The LRU list this resident page belongs on (folio_lru_list).
    #[inline]
    pub fn lru_list(&self) -> u8 {
        match (self.has(pg::FILE), self.has(pg::ACTIVE)) {
            (false, false) => list::INACTIVE_ANON,
            (false, true) => list::ACTIVE_ANON,
            (true, false) => list::INACTIVE_FILE,
            (true, true) => list::ACTIVE_FILE,
        }
    }

    #[inline]
    pub fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }
    #[inline]
    pub fn set(&mut self, f: u32) {
        self.flags |= f;
    }
    #[inline]
    pub fn clear(&mut self, f: u32) {
        self.flags &= !f;
    }
}

/// A page's place on a list: the previous and next page (NONE at the ends and off lists).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Link {
    pub prev: u32,
    pub next: u32,
}

const UNLINKED: Link = Link {
    prev: NONE,
    next: NONE,
};

/// Every page record, indexed by page (it derefs to the slice of records), and the list links
/// beside them, indexed the same way (see the file comment for why apart).
#[derive(Clone, Debug)]
pub struct Pages {
    rec: Vec<Page>,
    links: Vec<Link>,
}

impl Pages {
    pub fn new(rec: Vec<Page>) -> Pages {
        let links = vec![UNLINKED; rec.len()];
        Pages { rec, links }
    }

    /// The page after `i` on its list, towards the tail (NONE: the tail, or off lists).
    #[inline]
    pub fn next(&self, i: u32) -> u32 {
        self.links[i as usize].next
    }

    /// The page before `i` on its list, towards the head.
    #[inline]
    pub fn prev(&self, i: u32) -> u32 {
        self.links[i as usize].prev
    }
}

impl Pages {
    /// Start loading page `i`'s record and links into the cache (a hint: no effect on
    /// results; an index out of range is ignored). The links are wanted when the access
    /// faults: a swap-in takes the page off the zswap LRU, a reclaim off its memory LRU.
    #[inline(always)]
    pub fn prefetch(&self, i: u32) {
        if let (Some(r), Some(l)) = (self.rec.get(i as usize), self.links.get(i as usize)) {
            crate::prefetch::prefetch(r);
            crate::prefetch::prefetch(l);
        }
    }
}

impl std::ops::Deref for Pages {
    type Target = [Page];
    #[inline]
    fn deref(&self) -> &[Page] {
        &self.rec
    }
}

impl std::ops::DerefMut for Pages {
    #[inline]
    fn deref_mut(&mut self) -> &mut [Page] {
        &mut self.rec
    }
}

impl<'a> IntoIterator for &'a Pages {
    type Item = &'a Page;
    type IntoIter = std::slice::Iter<'a, Page>;
    fn into_iter(self) -> Self::IntoIter {
        self.rec.iter()
    }
}

/// A doubly linked list threaded through the pages' links. Head = most recently added
/// (list_add), tail = oldest (where reclaim isolates). The zswap LRU adds at the tail and walks
/// from the head, as list_lru does; both use the same primitives.
#[derive(Clone, Copy, Debug)]
pub struct List {
    pub head: u32,
    pub tail: u32,
    pub len: u64,
    pub id: u8,
}

impl List {
    pub const fn new(id: u8) -> List {
        List {
            head: NONE,
            tail: NONE,
            len: 0,
            id,
        }
    }

    pub fn push_head(&mut self, pages: &mut Pages, i: u32) {
        let p = &mut pages.rec[i as usize];
        debug_assert_eq!(
            p.list(),
            list::NONE,
            "page {i} already on list {}",
            p.list()
        );
        p.set_list(self.id);
        pages.links[i as usize] = Link {
            prev: NONE,
            next: self.head,
        };
        if self.head != NONE {
            pages.links[self.head as usize].prev = i;
        } else {
            self.tail = i;
        }
        self.head = i;
        self.len += 1;
    }

    pub fn push_tail(&mut self, pages: &mut Pages, i: u32) {
        let p = &mut pages.rec[i as usize];
        debug_assert_eq!(
            p.list(),
            list::NONE,
            "page {i} already on list {}",
            p.list()
        );
        p.set_list(self.id);
        pages.links[i as usize] = Link {
            prev: self.tail,
            next: NONE,
        };
        if self.tail != NONE {
            pages.links[self.tail as usize].next = i;
        } else {
            self.head = i;
        }
        self.tail = i;
        self.len += 1;
    }

    pub fn remove(&mut self, pages: &mut Pages, i: u32) {
        debug_assert_eq!(pages.rec[i as usize].list(), self.id);
        let Link { prev, next } = pages.links[i as usize];
        if prev != NONE {
            pages.links[prev as usize].next = next;
        } else {
            self.head = next;
        }
        if next != NONE {
            pages.links[next as usize].prev = prev;
        } else {
            self.tail = prev;
        }
        pages.links[i as usize] = UNLINKED;
        pages.rec[i as usize].set_list(list::NONE);
        self.len -= 1;
    }

    pub fn pop_tail(&mut self, pages: &mut Pages) -> Option<u32> {
        let t = self.tail;
        if t == NONE {
            return None;
        }
        self.remove(pages, t);
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_record_is_small() {
        assert_eq!(std::mem::size_of::<Page>(), 24);
        assert_eq!(std::mem::size_of::<Link>(), 8);
    }

    #[test]
    fn list_order() {
        let mut pages = Pages::new(vec![Page::new(0); 4]);
        let mut l = List::new(list::INACTIVE_ANON);
        l.push_head(&mut pages, 0);
        l.push_head(&mut pages, 1);
        l.push_tail(&mut pages, 2);
        assert_eq!(l.len, 3);
        assert_eq!(l.pop_tail(&mut pages), Some(2));
        l.remove(&mut pages, 1);
        assert_eq!(l.head, 0);
        assert_eq!(l.tail, 0);
        assert_eq!(l.pop_tail(&mut pages), Some(0));
        assert_eq!(l.pop_tail(&mut pages), None);
        assert_eq!(l.len, 0);
    }
}
