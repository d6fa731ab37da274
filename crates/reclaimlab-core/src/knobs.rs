//! Kernel knobs, declared once. Each line of a `knobs!` block is one sysfs/sysctl file the model
//! reads: its field in the lowered config (the name the lowered JSON uses), its type, the
//! kernel's default, its scenario key, the kernel file, its valid range or choices, and a doc
//! line. The macro derives the lowered config struct (serde, `Default` = the kernel's defaults,
//! so a lowered JSON may omit a knob), its range check, and [`table`], which the native module
//! exports as `_core.knobs()` for the Python side (model, lowering, lab apply/restore, docs).
//!
//! The knob sections make up the lowered `kernel` table ([`Kernel`], declared here by
//! `kernel_sections!`), which `Mm` keeps whole: a knob, or a new section, needs no edit outside
//! this file to reach the model.
//!
//! Adding a kernel knob: one line here, its use where the model reads it (`self.knobs.<section>
//! .<field>` in `Mm`'s paths, or the subsystem's config section), a test, and the generated
//! table of docs/scenario.md (`make docs-knobs`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ConfigError;

/// How a knob's value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnobKind {
    Bool,
    Int,
    Str,
}

impl KnobKind {
    pub fn name(self) -> &'static str {
        match self {
            KnobKind::Bool => "bool",
            KnobKind::Int => "int",
            KnobKind::Str => "str",
        }
    }
}

/// One knob's declaration.
#[derive(Clone, Copy, Debug)]
pub struct Knob {
    /// Scenario key, as users write it ("kernel.zswap.max_pool_percent", "kernel.vm.page-cluster").
    pub key: &'static str,
    /// Dotted path of the field in the lowered JSON.
    pub lowered: &'static str,
    pub kind: KnobKind,
    /// Valid range of an int knob (inclusive); None: unbounded on that side.
    pub min: Option<u64>,
    pub max: Option<u64>,
    /// A str knob's valid values (codec names, allocator names), from their registries.
    pub choices: Option<fn() -> Vec<&'static str>>,
    pub kernel_file: &'static str,
    pub doc: &'static str,
}

/// One knob with its kernel default (None where the kernel computes it at boot).
#[derive(Clone, Debug)]
pub struct KnobRow {
    pub knob: Knob,
    pub default: Value,
}

/// An int knob's value for its range check (None: not an int, or unset).
trait KnobInt {
    fn knob_int(&self) -> Option<u64>;
}

impl KnobInt for u32 {
    fn knob_int(&self) -> Option<u64> {
        Some(u64::from(*self))
    }
}

impl KnobInt for u64 {
    fn knob_int(&self) -> Option<u64> {
        Some(*self)
    }
}

impl KnobInt for Option<u64> {
    fn knob_int(&self) -> Option<u64> {
        *self
    }
}

impl KnobInt for bool {
    fn knob_int(&self) -> Option<u64> {
        None
    }
}

impl KnobInt for Option<String> {
    fn knob_int(&self) -> Option<u64> {
        None
    }
}

impl KnobInt for String {
    fn knob_int(&self) -> Option<u64> {
        None
    }
}

macro_rules! knobs {
    ($(#[doc = $sdoc:literal])* $name:ident at $section:literal {
        $( $field:ident : $ty:ty = $default:expr, $kind:ident $key:literal $file:literal
           $(, min $min:literal)? $(, max $max:literal)? $(, choices $choices:path)? ; $doc:literal )*
    }) => {
        $(#[doc = $sdoc])*
        #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct $name { $( #[doc = $doc] pub $field: $ty, )* }

        impl Default for $name {
            /// The kernel's defaults.
            fn default() -> Self {
                $name { $( $field: $default, )* }
            }
        }

        impl $name {
            pub const KNOBS: &'static [Knob] = &[ $( Knob {
                key: $key,
                lowered: concat!($section, ".", stringify!($field)),
                kind: KnobKind::$kind,
                min: knobs!(@opt $($min)?),
                max: knobs!(@opt $($max)?),
                choices: knobs!(@opt $($choices)?),
                kernel_file: $file,
                doc: $doc,
            }, )* ];

            /// Every int knob within its declared range (an error naming the lowered key).
            pub fn check_ranges(&self) -> Result<(), ConfigError> {
                let values = [$( KnobInt::knob_int(&self.$field) ),*];
                for (k, v) in Self::KNOBS.iter().zip(values) {
                    let Some(v) = v else { continue };
                    if k.min.is_some_and(|m| v < m) || k.max.is_some_and(|m| v > m) {
                        let show = |b: Option<u64>| b.map_or(String::new(), |b| b.to_string());
                        return Err(ConfigError::invalid(k.lowered, format!("expected {}..={}, got {v}", show(k.min), show(k.max))));
                    }
                }
                Ok(())
            }
        }
    };
    (@opt) => { None };
    (@opt $v:expr) => { Some($v) };
}

