//! Thin wrappers over the few system calls the runner needs.

use std::io;

/// `CLOCK_MONOTONIC` in nanoseconds (a vDSO call, about 20 ns).
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(rc, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until `CLOCK_MONOTONIC` reaches `deadline_ns` (absolute, so signals and oversleeping
/// of earlier phases do not accumulate).
pub fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000).min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: ts is valid; the remaining-time pointer may be null with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

/// Minor and major page faults of this process so far (`getrusage(RUSAGE_SELF)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    pub minflt: u64,
    pub majflt: u64,
}

impl Faults {
    pub fn since(self, earlier: Faults) -> Faults {
        Faults {
            minflt: self.minflt.saturating_sub(earlier.minflt),
            majflt: self.majflt.saturating_sub(earlier.majflt),
        }
    }
}

fn faults_of(who: libc::c_int) -> Faults {
    // SAFETY: rusage is plain old data; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(who, &mut ru) };
    debug_assert_eq!(rc, 0);
    Faults {
        minflt: ru.ru_minflt as u64,
        majflt: ru.ru_majflt as u64,
    }
}

/// The calling thread's scheduler times so far (`/proc/thread-self/schedstat`, CONFIG_SCHED_INFO):
/// ns on a CPU and ns runnable but waiting for one. The wait is what a busy host adds to a
/// phase's wall time (other tasks on the CPUs), which the lab reports so that times can be
/// compared at the speed the host gave the run (docs/lab.md). None without schedstat.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sched {
    pub cpu_ns: u64,
    pub run_delay_ns: u64,
}

impl Sched {
    pub fn since(self, earlier: Sched) -> Sched {
        Sched {
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            run_delay_ns: self.run_delay_ns.saturating_sub(earlier.run_delay_ns),
        }
    }
}

pub fn sched() -> Option<Sched> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut it = text.split_whitespace().map(|w| w.parse::<u64>().ok());
    Some(Sched {
        cpu_ns: it.next()??,
        run_delay_ns: it.next()??,
    })
}

/// Faults of the whole process.
pub fn faults() -> Faults {
    faults_of(libc::RUSAGE_SELF)
}

/// Faults of the calling thread only (for tests, which share a process with other tests).
pub fn thread_faults() -> Faults {
    faults_of(libc::RUSAGE_THREAD)
}

/// Makes sure SIGTERM ends the process: default disposition, not blocked. Both the disposition
/// "ignore" and the blocked mask survive `exec`, so a driver that ignores or blocks SIGTERM
/// itself would otherwise pass that on.
pub fn default_sigterm() {
    // SAFETY: plain signal-state calls on a fresh, single-threaded process.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// `mlockall(MCL_CURRENT)`: keeps what the runner has mapped so far (its code, heap, the page
/// tables of `mem::Prepared`) out of reclaim, so none of it shows up as faults in a phase. The
/// regions are mapped later and are not locked (no `MCL_FUTURE`).
pub fn lock_current() -> io::Result<()> {
    // SAFETY: no pointers involved.
    if unsafe { libc::mlockall(libc::MCL_CURRENT) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// include/uapi/linux/swap.h: swapon(2)'s flags carry a priority when SWAP_FLAG_PREFER is set.
const SWAP_FLAG_PREFER: libc::c_int = 0x8000;
const SWAP_FLAG_PRIO_MASK: libc::c_int = 0x7fff;
const SWAP_FLAG_PRIO_SHIFT: libc::c_int = 0;

/// swapon(2) of `path` at `priority` (0..=32767), what `swapon -p` does: the VM lab's guest
/// has busybox's swapon, which Debian builds without `-p` (FEATURE_SWAPON_PRI), and the
/// runner is the one static binary of ours in the guest.
pub fn swapon(path: &std::path::Path, priority: u16) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    if i32::from(priority) > SWAP_FLAG_PRIO_MASK {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("swap priority {priority} is above {SWAP_FLAG_PRIO_MASK}"),
        ));
    }
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path has a NUL byte"))?;
    let flags =
        SWAP_FLAG_PREFER | ((i32::from(priority) << SWAP_FLAG_PRIO_SHIFT) & SWAP_FLAG_PRIO_MASK);
    // SAFETY: c is a valid NUL-terminated path for the duration of the call.
    if unsafe { libc::swapon(c.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The selected mode of `/sys/kernel/mm/transparent_hugepage/enabled` ("always", "madvise",
/// "never"), if readable.
pub fn thp_mode() -> Option<String> {
    let s = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let start = s.find('[')? + 1;
    let end = start + s[start..].find(']')?;
    Some(s[start..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_until_reaches_the_deadline() {
        let t = now_ns();
        sleep_until(t + 2_000_000);
        assert!(now_ns() >= t + 2_000_000);
        // A deadline in the past returns at once.
        sleep_until(t);
    }
}
