//! The process scheduler: each process runs its phases (fill, random access, sleep, exit) for
//! up to `process_quantum_ns` of virtual time per event; phase records; OOM kills; the end of
//! the run (counters are read when every process has finished its phases, before they exit, as
//! the lab reads them on the real machine).

use reclaimlab_workload::{AccessGen, CgroupCounter, CgroupFile, CgroupValue, Phase, Stream};
use serde::Serialize;

use crate::config::SimConfig;
use crate::error::{ConfigError, Result};
use crate::mm::memcg::MemoryReclaim;
use crate::mm::{Actor, Ctx, Mm, Oom, PAGE_SIZE};
use crate::psi::TSK_RUNNING;
use crate::sim::{later, EventKind, Time};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProcState {
    Running,
    Sleeping,
    /// Phases done; holds its memory until every process is done.
    Finished,
    Exited,
    OomKilled,
}

pub(crate) struct Proc {
    pub(crate) name: String,
    pub(crate) memcg: u16,
    /// Indices into mm.regions.
    pub(crate) regions: Vec<u32>,
    pub(crate) region_pages: Vec<u64>,
    pub(crate) phases: Vec<(String, Phase)>,
    pub(crate) phase: usize,
    pub(crate) gen: Option<AccessGen>,
    pub(crate) phase_start: Time,
    pub(crate) accesses: u64,
    /// Faults of the current phase as getrusage counts them (`min_flt`, `maj_flt`).
    pub(crate) minflt: u64,
    pub(crate) majflt: u64,
    pub(crate) wake_at: Time,
    pub(crate) state: ProcState,
    /// The process ended its last slice waiting until then: not runnable before it.
    pub(crate) blocked_until: Time,
    /// A write to memory.reclaim in progress (a `reclaim` phase).
    pub(crate) reclaim: Option<MemoryReclaim>,
}

impl Proc {
    /// The processes of the lowered config, in order. Regions are numbered over all processes
    /// in the same order as [`crate::mm::Mm`]'s regions.
    pub(crate) fn from_config(cfg: &SimConfig) -> Result<Vec<Proc>> {
        let mut procs = Vec::with_capacity(cfg.processes.len());
        let mut next_region = 0u32;
        for (pi, p) in cfg.processes.iter().enumerate() {
            for (k, np) in p.phases.iter().enumerate() {
                let at = || format!("processes[{pi}].phases[{k}]");
                np.phase.check(p.regions.len()).map_err(|e| ConfigError::invalid(at(), e))?;
                let region_pages: Vec<u64> = p.regions.iter().map(|r| r.pages).collect();
                np.phase.check_sizes(&region_pages).map_err(|e| ConfigError::invalid(at(), e))?;
                // File phases work on file regions, the others on anonymous memory.
                let is_file = |r: u32| p.regions[r as usize].file.is_some();
                let wrong = match &np.phase {
                    Phase::Read { region, .. } | Phase::Mmap { region, .. } | Phase::Write { region, .. } => {
                        (!is_file(*region)).then_some((*region, "a file region"))
                    }
                    Phase::Fill { region } => is_file(*region).then_some((*region, "an anonymous region")),
                    Phase::Sequential { regions, .. } | Phase::Random { regions, .. } | Phase::Trace { regions, .. } => {
                        regions.iter().find(|&&r| is_file(r)).map(|&r| (r, "anonymous regions"))
                    }
                    Phase::CreateFiles { regions, .. } => regions.iter().find(|&&r| !is_file(r)).map(|&r| (r, "file regions")),
                    Phase::Sleep { .. } | Phase::Exit | Phase::Reclaim { .. } | Phase::CgroupWrite { .. } | Phase::ZramWrite { .. } => None,
                };
                // The files a phase writes: memory.reclaim is a v2 file (on every cgroup, the
                // root included); the others are v2 files that the root does not have
                // (CFTYPE_NOT_ON_ROOT).
                let file = match &np.phase {
                    Phase::Reclaim { .. } => Some(("memory.reclaim", true)),
                    Phase::CgroupWrite { file, .. } => Some((file.name(), false)),
                    _ => None,
                };
                if let Some((file, on_root)) = file {
                    if cfg.cgroups.version != 2 {
                        return Err(ConfigError::invalid(at(), format!("phase {:?} writes {file}, a cgroup v2 file; cgroups.version is {}", np.name, cfg.cgroups.version)));
                    }
                    if p.cgroup == 0 && !on_root {
                        return Err(ConfigError::invalid(at(), format!("phase {:?} writes {file}, which the root cgroup does not have; put the process in a cgroup", np.name)));
                    }
                }
                if let Phase::ZramWrite { device, file } = np.phase {
                    let zram = cfg.machine.swap.iter().filter(|s| s.kind == crate::config::SwapKind::Zram).count();
                    if device as usize >= zram {
                        return Err(ConfigError::invalid(
                            at(),
                            format!("phase {:?} writes zram{device}/{}; the machine has {zram} zram device(s)", np.name, file.name()),
                        ));
                    }
                }
                if let Phase::Reclaim { swappiness: Some(_), .. } = np.phase {
                    if !crate::policy::Switches::with_overrides(&cfg.kernel.version, &cfg.kernel.switches)?.reclaim_swappiness {
                        return Err(ConfigError::invalid(
                            at(),
                            format!("phase {:?}: memory.reclaim takes swappiness= from 6.12 (switch memcg.reclaim_swappiness); kernel.version is {}", np.name, cfg.kernel.version),
                        ));
                    }
                }
                if let Some((r, want)) = wrong {
                    let name = &p.regions[r as usize].name;
                    return Err(ConfigError::invalid(at(), format!("phase {:?} needs {want}; {name:?} is not one", np.name)));
                }
            }
            let n = p.regions.len() as u32;
            procs.push(Proc {
                name: p.name.clone(),
                memcg: p.cgroup as u16,
                regions: (next_region..next_region + n).collect(),
                region_pages: p.regions.iter().map(|r| r.pages).collect(),
                phases: p.phases.iter().map(|np| (np.name.clone(), np.phase.clone())).collect(),
                phase: 0,
                gen: None,
                phase_start: 0,
                accesses: 0,
                minflt: 0,
                majflt: 0,
                wake_at: 0,
                state: ProcState::Running,
                blocked_until: 0,
                reclaim: None,
            });
            next_region += n;
        }
        Ok(procs)
    }
}

