//! memcg statistics and their flushes (mm/memcontrol.c: memcg_rstat_updated,
//! mem_cgroup_flush_stats, mem_cgroup_flush_stats_ratelimited, flush_memcg_stats_dwork,
//! do_flush_stats / __mem_cgroup_flush_stats; read in 6.12, checked against a 6.18-era copy,
//! where the only differences are a tracepoint, `css_rstat_flush` for `cgroup_rstat_flush`
//! and an early stop in memcg_rstat_updated's walk once an ancestor is already flushable).
//!
//! `lruvec_page_state` does not count: it returns what the last rstat flush folded in. The
//! decisions that read it (inactive_is_low, workingset_test_recent, lru_note_cost,
//! prepare_scan_control's refault snapshot) act on sizes as old as the last flush of their
//! memcg. The kernel flushes:
//!
//! 1. every FLUSH_TIME (2 s, which the timer wheel makes 2.016 s), `flush_memcg_stats_dwork`:
//!    the whole tree, forced (it ignores the update threshold), and `flush_last_time` is set
//!    (a flush of the root);
//! 2. on every read of `memory.stat` (memory_stat_show on v2, memcg1_stat_format on v1) and
//!    `memory.numa_stat`: `mem_cgroup_flush_stats(memcg)`, the read memcg's subtree, only when
//!    that memcg has more than MEMCG_CHARGE_BATCH × num_online_cpus() statistic updates
//!    pending (`memcg_vmstats_needs_flush`; in 6.12 and 6.18 per memcg, counted in it and in
//!    every ancestor, reset in each memcg a flush covers; 6.1: one global count, whole tree);
//! 3. from reclaim (prepare_scan_control) and refault (workingset_test_recent):
//!    `mem_cgroup_flush_stats_ratelimited`, only when the periodic flusher is a whole period
//!    late (now after flush_last_time + 2 × FLUSH_TIME), then as 2.;
//! 4. forced flushes of one subtree (do_flush_stats): obj_cgroup_may_zswap, zswap_current_read.
//!
//! Modelled: all four, with the kernel's flusher at `dwork_phase_ns` + k × FLUSHER_PERIOD and the
//! reader (the lab's sampler) reading every scenario cgroup's memory.stat in pre-order at
//! k × `read_ns` (config.rs `StatsFlush`). Timers are in simulated time, checked before each
//! event (the state at a flush time is the state the last event before it left). The 6.1
//! preset's `memcg.reclaim_stats_flush` adds 6.1's mem_cgroup_flush_stats() at the start of
//! every shrink_node (the whole tree, thresholded).
//!
//! Simplified: the update count is the number of LRU list additions and removals of folios
//! (each is a __mod_lruvec_state of NR_LRU_BASE + lru in the kernel); the kernel also counts
//! every other memcg statistic and event (faults, PGPGIN/OUT, swap and workingset counters),
//! so it crosses the threshold sooner; and its per-CPU batching (an update reaches the memcg's
//! count in steps of MEMCG_CHARGE_BATCH per CPU) is left out. Under reclaim either crosses
//! the 128 of a 2-CPU machine within a few hundred microseconds, so the threshold decides
//! only for reads during idle stretches, where stale and live sizes barely differ. The
//! flusher's period does not stretch by the time a flush takes or by workqueue latency
//! (queue_delayed_work after the flush; a deferrable timer), and nothing flushes on
//! `memory.numa_stat` reads or on other readers of the host (a monitoring agent reading the
//! root's memory.stat would flush everything). The kernel's flusher has run since boot: its
//! phase against a run's start is not known, and a scenario states one.

use super::memcg::MEMCG_CHARGE_BATCH;
use super::Mm;
use crate::config::StatsFlush;
use crate::sim::{timer_wheel_period, HZ, JIFFY_NS};

/// FLUSH_TIME (mm/memcontrol.c; 6.1, 6.12, 6.18): 2 × HZ, the delay the periodic flusher
/// queues itself with, and what mem_cgroup_flush_stats_ratelimited counts its lateness in.
pub const FLUSH_TIME_NS: u64 = 2 * HZ * JIFFY_NS;

