//! Counters, named exactly as the kernel names them. Each struct is one kernel file (or a part
//! of one): /proc/vmstat, /sys/kernel/debug/zswap/*, memory.stat, /sys/block/<dev>/stat. Event
//! counters only; gauges (list sizes, pool size) are read from the model's state by the
//! subsystem that owns them when a snapshot is taken.
//!
//! A counter the model cannot produce is absent from the output, not 0: only the fields
//! declared here are ever exported.
//!
//! Adding a counter is one line in one `counters!` block: its kernel name, optional tags (which
//! of the kernel's files show it, where the struct feeds several) and its kernel meaning. The
//! macro generates the field, its export under the kernel name (declaration order) and summing
//! (hierarchical totals).

/// One declared counter: the name the kernel exports it under, the files that show it, and
/// what the kernel counts with it.
#[derive(Clone, Copy, Debug)]
pub struct Counter {
    pub name: &'static str,
    pub tags: &'static [&'static str],
    pub doc: &'static str,
}

macro_rules! counter_name {
    ($name:ident) => {
        stringify!($name)
    };
    ($name:ident, $kname:literal) => {
        $kname
    };
}

macro_rules! counters {
    ($(#[doc = $sdoc:literal])* $ty:ident {
        $( $name:ident $(as $kname:literal)? $([$($tag:ident)*])? : $doc:literal ),* $(,)?
    }) => {
        $(#[doc = $sdoc])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct $ty { $( #[doc = $doc] pub $name: u64, )* }

        impl $ty {
            /// Every counter, in declaration (= export) order.
            pub const COUNTERS: &'static [Counter] = &[
                $( Counter { name: counter_name!($name $(, $kname)?), tags: &[$($(stringify!($tag)),*)?], doc: $doc }, )*
            ];

            fn values(&self) -> impl Iterator<Item = u64> {
                [$( self.$name ),*].into_iter()
            }

            /// Every counter as (prefix + kernel name, value).
            pub fn export(&self, prefix: &str, out: &mut Vec<(String, u64)>) {
                for (c, v) in Self::COUNTERS.iter().zip(self.values()) {
                    out.push((format!("{prefix}{}", c.name), v));
                }
            }

            /// The counters tagged `tag` (a file that shows only some of them).
            pub fn export_tagged(&self, tag: &str, prefix: &str, out: &mut Vec<(String, u64)>) {
                for (c, v) in Self::COUNTERS.iter().zip(self.values()) {
                    if c.tags.contains(&tag) {
                        out.push((format!("{prefix}{}", c.name), v));
                    }
                }
            }

            /// Field-wise sum (hierarchical totals: a memcg subtree).
            pub fn sum<'a>(items: impl IntoIterator<Item = &'a $ty>) -> $ty {
                let mut t = $ty::default();
                for x in items {
                    $( t.$name += x.$name; )*
                }
                t
            }
        }
    };
}

pub mod trace;

counters! {
    /// /proc/vmstat event counters (kernel-model.md §14.1).
    VmEvents {
        pswpin: "Pages read from a swap device.",
        pswpout: "Pages written to a swap device.",
        zswpin: "Pages loaded from zswap.",
        zswpout: "Pages stored in zswap.",
        zswpwb: "Pages written back from zswap to the swap device.",
        swpout_zero: "Zero-filled pages recorded in the swap zeromap instead of written (6.12+).",
        swpin_zero: "Pages swapped in from the zeromap without IO (6.12+).",
        pgfault: "Page faults.",
        pgmajfault: "Page faults that had to wait for IO (swap-in from a device).",
        pgpgin: "KiB read from block devices (the kernel counts sectors and halves on output).",
        pgpgout: "KiB written to block devices.",
        // pgscan_file, pgsteal_file and workingset_*_file are FileVmEvents: exported only by
        // machines with file pages.
        pgscan_kswapd: "Pages scanned by kswapd.",
        pgscan_direct: "Pages scanned by direct reclaim.",
        pgscan_anon: "Anonymous pages scanned.",
        pgsteal_kswapd: "Pages reclaimed by kswapd.",
        pgsteal_direct: "Pages reclaimed by direct reclaim.",
        pgsteal_anon: "Anonymous pages reclaimed.",
        pgrefill: "Pages scanned on the active lists (shrink_active_list).",
        pgactivate: "Pages moved to an active list.",
        pgdeactivate: "Pages moved to an inactive list.",
        pgrotated: "Pages rotated to the inactive tail when their writeback ended (PG_reclaim).",
        workingset_refault_anon: "Anonymous pages faulted in again while their shadow entry existed.",
        workingset_activate_anon: "Refaulted pages activated (refault distance within the workingset).",
        workingset_restore_anon: "Refaulted pages that were active when evicted.",
        nr_vmscan_write: "Pages written by reclaim (pageout).",
        swap_ra: "Pages read by swap readahead.",
        swap_ra_hit: "Readahead pages that were then used.",
        allocstall_movable: "Direct reclaim entries; user page allocations are __GFP_MOVABLE.",
        pageoutrun: "kswapd balance_pgdat runs.",
        oom_kill: "Processes killed by the OOM killer.",
    }
}