/// The number a cgroup phase writes (None: "max"), its counter read from memcg `m` now.
fn cgroup_value(mm: &mut Mm, m: u16, value: CgroupValue) -> Option<u64> {
    if let CgroupValue::Of { of: CgroupCounter::MemoryZswapCurrent, .. } = value {
        // zswap_current_read flushes the memcg's statistics first.
        mm.flush_memcg_subtree(m);
    }
    value.resolve(|c| match c {
        CgroupCounter::MemoryCurrent => mm.memcgs[m as usize].usage * PAGE_SIZE,
        CgroupCounter::MemorySwapCurrent => mm.swap_current_bytes(m),
        CgroupCounter::MemoryZswapCurrent => mm.zswap_tree(m).0,
    })
}

/// One phase of one process, as it ran.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseRecord {
    pub process: String,
    pub phase: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub accesses: u64,
    /// The process's page faults in the phase, as getrusage's `ru_minflt`/`ru_majflt` count
    /// them (mm_account_fault in 6.12's mm/memory.c: a fault that returned VM_FAULT_MAJOR is
    /// major, every other completed fault minor; a fault that ended in OOM counts in neither).
    /// Simplified: no fault is retried (FAULT_FLAG_TRIED, which the kernel counts as major).
    pub minflt: u64,
    pub majflt: u64,
    /// "completed", "oom_killed" or "time_limit".
    pub outcome: &'static str,
    /// A `reclaim` phase: the pages memory.reclaim reclaimed, in bytes (also when it failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclaimed_bytes: Option<u64>,
    /// A `reclaim` or `cgroup_write` phase whose write failed: the errno's name ("EAGAIN").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'static str>,
    /// A `reclaim` or `cgroup_write` phase: the number it wrote (bytes; "max").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written: Option<String>,
}

/// The processes and what they did. Works on the machine (`Mm`) it is handed; the engine asks
/// it to run a process, and ends the run once [`Scheduler::all_done`] says so.
pub(crate) struct Scheduler {
    procs: Vec<Proc>,
    pub(crate) records: Vec<PhaseRecord>,
    all_done: bool,
    /// The engine stops the run at the first event after this (max_time or the horizon): no
    /// slice runs past it, however long the quantum.
    stop_after: Time,
    /// The latest time a process finished, exited or was killed: when the run's work ended
    /// (its last event may have started long before, with a long quantum).
    pub(crate) ended_at: Time,
}

