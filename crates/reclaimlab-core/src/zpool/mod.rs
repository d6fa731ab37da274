//! Compressed-object allocators behind one small seam, as zswap and zram use them.
//!
//! The seam mirrors the handful of calls mm/zswap.c and drivers/block/zram make into
//! mm/zsmalloc.c (zs_malloc, zs_free, zs_get_total_pages, zs_compact and the compaction
//! shrinker's count). Adding an allocator is one file here and its entry in [`ZPOOLS`].

mod api;
pub mod zbud;
pub mod zsmalloc;

pub use api::{Handle, Zpool, ZpoolError, ZpoolInfo, ZsClassRow};

use crate::error::ConfigError;

/// Every allocator the model has, by kernel name.
pub const ZPOOLS: &[ZpoolInfo] = &[zsmalloc::ZPOOL, zbud::ZPOOL];

/// Allocators that kernels had but the model does not.
const NOT_MODELLED: &[(&str, &str)] = &[(
    "z3fold",
    "z3fold (up to 6.14) is not modelled; use \"zbud\" or \"zsmalloc\"",
)];

/// zswap's default allocator (CONFIG_ZSWAP_ZPOOL_DEFAULT's Kconfig default) in kernel `version`:
/// zbud up to 6.6, zsmalloc from 6.7 (Nhat Pham, "mm: zswap: make zsmalloc the default
/// allocator"; the only one since 6.15). Distribution configs follow it (Debian 6.1: zbud).
pub fn default_for(version: &str) -> &'static str {
    match api::parse_version(version) {
        Some(v) if v < (6, 7) => zbud::ZPOOL.name,
        _ => zsmalloc::ZPOOL.name,
    }
}

/// The allocator `name` for kernel `version`; `path` is the lowered key that chose it. Unknown
/// names, unmodelled ones and ones the version lacks are errors naming the key.
pub fn select(name: &str, version: &str, path: &str) -> Result<&'static ZpoolInfo, ConfigError> {
    if let Some((_, why)) = NOT_MODELLED.iter().find(|(n, _)| *n == name) {
        return Err(ConfigError::unavailable(path, *why));
    }
    let Some(info) = ZPOOLS.iter().find(|z| z.name == name) else {
        let names: Vec<String> = ZPOOLS.iter().map(|z| format!("{:?}", z.name)).collect();
        return Err(ConfigError::unknown(
            path,
            format!(
                "unknown allocator {name:?}; expected one of {}",
                names.join(", ")
            ),
        ));
    };
    if !info.exists_in(version) {
        return Err(ConfigError::unavailable(
            path,
            format!(
                "{name} does not exist in kernel {version} (it exists in {})",
                info.presets().join(", ")
            ),
        ));
    }
    Ok(info)
}