fn codec_names() -> Vec<&'static str> {
    crate::compress::CODECS.iter().map(|c| c.name).collect()
}

fn zpool_names() -> Vec<&'static str> {
    crate::zpool::ZPOOLS.iter().map(|z| z.name).collect()
}

knobs! {
    /// /sys/module/zswap/parameters/*
    ZswapParams at "kernel.zswap" {
        enabled: bool = false, Bool "kernel.zswap.enabled" "/sys/module/zswap/parameters/enabled";
            "zswap on (CONFIG_ZSWAP_DEFAULT_ON=n: off)."
        compressor: String = "lzo".into(), Str "kernel.zswap.compressor" "/sys/module/zswap/parameters/compressor",
            choices codec_names; "Compressor of the zswap pool (CONFIG_ZSWAP_COMPRESSOR_DEFAULT: lzo)."
        max_pool_percent: u32 = 20, Int "kernel.zswap.max_pool_percent" "/sys/module/zswap/parameters/max_pool_percent",
            min 0, max 100; "Pool limit, percent of RAM."
        accept_threshold_percent: u32 = 90, Int "kernel.zswap.accept_threshold_percent"
            "/sys/module/zswap/parameters/accept_threshold_percent", min 0, max 100;
            "Once full, the pool accepts stores again below this percent of the limit."
        shrinker_enabled: bool = false, Bool "kernel.zswap.shrinker_enabled" "/sys/module/zswap/parameters/shrinker_enabled";
            "Memory-pressure shrinker writes back cold entries (CONFIG_ZSWAP_SHRINKER_DEFAULT_ON=n: off)."
        zpool: Option<String> = None, Str "kernel.zswap.zpool" "/sys/module/zswap/parameters/zpool",
            choices zpool_names;
            "Allocator of the zswap pool: zbud up to 6.14, zsmalloc only since; 6.18 has no such file (zswap calls zsmalloc). Unset: the version's default (zbud up to 6.6, zsmalloc from 6.7)."
    }
}

