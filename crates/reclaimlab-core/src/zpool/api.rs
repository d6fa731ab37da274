//! The seam between zswap/zram and an allocator: the [`Zpool`] trait and what an allocator
//! plug-in declares ([`ZpoolInfo`]).

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
    /// The page allocator could not supply the pool's growth (-ENOMEM; the caller's
    /// accounting, never the allocator's own answer).
    NoMem,
}

pub trait Zpool: Send {
    /// Kernel name of the allocator ("zsmalloc", "zbud").
    fn name(&self) -> &'static str;
    /// zs_malloc / zbud_alloc: store an object of `size` bytes (the caller's length; zsmalloc
    /// adds its 8-byte handle header itself).
    fn malloc(&mut self, size: u32) -> Result<Handle, ZpoolError>;
    /// zs_free / zbud_free.
    fn free(&mut self, handle: Handle);
    /// A cache hint for a coming `free(handle)` (the access loop's look-ahead, sched.rs):
    /// `deep` false starts loading the handle's own entry, true (a few accesses later, the
    /// entry cached by then) what it points to. Never changes a result; none by default.
    fn prefetch(&self, _handle: Handle, _deep: bool) {}
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
    /// The rows of the pool's debugfs `classes` file (zsmalloc only; empty for zbud, which
    /// has no size classes).
    fn classes(&self) -> Vec<ZsClassRow> {
        Vec::new()
    }
}

/// One row of /sys/kernel/debug/zsmalloc/<pool>/classes as 6.12's `zs_stats_size_show`
/// prints it (one row per distinct size class).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ZsClassRow {
    /// The kernel's class index ("class"): (size − 32) / 16.
    pub class: u32,
    pub size: u32,
    /// zspages per in-use-ratio group, columns "10%" … "99%", "100%" (ZS_INUSE_RATIO_10 …
    /// ZS_INUSE_RATIO_100; an empty zspage is freed at once, so ZS_INUSE_RATIO_0 has none).
    pub inuse_ratio: [u64; 11],
    pub obj_allocated: u64,
    pub obj_used: u64,
    pub pages_used: u64,
    pub pages_per_zspage: u32,
    /// zs_can_compact: pages compaction could free in this class.
    pub freeable: u64,
}

/// One allocator plug-in: its kernel name, the kernel versions that have it, and how to make
/// a pool. Each allocator's file declares its own; [`ZPOOLS`] registers them.
pub struct ZpoolInfo {
    /// Kernel name, as zswap's `zpool` parameter spells it.
    pub name: &'static str,
    /// Last kernel version (major, minor) that has it; None: every version with a preset.
    pub until: Option<(u32, u32)>,
    /// One-line description.
    pub doc: &'static str,
    pub new: fn() -> Box<dyn Zpool>,
}

impl ZpoolInfo {
    /// Whether kernel `version` ("6.12") has this allocator.
    pub fn exists_in(&self, version: &str) -> bool {
        match (self.until, parse_version(version)) {
            (None, _) => true,
            (Some(last), Some(v)) => v <= last,
            (Some(_), None) => false,
        }
    }

    /// The kernel versions with a preset that have this allocator.
    pub fn presets(&self) -> Vec<&'static str> {
        crate::policy::PRESETS
            .iter()
            .copied()
            .filter(|v| self.exists_in(v))
            .collect()
    }
}

pub(crate) fn parse_version(v: &str) -> Option<(u32, u32)> {
    let (a, b) = v.split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}
