//! The simulation: builds the machine from a lowered scenario, runs processes, kswapd, the
//! zswap worker and device completions on one event queue, and snapshots the counters.
//!
//! Scheduling: a process runs for up to `process_quantum_ns` of virtual time per event, so
//! other events interleave at that granularity. CPU contention is processor sharing: when more
//! threads are runnable than there are CPUs, every CPU cost is stretched by runnable / cpus.
//! Counters are read when every process has finished its phases (before they exit), as the lab
//! reads them on the real machine.

use serde::Serialize;

use crate::config::SimConfig;
use crate::error::Result;
use crate::latency::{PhaseLatency, ProcessLatency};
use crate::limits::TIME_HORIZON_NS;
use crate::mm::pressure::running_flags;
use crate::mm::{Actor, Ctx, Mm};
pub use crate::sched::PhaseRecord;
use crate::sched::Scheduler;
use crate::sim::{EventKind, Time};

#[derive(Clone, Debug, Serialize)]
pub struct SimStats {
    pub events: u64,
    pub sim_time_ns: u64,
    pub pages: u64,
    /// Page events: accesses plus pages scanned, swapped out and swapped in, and file pages
    /// scanned and written back.
    pub page_events: u64,
    /// Accesses drawn in bulk, not stepped (engine.accesses = "analytic"; absent in exact mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analytic_accesses: Option<u64>,
}

/// One zsmalloc pool's `classes` table: zswap's pools are `zswap0`, `zswap1` … (the kernel
/// names them zswap<n> with a running count), zram devices `zram0` … (the disk's name).
#[derive(Clone, Debug, Serialize)]
pub struct PoolClasses {
    pub pool: String,
    pub classes: Vec<crate::zpool::ZsClassRow>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SimResult {
    pub counters: Vec<(String, u64)>,
    pub phases: Vec<PhaseRecord>,
    pub stats: SimStats,
    pub latency: LatencyResult,
}

/// Latency distributions (crate::latency): per process over the run, and per phase (in the
/// order of the phase records).
#[derive(Clone, Debug, Serialize)]
pub struct LatencyResult {
    /// Every process's latencies merged (exact: bucket-wise sums).
    pub all: std::collections::BTreeMap<&'static str, crate::latency::Summary>,
    pub processes: Vec<ProcessLatency>,
    pub phases: Vec<PhaseLatency>,
}

pub struct Simulation {
    mm: Mm,
    sched: Scheduler,
    cpus: u64,
    max_time: Option<Time>,
    now: Time,
    events: u64,
    snapshot: Option<Vec<(String, u64)>>,
    /// The pools' debugfs `classes` tables, taken with `snapshot`.
    classes_snapshot: Option<Vec<PoolClasses>>,
    finished: bool,
    stopped_at_limit: bool,
    /// Check page conservation every this many events (0 = never).
    check_every: u64,
}

impl Simulation {
    pub fn new(cfg: &SimConfig) -> Result<Simulation> {
        // Every bound first: nothing is allocated for a config the arithmetic cannot run.
        crate::limits::check(cfg)?;
        let mut mm = Mm::from_config(cfg)?;
        let sched = Scheduler::from_config(cfg)?;
        for p in 0..sched.len() {
            mm.queue.push(0, EventKind::Process(p as u32));
        }
        if let Some(first) = mm.kcompactd_first_timeout() {
            mm.queue.push(first, EventKind::Kcompactd);
        }
        Ok(Simulation {
            mm,
            sched,
            cpus: cfg.machine.cpus as u64,
            // Every run stops at the horizon: no clock reaches an overflow (crate::limits).
            max_time: Some(
                cfg.max_time_ns
                    .unwrap_or(TIME_HORIZON_NS)
                    .min(TIME_HORIZON_NS),
            ),
            now: 0,
            events: 0,
            snapshot: None,
            classes_snapshot: None,
            finished: false,
            stopped_at_limit: false,
            check_every: if cfg!(debug_assertions) { 4096 } else { 0 },
        })
    }

    pub fn set_check_interval(&mut self, every: u64) {
        self.check_every = every;
    }

