//! The memory-management state of one simulated machine (one NUMA node), and the kernel paths
//! that act on it. `Mm` is split over files the way mm/ is: memory.rs (faults), memcg.rs
//! (charging, memory.high), vmscan.rs (LRU scanning, kswapd, direct and memcg reclaim),
//! workingset.rs, swap.rs (slots, devices, swap cache, readahead) and zswap/.

pub mod analytic;
pub mod cgwb;
pub mod filemap;
pub mod journal;
pub mod kalloc;
pub mod lru_add;
pub mod lru_gen;
pub mod memcg;
pub mod memcg_peak;
pub mod memcg_stats;
pub mod memory;
pub mod mlock;
pub mod objcg;
pub mod page;
pub mod page_io;
pub mod page_writeback;
pub mod phys;
pub mod pressure;
pub mod region;
pub mod shmem;
pub mod swap;
pub mod vmscan;
pub mod workingset;
pub mod zswap;

use crate::compress::Codec;
use crate::config::{Kernel, SimConfig};
use crate::costs::Costs;
use crate::error::{ConfigError, Result};
use crate::policy::Switches;
pub use crate::sim::{Actor, Ctx};
use crate::sim::{EventKind, EventQueue, Time};
use crate::stats::{FileVmEvents, MlockEvents, VmEvents};
use crate::zpool::zsmalloc::{self, Zsmalloc};
use crate::zswap::Zswap;
pub use memcg::Memcg;
use page::Page;
pub use region::RegionInfo;
use swap::Swap;

pub use page::PAGE_SIZE;
/// SWAP_CLUSTER_MAX: reclaim works in batches of 32 pages.
pub const SWAP_CLUSTER_MAX: u64 = 32;
/// PTRS_PER_PTE on x86-64: one page table page maps 512 pages (2 MiB).
pub const PTRS_PER_PTE: u32 = 512;
/// MAX_RECLAIM_RETRIES.
pub const MAX_RECLAIM_RETRIES: u32 = 16;

/// The allocation failed even after reclaim: the caller OOM-kills.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Oom {
    pub memcg: Option<u16>,
}

/// kswapd's state between its priority passes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Kswapd {
    pub running: bool,
    pub priority: i32,
    pub nr_reclaimed: u64,
    pub failures: u32,
    pub clock: Time,
}

