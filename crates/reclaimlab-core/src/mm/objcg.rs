//! Kernel objects charged byte-wise to a memcg through its obj_cgroup: the slab objects an
//! unnamed file (`tmpfile`) is made of → docs/model/memcg.md#kernel-objects-of-a-tmpfile.
//!
//! Follows 6.12's mm/memcontrol.c: `obj_cgroup_charge` (`consume_obj_stock`, else whole pages
//! through `obj_cgroup_charge_pages` → `try_charge_memcg`, the rest of the last page into the
//! obj stock by `refill_obj_stock(.., false)`), `obj_cgroup_uncharge` (`refill_obj_stock(..,
//! true)`: whole pages go back only once the stock holds MORE than PAGE_SIZE bytes, and then
//! through `obj_cgroup_uncharge_pages` → `refill_stock`, into the page stock, not the counter)
//! and `drain_obj_stock` (called by `drain_all_stock`: whole pages to the page stock, the
//! remainder to `objcg->nr_charged_bytes`, still charged). Each object costs
//! `obj_full_size`: the cache's s->size plus the obj_cgroup pointer kept for it.
//!
//! The objects: `open(O_TMPFILE)` (do_tmpfile → vfs_tmpfile) allocates the `struct file`
//! (filp), the dentry (d_alloc) and the filesystem's inode (alloc_inode), in that order, all
//! from SLAB_ACCOUNT caches, charged to the opener's memcg (current_obj_cgroup); the last
//! close at exit frees them (__fput: file_free, dput → iput → evict → destroy_inode).
//!
//! Simplified: one obj stock per memcg, always caching that memcg's objcg (the kernel has one
//! per CPU, switched by whichever objcg charges or frees on that CPU), like the page stock
//! (mm/memcg.rs); frees are immediate (the inode's and dentry's are RCU-delayed in the kernel,
//! and run on whatever CPU the callback runs); the root memcg charges nothing (it has no
//! objcg); MEMCG_KMEM and the slab statistics are not exported; a tmpfile's xarray nodes
//! (radix_tree_node, charged as its page cache grows, XA_FLAGS_ACCOUNT) and the objects of a
//! named file made before the run (where the model does not know) are not modelled.
//!
//! A file made during the run by a create_files phase (open(O_CREAT)) charges its dentry,
//! inode and its mapping's xarray nodes (`create_file`), and an ext4 page written through
//! write_begin its buffer heads (`create_empty_buffers`, freed with the page by
//! `free_buffers`) → docs/model/memcg.md#kernel-memory-of-new-files-a-create-loop.

use super::filemap::FsType;
use super::page::pg;
use super::{Ctx, Mm, Oom, PAGE_SIZE};

/// obj_full_size's extra: sizeof(struct obj_cgroup *) on a 64-bit kernel.
const OBJCG_POINTER_SIZE: u64 = 8;

/// s->size (the <objsize> column of /proc/slabinfo) of the SLAB_ACCOUNT caches a tmpfile is
/// made of, as this lab host's kernel (6.18.44, x86_64, its distribution config) reports
/// them: read from its /proc/slabinfo on 2026-11-24. The 6.12 guest's may differ by a
/// cache line where a struct changed between the versions.
const FILP_SIZE: u64 = 192;
const DENTRY_SIZE: u64 = 192;

impl FsType {
    /// s->size of the filesystem's inode cache (same source as FILP_SIZE): ext4_inode_cache,
    /// xfs_inode, btrfs_inode, each created with SLAB_ACCOUNT.
    fn inode_cache_size(self) -> u64 {
        match self {
            FsType::Ext4 => 1128,
            FsType::Xfs => 1024,
            FsType::Btrfs => 1016,
        }
    }
}

