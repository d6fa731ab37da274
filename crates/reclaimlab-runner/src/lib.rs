//! The lab's workload runner: executes one process of a lowered reclaimlab scenario on the real
//! kernel, with the same page bytes and the same access order as the simulator.
//!
//! The binary (`src/main.rs`) is a thin shell around this library: argument parsing and the
//! line protocol with the lab driver. Everything that decides what the process does lives here
//! so that tests can call it without spawning a process:
//!
//! * [`config`]: the parts of the lowered scenario JSON (`SimConfig`) the runner needs,
//!   validated the way the simulator validates them.
//! * [`mem`]: 2 MiB-aligned anonymous mappings, the exact page bytes, and the one-byte touches.
//! * [`file`]: file regions: the files written before `ready`, read(2), write(2), fsync(2) and
//!   a shared mapping after `go`.
//! * [`exec`]: the phase loop, generic over the memory (real or, for `--dry-run`, none) and over
//!   where reports go.
//! * [`cgroup`]: the cgroup phases (memory.reclaim, interface file writes).
//! * [`report`]: the JSON lines on stdout.
//! * [`sys`]: clocks, sleeping, `getrusage`, signals.
//!
//! See `docs/runner.md` for the protocol and for how (and how far) the runner mirrors the
//! simulator.

pub mod cgroup;
pub mod config;
pub mod exec;
pub mod file;
pub mod mem;
pub mod report;
pub mod sys;

pub use config::Plan;
pub use exec::{run_phases, Ended, Memory, PhaseReport, Sink};
pub use mem::{NullMemory, Prepared, RealMemory};