pub struct Mm {
    pub(crate) pages: page::Pages,
    pub(crate) regions: Vec<RegionInfo>,
    pub(crate) memcgs: Vec<Memcg>,
    pub(crate) cgroup_v2: bool,
    /// The cgroup2 mount option memory_recursiveprot (cgrp_dfl_root.flags).
    pub(crate) memory_recursiveprot: bool,
    /// Some memcg has memory.min or memory.low (v2): reclaim computes protection. Without,
    /// the protection checks are skipped (see mm/memcg.rs, mem_cgroup_calculate_protection).
    pub(crate) memcg_protection: bool,
    /// Some memcg has memory.swap.max (v2): swap charges are checked against it.
    pub(crate) memcg_swap_max: bool,
    /// totalram_pages (MemTotal): what zswap's limit is a percentage of.
    pub(crate) totalram: u64,
    pub(crate) nr_free: u64,
    pub(crate) wmark_min: u64,
    pub(crate) wmark_low: u64,
    pub(crate) wmark_high: u64,
    /// Every kernel knob of the scenario (crate::knobs), for the paths that read one directly.
    pub(crate) knobs: Kernel,
    pub(crate) swap: Swap,
    pub(crate) zswap: Zswap,
    /// Compressors in use: [0] zswap's, then each zram device's comp_algorithm.
    pub(crate) codecs: Vec<Codec>,
    /// zsmalloc's huge_class_size: zram stores pages compressing to this or more uncompressed.
    pub(crate) zram_huge_class_size: u32,
    pub(crate) vm: VmEvents,
    /// The unevictable-LRU events and NR_MLOCK (mm/mlock.rs).
    pub(crate) mlock: MlockEvents,
    pub(crate) nr_mlock: u64,
    pub(crate) costs: Costs,
    pub(crate) switches: Switches,
    pub(crate) kswapd: Kswapd,
    pub(crate) queue: EventQueue,
    pub(crate) seed: u64,
    /// engine.accesses = "analytic": the page classes and young-bit hazards of the anonymous
    /// regions (mm/analytic.rs); None in exact mode.
    pub(crate) analytic: Option<analytic::Analytic>,
    /// current->memcg_nr_pages_over_high per process.
    pub(crate) over_high: Vec<u64>,
    /// Per process: the folios its CPU's lru_add batch holds (page, memcg, list; mm/lru_add.rs).
    pub(crate) lru_add_fbatch: Vec<Vec<(u32, u16, u8)>>,
    /// The open peak files (memcg_peak.rs), in the order they were opened; a released one
    /// stays in the table (ids are never reused within a run).
    pub(crate) peak_fds: Vec<memcg_peak::PeakFd>,
    /// mem_cgroup_iter's shared reclaim position, per reclaim target memcg.
    pub(crate) reclaim_cursor: Vec<u16>,
    /// Resident pages (folios of workload memory), for the conservation check.
    pub(crate) nr_resident: u64,
    /// Pages the machine holds besides workload memory and zsmalloc (kernel, other tasks).
    pub(crate) reserved: u64,
    /// NR_PAGETABLE: page table pages (PTE level) of the simulated processes.
    pub(crate) nr_page_table_pages: u64,
    /// When memcg statistics are flushed, and the flushes' state (mm/memcg_stats.rs).
    pub(crate) stats: memcg_stats::StatsFlushState,
    /// Objects scanned by the zswap and zsmalloc shrinkers: our share of slabs_scanned.
    pub(crate) shrinker_objects_scanned: u64,
    /// Reclaim swap-outs that went to a device while the zswap pool held (older) entries.
    pub(crate) lru_inversion_swapouts: u64,
    /// The running thread's block plug (current->plug; crate::block).
    pub(crate) plug: crate::block::Plug,
    /// Filesystems of the file regions (mm/filemap.rs); their block devices follow the swap
    /// devices' in the block layer's numbering.
    pub(crate) fs: Vec<filemap::Filesystem>,
    /// The tmpfs mounts holding tmpfs file regions (mm/shmem.rs).
    pub(crate) tmpfs: Vec<shmem::Tmpfs>,
    /// File-page vmstat events (exported only with a filesystem).
    pub(crate) vm_file: FileVmEvents,
    /// The multi-gen LRU's node state: the memcg LRU, the fault flag (mm/lru_gen.rs).
    pub(crate) lru_gen: lru_gen::LruGenNode,
    /// Dirty page cache counters and the tasks' dirty ratelimits (mm/page_writeback.rs).
    pub(crate) dirty: page_writeback::DirtyState,
    /// Reclaim's writeback flags of the node and the lruvecs (mm/vmscan.rs).
    pub(crate) pgdat: vmscan::PgdatFlags,
    /// Tracepoint counts, when the run asks for them (crate::stats::trace).
    pub(crate) trace: Option<Box<crate::stats::trace::Trace>>,
    /// Memory PSI (crate::psi): one group per memcg, tasks = processes then kswapd.
    pub(crate) psi: crate::psi::Psi,
    /// Latency histograms per process and phase (crate::latency).
    pub(crate) lat: crate::latency::LatencyLog,
    /// Physical memory (zone, buddy, compaction), only when some region can have THPs
    /// (mm/phys.rs).
    pub(crate) phys: Option<Box<phys::Phys>>,
}

/// What code outside the crate (bindings, benches, tests) may see, and what tests that set
/// up a state directly may change. Everything else goes through the kernel paths.
impl Mm {
    pub fn pages(&self) -> &[Page] {
        &self.pages
    }

    pub fn memcgs(&self) -> &[Memcg] {
        &self.memcgs
    }

    /// For tests: set a limit or a memcg file directly.
    pub fn memcgs_mut(&mut self) -> &mut [Memcg] {
        &mut self.memcgs
    }

    /// For tests: give a machine built with cgroup v1 the v2 semantics (charges already made
    /// stay as they are; the test re-charges what v2 would have charged).
    pub fn set_cgroup_v2(&mut self) {
        self.cgroup_v2 = true;
    }

    pub fn swap(&self) -> &Swap {
        &self.swap
    }

