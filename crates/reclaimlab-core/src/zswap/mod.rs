//! zswap's pool (mm/zswap.c, kernel-model.md §9): its parameters, the allocator pools, the
//! limit with its accept-threshold hysteresis, the shrink worker's state and the zswap
//! counters. The kernel paths that move pages in and out of it (store, load, writeback, the
//! worker's steps, the shrinker) work on memory, memcgs and swap and live with them in
//! mm/zswap.rs, as mm/zswap.c lives in mm/.
//!
//! Narrow context: this module knows nothing of `Mm`. Its methods are handed what they touch:
//! the time (`now`), the free-page count its pools grow from and shrink into, the event queue
//! (to queue the worker), and the policy switches they depend on.

use crate::compress::Codec;
use crate::config::ZswapParams;
use crate::error::{ConfigError, Result};
use crate::policy::{Incompressible, SameFilled, Switches, ZswapLru};
use crate::sim::{EventKind, EventQueue, Time};
use crate::stats::ZswapEvents;
use crate::zpool::{Zpool, ZpoolError};

const PAGE_SIZE: u64 = 4096;

/// The global shrink worker's loop state (shrink_worker's locals).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WorkerRun {
    pub(crate) thr: u64,
    pub(crate) failures: u32,
    pub(crate) attempts: u32,
    pub(crate) started: Time,
}

pub struct Zswap {
    /// totalram_pages: what the pool limit is a percentage of.
    totalram: u64,
    pub enabled: bool,
    pub codec: Codec,
    pub max_pool_percent: u64,
    pub accept_threshold_percent: u64,
    pub shrinker_enabled: bool,
    /// The zswap pool's zsmalloc pools: 32 up to 6.11 (an entry's pool chosen by a hash of the
    /// entry), one since.
    pub pools: Vec<Box<dyn Zpool>>,
    /// zswap_pool_reached_full.
    pub reached_full: bool,
    pub stored_pages: u64,
    pub stored_incompressible_pages: u64,
    /// ≤6.11 same_filled_pages gauge.
    pub same_filled_pages: u64,
    pub ev: ZswapEvents,
    /// zswap_next_shrink: the worker's memcg cursor, a position in its walk (None = before the
    /// first memcg): the root, then the host's other memcgs, then the scenario's non-root ones.
    pub(crate) next_shrink: Option<u32>,
    /// Online memcgs of the machine that are not the scenario's (machine.host_memcgs).
    pub(crate) host_memcgs: u32,
    pub(crate) worker_pending: bool,
    pub(crate) worker: Option<WorkerRun>,
    pub worker_clock: Time,
    /// Latest (virtual) time at which a store asked for the worker. A process runs ahead of
    /// the worker by up to a quantum, so its requests may lie after the current run started.
    pub(crate) last_queue_request: Time,
    /// Each zsmalloc pool's compaction shrinker's deferred count.
    pub compact_deferred: Vec<u64>,
    /// Last store reject or load miss (Funaki's patch 6 pauses writeback after it).
    pub last_contention: Option<Time>,
    /// Set by the engine before each event: user tasks occupy every CPU. A worker without
    /// WQ_MEM_RECLAIM (patch 4) yields then.
    pub cpus_saturated: bool,
}

impl Zswap {
    pub fn new(
        totalram: u64,
        enabled: bool,
        codec: Codec,
        max_pool_percent: u64,
        accept_threshold_percent: u64,
        shrinker_enabled: bool,
        pools: Vec<Box<dyn Zpool>>,
    ) -> Zswap {
        let n = pools.len();
        Zswap {
            totalram,
            enabled,
            codec,
            max_pool_percent,
            accept_threshold_percent,
            shrinker_enabled,
            pools,
            reached_full: false,
            stored_pages: 0,
            stored_incompressible_pages: 0,
            same_filled_pages: 0,
            ev: ZswapEvents::default(),
            next_shrink: None,
            host_memcgs: 0,
            worker_pending: false,
            worker: None,
            worker_clock: 0,
            last_queue_request: 0,
            compact_deferred: vec![0; n],
            last_contention: None,
            cpus_saturated: false,
        }
    }
}

impl Zswap {
    /// zswap from its module parameters (/sys/module/zswap/parameters/*) on kernel `version`
    /// with its switches: the compressor, the pool limit and threshold, the shrinker, and the
    /// pool's allocator (one zpool per pool, 32 up to 6.11).
    pub(crate) fn from_config(
        p: &ZswapParams,
        version: &str,
        switches: &Switches,
        totalram: u64,
    ) -> Result<Zswap> {
        let codec: Codec = p
            .compressor
            .parse()
            .map_err(|e| ConfigError::unknown("kernel.zswap.compressor", e))?;
        p.check_ranges()?;
        if switches.lru == ZswapLru::Global && p.shrinker_enabled {
            return Err(ConfigError::invalid(
                "kernel.zswap.shrinker_enabled",
                "the memory-pressure shrinker needs the per-memcg zswap LRU (kernel.switches.\"zswap.lru\" = \"per_memcg\", 6.8+)",
            ));
        }
        let zpool = crate::zpool::select(
            p.zpool
                .as_deref()
                .unwrap_or(crate::zpool::default_for(version)),
            version,
            "kernel.zswap.zpool",
        )?;
        let pools = (0..switches.zpools).map(|_| (zpool.new)()).collect();
        Ok(Zswap::new(
            totalram,
            p.enabled,
            codec,
            p.max_pool_percent as u64,
            p.accept_threshold_percent as u64,
            p.shrinker_enabled,
            pools,
        ))
    }
}

