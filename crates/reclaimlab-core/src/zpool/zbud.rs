//! zbud as mm/zbud.c had it before its removal (last form ≤6.15, after the 6.5 removal of its
//! LRU/eviction): at most two objects ("buddies") per 4 KiB page, sized in 64-byte chunks.
//!
//! Pages live in an index arena and are linked into the kernel's lists (unbuddied[free
//! chunks], buddied) as intrusive doubly linked lists, inserted at the head as `list_add`
//! does, because which page an allocation lands in depends on that order.

use super::api::{Handle, Zpool, ZpoolError, ZpoolInfo};

const PAGE_SIZE: u32 = 4096;
const NCHUNKS_ORDER: u32 = 6;
const CHUNK_SHIFT: u32 = 12 - NCHUNKS_ORDER;
const CHUNK_SIZE: u32 = 1 << CHUNK_SHIFT;
/// The header takes the first chunk; 63 are left for the buddies.
const ZHDR_SIZE_ALIGNED: u32 = CHUNK_SIZE;
const NCHUNKS: usize = ((PAGE_SIZE - ZHDR_SIZE_ALIGNED) >> CHUNK_SHIFT) as usize;
/// zbud_alloc refuses anything that would leave no chunk for a buddy: 4096 − 64 − 64.
const MAX_SIZE: u32 = PAGE_SIZE - ZHDR_SIZE_ALIGNED - CHUNK_SIZE;

const NIL: u32 = u32::MAX;
/// `list` value of a page holding both buddies.
const BUDDIED: u8 = NCHUNKS as u8;
/// `list` value of an arena entry on the free-page list.
const DEAD: u8 = u8::MAX;

const FIRST: u32 = 0;
const LAST: u32 = 1;

#[derive(Clone, Copy, Debug)]
struct ZbudPage {
    prev: u32,
    next: u32,
    first_chunks: u8,
    last_chunks: u8,
    /// Which list the page is on: unbuddied[free chunks] (1..=62) or `BUDDIED`.
    list: u8,
}

#[derive(Clone)]
pub struct Zbud {
    pages: Vec<ZbudPage>,
    free_page: u32,
    unbuddied: [u32; NCHUNKS],
    buddied: u32,
    pages_nr: u64,
    objects: u64,
}

fn new_pool() -> Box<dyn Zpool> {
    Box::new(Zbud::new())
}

/// zbud (like z3fold) was removed in 6.15: it exists up to 6.14.
pub const ZPOOL: ZpoolInfo = ZpoolInfo {
    name: "zbud",
    until: Some((6, 14)),
    doc: "at most two objects per page, no compaction",
    new: new_pool,
};

impl std::fmt::Debug for Zbud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zbud")
            .field("pages_nr", &self.pages_nr)
            .field("objects", &self.objects)
            .finish()
    }
}

impl Default for Zbud {
    fn default() -> Self {
        Self::new()
    }
}

fn size_to_chunks(size: u32) -> u32 {
    (size + CHUNK_SIZE - 1) >> CHUNK_SHIFT
}

/// Handles name (page, buddy); page index + 1 keeps handle 0 unused, as in the kernel where a
/// handle is an address.
fn encode(page: u32, bud: u32) -> Handle {
    ((page + 1) << 1) | bud
}

impl Zbud {
    pub fn new() -> Self {
        Zbud {
            pages: Vec::new(),
            free_page: NIL,
            unbuddied: [NIL; NCHUNKS],
            buddied: NIL,
            pages_nr: 0,
            objects: 0,
        }
    }

    /// Heap bytes of bookkeeping (Vec capacity included).
    pub fn metadata_bytes(&self) -> usize {
        self.pages.capacity() * std::mem::size_of::<ZbudPage>()
    }

    fn head_mut(&mut self, list: u8) -> &mut u32 {
        if list == BUDDIED {
            &mut self.buddied
        } else {
            &mut self.unbuddied[list as usize]
        }
    }

