//! The CPU time model. Every figure is an overridable default (scenario `[costs]`); the
//! defaults are first estimates for a 2020s x86-64 core and are to be replaced by the machine
//! profile that `reclaimlab calibrate` measures (see docs/model/time.md).
//!
//! Device time (latency, bandwidth) is not here: it belongs to each swap device's model.

use std::collections::BTreeMap;

use crate::error::ConfigError;

macro_rules! costs {
    ($( $(#[doc = $doc:literal])* $name:ident = $default:expr ),* $(,)?) => {
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct Costs { $( $(#[doc = $doc])* pub $name: u64, )* }

        impl Default for Costs {
            fn default() -> Self { Costs { $( $name: $default, )* } }
        }

        impl Costs {
            /// Names and defaults, for the scenario loader's validation and the docs.
            pub fn defaults() -> BTreeMap<&'static str, u64> {
                let d = Costs::default();
                let mut m = BTreeMap::new();
                $( m.insert(stringify!($name), d.$name); )*
                m
            }

            fn field_mut(&mut self, name: &str) -> Option<&mut u64> {
                match name { $( stringify!($name) => Some(&mut self.$name), )* _ => None }
            }
        }
    };
}

costs! {
    /// One access to a resident, mapped page (a cache/TLB miss on a large random working set:
    /// SeongJae Park's no-pressure baseline made ~7.3 M accesses/s).
    access_ns = 130,
    /// Page fault entry, lookup and return, without the work the fault does.
    fault_ns = 700,
    /// Allocating and zeroing a fresh anonymous page.
    page_alloc_zero_ns = 500,
    /// Swap-in bookkeeping: swap cache insert, memcg charge, rmap, LRU add (per page read).
    swapin_page_ns = 800,
    /// Reclaim: isolating and checking one page (rmap walk for references, list moves).
    scan_page_ns = 150,
    /// Reclaim: unmapping and freeing one page (try_to_unmap, __remove_mapping).
    reclaim_page_ns = 400,
    /// Swap slot allocation and swap cache insertion at swap-out.
    swap_alloc_ns = 250,
    /// Submitting one swap write or read bio (CPU side only).
    bio_submit_ns = 1_000,
    /// zswap entry, xarray and zsmalloc bookkeeping per store or load, besides the codec.
    zswap_entry_ns = 400,
    /// Copying a page stored as-is (incompressible) in or out of zsmalloc.
    zswap_copy_ns = 300,
    /// Codec time per 4 KiB page. Compression of incompressible data is usually faster than of
    /// compressible data for LZ codecs; one figure per codec for now.
    lzo_compress_ns = 6_000,
    lzo_decompress_ns = 2_000,
    lz4_compress_ns = 4_000,
    lz4_decompress_ns = 1_000,
    zstd_compress_ns = 15_000,
    zstd_decompress_ns = 4_000,
    deflate_compress_ns = 40_000,
    deflate_decompress_ns = 10_000,
    /// One zswap LRU visit that only clears a referenced bit or finds nothing to do.
    zswap_lru_visit_ns = 150,
    /// Run length of a user process between scheduling decisions, in virtual time.
    process_quantum_ns = 100_000,
}

impl Costs {
    /// Defaults with the scenario's overrides applied. Unknown names are an error naming them.
    pub fn with_overrides(overrides: &BTreeMap<String, u64>) -> Result<Costs, ConfigError> {
        let mut c = Costs::default();
        for (k, v) in overrides {
            match c.field_mut(k) {
                Some(f) => *f = *v,
                None => return Err(ConfigError::unknown(format!("costs.{k}"), "unknown time-model parameter")),
            }
        }
        if c.process_quantum_ns == 0 {
            return Err(ConfigError::invalid("costs.process_quantum_ns", "must be > 0"));
        }
        Ok(c)
    }

    pub fn compress_ns(&self, codec: crate::compress::Codec) -> u64 {
        use crate::compress::Codec::*;
        match codec {
            Lzo | LzoRle => self.lzo_compress_ns,
            Lz4 => self.lz4_compress_ns,
            Zstd => self.zstd_compress_ns,
            Deflate => self.deflate_compress_ns,
        }
    }

    pub fn decompress_ns(&self, codec: crate::compress::Codec) -> u64 {
        use crate::compress::Codec::*;
        match codec {
            Lzo | LzoRle => self.lzo_decompress_ns,
            Lz4 => self.lz4_decompress_ns,
            Zstd => self.zstd_decompress_ns,
            Deflate => self.deflate_decompress_ns,
        }
    }
}