impl Zswap {
    /// zswap_max_pages: totalram × max_pool_percent / 100.
    pub fn max_pages(&self) -> u64 {
        self.totalram * self.max_pool_percent / 100
    }

    /// zswap_accept_thr_pages: max_pages × accept_threshold_percent / 100.
    pub fn accept_thr_pages(&self) -> u64 {
        self.max_pages() * self.accept_threshold_percent / 100
    }

    /// zswap_total_pages: pages of all the pool's allocator pools.
    pub fn total_pages(&self) -> u64 {
        self.pools.iter().map(|p| p.total_pages()).sum()
    }

    /// zswap_check_limits: pool_limit_hit counts store attempts at or over the limit; the
    /// reached_full flag clears only once the pool is back at the accept threshold.
    /// With proactive shrinking (Funaki's patch 3) there is no hysteresis: stores are refused
    /// only at the limit, and the worker starts at accept_threshold + 1% of the limit.
    pub fn check_limits(
        &mut self,
        now: Time,
        proactive_shrink: bool,
        queue: &mut EventQueue,
    ) -> bool {
        let cur = self.total_pages();
        let max = self.max_pages();
        if proactive_shrink {
            let start = max * (self.accept_threshold_percent + 1).min(100) / 100;
            if cur >= max {
                self.ev.pool_limit_hit += 1;
                self.reached_full = true;
                return true;
            }
            self.reached_full = false;
            if cur >= start {
                self.queue_shrink_worker(now, queue);
            }
            return false;
        }
        if cur >= max {
            self.ev.pool_limit_hit += 1;
            self.reached_full = true;
        } else if self.reached_full && cur <= self.accept_thr_pages() {
            self.reached_full = false;
        }
        self.reached_full
    }

    /// Which pool holds page `i`'s entry: the kernel hashed the entry's address over 32 pools
    /// (≤6.11); a hash of the page index spreads entries the same way, reproducibly.
    fn pool_of(&self, i: u32) -> usize {
        let n = self.pools.len();
        if n == 1 {
            0
        } else {
            ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % n
        }
    }

    /// A cache hint for freeing page `i`'s entry `h` soon ([`Zpool::prefetch`]).
    #[inline]
    pub fn prefetch(&self, i: u32, h: u32, deep: bool) {
        if let Some(pool) = self.pools.get(self.pool_of(i)) {
            pool.prefetch(h, deep);
        }
    }

    /// zpool_malloc for page `i`'s entry, the pool's page growth taken from `nr_free`.
    pub fn pool_malloc(
        &mut self,
        i: u32,
        len: u32,
        nr_free: &mut u64,
    ) -> std::result::Result<u32, ZpoolError> {
        let k = self.pool_of(i);
        let pool = &mut self.pools[k];
        let before = pool.total_pages();
        let h = pool.malloc(len)?;
        let grew = pool.total_pages() - before;
        if grew > *nr_free {
            pool.free(h);
            return Err(ZpoolError::NoMem);
        }
        *nr_free -= grew;
        Ok(h)
    }

    /// zpool_free of page `i`'s entry; freed pool pages return to `nr_free`.
    pub fn pool_free(&mut self, i: u32, h: u32, nr_free: &mut u64) {
        let k = self.pool_of(i);
        let pool = &mut self.pools[k];
        let before = pool.total_pages();
        pool.free(h);
        *nr_free += before - pool.total_pages();
    }

    /// queue_work(shrink_wq, &zswap_shrink_work): one instance at a time; queueing while it is
    /// pending does nothing, while it runs makes it run again afterwards.
    pub fn queue_shrink_worker(&mut self, now: Time, queue: &mut EventQueue) {
        self.last_queue_request = self.last_queue_request.max(now);
        if self.worker_pending {
            return;
        }
        self.worker_pending = true;
        if self.worker.is_none() {
            self.worker_clock = self.worker_clock.max(now);
            queue.push(self.worker_clock, EventKind::ZswapWorker);
        }
    }

    pub fn worker_busy(&self) -> bool {
        self.worker.is_some() || self.worker_pending
    }

    /// zswap's files: the debugfs event counters and gauges, meminfo's Zswap and Zswapped.
    /// `switches` says which gauges the kernel version has.
    pub fn export(&self, switches: &Switches, out: &mut Vec<(String, u64)>) {
        let pool_pages = self.total_pages();
        self.ev.export("zswap.", out);
        out.push(("zswap.pool_total_size".into(), pool_pages * PAGE_SIZE));
        out.push(("zswap.stored_pages".into(), self.stored_pages));
        if switches.incompressible == Incompressible::StoreRaw {
            out.push((
                "zswap.stored_incompressible_pages".into(),
                self.stored_incompressible_pages,
            ));
        }
        if switches.same_filled == SameFilled::Zswap {
            out.push(("zswap.same_filled_pages".into(), self.same_filled_pages));
        }
        out.push(("meminfo.Zswap".into(), pool_pages * 4));
        out.push(("meminfo.Zswapped".into(), self.stored_pages * 4));
    }
}