    fn list_add(&mut self, p: u32, list: u8) {
        let head = *self.head_mut(list);
        let pg = &mut self.pages[p as usize];
        pg.prev = NIL;
        pg.next = head;
        pg.list = list;
        if head != NIL {
            self.pages[head as usize].prev = p;
        }
        *self.head_mut(list) = p;
    }

    fn list_del(&mut self, p: u32) {
        let ZbudPage {
            prev, next, list, ..
        } = self.pages[p as usize];
        if prev != NIL {
            self.pages[prev as usize].next = next;
        } else {
            *self.head_mut(list) = next;
        }
        if next != NIL {
            self.pages[next as usize].prev = prev;
        }
    }

    fn num_free_chunks(&self, p: u32) -> u8 {
        let pg = &self.pages[p as usize];
        (NCHUNKS as u32 - pg.first_chunks as u32 - pg.last_chunks as u32) as u8
    }

    /// A page with one buddy goes to unbuddied[its free chunks], one with two to buddied.
    fn relist(&mut self, p: u32) {
        let pg = self.pages[p as usize];
        if pg.first_chunks == 0 || pg.last_chunks == 0 {
            let free = self.num_free_chunks(p);
            self.list_add(p, free);
        } else {
            self.list_add(p, BUDDIED);
        }
    }

    fn new_page(&mut self) -> u32 {
        let fresh = ZbudPage {
            prev: NIL,
            next: NIL,
            first_chunks: 0,
            last_chunks: 0,
            list: DEAD,
        };
        self.pages_nr += 1;
        if self.free_page != NIL {
            let p = self.free_page;
            self.free_page = self.pages[p as usize].next;
            self.pages[p as usize] = fresh;
            p
        } else {
            // Page index + 1 shifted left by one must fit a u32 handle.
            assert!(
                self.pages.len() < (1 << 31) - 1,
                "zbud page arena exhausted"
            );
            self.pages.push(fresh);
            (self.pages.len() - 1) as u32
        }
    }
}

