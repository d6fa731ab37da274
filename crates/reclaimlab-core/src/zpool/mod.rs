//! Compressed-object allocators behind one small seam, as zswap and zram use them.
//!
//! The seam mirrors the handful of calls mm/zswap.c and drivers/block/zram make into
//! mm/zsmalloc.c (zs_malloc, zs_free, zs_get_total_pages, zs_compact and the compaction
//! shrinker's count). Adding an allocator is one file here and one arm in [`new_zpool`].

pub mod zbud;
pub mod zsmalloc;

/// An allocator handle. Stable for the object's lifetime, also across compaction (the kernel's
/// handles are an indirection for the same reason).
pub type Handle = u32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZpoolError {
    /// The object is larger than the allocator can hold (zsmalloc: > 4096; zbud: > 3968).
    /// The kernel returns -ENOSPC; zswap counts it as reject_compress_poor.
    NoSpace,
    /// Size 0 (the kernel's -EINVAL).
    Invalid,
}

pub trait Zpool: Send {
    /// Kernel name of the allocator ("zsmalloc", "zbud").
    fn name(&self) -> &'static str;
    /// zs_malloc / zbud_alloc: store an object of `size` bytes (the caller's length; zsmalloc
    /// adds its 8-byte handle header itself).
    fn malloc(&mut self, size: u32) -> Result<Handle, ZpoolError>;
    /// zs_free / zbud_free.
    fn free(&mut self, handle: Handle);
    /// zs_get_total_pages: pages currently backing the pool.
    fn total_pages(&self) -> u64;
    /// The compaction shrinker's count: pages that compaction could free now.
    fn compactable_pages(&self) -> u64;
    /// zs_compact: compact every class; returns pages freed. zbud cannot compact (returns 0).
    fn compact(&mut self) -> u64;
    /// Cumulative pages freed by compaction (zram mm_stat pages_compacted).
    fn pages_compacted(&self) -> u64;
    /// Live objects.
    fn objects(&self) -> u64;
}

/// Which allocator a pool uses. `chain_size` is CONFIG_ZSMALLOC_CHAIN_SIZE (8 since 6.3; the
/// older zsmalloc had 4 pages per zspage at most).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZpoolKind {
    Zsmalloc { chain_size: u32 },
    Zbud,
}

pub fn new_zpool(kind: ZpoolKind) -> Box<dyn Zpool> {
    match kind {
        ZpoolKind::Zsmalloc { chain_size } => Box::new(zsmalloc::Zsmalloc::new(chain_size)),
        ZpoolKind::Zbud => Box::new(zbud::Zbud::new()),
    }
}