/// The objects of one tmpfile on a filesystem of type `fs`, in allocation order: filp,
/// dentry, inode (obj_full_size each).
pub(crate) fn tmpfile_objects(fs: FsType) -> [u64; 3] {
    [FILP_SIZE, DENTRY_SIZE, fs.inode_cache_size()].map(|s| s + OBJCG_POINTER_SIZE)
}

/// s->size of buffer_head and radix_tree_node (the xarray's nodes), read from this lab
/// host's /proc/slabinfo on 2026-11-25 (6.18.44; same source as FILP_SIZE). A page cache
/// folio's buffer heads come from folio_alloc_buffers with __GFP_ACCOUNT, charged to the
/// folio's memcg; a mapping's xarray nodes from radix_tree_node_cachep (SLAB_ACCOUNT) with
/// the mapping's XA_FLAGS_ACCOUNT.
const BUFFER_HEAD_SIZE: u64 = 104;
const RADIX_TREE_NODE_SIZE: u64 = 584;
/// XA_CHUNK_SIZE: slots of an xarray node (XA_CHUNK_SHIFT 6).
const XA_CHUNK_SLOTS: u64 = 64;

/// The xarray nodes of a mapping holding indices 0..`pages`: none for a single entry (kept
/// in xa_head), else one per 64 slots on each level up to a single root node.
fn xa_nodes(pages: u64) -> u64 {
    if pages <= 1 {
        return 0;
    }
    let mut level = pages.div_ceil(XA_CHUNK_SLOTS);
    let mut total = level;
    while level > 1 {
        level = level.div_ceil(XA_CHUNK_SLOTS);
        total += level;
    }
    total
}

/// The kernel objects of a file of `pages` pages made by open(O_CREAT) on a filesystem of
/// type `fs` and written whole, in allocation order (obj_full_size each): its dentry
/// (d_alloc at lookup), its inode (alloc_inode), and the xarray nodes its page cache fills
/// (charged here at once; the kernel charges each as the first page of its range arrives).
/// They stay after close: the dentry and inode stay cached, the nodes hold the pages' shadow
/// entries once the pages are reclaimed.
pub(crate) fn created_file_object(fs: FsType, pages: u64, k: u64) -> Option<u64> {
    let size = match k {
        0 => DENTRY_SIZE,
        1 => fs.inode_cache_size(),
        k if k < 2 + xa_nodes(pages) => RADIX_TREE_NODE_SIZE,
        _ => return None,
    };
    Some(size + OBJCG_POINTER_SIZE)
}

impl Mm {
    /// obj_cgroup_charge (6.12) of `size` bytes (less than a page) to memcg `m`.
    pub(crate) fn obj_cgroup_charge(
        &mut self,
        ctx: &mut Ctx,
        m: u16,
        size: u64,
    ) -> Result<(), Oom> {
        debug_assert!(m != 0 && size < PAGE_SIZE);
        // consume_obj_stock
        if let Some(b) = self.memcgs[m as usize].obj_stock.as_mut() {
            if *b >= size {
                *b -= size;
                return Ok(());
            }
        }
        // One page: obj_cgroup_charge_pages → try_charge_memcg (may reclaim, or OOM).
        self.try_charge(ctx, m)?;
        self.refill_obj_stock(m, PAGE_SIZE - size, false);
        Ok(())
    }

    /// obj_cgroup_uncharge (6.12): the bytes go back to the obj stock.
    pub(crate) fn obj_cgroup_uncharge(&mut self, m: u16, size: u64) {
        self.refill_obj_stock(m, size, true);
    }

    /// refill_obj_stock (6.12): see [`refill_obj_stock_bytes`]; the pages it gives back go to
    /// the page stock (obj_cgroup_uncharge_pages → refill_stock): still charged.
    fn refill_obj_stock(&mut self, m: u16, nr_bytes: u64, allow_uncharge: bool) {
        let mc = &mut self.memcgs[m as usize];
        let (left, nr_pages) = refill_obj_stock_bytes(
            mc.obj_stock,
            &mut mc.nr_charged_bytes,
            nr_bytes,
            allow_uncharge,
        );
        mc.obj_stock = Some(left);
        if nr_pages > 0 {
            self.refill_stock(m, nr_pages);
        }
    }