counters! {
    /// /proc/vmstat unevictable-LRU counters (mm/mlock.rs), exported by runs with an mlocked
    /// region only. Not modelled, so absent: unevictable_pgs_scanned (no scan of the
    /// unevictable list: nothing makes an mlocked folio evictable while mapped),
    /// unevictable_pgs_stranded and unevictable_pgs_cleared (every mlocked folio is munlocked
    /// while on its list, before it is freed).
    MlockEvents {
        unevictable_pgs_culled: "Folios put on the unevictable LRU.",
        unevictable_pgs_rescued: "Folios moved from the unevictable LRU back to an evictable one.",
        unevictable_pgs_mlocked: "Pages mlocked (PG_mlocked set).",
        unevictable_pgs_munlocked: "Pages munlocked (PG_mlocked cleared while on the LRU).",
    }
}

counters! {
    /// /proc/vmstat THP fault counters (mm/phys.rs), exported with the physical-memory model.
    ThpEvents {
        thp_fault_alloc: "Huge pages allocated at a page fault.",
        thp_fault_fallback: "Page faults that wanted a huge page and fell back to base pages.",
        thp_fault_fallback_charge: "Of those, the ones whose huge page could not be charged to the memcg.",
    }
}

counters! {
    /// /proc/vmstat compaction and migration counters (crate::compaction), exported with the
    /// physical-memory model (mm/phys.rs).
    CompactEvents {
        compact_migrate_scanned: "Pages the migrate scanner looked at.",
        compact_free_scanned: "Pages the free scanner looked at.",
        compact_isolated: "Pages isolated by either scanner (sources to migrate and free targets).",
        compact_stall: "Direct compactions that were not skipped (deferred ones count).",
        compact_fail: "Direct compactions after which the allocation still failed.",
        compact_success: "Direct compactions after which the allocation succeeded.",
        pgmigrate_success: "Pages migrated.",
        compact_daemon_wake: "kcompactd wake-ups.",
        compact_daemon_migrate_scanned: "Pages kcompactd's migrate scanner looked at.",
        compact_daemon_free_scanned: "Pages kcompactd's free scanner looked at.",
    }
}

counters! {
    /// Counters of kernel_alloc phases (mm/kalloc.rs), exported only by a scenario that has
    /// one: /proc/vmstat's ALLOCSTALL of ZONE_NORMAL (GFP_KERNEL requests), and SLUB's
    /// ORDER_FALLBACK (/sys/kernel/slab/<cache>/order_fallback with CONFIG_SLUB_STATS),
    /// summed over the phases that name a fallback order.
    KernelAllocEvents {
        allocstall_normal [vmstat]: "Direct reclaim entries of kernel (GFP_KERNEL, ZONE_NORMAL) allocations.",
        order_fallback [slub]: "Slabs allocated at their fallback order (s->min) after the higher order failed.",
    }
}

counters! {
    /// /proc/vmstat event counters of file pages. Exported only by a machine with a
    /// filesystem: without one the model cannot produce them (and they stay absent).
    FileVmEvents {
        pgscan_file: "File pages scanned.",
        pgsteal_file: "File pages reclaimed.",
        workingset_refault_file: "File pages read in again while their shadow entry existed.",
        workingset_activate_file: "File refaults activated (refault distance within the workingset).",
        workingset_restore_file: "File refaults of pages that were active when evicted.",
        nr_dirtied: "Page cache pages dirtied (NR_DIRTIED).",
        nr_written: "Page cache pages whose writeback completed (NR_WRITTEN).",
        nr_vmscan_immediate_reclaim: "Dirty file pages reclaim marked PG_reclaim, to be freed as soon as written (NR_VMSCAN_IMMEDIATE).",
    }
}

counters! {
    /// /sys/kernel/debug/zswap event counters (the gauges are computed at snapshot time).
    ZswapEvents {
        decompress_fail: "Loads whose decompression failed.",
        pool_limit_hit: "Stores refused because the pool was at its limit.",
        reject_alloc_fail: "Stores refused because the allocator could not allocate.",
        reject_compress_fail: "Stores refused because compression failed.",
        reject_compress_poor: "Stores refused because the output was too large for the allocator.",
        reject_kmemcache_fail: "Stores refused because no entry could be allocated.",
        reject_reclaim_fail: "Writeback attempts that failed.",
        written_back_pages: "Entries written back to the swap device.",
    }
}