/// The periodic flusher's actual period: flush_memcg_stats_dwork queues itself FLUSH_TIME
/// ahead from its own run, and the timer wheel fires that at the end of its 8-jiffy bucket,
/// 504 jiffies = 2.016 s at HZ 250 ([`crate::sim::timer_wheel_period`]). Against the lab's
/// reads every second the kernel's flusher so drifts 16 ms a cycle, through every phase of
/// a long run (measured on the lab host, 2.016 s in 7 of 8 intervals:
/// results/validation/oom-edge/, docs/model/memcg.md).
pub const FLUSHER_PERIOD_NS: u64 = timer_wheel_period(2 * HZ) * JIFFY_NS;

/// The flush schedule and its state.
#[derive(Default)]
pub struct StatsFlushState {
    /// The configuration (None: decisions read live sizes).
    pub cfg: Option<StatsFlush>,
    /// memcg_vmstats_needs_flush's threshold: MEMCG_CHARGE_BATCH × num_online_cpus().
    pub threshold: u64,
    /// The next run of flush_memcg_stats_dwork and the next read, ns (u64::MAX: none).
    pub next_dwork: u64,
    pub next_read: u64,
    /// flush_last_time: the last flush of the root (the periodic flusher's).
    pub flush_last_time: u64,
    /// The time of the event being processed (the ratelimited flushes' "now").
    pub now: u64,
}

impl StatsFlushState {
    pub fn new(cfg: Option<StatsFlush>, cpus: u32) -> StatsFlushState {
        let (next_dwork, next_read) = match &cfg {
            Some(f) => (
                f.dwork_phase_ns.unwrap_or(u64::MAX),
                match f.read_ns {
                    Some(r) if r > 0 => 0,
                    _ => u64::MAX,
                },
            ),
            None => (u64::MAX, u64::MAX),
        };
        StatsFlushState {
            cfg,
            threshold: MEMCG_CHARGE_BATCH * cpus as u64,
            next_dwork,
            next_read,
            flush_last_time: 0,
            now: 0,
        }
    }

    fn live(&self) -> bool {
        self.cfg.is_none()
    }
}

/// The first k × period + phase strictly after `t` (period > 0, phase ≤ t).
fn next_after(t: u64, phase: u64, period: u64) -> u64 {
    phase + ((t - phase) / period + 1) * period
}

impl Mm {
    /// lruvec_page_state(lruvec, NR_LRU_BASE + which): the memcg's hierarchical LRU size *as of
    /// the last flush of its statistics*, not now (see the module comment). Live sizes
    /// without a flush model. Folios still in an lru_add batch are in neither (the statistics
    /// count a folio when lruvec_add_folio puts it on its list).
    pub fn lru_size_stat(&self, m: u16, which: u8) -> u64 {
        if self.stats.live() {
            self.lru_size_tree_added(m, which)
        } else {
            self.memcgs[m as usize].flushed_lru[which as usize - 1]
        }
    }

    /// lruvec_page_state(lruvec, WORKINGSET_ACTIVATE_FILE), as of the last flush.
    pub fn workingset_activate_file_stat(&self, m: u16) -> u64 {
        if self.stats.live() {
            self.workingset_activate_file_tree(m)
        } else {
            self.memcgs[m as usize].flushed_workingset_activate_file
        }
    }

    /// lruvec_page_state(lruvec, WORKINGSET_ACTIVATE_ANON), as of the last flush.
    pub fn workingset_activate_stat(&self, m: u16) -> u64 {
        if self.stats.live() {
            self.workingset_activate_tree(m)
        } else {
            self.memcgs[m as usize].flushed_workingset_activate
        }
    }

    /// memcg_rstat_updated: `n` statistic updates in memcg `m`. The kernel counts them in `m`
    /// and in every ancestor at once; here they wait in `m`'s own count until the next flush
    /// decision adds them up the tree (`rstat_propagate`): the same counts whenever they are
    /// read, one addition per LRU operation.
    pub fn memcg_rstat_updated(&mut self, m: u16, n: u64) {
        self.memcgs[m as usize].stats_updates_own += n;
    }

    /// The own counts of every memcg added to it and its ancestors (see memcg_rstat_updated).
    fn rstat_propagate(&mut self) {
        for m in 0..self.memcgs.len() {
            let n = std::mem::take(&mut self.memcgs[m].stats_updates_own);
            if n == 0 {
                continue;
            }
            let mut c = Some(m as u16);
            while let Some(i) = c {
                let mc = &mut self.memcgs[i as usize];
                mc.stats_updates += n;
                c = mc.parent;
            }
        }
    }