impl Scheduler {
    pub(crate) fn from_config(cfg: &SimConfig) -> Result<Scheduler> {
        let stop_after = cfg.max_time_ns.unwrap_or(crate::limits::TIME_HORIZON_NS).min(crate::limits::TIME_HORIZON_NS);
        Ok(Scheduler { procs: Proc::from_config(cfg)?, records: Vec::new(), all_done: false, stop_after, ended_at: 0 })
    }

    pub(crate) fn len(&self) -> usize {
        self.procs.len()
    }

    /// Every process finished, exited or was killed: the run is over.
    pub(crate) fn all_done(&self) -> bool {
        self.all_done
    }

    /// Processes that want a CPU at `now`: running, and not blocked on IO or throttling.
    pub(crate) fn runnable_processes(&self, now: Time) -> u64 {
        self.procs.iter().filter(|p| p.state == ProcState::Running && p.blocked_until <= now).count() as u64
    }

    /// Run process `p` from `t` for up to one quantum; CPU costs stretched by `slowdown`.
    pub(crate) fn run_process(&mut self, mm: &mut Mm, p: u32, t: Time, slowdown: u64) {
        let pi = p as usize;
        let mut ctx = Ctx::new(t, Actor::Process(p), slowdown);
        // A slice ends after the quantum, or just past the time limit: then the engine's next
        // event is past it and the run stops (a huge quantum cannot run past max_time).
        let quantum_end = later(t, mm.costs.process_quantum_ns).min(self.stop_after + 1);
        match self.procs[pi].state {
            ProcState::Running => {}
            ProcState::Sleeping => {
                if t < self.procs[pi].wake_at {
                    return;
                }
                self.procs[pi].state = ProcState::Running;
                self.end_phase_at(mm, pi, self.procs[pi].phase, t, "completed");
                self.procs[pi].phase += 1;
            }
            _ => return,
        }
        // On a CPU from the slice's start (a no-op if it already was).
        mm.psi_set(pi, t, TSK_RUNNING);
        loop {
            if self.procs[pi].gen.is_none() && !self.start_phase(mm, pi, &mut ctx) {
                return;
            }
            let memcg = self.procs[pi].memcg;
            if let Some(mut st) = self.procs[pi].reclaim.take() {
                // memory.reclaim: passes until the write returns, yielding at the quantum.
                let mut done = false;
                while !done && ctx.now < quantum_end {
                    done = mm.memory_reclaim_pass(&mut ctx, memcg, &mut st);
                }
                if !done {
                    self.procs[pi].reclaim = Some(st);
                    self.procs[pi].blocked_until = if ctx.blocked() { ctx.now } else { 0 };
                    mm.queue.push(ctx.now, EventKind::Process(p));
                    return;
                }
                self.end_phase_at(mm, pi, self.procs[pi].phase, ctx.now, "completed");
                let rec = self.records.last_mut().expect("just pushed");
                rec.reclaimed_bytes = Some(st.nr_reclaimed * PAGE_SIZE);
                rec.written = Some(st.bytes.to_string());
                rec.error = st.eagain.then_some("EAGAIN");
                self.procs[pi].gen = None;
                self.procs[pi].phase += 1;
                continue;
            }
            if let Phase::ZramWrite { device, file } = self.procs[pi].phases[self.procs[pi].phase].1 {
                match file {
                    reclaimlab_workload::ZramFile::Compact => mm.zram_compact(device as usize),
                }
                self.end_phase_at(mm, pi, self.procs[pi].phase, ctx.now, "completed");
                self.procs[pi].gen = None;
                self.procs[pi].phase += 1;
                continue;
            }
            if let Phase::CgroupWrite { file, value } = self.procs[pi].phases[self.procs[pi].phase].1 {
                let written = self.cgroup_write(mm, pi, &mut ctx, file, value);
                if self.procs[pi].state == ProcState::OomKilled {
                    return;
                }
                self.end_phase_at(mm, pi, self.procs[pi].phase, ctx.now, "completed");
                self.records.last_mut().expect("just pushed").written = Some(written);
                self.procs[pi].gen = None;
                self.procs[pi].phase += 1;
                continue;
            }
            let proc = &self.procs[pi];
            let duration_end = match proc.phases[proc.phase].1 {
                Phase::Random { duration_ns: Some(d), .. } => later(proc.phase_start, d),
                _ => Time::MAX,
            };
            // read(2) phases go through the page cache's read path, not a memory access; each
            // call returns to user space (where memory.high is handled, like after a fault).
            let buffered_read = matches!(proc.phases[proc.phase].1, Phase::Read { .. });
            // write(2) phases go through generic_perform_write; fsync(2) after every
            // `fsync_bytes` written.
            let (buffered_write, fsync_bytes) = match proc.phases[proc.phase].1 {
                Phase::Write { fsync_bytes, .. } => (true, fsync_bytes),
                Phase::CreateFiles { .. } => (true, None),
                _ => (false, None),
            };
            // create_files: fsync(2) before closing each file (its last page written).
            let fsync_at_close = matches!(proc.phases[proc.phase].1, Phase::CreateFiles { fsync: true, .. });
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
                let page = mm.regions[region].base + a.page as u32;
                proc.accesses += 1;
                // tmpfs files have their own file operations (mm/shmem.rs); fsync on them
                // does nothing (noop_fsync).
                let shmem = mm.regions[region].shmem.is_some();
                let access = if buffered_read && shmem {
                    mm.shmem_file_read(&mut ctx, page).map(|()| true)
                } else if buffered_write && shmem {
                    // fsync(2) on a tmpfs file is noop_fsync: nothing to do.
                    mm.shmem_file_write(&mut ctx, page).map(|()| true)
                } else if buffered_read {
                    mm.filemap_read(&mut ctx, page).map(|()| true)
                } else if buffered_write {
                    let written = proc.accesses * PAGE_SIZE;
                    let r = mm.generic_perform_write(&mut ctx, page).map(|()| true);
                    let last_of_file = a.page + 1 == mm.regions[region].pages as u64;
                    if r.is_ok() && (fsync_bytes.is_some_and(|n| written / n > (written - PAGE_SIZE) / n) || (fsync_at_close && last_of_file)) {
                        mm.vfs_fsync(&mut ctx, region);
                    }
                    r
                } else {
                    // Every fault counts pgfault, a major one also pgmajfault (do_swap_page,
                    // filemap_fault, shmem_fault): their deltas are this access's faults.
                    let (flt, maj) = (mm.vm.pgfault, mm.vm.pgmajfault);
                    // An `rw` phase's store is a load, then the store (AccessGen::rw): a page
                    // that is not mapped takes a read fault first. The store then finds the
                    // page mapped writable (do_anonymous_page's zero page aside, which
                    // do_wp_page copies: a second fault, as in the kernel), so it only
                    // dirties it. Each half is charged `access_ns`.
                    let rw = a.write && proc.gen.as_ref().is_some_and(|g| g.rw());
                    let r = if rw {
                        mm.access(&mut ctx, page, false).and_then(|f| Ok(mm.access(&mut ctx, page, true)? || f))
                    } else {
                        mm.access(&mut ctx, page, a.write)
                    };
                    if r.is_ok() {
                        let proc = &mut self.procs[pi];
                        proc.majflt += mm.vm.pgmajfault - maj;
                        proc.minflt += (mm.vm.pgfault - flt) - (mm.vm.pgmajfault - maj);
                    }
                    r
                };
                match access {
                    Ok(false) => {}
                    Ok(true) => {
                        // Return to user space: memory.high reclaim and throttling.
                        if mm.over_high[pi] > 0 {
                            mm.mem_cgroup_handle_over_high(&mut ctx, memcg);
                        }
                    }
                    Err(oom) => {
                        self.oom_kill(mm, pi, ctx.now, oom);
                        return;
                    }
                }
            }
            if phase_done {
                self.end_phase_at(mm, pi, self.procs[pi].phase, ctx.now, "completed");
                self.procs[pi].gen = None;
                self.procs[pi].phase += 1;
                continue;
            }
            self.procs[pi].blocked_until = if ctx.blocked() { ctx.now } else { 0 };
            mm.queue.push(ctx.now, EventKind::Process(p));
            return;
        }
    }

    /// Begin the next phase; false if the process stopped running (sleep, exit, finished).
    fn start_phase(&mut self, mm: &mut Mm, pi: usize, ctx: &mut Ctx) -> bool {
        let proc = &mut self.procs[pi];
        if proc.phase >= proc.phases.len() {
            proc.state = ProcState::Finished;
            mm.psi_set(pi, ctx.now, 0);
            self.maybe_finish(ctx.now);
            return false;
        }
        proc.phase_start = ctx.now;
        proc.accesses = 0;
        proc.minflt = 0;
        proc.majflt = 0;
        match proc.phases[proc.phase].1.clone() {
            Phase::Sleep { duration_ns } => {
                proc.state = ProcState::Sleeping;
                mm.psi_set(pi, ctx.now, 0);
                proc.wake_at = later(ctx.now, duration_ns);
                let wake = proc.wake_at;
                mm.queue.push(wake, EventKind::Process(pi as u32));
                false
            }
            Phase::Exit => {
                let idx = proc.phase;
                self.end_phase_at(mm, pi, idx, ctx.now, "completed");
                mm.exit_process(pi as u32);
                mm.psi_set(pi, ctx.now, 0);
                self.procs[pi].state = ProcState::Exited;
                self.maybe_finish(ctx.now);
                false
            }
            Phase::Reclaim { amount, swappiness } => {
                let m = proc.memcg;
                let bytes = cgroup_value(mm, m, amount).unwrap_or(0);
                let proc = &mut self.procs[pi];
                proc.reclaim = Some(MemoryReclaim::new(bytes, swappiness.map(u64::from)));
                proc.gen = Some(AccessGen::new(&Phase::Exit, &[], reclaimlab_workload::SplitMix64::new(0)));
                true
            }
            phase => {
                let rng = reclaimlab_workload::rng::stream(mm.seed, Stream::Access, pi as u64, proc.phase as u64);
                proc.gen = Some(AccessGen::new(&phase, &proc.region_pages, rng));
                true
            }
        }
    }

    fn end_phase_at(&mut self, mm: &mut Mm, pi: usize, idx: usize, now: Time, outcome: &'static str) {
        let proc = &self.procs[pi];
        mm.lat.end_phase(pi, &proc.name, &proc.phases[idx].0);
        self.records.push(PhaseRecord {
            process: proc.name.clone(),
            phase: proc.phases[idx].0.clone(),
            start_ns: proc.phase_start,
            end_ns: now,
            accesses: proc.accesses,
            minflt: proc.minflt,
            majflt: proc.majflt,
            outcome,
            reclaimed_bytes: None,
            error: None,
            written: None,
        });
    }

    /// A write to the process's cgroup file `file` (memory_high_write, memory_max_write,
    /// zswap_max_write, zswap_writeback_write in 6.12's mm/memcontrol.c); returns the text
    /// written. Sizes are rounded down to pages, as page_counter_memparse does.
    fn cgroup_write(&mut self, mm: &mut Mm, pi: usize, ctx: &mut Ctx, file: CgroupFile, value: CgroupValue) -> String {
        let m = self.procs[pi].memcg;
        let v = cgroup_value(mm, m, value);
        let pages = v.map_or(u64::MAX, |b| b / PAGE_SIZE);
        match file {
            CgroupFile::MemoryHigh => mm.memory_high_write(ctx, m, pages),
            CgroupFile::MemoryMax => mm.memory_max_write(ctx, m, pages, &mut |mm, now| self.oom_kill_memcg(mm, m, now)),
            CgroupFile::MemoryZswapMax => mm.memcgs[m as usize].zswap_max = pages,
            CgroupFile::MemoryZswapWriteback => mm.memcgs[m as usize].zswap_writeback = v == Some(1),
        }
        CgroupValue::text(v)
    }

    /// mem_cgroup_out_of_memory for memcg `m` (from a memory.max write): kill the live process
    /// of its subtree with the highest oom_badness (the first on a tie), counting
    /// MEMCG_OOM_KILL on the victim's memcg. False if the subtree has no process to kill.
    fn oom_kill_memcg(&mut self, mm: &mut Mm, m: u16, now: Time) -> bool {
        let end = mm.memcgs[m as usize].subtree_end;
        let mut best: Option<(u64, usize)> = None;
        for (pi, proc) in self.procs.iter().enumerate() {
            if matches!(proc.state, ProcState::Exited | ProcState::OomKilled) || !(m..end).contains(&proc.memcg) {
                continue;
            }
            let badness: u64 = proc.regions.iter().map(|&r| mm.oom_badness_of_region(r as usize)).sum();
            if best.is_none_or(|(b, _)| badness > b) {
                best = Some((badness, pi));
            }
        }
        let Some((_, pi)) = best else { return false };
        mm.memcgs[self.procs[pi].memcg as usize].events.oom_kill += 1;
        self.oom_kill(mm, pi, now, Oom { memcg: Some(m) });
        true
    }

    fn oom_kill(&mut self, mm: &mut Mm, pi: usize, now: Time, oom: Oom) {
        // The memcg's own oom_kill event was counted where the charge failed.
        let _ = oom;
        mm.vm.oom_kill += 1;
        if self.procs[pi].phase < self.procs[pi].phases.len() {
            self.end_phase_at(mm, pi, self.procs[pi].phase, now, "oom_killed");
        }
        mm.exit_process(pi as u32);
        mm.psi_set(pi, now, 0);
        self.procs[pi].state = ProcState::OomKilled;
        self.procs[pi].gen = None;
        self.maybe_finish(now);
    }

    /// out_of_memory from kswapd (the multi-gen LRU's min_ttl_ms, mm/lru_gen.rs): kill the
    /// live process with the highest oom_badness (resident and swapped pages and page tables
    /// of its regions; the first on a tie). Finished processes still hold memory and count.
    pub(crate) fn oom_kill_badness(&mut self, mm: &mut Mm, now: Time) {
        let mut best: Option<(u64, usize)> = None;
        for (pi, proc) in self.procs.iter().enumerate() {
            if matches!(proc.state, ProcState::Exited | ProcState::OomKilled) {
                continue;
            }
            let badness: u64 = proc.regions.iter().map(|&r| mm.oom_badness_of_region(r as usize)).sum();
            if best.is_none_or(|(b, _)| badness > b) {
                best = Some((badness, pi));
            }
        }
        if let Some((_, pi)) = best {
            self.oom_kill(mm, pi, now, Oom { memcg: None });
        }
    }

    fn maybe_finish(&mut self, now: Time) {
        self.ended_at = self.ended_at.max(now);
        if self.procs.iter().all(|p| matches!(p.state, ProcState::Finished | ProcState::Exited | ProcState::OomKilled)) {
            self.all_done = true;
        }
    }

    /// After the counters are read: processes done with their phases exit.
    pub(crate) fn exit_finished(&mut self, mm: &mut Mm) {
        for pi in 0..self.procs.len() {
            if self.procs[pi].state == ProcState::Finished {
                mm.exit_process(pi as u32);
                self.procs[pi].state = ProcState::Exited;
            }
        }
    }

    /// The time limit: every phase still running ends at `now` ("time_limit").
    pub(crate) fn stop_at_time_limit(&mut self, mm: &mut Mm, now: Time) {
        for pi in 0..self.procs.len() {
            if matches!(self.procs[pi].state, ProcState::Running | ProcState::Sleeping) && self.procs[pi].phase < self.procs[pi].phases.len() {
                self.end_phase_at(mm, pi, self.procs[pi].phase, now, "time_limit");
                self.procs[pi].state = ProcState::Finished;
            }
        }
    }

    /// Each process's latencies over its phases so far, the running one included.
    pub(crate) fn process_latencies(&self, mm: &Mm) -> Vec<crate::latency::ProcessLatency> {
        self.procs
            .iter()
            .enumerate()
            .map(|(pi, p)| {
                let mut all = mm.lat.total[pi].clone();
                all.merge(&mm.lat.current[pi]);
                crate::latency::ProcessLatency { process: p.name.clone(), kinds: all.summaries() }
            })
            .collect()
    }

    /// Share of the workload done, for progress bars (phases weighted equally per process).
    pub(crate) fn progress(&self, now: Time) -> f64 {
        let mut total = 0.0;
        for p in &self.procs {
            let n = p.phases.len().max(1) as f64;
            let done = match p.state {
                ProcState::Running | ProcState::Sleeping => {
                    let frac = match (p.phases.get(p.phase).map(|x| &x.1), &p.gen) {
                        (Some(Phase::Random { duration_ns: Some(d), .. }), Some(_)) => {
                            (now.saturating_sub(p.phase_start)) as f64 / (*d).max(1) as f64
                        }
                        (Some(Phase::Random { count: Some(c), .. }), Some(_)) => p.accesses as f64 / (*c).max(1) as f64,
                        (Some(Phase::Fill { region }), Some(_)) => p.accesses as f64 / p.region_pages[*region as usize].max(1) as f64,
                        (Some(Phase::Trace { trace, passes, limit, .. }), Some(_)) => {
                            let total = limit.unwrap_or(u64::MAX).min(trace.len().saturating_mul(u64::from(*passes)));
                            p.accesses as f64 / total.max(1) as f64
                        }
                        (Some(Phase::Read { region, passes } | Phase::Mmap { region, passes, .. } | Phase::Write { region, passes, .. }), Some(_)) => {
                            p.accesses as f64 / (p.region_pages[*region as usize] * *passes as u64).max(1) as f64
                        }
                        (Some(Phase::CreateFiles { regions, .. }), Some(_)) => {
                            p.accesses as f64 / regions.iter().map(|&r| p.region_pages[r as usize]).sum::<u64>().max(1) as f64
                        }
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
}
