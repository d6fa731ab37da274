"""The workload runners: one ``reclaimlab-runner`` process per scenario process.

Protocol (crates/reclaimlab-runner): ``reclaimlab-runner --config LOWERED.json --process N``
prints JSON lines on stdout:

* ``{"event":"ready","pid":P}``, then it waits for a line ``go`` on stdin (the driver moves P
  into its cgroup in between, so that everything the workload allocates is charged there);
* per phase ``{"event":"phase","process":..,"phase":..,"index":i,"start_ns":..,"end_ns":..,
  "accesses":..,"minflt":..,"majflt":..}``;
* ``{"event":"waiting","index":i}`` before a phase with an ``after`` condition (the lowered
  phase's ``after``: a phase of another process); the driver answers ``continue`` once that
  phase has ended (its ``phase`` line came) or that runner stopped, and the phase starts then;
* ``{"event":"phases_done"}``, then it waits for ``exit`` (or EOF) with its memory still mapped;
* ``{"event":"error","message":..}`` and exit code 2 on failure.

An ``exit`` phase makes the runner exit right after that phase's line (no ``phases_done``).

The runners are started in their own session (a Ctrl-C on the terminal reaches only the
driver, which restores), with ``PR_SET_PDEATHSIG = SIGKILL`` (a driver that dies, however,
takes its runners with it) and without the driver's other file descriptors (the lab lock).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from reclaimlab.lab import host
from reclaimlab.lab.errors import LabError, LabTimeout, LabUnavailable, RunnerFailed

__all__ = [
    "PDEATHSIG_ENV",
    "RUNNER_ENV",
    "Runner",
    "RunnerSet",
    "build_runner",
    "locate_runner",
    "repo_root",
    "runner_command",
    "runner_version",
]

RUNNER_ENV = "RECLAIMLAB_RUNNER"
#: Set to 0 to start runners without PR_SET_PDEATHSIG (tests use it to leave an orphan that
#: ``lab restore`` must kill).
PDEATHSIG_ENV = "RECLAIMLAB_RUNNER_PDEATHSIG"
RUNNER_NAME = "reclaimlab-runner"
READY_TIMEOUT_S = 30.0
EXIT_TIMEOUT_S = 10.0
PR_SET_PDEATHSIG = 1


def repo_root() -> Path | None:
    """The source checkout this package lives in, if it is one (it has the runner's crate)."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "crates" / RUNNER_NAME / "Cargo.toml").is_file() else None


def runner_command() -> list[str] | None:
    """The runner's argv prefix: $RECLAIMLAB_RUNNER (a path, or a command line such as
    ``python3 fake_runner.py``), else target/release/reclaimlab-runner in the checkout."""
    env = os.environ.get(RUNNER_ENV)
    if env:
        if Path(env).is_file():
            if not os.access(env, os.X_OK):
                raise LabUnavailable(f"{RUNNER_ENV}={env} is not executable")
            return [env]
        argv = shlex.split(env)
        if not argv or shutil.which(argv[0]) is None:
            raise LabUnavailable(f"{RUNNER_ENV}={env}: {argv[0] if argv else '(empty)'} not found")
        return argv
    root = repo_root()
    if root is not None:
        binary = root / "target" / "release" / RUNNER_NAME
        if binary.is_file() and os.access(binary, os.X_OK):
            return [str(binary)]
    return None


def locate_runner() -> list[str]:
    cmd = runner_command()
    if cmd is None:
        root = repo_root()
        where = f" in {root}" if root else ""
        raise LabUnavailable(
            f"the workload runner is not built: run `cargo build --release -p {RUNNER_NAME}`{where} "
            f"(or `reclaimlab run --backend kernel --build-runner ...`), or point {RUNNER_ENV} at the binary"
        )
    return cmd


def build_runner(echo: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> list[str]:
    """``cargo build --release -p reclaimlab-runner`` in the checkout; its output goes to stderr."""
    root = repo_root()
    cargo = shutil.which("cargo")
    if root is None or cargo is None:
        raise LabUnavailable(
            "cannot build the workload runner: " + ("cargo is not on PATH" if cargo is None else "this is not a source checkout")
        )
    echo(f"building the workload runner: cargo build --release -p {RUNNER_NAME} (in {root})")
    r = subprocess.run([cargo, "build", "--release", "-p", RUNNER_NAME], cwd=root, check=False, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise LabUnavailable(f"building the workload runner failed (cargo exit {r.returncode}); see the output above")
    return locate_runner()


def runner_version(cmd: list[str]) -> str | None:
    try:
        r = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=10, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = r.stdout.strip().splitlines()
    return out[0] if r.returncode == 0 and out else None


_libc: Any = None


def _child_setup(parent: int, deathsig: bool) -> Callable[[], None]:
    """Runs in the child between fork and exec: die with the driver."""
    global _libc
    if deathsig and _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)  # loaded before fork: nothing to load in the child
    libc = _libc

    def setup() -> None:
        if deathsig:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the driver died before prctl took effect
                os._exit(1)

    return setup


@dataclass
class Runner:
    index: int
    name: str
    expected_phases: int  # phase lines to expect (up to and including an exit phase)
    ends_with_exit: bool
    proc: subprocess.Popen[bytes]
    stderr: IO[bytes]
    start_time: int
    buf: bytes = b""
    ready_pid: int | None = None
    phases: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False  # phases_done seen, or exited after its exit phase
    eof: bool = False
    other: list[dict[str, Any]] = field(default_factory=list)
    #: Killed by SIGKILL before its phases were done (time.monotonic_ns() when seen), and the
    #: error it would be; the backend decides from the kernel's oom_kill count whether that
    #: was the OOM killer (an outcome) or not (RunnerFailed with this message).
    killed_ns: int | None = None
    killed_error: str = ""
    #: The phase index waiting for its ``after`` condition (``waiting`` seen, not yet answered).
    waiting: int | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def label(self) -> str:
        return f"runner for process {self.name!r} (pid {self.pid})"

    def stderr_tail(self, n: int = 2000) -> str:
        try:
            self.stderr.seek(0)
            data = self.stderr.read()
        except (OSError, ValueError):
            return ""
        text = data.decode(errors="replace").strip()
        return text[-n:]

    def send(self, line: str) -> None:
        stdin = self.proc.stdin
        if stdin is None or stdin.closed:
            return
        try:
            stdin.write(line.encode() + b"\n")
            stdin.flush()
        except (BrokenPipeError, OSError):
            if not self.done:
                raise RunnerFailed(f"{self.label()} closed its stdin: {self.stderr_tail() or 'no message'}") from None


class RunnerSet:
    """Start, drive and stop the runners of one run."""

    def __init__(
        self,
        cmd: list[str],
        config_path: Path,
        config: dict[str, Any],
        on_start: Callable[[Runner], None],
        extra_args: list[str] | None = None,
        process_args: Callable[[int], list[str]] | None = None,
    ):
        self.cmd = cmd
        self.extra_args = list(extra_args or [])
        # Arguments for process i alone (the host lab's --cgroup-procs).
        self.process_args = process_args or (lambda _i: [])
        self.config_path = config_path
        self.config = config
        self.on_start = on_start
        self.runners: list[Runner] = []
        self.sel = selectors.DefaultSelector()
        self.go_ns: int | None = None

    # ------------------------------------------------------------------------------------
    def start(self) -> None:
        deathsig = os.environ.get(PDEATHSIG_ENV, "1") != "0"
        for i, proc_cfg in enumerate(self.config["processes"]):
            kinds = [ph["phase"]["kind"] for ph in proc_cfg["phases"]]
            n = kinds.index("exit") + 1 if "exit" in kinds else len(kinds)
            err = tempfile.TemporaryFile(prefix="reclaimlab-runner-", suffix=".stderr")
            try:
                proc = subprocess.Popen(
                    [*self.cmd, "--config", str(self.config_path), "--process", str(i), *self.extra_args, *self.process_args(i)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    close_fds=True,
                    start_new_session=True,
                    preexec_fn=_child_setup(os.getpid(), deathsig),  # safe: the driver has no threads
                )
            except OSError as e:
                err.close()
                raise LabUnavailable(f"cannot start the runner {self.cmd[0]}: {e.strerror or e}") from None
            start = host.proc_start_time(proc.pid) or 0
            r = Runner(i, proc_cfg["name"], n, "exit" in kinds, proc, err, start)
            self.runners.append(r)
            self.on_start(r)  # journaled right away: `lab restore` kills it if we die
            assert proc.stdout is not None
            os.set_blocking(proc.stdout.fileno(), False)
            self.sel.register(proc.stdout, selectors.EVENT_READ, r)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while any(r.ready_pid is None for r in self.runners):
            left = deadline - time.monotonic()
            if left <= 0:
                slow = [r.label() for r in self.runners if r.ready_pid is None]
                raise RunnerFailed(f"no 'ready' from {', '.join(slow)} within {timeout_s:.0f}s")
            self._poll(left)

    def go(self) -> None:
        self.go_ns = time.monotonic_ns()
        for r in self.runners:
            r.send("go")

    def run(self, deadline: float, tick: Callable[[], None], interval_s: float) -> None:
        """Drive the runners until all have finished their phases; ``tick()`` every
        ``interval_s`` (the sampler). LabTimeout at ``deadline`` (time.monotonic())."""
        next_tick = time.monotonic() + interval_s
        while not all(r.done for r in self.runners):
            now = time.monotonic()
            if now >= deadline:
                raise LabTimeout("the run exceeded its timeout; the runners were killed")
            if now >= next_tick:
                tick()
                next_tick += interval_s * max(1, int((now - next_tick) / interval_s) + 1)
                continue
            self._poll(min(next_tick, deadline) - now)

    def finish(self) -> None:
        """Tell the runners to exit (their memory is released) and reap them."""
        for r in self.runners:
            if r.proc.poll() is None:
                with contextlib.suppress(LabError):
                    r.send("exit")
            if r.proc.stdin is not None:
                with contextlib.suppress(OSError):
                    r.proc.stdin.close()
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        for r in self.runners:
            try:
                r.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                r.proc.kill()
                r.proc.wait()

    def kill(self) -> None:
        """SIGKILL every runner still running (ours: we started them) and reap it."""
        for r in self.runners:
            if r.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    r.proc.kill()
        for r in self.runners:
            with contextlib.suppress(subprocess.TimeoutExpired):
                r.proc.wait(timeout=EXIT_TIMEOUT_S)

    def close(self) -> None:
        self.kill()
        self.sel.close()
        for r in self.runners:
            for f in (r.proc.stdin, r.proc.stdout):
                if f is not None:
                    with contextlib.suppress(OSError):
                        f.close()
            r.stderr.close()

    # ------------------------------------------------------------------------------------
    def _poll(self, timeout: float) -> None:
        for key, _ in self.sel.select(timeout=max(0.0, timeout)):
            r: Runner = key.data
            try:
                chunk = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                self.sel.unregister(key.fileobj)
                self._eof(r)
                continue
            r.buf += chunk
            while b"\n" in r.buf:
                line, r.buf = r.buf.split(b"\n", 1)
                if line.strip():
                    self._event(r, line)

    def _after_met(self, r: Runner) -> bool:
        """Whether the phase runner ``r`` waits for has ended, or its runner has stopped
        (the simulator's ``after_met``)."""
        assert r.waiting is not None
        a = self.config["processes"][r.index]["phases"][r.waiting]["after"]
        q = self.runners[a["process"]]
        return q.done or q.eof or any(ev.get("index") == a["phase"] for ev in q.phases)

    def _release_waiters(self) -> None:
        for r in self.runners:
            if r.waiting is not None and self._after_met(r):
                r.waiting = None
                r.send("continue")

    def _event(self, r: Runner, line: bytes) -> None:
        try:
            ev = json.loads(line)
        except ValueError:
            raise RunnerFailed(f"{r.label()} broke the protocol: not a JSON line: {line[:200]!r}") from None
        what = ev.get("event") if isinstance(ev, dict) else None
        if what == "ready":
            r.ready_pid = int(ev.get("pid", r.pid))
            if r.ready_pid != r.pid:
                raise RunnerFailed(f"{r.label()} says it is pid {r.ready_pid}")
        elif what == "phase":
            r.phases.append(ev)
            self._release_waiters()
        elif what == "waiting":
            r.waiting = int(ev["index"])
            self._release_waiters()
        elif what == "phases_done":
            r.done = True
            self._release_waiters()
        elif what == "error":
            raise RunnerFailed(f"{r.label()} failed: {ev.get('message', '(no message)')}")
        else:
            r.other.append(ev)

    def _eof(self, r: Runner) -> None:
        r.eof = True
        self._release_waiters()
        try:
            code = r.proc.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            code = None
        if r.ends_with_exit and len(r.phases) >= r.expected_phases:
            r.done = True
            return
        if r.done:
            return
        tail = r.stderr_tail()
        if code is None:
            how = "still running"
        elif code == -signal.SIGKILL:
            how = "killed by SIGKILL (the memcg OOM killer, if its cgroup had nothing left to reclaim?)"
        elif code < 0:
            how = f"killed by signal {-code}"
        else:
            how = f"exit code {code}"
        message = f"{r.label()} stopped after {len(r.phases)} of {r.expected_phases} phases ({how})" + (f": {tail}" if tail else "")
        if code == -signal.SIGKILL:
            # Perhaps the OOM killer: the backend checks the kernel's count (oom_outcome).
            r.killed_ns = time.monotonic_ns()
            r.killed_error = message
            r.done = True
            return
        raise RunnerFailed(message)