    /// The flushes due by `t`, before the event at `t` runs: the periodic flusher
    /// (flush_memcg_stats_dwork) and the reader's memory.stat reads. Several missed times
    /// collapse into one (nothing changed in between).
    pub fn flush_memcg_stats_until(&mut self, t: u64) {
        self.stats.now = t;
        let Some(cfg) = &self.stats.cfg else { return };
        let (phase, read_ns) = (cfg.dwork_phase_ns, cfg.read_ns.unwrap_or(0));
        if t >= self.stats.next_dwork {
            let phase = phase.expect("a dwork time is set only with a phase");
            // flush_memcg_stats_dwork: __mem_cgroup_flush_stats(root_mem_cgroup, force).
            let last = t - (t - phase) % FLUSHER_PERIOD_NS;
            self.do_flush_stats(0);
            self.stats.flush_last_time = last;
            self.stats.next_dwork = next_after(t, phase, FLUSHER_PERIOD_NS);
        }
        if t >= self.stats.next_read {
            // The reader opens memory.stat of each cgroup in turn (pre-order, the scenario's
            // root first): memcg1_stat_format / memory_stat_show → mem_cgroup_flush_stats.
            for m in 0..self.memcgs.len() as u16 {
                self.mem_cgroup_flush_stats(m);
            }
            self.stats.next_read = next_after(t, 0, read_ns);
        }
    }

    /// mem_cgroup_flush_stats(memcg): flush `m`'s subtree if it has enough updates pending
    /// (memcg_vmstats_needs_flush). A read of memory.stat; 6.1's shrink_node (for the root).
    pub fn mem_cgroup_flush_stats(&mut self, m: u16) {
        if self.stats.live() {
            return;
        }
        self.rstat_propagate();
        if self.memcgs[m as usize].stats_updates > self.stats.threshold {
            self.do_flush_stats(m);
        }
    }

    /// mem_cgroup_flush_stats_ratelimited(memcg): only when the periodic flusher is a whole
    /// FLUSH_TIME late (in the model only when there is none: see the module comment).
    pub fn mem_cgroup_flush_stats_ratelimited(&mut self, m: u16) {
        if self.stats.live() {
            return;
        }
        if self.stats.now > self.stats.flush_last_time + 2 * FLUSH_TIME_NS {
            self.mem_cgroup_flush_stats(m);
        }
    }

    /// do_flush_stats(memcg) → css_rstat_flush: the statistics of `m` and its descendants are
    /// brought up to date now and their pending-update counts reset (the periodic flush keeps
    /// its schedule). Forced: obj_cgroup_may_zswap, zswap_current_read and the periodic
    /// flusher (which also sets flush_last_time, as a flush of the root).
    pub fn flush_memcg_subtree(&mut self, m: u16) {
        if self.stats.live() {
            return;
        }
        self.do_flush_stats(m);
    }

    fn do_flush_stats(&mut self, m: u16) {
        // The counts the flush resets must hold every update so far (the ancestors' keep them).
        self.rstat_propagate();
        for c in m..self.memcgs[m as usize].subtree_end {
            self.flush_memcg_stats_one(c);
        }
    }

    /// The subtree's folios on list `which`, without those an lru_add batch still holds.
    /// (lru_size_tree less lru_batched_tree, in one walk of the subtree: workingset_refault
    /// asks for up to four lists on every refault.)
    fn lru_size_tree_added(&self, m: u16, which: u8) -> u64 {
        let end = self.memcgs[m as usize].subtree_end;
        let (mut size, mut batched) = (0u64, 0u64);
        for c in &self.memcgs[m as usize..end as usize] {
            size += c.nr_lru(which);
            batched += c.lru_batched[which as usize - 1];
        }
        size.saturating_sub(batched)
    }

    fn flush_memcg_stats_one(&mut self, m: u16) {
        let lru = [1u8, 2, 3, 4].map(|l| self.lru_size_tree_added(m, l));
        let activate = self.workingset_activate_tree(m);
        let activate_file = self.workingset_activate_file_tree(m);
        let mc = &mut self.memcgs[m as usize];
        mc.flushed_lru = lru;
        mc.flushed_workingset_activate = activate;
        mc.flushed_workingset_activate_file = activate_file;
        mc.stats_updates = 0;
    }
}
