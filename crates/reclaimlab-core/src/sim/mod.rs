//! Virtual time and the event queue.
//!
//! Time is integer nanoseconds. Events are ordered by (time, priority, sequence): ties at the
//! same time go by priority, then FIFO by insertion, so a run is a pure function of its inputs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub type Time = u64;

pub const NSEC_PER_USEC: u64 = 1_000;
pub const NSEC_PER_MSEC: u64 = 1_000_000;
pub const NSEC_PER_SEC: u64 = 1_000_000_000;
/// CONFIG_HZ of the target kernel (250): one jiffy is 4 ms.
pub const HZ: u64 = 250;
pub const JIFFY_NS: u64 = NSEC_PER_SEC / HZ;

/// The period, in jiffies, of a timer re-armed `timeout` jiffies ahead each time it fires
/// (a delayed work that queues itself again from its handler), as the timer wheel of
/// kernel/time/timer.c (calc_wheel_index / calc_index, 4.8+) makes it: a timeout of 63 jiffies
/// or more lands in a level whose buckets are 8^level jiffies wide (LVL_CLK_SHIFT 3, 64
/// buckets a level), and the timer fires at the end of its bucket, one bucket past the
/// expiry rounded down. Re-armed from a bucket boundary, the period is that bucket end:
/// 500 jiffies (2 s at HZ 250) fire every 504 (2.016 s, measured on the lab host:
/// results/validation/oom-edge/). Simplified: the handler runs within the jiffy its timer
/// fired in (no workqueue latency), and a deferrable timer's wait for a busy CPU is left out.
pub const fn timer_wheel_period(timeout: u64) -> u64 {
    const LVL_CLK_SHIFT: u32 = 3;
    const LVL_SIZE: u64 = 64;
    let mut lvl = 0;
    // LVL_START(lvl + 1) = (LVL_SIZE - 1) << (lvl * LVL_CLK_SHIFT): the first delta too far
    // for level lvl.
    while timeout >= (LVL_SIZE - 1) << (lvl * LVL_CLK_SHIFT) {
        lvl += 1;
    }
    if lvl == 0 {
        return timeout;
    }
    let shift = lvl * LVL_CLK_SHIFT;
    ((timeout >> shift) + 1) << shift
}
/// No clock goes past this (2^62 ns, 146 years): [`later`] and [`Ctx::cpu`] clamp to it, so the
/// sum of two times never overflows u64. The engine stops every run at
/// [`crate::limits::TIME_HORIZON_NS`], far below.
pub const TIME_CEILING_NS: Time = 1 << 62;

/// `t + d`, clamped to [`TIME_CEILING_NS`]: for every time computed from a scenario value (a
/// duration, latency or transfer) that the bounds alone do not keep small.
#[inline]
pub fn later(t: Time, d: u64) -> Time {
    t.saturating_add(d).min(TIME_CEILING_NS)
}

/// What happens when an event fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EventKind {
    /// Swap device `0` completes every request due by now.
    DeviceDone(u16),
    /// kswapd runs one balance_pgdat priority pass.
    Kswapd,
    /// The flusher of filesystem `0` runs one writeback chunk (wb_workfn).
    Flusher(u16),
    /// The zswap shrink worker runs one step.
    ZswapWorker,
    /// kcompactd's periodic wakeup (proactive compaction; mm/phys.rs kcompactd_timer).
    Kcompactd,
    /// Process `0` runs for up to one quantum.
    Process(u32),
}

impl EventKind {
    /// Completions first (they make pages reclaimable), then kernel threads, then user tasks.
    fn priority(self) -> u8 {
        match self {
            EventKind::DeviceDone(_) => 0,
            EventKind::Kswapd | EventKind::Flusher(_) | EventKind::Kcompactd => 1,
            EventKind::ZswapWorker => 2,
            EventKind::Process(_) => 3,
        }
    }
}

// The running thread's clock: every subsystem's narrow context starts with it.

/// Who is running kernel code, and on whose behalf: decides which counters move and whether
/// allocations may dip into reserves (PF_MEMALLOC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Actor {
    Process(u32),
    Kswapd,
    ZswapWorker,
    /// A filesystem's flusher (writeback worker).
    Flusher,
}

/// The running thread's clock and state while it executes kernel code. CPU work advances
/// `now` by its cost times the CPU-contention factor the engine computed for this run.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    pub now: Time,
    pub actor: Actor,
    /// PF_MEMALLOC: inside reclaim, allocations ignore watermarks and memcg charges are forced.
    pub memalloc: bool,
    /// CPU-time multiplier ×1024 (1024 = a core of its own).
    pub slowdown: u64,
    /// When the thread last stopped waiting (off CPU): if that is `now`, it is blocked.
    pub waited_until: Time,
    /// current->in_memstall: inside a psi_memstall_enter/leave section (crate::psi).
    pub memstall: bool,
}

impl Ctx {
    pub fn new(now: Time, actor: Actor, slowdown: u64) -> Ctx {
        Ctx {
            now,
            actor,
            memalloc: false,
            slowdown,
            waited_until: 0,
            memstall: false,
        }
    }

    #[inline]
    pub fn cpu(&mut self, ns: u64) {
        // u128: a cost of up to 10^12 ns times a slowdown of up to 2^16 processes × 1024.
        let d = (ns as u128 * self.slowdown as u128 / 1024).min(TIME_CEILING_NS as u128) as u64;
        self.now = later(self.now, d);
    }

    /// Wait (off CPU) until `t`.
    pub fn wait_until(&mut self, t: Time) {
        if t > self.now {
            self.now = t;
            self.waited_until = t;
        }
    }

    /// The thread ended its slice waiting (IO, throttling), not computing.
    pub fn blocked(&self) -> bool {
        self.waited_until == self.now && self.now > 0
    }
}

#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<(Time, u8, u64, EventKind)>>,
    seq: u64,
}

impl EventQueue {
    pub fn push(&mut self, time: Time, kind: EventKind) {
        self.seq += 1;
        self.heap
            .push(Reverse((time, kind.priority(), self.seq, kind)));
    }

    pub fn pop(&mut self) -> Option<(Time, EventKind)> {
        self.heap.pop().map(|Reverse((t, _, _, k))| (t, k))
    }

    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|Reverse((t, ..))| *t)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timer_wheel_rounds_a_timeout_up_to_its_buckets_end() {
        // Level 0 (under 63 jiffies) is exact; 63..504 fire at the end of an 8-jiffy bucket,
        // 504..4032 of a 64-jiffy one: FLUSH_TIME at HZ 250 (500) every 504 jiffies, the
        // 2.016 s measured on the lab host; at HZ 1000 (2000) every 2048.
        let periods = [1, 62, 63, 64, 500, 503, 504, 2000].map(timer_wheel_period);
        assert_eq!(periods, [1, 62, 64, 72, 504, 504, 512, 2048]);
    }

    #[test]
    fn ties_break_by_priority_then_fifo() {
        let mut q = EventQueue::default();
        q.push(10, EventKind::Process(1));
        q.push(10, EventKind::Process(0));
        q.push(10, EventKind::Kswapd);
        q.push(5, EventKind::Process(7));
        assert_eq!(q.pop(), Some((5, EventKind::Process(7))));
        assert_eq!(q.pop(), Some((10, EventKind::Kswapd)));
        assert_eq!(q.pop(), Some((10, EventKind::Process(1))));
        assert_eq!(q.pop(), Some((10, EventKind::Process(0))));
        assert_eq!(q.pop(), None);
    }
}