impl Zpool for Zbud {
    fn name(&self) -> &'static str {
        "zbud"
    }

    fn malloc(&mut self, size: u32) -> Result<Handle, ZpoolError> {
        if size == 0 {
            return Err(ZpoolError::Invalid);
        }
        if size > MAX_SIZE {
            return Err(ZpoolError::NoSpace);
        }
        let chunks = size_to_chunks(size);
        // Tightest fit: the first non-empty list with at least `chunks` free, its head page.
        let found = (chunks as usize..NCHUNKS)
            .map(|i| self.unbuddied[i])
            .find(|&p| p != NIL);
        let (p, bud) = match found {
            Some(p) => {
                self.list_del(p);
                let bud = if self.pages[p as usize].first_chunks == 0 {
                    FIRST
                } else {
                    LAST
                };
                (p, bud)
            }
            None => (self.new_page(), FIRST),
        };
        let pg = &mut self.pages[p as usize];
        if bud == FIRST {
            pg.first_chunks = chunks as u8;
        } else {
            pg.last_chunks = chunks as u8;
        }
        self.relist(p);
        self.objects += 1;
        Ok(encode(p, bud))
    }

    fn free(&mut self, handle: Handle) {
        let p = (handle >> 1).wrapping_sub(1);
        let bud = handle & 1;
        let live = (p as usize) < self.pages.len() && {
            let pg = &self.pages[p as usize];
            pg.list != DEAD
                && if bud == FIRST {
                    pg.first_chunks != 0
                } else {
                    pg.last_chunks != 0
                }
        };
        assert!(live, "zbud_free of handle {handle} that is not live");
        let pg = &mut self.pages[p as usize];
        if bud == FIRST {
            pg.first_chunks = 0;
        } else {
            pg.last_chunks = 0;
        }
        self.list_del(p);
        let pg = &mut self.pages[p as usize];
        if pg.first_chunks == 0 && pg.last_chunks == 0 {
            pg.list = DEAD;
            pg.next = self.free_page;
            self.free_page = p;
            self.pages_nr -= 1;
        } else {
            self.relist(p);
        }
        self.objects -= 1;
    }

    fn total_pages(&self) -> u64 {
        self.pages_nr
    }

    fn compactable_pages(&self) -> u64 {
        0
    }

    fn compact(&mut self) -> u64 {
        0
    }

    fn pages_compacted(&self) -> u64 {
        0
    }

    fn objects(&self) -> u64 {
        self.objects
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page_of(h: Handle) -> u32 {
        (h >> 1) - 1
    }

    /// Recounts objects and pages from the arena and checks every list; returns them.
    fn recount(zb: &Zbud) -> (u64, u64) {
        let (mut objects, mut pages) = (0u64, 0u64);
        let mut live = 0usize;
        for pg in zb.pages.iter().filter(|pg| pg.list != DEAD) {
            live += 1;
            pages += 1;
            objects += (pg.first_chunks != 0) as u64 + (pg.last_chunks != 0) as u64;
            assert!(pg.first_chunks != 0 || pg.last_chunks != 0);
            assert!(pg.first_chunks as usize + pg.last_chunks as usize <= NCHUNKS);
        }
        let mut listed = 0usize;
        let heads = zb
            .unbuddied
            .iter()
            .enumerate()
            .map(|(i, &h)| (i as u8, h))
            .chain(std::iter::once((BUDDIED, zb.buddied)));
        for (list, head) in heads {
            let mut prev = NIL;
            let mut p = head;
            while p != NIL {
                let pg = &zb.pages[p as usize];
                assert_eq!(pg.prev, prev);
                assert_eq!(pg.list, list);
                let both = pg.first_chunks != 0 && pg.last_chunks != 0;
                if list == BUDDIED {
                    assert!(both);
                } else {
                    assert!(!both);
                    assert_eq!(zb.num_free_chunks(p), list);
                }
                listed += 1;
                prev = p;
                p = pg.next;
            }
        }
        assert_eq!(listed, live);
        (objects, pages)
    }

    fn check(zb: &Zbud) {
        assert_eq!(recount(zb), (zb.objects(), zb.total_pages()));
    }

    #[test]
    fn two_halves_share_a_page() {
        let mut zb = Zbud::new();
        let a = zb.malloc(1984).unwrap();
        let b = zb.malloc(1984).unwrap();
        assert_eq!(page_of(a), page_of(b));
        assert_eq!((a & 1, b & 1), (FIRST, LAST));
        assert_eq!(zb.total_pages(), 1);
        // 32 + 32 chunks do not fit the 63 usable ones.
        let c = zb.malloc(1985).unwrap();
        let d = zb.malloc(1985).unwrap();
        assert_ne!(page_of(c), page_of(d));
        assert_eq!(zb.total_pages(), 3);
        // But 32 + 31 do.
        let e = zb.malloc(1984).unwrap();
        assert_eq!(page_of(e), page_of(d));
        assert_eq!(zb.total_pages(), 3);
        check(&zb);
    }

    #[test]
    fn size_limits() {
        let mut zb = Zbud::new();
        assert_eq!(zb.malloc(0), Err(ZpoolError::Invalid));
        assert_eq!(zb.malloc(3969), Err(ZpoolError::NoSpace));
        assert_eq!(zb.malloc(4096), Err(ZpoolError::NoSpace));
        let big = zb.malloc(3968).unwrap();
        assert_eq!(zb.total_pages(), 1);
        // 62 chunks leave one: a 64-byte object still fits as the last buddy.
        let tiny = zb.malloc(64).unwrap();
        assert_eq!(page_of(tiny), page_of(big));
        let tiny2 = zb.malloc(1).unwrap();
        assert_ne!(page_of(tiny2), page_of(big));
        assert_eq!(zb.total_pages(), 2);
        assert_eq!(zb.compact(), 0);
        assert_eq!(zb.compactable_pages(), 0);
        assert_eq!(zb.pages_compacted(), 0);
        check(&zb);
    }

    #[test]
    fn tightest_fit_wins() {
        let mut zb = Zbud::new();
        let loose = zb.malloc(10 * 64).unwrap(); // 53 chunks free
        let tight = zb.malloc(40 * 64).unwrap(); // 10 + 40 fit: same page, buddied
        assert_eq!(page_of(loose), page_of(tight));
        let tight = zb.malloc(40 * 64).unwrap(); // new page, 23 free
        let loose2 = zb.malloc(60 * 64).unwrap(); // new page, 3 free
        assert_eq!(zb.total_pages(), 3);
        zb.free(loose);
        // Page 0 now holds 40 chunks (23 free), like page 1; page 2 has 3 free.
        let h = zb.malloc(20 * 64).unwrap();
        // Lists 20..=22 are empty; list 23 holds pages 0 and 1, page 0 re-listed more recently.
        assert_eq!(page_of(h), 0);
        let h2 = zb.malloc(20 * 64).unwrap();
        assert_eq!(page_of(h2), page_of(tight));
        let h3 = zb.malloc(3 * 64).unwrap();
        assert_eq!(page_of(h3), page_of(loose2));
        assert_eq!(zb.total_pages(), 3);
        check(&zb);
    }

    #[test]
    fn list_order_is_most_recent_first() {
        let mut zb = Zbud::new();
        let a = zb.malloc(40 * 64).unwrap();
        let b = zb.malloc(40 * 64).unwrap();
        assert_ne!(page_of(a), page_of(b));
        let h = zb.malloc(64).unwrap();
        assert_eq!(
            page_of(h),
            page_of(b),
            "list_add puts the newer page at the head"
        );
    }

    #[test]
    fn first_slot_refilled_after_its_buddy_is_freed() {
        let mut zb = Zbud::new();
        let a = zb.malloc(1000).unwrap();
        let b = zb.malloc(1000).unwrap();
        zb.free(a);
        assert_eq!(zb.total_pages(), 1);
        let c = zb.malloc(1000).unwrap();
        assert_eq!(c, a, "the free first buddy is reused");
        assert_eq!(page_of(b), page_of(c));
        check(&zb);
    }

    #[test]
    fn page_freed_when_both_buddies_are() {
        let mut zb = Zbud::new();
        let a = zb.malloc(100).unwrap();
        let b = zb.malloc(100).unwrap();
        zb.free(b);
        assert_eq!(zb.total_pages(), 1);
        zb.free(a);
        assert_eq!(zb.total_pages(), 0);
        assert_eq!(zb.objects(), 0);
        check(&zb);
    }

    #[test]
    #[should_panic(expected = "not live")]
    fn double_free_panics() {
        let mut zb = Zbud::new();
        let a = zb.malloc(100).unwrap();
        let _b = zb.malloc(100).unwrap();
        zb.free(a);
        zb.free(a);
    }

    #[test]
    fn randomized_consistency() {
        let mut s = 0x2545_F491_4F6C_DD1Du64;
        let mut rnd = move |n: u64| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            s.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
        };
        let mut zb = Zbud::new();
        let mut live: Vec<Handle> = Vec::new();
        for _ in 0..20_000 {
            if rnd(100) < 55 || live.is_empty() {
                let size = 1 + rnd(3968) as u32;
                live.push(zb.malloc(size).unwrap());
            } else {
                let i = rnd(live.len() as u64) as usize;
                zb.free(live.swap_remove(i));
            }
            assert_eq!(zb.objects(), live.len() as u64);
            check(&zb);
            // Never worse than 1:1, never better than 2:1.
            assert!(zb.total_pages() <= zb.objects());
            assert!(2 * zb.total_pages() >= zb.objects());
        }
        for h in live.drain(..) {
            zb.free(h);
        }
        check(&zb);
        assert_eq!(zb.total_pages(), 0);
    }
}
