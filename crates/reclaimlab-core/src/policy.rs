//! Policy is data: every behaviour that a kernel version or a seed patch changes is a named
//! switch, and a kernel-version preset sets them all. A scenario overrides single switches on
//! top of its preset (`[kernel.switches]`). docs/model/switches.md lists them with the patches
//! they come from.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ConfigError;

/// What zswap does with a page that does not compress below PAGE_SIZE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incompressible {
    /// ≤6.11 and mainline 6.12.0 with lzo: zswap_compress asks the compressor for at most
    /// PAGE_SIZE, but lzo1x_1_compress does not check the bound; it overruns into scompress'
    /// scratch buffer and scompress returns -ENOSPC → reject_compress_poor, page goes to disk.
    Reject,
    /// Debian's 6.12.117 (stable's backport of lzo1x_1_compress_safe; lz4 and zstd are bounded
    /// in every version): the compressor stops at PAGE_SIZE and fails (-EINVAL) →
    /// reject_compress_fail, page goes to disk (validated in the VM lab, docs/vmlab.md).
    RejectFail,
    /// 6.18 (SeongJae Park, "mm/zswap: store <PAGE_SIZE compression failed page as-is"; also
    /// Takero Funaki's patch 5): stored raw (length 4096) unless the memcg's zswap writeback is
    /// disabled.
    StoreRaw,
}

/// Where pages whose 8-byte words are all equal go at swap-out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SameFilled {
    /// ≤6.11: zswap keeps same-filled pages as length-0 entries (same_filled_pages), no zpool
    /// memory, not on the zswap LRU.
    Zswap,
    /// 6.12+ (Usama Arif): zero-filled pages go to the swap zeromap (swpout_zero/swpin_zero) and
    /// never reach zswap; other same-filled pages are compressed like any page.
    Zeromap,
}

/// The global shrink worker's memcg iteration and error handling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShrinkWorker {
    /// 6.8–6.11: every wrap of the memcg cursor and every shrink_memcg failure (including "this
    /// memcg has nothing in zswap") counts toward the 16-failure abort; a memcg with writeback
    /// disabled aborts the run.
    V6_10,
    /// 6.12+ (Takero Funaki's patches 1–2 as merged): memcgs with nothing to write back are
    /// skipped for free; a tree walk counts as a failure only if it made no attempt.
    Fixed,
}

/// What protects recently stored entries from the memory-pressure shrinker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShrinkerProtection {
    /// 6.8–6.11: lruvec nr_zswap_protected (grows with LRU adds and disk swap-ins, decays by
    /// halving above a quarter of the LRU); no second chance.
    NrZswapProtected,
    /// 6.12+ (Nhat Pham): each entry has a referenced bit (second chance) and disk swap-ins since
    /// the last count are subtracted from the freeable count.
    Referenced,
}

/// How zswap entries are ordered for writeback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZswapLru {
    /// ≤6.7: one LRU for all entries, whatever their memcg (no memory-pressure shrinker).
    Global,
    /// 6.8+ (Nhat Pham / Domenico Cerasuolo): a list_lru per memcg and node.
    PerMemcg,
}

/// What a zswap load does with the entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZswapLoad {
    /// ≤6.4 (zswap as a frontswap backend): the load decompresses into the swap-cache folio and
    /// leaves the entry in the pool and the slot allocated; the folio stays clean, so reclaiming
    /// it again unmodified frees it with no new store. A later store to the slot (the folio was
    /// dirtied) invalidates the old entry first (frontswap_store).
    NonExclusive,
    /// 6.5+ (Johannes Weiner, "mm: zswap: support exclusive loads"; unconditional since the
    /// frontswap removal): the load frees the entry and dirties the folio.
    Exclusive,
}

