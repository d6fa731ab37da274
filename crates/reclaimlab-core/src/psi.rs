//! Memory pressure stall information: kernel/sched/psi.c (6.12) for the memory resource.
//!
//! Tasks (the scenario's processes and kswapd) report their state changes with the time they
//! happen (`Psi::set`). Kernel paths run inside one event to completion at their own clock
//! (docs/architecture.md), so one task's changes can lie ahead of another's: they wait in a
//! queue ordered by time. The engine calls [`Psi::advance`] with the time of each event it
//! takes (no later event reports a change before its own time); what that call stands for is
//! applying every queued change before it and running the averaging at every boundary up to
//! it. That work is done lazily, as the kernel's psi_group_change/psi_avgs_work aggregate
//! lazily too: the calls are only noted, and the work they stand for runs when a change is
//! reported before a noted time (then the result would depend on the order), when the queue
//! grows long, and when the figures are read. Doing several noted calls at once is the same
//! as doing each at its time, because every change queued since the first of them lies at or
//! after each of them; so the figures are bit-identical to applying at every event.
//!
//! Per group (cgroup and each ancestor; the root memcg is the system, /proc/pressure) and per
//! CPU: the task counts NR_IOWAIT, NR_MEMSTALL, NR_RUNNING and NR_MEMSTALL_RUNNING, the state
//! test_states derives from them (SOME: a task in memstall; FULL: also every running task is
//! in memstall-running; NONIDLE: any task), and record_times' accumulated time per state.
//! Every PSI_FREQ (2 s + 1 jiffy) collect_percpu_times weights each CPU's state times by its
//! non-idle jiffies into `total`, and update_averages feeds the sample into avg10/60/300 with
//! calc_load's fixed-point decay. Simplified: tasks stay on one CPU (processes in order, then
//! kswapd, modulo the machine's CPUs); there is no current task per CPU, so a CPU is FULL only
//! when every running task on it is in memstall (test_states), not also when the one on the
//! CPU is (psi_group_change's PSI_ONCPU rule); the averaging work runs at every PSI_FREQ
//! boundary from time 0 (the kernel stops it while a group is idle and catches up with
//! calc_load_n); reading the counters changes nothing (the kernel's psi_show collects, so its
//! reads move the next sample's CPU weights).

use std::collections::VecDeque;

use crate::sim::{Time, HZ, JIFFY_NS};

// Task state bits (include/linux/psi_types.h).
pub const TSK_IOWAIT: u8 = 1 << 0;
pub const TSK_MEMSTALL: u8 = 1 << 1;
pub const TSK_RUNNING: u8 = 1 << 2;
pub const TSK_MEMSTALL_RUNNING: u8 = 1 << 3;
const NR_IOWAIT: usize = 0;
const NR_MEMSTALL: usize = 1;
const NR_RUNNING: usize = 2;
const NR_MEMSTALL_RUNNING: usize = 3;

// Group states kept here: PSI_MEM_SOME, PSI_MEM_FULL, PSI_NONIDLE.
const SOME: usize = 0;
const FULL: usize = 1;
const NONIDLE: usize = 2;

/// PSI_FREQ (2*HZ+1 jiffies) as psi_period, ns.
pub const PSI_PERIOD_NS: u64 = (2 * HZ + 1) * JIFFY_NS;
/// FSHIFT, FIXED_1 (include/linux/sched/loadavg.h).
pub const FSHIFT: u32 = 11;
pub const FIXED_1: u64 = 1 << FSHIFT;
/// EXP_10s, EXP_60s, EXP_300s: 1/exp(2s/window) in fixed point.
pub const EXP: [u64; 3] = [1677, 1981, 2034];

/// calc_load (include/linux/sched/loadavg.h).
pub fn calc_load(load: u64, exp: u64, active: u64) -> u64 {
    let mut newload = load * exp + active * (FIXED_1 - exp);
    if active >= load {
        newload += FIXED_1 - 1;
    }
    newload / FIXED_1
}

/// An average as psi_show prints it (LOAD_INT.LOAD_FRAC), in hundredths of a percent.
pub fn centi_percent(avg: u64) -> u64 {
    (avg >> FSHIFT) * 100 + (((avg & (FIXED_1 - 1)) * 100) >> FSHIFT)
}

#[derive(Clone, Debug, Default)]
struct GroupCpu {
    tasks: [u32; 4],
    state: u8,
    state_start: Time,
    times: [u64; 3],
    times_prev: [u64; 3],
}

