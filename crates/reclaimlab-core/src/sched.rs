//! The process scheduler: each process runs its phases (fill, random access, sleep, exit) for
//! up to `process_quantum_ns` of virtual time per event; phase records; OOM kills; the end of
//! the run (counters are read when every process has finished its phases, before they exit, as
//! the lab reads them on the real machine).

use std::collections::VecDeque;

use reclaimlab_workload::{
    Access, AccessGen, After, CgroupCounter, CgroupFile, CgroupValue, Phase, Stream,
};
use serde::Serialize;

use crate::config::SimConfig;
use crate::error::{ConfigError, Result};
use crate::mm::memcg::MemoryReclaim;
use crate::mm::{Actor, Ctx, Mm, PAGE_SIZE};
use crate::psi::TSK_RUNNING;
use crate::sim::{later, EventKind, Time};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProcState {
    Running,
    Sleeping,
    /// Its next phase waits for another process's phase to end (`after`).
    Waiting,
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
    /// Each phase's start condition (`after`).
    pub(crate) after: Vec<Option<After>>,
    /// Which phases have ended (completed, or cut short by an OOM kill or the time limit).
    pub(crate) ended: Vec<bool>,
    pub(crate) phase: usize,
    pub(crate) gen: Option<AccessGen>,
    /// The generator's next accesses, drawn ahead so that their page records are fetched
    /// into the cache before they are needed (see [`Proc::next_access`]). Emptied when a phase
    /// starts: what a phase drew ahead and did not run is dropped with its generator.
    pub(crate) ahead: VecDeque<Access>,
    /// The current phase draws ahead: random and trace phases. Sequential ones (fill, passes,
    /// file reads and writes) go through page records in order, which the CPU's own prefetcher
    /// follows; drawing ahead would only add its bookkeeping.
    pub(crate) lookahead: bool,
    /// The current phase's non-event accesses are drawn in bulk (engine.accesses =
    /// "analytic", mm/analytic.rs): the stream of its draws. None: stepped one by one.
    pub(crate) analytic: Option<reclaimlab_workload::SplitMix64>,
    /// An analytic phase whose events are dense (mm/analytic.rs DENSE) steps its accesses
    /// instead, window by window, until a window's faults say they are sparse again.
    pub(crate) stepping: Option<Stepping>,
    /// A drawn analytic phase's current window: (accesses, events) so far.
    pub(crate) drawn: (u64, u64),
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
    /// /proc/<pid>/oom_score_adj (signal->oom_score_adj).
    pub(crate) oom_score_adj: i16,
    /// The mlock() of the `mlock` regions still in progress (mm/mlock.rs): the index (into
    /// `regions`) of the region being populated and its next page; None once it returned.
    pub(crate) populate: Option<(usize, u32)>,
    /// Its tmpfiles are not opened yet: their kernel objects get charged in its first slice
    /// (mm/objcg.rs open_tmpfiles).
    pub(crate) open_tmpfiles: bool,
    /// The process's open cgroup files (`cgroup_open`): descriptor → id in `Mm::peak_fds`.
    pub(crate) fds: Vec<Option<usize>>,
}

/// How many accesses a process draws ahead of the one it runs. A resident hit costs little
/// besides the load of its page record, which misses the cache for a random access over a
/// large region; drawn this far ahead, the loads of several accesses overlap. The generator is
/// a function of its seed alone, so drawing ahead changes no result.
const LOOKAHEAD: usize = 8;

/// OOM_SCORE_ADJ_MIN and _MAX (include/uapi/linux/oom.h): a task at the minimum is never
/// chosen or killed by the OOM killer.
const OOM_SCORE_ADJ_MIN: i16 = -1000;
const OOM_SCORE_ADJ_MAX: i16 = 1000;
/// PAGE_COUNTER_MAX (include/linux/page_counter.h, 64-bit): "max" as the page counter holds it.
const PAGE_COUNTER_MAX: u64 = (i64::MAX as u64) / PAGE_SIZE;

/// When an analytic phase steps (its events are dense, mm/analytic.rs DENSE) and when it draws:
/// over windows of the phase's accesses (its pages, at least 2^16), a drawn phase whose events
/// were 1/DENSE of a window's accesses or more steps from then on (as it does at once when one
/// draw's event probability is DENSE_NOW or more); a stepping phase whose window saw fewer
/// faults than 1 in [`RESUME`] accesses draws again. A deterministic rule on the run's own
/// counts; the gap between the two rates keeps it from switching at every window, and a
/// window of at least the phase's pages pays for settling and counting the classes anew.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stepping {
    left: u64,
    window: u64,
    faults: u64,
}

/// See [`Stepping`].
const RESUME: u64 = 48;

/// The window of [`Stepping`] for a phase over `pages` pages.
fn analytic_window(pages: u64) -> u64 {
    pages.max(1 << 16)
}

impl Proc {
    /// The next access of the current phase (None: the phase has no more), drawing up to
    /// [`LOOKAHEAD`] ahead and prefetching each drawn access's page record and links; then,
    /// while accesses swap in often, what the fault touches beyond the record, in two
    /// stages ([`Mm::prefetch_fault`]: the swap map and the zsmalloc handle once the record
    /// has arrived, what the handle points to once it has).
    #[inline]
    fn next_access(&mut self, mm: &Mm) -> Option<Access> {
        let gen = self.gen.as_mut()?;
        if !self.lookahead {
            // What an analytic phase drew ahead while it stepped comes first (sched.rs
            // Stepping); empty otherwise.
            return self.ahead.pop_front().or_else(|| gen.next());
        }
        let regions = &self.regions;
        let page_of =
            |a: &Access| mm.regions[regions[a.region as usize] as usize].base + a.page as u32;
        while self.ahead.len() <= LOOKAHEAD {
            let Some(a) = gen.next() else { break };
            mm.pages.prefetch(page_of(&a));
            self.ahead.push_back(a);
        }
        let next = self.ahead.pop_front();
        // Only while an eighth or more of the phase's accesses swapped in: reading the records
        // of accesses still to come costs the hits more than it saves the faults.
        if self.majflt * 8 > self.accesses {
            if let Some(a) = self.ahead.get(LOOKAHEAD / 2) {
                mm.prefetch_fault(page_of(a), false);
            }
            if let Some(a) = self.ahead.get(1) {
                mm.prefetch_fault(page_of(a), true);
            }
        }
        next
    }