    pub fn zswap(&self) -> &Zswap {
        &self.zswap
    }

    /// For tests: change a zswap parameter or fill its pools directly.
    pub fn zswap_mut(&mut self) -> &mut Zswap {
        &mut self.zswap
    }

    pub fn vm(&self) -> &VmEvents {
        &self.vm
    }
}

impl Mm {
    /// The machine of the lowered config: the time model and policy switches, watermarks,
    /// memcg tree, zswap, swap devices, regions and their pages, each built by its own
    /// subsystem from its own section.
    pub(crate) fn from_config(cfg: &SimConfig) -> Result<Mm> {
        let costs = Costs::with_overrides(&cfg.costs)?;
        let switches = Switches::with_overrides(&cfg.kernel.version, &cfg.kernel.switches)?;
        let totalram = cfg.machine.memory_bytes / PAGE_SIZE;
        if totalram < 1024 {
            return Err(ConfigError::invalid(
                "machine.memory_bytes",
                "at least 4 MiB",
            ));
        }
        cfg.kernel.check_ranges()?;
        let thp_enabled = phys::lookup(
            phys::THP_ENABLED,
            "kernel.transparent_hugepage.enabled",
            &cfg.kernel.transparent_hugepage.enabled,
        )?;
        let (wmark_min, wmark_low, wmark_high) =
            vmscan::watermarks(&cfg.kernel.vm, thp_enabled.khugepaged_runs(), totalram);
        let (memcgs, cgroup_v2) = Memcg::tree_from_config(&cfg.cgroups, cfg.kernel.vm.swappiness)?;
        let mut zswap =
            Zswap::from_config(&cfg.kernel.zswap, &cfg.kernel.version, &switches, totalram)?;
        zswap.host_memcgs = cfg.machine.host_memcgs;
        // Codec slot 0 is zswap's compressor; zram devices add theirs.
        let mut codecs = vec![zswap.codec];
        let mut swap = Swap::from_config(
            &cfg.machine.swap,
            &cfg.kernel.version,
            &switches,
            &mut codecs,
        )?;
        swap.start_readahead_state(
            cfg.machine.swapin_readahead_hits,
            cfg.machine.last_readahead_pages,
        )?;
        let fs = filemap::Filesystem::from_config(&cfg.machine.filesystems)?;
        let tmpfs = shmem::Tmpfs::from_config(&cfg.machine.filesystems, totalram)?;
        let (regions, pages) = region::from_config(cfg, memcgs.len(), &codecs)?;
        let analytic = (cfg.engine.accesses == crate::config::Accesses::Analytic)
            .then(|| analytic::Analytic::new(&regions, cfg.seed));
        let nmemcg = memcgs.len();
        // PSI tasks: each process counts in its memcg and every ancestor (cgroup v2; v1 has
        // no per-cgroup pressure, only the system's), kswapd in the root.
        let mut psi_tasks: Vec<Vec<u16>> = cfg
            .processes
            .iter()
            .map(|p| {
                let chain = std::iter::successors(Some(p.cgroup as u16), |&c| {
                    memcgs.get(c as usize).and_then(|m| m.parent)
                });
                if cgroup_v2 {
                    chain.collect()
                } else {
                    vec![0]
                }
            })
            .collect();
        psi_tasks.push(vec![0]);
        let psi = crate::psi::Psi::new(nmemcg, cfg.machine.cpus as usize, psi_tasks);
        let mut mm = Mm {
            pages: page::Pages::new(pages),
            regions,
            memory_recursiveprot: cfg.cgroups.memory_recursiveprot,
            memcg_protection: cgroup_v2 && memcgs.iter().any(|m| m.min > 0 || m.low > 0),
            memcg_swap_max: cgroup_v2 && memcgs.iter().any(|m| m.swap_max != u64::MAX),
            memcgs,
            cgroup_v2,
            totalram,
            nr_free: totalram,
            wmark_min,
            wmark_low,
            wmark_high,
            knobs: cfg.kernel.clone(),
            swap,
            zswap,
            codecs,
            zram_huge_class_size: Zsmalloc::new(zsmalloc::CHAIN_SIZE).huge_class_size(),
            vm: VmEvents::default(),
            mlock: MlockEvents::default(),
            nr_mlock: 0,
            costs,
            switches,
            kswapd: Kswapd::default(),
            queue: EventQueue::default(),
            seed: cfg.seed,
            over_high: vec![0; cfg.processes.len()],
            lru_add_fbatch: vec![Vec::new(); cfg.processes.len()],
            peak_fds: Vec::new(),
            reclaim_cursor: vec![0; nmemcg],
            nr_resident: 0,
            reserved: 0,
            nr_page_table_pages: 0,
            stats: memcg_stats::StatsFlushState::new(
                cfg.cgroups.stats_flush.clone(),
                cfg.machine.cpus,
            ),
            shrinker_objects_scanned: 0,
            lru_inversion_swapouts: 0,
            plug: Default::default(),
            fs,
            tmpfs,
            vm_file: FileVmEvents::default(),
            lru_gen: lru_gen::LruGenNode::new(nmemcg),
            dirty: page_writeback::DirtyState::new(cfg.processes.len()),
            pgdat: vmscan::PgdatFlags {
                cgroup_congested: vec![false; nmemcg],
                ..Default::default()
            },
            trace: crate::stats::trace::Trace::from_groups(&cfg.trace)?,
            psi,
            lat: crate::latency::LatencyLog::new(cfg.processes.len()),
            phys: None,
            analytic,
        };
        let kernel_alloc = cfg.processes.iter().any(|p| {
            p.phases
                .iter()
                .any(|np| matches!(np.phase, reclaimlab_workload::Phase::KernelAlloc { .. }))
        });
        mm.phys = phys::Phys::from_config(&mm, kernel_alloc, cfg.machine.page_reporting_order)?;
        Ok(mm)
    }