impl GroupCpu {
    /// record_times: the current state's time up to `now`.
    fn record_times(&mut self, now: Time) {
        // A change can only be late by running in an event that started before the last
        // advance; it then takes effect at the state's start (never counted twice).
        let now = now.max(self.state_start);
        let delta = now - self.state_start;
        self.state_start = now;
        for s in [SOME, FULL, NONIDLE] {
            if self.state & (1 << s) != 0 {
                self.times[s] += delta;
            }
        }
    }

    /// psi_group_change: a task's bits `clear` go, `set` come.
    fn change(&mut self, now: Time, clear: u8, set: u8) {
        self.record_times(now);
        for t in 0..4 {
            if clear & (1 << t) != 0 {
                debug_assert!(self.tasks[t] > 0, "psi task count underflow");
                self.tasks[t] -= 1;
            }
            if set & (1 << t) != 0 {
                self.tasks[t] += 1;
            }
        }
        self.state = test_states(&self.tasks);
    }
}

/// test_states, memory part.
fn test_states(tasks: &[u32; 4]) -> u8 {
    let mut m = 0;
    if tasks[NR_MEMSTALL] > 0 {
        m |= 1 << SOME;
        if tasks[NR_RUNNING] == tasks[NR_MEMSTALL_RUNNING] {
            m |= 1 << FULL;
        }
    }
    if tasks[NR_IOWAIT] > 0 || tasks[NR_MEMSTALL] > 0 || tasks[NR_RUNNING] > 0 {
        m |= 1 << NONIDLE;
    }
    m
}

/// One psi_group: its per-CPU state and the aggregated totals and averages (some, full).
#[derive(Clone, Debug)]
pub struct PsiGroup {
    cpus: Vec<GroupCpu>,
    /// total[PSI_AVGS] for MEM_SOME, MEM_FULL, ns.
    total: [u64; 2],
    avg_total: [u64; 2],
    /// avg[some|full][10s, 60s, 300s], fixed point.
    avg: [[u64; 3]; 2],
    avg_last_update: Time,
}

/// A group's figures as its pressure file shows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pressure {
    /// some, full: total in µs.
    pub total_us: [u64; 2],
    /// some, full: avg10, avg60, avg300 in hundredths of a percent.
    pub avg: [[u64; 3]; 2],
}

impl PsiGroup {
    pub fn new(cpus: usize) -> PsiGroup {
        PsiGroup {
            cpus: vec![GroupCpu::default(); cpus],
            total: [0; 2],
            avg_total: [0; 2],
            avg: [[0; 3]; 2],
            avg_last_update: 0,
        }
    }

    /// A task on `cpu` changes from state `clear` to `set` at `now`.
    pub fn change(&mut self, cpu: usize, now: Time, clear: u8, set: u8) {
        self.cpus[cpu].change(now, clear, set);
    }

    /// collect_percpu_times: each CPU's state times since the last collection, weighted by its
    /// non-idle jiffies, into `total`.
    fn collect(&mut self, now: Time) {
        let mut deltas = [0u64; 2];
        let mut nonidle_total = 0u64;
        for c in &mut self.cpus {
            c.record_times(now);
            let mut times = [0u64; 3];
            for s in [SOME, FULL, NONIDLE] {
                // get_recent_times: u32 deltas in the kernel; a delta here spans at most one period.
                times[s] = c.times[s] - c.times_prev[s];
                c.times_prev[s] = c.times[s];
            }
            let nonidle = times[NONIDLE] / JIFFY_NS; // nsecs_to_jiffies
            nonidle_total += nonidle;
            for s in [SOME, FULL] {
                deltas[s] += times[s] * nonidle;
            }
        }
        for s in [SOME, FULL] {
            self.total[s] += deltas[s] / nonidle_total.max(1);
        }
    }

    /// psi_avgs_work at a PSI_FREQ boundary: collect, then update_averages (no missed periods:
    /// the work runs at every boundary here).
    pub fn tick(&mut self, now: Time) {
        self.collect(now);
        let period = now - self.avg_last_update;
        self.avg_last_update = now;
        for s in [SOME, FULL] {
            let sample = (self.total[s] - self.avg_total[s]).min(period);
            self.avg_total[s] += sample;
            // calc_avgs: pct = time * 100 / period, in fixed point.
            let pct = sample * 100 / period * FIXED_1;
            for (avg, &exp) in self.avg[s].iter_mut().zip(&EXP) {
                *avg = calc_load(*avg, exp, pct);
            }
        }
    }

    /// The pressure file at `now` (psi_show's total includes the time since the last
    /// collection; computed on a copy, so reading changes nothing).
    pub fn pressure(&self, now: Time) -> Pressure {
        let mut g = self.clone();
        g.collect(now);
        Pressure {
            total_us: [g.total[SOME] / 1000, g.total[FULL] / 1000],
            avg: [0, 1].map(|s| [0, 1, 2].map(|w| centi_percent(self.avg[s][w]))),
        }
    }
}