    /// The processes of the lowered config, in order. Regions are numbered over all processes
    /// in the same order as [`crate::mm::Mm`]'s regions.
    pub(crate) fn from_config(cfg: &SimConfig) -> Result<Vec<Proc>> {
        let mut procs = Vec::with_capacity(cfg.processes.len());
        let mut next_region = 0u32;
        for (pi, p) in cfg.processes.iter().enumerate() {
            for (k, np) in p.phases.iter().enumerate() {
                let at = || format!("processes[{pi}].phases[{k}]");
                np.phase
                    .check(p.regions.len())
                    .map_err(|e| ConfigError::invalid(at(), e))?;
                let region_pages: Vec<u64> = p.regions.iter().map(|r| r.pages).collect();
                np.phase
                    .check_sizes(&region_pages)
                    .map_err(|e| ConfigError::invalid(at(), e))?;
                // File phases work on file regions, the others on anonymous memory (the check
                // the runner makes too).
                np.phase
                    .check_region_kinds(|r| {
                        let reg = &p.regions[r as usize];
                        (reg.name.as_str(), reg.file.is_some())
                    })
                    .map_err(|e| ConfigError::invalid(at(), format!("phase {:?}: {e}", np.name)))?;
                // The files a phase writes: memory.reclaim is a v2 file (on every cgroup, the
                // root included); the others are v2 files that the root does not have
                // (CFTYPE_NOT_ON_ROOT).
                let file = match &np.phase {
                    Phase::Reclaim { .. } => Some(("memory.reclaim", true)),
                    Phase::CgroupWrite { file, .. } | Phase::CgroupOpen { file, .. } => {
                        Some((file.name(), false))
                    }
                    // memory.stat is on the root too (memory_files has no CFTYPE_NOT_ON_ROOT
                    // for it).
                    Phase::CgroupRead { file, .. } => {
                        Some((file.name(), *file == CgroupCounter::MemoryStat))
                    }
                    Phase::CgroupClose { .. } => Some(("a cgroup file", false)),
                    _ => None,
                };
                if let Some((file, on_root)) = file {
                    if cfg.cgroups.version != 2 {
                        return Err(ConfigError::invalid(
                            at(),
                            format!(
                                "phase {:?} writes {file}, a cgroup v2 file; cgroups.version is {}",
                                np.name, cfg.cgroups.version
                            ),
                        ));
                    }
                    if p.cgroup == 0 && !on_root {
                        return Err(ConfigError::invalid(at(), format!("phase {:?} writes {file}, which the root cgroup does not have; put the process in a cgroup", np.name)));
                    }
                }
                if let Phase::ZramWrite { device, file } = np.phase {
                    let zram = cfg
                        .machine
                        .swap
                        .iter()
                        .filter(|s| s.kind == crate::config::SwapKind::Zram)
                        .count();
                    if device as usize >= zram {
                        return Err(ConfigError::invalid(
                            at(),
                            format!("phase {:?} writes zram{device}/{}; the machine has {zram} zram device(s)", np.name, file.name()),
                        ));
                    }
                }
                if let Phase::Reclaim {
                    swappiness: Some(_),
                    ..
                } = np.phase
                {
                    if !crate::policy::Switches::with_overrides(
                        &cfg.kernel.version,
                        &cfg.kernel.switches,
                    )?
                    .reclaim_swappiness
                    {
                        return Err(ConfigError::invalid(
                            at(),
                            format!("phase {:?}: memory.reclaim takes swappiness= from 6.12 (switch memcg.reclaim_swappiness); kernel.version is {}", np.name, cfg.kernel.version),
                        ));
                    }
                }
                // Pages of an unnamed file are freed at exit by truncation, which the model
                // does only for clean pages (filemap.rs truncate_inode_page).
                let written = match &np.phase {
                    Phase::Write { region, .. } => Some(*region),
                    Phase::Mmap {
                        region,
                        write_percent,
                        ..
                    } if *write_percent > 0 => Some(*region),
                    Phase::CreateFiles { regions, .. } => regions
                        .iter()
                        .copied()
                        .find(|&r| p.regions[r as usize].tmpfile),
                    _ => None,
                };
                if let Some(r) = written.filter(|&r| p.regions[r as usize].tmpfile) {
                    return Err(ConfigError::invalid(
                        at(),
                        format!(
                            "phase {:?} writes {:?}, a tmpfile: truncating dirty or written-back pages at exit is not modelled; only reads of a tmpfile are",
                            np.name, p.regions[r as usize].name
                        ),
                    ));
                }
            }
            let adj = p.oom_score_adj.unwrap_or(0);
            if !(OOM_SCORE_ADJ_MIN..=OOM_SCORE_ADJ_MAX).contains(&adj) {
                return Err(ConfigError::invalid(
                    format!("processes[{pi}].oom_score_adj"),
                    format!("expected -1000..=1000, got {adj}"),
                ));
            }
            let phases: Vec<Phase> = p.phases.iter().map(|np| np.phase.clone()).collect();
            let nfds = reclaimlab_workload::check_fds(&phases).map_err(|(k, e)| {
                ConfigError::invalid(
                    format!("processes[{pi}].phases[{k}]"),
                    format!("phase {:?}: {e}", p.phases[k].name),
                )
            })?;
            let n = p.regions.len() as u32;
            procs.push(Proc {
                name: p.name.clone(),
                memcg: p.cgroup as u16,
                regions: (next_region..next_region + n).collect(),
                region_pages: p.regions.iter().map(|r| r.pages).collect(),
                phases: p
                    .phases
                    .iter()
                    .map(|np| (np.name.clone(), np.phase.clone()))
                    .collect(),
                after: p.phases.iter().map(|np| np.after).collect(),
                ended: vec![false; p.phases.len()],
                phase: 0,
                gen: None,
                ahead: VecDeque::with_capacity(LOOKAHEAD + 1),
                lookahead: false,
                analytic: None,
                stepping: None,
                drawn: (0, 0),
                phase_start: 0,
                accesses: 0,
                minflt: 0,
                majflt: 0,
                wake_at: 0,
                state: ProcState::Running,
                blocked_until: 0,
                reclaim: None,
                oom_score_adj: adj,
                populate: p.regions.iter().position(|r| r.mlock).map(|r| (r, 0)),
                open_tmpfiles: p.regions.iter().any(|r| r.tmpfile),
                fds: vec![None; nfds as usize],
            });
            next_region += n;
        }
        check_after(cfg)?;
        Ok(procs)
    }
}