    /// The index of the region holding page `page`: regions take consecutive page ranges
    /// from 0, in order (mm/region.rs), so it is found from the page index alone, not kept in
    /// every page record.
    #[inline]
    pub fn region_index(&self, page: u32) -> usize {
        self.regions.partition_point(|r| r.base <= page) - 1
    }

    pub fn region_of(&self, page: u32) -> &RegionInfo {
        &self.regions[self.region_index(page)]
    }

    /// Content variant of a page (which of its region's distinct contents it holds).
    pub fn variant(&self, page: u32) -> usize {
        let r = self.region_of(page);
        reclaimlab_workload::content::variant_of(
            self.seed,
            r.content_id,
            (page - r.base) as u64,
            r.variants,
        ) as usize
    }

    /// Compressed length of page `i` with codec slot `c`.
    pub fn compressed_len(&self, i: u32, c: usize) -> u32 {
        let v = self.variant(i);
        self.region_of(i).zlen[c][v] as u32
    }

    /// Every compressed-object pool: zswap's and each zram device's.
    fn pools(&self) -> impl Iterator<Item = &dyn crate::zpool::Zpool> {
        self.zswap.pools.iter().map(|p| p.as_ref()).chain(
            self.swap
                .devs
                .iter()
                .filter_map(|d| d.zram.as_ref())
                .map(|z| z.pool.as_ref()),
        )
    }

    /// The debugfs `classes` table of every zsmalloc pool (zbud pools have none).
    pub(crate) fn zsmalloc_classes(&self) -> Vec<crate::engine::PoolClasses> {
        let zswap = self
            .zswap
            .pools
            .iter()
            .enumerate()
            .map(|(k, p)| (format!("zswap{k}"), p.as_ref()));
        let zram = self
            .swap
            .devs
            .iter()
            .filter_map(|d| d.zram.as_ref())
            .enumerate()
            .map(|(n, z)| (format!("zram{n}"), z.pool.as_ref()));
        zswap
            .chain(zram)
            .filter(|(_, p)| p.name() == "zsmalloc")
            .map(|(pool, p)| crate::engine::PoolClasses {
                pool,
                classes: p.classes(),
            })
            .collect()
    }

    /// Pages of every pool, whatever its allocator.
    pub fn pool_pages(&self) -> u64 {
        self.pools().map(|p| p.total_pages()).sum()
    }

    /// NR_ZSPAGES: pages of the zsmalloc pools only.
    pub fn zspages(&self) -> u64 {
        self.pools()
            .filter(|p| p.name() == zsmalloc::ZPOOL.name)
            .map(|p| p.total_pages())
            .sum()
    }

