//! The kernel paths' side of PSI and latency recording: psi_memstall_enter/leave, a task going
//! to sleep and waking, and the latency each path records (crate::psi, crate::latency;
//! docs/model/latency.md).

use super::{Actor, Ctx, Mm};
use crate::latency::Kind;
use crate::psi::{TSK_IOWAIT, TSK_MEMSTALL, TSK_MEMSTALL_RUNNING, TSK_RUNNING};
use crate::sim::Time;

/// A task on a CPU: TSK_RUNNING, plus TSK_MEMSTALL and TSK_MEMSTALL_RUNNING inside a memstall
/// section.
#[inline]
pub(crate) fn running_flags(memstall: bool) -> u8 {
    if memstall {
        TSK_RUNNING | TSK_MEMSTALL | TSK_MEMSTALL_RUNNING
    } else {
        TSK_RUNNING
    }
}

/// A task asleep: psi_dequeue keeps TSK_MEMSTALL while in a memstall section; io_schedule
/// sleeps outside one are TSK_IOWAIT.
#[inline]
fn sleeping_flags(memstall: bool) -> u8 {
    if memstall {
        TSK_MEMSTALL
    } else {
        TSK_IOWAIT
    }
}

impl Mm {
    /// The PSI task of the running thread: processes, then kswapd; other kernel threads are
    /// not tracked.
    #[inline]
    pub(crate) fn psi_task(&self, ctx: &Ctx) -> Option<usize> {
        match ctx.actor {
            Actor::Process(p) => Some(p as usize),
            Actor::Kswapd => Some(self.over_high.len()),
            _ => None,
        }
    }

    /// Task `task` is in state `flags` from `now` on.
    pub(crate) fn psi_set(&mut self, task: usize, now: Time, flags: u8) {
        self.psi.set(task, now, flags);
    }

    /// psi_memstall_enter: returns the previous in_memstall, for [`Mm::psi_memstall_leave`]
    /// (nested sections leave the state alone, as the kernel's pflags do).
    pub(crate) fn psi_memstall_enter(&mut self, ctx: &mut Ctx) -> bool {
        let saved = ctx.memstall;
        if !saved {
            ctx.memstall = true;
            if let Some(t) = self.psi_task(ctx) {
                self.psi.set(t, ctx.now, running_flags(true));
            }
        }
        saved
    }

    pub(crate) fn psi_memstall_leave(&mut self, ctx: &mut Ctx, saved: bool) {
        if !saved && ctx.memstall {
            ctx.memstall = false;
            if let Some(t) = self.psi_task(ctx) {
                self.psi.set(t, ctx.now, running_flags(false));
            }
        }
    }

    /// The thread sleeps (off CPU) until `t`: the one way kernel paths wait, so PSI sees it.
    pub(crate) fn psi_sleep(&mut self, ctx: &mut Ctx, t: Time) {
        if t <= ctx.now {
            return;
        }
        let start = ctx.now;
        ctx.wait_until(t);
        self.psi_slept(ctx, start);
    }

    /// The thread slept from `start` until `ctx.waited_until` (a wait inside the block layer).
    pub(crate) fn psi_slept(&mut self, ctx: &Ctx, start: Time) {
        if let Some(task) = self.psi_task(ctx) {
            if ctx.waited_until > start {
                self.psi.set(task, start, sleeping_flags(ctx.memstall));
                self.psi
                    .set(task, ctx.waited_until, running_flags(ctx.memstall));
            }
        }
    }

    /// Record a latency of the running process (kernel threads record none).
    #[inline]
    pub(crate) fn latency(&mut self, ctx: &Ctx, kind: Kind, ns: u64) {
        if let Actor::Process(p) = ctx.actor {
            self.lat.current[p as usize].record(kind, ns);
        }
    }
}

impl Mm {
    /// /proc/pressure/memory (`pressure.memory.*`) and, on cgroup v2, each cgroup's
    /// memory.pressure (`memcg[<path>].memory.pressure.*`) as of the last PSI advance: totals
    /// in µs, averages in hundredths of a percent (psi_show's two decimals).
    pub(crate) fn export_psi(&self, out: &mut Vec<(String, u64)>) {
        let now = self.psi.clock;
        let groups = if self.cgroup_v2 { self.memcgs.len() } else { 0 };
        let mut put = |pre: &str, g: usize| {
            let p = self.psi.pressure(g, now);
            for (s, name) in ["some", "full"].iter().enumerate() {
                out.push((format!("{pre}{name}.total"), p.total_us[s]));
                for (w, win) in ["avg10", "avg60", "avg300"].iter().enumerate() {
                    out.push((format!("{pre}{name}.{win}"), p.avg[s][w]));
                }
            }
        };
        put("pressure.memory.", 0);
        for g in 0..groups {
            put(
                &format!("memcg[{}].memory.pressure.", self.memcgs[g].path),
                g,
            );
        }
    }
}
