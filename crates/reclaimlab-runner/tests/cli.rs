//! The runner binary end to end: JSON lines, the driver protocol, access order, errors.
//! No root needed: the runner only maps anonymous memory; the driver's cgroup move is skipped.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use reclaimlab_workload::rng::{stream, Stream};
use reclaimlab_workload::{Access, AccessGen, Phase};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_reclaimlab-runner");
const TIMEOUT: Duration = Duration::from_secs(20);

/// A temporary file, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(contents: &[u8]) -> TempFile {
        static N: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "reclaimlab-runner-test-{}-{}.json",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, contents).unwrap();
        TempFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Writes `config` to a fresh temporary file.
fn write_config(config: &Value) -> TempFile {
    TempFile::new(&serde_json::to_vec_pretty(config).unwrap())
}

/// A lowered scenario (with the fields the simulator needs, which the runner ignores).
fn lowered(seed: u64, processes: Value) -> Value {
    json!({
        "seed": seed,
        "machine": {"memory_bytes": 1u64 << 30, "cpus": 2, "swap": []},
        "kernel": {"version": "6.18", "zswap": {"enabled": true, "compressor": "lzo", "max_pool_percent": 20,
                   "accept_threshold_percent": 90, "shrinker_enabled": false},
                   "vm": {"swappiness": 60, "page_cluster": 3, "min_free_kbytes": null, "watermark_scale_factor": 10},
                   "switches": {}},
        "cgroups": {"version": 2, "groups": [{"path": "/", "parent": null, "limit_bytes": null, "high_bytes": null,
                    "swappiness": null, "zswap_max_bytes": null, "zswap_writeback": true}]},
        "processes": processes,
        "costs": {},
        "max_time_ns": null
    })
}

fn phase(name: &str, phase: Value) -> Value {
    json!({"name": name, "phase": phase})
}

/// The brief's small scenario: 64 text pages + 32 random pages; fill, fill, random count 500,
/// sleep 1 ms, sequential write_percent 50.
fn small() -> Value {
    lowered(
        42,
        json!([{
            "name": "small", "cgroup": 0,
            "regions": [
                {"name": "text", "pages": 64, "content": "text", "variants": 16},
                {"name": "rand", "pages": 32, "content": "random", "variants": 256}
            ],
            "phases": [
                phase("fill0", json!({"kind": "fill", "region": 0})),
                phase("fill1", json!({"kind": "fill", "region": 1})),
                phase("access", json!({"kind": "random", "regions": [0, 1], "dist": {"kind": "uniform"},
                                        "count": 500, "duration_ns": null, "write_percent": 50})),
                phase("nap", json!({"kind": "sleep", "duration_ns": 1_000_000})),
                phase("scan", json!({"kind": "sequential", "regions": [0, 1], "passes": 1, "write_percent": 50}))
            ]
        }]),
    )
}

/// A running runner whose stdout lines arrive on a channel.
struct Runner {
    _config: Option<TempFile>,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Runner {
    fn start(config: &Value, extra: &[&str]) -> Runner {
        let file = write_config(config);
        let mut r =
            Runner::start_args(&[&["--config", file.path(), "--process", "0"], extra].concat());
        r._config = Some(file);
        r
    }

    fn start_args(args: &[&str]) -> Runner {
        let mut child = Command::new(BIN)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Runner {
            _config: None,
            child,
            stdin,
            lines,
        }
    }

    fn next(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(TIMEOUT)
            .expect("no line from the runner");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line:?}: {e}"))
    }

    /// Asserts that nothing is printed for `wait` and the process keeps running.
    fn assert_quiet(&mut self, wait: Duration) {
        match self.lines.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {}
            other => panic!("expected the runner to wait, got {other:?}"),
        }
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "runner exited while it should wait"
        );
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits for the exit (with a deadline); returns the status and the rest of stdout.
    fn finish(mut self) -> (std::process::ExitStatus, Vec<Value>, String) {
        let deadline = Instant::now() + TIMEOUT;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("runner did not exit");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let mut rest = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            rest.push(
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line:?}: {e}")),
            );
        }
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut stderr).unwrap();
        (status, rest, stderr)
    }
}

fn event(v: &Value) -> &str {
    v["event"]
        .as_str()
        .unwrap_or_else(|| panic!("no event in {v}"))
}

fn thp_always() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| s.contains("[always]"))
}

