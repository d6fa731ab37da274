//! The phase loop: the simulator's `run_process` / `start_phase`, in real time.
//!
//! * Each phase's accesses come from `AccessGen` seeded with `stream(seed, Access, process,
//!   phase)` ([`Plan::access_gen`]), exactly as in the simulator.
//! * Fill: every access stores the page's full bytes. Sequential, Random: every access touches
//!   byte 0 of the page ([`Memory::touch`]).
//! * Random with `duration_ns`: the clock is read before the first access and then every
//!   [`DURATION_CHECK_EVERY`] accesses; the phase ends at the first check at or past
//!   `start + duration` (the simulator checks before every access).
//! * Read: one read(2) of the page per access; Write: one write(2) of the page's bytes per
//!   access (and fsync(2) per `fsync_bytes`); Mmap: a load or store of byte 0 through the
//!   file's shared mapping ([`Memory::touch`]). See [`crate::file`].
//! * Sleep: until `start + duration` on `CLOCK_MONOTONIC`. Exit: release all memory, report the
//!   phase, stop (later phases never run, as in the simulator).

use std::io;

use reclaimlab_workload::{Access, AccessGen, Phase};

use crate::cgroup::{self, WriteOutcome};
use crate::config::Plan;
use crate::sys::{self, Faults, Sched};

/// How often a duration-bound Random phase reads the clock, in accesses.
pub const DURATION_CHECK_EVERY: u64 = 1024;

/// What an access does to memory: [`crate::RealMemory`] or, for `--dry-run`, [`crate::NullMemory`].
pub trait Memory {
    /// A Fill phase's access: store the page's full content.
    fn fill(&mut self, region: u32, page: u64);
    /// A Sequential or Random phase's access: read byte 0, or write it with its own value.
    fn touch(&mut self, region: u32, page: u64, write: bool);
    /// A Fill phase over `region` completed: every page of it holds its content now.
    fn filled(&mut self, region: u32);
    /// Exit: unmap everything (and close the files: their pages stay cached, as in the
    /// simulator).
    fn release(&mut self);
    /// A Read phase's access: read(2) of the page of a file region.
    fn file_read(&mut self, region: u32, page: u64) -> io::Result<()>;
    /// A Write phase's access: write(2) of the page's bytes to a file region, then fsync(2)
    /// when the phase's bytes written cross a multiple of `fsync_bytes`.
    fn file_write(&mut self, region: u32, page: u64, fsync_bytes: Option<u64>) -> io::Result<()>;
    /// A Write phase over `region` starts (its byte count for `fsync_bytes` restarts).
    fn start_write_phase(&mut self, region: u32);
    /// A create_files phase's file: create file region `region`, write every page, fsync(2)
    /// it with `fsync`, close it. Returns the pages written.
    fn create_file(&mut self, region: u32, fsync: bool) -> io::Result<u64>;
    /// The cgroup v2 directory the cgroup phases write to (the process's own); None: they
    /// write nothing (`--dry-run`).
    fn cgroup_dir(&self) -> io::Result<Option<std::path::PathBuf>> {
        Ok(None)
    }
    /// Writes `value` to the sysfs file `path` (a zram_write phase); nothing by default
    /// (`--dry-run`).
    fn sysfs_write(&mut self, _path: &str, _value: &str) -> io::Result<()> {
        Ok(())
    }
}

/// One phase's measurements. Times are `CLOCK_MONOTONIC` nanoseconds (absolute; the reporter
/// makes them relative to the runner's start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhaseReport {
    /// What a cgroup phase (reclaim, cgroup_write) did; default for the others.
    pub write: WriteOutcome,
    pub index: usize,
    pub start_ns: u64,
    pub end_ns: u64,
    pub accesses: u64,
    /// `getrusage(RUSAGE_SELF)` deltas over the phase.
    pub faults: Faults,
    /// schedstat deltas over the phase (None where the kernel has no schedstat).
    pub sched: Option<Sched>,
}

/// Where the runner's output goes.
pub trait Sink {
    /// A traced access (the first `trace` accesses of each phase).
    fn access(&mut self, a: Access) -> io::Result<()>;
    /// A finished phase.
    fn phase(&mut self, plan: &Plan, report: &PhaseReport) -> io::Result<()>;
    /// Phase `index` has an `after` condition: wait until the driver says it is met (true), or
    /// told to exit (false). Without a driver (`--no-wait`, tests) it is met at once.
    fn wait_after(&mut self, _index: usize) -> io::Result<bool> {
        Ok(true)
    }
}

