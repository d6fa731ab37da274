//! The runner's stdout: one JSON object per line, flushed after every line.
//!
//! ```text
//! {"event":"ready","pid":1234}
//! {"event":"access","region":0,"page":17,"write":true}        (traced accesses only)
//! {"event":"phase","process":"p","phase":"fill0","index":0,"start_ns":12,"end_ns":345,"accesses":64,"minflt":64,"majflt":0,
//!  "cpu_ns":300,"run_delay_ns":20}                           (cpu_ns, run_delay_ns: with schedstat)
//!  (reclaim phases add "reclaimed_bytes", cgroup_write phases "written", cgroup_read phases "read";
//!   a failed write "error":"EAGAIN")
//! {"event":"waiting","index":2}                              (phase 2 waits on its `after`: the driver answers `continue`)
//! {"event":"phases_done"}
//! {"event":"error","message":"..."}
//! ```

use std::io::{self, Write};

use reclaimlab_workload::Access;
use serde::Serialize;

use crate::config::Plan;
use crate::exec::{PhaseReport, Sink};

#[derive(Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Event<'a> {
    Ready {
        pid: u32,
    },
    Phase {
        process: &'a str,
        phase: &'a str,
        index: usize,
        start_ns: u64,
        end_ns: u64,
        accesses: u64,
        minflt: u64,
        majflt: u64,
        /// The runner thread's time on a CPU and waiting for one (schedstat), when known.
        #[serde(skip_serializing_if = "Option::is_none")]
        cpu_ns: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        run_delay_ns: Option<u64>,
        /// reclaim: memory.stat pgsteal over the write, bytes.
        #[serde(skip_serializing_if = "Option::is_none")]
        reclaimed_bytes: Option<u64>,
        /// A cgroup phase's write failed: the errno's name ("EAGAIN").
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<&'static str>,
        /// cgroup_write: what was written ("max", "reset" or the number).
        #[serde(skip_serializing_if = "Option::is_none")]
        written: Option<String>,
        /// cgroup_read: the number read.
        #[serde(skip_serializing_if = "Option::is_none")]
        read: Option<u64>,
    },
    Waiting {
        index: usize,
    },
    PhasesDone,
    Error {
        message: &'a str,
    },
}

/// Writes the protocol lines to `out`. Phase times are reported relative to `t0`.
pub struct Reporter<W: Write> {
    out: W,
    t0: u64,
}

impl<W: Write> Reporter<W> {
    pub fn new(out: W) -> Self {
        Reporter { out, t0: 0 }
    }

    /// Sets the start of the runner's clock (`CLOCK_MONOTONIC` ns, taken after `go`).
    pub fn set_start(&mut self, t0: u64) {
        self.t0 = t0;
    }

    fn emit(&mut self, e: &Event) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, e)?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }

    pub fn ready(&mut self, pid: u32) -> io::Result<()> {
        self.emit(&Event::Ready { pid })
    }

    /// Phase `index` waits for its `after` condition.
    pub fn waiting(&mut self, index: usize) -> io::Result<()> {
        self.emit(&Event::Waiting { index })
    }

    pub fn phases_done(&mut self) -> io::Result<()> {
        self.emit(&Event::PhasesDone)
    }

    pub fn error(&mut self, message: &str) -> io::Result<()> {
        self.emit(&Event::Error { message })
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write> Sink for Reporter<W> {
    fn access(&mut self, a: Access) -> io::Result<()> {
        // Traced accesses only (a bounded prefix per phase); a plain write! keeps it cheap.
        writeln!(
            self.out,
            r#"{{"event":"access","region":{},"page":{},"write":{}}}"#,
            a.region, a.page, a.write
        )?;
        self.out.flush()
    }

    fn phase(&mut self, plan: &Plan, r: &PhaseReport) -> io::Result<()> {
        let e = Event::Phase {
            process: &plan.process_name,
            phase: &plan.phases[r.index].name,
            index: r.index,
            start_ns: r.start_ns.saturating_sub(self.t0),
            end_ns: r.end_ns.saturating_sub(self.t0),
            accesses: r.accesses,
            minflt: r.faults.minflt,
            majflt: r.faults.majflt,
            cpu_ns: r.sched.map(|s| s.cpu_ns),
            run_delay_ns: r.sched.map(|s| s.run_delay_ns),
            reclaimed_bytes: r.write.reclaimed_bytes,
            error: r.write.errno.map(|e| match e {
                libc::EAGAIN => "EAGAIN",
                libc::ENOENT => "ENOENT",
                _ => "error",
            }),
            written: r.write.written.map(|v| match plan.phases[r.index].phase {
                reclaimlab_workload::Phase::CgroupWrite { file, .. } if file.is_peak() => {
                    "reset".to_string()
                }
                _ => reclaimlab_workload::CgroupValue::text(v),
            }),
            read: r.write.read,
        };
        self.emit(&e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::Faults;

    #[test]
    fn lines_are_the_documented_json() {
        let plan = Plan::parse(
            r#"{"seed": 1, "processes": [{"name": "p\"q", "regions": [{"name": "r", "pages": 1, "content": "zero", "variants": 1}],
                "phases": [{"name": "fill0", "phase": {"kind": "fill", "region": 0}}]}]}"#,
            0,
        )
        .unwrap();
        let mut r = Reporter::new(Vec::new());
        r.set_start(1000);
        r.ready(42).unwrap();
        r.access(Access {
            region: 1,
            page: 2,
            write: true,
        })
        .unwrap();
        r.phase(
            &plan,
            &PhaseReport {
                write: Default::default(),
                index: 0,
                start_ns: 1010,
                end_ns: 2000,
                accesses: 1,
                faults: Faults {
                    minflt: 3,
                    majflt: 4,
                },
                sched: None,
            },
        )
        .unwrap();
        r.phase(
            &plan,
            &PhaseReport {
                write: Default::default(),
                index: 0,
                start_ns: 1010,
                end_ns: 2000,
                accesses: 1,
                faults: Faults {
                    minflt: 3,
                    majflt: 4,
                },
                sched: Some(crate::sys::Sched {
                    cpu_ns: 700,
                    run_delay_ns: 200,
                }),
            },
        )
        .unwrap();
        r.phases_done().unwrap();
        r.error("bad \"x\"").unwrap();
        let text = String::from_utf8(r.into_inner()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                r#"{"event":"ready","pid":42}"#,
                r#"{"event":"access","region":1,"page":2,"write":true}"#,
                r#"{"event":"phase","process":"p\"q","phase":"fill0","index":0,"start_ns":10,"end_ns":1000,"accesses":1,"minflt":3,"majflt":4}"#,
                r#"{"event":"phase","process":"p\"q","phase":"fill0","index":0,"start_ns":10,"end_ns":1000,"accesses":1,"minflt":3,"majflt":4,"cpu_ns":700,"run_delay_ns":200}"#,
                r#"{"event":"phases_done"}"#,
                r#"{"event":"error","message":"bad \"x\""}"#,
            ]
        );
    }
}