/// When kswapd may write a dirty file folio it finds at the LRU tail (pageout), seed 001.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KswapdFileWriteback {
    /// Before the seed (≤3.1): whenever it reaches a dirty file folio (and may_writepage).
    Always,
    /// Seed patch 2 (3.2): only once its priority has dropped below DEF_PRIORITY − 2
    /// ("kswapd is in trouble").
    RaisedPriority,
    /// 3.11–6.15: only a folio already marked PG_reclaim on a node flagged PGDAT_DIRTY (the
    /// last scan found only dirty file folios not queued for IO).
    PgdatDirty,
    /// 6.16+: the same test, but pageout has no ->writepage for file folios any more: it
    /// activates them. Reclaim writes no file pages at all. (The same check in pageout also
    /// meets never-mapped swap-cache folios: switch `vmscan.pageout_anon_check`.)
    Never,
}

/// How reclaim waits when it meets pages under writeback (seed patch 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WritebackThrottle {
    /// Before the seed: reclaim does not wait for dirty or writeback pages.
    None,
    /// 3.2–5.15: congestion_wait / wait_iff_congested(HZ/10). By 5.x no block device marked
    /// itself congested, so it slept the full timeout.
    CongestionWait,
    /// 5.16+ (Mel Gorman): reclaim_throttle, woken when SWAP_CLUSTER_MAX folios finished
    /// writeback per throttled task, or after HZ/10.
    ReclaimThrottle,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Switches {
    pub incompressible: Incompressible,
    pub same_filled: SameFilled,
    pub shrink_worker: ShrinkWorker,
    /// Takero Funaki's patch 3: start the worker once the pool reaches
    /// max × (accept_threshold + 1)%, accept stores up to the max, reject only at the max.
    pub proactive_shrink: bool,
    /// The shrink workqueue has WQ_MEM_RECLAIM (every kernel). Funaki's patch 4 removes it so
    /// the worker runs in the background and yields while tasks are reclaiming.
    pub worker_mem_reclaim: bool,
    /// Funaki's patch 6: the worker pauses writeback until this long after the last store
    /// reject or zswap load miss (500 ms in the patch; 0 = never pauses).
    pub writeback_pause_ms: u64,
    pub shrinker_protection: ShrinkerProtection,
    pub lru: ZswapLru,
    /// zsmalloc pools per zswap pool: 1 up to 6.4, 32 in 6.5–6.11 (entries spread by a
    /// hash), 1 since.
    pub zpools: u32,
    pub load: ZswapLoad,
    /// Direct and memcg reclaim write dirty file folios (before seed patch 1, ≤3.1).
    pub direct_file_writeback: bool,
    pub kswapd_file_writeback: KswapdFileWriteback,
    /// Seed patch 4: a dirty file folio reclaim does not write is marked PG_reclaim and
    /// activated (nr_vmscan_immediate_reclaim), to be rotated to the inactive tail when its
    /// writeback ends; off: it goes back to the inactive list unmarked.
    pub immediate_reclaim: bool,
    pub writeback_throttle: WritebackThrottle,
    /// 6.16+ pageout's `if (!shmem_mapping(mapping) && !folio_test_anon(folio)) return
    /// PAGE_ACTIVATE;` applied to swap-cache folios: a dirty one that no fault has mapped since
    /// it was read in (an unhit readahead folio loaded from zswap) is activated instead of
    /// written, and so stays in memory until a fault maps it (mm/vmscan.rs `Mm::shrink_folio`;
    /// measured on this host's 6.18, docs/validation.md "Swap readahead with zswap"). The
    /// check's file-folio half is `kswapd_file_writeback = Never`. Off in every preset for now,
    /// 6.18's included: with it on, the model's v1 limit reclaim runs out of reclaimable pages
    /// between its statistics flushes in three validation scenarios the kernel completes
    /// (docs/model/switches.md).
    pub pageout_anon_check: bool,
    /// memory.reclaim takes the `swappiness=N` argument (6.12+, Dan Schatzberg, "mm: add
    /// swappiness= arg to memory.reclaim"; read in 6.12.117's memory_reclaim). Before, a
    /// write with the argument fails with -EINVAL.
    pub reclaim_swappiness: bool,
    /// Every shrink_node of the classic LRU flushes the memcg statistics first (6.1:
    /// mem_cgroup_flush_stats in shrink_node), so inactive_is_low and the refault checks read
    /// current sizes; off: they read what the last periodic flush or reader left (6.12, 6.18:
    /// mem_cgroup_flush_stats_ratelimited in prepare_scan_control, docs/model/memcg.md).
    pub reclaim_stats_flush: bool,
    /// Direct, memcg and proactive reclaim share an incremental walk of the target's memcg
    /// tree and stop at their goal, and a do_try_to_free_pages call that reclaimed nothing
    /// runs its priorities once more with sc->memcg_full_walk set (6.11+, Johannes Weiner,
    /// "mm: vmscan: restore incremental cgroup iteration", with Shakeel Butt's "mm: vmscan:
    /// reset sc->priority on retry"; read in 6.12.117's shrink_node_memcgs and
    /// do_try_to_free_pages). Off (5.4 to 6.10, since "mm: vmscan: do not share cgroup
    /// iteration between reclaimers"): every reclaimer walks the whole subtree, no retry.
    pub incremental_cgroup_iteration: bool,
    /// ext4 page cache folios may be large (mapping_set_large_folios; ext4 since 6.16,
    /// "ext4: enable large folio for regular file"): readahead allocates folios of the order
    /// its window reached (page_cache_ra_order, mm/filemap.rs). Off: order-0 folios only.
    pub large_folios_ext4: bool,
    /// The same for xfs (large folios since 5.18).
    pub large_folios_xfs: bool,
    /// defer_compaction / compaction_deferred (every version): after a failed sync
    /// compaction, skip the next 1 << compact_defer_shift attempts. Off: seed 004's
    /// configuration 4 ("compaction deferral disabled").
    pub compaction_defer: bool,
    /// zram allocates through the zpool API, so a device may use zbud (seed 004: Vitaly Wool,
    /// "allow zram to use zbud as underlying allocator", 2015, never merged; every mainline
    /// zram calls zs_malloc directly). Off in every preset.
    pub zram_zpool_api: bool,
    /// SLUB's first, higher-order attempt for a new slab (allocate_slab with s->oo) neither
    /// reclaims nor compacts nor wakes kswapd: `~__GFP_RECLAIM`, so under fragmentation it
    /// falls back to s->min at once (4.4+, Joonsoo Kim, "mm/slub: don't wait for high-order
    /// page allocation"; read in 6.12.117's allocate_slab). Off: the 3.18-to-4.3 behaviour,
    /// a __GFP_NORETRY attempt that may stall in direct compaction and reclaim first (seed
    /// 004's vanilla; on is its configuration 2, "SLUB fallback").
    pub slub_nowait_high_order: bool,
}

