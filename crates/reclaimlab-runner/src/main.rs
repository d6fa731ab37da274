//! `reclaimlab-runner --config LOWERED.json --process N [--no-wait] [--dry-run] [--trace K]`
//!
//! Executes process N of a lowered reclaimlab scenario on the real kernel and talks to the lab
//! driver over stdin/stdout (see docs/runner.md). Exit codes: 0 done (or told to exit),
//! 1 runtime failure (mmap failed, stdout closed, stdin closed before `go`), 2 bad arguments,
//! config or protocol line.

use std::ffi::OsString;
use std::io::{self, BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use reclaimlab_runner::report::Reporter;
use reclaimlab_runner::{
    file, run_phases, sys, Ended, Memory, NullMemory, Plan, Prepared, RealMemory,
};

const USAGE: &str = "\
usage: reclaimlab-runner --config LOWERED.json --process N [--fs-dir DIR]... [--cgroup-procs FILE] [--no-wait] [--dry-run] [--trace K]
       reclaimlab-runner --swapon DEV --priority N

Runs process N (index into `processes`) of a lowered reclaimlab scenario on the real kernel:
same page bytes and same access order as the simulator. Reports JSON lines on stdout.

  --config PATH   the lowered scenario JSON (what the simulator reads)
  --process N     which process to run (0-based index)
  --fs-dir DIR    where filesystem i of machine.filesystems is mounted (once per filesystem, in
                  order); the process's file regions are files p<process>.r<region> there,
                  written with their pages' bytes and fsynced before `ready` (on a tmpfs:
                  made at their size without data); a create_files phase's files are made by
                  that phase
  --cgroup-procs FILE
                  join this cgroup (write the runner's pid to FILE, its cgroup.procs) after
                  the preparation and before the files are made, so that their pages are
                  charged to it
  --no-wait       do not wait for `go` after `ready`, nor for `exit` after `phases_done`
  --dry-run       map and touch no memory; phases, timing and reports as usual
  --trace K       report the first K accesses of every phase as `access` events
  --swapon DEV --priority N
                  swapon(2) of DEV at priority N (0..32767), as `swapon -p N DEV`, and exit
                  (the VM lab's guest: its busybox swapon has no -p)
  -h, --help      this text

Protocol (stdout JSON lines; stdin commands `go`, `exit`): see docs/runner.md.";

struct Args {
    config: PathBuf,
    process: usize,
    no_wait: bool,
    dry_run: bool,
    trace: u64,
    fs_dirs: Vec<PathBuf>,
    cgroup_procs: Option<PathBuf>,
}

enum Cli {
    Run(Args),
    /// `--swapon DEV --priority N`: swapon(2) with a priority, and exit (the VM lab's guest).
    Swapon(PathBuf, u16),
    Help,
}

fn parse_args(mut it: impl Iterator<Item = OsString>) -> Result<Cli, String> {
    let mut config = None;
    let mut process = None;
    let mut trace = None;
    let mut fs_dirs = Vec::new();
    let mut cgroup_procs = None;
    let (mut swapon, mut priority) = (None, None);
    let (mut no_wait, mut dry_run) = (false, false);
    while let Some(arg) = it.next() {
        let arg = arg
            .into_string()
            .map_err(|a| format!("argument {a:?} is not UTF-8"))?;
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => it
                    .next()
                    .ok_or_else(|| format!("{name} needs a value"))?
                    .into_string()
                    .map_err(|a| format!("{name}: {a:?} is not UTF-8")),
            }
        };
        let once = |seen: bool, name: &str| {
            if seen {
                Err(format!("{name} given twice"))
            } else {
                Ok(())
            }
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Cli::Help),
            "--config" => {
                once(config.is_some(), "--config")?;
                config = Some(PathBuf::from(value("--config")?));
            }
            "--process" => {
                once(process.is_some(), "--process")?;
                let v = value("--process")?;
                process = Some(
                    v.parse::<usize>()
                        .map_err(|_| format!("--process: expected a process index, got {v:?}"))?,
                );
            }
            "--trace" => {
                once(trace.is_some(), "--trace")?;
                let v = value("--trace")?;
                trace =
                    Some(v.parse::<u64>().map_err(|_| {
                        format!("--trace: expected a number of accesses, got {v:?}")
                    })?);
            }
            "--fs-dir" => fs_dirs.push(PathBuf::from(value("--fs-dir")?)),
            "--swapon" => {
                once(swapon.is_some(), "--swapon")?;
                swapon = Some(PathBuf::from(value("--swapon")?));
            }
            "--priority" => {
                once(priority.is_some(), "--priority")?;
                let v = value("--priority")?;
                priority = Some(v.parse::<u16>().ok().filter(|p| *p <= 32767).ok_or_else(
                    || format!("--priority: expected a swap priority 0..32767, got {v:?}"),
                )?);
            }
            "--cgroup-procs" => {
                once(cgroup_procs.is_some(), "--cgroup-procs")?;
                cgroup_procs = Some(PathBuf::from(value("--cgroup-procs")?));
            }
            "--no-wait" | "--dry-run" if inline.is_some() => {
                return Err(format!("{flag} takes no value"))
            }
            "--no-wait" => {
                once(no_wait, "--no-wait")?;
                no_wait = true;
            }
            "--dry-run" => {
                once(dry_run, "--dry-run")?;
                dry_run = true;
            }
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        }
    }
    if let Some(dev) = swapon {
        let p = priority.ok_or("--swapon needs --priority (see --help)")?;
        return Ok(Cli::Swapon(dev, p));
    }
    if priority.is_some() {
        return Err("--priority goes with --swapon (see --help)".into());
    }
    Ok(Cli::Run(Args {
        config: config.ok_or("--config is required (see --help)")?,
        process: process.ok_or("--process is required (see --help)")?,
        no_wait,
        dry_run,
        trace: trace.unwrap_or(0),
        fs_dirs,
        cgroup_procs,
    }))
}