    /// drain_obj_stock (6.12), as drain_local_stock calls it before draining the page stock:
    /// whole pages to the page stock (__refill_stock), the rest to objcg->nr_charged_bytes.
    pub(super) fn drain_obj_stock(&mut self, m: u16) {
        let mc = &mut self.memcgs[m as usize];
        if let Some(b) = mc.obj_stock.take() {
            mc.stock += b / PAGE_SIZE;
            mc.nr_charged_bytes += b % PAGE_SIZE;
        }
    }

    /// The open(O_TMPFILE) of process `process`'s tmpfiles: charge the objects of each that
    /// are not charged yet (a charge that OOMs leaves the rest for the retry).
    pub(crate) fn open_tmpfiles(&mut self, ctx: &mut Ctx, process: u32) -> Result<(), Oom> {
        for r in 0..self.regions.len() {
            let reg = &self.regions[r];
            if reg.process != process || !reg.tmpfile || reg.memcg == 0 {
                continue;
            }
            let Some(f) = &reg.file else { continue };
            let objs = tmpfile_objects(self.fs[f.fs as usize].fstype);
            let m = reg.memcg;
            while (self.regions[r].kobjs as usize) < objs.len() {
                self.obj_cgroup_charge(ctx, m, objs[self.regions[r].kobjs as usize])?;
                self.regions[r].kobjs += 1;
            }
        }
        Ok(())
    }

    /// open(O_CREAT) of create_files file region `r`: its objects not charged yet (a charge
    /// that OOMs leaves the rest for the retry), then its inode in the journal (ext4_create,
    /// mm/journal.rs).
    pub(crate) fn create_file(&mut self, ctx: &mut Ctx, r: usize) -> Result<(), Oom> {
        let Some(f) = &self.regions[r].file else {
            return Ok(());
        };
        let fstype = self.fs[f.fs as usize].fstype;
        let (m, pages) = (self.regions[r].memcg, self.regions[r].pages as u64);
        if m != 0 {
            while let Some(size) =
                created_file_object(fstype, pages, u64::from(self.regions[r].cobjs))
            {
                self.obj_cgroup_charge(ctx, m, size)?;
                self.regions[r].cobjs += 1;
            }
        }
        if !self.regions[r]
            .file
            .as_ref()
            .is_some_and(|f| f.journal.created)
        {
            self.ext4_create(ctx, r);
        }
        Ok(())
    }

    /// Buffer heads per page of page `i`'s filesystem: ext4's, one per block (xfs and btrfs
    /// keep none: iomap's per-folio state is not charged, btrfs has its own).
    fn buffers_per_page(&self, i: u32) -> Option<u64> {
        let f = self.regions[self.region_index(i)].file.as_ref()?;
        let fs = &self.fs[f.fs as usize];
        (fs.fstype == FsType::Ext4).then(|| fs.journal.geom.blocks_per_page())
    }

    /// folio_create_empty_buffers from a write(2)'s write_begin (ext4_block_write_begin) on a
    /// folio without buffers (PG_private): one buffer head per block, each charged to the
    /// folio's memcg.
    pub(crate) fn create_empty_buffers(&mut self, ctx: &mut Ctx, i: u32) -> Result<(), Oom> {
        let p = &self.pages[i as usize];
        if p.has(pg::PRIVATE) {
            return Ok(());
        }
        let Some(n) = self.buffers_per_page(i) else {
            return Ok(());
        };
        let m = p.memcg;
        if m != 0 {
            for _ in 0..n {
                self.obj_cgroup_charge(ctx, m, BUFFER_HEAD_SIZE + OBJCG_POINTER_SIZE)?;
            }
        }
        self.pages[i as usize].set(pg::PRIVATE);
        Ok(())
    }