    /// Analytic mode: from what event probability a random phase steps its accesses instead
    /// of drawing them (mm/analytic.rs DENSE). For tests that exercise the draws under heavy
    /// pressure (1.0: never step); a no-op in exact mode.
    #[doc(hidden)]
    pub fn set_analytic_dense(&mut self, p: f64) {
        if let Some(a) = self.mm.analytic.as_mut() {
            a.dense = p;
        }
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
    pub(crate) fn slowdown(&self) -> u64 {
        let runnable = self.sched.runnable_processes(self.now)
            + self.mm.kswapd.running as u64
            + self.mm.zswap_worker_busy() as u64;
        (runnable * 1024 / self.cpus).max(1024)
    }

    /// Run up to `max_events` events; true once the simulation has finished.
    pub fn step(&mut self, max_events: u64) -> bool {
        self.step_until(max_events, Time::MAX)
    }

    /// Run up to `max_events` events, none later than `until` (ns of simulated time); true once
    /// the simulation has finished. Stopping before an event changes nothing: the next call
    /// pops the same event, so a run stepped to sample times (`--interval`) processes exactly
    /// the events of a run stepped in fixed chunks, and its results are bit-identical.
    pub fn step_until(&mut self, max_events: u64, until: Time) -> bool {
        for _ in 0..max_events {
            if self.finished {
                break;
            }
            if self.mm.queue.peek_time().is_some_and(|t| t > until) {
                break;
            }
            let Some((t, ev)) = self.mm.queue.pop() else {
                self.finish();
                break;
            };
            if let Some(limit) = self.max_time {
                if t > limit {
                    self.now = limit;
                    self.sched.stop_at_time_limit(&mut self.mm, self.now);
                    self.stopped_at_limit = true;
                    self.finish();
                    break;
                }
            }
            self.now = self.now.max(t);
            self.events += 1;
            // No event from here on reports a PSI state change before its own time.
            self.mm.psi.advance(t);
            self.mm.flush_memcg_stats_until(t);
            self.mm.zswap.cpus_saturated = self.sched.runnable_processes(self.now) >= self.cpus;
            match ev {
                EventKind::DeviceDone(d) => self.mm.device_done(d as usize, t),
                EventKind::Kswapd => {
                    let mut ctx =
                        Ctx::new(t.max(self.mm.kswapd.clock), Actor::Kswapd, self.slowdown());
                    ctx.memalloc = true;
                    // balance_pgdat runs inside psi_memstall_enter: kswapd on a CPU in memstall.
                    ctx.memstall = true;
                    let kswapd_task = self.sched.len();
                    self.mm.psi_set(kswapd_task, ctx.now, running_flags(true));
                    self.mm.kswapd_step(&mut ctx);
                    if !self.mm.kswapd.running {
                        self.mm.psi_set(kswapd_task, ctx.now, 0);
                    }
                    if std::mem::take(&mut self.mm.lru_gen.oom) {
                        self.sched.oom_kill_badness(&mut self.mm, ctx.now);
                        if self.sched.all_done() {
                            self.finish();
                        }
                    }
                }
                EventKind::Flusher(fs) => {
                    // An event superseded by an earlier wakeup finds another time scheduled.
                    let fs = fs as usize;
                    if self.mm.fs[fs].wb.scheduled == Some(t) {
                        let mut ctx = Ctx::new(
                            t.max(self.mm.fs[fs].wb.clock),
                            Actor::Flusher,
                            self.slowdown(),
                        );
                        self.mm.wb_workfn(&mut ctx, fs);
                    }
                }
                EventKind::Kcompactd => {
                    if let Some(next) = self.mm.kcompactd_timer(t) {
                        self.mm.queue.push(next, EventKind::Kcompactd);
                    }
                }
                EventKind::ZswapWorker => {
                    let mut ctx = Ctx::new(
                        t.max(self.mm.zswap.worker_clock),
                        Actor::ZswapWorker,
                        self.slowdown(),
                    );
                    self.mm.zswap_worker_step(&mut ctx);
                }
                EventKind::Process(p) => {
                    let slowdown = self.slowdown();
                    self.sched.run_process(&mut self.mm, p, t, slowdown);
                    if self.sched.all_done() {
                        self.finish();
                    }
                }
            }
            debug_assert!(
                self.mm.plug.is_idle(),
                "a block plug outlived its event ({ev:?} at {t} ns)"
            );
            if self.check_every > 0 && self.events.is_multiple_of(self.check_every) {
                if let Err(e) = self.mm.check_conservation() {
                    panic!(
                        "page conservation violated after event {} ({ev:?} at {t} ns): {e}",
                        self.events
                    );
                }
            }
        }
        // Stopped before `until` with every event left after it: no state change before
        // `until` is still to come, so PSI (and the counters read now) can cover up to it.
        if !self.finished
            && until != Time::MAX
            && self.mm.queue.peek_time().is_some_and(|t| t > until)
        {
            self.mm.psi.advance(until);
        }
        self.finished
    }

    pub fn run_to_end(&mut self) -> SimResult {
        while !self.step(1 << 20) {}
        self.result()
    }

    pub fn result(&self) -> SimResult {
        let counters = self.snapshot.clone().unwrap_or_else(|| self.counters());
        let vm = &self.mm.vm;
        let accesses: u64 = self.sched.records.iter().map(|r| r.accesses).sum();
        SimResult {
            counters,
            phases: self.sched.records.clone(),
            latency: LatencyResult {
                all: self.mm.lat.all().summaries(),
                processes: self.sched.process_latencies(&self.mm),
                phases: self.mm.lat.phases.clone(),
            },
            stats: SimStats {
                events: self.events,
                // The end of the work, not the start of the last event; a run stopped at
                // max_time ends there.
                sim_time_ns: if self.stopped_at_limit {
                    self.now
                } else {
                    self.now.max(self.sched.ended_at)
                },
                pages: self.mm.pages.len() as u64,
                page_events: accesses
                    + vm.pgscan_anon
                    + vm.pswpout
                    + vm.zswpout
                    + vm.pswpin
                    + vm.zswpin
                    + vm.swpout_zero
                    + vm.swpin_zero
                    + self.mm.vm_file.pgscan_file
                    + self.mm.vm_file.nr_written,
                analytic_accesses: self.mm.analytic.as_ref().map(|a| a.accesses),
            },
        }
    }

    /// The counters are read (before the processes exit, as the lab reads them), then every
    /// process done with its phases exits.
    fn finish(&mut self) {
        if self.finished {
            return;
        }
        // PSI up to the end of the work (the last slice may have run past the last event).
        self.mm.psi.advance(self.now.max(self.sched.ended_at));
        // The zone's kernel pages follow the pools' growth lazily (mm/phys.rs): bring them to
        // the count so /proc/buddyinfo is read as of now.
        self.mm.phys_sync();
        self.snapshot = Some(self.counters());
        self.classes_snapshot = Some(self.mm.zsmalloc_classes());
        self.sched.exit_finished(&mut self.mm);
        self.finished = true;
    }

    /// Simulated time of the next event (None once the queue is empty).
    pub fn next_event_time(&self) -> Option<Time> {
        self.mm.queue.peek_time()
    }

    /// Simulated time of the last event run.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Share of the workload done, for progress bars (phases weighted equally per process).
    pub fn progress(&self) -> f64 {
        if self.finished {
            return 1.0;
        }
        self.sched.progress(self.now)
    }

    /// All counters under their kernel names, gauges read now.
    pub fn counters(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        self.mm.export(self.now, &mut out);
        out
    }

    /// Each zsmalloc pool's /sys/kernel/debug/zsmalloc/<pool>/classes, read when the counters
    /// are (at the snapshot once every process finished, else now). An optional output: not
    /// part of [`SimResult`].
    pub fn zsmalloc_classes(&self) -> Vec<PoolClasses> {
        self.classes_snapshot
            .clone()
            .unwrap_or_else(|| self.mm.zsmalloc_classes())
    }

    /// Every page is in exactly one place, and every count agrees with the pages.
    pub fn check_conservation(&self) -> std::result::Result<(), String> {
        self.mm.check_conservation()
    }
}