/// oom_badness (mm/oom_kill.c, 6.12): the task's resident and swapped pages and page tables
/// (the model's oom_badness_of_region over its regions), plus oom_score_adj thousandths of
/// `totalpages`; None (LONG_MIN) for a task at OOM_SCORE_ADJ_MIN.
fn oom_badness(mm: &Mm, proc: &Proc, totalpages: u64) -> Option<i64> {
    if proc.oom_score_adj == OOM_SCORE_ADJ_MIN {
        return None;
    }
    let points: u64 = proc
        .regions
        .iter()
        .map(|&r| mm.oom_badness_of_region(r as usize))
        .sum();
    Some(points as i64 + i64::from(proc.oom_score_adj) * (totalpages / 1000) as i64)
}

/// The `after` conditions name an existing phase of another process, and no chain of them
/// (with each process's own phase order) waits on itself: such a run could never end.
fn check_after(cfg: &SimConfig) -> Result<()> {
    let procs = &cfg.processes;
    for (pi, p) in procs.iter().enumerate() {
        for (k, np) in p.phases.iter().enumerate() {
            let Some(a) = np.after else { continue };
            let at = format!("processes[{pi}].phases[{k}].after");
            let Some(q) = procs.get(a.process as usize) else {
                return Err(ConfigError::invalid(
                    at,
                    format!(
                        "process {} does not exist ({} processes)",
                        a.process,
                        procs.len()
                    ),
                ));
            };
            if a.process as usize == pi {
                return Err(ConfigError::invalid(
                    at,
                    "names a phase of its own process (its phases run in order already)",
                ));
            }
            if a.phase as usize >= q.phases.len() {
                return Err(ConfigError::invalid(
                    at,
                    format!(
                        "process {:?} has no phase {} ({} phases)",
                        q.name,
                        a.phase,
                        q.phases.len()
                    ),
                ));
            }
        }
    }
    // Phase (p, k) ends after (p, k-1) ends and after its `after` phase ends: a depth-first
    // walk of those edges finds a cycle (0 unvisited, 1 on the stack, 2 done).
    let mut state: Vec<Vec<u8>> = procs.iter().map(|p| vec![0; p.phases.len()]).collect();
    for pi in 0..procs.len() {
        for k in 0..procs[pi].phases.len() {
            let mut stack = vec![(pi, k, false)];
            while let Some((p, j, leaving)) = stack.pop() {
                if leaving {
                    state[p][j] = 2;
                    continue;
                }
                match state[p][j] {
                    2 => continue,
                    1 => {
                        return Err(ConfigError::invalid(
                            format!("processes[{p}].phases[{j}].after"),
                            format!(
                                "phase {:?} of process {:?} waits, through `after`, on itself",
                                procs[p].phases[j].name, procs[p].name
                            ),
                        ))
                    }
                    _ => {}
                }
                state[p][j] = 1;
                stack.push((p, j, true));
                if j > 0 {
                    stack.push((p, j - 1, false));
                }
                if let Some(a) = procs[p].phases[j].after {
                    stack.push((a.process as usize, a.phase as usize, false));
                }
            }
        }
    }
    Ok(())
}

/// The number a cgroup phase writes (None: "max"), its counter read from memcg `m` now.
fn cgroup_value(mm: &mut Mm, m: u16, value: CgroupValue) -> Option<u64> {
    value.resolve(|c| cgroup_counter(mm, m, c))
}

