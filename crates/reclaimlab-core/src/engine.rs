//! The simulation: builds the machine from a lowered scenario, runs processes, kswapd, the
//! zswap worker and device completions on one event queue, and snapshots the counters.
//!
//! Scheduling: a process runs for up to `process_quantum_ns` of virtual time per event, so
//! other events interleave at that granularity. CPU contention is processor sharing: when more
//! threads are runnable than there are CPUs, every CPU cost is stretched by runnable / cpus.
//! Counters are read when every process has finished its phases (before they exit), as the lab
//! reads them on the real machine.

use reclaimlab_workload::{content, AccessGen, Content, Phase, Stream, PAGE_SIZE as WL_PAGE};
use serde::Serialize;

use crate::compress::{compressed_len, Codec};
use crate::config::{SimConfig, SwapKind};
use crate::costs::Costs;
use crate::mm::page::{list, pg, Page, NONE};
use crate::mm::swap::{Swap, SwapDev};
use crate::mm::{Actor, Ctx, Kswapd, Memcg, Mm, Oom, RegionInfo, PAGE_SIZE};
use crate::policy::{Switches, ZswapLru};
use crate::sim::{EventKind, EventQueue, Time};
use crate::stats::VmEvents;
use crate::zpool::zsmalloc::Zsmalloc;
use crate::zpool::{new_zpool, ZpoolKind};
use crate::zram::Zram;
use crate::zswap::Zswap;

