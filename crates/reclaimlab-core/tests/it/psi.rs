//! Memory PSI on hand-built stall timelines: totals and avg10/60/300 against the kernel's
//! formulas (kernel/sched/psi.c calc_avgs, include/linux/sched/loadavg.h calc_load), written
//! out again here from the kernel's definitions rather than taken from the module under test.

use reclaimlab_core::psi::{
    Psi, PSI_PERIOD_NS, TSK_IOWAIT, TSK_MEMSTALL, TSK_MEMSTALL_RUNNING, TSK_RUNNING,
};

const S: u64 = 1_000_000_000;
const STALLED: u8 = TSK_RUNNING | TSK_MEMSTALL | TSK_MEMSTALL_RUNNING;

/// The kernel's averaging of per-period stall samples (ns): calc_avgs for each PSI_FREQ period,
/// as psi_show prints it (hundredths of a percent), for the 10 s, 60 s and 300 s windows.
fn kernel_avgs(samples: &[u64]) -> [u64; 3] {
    const FIXED_1: u64 = 2048;
    let exp = [1677u64, 1981, 2034];
    let mut avg = [0u64; 3];
    for &sample in samples {
        let pct = sample * 100 / PSI_PERIOD_NS * FIXED_1;
        for w in 0..3 {
            let mut new = avg[w] * exp[w] + pct * (FIXED_1 - exp[w]);
            if pct >= avg[w] {
                new += FIXED_1 - 1;
            }
            avg[w] = new / FIXED_1;
        }
    }
    avg.map(|a| (a >> 11) * 100 + (((a & 2047) * 100) >> 11))
}

/// Stall time of the interval [a, b) in each period up to `periods`.
fn per_period(a: u64, b: u64, periods: u64) -> Vec<u64> {
    (0..periods)
        .map(|k| {
            let (lo, hi) = (k * PSI_PERIOD_NS, (k + 1) * PSI_PERIOD_NS);
            b.min(hi).saturating_sub(a.max(lo))
        })
        .collect()
}

#[test]
fn one_task_stalled_half_of_ten_seconds() {
    // One task on a CPU for 10 s, in reclaim (memstall) for the first 5 s.
    let mut p = Psi::new(1, 1, vec![vec![0]]);
    p.set(0, 0, STALLED);
    p.set(0, 5 * S, TSK_RUNNING);
    let end = 5 * PSI_PERIOD_NS; // the fifth averaging, just past 10 s
    p.advance(end);
    let r = p.pressure(0, end);
    assert_eq!(
        r.total_us,
        [5_000_000, 5_000_000],
        "some and full: the task is alone on its CPU"
    );
    let expected = kernel_avgs(&per_period(0, 5 * S, 5));
    assert_eq!(r.avg[0], expected);
    assert_eq!(r.avg[1], expected);
    // The fixed-point decay stays close to the exact exponential: 100% for 4.008 s, 49.5%
    // for 2.004 s, then 4.008 s of nothing; ±0.5 percentage points.
    let exact = |w: f64| {
        let d = (-(PSI_PERIOD_NS as f64 / 1e9) / w).exp();
        let pct = [100.0, 100.0, 992.0 / 20.04, 0.0, 0.0];
        pct.iter().fold(0.0, |a, &x| a * d + x * (1.0 - d))
    };
    for (w, win) in [10.0, 60.0, 300.0].iter().enumerate() {
        assert!(
            (r.avg[0][w] as f64 / 100.0 - exact(*win)).abs() < 0.5,
            "avg{win}: {} vs {}",
            r.avg[0][w],
            exact(*win)
        );
    }
}

#[test]
fn full_needs_every_running_task_stalled() {
    // Two tasks on one CPU. A reclaims for 4 s; B runs for the first 2 s, then waits for IO
    // for 1 s, then sleeps (idle). `some` is A's 4 s; `full` only while B does not run:
    // [2 s, 4 s) (an IO wait is no productive running).
    let mut p = Psi::new(1, 1, vec![vec![0], vec![0]]);
    p.set(0, 0, STALLED);
    p.set(1, 0, TSK_RUNNING);
    p.set(1, 2 * S, TSK_IOWAIT);
    p.set(1, 3 * S, 0);
    p.set(0, 4 * S, TSK_RUNNING);
    p.set(0, 6 * S, 0);
    let end = 4 * PSI_PERIOD_NS;
    p.advance(end);
    let r = p.pressure(0, end);
    assert_eq!(r.total_us, [4_000_000, 2_000_000]);
    assert_eq!(r.avg[0], kernel_avgs(&per_period(0, 4 * S, 4)));
    assert_eq!(r.avg[1], kernel_avgs(&per_period(2 * S, 4 * S, 4)));
    // A sleeping in memstall (TSK_MEMSTALL alone, e.g. the memory.high penalty) while B runs
    // is `some` only; once B stops it is `full`.
    let mut p = Psi::new(1, 1, vec![vec![0], vec![0]]);
    p.set(0, 0, TSK_MEMSTALL);
    p.set(1, 0, TSK_RUNNING);
    p.set(1, S, 0);
    p.set(0, 2 * S, 0);
    p.advance(PSI_PERIOD_NS);
    assert_eq!(
        p.pressure(0, PSI_PERIOD_NS).total_us,
        [2_000_000, 1_000_000]
    );
}