/// How the phase list ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Every phase ran; memory is still mapped.
    PhasesDone,
    /// An Exit phase ran; memory is released.
    Exited,
    /// Told to exit while a phase waited on its `after` condition.
    Told,
}

/// Runs the plan's phases in order; traces the first `trace` accesses of each phase.
pub fn run_phases<M: Memory, S: Sink>(
    plan: &Plan,
    mem: &mut M,
    sink: &mut S,
    trace: u64,
) -> io::Result<Ended> {
    let region_pages = plan.region_pages();
    // The open cgroup files (`cgroup_open`), by descriptor index; Plan::parse checked every
    // use (check_fds). Closed at the end of the phases or at the process's exit.
    let mut fds: Vec<Option<std::fs::File>> = Vec::new();
    for (index, p) in plan.phases.iter().enumerate() {
        if p.after.is_some() && !sink.wait_after(index)? {
            return Ok(Ended::Told);
        }
        // Generator set-up (a small allocation for Sequential and Random) happens before the
        // phase's clock starts; the simulator charges it no time either.
        // No generator for the phases that touch no memory, nor for create_files, which
        // makes its own files (mem.create_files).
        let mut gen = match p.phase {
            Phase::CreateFiles { .. } => None,
            _ if p.phase.regions_used().is_none() => None,
            _ => Some(plan.access_gen(index, &region_pages)),
        };
        if let Phase::Write { region, .. } = p.phase {
            mem.start_write_phase(region);
        }
        let faults_before = sys::faults();
        let sched_before = sys::sched();
        let start_ns = sys::now_ns();
        let mut write = WriteOutcome::default();
        let accesses = match (&p.phase, gen.as_mut()) {
            (Phase::Fill { region }, Some(g)) => {
                let n = drive::<M, S, true>(g, mem, None, trace, sink)?;
                mem.filled(*region);
                n
            }
            (Phase::Sequential { .. } | Phase::Mmap { .. } | Phase::Trace { .. }, Some(g)) => {
                drive::<M, S, false>(g, mem, None, trace, sink)?
            }
            (Phase::Read { .. }, Some(g)) => {
                drive_file(g, mem, None, trace, sink).map_err(|e| phase_error(p, e))?
            }
            (Phase::Write { fsync_bytes, .. }, Some(g)) => {
                drive_file(g, mem, Some(*fsync_bytes), trace, sink)
                    .map_err(|e| phase_error(p, e))?
            }
            (Phase::Random { duration_ns, .. }, Some(g)) => {
                let deadline = duration_ns.map(|d| start_ns.saturating_add(d));
                drive::<M, S, false>(g, mem, deadline, trace, sink)?
            }
            (Phase::CreateFiles { regions, fsync }, _) => {
                let mut n = 0;
                for &r in regions {
                    n += mem.create_file(r, *fsync).map_err(|e| phase_error(p, e))?;
                }
                n
            }
            (Phase::Sleep { duration_ns }, _) => {
                sys::sleep_until(start_ns.saturating_add(*duration_ns));
                0
            }
            (Phase::Exit, _) => {
                mem.release();
                0
            }
            (Phase::Reclaim { amount, swappiness }, _) => {
                if let Some(dir) = mem.cgroup_dir()? {
                    write = cgroup::reclaim(&dir, *amount, *swappiness)?;
                }
                0
            }
            (
                Phase::CgroupWrite {
                    file, fd: Some(fd), ..
                },
                _,
            ) => {
                if let Some(f) = fd_of(&mut fds, *fd) {
                    write = cgroup::write_fd(f, *file)?;
                }
                0
            }
            (
                Phase::CgroupWrite {
                    file,
                    value,
                    fd: None,
                },
                _,
            ) => {
                if let Some(dir) = mem.cgroup_dir()? {
                    write = cgroup::cgroup_write(&dir, *file, *value)?;
                }
                0
            }
            (Phase::CgroupOpen { file, fd }, _) => {
                if let Some(dir) = mem.cgroup_dir()? {
                    if fds.len() <= *fd as usize {
                        fds.resize_with(*fd as usize + 1, || None);
                    }
                    fds[*fd as usize] = Some(cgroup::open(&dir, *file)?);
                }
                0
            }
            (Phase::CgroupRead { file, fd, key }, _) => {
                if let Some(dir) = mem.cgroup_dir()? {
                    let f = fd.and_then(|fd| fd_of(&mut fds, fd));
                    write = cgroup::read(&dir, *file, key.as_deref(), f.as_deref())?;
                }
                0
            }
            (Phase::CgroupClose { fd }, _) => {
                if let Some(slot) = fds.get_mut(*fd as usize) {
                    // close(2): the kernel releases the open file (peak_release).
                    drop(slot.take());
                }
                0
            }
            (Phase::ZramWrite { device, file }, _) => {
                // The VM lab's guest numbers its zram devices in the scenario's order, as the
                // lowered `device` does; the host lab refuses these phases (lab/probe.py).
                mem.sysfs_write(&format!("/sys/block/zram{device}/{}", file.name()), "1")?;
                0
            }
            (Phase::KernelAlloc { .. }, _) => unreachable!("config.rs refuses kernel_alloc phases"),
            _ => unreachable!("every access phase has a generator"),
        };
        let end_ns = sys::now_ns();
        let faults = sys::faults().since(faults_before);
        let sched = sys::sched()
            .zip(sched_before)
            .map(|(now, before)| now.since(before));
        sink.phase(
            plan,
            &PhaseReport {
                write,
                index,
                start_ns,
                end_ns,
                accesses,
                faults,
                sched,
            },
        )?;
        if p.phase == Phase::Exit {
            return Ok(Ended::Exited);
        }
    }
    Ok(Ended::PhasesDone)
}