/// The machine's PSI: one group per memcg (index 0, the root, is the system), the tasks, and
/// the state changes not applied yet.
#[derive(Clone, Debug)]
pub struct Psi {
    pub(crate) groups: Vec<PsiGroup>,
    /// Per task: its CPU and the groups it counts in (its memcg and every ancestor).
    task_cpu: Vec<usize>,
    task_groups: Vec<Vec<u16>>,
    /// The last state reported per task and when, and the last state applied.
    reported: Vec<u8>,
    reported_at: Vec<Time>,
    applied: Vec<u8>,
    /// Per task, its reported changes not applied yet: (time, report number, state). A
    /// task's reports are in time order (`set`), so one queue per task, merged by (time,
    /// report number) when applied, orders them as one queue over all tasks would, at a
    /// fraction of the cost (appending is constant time; the merge takes runs of one task's
    /// changes at a time).
    pending: Vec<VecDeque<(Time, u64, u8)>>,
    npending: usize,
    seq: u64,
    next_tick: Time,
    /// The latest time [`Psi::advance`] was called with: every change before it counts.
    pub(crate) clock: Time,
    /// The latest time whose advance is noted but not done yet (0: none; a noted time 0 has
    /// nothing before it to apply).
    deferred: Time,
}

/// Queued changes beyond which a noted advance is done at once: keeps the queue (and each of
/// its operations) small when nothing reads for a long time.
const MAX_PENDING: usize = 1024;

impl Psi {
    /// `tasks`: per task, the groups it counts in (leaf first); task i runs on CPU i mod cpus.
    pub fn new(groups: usize, cpus: usize, tasks: Vec<Vec<u16>>) -> Psi {
        let cpus = cpus.max(1);
        let n = tasks.len();
        Psi {
            groups: vec![PsiGroup::new(cpus); groups],
            task_cpu: (0..n).map(|t| t % cpus).collect(),
            task_groups: tasks,
            reported: vec![0; n],
            reported_at: vec![0; n],
            applied: vec![0; n],
            pending: vec![VecDeque::new(); n],
            npending: 0,
            seq: 0,
            next_tick: PSI_PERIOD_NS,
            clock: 0,
            deferred: 0,
        }
    }

    /// Task `task` is in state `flags` (TSK_* bits) from `now` on. A report dated before the
    /// task's previous one (another thread acting on it, e.g. kswapd's OOM kill of a process
    /// whose slice ran ahead) takes effect at that previous report: a task's states stay in
    /// order.
    #[inline]
    pub fn set(&mut self, task: usize, now: Time, flags: u8) {
        if self.reported[task] == flags {
            return;
        }
        let now = now.max(self.reported_at[task]);
        // Before a noted advance: it applies every change before its time first, so it must
        // be done before this one is queued (rare: only a task acted on from another's
        // slice that ran behind).
        if now < self.deferred {
            self.apply();
        }
        self.reported[task] = flags;
        self.reported_at[task] = now;
        self.seq += 1;
        self.pending[task].push_back((now, self.seq, flags));
        self.npending += 1;
    }

    /// Every reported change before `until` counts, and the averaging runs at every boundary
    /// up to `until` (a change at a boundary comes after it: it starts there). Noted here,
    /// done by [`Psi::apply`] (see the module's comment).
    #[inline]
    pub fn advance(&mut self, until: Time) {
        self.clock = self.clock.max(until);
        self.deferred = self.deferred.max(until);
        if self.npending > MAX_PENDING {
            self.apply();
        }
    }

    /// Do the noted advances: apply every queued change before the latest noted time, in
    /// time order, with the averaging at every boundary up to it.
    fn apply(&mut self) {
        let until = std::mem::take(&mut self.deferred);
        loop {
            // The task whose first change comes first (by time, then report number), and the
            // first change of any other task: the first task's changes before that one go
            // in a row (a process's sleeps rarely interleave with kswapd's).
            let mut first: Option<(Time, u64, usize)> = None;
            let mut second: Option<(Time, u64)> = None;
            for (task, q) in self.pending.iter().enumerate() {
                let Some(&(t, seq, _)) = q.front().filter(|c| c.0 < until) else {
                    continue;
                };
                match first {
                    Some((ft, fseq, _)) if (ft, fseq) < (t, seq) => {
                        if second.is_none_or(|s| (t, seq) < s) {
                            second = Some((t, seq));
                        }
                    }
                    _ => {
                        second = first.map(|(ft, fseq, _)| (ft, fseq));
                        first = Some((t, seq, task));
                    }
                }
            }
            let Some((_, _, task)) = first else { break };
            while let Some(&(t, seq, flags)) = self.pending[task].front() {
                if t >= until || second.is_some_and(|s| s < (t, seq)) {
                    break;
                }
                self.tick_until(t);
                self.pending[task].pop_front();
                self.npending -= 1;
                let (old, cpu) = (self.applied[task], self.task_cpu[task]);
                for &g in &self.task_groups[task] {
                    self.groups[g as usize].change(cpu, t, old, flags);
                }
                self.applied[task] = flags;
            }
        }
        self.tick_until(until);
    }

