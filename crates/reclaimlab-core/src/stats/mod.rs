//! Counters, named exactly as the kernel names them. Each struct is one kernel file:
//! /proc/vmstat, /sys/kernel/debug/zswap/*, memory.stat. Event counters only; gauges (list
//! sizes, pool size) are read from the model's state when a snapshot is taken.
//!
//! A counter the model cannot produce is absent from the output, not 0: only the fields
//! declared here are ever exported.

macro_rules! counters {
    ($(#[doc = $sdoc:literal])* $ty:ident { $( $(#[doc = $doc:literal])* $name:ident ),* $(,)? }) => {
        $(#[doc = $sdoc])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct $ty { $( $(#[doc = $doc])* pub $name: u64, )* }

        impl $ty {
            pub fn export(&self, prefix: &str, out: &mut Vec<(String, u64)>) {
                $( out.push((format!("{prefix}{}", stringify!($name)), self.$name)); )*
            }
        }
    };
}

counters! {
    /// /proc/vmstat event counters (kernel-model.md §14.1).
    VmEvents {
        pswpin, pswpout, zswpin, zswpout, zswpwb, swpout_zero, swpin_zero,
        pgfault, pgmajfault,
        /// KB, like /proc/vmstat (the kernel counts sectors and halves on output).
        pgpgin,
        pgpgout,
        // pgscan_file / pgsteal_file / workingset_*_file join when file pages are modelled: until
        // then the model cannot produce them, so they are absent rather than a false 0.
        pgscan_kswapd, pgscan_direct, pgscan_anon,
        pgsteal_kswapd, pgsteal_direct, pgsteal_anon,
        pgrefill, pgactivate, pgdeactivate, pgrotated,
        workingset_refault_anon, workingset_activate_anon, workingset_restore_anon,
        nr_vmscan_write, swap_ra, swap_ra_hit,
        /// User page allocations are __GFP_MOVABLE, so direct reclaim counts against ZONE_MOVABLE.
        allocstall_movable,
        pageoutrun, oom_kill,
    }
}

counters! {
    /// /sys/kernel/debug/zswap event counters (the gauges are computed at snapshot time).
    ZswapEvents {
        decompress_fail, pool_limit_hit, reject_alloc_fail, reject_compress_fail,
        reject_compress_poor, reject_kmemcache_fail, reject_reclaim_fail, written_back_pages,
    }
}

counters! {
    /// Per-memcg event counters (memory.stat; v1 and v2 export different subsets).
    MemcgEvents {
        pgfault, pgmajfault,
        /// v1 only: charge and uncharge events, in pages.
        pgpgin,
        pgpgout,
        pswpin, pswpout, zswpin, zswpout, zswpwb, swpin_zero, swpout_zero,
        pgscan, pgsteal, pgscan_kswapd, pgscan_direct, pgsteal_kswapd, pgsteal_direct,
        pgrefill, pgactivate, pgdeactivate,
        workingset_refault_anon, workingset_activate_anon, workingset_restore_anon,
        /// memory.events: high, max, oom_kill.
        high_events,
        max_events,
        oom_kill,
    }
}

counters! {
    /// Request counters of a block swap device: four fields of /sys/block/<dev>/stat
    /// (Documentation/block/stat.rst: "read I/Os", "read merges", "write I/Os", "write merges";
    /// struct disk_stats ios[] and merges[]). A merge is a bio added to an existing request, so
    /// ios + merges = pages of that direction sent to the device.
    DiskStats { read_ios, read_merges, write_ios, write_merges }
}