    /// Put a resident page on its memcg's LRU list (head), per its ACTIVE flag (folio_add_lru);
    /// with the multi-gen LRU, into a generation (mm/lru_gen.rs).
    pub fn lru_add(&mut self, i: u32) {
        if !vmscan::folio_evictable(&self.pages[i as usize]) {
            return self.add_unevictable(i);
        }
        if self.lru_gen_enabled() {
            let in_fault = self.lru_gen.in_fault;
            return self.lru_gen_add_folio(i, false, in_fault);
        }
        let p = &self.pages[i as usize];
        let which = p.lru_list();
        let mc = p.memcg as usize;
        self.memcgs[mc].lru[which as usize - 1].push_head(&mut self.pages, i);
        self.memcg_rstat_updated(mc as u16, 1);
    }

    /// lruvec_add_folio_tail: at the tail, for reclaim next (folio_rotate_reclaimable).
    pub fn lru_add_tail(&mut self, i: u32) {
        if !vmscan::folio_evictable(&self.pages[i as usize]) {
            return self.add_unevictable(i);
        }
        if self.lru_gen_enabled() {
            return self.lru_gen_add_folio(i, true, false);
        }
        let p = &self.pages[i as usize];
        let which = p.lru_list();
        let mc = p.memcg as usize;
        self.memcgs[mc].lru[which as usize - 1].push_tail(&mut self.pages, i);
        self.memcg_rstat_updated(mc as u16, 1);
    }

    pub fn lru_del(&mut self, i: u32) {
        let p = &self.pages[i as usize];
        let which = p.list();
        if page::list::is_gen(which) {
            return self.lru_gen_del_folio(i);
        }
        if which == page::list::UNEVICTABLE {
            let mc = p.memcg as usize;
            return self.memcgs[mc].unevictable.remove(&mut self.pages, i);
        }
        debug_assert!(
            (1..=4).contains(&which),
            "page {i} not on an LRU (list {which})"
        );
        let mc = p.memcg as usize;
        self.memcgs[mc].lru[which as usize - 1].remove(&mut self.pages, i);
        self.memcg_rstat_updated(mc as u16, 1);
    }

    /// Wake kswapd (wakeup_kswapd): not if it is running, the node is balanced, or it is
    /// hopeless (kswapd_failures ≥ MAX_RECLAIM_RETRIES).
    /// A cache hint for an access to page `i` a few accesses from now (sched.rs's look-ahead,
    /// after its record was prefetched): if it will swap in, start loading its swap slot's
    /// map entry and cluster and its zswap entry's zsmalloc handle (`deep` false), or what the
    /// handle points to (`deep` true, a few accesses later). Never changes a result.
    #[inline]
    pub(crate) fn prefetch_fault(&self, i: u32, deep: bool) {
        let Some(p) = self.pages.get(i as usize) else {
            return;
        };
        if p.flags & (page::pg::MAPPED | page::pg::RESIDENT) != 0 || p.slot == page::NONE {
            return;
        }
        if !deep {
            self.swap.prefetch(p.slot);
        }
        if p.flags & page::pg::ZSWAP != 0 && p.handle != page::NONE {
            self.zswap.prefetch(i, p.handle, deep);
        }
    }

    pub fn wakeup_kswapd(&mut self, now: Time) {
        if self.kswapd.running
            || self.kswapd.failures >= MAX_RECLAIM_RETRIES
            || self.node_balanced()
        {
            return;
        }
        self.kswapd.running = true;
        self.kswapd.priority = vmscan::DEF_PRIORITY;
        self.kswapd.nr_reclaimed = 0;
        self.kswapd.clock = self.kswapd.clock.max(now);
        self.vm.pageoutrun += 1;
        self.trace_kswapd_wake();
        self.queue.push(self.kswapd.clock, EventKind::Kswapd);
    }
}