/// Per content variant of a region: compressed length and same-filled facts.
#[derive(Clone, Debug, Default)]
struct ContentTable {
    zlen: Vec<Vec<u16>>,
    zero: Vec<bool>,
    same_filled: Vec<bool>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ProcState {
    Running,
    Sleeping,
    /// Phases done; holds its memory until every process is done.
    Finished,
    Exited,
    OomKilled,
}

struct Proc {
    name: String,
    memcg: u16,
    /// Indices into mm.regions.
    regions: Vec<u32>,
    region_pages: Vec<u64>,
    phases: Vec<(String, Phase)>,
    phase: usize,
    gen: Option<AccessGen>,
    phase_start: Time,
    accesses: u64,
    wake_at: Time,
    state: ProcState,
    /// The process ended its last slice waiting until then: not runnable before it.
    blocked_until: Time,
}

#[derive(Clone, Debug, Serialize)]
pub struct PhaseRecord {
    pub process: String,
    pub phase: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub accesses: u64,
    /// "completed", "oom_killed" or "time_limit".
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct SimStats {
    pub events: u64,
    pub sim_time_ns: u64,
    pub pages: u64,
    /// Page events: accesses plus pages scanned, swapped out and swapped in.
    pub page_events: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SimResult {
    pub counters: Vec<(String, u64)>,
    pub phases: Vec<PhaseRecord>,
    pub stats: SimStats,
}

pub struct Simulation {
    mm: Mm,
    procs: Vec<Proc>,
    records: Vec<PhaseRecord>,
    cpus: u64,
    max_time: Option<Time>,
    now: Time,
    events: u64,
    snapshot: Option<Vec<(String, u64)>>,
    finished: bool,
    /// Check page conservation every this many events (0 = never).
    check_every: u64,
}

/// calculate_min_free_kbytes: sqrt(16 × lowmem KiB), clamped to [128, 262144].
fn default_min_free_kbytes(pages: u64) -> u64 {
    let kb = pages * 4;
    ((16 * kb) as f64).sqrt().floor().clamp(128.0, 262_144.0) as u64
}

impl Simulation {
    pub fn new(cfg: &SimConfig) -> Result<Simulation, String> {
        let costs = Costs::with_overrides(&cfg.costs)?;
        let switches = Switches::with_overrides(&cfg.kernel.version, &cfg.kernel.switches)?;
        let codec: Codec = cfg.kernel.zswap.compressor.parse().map_err(|e| format!("kernel.zswap.compressor: {e}"))?;
        if cfg.machine.cpus == 0 {
            return Err("machine.cpus: must be at least 1".into());
        }
        let totalram = cfg.machine.memory_bytes / PAGE_SIZE;
        if totalram < 1024 {
            return Err("machine.memory: at least 4 MiB".into());
        }
        if cfg.kernel.zswap.max_pool_percent > 100 || cfg.kernel.zswap.accept_threshold_percent > 100 {
            return Err("kernel.zswap: max_pool_percent and accept_threshold_percent are percentages (0..=100)".into());
        }

        // Watermarks (__setup_per_zone_wmarks, one zone).
        let min_free_kbytes = cfg.kernel.vm.min_free_kbytes.unwrap_or_else(|| default_min_free_kbytes(totalram));
        let wmark_min = min_free_kbytes / 4;
        let gap = (wmark_min / 4).max(totalram * cfg.kernel.vm.watermark_scale_factor as u64 / 10_000);
        let (wmark_low, wmark_high) = (wmark_min + gap, wmark_min + 2 * gap);

        // Cgroups, pre-order as lowered.
        let groups = &cfg.cgroups.groups;
        if groups.is_empty() || groups[0].parent.is_some() {
            return Err("cgroups.groups[0] must be the root cgroup".into());
        }
        let v2 = match cfg.cgroups.version {
            1 => false,
            2 => true,
            v => return Err(format!("cgroups.version: expected 1 or 2, got {v}")),
        };
        let mut memcgs: Vec<Memcg> = Vec::with_capacity(groups.len());
        for (idx, g) in groups.iter().enumerate() {
            if let Some(p) = g.parent {
                if p as usize >= idx {
                    return Err(format!("cgroups.groups[{idx}] ({}): parent must come before the child", g.path));
                }
            }
            let mut m = Memcg::new(g.path.clone(), g.parent.map(|p| p as u16));
            m.limit = g.limit_bytes.map_or(u64::MAX, |b| b / PAGE_SIZE);
            m.high = g.high_bytes.map_or(u64::MAX, |b| b / PAGE_SIZE);
            m.zswap_max_bytes = g.zswap_max_bytes.unwrap_or(u64::MAX);
            m.zswap_writeback = g.zswap_writeback;
            m.swappiness = match (g.swappiness, g.parent) {
                (Some(s), _) => s,
                (None, Some(p)) => memcgs[p as usize].swappiness,
                (None, None) => cfg.kernel.vm.swappiness,
            };
            memcgs.push(m);
        }
        for idx in (0..memcgs.len()).rev() {
            let end = (idx + 1..memcgs.len()).find(|&j| !Self::is_descendant(&memcgs, j as u16, idx as u16)).unwrap_or(memcgs.len());
            memcgs[idx].subtree_end = end as u16;
        }

        // Swap devices; codec slot 0 is zswap's compressor, zram devices add theirs.
        let mut codecs = vec![codec];
        let mut devs = Vec::new();
        let mut base = 0u32;
        let huge_class_size = Zsmalloc::new(8).huge_class_size();
        for (k, s) in cfg.machine.swap.iter().enumerate() {
            let pages = s.size_bytes / PAGE_SIZE;
            if pages < 2 {
                return Err(format!("machine.swap[{k}] ({}): too small", s.name));
            }
            if base as u64 + pages >= NONE as u64 {
                return Err("machine.swap: more than 2^32 - 2 swap slots in total".into());
            }
            let mut dev = SwapDev::new(s.name.clone(), s.priority, base, pages, s.device.clone());
            if s.kind == SwapKind::Zram {
                let alg = s.comp_algorithm.as_deref().unwrap_or("lzo-rle");
                let c: Codec = alg.parse().map_err(|e| format!("machine.swap[{k}].comp_algorithm: {e}"))?;
                let slot = codecs.iter().position(|&x| x == c).unwrap_or_else(|| {
                    codecs.push(c);
                    codecs.len() - 1
                });
                dev.model.rotational = false;
                dev.zram = Some(Zram::new(slot, dev.max as usize, new_zpool(ZpoolKind::Zsmalloc { chain_size: 8 })));
            }
            devs.push(dev);
            base += pages as u32;
        }

        // Regions and pages.
        let mut regions = Vec::new();
        let mut pages: Vec<Page> = Vec::new();
        let mut procs = Vec::new();
        let mut shared_tables: Vec<(Content, ContentTable)> = Vec::new();
        for (pi, p) in cfg.processes.iter().enumerate() {
            let memcg = p.cgroup as u16;
            if p.cgroup as usize >= memcgs.len() {
                return Err(format!("processes[{pi}] ({}): cgroup index out of range", p.name));
            }
            let mut my_regions = Vec::new();
            let mut region_pages = Vec::new();
            for (ri, r) in p.regions.iter().enumerate() {
                let content: Content =
                    r.content.parse().map_err(|e| format!("processes[{pi}].regions[{ri}].content: {e}"))?;
                if r.pages == 0 || r.variants == 0 {
                    return Err(format!("processes[{pi}].regions[{ri}]: pages and variants must be > 0"));
                }
                if pages.len() as u64 + r.pages >= NONE as u64 || regions.len() >= u16::MAX as usize {
                    return Err("too many simulated pages (at most 2^32 - 2)".into());
                }
                let content_id = content::region_id(pi as u32, ri as u32);
                let distinct = content::distinct_variants(content, r.variants);
                let table = Self::content_table(cfg.seed, content, content_id, distinct, &codecs, &mut shared_tables);
                let idx = regions.len() as u16;
                regions.push(RegionInfo {
                    name: r.name.clone(),
                    process: pi as u32,
                    base: pages.len() as u32,
                    pages: r.pages as u32,
                    memcg,
                    content_id,
                    content,
                    variants: distinct,
                    zlen: table.zlen,
                    zero: table.zero,
                    same_filled: table.same_filled,
                    ra_info: None,
                    page_tables: vec![false; (r.pages as usize).div_ceil(crate::mm::PTRS_PER_PTE as usize)],
                });
                pages.extend(std::iter::repeat_n(Page::new(idx, memcg), r.pages as usize));
                my_regions.push(idx as u32);
                region_pages.push(r.pages);
            }
            for (k, np) in p.phases.iter().enumerate() {
                np.phase.check(p.regions.len()).map_err(|e| format!("processes[{pi}].phases[{k}]: {e}"))?;
            }
            procs.push(Proc {
                name: p.name.clone(),
                memcg,
                regions: my_regions,
                region_pages,
                phases: p.phases.iter().map(|np| (np.name.clone(), np.phase.clone())).collect(),
                phase: 0,
                gen: None,
                phase_start: 0,
                accesses: 0,
                wake_at: 0,
                state: ProcState::Running,
                blocked_until: 0,
            });
        }

        if switches.lru == ZswapLru::Global && cfg.kernel.zswap.shrinker_enabled {
            return Err("kernel.zswap.shrinker_enabled: the memory-pressure shrinker needs the per-memcg zswap LRU \
                        (kernel.switches.\"zswap.lru\" = \"per_memcg\", 6.8+)"
                .into());
        }
        let pools = (0..switches.zpools).map(|_| new_zpool(ZpoolKind::Zsmalloc { chain_size: 8 })).collect();
        let zswap = Zswap::new(
            cfg.kernel.zswap.enabled,
            codec,
            cfg.kernel.zswap.max_pool_percent as u64,
            cfg.kernel.zswap.accept_threshold_percent as u64,
            cfg.kernel.zswap.shrinker_enabled,
            pools,
        );
        let nmemcg = memcgs.len();
        let mut mm = Mm {
            pages,
            regions,
            memcgs,
            cgroup_v2: v2,
            totalram,
            nr_free: totalram,
            wmark_min,
            wmark_low,
            wmark_high,
            swappiness: cfg.kernel.vm.swappiness,
            page_cluster: cfg.kernel.vm.page_cluster,
            swap: Swap::new(devs),
            zswap,
            codecs,
            zram_huge_class_size: huge_class_size,
            vm: VmEvents::default(),
            costs,
            switches,
            kswapd: Kswapd::default(),
            queue: EventQueue::default(),
            seed: cfg.seed,
            over_high: vec![0; procs.len()],
            reclaim_cursor: vec![0; nmemcg],
            nr_resident: 0,
            reserved: 0,
            nr_page_table_pages: 0,
            stats_flush_ns: cfg.cgroups.stats_flush_ns.unwrap_or(0),
            next_stats_flush: 0,
            shrinker_objects_scanned: 0,
            lru_inversion_swapouts: 0,
            plug: Default::default(),
        };
        for p in 0..procs.len() {
            mm.queue.push(0, EventKind::Process(p as u32));
        }
        Ok(Simulation {
            mm,
            procs,
            records: Vec::new(),
            cpus: cfg.machine.cpus as u64,
            max_time: cfg.max_time_ns,
            now: 0,
            events: 0,
            snapshot: None,
            finished: false,
            check_every: if cfg!(debug_assertions) { 4096 } else { 0 },
        })
    }

    fn is_descendant(memcgs: &[Memcg], mut c: u16, ancestor: u16) -> bool {
        loop {
            if c == ancestor {
                return true;
            }
            match memcgs[c as usize].parent {
                Some(p) => c = p,
                None => return false,
            }
        }
    }

    /// Compressed lengths (per codec in use) and same-filled facts per content variant, from
    /// the real codecs on the generated bytes.
    fn content_table(
        seed: u64,
        content: Content,
        content_id: u32,
        variants: u32,
        codecs: &[Codec],
        shared: &mut Vec<(Content, ContentTable)>,
    ) -> ContentTable {
        // Zero and same-filled pages are the same bytes in every region: share their table.
        // (Other classes with one variant still differ per region.)
        let shareable = matches!(content, Content::Zero | Content::Same { .. } | Content::Mix { random_bytes: 0 });
        if shareable {
            if let Some((_, t)) = shared.iter().find(|(c, _)| *c == content) {
                return t.clone();
            }
        }
        let mut page = [0u8; WL_PAGE];
        let mut t = ContentTable { zlen: vec![Vec::with_capacity(variants as usize); codecs.len()], ..Default::default() };
        for v in 0..variants {
            content::fill_page(content, seed, content_id, v, &mut page);
            for (lens, &codec) in t.zlen.iter_mut().zip(codecs) {
                lens.push(compressed_len(codec, &page).min(u16::MAX as u32) as u16);
            }
            t.zero.push(content::is_zero_page(&page));
            t.same_filled.push(content::same_filled_word(&page).is_some());
        }
        if shareable {
            shared.push((content, t.clone()));
        }
        t
    }

    pub fn set_check_interval(&mut self, every: u64) {
        self.check_every = every;
    }

    pub fn finished(&self) -> bool {
        self.finished
    }

    pub fn mm(&self) -> &Mm {
        &self.mm
    }

    /// For tests that drive kernel paths directly.
    pub fn mm_mut(&mut self) -> &mut Mm {
        &mut self.mm
    }

    /// Threads that want a CPU: running processes, kswapd, the zswap worker.
    fn slowdown(&self) -> u64 {
        let runnable = self.runnable_processes() + self.mm.kswapd.running as u64 + self.mm.zswap_worker_busy() as u64;
        (runnable * 1024 / self.cpus).max(1024)
    }

    /// Processes that want a CPU now: running, and not blocked on IO or throttling.
    fn runnable_processes(&self) -> u64 {
        self.procs.iter().filter(|p| p.state == ProcState::Running && p.blocked_until <= self.now).count() as u64
    }

    /// Run up to `max_events` events; true once the simulation has finished.
    pub fn step(&mut self, max_events: u64) -> bool {
        for _ in 0..max_events {
            if self.finished {
                break;
            }
            let Some((t, ev)) = self.mm.queue.pop() else {
                self.finish();
                break;
            };
            if let Some(limit) = self.max_time {
                if t > limit {
                    self.now = limit;
                    self.finish_time_limit();
                    break;
                }
            }
            self.now = self.now.max(t);
            self.events += 1;
            self.mm.flush_memcg_stats_until(t);
            self.mm.zswap.cpus_saturated = self.runnable_processes() >= self.cpus;
            match ev {
                EventKind::DeviceDone(d) => self.mm.device_done(d as usize, t),
                EventKind::Kswapd => {
                    let mut ctx = Ctx::new(t.max(self.mm.kswapd.clock), Actor::Kswapd, self.slowdown());
                    ctx.memalloc = true;
                    self.mm.kswapd_step(&mut ctx);
                }
                EventKind::ZswapWorker => {
                    let mut ctx = Ctx::new(t.max(self.mm.zswap.worker_clock), Actor::ZswapWorker, self.slowdown());
                    self.mm.zswap_worker_step(&mut ctx);
                }
                EventKind::Process(p) => self.run_process(p, t),
            }
            debug_assert!(self.mm.plug.is_idle(), "a block plug outlived its event ({ev:?} at {t} ns)");
            if self.check_every > 0 && self.events.is_multiple_of(self.check_every) {
                if let Err(e) = self.check_conservation() {
                    panic!("page conservation violated after event {} ({ev:?} at {t} ns): {e}", self.events);
                }
            }
        }
        self.finished
    }

    pub fn run_to_end(&mut self) -> SimResult {
        while !self.step(1 << 20) {}
        self.result()
    }

    fn run_process(&mut self, p: u32, t: Time) {
        let pi = p as usize;
        let mut ctx = Ctx::new(t, Actor::Process(p), self.slowdown());
        let quantum_end = t + self.mm.costs.process_quantum_ns;
        match self.procs[pi].state {
            ProcState::Running => {}
            ProcState::Sleeping => {
                if t < self.procs[pi].wake_at {
                    return;
                }
                self.procs[pi].state = ProcState::Running;
                self.end_phase_at(pi, self.procs[pi].phase, t, "completed");
                self.procs[pi].phase += 1;
            }
            _ => return,
        }
        loop {
            if self.procs[pi].gen.is_none() && !self.start_phase(pi, &mut ctx) {
                return;
            }
            let proc = &self.procs[pi];
            let memcg = proc.memcg;
            let duration_end = match proc.phases[proc.phase].1 {
                Phase::Random { duration_ns: Some(d), .. } => proc.phase_start + d,
                _ => Time::MAX,
            };
            let mut phase_done = false;
            while ctx.now < quantum_end {
                if ctx.now >= duration_end {
                    phase_done = true;
                    break;
                }
                let proc = &mut self.procs[pi];
                let Some(a) = proc.gen.as_mut().and_then(|g| g.next()) else {
                    phase_done = true;
                    break;
                };
                let region = proc.regions[a.region as usize] as usize;
                let page = self.mm.regions[region].base + a.page as u32;
                proc.accesses += 1;
                match self.mm.access(&mut ctx, page, a.write) {
                    Ok(false) => {}
                    Ok(true) => {
                        // Return to user space: memory.high reclaim and throttling.
                        if self.mm.over_high[pi] > 0 {
                            self.mm.mem_cgroup_handle_over_high(&mut ctx, memcg);
                        }
                    }
                    Err(oom) => {
                        self.oom_kill(pi, ctx.now, oom);
                        return;
                    }
                }
            }
            if phase_done {
                self.end_phase_at(pi, self.procs[pi].phase, ctx.now, "completed");
                self.procs[pi].gen = None;
                self.procs[pi].phase += 1;
                continue;
            }
            self.procs[pi].blocked_until = if ctx.blocked() { ctx.now } else { 0 };
            self.mm.queue.push(ctx.now, EventKind::Process(p));
            return;
        }
    }

    /// Begin the next phase; false if the process stopped running (sleep, exit, finished).
    fn start_phase(&mut self, pi: usize, ctx: &mut Ctx) -> bool {
        let proc = &mut self.procs[pi];
        if proc.phase >= proc.phases.len() {
            proc.state = ProcState::Finished;
            self.maybe_finish();
            return false;
        }
        proc.phase_start = ctx.now;
        proc.accesses = 0;
        match proc.phases[proc.phase].1.clone() {
            Phase::Sleep { duration_ns } => {
                proc.state = ProcState::Sleeping;
                proc.wake_at = ctx.now + duration_ns;
                let wake = proc.wake_at;
                self.mm.queue.push(wake, EventKind::Process(pi as u32));
                false
            }
            Phase::Exit => {
                let idx = proc.phase;
                self.end_phase_at(pi, idx, ctx.now, "completed");
                self.mm.exit_process(pi as u32);
                self.procs[pi].state = ProcState::Exited;
                self.maybe_finish();
                false
            }
            phase => {
                let rng = reclaimlab_workload::rng::stream(self.mm.seed, Stream::Access, pi as u64, proc.phase as u64);
                proc.gen = Some(AccessGen::new(&phase, &proc.region_pages, rng));
                true
            }
        }
    }

    fn end_phase_at(&mut self, pi: usize, idx: usize, now: Time, outcome: &'static str) {
        let proc = &self.procs[pi];
        self.records.push(PhaseRecord {
            process: proc.name.clone(),
            phase: proc.phases[idx].0.clone(),
            start_ns: proc.phase_start,
            end_ns: now,
            accesses: proc.accesses,
            outcome,
        });
    }

    fn oom_kill(&mut self, pi: usize, now: Time, oom: Oom) {
        // The memcg's own oom_kill event was counted where the charge failed.
        let _ = oom;
        self.mm.vm.oom_kill += 1;
        if self.procs[pi].phase < self.procs[pi].phases.len() {
            self.end_phase_at(pi, self.procs[pi].phase, now, "oom_killed");
        }
        self.mm.exit_process(pi as u32);
        self.procs[pi].state = ProcState::OomKilled;
        self.procs[pi].gen = None;
        self.maybe_finish();
    }

    fn maybe_finish(&mut self) {
        if self.procs.iter().all(|p| matches!(p.state, ProcState::Finished | ProcState::Exited | ProcState::OomKilled)) {
            self.finish();
        }
    }

    fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.snapshot = Some(self.counters());
        for pi in 0..self.procs.len() {
            if self.procs[pi].state == ProcState::Finished {
                self.mm.exit_process(pi as u32);
                self.procs[pi].state = ProcState::Exited;
            }
        }
        self.finished = true;
    }

    fn finish_time_limit(&mut self) {
        let now = self.now;
        for pi in 0..self.procs.len() {
            if matches!(self.procs[pi].state, ProcState::Running | ProcState::Sleeping) && self.procs[pi].phase < self.procs[pi].phases.len() {
                self.end_phase_at(pi, self.procs[pi].phase, now, "time_limit");
                self.procs[pi].state = ProcState::Finished;
            }
        }
        self.finish();
    }

    /// Share of the workload done, for progress bars (phases weighted equally per process).
    pub fn progress(&self) -> f64 {
        if self.finished {
            return 1.0;
        }
        let mut total = 0.0;
        for p in &self.procs {
            let n = p.phases.len().max(1) as f64;
            let done = match p.state {
                ProcState::Running | ProcState::Sleeping => {
                    let frac = match (p.phases.get(p.phase).map(|x| &x.1), &p.gen) {
                        (Some(Phase::Random { duration_ns: Some(d), .. }), Some(_)) => {
                            (self.now.saturating_sub(p.phase_start)) as f64 / (*d).max(1) as f64
                        }
                        (Some(Phase::Random { count: Some(c), .. }), Some(_)) => p.accesses as f64 / (*c).max(1) as f64,
                        (Some(Phase::Fill { region }), Some(_)) => p.accesses as f64 / p.region_pages[*region as usize].max(1) as f64,
                        _ => 0.0,
                    };
                    (p.phase as f64 + frac.min(1.0)) / n
                }
                _ => 1.0,
            };
            total += done;
        }
        (total / self.procs.len().max(1) as f64).min(1.0)
    }

    pub fn result(&self) -> SimResult {
        let counters = self.snapshot.clone().unwrap_or_else(|| self.counters());
        let vm = &self.mm.vm;
        let accesses: u64 = self.records.iter().map(|r| r.accesses).sum();
        SimResult {
            counters,
            phases: self.records.clone(),
            stats: SimStats {
                events: self.events,
                sim_time_ns: self.now,
                pages: self.mm.pages.len() as u64,
                page_events: accesses + vm.pgscan_anon + vm.pswpout + vm.zswpout + vm.pswpin + vm.zswpin + vm.swpout_zero + vm.swpin_zero,
            },
        }
    }

    /// All counters under their kernel names, gauges read now.
    pub fn counters(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        self.mm.export(self.now, &mut out);
        out
    }

    /// Every page is in exactly one place, and every count agrees with the pages.
    pub fn check_conservation(&self) -> Result<(), String> {
        let mm = &self.mm;
        let mut resident = 0u64;
        let mut lru_count = vec![[0u64; 4]; mm.memcgs.len()];
        let mut zswap_lru = vec![0u64; mm.memcgs.len()];
        let mut stored = 0u64;
        let mut slots_held = 0u64;
        for (i, p) in mm.pages.iter().enumerate() {
            let places = [p.has(pg::RESIDENT), p.has(pg::ZSWAP), p.has(pg::ZEROMAP) && !p.has(pg::RESIDENT)];
            if places.iter().filter(|&&x| x).count() > 1 {
                return Err(format!("page {i} is in more than one place (flags {:#x})", p.flags));
            }
            if p.has(pg::ISOLATED) {
                return Err(format!("page {i} left isolated"));
            }
            if p.slot != NONE {
                slots_held += 1;
                if mm.swap.slot_page[p.slot as usize] != i as u32 {
                    return Err(format!("page {i} holds slot {} which maps to another page", p.slot));
                }
            } else if p.has(pg::ZSWAP | pg::ZEROMAP | pg::SWAPCACHE | pg::SHADOW) {
                return Err(format!("page {i} has swap state without a slot (flags {:#x})", p.flags));
            }
            if p.has(pg::RESIDENT) {
                resident += 1;
                if !(list::INACTIVE_ANON..=list::ACTIVE_FILE).contains(&p.list) {
                    return Err(format!("resident page {i} is on list {}", p.list));
                }
                let want = if p.has(pg::ACTIVE) { list::ACTIVE_ANON } else { list::INACTIVE_ANON };
                if p.list != want {
                    return Err(format!("page {i}: active flag and list disagree"));
                }
                lru_count[p.memcg as usize][p.list as usize - 1] += 1;
            } else {
                if p.has(pg::MAPPED) && !p.has(pg::ZERO_PFN) {
                    return Err(format!("page {i} mapped but not resident"));
                }
                if p.has(pg::ZSWAP) {
                    stored += 1;
                    if p.handle != NONE {
                        if p.list != list::ZSWAP {
                            return Err(format!("zswap page {i} is not on the zswap LRU"));
                        }
                        zswap_lru[p.memcg as usize] += 1;
                    }
                } else if p.list != list::NONE {
                    return Err(format!("non-resident page {i} is on list {}", p.list));
                }
            }
        }
        for (m, mc) in mm.memcgs.iter().enumerate() {
            for (l, (list, counted)) in mc.lru.iter().zip(lru_count[m]).enumerate() {
                if list.len != counted {
                    return Err(format!("memcg {} list {} has len {} but {counted} pages", mc.path, l + 1, list.len));
                }
            }
            if mc.zswap_lru.len != zswap_lru[m] {
                return Err(format!("memcg {} zswap LRU len {} but {} entries", mc.path, mc.zswap_lru.len, zswap_lru[m]));
            }
        }
        if resident != mm.nr_resident {
            return Err(format!("nr_resident {} but {} resident pages", mm.nr_resident, resident));
        }
        if stored != mm.zswap.stored_pages {
            return Err(format!("zswap stored_pages {} but {} entries", mm.zswap.stored_pages, stored));
        }
        let pool = mm.zsmalloc_pages();
        let tables: u64 = mm.regions.iter().map(|r| r.page_tables.iter().filter(|&&t| t).count() as u64).sum();
        if tables != mm.nr_page_table_pages {
            return Err(format!("nr_page_table_pages {} but {tables} tables allocated", mm.nr_page_table_pages));
        }
        if mm.nr_free + resident + pool + mm.reserved + tables != mm.totalram {
            return Err(format!(
                "frames: free {} + resident {resident} + zsmalloc {pool} + reserved {} + page tables {tables} != total {}",
                mm.nr_free, mm.reserved, mm.totalram
            ));
        }
        if mm.swap.total_swap_pages - mm.swap.nr_swap_pages != slots_held {
            return Err(format!("{} slots in use but {slots_held} held by pages", mm.swap.total_swap_pages - mm.swap.nr_swap_pages));
        }
        Ok(())
    }
}