/// A read of the interface file `c` of memcg `m` (opened, read, closed), bytes: the same
/// values the run's end counters carry under these names.
fn cgroup_counter(mm: &mut Mm, m: u16, c: CgroupCounter) -> u64 {
    match c {
        CgroupCounter::MemoryCurrent => mm.memcgs[m as usize].usage * PAGE_SIZE,
        CgroupCounter::MemorySwapCurrent => mm.swap_current_bytes(m),
        CgroupCounter::MemoryZswapCurrent => {
            // zswap_current_read flushes the memcg's statistics first.
            mm.flush_memcg_subtree(m);
            mm.zswap_tree(m).0
        }
        CgroupCounter::MemoryPeak => mm.peak_read_once(m, false),
        CgroupCounter::MemorySwapPeak => mm.peak_read_once(m, true),
        CgroupCounter::MemoryStat | CgroupCounter::MemoryEvents => {
            unreachable!("keyed files are read at a key (Phase::check)")
        }
    }
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
    /// "completed", "oom_killed", "time_limit", "enomem" (a kernel_alloc phase whose
    /// allocation failed), or "oom_failed" (the process's charge found no
    /// task the OOM killer may kill, every one at oom_score_adj -1000: it stops there).
    pub outcome: &'static str,
    /// A `reclaim` phase: the pages memory.reclaim reclaimed, in bytes (also when it failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclaimed_bytes: Option<u64>,
    /// A `reclaim` or `cgroup_write` phase whose write failed: the errno's name ("EAGAIN"); a
    /// `cgroup_read` of a row the file does not have: "ENOENT".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'static str>,
    /// A `reclaim` or `cgroup_write` phase: the number it wrote (bytes; "max"; "reset").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written: Option<String>,
    /// A `cgroup_read` phase: the number it read (bytes; a memory.events row: a count).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<u64>,
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
        let stop_after = cfg
            .max_time_ns
            .unwrap_or(crate::limits::TIME_HORIZON_NS)
            .min(crate::limits::TIME_HORIZON_NS);
        Ok(Scheduler {
            procs: Proc::from_config(cfg)?,
            records: Vec::new(),
            all_done: false,
            stop_after,
            ended_at: 0,
        })
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
        self.procs
            .iter()
            .filter(|p| p.state == ProcState::Running && p.blocked_until <= now)
            .count() as u64
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
            // Runs again only when wake_waiters makes it Running (with one event).
            _ => return,
        }
        // On a CPU from the slice's start (a no-op if it already was).
        mm.psi_set(pi, t, TSK_RUNNING);
        if self.procs[pi].open_tmpfiles && !self.open_tmpfiles(mm, pi, &mut ctx) {
            return;
        }
        if self.procs[pi].populate.is_some() && !self.mlock_populate(mm, pi, &mut ctx, quantum_end)
        {
            return;
        }
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
            if let Phase::ZramWrite { device, file } = self.procs[pi].phases[self.procs[pi].phase].1
            {
                match file {
                    reclaimlab_workload::ZramFile::Compact => mm.zram_compact(device as usize),
                }
                self.end_phase_at(mm, pi, self.procs[pi].phase, ctx.now, "completed");
                self.procs[pi].gen = None;
                self.procs[pi].phase += 1;
                continue;
            }
            if let Phase::KernelAlloc {
                count,
                order,
                fallback_order,
                migratetype,
            } = self.procs[pi].phases[self.procs[pi].phase].1
            {
                // All at once, like a fork: the stalls advance this process's clock (mm/kalloc.rs).
                let got = mm.kernel_alloc(
                    &mut ctx,
                    pi as u32,
                    count,
                    order,
                    fallback_order,
                    migratetype,
                );
                let outcome = if got == count { "completed" } else { "enomem" };
                self.end_phase_at(mm, pi, self.procs[pi].phase, ctx.now, outcome);
                self.procs[pi].gen = None;
                self.procs[pi].phase += 1;
                continue;
            }
            if let Phase::CgroupOpen { .. } | Phase::CgroupRead { .. } | Phase::CgroupClose { .. } =
                self.procs[pi].phases[self.procs[pi].phase].1
            {
                let read = self.cgroup_file(mm, pi);
                self.end_phase_at(mm, pi, self.procs[pi].phase, ctx.now, "completed");
                let rec = self.records.last_mut().expect("just pushed");
                match read {
                    Ok(v) => rec.read = v,
                    Err(errno) => rec.error = Some(errno),
                }
                self.procs[pi].gen = None;
                self.procs[pi].phase += 1;
                continue;
            }
            if let Phase::CgroupWrite { file, value, fd } =
                self.procs[pi].phases[self.procs[pi].phase].1
            {
                let written = self.cgroup_write(mm, pi, &mut ctx, file, value, fd);
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
                Phase::Random {
                    duration_ns: Some(d),
                    ..
                } => later(proc.phase_start, d),
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
            let fsync_at_close = matches!(
                proc.phases[proc.phase].1,
                Phase::CreateFiles { fsync: true, .. }
            );
            let create_files = matches!(proc.phases[proc.phase].1, Phase::CreateFiles { .. });
            let mut phase_done = false;
            while ctx.now < quantum_end {
                if ctx.now >= duration_end {
                    phase_done = true;
                    break;
                }
                let proc = &mut self.procs[pi];
                let drawn = proc.stepping.is_none() && proc.ahead.is_empty();
                let a = if let Some(rng) = proc.analytic.as_mut().filter(|_| drawn) {
                    // Analytic: the non-events up to the next event in one step.
                    let gen = proc.gen.as_mut().expect("a phase is running");
                    let limit = quantum_end.min(duration_end);
                    if let Some((r, page, pages, wp)) = gen.sequential_at() {
                        // A sequential pass: the resident pages up to the next event at once.
                        let ri = proc.regions[r as usize] as usize;
                        let (from, to) = (page as u32, pages as u32);
                        let rw = gen.rw();
                        let skip = mm.analytic_seq(&mut ctx, (r, ri), from, to, wp, rw, limit, rng);
                        let Some(skip) = skip else {
                            // Not drawable in bulk (accesses that cost no time): stepped.
                            proc.analytic = None;
                            continue;
                        };
                        gen.skip_sequential(skip.hits);
                        proc.accesses += skip.hits;
                        let Some((region, page, write)) = skip.event else {
                            continue;
                        };
                        gen.skip_sequential(1);
                        reclaimlab_workload::Access {
                            region,
                            page,
                            write,
                        }
                    } else {
                        let Some(u) = gen.random_strata().filter(|u| u.remaining != Some(0)) else {
                            phase_done = true;
                            break;
                        };
                        let rw = gen.rw();
                        let Some(skip) =
                            mm.analytic_skip(&mut ctx, &u, &proc.regions, limit, rng, rw)
                        else {
                            // Not drawable in bulk (accesses that cost no time): stepped.
                            proc.analytic = None;
                            continue;
                        };
                        let window = analytic_window(u.total);
                        proc.drawn.0 += skip.hits + u64::from(skip.event.is_some());
                        proc.drawn.1 += u64::from(skip.event.is_some());
                        let dense = skip.dense
                            || (proc.drawn.0 >= window
                                && (proc.drawn.1 as f64)
                                    >= mm.analytic_dense() * proc.drawn.0 as f64);
                        if proc.drawn.0 >= window {
                            proc.drawn = (0, 0);
                        }
                        if dense && !skip.dense {
                            let ris: Vec<usize> = u
                                .regions
                                .iter()
                                .map(|&r| proc.regions[r as usize] as usize)
                                .collect();
                            mm.analytic_suspend(&ris);
                        }
                        if dense {
                            // Stepped, with the exact mode's look-ahead, window by window.
                            proc.stepping = Some(Stepping {
                                left: window,
                                window,
                                faults: proc.minflt + proc.majflt,
                            });
                            proc.lookahead = true;
                            if !skip.dense {
                                // This draw's accesses are made; the event, if any, runs below.
                                gen.skip(skip.hits + u64::from(skip.event.is_some()));
                                proc.accesses += skip.hits;
                            }
                            if skip.event.is_none() {
                                continue;
                            }
                        } else {
                            gen.skip(skip.hits + u64::from(skip.event.is_some()));
                            proc.accesses += skip.hits;
                        }
                        let Some((region, page, write)) = skip.event else {
                            continue;
                        };
                        reclaimlab_workload::Access {
                            region,
                            page,
                            write,
                        }
                    }
                } else {
                    if let Some(st) = proc.stepping.as_mut() {
                        if st.left == 0 {
                            let faults = proc.minflt + proc.majflt;
                            if (faults - st.faults) * RESUME < st.window {
                                // Sparse again: draw in bulk once the look-ahead is used up.
                                proc.stepping = None;
                                proc.lookahead = false;
                                proc.drawn = (0, 0);
                            } else {
                                st.left = st.window;
                                st.faults = faults;
                            }
                        }
                        if let Some(st) = proc.stepping.as_mut() {
                            st.left -= 1;
                        }
                    }
                    let Some(a) = proc.next_access(mm) else {
                        phase_done = true;
                        break;
                    };
                    a
                };
                let region = proc.regions[a.region as usize] as usize;
                let page = mm.regions[region].base + a.page as u32;
                proc.accesses += 1;
                // tmpfs files have their own file operations (mm/shmem.rs); fsync on them
                // does nothing (noop_fsync).
                let shmem = mm.regions[region].shmem.is_some();
                // Again after the OOM killer took another task (the charge is retried).
                let access = loop {
                    let proc = &mut self.procs[pi];
                    let r = if buffered_read && shmem {
                        mm.shmem_file_read(&mut ctx, page).map(|()| true)
                    } else if buffered_write && shmem {
                        // fsync(2) on a tmpfs file is noop_fsync: nothing to do.
                        mm.shmem_file_write(&mut ctx, page).map(|()| true)
                    } else if buffered_read {
                        mm.filemap_read(&mut ctx, page).map(|()| true)
                    } else if buffered_write {
                        let written = proc.accesses * PAGE_SIZE;
                        // open(O_CREAT) of the phase's next file: its dentry, inode and
                        // mapping's nodes (mm/objcg.rs), then ext4_create.
                        let created = if create_files && a.page == 0 {
                            mm.create_file(&mut ctx, region)
                        } else {
                            Ok(())
                        };
                        let r = created
                            .and_then(|()| mm.generic_perform_write(&mut ctx, page))
                            .map(|()| true);
                        let last_of_file = a.page + 1 == mm.regions[region].pages as u64;
                        if r.is_ok()
                            && (fsync_bytes
                                .is_some_and(|n| written / n > (written - PAGE_SIZE) / n)
                                || (fsync_at_close && last_of_file))
                        {
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
                            mm.access(&mut ctx, page, false)
                                .and_then(|f| Ok(mm.access(&mut ctx, page, true)? || f))
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
                    match r {
                        // A charging task at OOM_SCORE_ADJ_MIN is never the victim: the kernel's
                        // select_bad_process picks another task of the OOM domain; once it is
                        // killed, the charge (here: the access) is tried again.
                        Err(oom) if self.procs[pi].oom_score_adj == OOM_SCORE_ADJ_MIN => match self
                            .select_bad_process(mm, oom.memcg)
                        {
                            Some(victim) => self.oom_kill_process(mm, victim, oom.memcg, ctx.now),
                            None => break Err(oom),
                        },
                        r => break r,
                    }
                };
                // Analytic mode: the page is counted in its new class (mm/analytic.rs).
                mm.analytic_sync(page);
                match access {
                    Ok(false) => {}
                    Ok(true) => {
                        // Return to user space: memory.high reclaim and throttling.
                        if mm.over_high[pi] > 0 {
                            mm.mem_cgroup_handle_over_high(&mut ctx, memcg);
                        }
                    }
                    Err(_) if self.procs[pi].oom_score_adj == OOM_SCORE_ADJ_MIN => {
                        // No task of the OOM domain can be killed: out_of_memory fails, the
                        // charge returns -ENOMEM and the fault is retried for ever
                        // (pagefault_out_of_memory). The model stops the process there: its
                        // phase ends "oom_failed" and it holds its memory.
                        self.end_phase_at(mm, pi, self.procs[pi].phase, ctx.now, "oom_failed");
                        self.procs[pi].state = ProcState::Finished;
                        self.procs[pi].gen = None;
                        mm.psi_set(pi, ctx.now, 0);
                        self.maybe_finish(ctx.now);
                        return;
                    }
                    Err(oom) => {
                        // The victim of a charge that failed is the charging task (the
                        // kernel's select_bad_process picks the task of the OOM domain with the
                        // highest oom_badness; the model takes the one that allocates).
                        self.oom_kill_process(mm, pi, oom.memcg, ctx.now);
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

    /// The mlock() of the process's `mlock` regions right after they are mapped, before its
    /// first phase (alloc_anon_mlock: mmap, then mlock of the whole range; mm/mlock.rs):
    /// __mm_populate faults in every page with FOLL_WRITE (a private writable mapping, so
    /// do_anonymous_page allocates, charges and mlocks each). It is one kernel entry: the slice
    /// may end at the quantum (cond_resched) and the call resumes in the next one, but the task
    /// does not return to user space until every page is in, so memory.high is handled only by
    /// try_charge_memcg's synchronous check (more than MEMCG_CHARGE_BATCH pages over high, in
    /// memcg.rs note_over_high) and once on the return, not after each fault as the access
    /// loop of a phase does. Returns false if the process stopped running (its slice ended, it
    /// was OOM-killed or its charge failed for good).
    ///
    /// Simplified: the faults are in no phase's record (the lab's runner mlocks before it
    /// reports its first phase too); a process killed here ends its first phase `oom_killed`.
    fn mlock_populate(&mut self, mm: &mut Mm, pi: usize, ctx: &mut Ctx, quantum_end: Time) -> bool {
        let memcg = self.procs[pi].memcg;
        while let Some((r, next)) = self.procs[pi].populate {
            if ctx.now >= quantum_end {
                self.procs[pi].blocked_until = if ctx.blocked() { ctx.now } else { 0 };
                mm.queue.push(ctx.now, EventKind::Process(pi as u32));
                return false;
            }
            if next == 0 && r == self.first_mlock_region(mm, pi) {
                // The process's first phase, if killed here, starts with the mlock() call.
                self.procs[pi].phase_start = ctx.now;
            }
            let region = self.procs[pi].regions[r] as usize;
            let page = mm.regions[region].base + next;
            let done = mm.access(ctx, page, true);
            mm.analytic_sync(page);
            match done {
                Ok(_) => {}
                // As in the access loop: a task at OOM_SCORE_ADJ_MIN is never the victim;
                // another task of the OOM domain is killed and the fault retried.
                Err(oom) if self.procs[pi].oom_score_adj == OOM_SCORE_ADJ_MIN => {
                    match self.select_bad_process(mm, oom.memcg) {
                        Some(victim) => {
                            self.oom_kill_process(mm, victim, oom.memcg, ctx.now);
                            continue;
                        }
                        None => {
                            self.end_phase_at(mm, pi, self.procs[pi].phase, ctx.now, "oom_failed");
                            self.procs[pi].state = ProcState::Finished;
                            self.procs[pi].populate = None;
                            mm.psi_set(pi, ctx.now, 0);
                            self.maybe_finish(ctx.now);
                            return false;
                        }
                    }
                }
                Err(oom) => {
                    self.procs[pi].populate = None;
                    self.oom_kill_process(mm, pi, oom.memcg, ctx.now);
                    return false;
                }
            }
            let rest = &self.procs[pi].regions[r + 1..];
            self.procs[pi].populate = if next + 1 < mm.regions[region].pages {
                Some((r, next + 1))
            } else {
                rest.iter()
                    .position(|&g| mm.regions[g as usize].mlock)
                    .map(|k| (r + 1 + k, 0))
            };
        }
        // mlock() returns to user space: memory.high reclaim and throttling.
        if mm.over_high[pi] > 0 {
            mm.mem_cgroup_handle_over_high(ctx, memcg);
        }
        true
    }

    /// The open(O_TMPFILE) of the process's tmpfiles, as the lab's runner opens its files
    /// before the first phase: their kernel objects are charged (mm/objcg.rs). A charge that
    /// finds nothing to reclaim invokes the OOM killer as a fault's does (a task at
    /// OOM_SCORE_ADJ_MIN is never the victim); returns false if the process stopped running.
    fn open_tmpfiles(&mut self, mm: &mut Mm, pi: usize, ctx: &mut Ctx) -> bool {
        loop {
            match mm.open_tmpfiles(ctx, pi as u32) {
                Ok(()) => {
                    self.procs[pi].open_tmpfiles = false;
                    return true;
                }
                Err(oom) if self.procs[pi].oom_score_adj == OOM_SCORE_ADJ_MIN => {
                    match self.select_bad_process(mm, oom.memcg) {
                        Some(victim) => self.oom_kill_process(mm, victim, oom.memcg, ctx.now),
                        None => {
                            self.end_phase_at(mm, pi, self.procs[pi].phase, ctx.now, "oom_failed");
                            self.procs[pi].state = ProcState::Finished;
                            mm.psi_set(pi, ctx.now, 0);
                            self.maybe_finish(ctx.now);
                            return false;
                        }
                    }
                }
                Err(oom) => {
                    self.oom_kill_process(mm, pi, oom.memcg, ctx.now);
                    return false;
                }
            }
        }
    }

    /// Index (into the process's `regions`) of its first mlocked region.
    fn first_mlock_region(&self, mm: &Mm, pi: usize) -> usize {
        self.procs[pi]
            .regions
            .iter()
            .position(|&g| mm.regions[g as usize].mlock)
            .unwrap_or(usize::MAX)
    }

    /// Begin the next phase; false if the process stopped running (sleep, exit, finished).
    fn start_phase(&mut self, mm: &mut Mm, pi: usize, ctx: &mut Ctx) -> bool {
        let proc = &mut self.procs[pi];
        if proc.phase >= proc.phases.len() {
            proc.state = ProcState::Finished;
            mm.psi_set(pi, ctx.now, 0);
            self.maybe_finish(ctx.now);
            self.wake_waiters(mm, ctx.now);
            return false;
        }
        if let Some(a) = proc.after[proc.phase] {
            if !self.after_met(a) {
                let proc = &mut self.procs[pi];
                proc.state = ProcState::Waiting;
                mm.psi_set(pi, ctx.now, 0);
                return false;
            }
        }
        let proc = &mut self.procs[pi];
        proc.phase_start = ctx.now;
        proc.ahead.clear();
        proc.lookahead = matches!(
            proc.phases[proc.phase].1,
            Phase::Random { .. } | Phase::Trace { .. }
        );
        proc.accesses = 0;
        proc.minflt = 0;
        proc.majflt = 0;
        // Analytic mode covers random phases (uniform, hot/cold, Zipf) and sequential passes,
        // `rw` or not, over anonymous regions (docs/model/analytic.md); every other phase is
        // stepped as in exact mode.
        proc.stepping = None;
        proc.drawn = (0, 0);
        proc.analytic = match (&mm.analytic, &proc.phases[proc.phase].1) {
            (Some(a), Phase::Random { regions, .. } | Phase::Sequential { regions, .. })
                if regions
                    .iter()
                    .all(|&r| a.tracks(proc.regions[r as usize] as usize)) =>
            {
                Some(crate::mm::analytic::phase_rng(
                    mm.seed,
                    pi as u64,
                    proc.phase as u64,
                ))
            }
            _ => None,
        };
        if proc.analytic.is_some() {
            proc.lookahead = false;
        }
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
                self.close_fds(mm, pi);
                mm.exit_process(pi as u32);
                mm.psi_set(pi, ctx.now, 0);
                self.procs[pi].state = ProcState::Exited;
                self.maybe_finish(ctx.now);
                self.wake_waiters(mm, ctx.now);
                false
            }
            Phase::Reclaim { amount, swappiness } => {
                let m = proc.memcg;
                let bytes = cgroup_value(mm, m, amount).unwrap_or(0);
                let proc = &mut self.procs[pi];
                proc.reclaim = Some(MemoryReclaim::new(bytes, swappiness.map(u64::from)));
                proc.gen = Some(AccessGen::new(
                    &Phase::Exit,
                    &[],
                    reclaimlab_workload::SplitMix64::new(0),
                ));
                true
            }
            phase => {
                let rng = reclaimlab_workload::rng::stream(
                    mm.seed,
                    Stream::Access,
                    pi as u64,
                    proc.phase as u64,
                );
                proc.gen = Some(AccessGen::new(&phase, &proc.region_pages, rng));
                true
            }
        }
    }

    /// Whether the phase an `after` names has ended, or can no longer end: its process was
    /// killed, exited or stopped before it.
    fn after_met(&self, a: After) -> bool {
        let q = &self.procs[a.process as usize];
        q.ended[a.phase as usize]
            || matches!(
                q.state,
                ProcState::Finished | ProcState::Exited | ProcState::OomKilled
            )
    }

    /// Processes waiting on a phase that has now ended run from `now`, in process order: each
    /// becomes Running with one event (wake_waiters runs several times as a phase and then its
    /// process end; a second event would run the process twice as often).
    fn wake_waiters(&mut self, mm: &mut Mm, now: Time) {
        for qi in 0..self.procs.len() {
            let q = &self.procs[qi];
            if q.state == ProcState::Waiting && q.after[q.phase].is_some_and(|a| self.after_met(a))
            {
                self.procs[qi].state = ProcState::Running;
                self.procs[qi].blocked_until = 0;
                mm.queue.push(now, EventKind::Process(qi as u32));
            }
        }
    }

    fn end_phase_at(
        &mut self,
        mm: &mut Mm,
        pi: usize,
        idx: usize,
        now: Time,
        outcome: &'static str,
    ) {
        self.procs[pi].ended[idx] = true;
        self.wake_waiters(mm, now);
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
            read: None,
        });
    }

    /// A `cgroup_open`, `cgroup_read` or `cgroup_close` phase of process `pi` (the current
    /// one): what a read read, in bytes, or the errno's name of a read that failed ("ENOENT":
    /// a keyed file without that row, in the simulator one it does not model).
    fn cgroup_file(
        &mut self,
        mm: &mut Mm,
        pi: usize,
    ) -> std::result::Result<Option<u64>, &'static str> {
        let proc = &self.procs[pi];
        let m = proc.memcg;
        // check_fds made sure every descriptor used is open, on the file named.
        let open = |fd: u32| proc.fds[fd as usize].expect("check_fds: the descriptor is open");
        match &proc.phases[proc.phase].1 {
            &Phase::CgroupOpen { file, fd } => {
                let id = mm.peak_open(m, file == CgroupFile::MemorySwapPeak);
                self.procs[pi].fds[fd as usize] = Some(id);
                Ok(None)
            }
            &Phase::CgroupRead { fd: Some(fd), .. } => Ok(Some(mm.peak_show(open(fd)))),
            Phase::CgroupRead {
                file,
                fd: None,
                key: Some(key),
            } => {
                // memory.stat and memory.events as the run's end counters show them (the
                // same export, read now). memory_stat_show flushes first
                // (mem_cgroup_flush_stats: when enough updates are pending); a read of a
                // memory.stat key between flushes still shows the live value (the export).
                if *file == CgroupCounter::MemoryStat {
                    mm.mem_cgroup_flush_stats(m);
                }
                let want = format!(
                    "memcg[{}].{}.{key}",
                    mm.memcgs[m as usize].path,
                    file.name()
                );
                let mut out = Vec::new();
                mm.export_memcgs(&mut out);
                let v = out.into_iter().find(|(k, _)| *k == want).map(|(_, v)| v);
                v.map(Some).ok_or("ENOENT")
            }
            &Phase::CgroupRead { file, fd: None, .. } => Ok(Some(cgroup_counter(mm, m, file))),
            &Phase::CgroupClose { fd } => {
                mm.peak_release(open(fd));
                self.procs[pi].fds[fd as usize] = None;
                Ok(None)
            }
            _ => unreachable!("only called for cgroup_open, cgroup_read and cgroup_close"),
        }
    }

    /// The process's open descriptors are released (it exits or is killed).
    fn close_fds(&mut self, mm: &mut Mm, pi: usize) {
        for id in self.procs[pi].fds.iter_mut().filter_map(Option::take) {
            mm.peak_release(id);
        }
    }

    /// A write to the process's cgroup file `file` (memory_high_write, memory_max_write,
    /// zswap_max_write, zswap_writeback_write, swap_max_write, peak_write in 6.12's
    /// mm/memcontrol.c), through
    /// its descriptor `fd` if given; returns the text written. Sizes are rounded down to
    /// pages, as page_counter_memparse does.
    fn cgroup_write(
        &mut self,
        mm: &mut Mm,
        pi: usize,
        ctx: &mut Ctx,
        file: CgroupFile,
        value: CgroupValue,
        fd: Option<u32>,
    ) -> String {
        let m = self.procs[pi].memcg;
        if file.is_peak() {
            match fd {
                Some(fd) => mm.peak_write(
                    self.procs[pi].fds[fd as usize].expect("check_fds: the descriptor is open"),
                ),
                None => mm.peak_write_once(m, file == CgroupFile::MemorySwapPeak),
            }
            return "reset".to_string();
        }
        let v = cgroup_value(mm, m, value);
        let pages = v.map_or(u64::MAX, |b| b / PAGE_SIZE);
        match file {
            CgroupFile::MemoryHigh => mm.memory_high_write(ctx, m, pages),
            CgroupFile::MemoryMax => mm.memory_max_write(ctx, m, pages, &mut |mm, now| {
                self.oom_kill_memcg(mm, m, now)
            }),
            CgroupFile::MemoryZswapMax => mm.memcgs[m as usize].zswap_max = pages,
            // swap_max_write: the limit only (no reclaim: swap already used stays).
            CgroupFile::MemorySwapMax => mm.memcgs[m as usize].swap_max = pages,
            CgroupFile::MemoryZswapWriteback => {
                mm.memcgs[m as usize].zswap_writeback = v == Some(1)
            }
            CgroupFile::MemoryPeak | CgroupFile::MemorySwapPeak => {
                unreachable!("written above")
            }
        }
        CgroupValue::text(v)
    }

    /// mem_cgroup_out_of_memory for memcg `m` (from a memory.max write): select_bad_process
    /// in its subtree, then oom_kill_process. False if the subtree has no task to kill.
    fn oom_kill_memcg(&mut self, mm: &mut Mm, m: u16, now: Time) -> bool {
        let Some(victim) = self.select_bad_process(mm, Some(m)) else {
            return false;
        };
        self.oom_kill_process(mm, victim, Some(m), now);
        true
    }

    /// select_bad_process (mm/oom_kill.c, 6.12): the live task of the OOM domain (memcg
    /// `domain`'s subtree, or every task) with the highest oom_badness, the first on a tie.
    /// Finished processes still hold memory and count. None: no task can be killed (none, or
    /// all at OOM_SCORE_ADJ_MIN). Simplified: no oom_task_origin, no wait for a victim that is
    /// still exiting (the model's kills free the memory at once).
    fn select_bad_process(&self, mm: &Mm, domain: Option<u16>) -> Option<usize> {
        // oc->totalpages: mem_cgroup_get_max of the domain (memory.max, plus memory.swap.max
        // capped by the swap space if the memcg may swap), or totalram + total_swap_pages.
        let totalpages = match domain {
            Some(m) => {
                let mc = &mm.memcgs[m as usize];
                let swap = if mc.swappiness > 0 {
                    mc.swap_max.min(mm.swap.total_swap_pages)
                } else {
                    0
                };
                (mc.limit.min(PAGE_COUNTER_MAX) + swap).max(1)
            }
            None => mm.totalram + mm.swap.total_swap_pages,
        };
        let range = domain.map_or(0..u16::MAX, |m| m..mm.memcgs[m as usize].subtree_end);
        let mut best: Option<(i64, usize)> = None;
        for (pi, proc) in self.procs.iter().enumerate() {
            if matches!(proc.state, ProcState::Exited | ProcState::OomKilled)
                || !range.contains(&proc.memcg)
            {
                continue;
            }
            let Some(points) = oom_badness(mm, proc, totalpages) else {
                continue;
            };
            if best.is_none_or(|(b, _)| points > b) {
                best = Some((points, pi));
            }
        }
        best.map(|(_, pi)| pi)
    }

    /// mem_cgroup_get_oom_group (mm/memcontrol.c, 6.12): the highest memcg from the victim's
    /// up to the OOM domain (or the root) with memory.oom.group set; none for a victim in the
    /// root memcg (nor on cgroup v1, where no memcg has the file).
    fn mem_cgroup_get_oom_group(&self, mm: &Mm, victim: usize, domain: Option<u16>) -> Option<u16> {
        let memcg = self.procs[victim].memcg;
        if memcg == 0 {
            return None;
        }
        let mut group = None;
        for c in mm.memcg_ancestry(memcg) {
            if mm.memcgs[c as usize].oom_group {
                group = Some(c);
            }
            if Some(c) == domain {
                break;
            }
        }
        group
    }

    /// oom_kill_process (mm/oom_kill.c, 6.12): kill `victim`; with memory.oom.group, count
    /// MEMCG_OOM_GROUP_KILL on the group and kill every task of its subtree but those at
    /// OOM_SCORE_ADJ_MIN (mem_cgroup_scan_tasks with oom_kill_memcg_member). That scan meets the
    /// victim again and counts it again, as in the kernel: the victim still has its mm there
    /// (the kill is a signal), so __oom_kill_process counts OOM_KILL and MEMCG_OOM_KILL a
    /// second time. Tasks killed or exited before have no mm and are skipped
    /// (find_lock_task_mm).
    fn oom_kill_process(&mut self, mm: &mut Mm, victim: usize, domain: Option<u16>, now: Time) {
        let group = self.mem_cgroup_get_oom_group(mm, victim, domain);
        self.oom_kill_task(mm, victim, now);
        let Some(g) = group else { return };
        mm.memcgs[g as usize].events.oom_group_kill += 1;
        // mem_cgroup_scan_tasks walks the subtree's memcgs in pre-order (mem_cgroup_iter).
        for c in g..mm.memcgs[g as usize].subtree_end {
            for pi in 0..self.procs.len() {
                let p = &self.procs[pi];
                if p.memcg != c || p.oom_score_adj == OOM_SCORE_ADJ_MIN {
                    continue;
                }
                if pi == victim || !matches!(p.state, ProcState::Exited | ProcState::OomKilled) {
                    self.oom_kill_task(mm, pi, now);
                }
            }
        }
    }

    /// __oom_kill_process (mm/oom_kill.c, 6.12): count OOM_KILL and MEMCG_OOM_KILL (on the
    /// task's memcg; memory.events shows it in every ancestor too, memcg_memory_event), then
    /// the kill: the task's phase ends `oom_killed` and its memory is freed at once (no exit
    /// latency, no oom_reaper). A task already killed is only counted.
    fn oom_kill_task(&mut self, mm: &mut Mm, pi: usize, now: Time) {
        mm.vm.oom_kill += 1;
        mm.memcgs[self.procs[pi].memcg as usize].events.oom_kill += 1;
        if self.procs[pi].state == ProcState::OomKilled {
            return;
        }
        if self.procs[pi].phase < self.procs[pi].phases.len()
            && self.procs[pi].state != ProcState::Finished
        {
            self.end_phase_at(mm, pi, self.procs[pi].phase, now, "oom_killed");
        }
        self.close_fds(mm, pi);
        mm.exit_process(pi as u32);
        mm.psi_set(pi, now, 0);
        self.procs[pi].state = ProcState::OomKilled;
        self.procs[pi].gen = None;
        self.maybe_finish(now);
        self.wake_waiters(mm, now);
    }

    /// out_of_memory from kswapd (the multi-gen LRU's min_ttl_ms, mm/lru_gen.rs): the
    /// system-wide select_bad_process, then oom_kill_process.
    pub(crate) fn oom_kill_badness(&mut self, mm: &mut Mm, now: Time) {
        if let Some(pi) = self.select_bad_process(mm, None) {
            self.oom_kill_process(mm, pi, None, now);
        }
    }

    fn maybe_finish(&mut self, now: Time) {
        self.ended_at = self.ended_at.max(now);
        if self.procs.iter().all(|p| {
            matches!(
                p.state,
                ProcState::Finished | ProcState::Exited | ProcState::OomKilled
            )
        }) {
            self.all_done = true;
        }
    }

    /// After the counters are read: processes done with their phases exit.
    pub(crate) fn exit_finished(&mut self, mm: &mut Mm) {
        for pi in 0..self.procs.len() {
            if self.procs[pi].state == ProcState::Finished {
                self.close_fds(mm, pi);
                mm.exit_process(pi as u32);
                self.procs[pi].state = ProcState::Exited;
            }
        }
    }

    /// The time limit: every phase still running ends at `now` ("time_limit").
    pub(crate) fn stop_at_time_limit(&mut self, mm: &mut Mm, now: Time) {
        for pi in 0..self.procs.len() {
            if matches!(
                self.procs[pi].state,
                ProcState::Running | ProcState::Sleeping
            ) && self.procs[pi].phase < self.procs[pi].phases.len()
            {
                self.end_phase_at(mm, pi, self.procs[pi].phase, now, "time_limit");
                self.procs[pi].state = ProcState::Finished;
            }
        }
        // A process still waiting on `after` never started its phase: it has no record.
        for p in &mut self.procs {
            if p.state == ProcState::Waiting {
                p.state = ProcState::Finished;
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
                crate::latency::ProcessLatency {
                    process: p.name.clone(),
                    kinds: all.summaries(),
                }
            })
            .collect()
    }

    /// Share of the workload done, for progress bars (phases weighted equally per process).
    pub(crate) fn progress(&self, now: Time) -> f64 {
        let mut total = 0.0;
        for p in &self.procs {
            let n = p.phases.len().max(1) as f64;
            let done = match p.state {
                ProcState::Running | ProcState::Sleeping | ProcState::Waiting => {
                    let frac = match (p.phases.get(p.phase).map(|x| &x.1), &p.gen) {
                        (
                            Some(Phase::Random {
                                duration_ns: Some(d),
                                ..
                            }),
                            Some(_),
                        ) => (now.saturating_sub(p.phase_start)) as f64 / (*d).max(1) as f64,
                        (Some(Phase::Random { count: Some(c), .. }), Some(_)) => {
                            p.accesses as f64 / (*c).max(1) as f64
                        }
                        (Some(Phase::Fill { region }), Some(_)) => {
                            p.accesses as f64 / p.region_pages[*region as usize].max(1) as f64
                        }
                        (
                            Some(Phase::Trace {
                                trace,
                                passes,
                                limit,
                                ..
                            }),
                            Some(_),
                        ) => {
                            let total = limit
                                .unwrap_or(u64::MAX)
                                .min(trace.len().saturating_mul(u64::from(*passes)));
                            p.accesses as f64 / total.max(1) as f64
                        }
                        (
                            Some(
                                Phase::Read { region, passes }
                                | Phase::Mmap { region, passes, .. }
                                | Phase::Write { region, passes, .. },
                            ),
                            Some(_),
                        ) => {
                            p.accesses as f64
                                / (p.region_pages[*region as usize] * *passes as u64).max(1) as f64
                        }
                        (Some(Phase::CreateFiles { regions, .. }), Some(_)) => {
                            p.accesses as f64
                                / regions
                                    .iter()
                                    .map(|&r| p.region_pages[r as usize])
                                    .sum::<u64>()
                                    .max(1) as f64
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