/// Checks the phase lines of the small scenario.
fn check_small_phases(phases: &[&Value]) {
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fill0", "fill1", "access", "nap", "scan"]);
    let counts: Vec<u64> = phases
        .iter()
        .map(|p| p["accesses"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [64, 32, 500, 0, 96]);
    let mut last_end = 0;
    for (i, p) in phases.iter().enumerate() {
        assert_eq!(p["process"], "small");
        assert_eq!(p["index"].as_u64(), Some(i as u64));
        let (start, end) = (
            p["start_ns"].as_u64().unwrap(),
            p["end_ns"].as_u64().unwrap(),
        );
        assert!(
            last_end <= start && start <= end,
            "times go backwards at phase {i}: {p}"
        );
        last_end = end;
        assert!(p["minflt"].is_u64() && p["majflt"].is_u64(), "{p}");
    }
    let nap = phases[3];
    assert!(
        nap["end_ns"].as_u64().unwrap() - nap["start_ns"].as_u64().unwrap() >= 1_000_000,
        "{nap}"
    );
    if !thp_always() {
        // Every page of a fresh region faults once when filled.
        assert!(phases[0]["minflt"].as_u64().unwrap() >= 64, "{}", phases[0]);
        assert!(phases[1]["minflt"].as_u64().unwrap() >= 32, "{}", phases[1]);
    }
}

#[test]
fn rw_stores_take_the_read_fault_first() {
    // The kernel's answer to the simulator's: on a fresh region an rw store is two faults a
    // page (the load maps the zero page, the store copies it), a plain store one.
    if thp_always() {
        return;
    }
    let seq = |region: u32, rw: bool| json!({"kind": "sequential", "regions": [region], "passes": 1, "write_percent": 100, "rw": rw});
    let config = lowered(
        3,
        json!([{"name": "p", "cgroup": 0,
            "regions": [{"name": "a", "pages": 1024, "content": "text", "variants": 8},
                        {"name": "b", "pages": 1024, "content": "text", "variants": 8}],
            "phases": [phase("rw", seq(0, true)), phase("w", seq(1, false))]}]),
    );
    let r = Runner::start(&config, &["--no-wait"]);
    assert_eq!(event(&r.next()), "ready");
    let (status, rest, stderr) = r.finish();
    assert!(status.success(), "{status:?} {stderr}");
    let minflt: Vec<u64> = rest
        .iter()
        .filter(|v| event(v) == "phase")
        .map(|p| p["minflt"].as_u64().unwrap())
        .collect();
    // A few faults more than the pages: the runner's own (stack, page tables) are not locked away entirely.
    assert!((2048..2048 + 64).contains(&minflt[0]), "rw: {minflt:?}");
    assert!(
        (1024..1024 + 64).contains(&minflt[1]),
        "plain stores: {minflt:?}"
    );
}

#[test]
fn runs_every_phase_without_waiting() {
    let r = Runner::start(&small(), &["--no-wait"]);
    let ready = r.next();
    assert_eq!(event(&ready), "ready");
    assert_eq!(ready["pid"].as_u64(), Some(u64::from(r.child.id())));
    let (status, rest, stderr) = r.finish();
    assert!(status.success(), "{status:?} {stderr}");
    let phases: Vec<&Value> = rest.iter().filter(|v| event(v) == "phase").collect();
    check_small_phases(&phases);
    assert_eq!(rest.len(), 6, "{rest:?}");
    assert_eq!(event(rest.last().unwrap()), "phases_done");
}

/// A compact trace file (reclaimlab_workload::trace) of `n` accesses over `pages` pages: a
/// scattered walk, every third access a write.
fn trace_file(n: u32, pages: u32) -> TempFile {
    let mut b = reclaimlab_workload::trace::MAGIC.to_vec();
    b.extend_from_slice(&u64::from(n).to_le_bytes());
    for i in 0..n {
        let w = (i.wrapping_mul(2_654_435_761) % pages)
            | if i % 3 == 0 {
                reclaimlab_workload::trace::WRITE_BIT
            } else {
                0
            };
        b.extend_from_slice(&w.to_le_bytes());
    }
    TempFile::new(&b)
}

/// Every kind of access phase, in process 1 (so the stream's process index matters); the trace
/// phase replays `trace` (130 pages: regions c and a).
fn mixed(trace: &TempFile) -> Value {
    let other = json!({"name": "other", "cgroup": 0, "regions": [{"name": "x", "pages": 8, "content": "zero", "variants": 1}],
                       "phases": [phase("f", json!({"kind": "fill", "region": 0}))]});
    let random = |dist: Value, write_percent: u8| json!({"kind": "random", "regions": [2, 0, 1], "dist": dist, "count": 700, "duration_ns": null, "write_percent": write_percent});
    lowered(
        9,
        json!([other, {
            "name": "mixed", "cgroup": 0,
            "regions": [
                {"name": "a", "pages": 100, "content": "text", "variants": 8},
                {"name": "b", "pages": 50, "content": "mix1000", "variants": 5000},
                {"name": "c", "pages": 30, "content": "same:0x5a", "variants": 3}
            ],
            "phases": [
                phase("fill-b", json!({"kind": "fill", "region": 1})),
                phase("seq", json!({"kind": "sequential", "regions": [1, 0, 1], "passes": 2, "write_percent": 30, "rw": true})),
                phase("uni", random(json!({"kind": "uniform"}), 50)),
                phase("nap", json!({"kind": "sleep", "duration_ns": 10})),
                phase("hot", random(json!({"kind": "hot_cold", "hot_percent": 10, "hot_access_percent": 90}), 0)),
                phase("zipf", random(json!({"kind": "zipf", "theta": 0.99}), 100)),
                phase("replay", json!({"kind": "trace", "regions": [2, 0], "trace": {"path": trace.path(), "sha256": "test"},
                                       "passes": 2, "limit": 1500})),
                phase("timed", json!({"kind": "random", "regions": [0], "dist": {"kind": "uniform"}, "count": null,
                                       "duration_ns": 2_000_000, "write_percent": 20}))
            ]
        }]),
    )
}

/// The accesses the simulator makes in phase `index` of process `process` of `config`.
fn simulator_accesses(config: &Value, process: usize, index: usize) -> AccessGen {
    let p = &config["processes"][process];
    let pages: Vec<u64> = p["regions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["pages"].as_u64().unwrap())
        .collect();
    let phase: Phase = serde_json::from_value(p["phases"][index]["phase"].clone()).unwrap();
    let rng = stream(
        config["seed"].as_u64().unwrap(),
        Stream::Access,
        process as u64,
        index as u64,
    );
    AccessGen::new(&phase, &pages, rng)
}

/// Runs `mixed` with `--trace K` and compares every phase's traced prefix with `AccessGen`.
fn trace_matches_access_gen(dry_run: bool) {
    let trace = trace_file(1000, 130);
    let config = mixed(&trace);
    let file = write_config(&config);
    let k = 5000u64;
    let trace = k.to_string();
    let mut args = vec![
        "--config",
        file.path(),
        "--process",
        "1",
        "--no-wait",
        "--trace",
        &trace,
    ];
    if dry_run {
        args.push("--dry-run");
    }
    let r = Runner::start_args(&args);
    assert_eq!(event(&r.next()), "ready");
    let (status, lines, stderr) = r.finish();
    assert!(status.success(), "{status:?} {stderr}");
    let mut traced: Vec<Access> = Vec::new();
    let mut phases = 0;
    for v in &lines {
        match event(v) {
            "access" => traced.push(Access {
                region: v["region"].as_u64().unwrap() as u32,
                page: v["page"].as_u64().unwrap(),
                write: v["write"].as_bool().unwrap(),
            }),
            "phase" => {
                let index = v["index"].as_u64().unwrap() as usize;
                assert_eq!(index, phases);
                let accesses = v["accesses"].as_u64().unwrap();
                assert_eq!(traced.len() as u64, accesses.min(k), "phase {v}");
                let expect: Vec<Access> = simulator_accesses(&config, 1, index)
                    .take(traced.len())
                    .collect();
                assert_eq!(
                    traced, expect,
                    "phase {index} ({}) differs from AccessGen",
                    v["phase"]
                );
                if index != 7 {
                    // Count-bound phases make exactly the generator's accesses.
                    assert_eq!(
                        accesses,
                        simulator_accesses(&config, 1, index).count() as u64,
                        "{v}"
                    );
                } else {
                    assert!(accesses > 0, "{v}");
                    assert!(
                        v["end_ns"].as_u64().unwrap() - v["start_ns"].as_u64().unwrap()
                            >= 2_000_000,
                        "{v}"
                    );
                }
                traced.clear();
                phases += 1;
            }
            "phases_done" => {}
            other => panic!("unexpected event {other}: {v}"),
        }
    }
    assert_eq!(phases, 8);
    assert_eq!(event(lines.last().unwrap()), "phases_done");
}

#[test]
fn dry_run_trace_equals_access_gen() {
    trace_matches_access_gen(true);
}

#[test]
fn real_run_trace_equals_access_gen() {
    trace_matches_access_gen(false);
}

#[test]
fn protocol_ready_go_phases_done_exit() {
    let mut r = Runner::start(&small(), &[]);
    let ready = r.next();
    assert_eq!(event(&ready), "ready");
    assert_eq!(ready["pid"].as_u64(), Some(u64::from(r.child.id())));
    // Nothing runs before `go`.
    r.assert_quiet(Duration::from_millis(300));
    r.send("go");
    let phases: Vec<Value> = (0..5).map(|_| r.next()).collect();
    assert!(phases.iter().all(|p| event(p) == "phase"), "{phases:?}");
    check_small_phases(&phases.iter().collect::<Vec<_>>());
    assert_eq!(event(&r.next()), "phases_done");
    // Memory stays mapped until `exit`.
    r.assert_quiet(Duration::from_millis(300));
    r.send("exit");
    let (status, rest, stderr) = r.finish();
    assert!(status.success(), "{status:?} {stderr}");
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn exits_on_stdin_eof_before_go() {
    let mut r = Runner::start(&small(), &[]);
    assert_eq!(event(&r.next()), "ready");
    r.close_stdin();
    let (status, rest, stderr) = r.finish();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        rest.iter().all(|v| event(v) == "error"),
        "ran phases after EOF: {rest:?}"
    );
    assert!(stderr.contains("stdin closed before `go`"), "{stderr}");
}

#[test]
fn exits_on_stdin_eof_after_phases_done() {
    let mut r = Runner::start(&small(), &[]);
    assert_eq!(event(&r.next()), "ready");
    r.send("go");
    for _ in 0..5 {
        assert_eq!(event(&r.next()), "phase");
    }
    assert_eq!(event(&r.next()), "phases_done");
    r.close_stdin();
    let (status, rest, stderr) = r.finish();
    assert!(status.success(), "{status:?} {stderr}");
    assert!(rest.is_empty());
}

#[test]
fn exit_before_go_cancels_the_run() {
    let mut r = Runner::start(&small(), &[]);
    assert_eq!(event(&r.next()), "ready");
    r.send("exit");
    let (status, rest, stderr) = r.finish();
    assert!(status.success(), "{status:?} {stderr}");
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn unexpected_line_is_an_error() {
    let mut r = Runner::start(&small(), &[]);
    assert_eq!(event(&r.next()), "ready");
    r.send("start");
    let (status, rest, stderr) = r.finish();
    assert_eq!(status.code(), Some(2));
    assert_eq!(rest.len(), 1);
    assert_eq!(event(&rest[0]), "error");
    assert!(
        rest[0]["message"]
            .as_str()
            .unwrap()
            .contains("expected `go`"),
        "{rest:?}"
    );
    assert!(stderr.contains("expected `go`"), "{stderr}");
}

#[test]
fn exit_phase_ends_the_run_without_phases_done() {
    let mut config = small();
    let phases = config["processes"][0]["phases"].as_array_mut().unwrap();
    phases.insert(1, phase("bye", json!({"kind": "exit"})));
    let mut r = Runner::start(&config, &[]);
    assert_eq!(event(&r.next()), "ready");
    r.send("go");
    let fill = r.next();
    assert_eq!(
        (event(&fill), fill["phase"].as_str()),
        ("phase", Some("fill0"))
    );
    // No `exit` needed: the Exit phase ends the process.
    let (status, rest, stderr) = r.finish();
    assert!(status.success(), "{status:?} {stderr}");
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0]["phase"], "bye");
    assert_eq!(rest[0]["index"], 1);
    assert_eq!(rest[0]["accesses"], 0);
}

#[test]
fn sigterm_ends_the_runner() {
    let r = Runner::start(&small(), &[]);
    assert_eq!(event(&r.next()), "ready");
    // SAFETY: signalling our own child.
    assert_eq!(
        unsafe { libc::kill(r.child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let (status, _, _) = r.finish();
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
}

/// Runs the binary with `args` and expects exit code 2 and an error event containing `want`.
fn expect_usage_error(args: &[&str], want: &str) {
    let r = Runner::start_args(args);
    let (status, lines, stderr) = r.finish();
    assert_eq!(status.code(), Some(2), "{args:?}: {lines:?} {stderr}");
    assert_eq!(lines.len(), 1, "{args:?}: {lines:?}");
    assert_eq!(event(&lines[0]), "error");
    let message = lines[0]["message"].as_str().unwrap();
    assert!(
        message.contains(want),
        "{args:?}: message {message:?} lacks {want:?}"
    );
    assert!(stderr.contains(message), "{args:?}: stderr {stderr:?}");
}

#[test]
fn bad_config_exits_2_naming_the_problem() {
    let mut bad_content = small();
    bad_content["processes"][0]["regions"][1]["content"] = json!("urandom");
    let mut bad_region = small();
    bad_region["processes"][0]["phases"][1]["phase"]["region"] = json!(7);
    let mut both = small();
    both["processes"][0]["phases"][2]["phase"]["duration_ns"] = json!(5);
    let mut zero_pages = small();
    zero_pages["processes"][0]["regions"][0]["pages"] = json!(0);
    let mut no_seed = small();
    no_seed.as_object_mut().unwrap().remove("seed");
    let trace_phase = |path: &str| json!({"kind": "trace", "regions": [1, 0], "trace": {"path": path, "sha256": "x"}, "passes": 1});
    let mut no_trace = small();
    no_trace["processes"][0]["phases"][2]["phase"] = trace_phase("/nonexistent/t.rltrace");
    let not_trace = TempFile::new(b"RLTRACE0 and some more bytes");
    let mut bad_trace = small();
    bad_trace["processes"][0]["phases"][2]["phase"] = trace_phase(not_trace.path());
    // Index 96 where the two regions have 96 pages.
    let mut words = reclaimlab_workload::trace::MAGIC.to_vec();
    words.extend_from_slice(&2u64.to_le_bytes());
    words.extend_from_slice(&[5, 0, 0, 0, 96, 0, 0, 0]);
    let wide = TempFile::new(&words);
    let mut too_wide = small();
    too_wide["processes"][0]["phases"][2]["phase"] = trace_phase(wide.path());
    let cases = [
        (
            no_trace,
            "0",
            "processes[0] (small).phases[2]: trace file /nonexistent/t.rltrace: No such file",
        ),
        (bad_trace, "0", "not a reclaimlab compact trace"),
        (
            too_wide,
            "0",
            "page index 96 is outside the phase's regions (96 pages)",
        ),
        (
            bad_content,
            "0",
            "processes[0] (small).regions[1].content: bad page content \"urandom\"",
        ),
        (
            bad_region,
            "0",
            "processes[0] (small).phases[1] (fill1): region index 7 out of range",
        ),
        (both, "0", "exactly one of count and duration"),
        (zero_pages, "0", "pages and variants must be > 0"),
        (no_seed, "0", "missing field `seed`"),
        (small(), "1", "--process 1: out of range"),
    ];
    for (config, process, want) in cases {
        let file = write_config(&config);
        expect_usage_error(&["--config", file.path(), "--process", process], want);
    }
    let garbage = TempFile::new(b"{not json");
    expect_usage_error(
        &["--config", garbage.path(), "--process", "0"],
        "not a lowered scenario",
    );
    expect_usage_error(
        &["--config", "/nonexistent/lowered.json", "--process", "0"],
        "cannot read config",
    );
}

#[test]
fn bad_arguments_exit_2() {
    let file = write_config(&small());
    let p = file.path();
    expect_usage_error(&["--process", "0"], "--config is required");
    expect_usage_error(&["--config", p], "--process is required");
    expect_usage_error(
        &["--config", p, "--process", "one"],
        "--process: expected a process index",
    );
    expect_usage_error(
        &["--config", p, "--process", "0", "--trace"],
        "--trace needs a value",
    );
    expect_usage_error(
        &["--config", p, "--process", "0", "--fast"],
        "unknown argument \"--fast\"",
    );
    expect_usage_error(
        &["--config", p, "--process", "0", "--process", "0"],
        "--process given twice",
    );
    // The `--flag=value` form works.
    let r = Runner::start_args(&[
        &format!("--config={p}"),
        "--process=0",
        "--no-wait",
        "--dry-run",
    ]);
    let (status, lines, stderr) = r.finish();
    assert!(status.success(), "{stderr}");
    assert_eq!(event(lines.last().unwrap()), "phases_done");
}

#[test]
fn swapon_mode_takes_a_priority_and_reports_the_kernels_refusal() {
    expect_usage_error(&["--swapon", "/dev/zram9"], "--swapon needs --priority");
    expect_usage_error(
        &["--swapon", "/dev/zram9", "--priority", "40000"],
        "--priority: expected a swap priority 0..32767",
    );
    expect_usage_error(&["--priority", "5"], "--priority goes with --swapon");
    // A path that is no swap area: swapon(2) fails (ENOENT; EPERM without root), exit 1, the
    // call named in the error.
    let r = Runner::start_args(&[
        "--swapon",
        "/nonexistent/reclaimlab-swap",
        "--priority",
        "5",
    ]);
    let (status, lines, stderr) = r.finish();
    assert_eq!(status.code(), Some(1), "{lines:?} {stderr}");
    let message = lines[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("swapon /nonexistent/reclaimlab-swap -p 5: "),
        "{message}"
    );
}