/// The open file of descriptor `fd` (None under `--dry-run`, where nothing is opened).
fn fd_of(fds: &mut [Option<std::fs::File>], fd: u32) -> Option<&mut std::fs::File> {
    fds.get_mut(fd as usize).and_then(Option::as_mut)
}

/// Performs a phase's accesses until the generator ends or, with a deadline, until a clock check
/// finds it passed. Returns the number of accesses. `FILL` selects `Memory::fill` over `touch`.
///
/// The traced prefix runs in its own loop, so the hot loop does nothing but `next` and the
/// access itself (plus a counter compare when there is a deadline).
fn drive<M: Memory, S: Sink, const FILL: bool>(
    gen: &mut AccessGen,
    mem: &mut M,
    deadline: Option<u64>,
    trace: u64,
    sink: &mut S,
) -> io::Result<u64> {
    let chunk = if deadline.is_some() {
        DURATION_CHECK_EVERY
    } else {
        u64::MAX
    };
    let rw = gen.rw();
    let mut n = 0u64;
    loop {
        if let Some(d) = deadline {
            if sys::now_ns() >= d {
                return Ok(n);
            }
        }
        let stop = n.saturating_add(chunk);
        while n < stop && n < trace {
            let Some(a) = gen.next() else { return Ok(n) };
            apply::<M, FILL>(mem, a, rw);
            sink.access(a)?;
            n += 1;
        }
        while n < stop {
            let Some(a) = gen.next() else { return Ok(n) };
            apply::<M, FILL>(mem, a, rw);
            n += 1;
        }
    }
}

/// The error of a failed read(2), write(2) or fsync(2), naming the phase.
fn phase_error(p: &crate::config::PhasePlan, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("phase {}: {e}", p.name))
}

/// A Read (`write` None) or Write (`write` Some(fsync_bytes)) phase: every access is one
/// system call on the file. Returns the number of accesses.
fn drive_file<M: Memory, S: Sink>(
    gen: &mut AccessGen,
    mem: &mut M,
    write: Option<Option<u64>>,
    trace: u64,
    sink: &mut S,
) -> io::Result<u64> {
    let mut n = 0u64;
    for a in gen.by_ref() {
        match write {
            None => mem.file_read(a.region, a.page)?,
            Some(fsync_bytes) => mem.file_write(a.region, a.page, fsync_bytes)?,
        }
        if n < trace {
            sink.access(a)?;
        }
        n += 1;
    }
    Ok(n)
}