    fn tick_until(&mut self, t: Time) {
        while self.next_tick <= t {
            for g in &mut self.groups {
                g.tick(self.next_tick);
            }
            self.next_tick += PSI_PERIOD_NS;
        }
    }

    /// Group `group`'s pressure file at `now`, every noted advance done (on a copy when some
    /// are left: reading changes nothing).
    pub fn pressure(&self, group: usize, now: Time) -> Pressure {
        if self.deferred == 0 {
            return self.groups[group].pressure(now);
        }
        let mut done = self.clone();
        done.apply();
        done.groups[group].pressure(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calc_load_matches_the_kernels_rounding() {
        // 100% for one period from 0: (0·1677 + 204800·371 + 2047) / 2048 = 37100.
        assert_eq!(calc_load(0, EXP[0], 100 * FIXED_1), 37100);
        assert_eq!(centi_percent(100 * FIXED_1), 10_000);
        assert_eq!(centi_percent(FIXED_1 / 2), 50);
    }

    /// The lazy advance gives what applying at every call gives, bit for bit: random reports
    /// from three tasks in two groups on two CPUs, some before the latest advance (late) and
    /// some advances going back in time, read at random points.
    #[test]
    fn lazy_advance_is_bit_identical_to_applying_at_every_call() {
        let mut rng = reclaimlab_workload::SplitMix64::new(7);
        let mut draw = |n: u64| rng.next_u64() % n;
        let states = [
            0,
            TSK_RUNNING,
            TSK_IOWAIT,
            TSK_MEMSTALL,
            TSK_RUNNING | TSK_MEMSTALL | TSK_MEMSTALL_RUNNING,
        ];
        let new = || Psi::new(2, 2, vec![vec![1, 0], vec![0], vec![1, 0]]);
        let (mut lazy, mut eager) = (new(), new());
        let (mut now, mut late, mut reads) = (0u64, 0, 0);
        for _ in 0..20_000 {
            match draw(10) {
                0..=5 => {
                    let (task, flags) = (draw(3) as usize, states[draw(5) as usize]);
                    // Mostly ahead of the clock (a slice running ahead); sometimes behind it.
                    let at = if draw(8) == 0 {
                        now.saturating_sub(draw(50_000_000))
                    } else {
                        now + draw(30_000_000)
                    };
                    late += u32::from(at < now);
                    lazy.set(task, at, flags);
                    eager.set(task, at, flags);
                }
                6..=8 => {
                    let until = if draw(10) == 0 {
                        now.saturating_sub(draw(10_000_000))
                    } else {
                        now + draw(20_000_000)
                    };
                    now = now.max(until);
                    lazy.advance(until);
                    eager.advance(until);
                    eager.apply();
                }
                _ => {
                    reads += 1;
                    for g in 0..2 {
                        assert_eq!(lazy.pressure(g, lazy.clock), eager.pressure(g, eager.clock));
                    }
                }
            }
        }
        assert!(late > 500 && reads > 1000 && now > 20 * PSI_PERIOD_NS, "the sequence covers late reports and many periods: {late} late, {reads} reads, {now} ns");
        assert!(
            eager.pressure(0, now).total_us[0] > 0,
            "some pressure was recorded"
        );
        lazy.apply();
        assert_eq!(lazy.groups[0].avg, eager.groups[0].avg);
        assert_eq!(lazy.groups[1].total, eager.groups[1].total);
    }

    #[test]
    fn one_task_always_stalled_is_full_pressure() {
        let mut p = Psi::new(1, 2, vec![vec![0]]);
        p.set(0, 0, TSK_RUNNING | TSK_MEMSTALL | TSK_MEMSTALL_RUNNING);
        p.advance(10 * PSI_PERIOD_NS);
        let r = p.pressure(0, 10 * PSI_PERIOD_NS);
        assert_eq!(r.total_us, [10 * PSI_PERIOD_NS / 1000; 2]);
    }
}