/// Kernel versions with a preset.
pub const PRESETS: &[&str] = &["6.1", "6.8", "6.10", "6.12", "6.18"];

fn bad(k: &str, v: &Value, expected: &str) -> ConfigError {
    ConfigError::invalid(
        format!("kernel.switches.{k}"),
        format!("expected {expected}, got {v}"),
    )
}

fn choice<T: Copy>(k: &str, v: &Value, options: &[(&str, T)]) -> Result<T, ConfigError> {
    let names: Vec<String> = options.iter().map(|(n, _)| format!("{n:?}")).collect();
    v.as_str()
        .and_then(|s| options.iter().find(|(n, _)| *n == s).map(|(_, t)| *t))
        .ok_or_else(|| bad(k, v, &format!("one of {}", names.join(", "))))
}

const INCOMPRESSIBLE: &[(&str, Incompressible)] = &[
    ("reject", Incompressible::Reject),
    ("reject_fail", Incompressible::RejectFail),
    ("store_raw", Incompressible::StoreRaw),
];
const SAME_FILLED: &[(&str, SameFilled)] = &[
    ("zswap", SameFilled::Zswap),
    ("zeromap", SameFilled::Zeromap),
];
const SHRINK_WORKER: &[(&str, ShrinkWorker)] = &[
    ("6.10", ShrinkWorker::V6_10),
    ("fixed", ShrinkWorker::Fixed),
];
const PROTECTION: &[(&str, ShrinkerProtection)] = &[
    ("nr_zswap_protected", ShrinkerProtection::NrZswapProtected),
    ("referenced", ShrinkerProtection::Referenced),
];
const LRU: &[(&str, ZswapLru)] = &[
    ("global", ZswapLru::Global),
    ("per_memcg", ZswapLru::PerMemcg),
];
const LOAD: &[(&str, ZswapLoad)] = &[
    ("non_exclusive", ZswapLoad::NonExclusive),
    ("exclusive", ZswapLoad::Exclusive),
];
const KSWAPD_FILE_WRITEBACK: &[(&str, KswapdFileWriteback)] = &[
    ("always", KswapdFileWriteback::Always),
    ("raised_priority", KswapdFileWriteback::RaisedPriority),
    ("pgdat_dirty", KswapdFileWriteback::PgdatDirty),
    ("never", KswapdFileWriteback::Never),
];
const WRITEBACK_THROTTLE: &[(&str, WritebackThrottle)] = &[
    ("none", WritebackThrottle::None),
    ("congestion_wait", WritebackThrottle::CongestionWait),
    ("reclaim_throttle", WritebackThrottle::ReclaimThrottle),
];