#[test]
fn cpus_are_weighted_by_their_non_idle_time() {
    // A stalls for the whole time on CPU 0 while B runs on CPU 1: each CPU is non-idle all
    // the time, so the group's stall is the mean of the two: 50% some and 50% full (CPU 0 has
    // no productive task). With B idle, CPU 1 weighs nothing: 100%.
    let mut p = Psi::new(1, 2, vec![vec![0], vec![0]]);
    p.set(0, 0, STALLED);
    p.set(1, 0, TSK_RUNNING);
    p.advance(3 * PSI_PERIOD_NS);
    let r = p.pressure(0, 3 * PSI_PERIOD_NS);
    assert_eq!(r.total_us, [3 * PSI_PERIOD_NS / 2 / 1000; 2]);
    assert_eq!(r.avg[0], kernel_avgs(&[PSI_PERIOD_NS / 2; 3]));
    let mut p = Psi::new(1, 2, vec![vec![0], vec![0]]);
    p.set(0, 0, STALLED);
    p.advance(3 * PSI_PERIOD_NS);
    assert_eq!(
        p.pressure(0, 3 * PSI_PERIOD_NS).total_us,
        [3 * PSI_PERIOD_NS / 1000; 2]
    );
}

#[test]
fn groups_see_their_own_tasks_and_changes_apply_in_time_order() {
    // Group 1 (a cgroup) holds task 0; the root (group 0) holds both. Task 1's stall counts
    // in the root only. Changes reported out of time order across tasks (as events running
    // ahead report them) give the same result as in order.
    let build = |order: &[(usize, u64, u8)]| {
        let mut p = Psi::new(2, 2, vec![vec![1, 0], vec![0]]);
        for &(t, at, f) in order {
            p.set(t, at, f);
        }
        p.advance(2 * PSI_PERIOD_NS);
        (
            p.pressure(0, 2 * PSI_PERIOD_NS),
            p.pressure(1, 2 * PSI_PERIOD_NS),
        )
    };
    let a = build(&[
        (0, 0, STALLED),
        (0, S, TSK_RUNNING),
        (1, 0, TSK_RUNNING),
        (1, S / 2, STALLED),
        (1, 3 * S, TSK_RUNNING),
    ]);
    let b = build(&[
        (1, 0, TSK_RUNNING),
        (1, S / 2, STALLED),
        (1, 3 * S, TSK_RUNNING),
        (0, 0, STALLED),
        (0, S, TSK_RUNNING),
    ]);
    assert_eq!(a, b);
    let (root, cg) = a;
    assert_eq!(cg.total_us[0], 1_000_000);
    // Root: CPU 0 stalled [0, 1 s), CPU 1 stalled [0.5 s, 3 s); both busy throughout.
    assert_eq!(root.total_us[0], (S + 5 * S / 2) / 2 / 1000);
}

#[test]
fn a_report_dated_before_the_tasks_last_takes_effect_after_it() {
    // A process's slice ran ahead to 3 s (running); kswapd, at 1 s, kills it: the kill lands
    // at 3 s, so the task is not left running for ever, and task 1's stall at [4 s, 5 s) on
    // the same CPU is `full` (no productive task left), not `some` only.
    let mut p = Psi::new(1, 1, vec![vec![0], vec![0]]);
    p.set(0, 0, TSK_RUNNING);
    p.set(0, 2 * S, STALLED);
    p.set(0, 3 * S, TSK_RUNNING);
    p.set(0, S, 0);
    p.set(1, 4 * S, STALLED);
    p.set(1, 5 * S, 0);
    p.advance(3 * PSI_PERIOD_NS);
    assert_eq!(
        p.pressure(0, 3 * PSI_PERIOD_NS).total_us,
        [2_000_000, 2_000_000]
    );
}