/// One access. In an `rw` phase (`AccessGen::rw`) a store is a volatile load of the byte, then
/// the store: a page that is not mapped takes a read fault first, as in the simulator.
#[inline(always)]
fn apply<M: Memory, const FILL: bool>(mem: &mut M, a: Access, rw: bool) {
    if FILL {
        mem.fill(a.region, a.page);
    } else {
        if rw && a.write {
            mem.touch(a.region, a.page, false);
        }
        mem.touch(a.region, a.page, a.write);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::NullMemory;

    /// Records everything.
    #[derive(Default)]
    struct Log {
        accesses: Vec<Access>,
        phases: Vec<PhaseReport>,
    }

    impl Sink for Log {
        fn access(&mut self, a: Access) -> io::Result<()> {
            self.accesses.push(a);
            Ok(())
        }
        fn phase(&mut self, _plan: &Plan, r: &PhaseReport) -> io::Result<()> {
            self.phases.push(*r);
            Ok(())
        }
    }

    /// Counts calls per kind.
    #[derive(Default)]
    struct CountMem {
        fills: u64,
        reads: u64,
        writes: u64,
        filled: Vec<u32>,
        released: bool,
        file_reads: u64,
        file_writes: Vec<Option<u64>>,
        write_phases: Vec<u32>,
        created: Vec<(u32, bool)>,
    }

    impl Memory for CountMem {
        fn fill(&mut self, _r: u32, _p: u64) {
            self.fills += 1;
        }
        fn touch(&mut self, _r: u32, _p: u64, write: bool) {
            if write {
                self.writes += 1;
            } else {
                self.reads += 1;
            }
        }
        fn filled(&mut self, r: u32) {
            self.filled.push(r);
        }
        fn release(&mut self) {
            self.released = true;
        }
        fn file_read(&mut self, _r: u32, _p: u64) -> io::Result<()> {
            self.file_reads += 1;
            Ok(())
        }
        fn file_write(&mut self, _r: u32, _p: u64, fsync_bytes: Option<u64>) -> io::Result<()> {
            self.file_writes.push(fsync_bytes);
            Ok(())
        }
        fn start_write_phase(&mut self, r: u32) {
            self.write_phases.push(r);
        }
        fn create_file(&mut self, r: u32, fsync: bool) -> io::Result<u64> {
            self.created.push((r, fsync));
            Ok(3)
        }
    }

    fn plan(phases: &str) -> Plan {
        let text = format!(
            r#"{{"seed": 5, "processes": [{{"name": "p", "regions": [
                {{"name": "a", "pages": 10, "content": "text", "variants": 2}},
                {{"name": "b", "pages": 6, "content": "zero", "variants": 1}}], "phases": [{phases}]}}]}}"#
        );
        Plan::parse(&text, 0).unwrap()
    }

    #[test]
    fn phases_run_in_order_with_generator_accesses() {
        let plan = plan(
            r#"{"name": "f", "phase": {"kind": "fill", "region": 1}},
               {"name": "s", "phase": {"kind": "sequential", "regions": [0, 1], "passes": 2, "write_percent": 0}},
               {"name": "z", "phase": {"kind": "sleep", "duration_ns": 1000000}},
               {"name": "r", "phase": {"kind": "random", "regions": [0], "dist": {"kind": "zipf", "theta": 0.9}, "count": 300, "duration_ns": null, "write_percent": 100}}"#,
        );
        let mut mem = CountMem::default();
        let mut log = Log::default();
        assert_eq!(
            run_phases(&plan, &mut mem, &mut log, u64::MAX).unwrap(),
            Ended::PhasesDone
        );
        assert_eq!((mem.fills, mem.reads, mem.writes), (6, 32, 300));
        assert_eq!(mem.filled, [1]);
        assert!(!mem.released);
        let counts: Vec<u64> = log.phases.iter().map(|r| r.accesses).collect();
        assert_eq!(counts, [6, 32, 0, 300]);
        assert!(log.phases[2].end_ns - log.phases[2].start_ns >= 1_000_000);
        for w in log.phases.windows(2) {
            assert!(w[0].end_ns <= w[1].start_ns);
        }
        // The trace is every access, in the generators' order.
        let pages = plan.region_pages();
        let expect: Vec<Access> = [0, 1, 3]
            .iter()
            .flat_map(|&i| plan.access_gen(i, &pages))
            .collect();
        assert_eq!(log.accesses, expect);
    }

    #[test]
    fn create_files_creates_each_file_in_order_and_counts_its_pages() {
        let text = r#"{"seed": 5, "processes": [{"name": "p", "regions": [
            {"name": "f", "pages": 3, "content": "text", "variants": 2, "file": 0},
            {"name": "g", "pages": 3, "content": "text", "variants": 2, "file": 0},
            {"name": "h", "pages": 3, "content": "text", "variants": 2, "file": 0}], "phases": [
            {"name": "c", "phase": {"kind": "create_files", "regions": [1, 0], "fsync": true}},
            {"name": "d", "phase": {"kind": "create_files", "regions": [2], "fsync": false}}]}]}"#;
        let plan = Plan::parse(text, 0).unwrap();
        let mut mem = CountMem::default();
        let mut log = Log::default();
        run_phases(&plan, &mut mem, &mut log, 0).unwrap();
        assert_eq!(mem.created, [(1, true), (0, true), (2, false)]);
        let counts: Vec<u64> = log.phases.iter().map(|r| r.accesses).collect();
        assert_eq!(counts, [6, 3]);
    }

    #[test]
    fn file_phases_call_the_file_operations_in_generator_order() {
        let text = r#"{"seed": 5, "processes": [{"name": "p", "regions": [
            {"name": "a", "pages": 4, "content": "text", "variants": 2},
            {"name": "f", "pages": 10, "content": "text", "variants": 2, "file": 0}], "phases": [
            {"name": "r", "phase": {"kind": "read", "region": 1, "passes": 2}},
            {"name": "w", "phase": {"kind": "write", "region": 1, "passes": 1, "fsync_bytes": 8192}},
            {"name": "m", "phase": {"kind": "mmap", "region": 1, "passes": 1, "write_percent": 100}},
            {"name": "w2", "phase": {"kind": "write", "region": 1, "passes": 1}}]}]}"#;
        let plan = Plan::parse(text, 0).unwrap();
        let mut mem = CountMem::default();
        let mut log = Log::default();
        run_phases(&plan, &mut mem, &mut log, 3).unwrap();
        assert_eq!(mem.file_reads, 20);
        assert_eq!(mem.file_writes.len(), 20);
        assert!(mem.file_writes[..10].iter().all(|f| *f == Some(8192)));
        assert!(mem.file_writes[10..].iter().all(|f| f.is_none()));
        assert_eq!(mem.write_phases, [1, 1]);
        assert_eq!((mem.reads, mem.writes), (0, 10));
        let counts: Vec<u64> = log.phases.iter().map(|r| r.accesses).collect();
        assert_eq!(counts, [20, 10, 10, 10]);
        assert_eq!(log.accesses.len(), 12);
        // A file phase on an anonymous region, and the reverse, are refused.
        let bad = text.replace(
            r#""kind": "read", "region": 1"#,
            r#""kind": "read", "region": 0"#,
        );
        assert!(Plan::parse(&bad, 0)
            .unwrap_err()
            .contains("region 0 (a) is anonymous; this phase needs a file"));
        let bad = text.replace(
            r#""kind": "read", "region": 1, "passes": 2"#,
            r#""kind": "fill", "region": 1"#,
        );
        assert!(Plan::parse(&bad, 0)
            .unwrap_err()
            .contains("region 1 (f) is a file"));
    }

    #[test]
    fn rw_phases_load_before_each_store() {
        // The same accesses as without rw (the trace, the counts), but each store is preceded
        // by a load of the same page; loads stay loads.
        let phases = r#"{"name": "s", "phase": {"kind": "sequential", "regions": [0], "passes": 1, "write_percent": 100, "rw": true}},
               {"name": "r", "phase": {"kind": "random", "regions": [0, 1], "dist": {"kind": "uniform"}, "count": 200, "duration_ns": null, "write_percent": 40, "rw": true}}"#;
        let (mut mem, mut log) = (CountMem::default(), Log::default());
        run_phases(&plan(phases), &mut mem, &mut log, u64::MAX).unwrap();
        let (mut plain, mut plain_log) = (CountMem::default(), Log::default());
        run_phases(
            &plan(&phases.replace(r#", "rw": true"#, "")),
            &mut plain,
            &mut plain_log,
            u64::MAX,
        )
        .unwrap();
        assert_eq!(log.accesses, plain_log.accesses);
        assert_eq!(mem.writes, plain.writes);
        assert!(plain.writes > 10 && plain.reads > 0);
        assert_eq!(mem.reads, plain.reads + plain.writes);
    }

    #[test]
    fn trace_is_limited_per_phase() {
        let plan = plan(
            r#"{"name": "s", "phase": {"kind": "sequential", "regions": [0], "passes": 1, "write_percent": 50}},
               {"name": "t", "phase": {"kind": "sequential", "regions": [1], "passes": 1, "write_percent": 50}}"#,
        );
        let mut log = Log::default();
        run_phases(&plan, &mut NullMemory, &mut log, 4).unwrap();
        assert_eq!(log.accesses.len(), 8);
        assert!(log.accesses[..4].iter().all(|a| a.region == 0));
        assert!(log.accesses[4..].iter().all(|a| a.region == 1));
    }

    /// Answers `after` waits from a list, and logs which phases asked.
    struct Gate {
        log: Log,
        answers: Vec<bool>,
        asked: Vec<usize>,
    }

    impl Sink for Gate {
        fn access(&mut self, a: Access) -> io::Result<()> {
            self.log.access(a)
        }
        fn phase(&mut self, plan: &Plan, r: &PhaseReport) -> io::Result<()> {
            self.log.phase(plan, r)
        }
        fn wait_after(&mut self, index: usize) -> io::Result<bool> {
            self.asked.push(index);
            Ok(self.answers.remove(0))
        }
    }

    #[test]
    fn after_waits_before_its_phase_and_stops_when_told() {
        let text = r#"{"seed": 5, "processes": [{"name": "o", "regions": [], "phases": [{"name": "x", "phase": {"kind": "exit"}}]},
            {"name": "p", "regions": [{"name": "a", "pages": 10, "content": "text", "variants": 2}], "phases": [
            {"name": "f", "phase": {"kind": "fill", "region": 0}},
            {"name": "s", "phase": {"kind": "sequential", "regions": [0], "passes": 1, "write_percent": 0}, "after": {"process": 0, "phase": 0}},
            {"name": "t", "phase": {"kind": "sequential", "regions": [0], "passes": 1, "write_percent": 0}, "after": {"process": 0, "phase": 0}}]}]}"#;
        let plan = Plan::parse(text, 1).unwrap();
        let mut gate = Gate {
            log: Log::default(),
            answers: vec![true, false],
            asked: vec![],
        };
        assert_eq!(
            run_phases(&plan, &mut CountMem::default(), &mut gate, 0).unwrap(),
            Ended::Told
        );
        assert_eq!(gate.asked, [1, 2]);
        assert_eq!(gate.log.phases.len(), 2, "f and s ran; t was told to stop");
        // A reference to a phase or process that does not exist, or to itself, is refused.
        let bad = text.replace(
            r#""after": {"process": 0, "phase": 0}}]}]}"#,
            r#""after": {"process": 0, "phase": 3}}]}]}"#,
        );
        assert!(Plan::parse(&bad, 1)
            .unwrap_err()
            .contains("(t).after: process 0 has no phase 3"));
        let bad = text.replace(
            r#""after": {"process": 0, "phase": 0}}]}]}"#,
            r#""after": {"process": 1, "phase": 0}}]}]}"#,
        );
        assert!(Plan::parse(&bad, 1).unwrap_err().contains("own process"));
    }

    #[test]
    fn exit_releases_and_stops() {
        let plan = plan(
            r#"{"name": "f", "phase": {"kind": "fill", "region": 0}},
               {"name": "e", "phase": {"kind": "exit"}},
               {"name": "never", "phase": {"kind": "fill", "region": 1}}"#,
        );
        let mut mem = CountMem::default();
        let mut log = Log::default();
        assert_eq!(
            run_phases(&plan, &mut mem, &mut log, 0).unwrap(),
            Ended::Exited
        );
        assert!(mem.released);
        assert_eq!(mem.fills, 10);
        assert_eq!(log.phases.len(), 2);
        assert_eq!(log.phases[1].index, 1);
        assert!(log.accesses.is_empty());
    }

    #[test]
    fn duration_bound_random_stops_at_checks() {
        // Zero duration: the check before the first access ends the phase, as the simulator's
        // `now >= duration_end` does.
        let plan = plan(
            r#"{"name": "r0", "phase": {"kind": "random", "regions": [0, 1], "dist": {"kind": "uniform"}, "count": null, "duration_ns": 0, "write_percent": 0}},
               {"name": "r", "phase": {"kind": "random", "regions": [0, 1], "dist": {"kind": "uniform"}, "count": null, "duration_ns": 3000000, "write_percent": 0}}"#,
        );
        let mut log = Log::default();
        run_phases(&plan, &mut NullMemory, &mut log, 0).unwrap();
        assert_eq!(log.phases[0].accesses, 0);
        let r = log.phases[1];
        assert!(
            r.accesses > 0 && r.accesses.is_multiple_of(DURATION_CHECK_EVERY),
            "{}",
            r.accesses
        );
        assert!(r.end_ns - r.start_ns >= 3_000_000);
    }
}