knobs! {
    /// /proc/sys/vm/*
    VmSysctls at "kernel.vm" {
        swappiness: u32 = 60, Int "kernel.vm.swappiness" "/proc/sys/vm/swappiness", min 0, max 200;
            "Relative cost of swapping anonymous pages versus dropping file pages."
        page_cluster: u32 = 3, Int "kernel.vm.page-cluster" "/proc/sys/vm/page-cluster", min 0, max 31;
            "Swap readahead: 2^n pages."
        min_free_kbytes: Option<u64> = None, Int "kernel.vm.min_free_kbytes" "/proc/sys/vm/min_free_kbytes", min 0;
            "Reserve below the min watermark; unset: computed at boot (calculate_min_free_kbytes), raised to khugepaged's recommendation when THP is enabled (set_recommended_min_free_kbytes)."
        watermark_scale_factor: u32 = 10, Int "kernel.vm.watermark_scale_factor" "/proc/sys/vm/watermark_scale_factor",
            min 1, max 3000; "Gap between the watermarks, in 1/10000 of memory."
        dirty_ratio: u32 = 20, Int "kernel.vm.dirty_ratio" "/proc/sys/vm/dirty_ratio", min 0, max 100;
            "Writers are throttled at this percent of dirtyable memory dirty or under writeback (unless dirty_bytes is set)."
        dirty_background_ratio: u32 = 10, Int "kernel.vm.dirty_background_ratio" "/proc/sys/vm/dirty_background_ratio",
            min 0, max 100; "The flushers start background writeback at this percent of dirtyable memory (unless dirty_background_bytes is set)."
        dirty_bytes: Option<u64> = None, Int "kernel.vm.dirty_bytes" "/proc/sys/vm/dirty_bytes", min 8192;
            "The dirty limit in bytes (at least 2 pages); unset: dirty_ratio applies (the file reads 0). Writing it zeroes dirty_ratio."
        dirty_background_bytes: Option<u64> = None, Int "kernel.vm.dirty_background_bytes"
            "/proc/sys/vm/dirty_background_bytes", min 1;
            "The background threshold in bytes; unset: dirty_background_ratio applies (the file reads 0)."
        dirty_expire_centisecs: u32 = 3000, Int "kernel.vm.dirty_expire_centisecs" "/proc/sys/vm/dirty_expire_centisecs",
            min 0, max 2147483647; "Periodic writeback writes inodes dirty for longer than this."
        extfrag_threshold: u32 = 500, Int "kernel.vm.extfrag_threshold" "/proc/sys/vm/extfrag_threshold", min 0, max 1000;
            "Compaction for an order above 3 is skipped while the fragmentation index is at most this (failure blamed on lack of memory)."
        compaction_proactiveness: u32 = 20, Int "kernel.vm.compaction_proactiveness"
            "/proc/sys/vm/compaction_proactiveness", min 0, max 100;
            "Proactive compaction (5.9+): every 500 ms kcompactd compacts while the node's fragmentation score is above 100 minus this (plus 10 to start); 0 turns it off."
        dirty_writeback_centisecs: u32 = 500, Int "kernel.vm.dirty_writeback_centisecs"
            "/proc/sys/vm/dirty_writeback_centisecs", min 0, max 2147483647; "Interval of the flushers' periodic writeback; 0 disables it."
    }
}

knobs! {
    /// /sys/kernel/mm/swap/*
    SwapKnobs at "kernel.swap" {
        vma_ra_enabled: bool = true, Bool "kernel.swap.vma_ra_enabled" "/sys/kernel/mm/swap/vma_ra_enabled";
            "VMA-based swap readahead where no swap device is rotational; off: swap-slot cluster readahead always."
    }
}

knobs! {
    ThpKnobs at "kernel.transparent_hugepage" {
        enabled: String = "madvise".into(), Str "kernel.transparent_hugepage.enabled" "/sys/kernel/mm/transparent_hugepage/enabled",
            choices crate::mm::phys::thp_enabled_names;
            "THP faults for every anonymous region (always), for `thp = true` regions only (madvise), or none; mainline's Kconfig default is always, Debian's (and this host's) madvise."
        defrag: String = "madvise".into(), Str "kernel.transparent_hugepage.defrag" "/sys/kernel/mm/transparent_hugepage/defrag",
            choices crate::mm::phys::thp_defrag_names;
            "Whether a THP fault reclaims and compacts directly (always; madvise: in `thp = true` regions), wakes kswapd (defer), or neither (never)."
    }
}

knobs! {
    /// /sys/kernel/mm/lru_gen/* (CONFIG_LRU_GEN; mm/lru_gen.rs)
    LruGenKnobs at "kernel.lru_gen" {
        enabled: bool = false, Bool "kernel.lru_gen.enabled" "/sys/kernel/mm/lru_gen/enabled";
            "Multi-gen LRU on (all capabilities, 0x0007) or off; mainline's CONFIG_LRU_GEN_ENABLED=n: off (Debian, Fedora, Arch: on)."
        min_ttl_ms: u64 = 0, Int "kernel.lru_gen.min_ttl_ms" "/sys/kernel/mm/lru_gen/min_ttl_ms", min 0;
            "Thrashing prevention: kswapd OOM-kills when every generation is younger than this (0: off)."
    }
}