/// A failure after which the runner exits with `code`, having reported `message`.
struct Fail {
    code: u8,
    message: String,
}

fn fail<T>(code: u8, message: impl Into<String>) -> Result<T, Fail> {
    Err(Fail {
        code,
        message: message.into(),
    })
}

/// stdout is gone (the driver died, or closed the pipe): nobody to report to.
fn lost(e: io::Error) -> Fail {
    Fail {
        code: 1,
        message: format!("writing to stdout: {e}"),
    }
}

/// The next non-blank line of stdin, trimmed; `None` at end of file.
fn read_command(stdin: &mut impl BufRead) -> Result<Option<String>, Fail> {
    let mut line = String::new();
    loop {
        line.clear();
        match stdin.read_line(&mut line) {
            Ok(0) => return Ok(None),
            Ok(_) => {
                let cmd = line.trim();
                if !cmd.is_empty() {
                    return Ok(Some(cmd.to_string()));
                }
            }
            Err(e) => return fail(1, format!("reading stdin: {e}")),
        }
    }
}

fn main() -> ExitCode {
    sys::default_sigterm();
    let stdout = io::stdout();
    let mut out = Reporter::new(stdout.lock());
    match run(&mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            // Best effort: stdout may be what failed.
            let _ = out.error(&f.message);
            eprintln!("reclaimlab-runner: error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn run<W: Write>(out: &mut Reporter<W>) -> Result<(), Fail> {
    let args = match parse_args(std::env::args_os().skip(1)) {
        Ok(Cli::Run(a)) => a,
        Ok(Cli::Swapon(dev, priority)) => {
            return sys::swapon(&dev, priority)
                .or_else(|e| fail(1, format!("swapon {} -p {priority}: {e}", dev.display())));
        }
        Ok(Cli::Help) => {
            println!("{USAGE}");
            return Ok(());
        }
        Err(e) => return fail(2, e),
    };
    let plan = Plan::load(&args.config, args.process).or_else(|e| fail(2, e))?;

    // Work charged to the cgroup the runner starts in: variant tables, bitmaps, and locking
    // the runner's own pages. The regions themselves are mapped after `go`.
    let prepared = if args.dry_run {
        None
    } else {
        if sys::thp_mode().as_deref() == Some("always") {
            eprintln!(
                "reclaimlab-runner: warning: transparent hugepages are in `always` mode; the 2 MiB-aligned \
                 regions may get huge pages, which the simulator does not model"
            );
        }
        let mut prepared = Prepared::new(&plan);
        file::check_dirs(&plan, &args.fs_dirs).or_else(|e| fail(2, e.to_string()))?;
        if let Some(procs) = &args.cgroup_procs {
            // Join the cgroup before making the files: their page cache (a tmpfs file's pages
            // stay) is charged to the cgroup the simulator charges, the process's own.
            std::fs::write(procs, std::process::id().to_string()).or_else(|e| {
                fail(
                    1,
                    format!(
                        "--cgroup-procs: cannot join the cgroup through {}: {e}",
                        procs.display()
                    ),
                )
            })?;
        }
        prepared
            .create_files(&plan, &args.fs_dirs)
            .or_else(|e| fail(1, e.to_string()))?;
        if let Some(adj) = plan.oom_score_adj {
            // The OOM killer's view of this process (oom_score_adj; lowering it needs
            // CAP_SYS_RESOURCE, which the lab's root runner has).
            std::fs::write("/proc/self/oom_score_adj", adj.to_string()).or_else(|e| {
                fail(
                    1,
                    format!("cannot write /proc/self/oom_score_adj = {adj}: {e}"),
                )
            })?;
        }
        if let Err(e) = sys::lock_current() {
            eprintln!("reclaimlab-runner: note: mlockall(MCL_CURRENT) failed ({e}); the runner's own pages can be reclaimed");
        }
        Some(prepared)
    };

    out.ready(std::process::id()).map_err(lost)?;
    let mut stdin = io::stdin().lock();
    if !args.no_wait {
        match read_command(&mut stdin)?.as_deref() {
            Some("go") => {}
            Some("exit") => return Ok(()),
            Some(other) => return fail(2, format!("expected `go` on stdin, got {other:?}")),
            None => return fail(1, "stdin closed before `go`"),
        }
    }
    out.set_start(sys::now_ns());

    match prepared {
        None => execute(&plan, &mut NullMemory, out, &args, &mut stdin),
        Some(prepared) => {
            let mut mem = RealMemory::map(prepared, &plan, &args.fs_dirs)
                .or_else(|e| fail(1, e.to_string()))?;
            execute(&plan, &mut mem, out, &args, &mut stdin)
        }
    }
}

/// The reporter, and the driver's commands for phases that wait on `after`.
struct Driven<'a, W: Write, R: BufRead> {
    out: &'a mut Reporter<W>,
    stdin: &'a mut R,
    no_wait: bool,
}

impl<W: Write, R: BufRead> reclaimlab_runner::Sink for Driven<'_, W, R> {
    fn access(&mut self, a: reclaimlab_workload::Access) -> io::Result<()> {
        self.out.access(a)
    }
    fn phase(&mut self, plan: &Plan, r: &reclaimlab_runner::PhaseReport) -> io::Result<()> {
        self.out.phase(plan, r)
    }
    /// `{"event":"waiting"}`, then `continue` (run the phase) or `exit`/EOF (stop).
    fn wait_after(&mut self, index: usize) -> io::Result<bool> {
        if self.no_wait {
            return Ok(true);
        }
        self.out.waiting(index)?;
        match read_command(self.stdin)
            .map_err(|f| io::Error::other(f.message))?
            .as_deref()
        {
            Some("continue") => Ok(true),
            Some("exit") | None => Ok(false),
            Some(other) => Err(io::Error::other(format!(
                "expected `continue` or `exit` on stdin, got {other:?}"
            ))),
        }
    }
}

/// Runs the phases, then (unless they ended with Exit) holds the memory until `exit` or EOF.
fn execute<M: Memory, W: Write>(
    plan: &Plan,
    mem: &mut M,
    out: &mut Reporter<W>,
    args: &Args,
    stdin: &mut impl BufRead,
) -> Result<(), Fail> {
    let mut driven = Driven {
        out,
        stdin,
        no_wait: args.no_wait,
    };
    let ended = run_phases(plan, mem, &mut driven, args.trace).map_err(lost)?;
    let (out, stdin) = (driven.out, driven.stdin);
    match ended {
        Ended::Exited | Ended::Told => Ok(()),
        Ended::PhasesDone => {
            out.phases_done().map_err(lost)?;
            if args.no_wait {
                return Ok(());
            }
            match read_command(stdin)?.as_deref() {
                Some("exit") | None => Ok(()),
                Some(other) => fail(2, format!("expected `exit` on stdin, got {other:?}")),
            }
        }
    }
}