fn name_of<T: Copy + PartialEq>(options: &[(&'static str, T)], t: T) -> &'static str {
    options
        .iter()
        .find(|(_, x)| *x == t)
        .map(|(n, _)| *n)
        .expect("every value has a name")
}

impl Switches {
    pub fn preset(version: &str) -> Result<Switches, ConfigError> {
        // 6.8 and 6.10 behave the same for every switch modelled here; 6.10 is the base of
        // Takero Funaki's series.
        let v6_10 = Switches {
            incompressible: Incompressible::Reject,
            same_filled: SameFilled::Zswap,
            shrink_worker: ShrinkWorker::V6_10,
            proactive_shrink: false,
            worker_mem_reclaim: true,
            writeback_pause_ms: 0,
            shrinker_protection: ShrinkerProtection::NrZswapProtected,
            lru: ZswapLru::PerMemcg,
            zpools: 32,
            load: ZswapLoad::Exclusive,
            direct_file_writeback: false,
            kswapd_file_writeback: KswapdFileWriteback::PgdatDirty,
            immediate_reclaim: true,
            writeback_throttle: WritebackThrottle::ReclaimThrottle,
            pageout_anon_check: false,
            reclaim_swappiness: false,
            reclaim_stats_flush: false,
            incremental_cgroup_iteration: false,
            large_folios_ext4: false,
            large_folios_xfs: true,
            compaction_defer: true,
            zram_zpool_api: false,
            slub_nowait_high_order: true,
        };
        // 6.1 (Debian bookworm's kernel): zswap is a frontswap backend with one LRU for all
        // entries (kept by zbud/z3fold/zsmalloc and walked by zpool_shrink; no memory-pressure
        // shrinker, no per-memcg LRU), non-exclusive loads, same-filled pages kept in zswap,
        // incompressible pages rejected, one zpool per pool (32 came with 6.5). Its default
        // allocator, zbud, is the zpool knob's default for this version (crate::zpool).
        let v6_1 = Switches {
            lru: ZswapLru::Global,
            zpools: 1,
            load: ZswapLoad::NonExclusive,
            reclaim_stats_flush: true,
            ..v6_10.clone()
        };
        let v6_12 = Switches {
            incompressible: Incompressible::RejectFail,
            same_filled: SameFilled::Zeromap,
            shrink_worker: ShrinkWorker::Fixed,
            shrinker_protection: ShrinkerProtection::Referenced,
            zpools: 1,
            reclaim_swappiness: true,
            incremental_cgroup_iteration: true,
            ..v6_10.clone()
        };
        match version {
            "6.1" => Ok(v6_1),
            "6.8" | "6.10" => Ok(v6_10),
            "6.12" => Ok(v6_12),
            "6.18" => Ok(Switches {
                incompressible: Incompressible::StoreRaw,
                kswapd_file_writeback: KswapdFileWriteback::Never,
                large_folios_ext4: true,
                ..v6_12
            }),
            _ => Err(ConfigError::unknown(
                "kernel.version",
                format!(
                    "no preset for {version:?}; expected one of {}",
                    PRESETS
                        .iter()
                        .map(|p| format!("{p:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }

    /// The switches as name → value, in the form scenarios write them.
    pub fn to_map(&self) -> BTreeMap<&'static str, Value> {
        let mut m = BTreeMap::new();
        m.insert(
            "zswap.incompressible",
            Value::from(name_of(INCOMPRESSIBLE, self.incompressible)),
        );
        m.insert(
            "zswap.same_filled",
            Value::from(name_of(SAME_FILLED, self.same_filled)),
        );
        m.insert(
            "zswap.shrink_worker",
            Value::from(name_of(SHRINK_WORKER, self.shrink_worker)),
        );
        m.insert("zswap.proactive_shrink", Value::from(self.proactive_shrink));
        m.insert(
            "zswap.worker_mem_reclaim",
            Value::from(self.worker_mem_reclaim),
        );
        m.insert(
            "zswap.writeback_pause_ms",
            Value::from(self.writeback_pause_ms),
        );
        m.insert(
            "zswap.shrinker_protection",
            Value::from(name_of(PROTECTION, self.shrinker_protection)),
        );
        m.insert("zswap.lru", Value::from(name_of(LRU, self.lru)));
        m.insert("zswap.zpools", Value::from(self.zpools));
        m.insert("zswap.load", Value::from(name_of(LOAD, self.load)));
        m.insert(
            "vmscan.direct_file_writeback",
            Value::from(self.direct_file_writeback),
        );
        m.insert(
            "vmscan.kswapd_file_writeback",
            Value::from(name_of(KSWAPD_FILE_WRITEBACK, self.kswapd_file_writeback)),
        );
        m.insert(
            "vmscan.immediate_reclaim",
            Value::from(self.immediate_reclaim),
        );
        m.insert(
            "vmscan.writeback_throttle",
            Value::from(name_of(WRITEBACK_THROTTLE, self.writeback_throttle)),
        );
        m.insert(
            "memcg.reclaim_swappiness",
            Value::from(self.reclaim_swappiness),
        );
        m.insert(
            "memcg.reclaim_stats_flush",
            Value::from(self.reclaim_stats_flush),
        );
        m.insert(
            "vmscan.incremental_cgroup_iteration",
            Value::from(self.incremental_cgroup_iteration),
        );
        m.insert(
            "filemap.large_folios_ext4",
            Value::from(self.large_folios_ext4),
        );
        m.insert(
            "filemap.large_folios_xfs",
            Value::from(self.large_folios_xfs),
        );
        m.insert("compaction.defer", Value::from(self.compaction_defer));
        m.insert("zram.zpool_api", Value::from(self.zram_zpool_api));
        m.insert(
            "vmscan.pageout_anon_check",
            Value::from(self.pageout_anon_check),
        );
        m.insert(
            "slub.nowait_high_order",
            Value::from(self.slub_nowait_high_order),
        );
        m
    }

    pub fn with_overrides(
        version: &str,
        overrides: &BTreeMap<String, Value>,
    ) -> Result<Switches, ConfigError> {
        let mut s = Switches::preset(version)?;
        for (k, v) in overrides {
            let boolean = || v.as_bool().ok_or_else(|| bad(k, v, "true or false"));
            match k.as_str() {
                "zswap.incompressible" => s.incompressible = choice(k, v, INCOMPRESSIBLE)?,
                "zswap.same_filled" => s.same_filled = choice(k, v, SAME_FILLED)?,
                "zswap.shrink_worker" => s.shrink_worker = choice(k, v, SHRINK_WORKER)?,
                "zswap.proactive_shrink" => s.proactive_shrink = boolean()?,
                "zswap.worker_mem_reclaim" => s.worker_mem_reclaim = boolean()?,
                "zswap.writeback_pause_ms" => {
                    s.writeback_pause_ms = v
                        .as_u64()
                        .ok_or_else(|| bad(k, v, "a whole number of milliseconds"))?
                }
                "zswap.shrinker_protection" => s.shrinker_protection = choice(k, v, PROTECTION)?,
                "zswap.lru" => s.lru = choice(k, v, LRU)?,
                "zswap.load" => s.load = choice(k, v, LOAD)?,
                "vmscan.direct_file_writeback" => s.direct_file_writeback = boolean()?,
                "vmscan.kswapd_file_writeback" => {
                    s.kswapd_file_writeback = choice(k, v, KSWAPD_FILE_WRITEBACK)?
                }
                "vmscan.immediate_reclaim" => s.immediate_reclaim = boolean()?,
                "vmscan.writeback_throttle" => {
                    s.writeback_throttle = choice(k, v, WRITEBACK_THROTTLE)?
                }
                "memcg.reclaim_swappiness" => s.reclaim_swappiness = boolean()?,
                "memcg.reclaim_stats_flush" => s.reclaim_stats_flush = boolean()?,
                "vmscan.incremental_cgroup_iteration" => {
                    s.incremental_cgroup_iteration = boolean()?
                }
                "filemap.large_folios_ext4" => s.large_folios_ext4 = boolean()?,
                "filemap.large_folios_xfs" => s.large_folios_xfs = boolean()?,
                "compaction.defer" => s.compaction_defer = boolean()?,
                "zram.zpool_api" => s.zram_zpool_api = boolean()?,
                "vmscan.pageout_anon_check" => s.pageout_anon_check = boolean()?,
                "slub.nowait_high_order" => s.slub_nowait_high_order = boolean()?,
                "zswap.zpools" => {
                    s.zpools = match v.as_u64() {
                        Some(n @ (1 | 32)) => n as u32,
                        _ => return Err(bad(k, v, "1 or 32")),
                    }
                }
                _ => {
                    return Err(ConfigError::unknown(
                        format!("kernel.switches.{k}"),
                        format!(
                            "unknown switch; known: {}",
                            s.to_map().keys().copied().collect::<Vec<_>>().join(", ")
                        ),
                    ))
                }
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_round_trip_through_their_map() {
        for v in PRESETS {
            let s = Switches::preset(v).unwrap();
            let map: BTreeMap<String, Value> = s
                .to_map()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            assert_eq!(Switches::with_overrides(v, &map).unwrap(), s);
        }
    }

    #[test]
    fn bad_switches_are_named() {
        let mut o = BTreeMap::new();
        o.insert("zswap.lru".to_string(), Value::from("lifo"));
        let e = Switches::with_overrides("6.18", &o)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("kernel.switches.zswap.lru") && e.contains("\"global\""),
            "{e}"
        );
        let mut o = BTreeMap::new();
        o.insert("zswap.nope".to_string(), Value::from(1));
        let e = Switches::with_overrides("6.18", &o).unwrap_err();
        assert_eq!(
            (e.kind, e.path.as_str()),
            (
                crate::error::ErrorKind::Unknown,
                "kernel.switches.zswap.nope"
            )
        );
        assert!(e.reason.starts_with("unknown switch"), "{e}");
    }
}