counters! {
    /// Per-memcg event counters. Tags: `v1` = cgroup v1 memory.stat (own and total_), `v2` =
    /// cgroup v2 memory.stat (hierarchical), `events` = v2 memory.events (own).
    MemcgEvents {
        pgfault [v1 v2]: "Page faults in the cgroup.",
        pgmajfault [v1 v2]: "Major page faults in the cgroup.",
        pgpgin [v1]: "Charge events: one per folio charged (v1 only).",
        pgpgout [v1]: "Uncharge events: one per folio uncharged (v1 only).",
        pswpin [v2]: "Pages read from a swap device.",
        pswpout [v2]: "Pages written to a swap device.",
        zswpin [v2]: "Pages loaded from zswap.",
        zswpout [v2]: "Pages stored in zswap.",
        zswpwb [v2]: "Pages written back from zswap.",
        swpin_zero [v2]: "Pages swapped in from the zeromap.",
        swpout_zero [v2]: "Zero-filled pages swapped out to the zeromap.",
        pgscan [v2]: "Pages scanned.",
        pgsteal [v2]: "Pages reclaimed.",
        pgscan_kswapd [v2]: "Pages scanned by kswapd.",
        pgscan_direct [v2]: "Pages scanned by direct and memcg reclaim.",
        pgsteal_kswapd [v2]: "Pages reclaimed by kswapd.",
        pgsteal_direct [v2]: "Pages reclaimed by direct and memcg reclaim.",
        pgrefill [v2]: "Pages scanned on the active lists.",
        pgactivate [v2]: "Pages moved to an active list.",
        pgdeactivate [v2]: "Pages moved to an inactive list.",
        workingset_refault_anon [v1 v2]: "Anonymous refaults.",
        workingset_activate_anon [v2]: "Anonymous refaults activated.",
        workingset_restore_anon [v2]: "Anonymous refaults of pages that were active.",
        low_events as "low" [events]: "Times the cgroup was reclaimed although under its memory.low (memory.events low; MEMCG_LOW).",
        high_events as "high" [events]: "Times usage went over memory.high (memory.events high).",
        max_events as "max" [events]: "Times usage hit memory.max (memory.events max).",
        oom_events as "oom" [events]: "Times the cgroup's limit invoked the OOM killer (memory.events oom; mem_cgroup_oom).",
        oom_kill [events]: "OOM kills of the cgroup's tasks (memory.events oom_kill; MEMCG_OOM_KILL, counted per __oom_kill_process call).",
        oom_group_kill [events]: "Group OOM kills of the cgroup as memory.oom.group (memory.events oom_group_kill; MEMCG_OOM_GROUP_KILL).",
        swap_max_events as "max" [swap_events]: "Swap-outs refused at memory.swap.max (memory.swap.events max; MEMCG_SWAP_MAX).",
        swap_fail_events as "fail" [swap_events]: "Swap slot allocations that failed, for want of a free slot or at memory.swap.max (memory.swap.events fail; MEMCG_SWAP_FAIL).",
    }
}

counters! {
    /// Per-memcg event counters of file pages (tags as [`MemcgEvents`]); exported only by a
    /// machine with a filesystem.
    MemcgFileEvents {
        workingset_refault_file [v1 v2]: "File refaults.",
        workingset_activate_file [v2]: "File refaults activated.",
        workingset_restore_file [v2]: "File refaults of pages that were active.",
    }
}

counters! {
    /// Request counters of a block swap device: four fields of /sys/block/<dev>/stat
    /// (Documentation/block/stat.rst: "read I/Os", "read merges", "write I/Os", "write merges";
    /// struct disk_stats ios[] and merges[]). A merge is a bio added to an existing request, so
    /// ios + merges = pages of that direction sent to the device.
    DiskStats {
        read_ios: "Read requests issued.",
        read_merges: "Read bios merged into a request.",
        write_ios: "Write requests issued.",
        write_merges: "Write bios merged into a request.",
        flush_ios: "Cache flushes issued (REQ_OP_FLUSH: a journal commit's REQ_PREFLUSH, the flush after a write that emulates REQ_FUA, blkdev_issue_flush); 0 on a device model without `flush_ns`.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_uses_kernel_names_tags_and_sums() {
        let a = MemcgEvents {
            pgfault: 2,
            high_events: 1,
            pgpgin: 5,
            ..Default::default()
        };
        let b = MemcgEvents {
            pgfault: 3,
            ..Default::default()
        };
        let s = MemcgEvents::sum([&a, &b]);
        assert_eq!((s.pgfault, s.high_events, s.pgpgin), (5, 1, 5));
        let mut out = Vec::new();
        a.export_tagged("events", "memory.events.", &mut out);
        let names: Vec<&str> = out.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "memory.events.low",
                "memory.events.high",
                "memory.events.max",
                "memory.events.oom",
                "memory.events.oom_kill",
                "memory.events.oom_group_kill"
            ]
        );
        assert_eq!(out[1].1, 1);
        let mut out = Vec::new();
        a.export_tagged("v1", "", &mut out);
        assert!(
            out.contains(&("pgpgin".to_string(), 5)) && !out.iter().any(|(k, _)| k == "pswpin")
        );
        let mut out = Vec::new();
        VmEvents::default().export("vmstat.", &mut out);
        assert_eq!(out.len(), VmEvents::COUNTERS.len());
        assert_eq!(out[0].0, "vmstat.pswpin");
    }
}