/// The lowered `kernel` table from its knob sections (each a `knobs!` struct, serialized under
/// its section name), the version preset and the switch overrides; and [`table`], every knob of
/// every section.
macro_rules! kernel_sections {
    ($( $sec:ident : $ty:ty ),* $(,)?) => {
        /// The lowered `kernel` table.
        #[derive(Clone, Debug, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct Kernel {
            /// Version preset ("6.18" by default; see crate::policy).
            pub version: String,
            $( #[serde(default)] pub $sec: $ty, )*
            /// Policy switch overrides on top of the preset (see crate::policy).
            #[serde(default)]
            pub switches: BTreeMap<String, Value>,
        }

        impl Kernel {
            /// Every int knob of every section within its declared range.
            pub fn check_ranges(&self) -> Result<(), ConfigError> {
                $( self.$sec.check_ranges()?; )*
                Ok(())
            }
        }

        /// Every knob with its kernel default, in declaration order.
        pub fn table() -> Vec<KnobRow> {
            let mut rows = Vec::new();
            $( push_rows(&mut rows, <$ty>::KNOBS, <$ty>::default()); )*
            rows
        }
    };
}

fn push_rows<T: Serialize>(rows: &mut Vec<KnobRow>, knobs: &[Knob], defaults: T) {
    let defaults = serde_json::to_value(defaults).expect("knob defaults serialize");
    for k in knobs {
        let field = k.lowered.rsplit('.').next().expect("dotted path");
        rows.push(KnobRow {
            knob: *k,
            default: defaults[field].clone(),
        });
    }
}

kernel_sections! {
    zswap: ZswapParams,
    vm: VmSysctls,
    swap: SwapKnobs,
    lru_gen: LruGenKnobs,
    transparent_hugepage: ThpKnobs,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_kernel_defaults_files_and_lowered_paths() {
        let rows = table();
        let row = |key: &str| {
            rows.iter()
                .find(|r| r.knob.key == key)
                .unwrap_or_else(|| panic!("{key}"))
        };
        let m = row("kernel.zswap.max_pool_percent");
        assert_eq!(
            (m.default.as_u64(), m.knob.min, m.knob.max),
            (Some(20), Some(0), Some(100))
        );
        assert_eq!(
            m.knob.kernel_file,
            "/sys/module/zswap/parameters/max_pool_percent"
        );
        assert!(
            row("kernel.vm.min_free_kbytes").default.is_null(),
            "computed by the kernel"
        );
        let pc = row("kernel.vm.page-cluster");
        assert_eq!(
            (pc.knob.lowered, pc.knob.kernel_file),
            ("kernel.vm.page_cluster", "/proc/sys/vm/page-cluster")
        );
        let z = row("kernel.zswap.zpool");
        assert!(
            z.default.is_null(),
            "the version's default allocator (crate::zpool::default_for)"
        );
        assert_eq!((z.knob.choices.unwrap())(), ["zsmalloc", "zbud"]);
        assert_eq!(
            (row("kernel.zswap.compressor").knob.choices.unwrap())().len(),
            5
        );
    }

    #[test]
    fn missing_knobs_take_kernel_defaults_and_ranges_are_checked() {
        let p: ZswapParams = serde_json::from_str(r#"{"enabled": true}"#).unwrap();
        assert_eq!((p.enabled, p.max_pool_percent, p.zpool), (true, 20, None));
        let p = ZswapParams {
            accept_threshold_percent: 101,
            ..Default::default()
        };
        let e = p.check_ranges().unwrap_err();
        assert_eq!(e.path, "kernel.zswap.accept_threshold_percent");
        let v = VmSysctls {
            watermark_scale_factor: 0,
            ..Default::default()
        };
        assert_eq!(
            v.check_ranges().unwrap_err().to_string(),
            "kernel.vm.watermark_scale_factor: expected 1..=3000, got 0"
        );
        assert!(VmSysctls::default().check_ranges().is_ok());
    }
}