impl Mm {
    /// Every counter under its kernel name, gauges read now, sorted by name. Each subsystem
    /// exports its own files; this adds the node's vmstat and meminfo gauges.
    pub fn export(&self, now: Time, out: &mut Vec<(String, u64)>) {
        self.vm.export("vmstat.", out);
        let gauges = [
            ("vmstat.nr_free_pages", self.nr_free),
            ("vmstat.nr_page_table_pages", self.nr_page_table_pages),
            (
                "vmstat.nr_inactive_anon",
                self.lru_size_tree(0, page::list::INACTIVE_ANON),
            ),
            (
                "vmstat.nr_active_anon",
                self.lru_size_tree(0, page::list::ACTIVE_ANON),
            ),
            (
                "vmstat.nr_swapcached",
                self.memcgs.iter().map(|m| m.swapcached).sum(),
            ),
            ("vmstat.nr_zspages", self.zspages()),
            ("meminfo.MemTotal", self.totalram * 4),
            ("meminfo.MemFree", self.nr_free * 4),
            ("meminfo.PageTables", self.nr_page_table_pages * 4),
        ];
        out.extend(gauges.into_iter().map(|(k, v)| (k.to_string(), v)));
        if self.has_files() {
            self.vm_file.export("vmstat.", out);
            let inactive = self.lru_size_tree(0, page::list::INACTIVE_FILE);
            let active = self.lru_size_tree(0, page::list::ACTIVE_FILE);
            let swapcached: u64 = self.memcgs.iter().map(|m| m.swapcached).sum();
            let mapped = self.nr_file_mapped();
            let (dirty, writeback) = self.nr_dirty_writeback();
            let shmem: u64 = self.nr_shmem_by_memcg().iter().sum();
            // NR_FILE_PAGES counts the page cache (tmpfs files included) and the swap cache;
            // meminfo Cached leaves the swap cache out (no buffer heads are modelled:
            // Buffers would be 0 and is not exported).
            let gauges = [
                (
                    "vmstat.nr_file_pages",
                    inactive + active + shmem + swapcached,
                ),
                ("vmstat.nr_inactive_file", inactive),
                ("vmstat.nr_active_file", active),
                ("vmstat.nr_mapped", mapped),
                ("vmstat.nr_dirty", dirty),
                ("vmstat.nr_writeback", writeback),
                ("meminfo.Dirty", dirty * 4),
                ("meminfo.Writeback", writeback * 4),
                ("meminfo.Cached", (inactive + active + shmem) * 4),
                ("meminfo.Active(file)", active * 4),
                ("meminfo.Inactive(file)", inactive * 4),
                ("meminfo.Mapped", mapped * 4),
            ];
            out.extend(gauges.into_iter().map(|(k, v)| (k.to_string(), v)));
            if self.trace.is_some() {
                // Tracepoint hits (seed 001's ftrace rows), exported like every trace.* key only
                // when the run asks for tracing (crate::stats::trace). Simulator-side only: the
                // labs' tracers do not enable these events.
                let traced = [
                    ("trace.balance_dirty_pages", self.dirty.throttled),
                    ("trace.mm_vmscan_throttled", self.dirty.reclaim_throttled),
                    (
                        "trace.mm_vmscan_write_folio.direct_anon",
                        self.dirty.reclaim_writes[0][0],
                    ),
                    (
                        "trace.mm_vmscan_write_folio.direct_file",
                        self.dirty.reclaim_writes[0][1],
                    ),
                    (
                        "trace.mm_vmscan_write_folio.kswapd_anon",
                        self.dirty.reclaim_writes[1][0],
                    ),
                    (
                        "trace.mm_vmscan_write_folio.kswapd_file",
                        self.dirty.reclaim_writes[1][1],
                    ),
                ];
                out.extend(traced.into_iter().map(|(k, v)| (k.to_string(), v)));
            }
            if !self.tmpfs.is_empty() {
                // NR_SHMEM (exported with a tmpfs only, so that earlier results keep their keys).
                out.push(("vmstat.nr_shmem".to_string(), shmem));
                out.push(("meminfo.Shmem".to_string(), shmem * 4));
            }
            for f in &self.fs {
                f.bdev.export_stat(&f.name, out);
            }
        }
        if self.lru_gen_enabled() {
            self.export_lru_gen(out);
        }
        self.export_mlock(out);
        self.export_zswap(now, out);
        self.export_memcgs(out);
        self.swap.export(out);
        if let Some(t) = &self.trace {
            t.export(out);
        }
        self.export_psi(out);
        self.export_phys(out);
        out.sort();
    }
}