    /// try_to_free_buffers as the folio leaves the page cache (filemap_release_folio before
    /// __remove_mapping): its buffer heads are freed and uncharged.
    pub(crate) fn free_buffers(&mut self, i: u32) {
        let p = &mut self.pages[i as usize];
        if !p.has(pg::PRIVATE) {
            return;
        }
        p.clear(pg::PRIVATE);
        let m = p.memcg;
        let n = self.buffers_per_page(i).unwrap_or(0);
        if m != 0 {
            for _ in 0..n {
                self.obj_cgroup_uncharge(m, BUFFER_HEAD_SIZE + OBJCG_POINTER_SIZE);
            }
        }
    }

    /// The last close of a tmpfile at exit (__fput): its charged objects are freed.
    pub(crate) fn free_tmpfile_objects(&mut self, r: usize) {
        let n = std::mem::take(&mut self.regions[r].kobjs) as usize;
        let Some(f) = &self.regions[r].file else {
            return;
        };
        let objs = tmpfile_objects(self.fs[f.fs as usize].fstype);
        let m = self.regions[r].memcg;
        for &size in &objs[..n] {
            self.obj_cgroup_uncharge(m, size);
        }
    }
}

/// refill_obj_stock's arithmetic (6.12): a stock not caching the objcg (`None`: drained)
/// first takes objcg->nr_charged_bytes and may then uncharge; whole pages are given back only
/// when the stock holds more than PAGE_SIZE bytes. Returns the stock's bytes and the pages
/// given back.
fn refill_obj_stock_bytes(
    stock: Option<u64>,
    nr_charged_bytes: &mut u64,
    nr_bytes: u64,
    mut allow_uncharge: bool,
) -> (u64, u64) {
    let stock = match stock {
        Some(b) => b,
        None => {
            allow_uncharge = true;
            std::mem::take(nr_charged_bytes)
        }
    } + nr_bytes;
    if allow_uncharge && stock > PAGE_SIZE {
        (stock % PAGE_SIZE, stock / PAGE_SIZE)
    } else {
        (stock, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_files_objects_are_its_dentry_inode_and_xarray_nodes() {
        // One page: the entry sits in xa_head, no node; 32 pages: one node; 65: two leaves
        // and a root; 4096: 64 leaves and a root.
        assert_eq!(
            [1, 32, 64, 65, 4096, 4097].map(xa_nodes),
            [0, 1, 1, 3, 65, 68]
        );
        let sizes: Vec<u64> = (0..)
            .map_while(|k| created_file_object(FsType::Ext4, 32, k))
            .collect();
        assert_eq!(sizes, [200, 1136, 592]);
    }

    #[test]
    fn refill_obj_stock_gives_pages_back_only_above_a_page() {
        let mut charged = 0;
        // The ext4 tmpfile's three frees after its charge: back to exactly PAGE_SIZE, kept.
        let mut stock = PAGE_SIZE - 1536;
        for size in tmpfile_objects(FsType::Ext4) {
            let (left, pages) = refill_obj_stock_bytes(Some(stock), &mut charged, size, true);
            assert_eq!(pages, 0);
            stock = left;
        }
        assert_eq!(stock, PAGE_SIZE);
        // One byte more and a page goes back.
        assert_eq!(
            refill_obj_stock_bytes(Some(stock), &mut charged, 1, true),
            (1, 1)
        );
        // A charge's remainder never uncharges, even past a page.
        assert_eq!(
            refill_obj_stock_bytes(Some(stock), &mut charged, 100, false),
            (PAGE_SIZE + 100, 0)
        );
        // A drained stock takes objcg->nr_charged_bytes and may uncharge.
        charged = PAGE_SIZE - 10;
        assert_eq!(
            refill_obj_stock_bytes(None, &mut charged, 20, false),
            (10, 1)
        );
        assert_eq!(charged, 0);
    }
}
