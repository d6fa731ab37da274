//! The CPU time model. Every figure is an overridable default (scenario `[costs]`); the
//! defaults are first estimates for a 2020s x86-64 core and are to be replaced by the machine
//! profile that `reclaimlab calibrate` measures (see docs/model/time.md).
//!
//! Device time (latency, bandwidth) is not here: it belongs to each swap device's model.

use std::collections::BTreeMap;

use reclaimlab_workload::{Content, PAGE_SIZE};

use crate::compress::{page_mix, Codec, CODECS};
use crate::error::ConfigError;

macro_rules! costs {
    ($( $(#[doc = $doc:literal])* $name:ident = $default:expr ),* $(,)?) => {
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct Costs {
            $( $(#[doc = $doc])* pub $name: u64, )*
            /// Per codec (crate::compress::CODECS order): compression and decompression of one
            /// 4 KiB page made only of each kind of byte (compress::BYTE_KINDS order). The
            /// figures and their names are declared by each codec's file.
            codec_ns: [([u64; 3], [u64; 3]); CODECS.len()],
        }

        impl Default for Costs {
            fn default() -> Self {
                Costs {
                    $( $name: $default, )*
                    codec_ns: CODECS.map(|c| (c.cost.compress.map(|f| f.default), c.cost.decompress.map(|f| f.default))),
                }
            }
        }

        impl Costs {
            /// Names and defaults, for the scenario loader's validation and the docs.
            pub fn defaults() -> BTreeMap<&'static str, u64> {
                let d = Costs::default();
                let mut m = BTreeMap::new();
                $( m.insert(stringify!($name), d.$name); )*
                for c in CODECS {
                    for f in c.cost.compress.iter().chain(&c.cost.decompress) {
                        m.insert(f.name, f.default);
                    }
                }
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
    /// The first touch of a 4 KiB frame whose backing the hypervisor dropped after the guest
    /// reported it free (free page reporting, mm/page_reporting.c: PageReported blocks of
    /// `machine.page_reporting_order` or more; crate::page_alloc): the VM exit, the host's
    /// page fault and zeroing of a new host page, beyond what the guest's own fault costs.
    /// Charged per page of a transparent huge page taken from a reported pageblock, beyond
    /// `page_alloc_zero_ns`. `calibrate` measures it (docs/calibration.md, "3d. Free page
    /// reporting": THP fills into blocks free for 30 s); this default is the hand measurement
    /// with tools/page_reporting_probe.c there (a 128 MiB MADV_HUGEPAGE mapping touched page by
    /// page after a 10 s pause, its blocks reported, against the same mapped again at once; 3
    /// runs, 2026-11-25, median).
    page_reported_touch_ns = 8_010,
    /// Swap-in bookkeeping: swap cache insert, memcg charge, rmap, LRU add (per page read).
    swapin_page_ns = 800,
    /// A readahead page of a swap-in window (swap_cluster_readahead / swap_vma_readahead ->
    /// __read_swap_cache_async): folio allocation, memcg charge, swap cache insert, LRU add,
    /// and the later minor fault's mapping of it beyond fault_ns (swap cache lookup, rmap, the
    /// readahead hit accounting). The device read is the window's one request (crate::block)
    /// and the codec is charged apart. Built-in default: swapin_page_ns's (one figure for
    /// every page read, as before this cost existed); calibrate measures it on a sequential
    /// zswap read-back at vm.page-cluster 3.
    swap_ra_page_ns = 800,
    /// A buffered read(2) of one cached 4 KiB page: syscall entry, page cache lookup and
    /// copy_page_to_iter. Measured on the reference host (6.18, ext4 with large folios):
    /// pread(2) of 4 KiB over a cached 256 MiB file, 350–396 ns a call in 8 passes
    /// (docs/calibration.md, "Page cache reads"). With order-0 folios the kernel took
    /// 710–920 ns; the model keeps the large-folio figure (the validation's filesystems).
    read_page_ns = 365,
    /// A buffered write(2) of one 4 KiB page into a folio the page cache has, on a disk
    /// filesystem (generic_perform_write, 6.18): syscall entry, file_update_time,
    /// write_begin's lookup and lock of the folio (ext4_da_write_begin → block_write_begin
    /// over mapped buffers), copy_folio_from_iter_atomic, write_end (block_write_end,
    /// i_size), folio_mark_dirty of a folio already dirty, balance_dirty_pages_ratelimited's
    /// count. Measured by `calibrate` (stage 3c, ext4): a second pass over a cached, dirty
    /// 128 MiB file (the built-in default is the reference host's figure of 2026-11-25).
    write_page_ns = 1_044,
    /// write_begin of a disk filesystem for a folio it has to add, beyond filemap_add_folio
    /// (pagecache_add_ns): ext4_da_write_begin's buffer head (create_empty_buffers) and the
    /// block lookup of ext4_da_get_block_prep, for a block the file has (a lab file is
    /// written before its run). Measured by `calibrate` (stage 3c): a pass over a dropped file
    /// in a memcg at its limit, its frames freed from a read file's large clean folios; on the
    /// reference host (2026-11-25) it fitted 0 (floored): such a write cost no more than
    /// tmpfs's new folio (`pagecache_add_ns`) and the cached write.
    write_begin_folio_ns = 0,
    /// Marking a clean page cache folio of a disk filesystem dirty (folio_mark_dirty →
    /// __folio_mark_dirty: folio_account_dirtied's NR_FILE_DIRTY, NR_DIRTIED, wb and memcg
    /// statistics, the xarray's dirty tag, __mark_inode_dirty). Per folio newly dirtied by
    /// write(2) or a store to a shared mapping; tmpfs has no dirty accounting. Measured by
    /// `calibrate` (stage 3c, ext4): writes into clean cached folios (the file fsynced
    /// before) against writes into dirty ones (the reference host's figure of 2026-11-25).
    folio_account_dirtied_ns = 220,
    /// A write(2) of one 4 KiB page into a tmpfs folio it has (shmem_write_begin's
    /// shmem_get_folio lookup and lock, the copy, shmem_write_end's folio_mark_dirty, which is
    /// a flag only: no dirty accounting on tmpfs), syscall and file_update_time included.
    /// Measured by `calibrate` (stage 3c, tmpfs): a second pass over a cached 128 MiB file
    /// (the reference host's figure of 2026-11-25).
    shmem_write_page_ns = 1_097,
    /// Adding a new page cache folio, per folio: allocation without zeroing, xarray insert,
    /// memcg charge, LRU add; the same bookkeeping as swapin_page_ns. Measured by `calibrate`
    /// (stage 3c, tmpfs: shmem_alloc_and_add_folio for each hole a first write pass
    /// fills, against a second pass) on order-0 folios; charged alike for filemap_add_folio
    /// and shmem's folios (the reference host's figure of 2026-11-25).
    pagecache_add_ns = 895,
    /// Adding a new page cache folio, per page of it: the cold read's CPU beyond the warm
    /// read's on the reference host (a sequential read of a 256 MiB ext4 file through
    /// 148 large folios: 36 ns a page, median of 7 passes, range −12–96; struct page setup,
    /// statistics and the IO's submission and completion, spread over the pages).
    pagecache_add_page_ns = 36,
    /// Reclaim: isolating and checking one page (rmap walk for references, list moves).
    /// Measured by `calibrate` (stage 3a): zram fills whose first reclaim scans ~12 referenced
    /// pages per page freed, against fills that scan one page per page freed.
    scan_page_ns = 150,
    /// Reclaim: the fixed CPU time of one shrink_node call, whatever it scans: the memcg walk
    /// (mem_cgroup_iter), get_scan_count and lruvec size reads, shrink_slab's walk of the
    /// memcg's shrinkers, vmpressure. Measured by `calibrate` on passes that find nothing
    /// (v1 memory.limit_in_bytes writes below the usage of a memcg of mlock()ed memory).
    shrink_node_ns = 730,
    /// Reclaim: unmapping and freeing one page (try_to_unmap, __remove_mapping).
    reclaim_page_ns = 400,
    /// Reclaim: freeing one clean, unmapped page cache folio of a disk filesystem
    /// (shrink_folio_list's filemap_release_folio → try_to_free_buffers, __remove_mapping
    /// with its shadow entry, the batched uncharge and free), per folio. Measured by
    /// `calibrate` (stage 3c, ext4): a 256 MiB write(2) stream through a 128 MiB memcg, every
    /// write-path figure fixed (the reference host's figure of 2026-11-25).
    reclaim_file_folio_ns = 641,
    /// Multi-gen LRU aging (walk_pte_range): reading one PTE table page (512 PTEs, 64 cache
    /// lines, sequential) and the PMD entry that points to it; also the per-PTE share of
    /// look-around. Estimate (~15 ns per cache line streamed), not yet calibrated.
    lru_gen_walk_pte_table_ns = 1_000,
    /// Multi-gen LRU aging: one young PTE found by the walk or look-around (test-and-clear
    /// of the accessed bit, pfn to folio, memcg check, the flags cmpxchg of folio_update_gen).
    /// Estimate, not yet calibrated.
    lru_gen_young_pte_ns = 50,
    /// Swap slot allocation and swap cache insertion at swap-out.
    swap_alloc_ns = 250,
    /// Submitting one bio (CPU side only): one per page for swap IO, one per run of
    /// consecutive pages for file readahead and writeback.
    bio_submit_ns = 1_000,
    /// A swap write to a block device, besides submitting it: its completion
    /// (end_swap_bio_write, folio_end_writeback, folio_rotate_reclaimable). Not charged for
    /// zram, whose write completes inline. First estimate; calibrate fits it from a swap-file
    /// run against a zram run of the same workload.
    swap_write_end_ns = 1_500,
    /// zswap entry, xarray and zsmalloc bookkeeping per store or load, besides the codec.
    zswap_entry_ns = 400,
    /// Copying a page stored as-is (incompressible) in or out of zsmalloc.
    zswap_copy_ns = 300,
    /// Migrating one page in compaction (migrate_folio: the copy, copy_highpage). Derived, not
    /// measured: zswap_copy_ns's 4 KiB copy; the unmap, rmap walk, TLB flush and remap are
    /// left out (so it is a lower bound).
    migrate_page_ns = 300,
    // Codec time per 4 KiB page (lzo_compress_ns, ...): declared by each codec's file
    // (crate::compress), collected from CODECS.
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
            if let Some(f) = c.field_mut(k) {
                *f = *v;
                continue;
            }
            let mut known = false;
            for (ns, info) in c.codec_ns.iter_mut().zip(CODECS) {
                for kind in 0..3 {
                    if info.cost.compress[kind].name == k {
                        ns.0[kind] = *v;
                        known = true;
                    }
                    if info.cost.decompress[kind].name == k {
                        ns.1[kind] = *v;
                        known = true;
                    }
                }
            }
            if !known {
                return Err(ConfigError::unknown(
                    format!("costs.{k}"),
                    "unknown time-model parameter",
                ));
            }
        }
        if c.process_quantum_ns == 0 {
            return Err(ConfigError::invalid(
                "costs.process_quantum_ns",
                "must be > 0",
            ));
        }
        Ok(c)
    }

    /// The codec's time to compress one page of `content`: the byte-weighted sum of its
    /// per-kind figures (page_mix). The kernel's LZ coders spend their time per input position
    /// in a way that depends on what is there (a hash probe and a short match per few bytes of
    /// text, accelerating skips over random bytes, one long match over a run), so a page of K
    /// random bytes then zeros costs K/4096 of a random page plus the rest of a run page.
    /// Measured per codec on the kernel by `calibrate` (zram writes of each class).
    pub fn compress_ns(&self, codec: Codec, content: Content) -> u64 {
        mix_ns(&self.codec_ns[codec as usize].0, content)
    }

    /// As compress_ns, for decompression (zram reads of each class).
    pub fn decompress_ns(&self, codec: Codec, content: Content) -> u64 {
        mix_ns(&self.codec_ns[codec as usize].1, content)
    }
}

fn mix_ns(per_kind: &[u64; 3], content: Content) -> u64 {
    let mix = page_mix(content);
    let sum: u64 = mix.iter().zip(per_kind).map(|(bytes, ns)| bytes * ns).sum();
    sum / PAGE_SIZE as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_figures_keep_their_names_and_shared_figures_move_together() {
        let d = Costs::defaults();
        for k in [
            "lzo_compress_ns",
            "lzo_decompress_ns",
            "lz4_compress_ns",
            "zstd_decompress_ns",
            "deflate_compress_ns",
        ] {
            assert!(d.contains_key(k), "{k}");
        }
        let mut o = BTreeMap::new();
        o.insert("lzo_compress_ns".to_string(), 7);
        let c = Costs::with_overrides(&o).unwrap();
        // lzo-rle has figures of its own now (the kernel's lzo-rle differs from lzo).
        assert_eq!(c.compress_ns(Codec::Lzo, Content::Text), 7);
        assert_eq!(
            c.compress_ns(Codec::LzoRle, Content::Text),
            d["lzo_rle_compress_ns"]
        );
        assert_eq!(
            c.compress_ns(Codec::Lz4, Content::Text),
            d["lz4_compress_ns"]
        );
        o.insert("lzo_compres_ns".to_string(), 7);
        assert_eq!(
            Costs::with_overrides(&o).unwrap_err().path,
            "costs.lzo_compres_ns"
        );
    }

    #[test]
    fn a_page_costs_the_byte_weighted_sum_of_its_kinds() {
        let mut o = BTreeMap::new();
        for (k, v) in [
            ("lz4_compress_ns", 4000),
            ("lz4_compress_random_ns", 1000),
            ("lz4_compress_run_ns", 3000),
        ] {
            o.insert(k.to_string(), v);
        }
        o.insert("lz4_decompress_random_ns".to_string(), 100);
        o.insert("lz4_decompress_run_ns".to_string(), 500);
        let c = Costs::with_overrides(&o).unwrap();
        assert_eq!(c.compress_ns(Codec::Lz4, Content::Text), 4000);
        assert_eq!(c.compress_ns(Codec::Lz4, Content::Random), 1000);
        assert_eq!(
            c.compress_ns(Codec::Lz4, Content::Same { byte: 0x5a }),
            3000
        );
        // mix1024: a quarter random, three quarters run.
        assert_eq!(
            c.compress_ns(Codec::Lz4, Content::Mix { random_bytes: 1024 }),
            2500
        );
        assert_eq!(
            c.decompress_ns(Codec::Lz4, Content::Mix { random_bytes: 3072 }),
            200
        );
        assert_eq!(
            c.compress_ns(Codec::Lzo, Content::Random),
            Costs::defaults()["lzo_compress_random_ns"]
        );
    }
}
