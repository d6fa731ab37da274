"""Comparing kernel runs at the speed they ran at (lab/speed.py, validate.at_speed and the
busy-host correction), without root or a kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from reclaimlab.lab import speed
from reclaimlab.lab.result import busy_host_free_s, phase_record
from reclaimlab.result import RunResult
from reclaimlab.scenario import load
from reclaimlab.validate import at_speed, rows

SCENARIO = """\
schema_version = 1
name = "s"
[machine]
memory = "1GiB"
cpus = 2
[[processes]]
name = "p"
[[processes.regions]]
name = "r"
size = "4MiB"
content = "text"
[[processes.phases]]
kind = "fill"
region = "r"
"""


def _kernel(probe: list[int] | None, elapsed: float = 2.0, delay: float | None = 0.5) -> RunResult:
    rec = {
        "process": "p",
        "phase": "fill0",
        "elapsed_s": elapsed,
        "accesses": 1000,
        "accesses_per_s": 1000 / elapsed,
        "outcome": "completed",
    }
    if delay is not None:
        rec["run_delay_s"] = delay
    return RunResult("s", "kernel", {}, {}, [rec], stats={} if probe is None else {"speed_probe_ns": probe})


def test_speed_factor_is_the_median_run_probe_over_the_profiles() -> None:
    assert speed.run_probe_ns({"speed_probe_ns": [1000, 1400]}) == 1200.0
    assert speed.run_probe_ns({}) is None
    assert speed.speed_factor([1200.0, 2400.0, None, 1800.0], 1200.0) == 1.5
    assert speed.speed_factor([None], 1200.0) is None
    assert speed.speed_factor([1200.0], None) is None


def test_the_probe_measures_something(real_core: object) -> None:
    assert speed.probe_ns(samples=1, reps=3) > 0


def test_runner_phase_events_carry_the_cpu_wait() -> None:
    ev = {
        "process": "p",
        "phase": "f",
        "start_ns": 0,
        "end_ns": 2_000_000_000,
        "accesses": 10,
        "cpu_ns": 1_200_000_000,
        "run_delay_ns": 500_000_000,
    }
    rec = phase_record(ev)
    assert (rec["cpu_s"], rec["run_delay_s"]) == (1.2, 0.5)
    assert busy_host_free_s(rec) == 1.5
    del ev["run_delay_ns"], ev["cpu_ns"]
    assert "run_delay_s" not in phase_record(ev) and busy_host_free_s(phase_record(ev)) == 2.0


def test_kernel_phase_times_leave_out_the_wait_only_when_the_scenario_cannot_wait_on_itself() -> None:
    sim = RunResult("s", "sim", {"machine": {"cpus": 2}, "processes": [{}]}, {}, [_kernel(None).phase_records[0]])
    row = next(r for r in rows([_kernel(None)], sim) if r.metric == "p/fill0 elapsed_s")
    assert row.kernel is not None and row.kernel.median == 1.5
    # Three processes on two CPUs: part of the wait is their own contention, kept.
    busy = RunResult("s", "sim", {"machine": {"cpus": 2}, "processes": [{}, {}, {}]}, {}, sim.phase_records)
    row = next(r for r in rows([_kernel(None)], busy) if r.metric == "p/fill0 elapsed_s")
    assert row.kernel is not None and row.kernel.median == 2.0


def test_at_speed_scales_the_cpu_costs_but_not_the_quantum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text('schema_version = 1\nkind = "t"\n[costs]\naccess_ns = 100\nfault_ns = 1000\n[measurements]\nspeed_probe_ns = 1000\n')
    monkeypatch.setenv("RECLAIMLAB_PROFILE", str(profile))
    sc = load(SCENARIO)
    slow = at_speed(sc, [_kernel([2000, 2000]), _kernel([2000, 2000])])
    assert slow.costs["access_ns"] == 200 and slow.costs["fault_ns"] == 2000
    assert slow.costs["process_quantum_ns"] == sc.costs.get("process_quantum_ns", slow.costs["process_quantum_ns"])
    assert at_speed(sc, [_kernel(None)]) is sc  # runs recorded without a probe
    monkeypatch.setenv("RECLAIMLAB_PROFILE", "none")
    assert at_speed(sc, [_kernel([2000, 2000])]) is sc


def test_an_oom_killed_runner_is_an_outcome_when_the_kernel_counted_the_kill() -> None:
    from types import SimpleNamespace

    from reclaimlab.backends.kernel import _oom_outcome
    from reclaimlab.lab.errors import RunnerFailed

    config = {"processes": [{"phases": [{"name": "fill0"}, {"name": "access"}, {"name": "exit"}]}]}

    def runner() -> SimpleNamespace:
        done = {"process": "p", "phase": "fill0", "index": 0, "start_ns": 0, "end_ns": 100, "accesses": 5}
        return SimpleNamespace(index=0, name="p", phases=[done], killed_ns=1_000_000_600, killed_error="runner for process 'p' stopped")

    r = runner()
    _oom_outcome([r], config, {"vmstat.oom_kill": 3}, {"vmstat.oom_kill": 4}, go_ns=1_000_000_000)
    assert r.phases[-1] == {
        "process": "p",
        "phase": "access",
        "index": 1,
        "start_ns": 100,
        "end_ns": 600,
        "accesses": 0,
        "outcome": "oom_killed",
    }
    assert phase_record(r.phases[-1])["outcome"] == "oom_killed"
    # Killed, but the kernel counted no OOM kill: someone else's SIGKILL, still a failure.
    with pytest.raises(RunnerFailed, match="counted 0 OOM kill"):
        _oom_outcome([runner()], config, {"vmstat.oom_kill": 4}, {"vmstat.oom_kill": 4}, go_ns=1_000_000_000)


def test_validate_counts_oom_kills_per_run() -> None:
    def run(backend: str, outcome: str) -> RunResult:
        rec = {"process": "p", "phase": "access", "elapsed_s": 1.0, "accesses": 1, "accesses_per_s": 1.0, "outcome": outcome}
        return RunResult("s", backend, {"machine": {"cpus": 2}, "processes": [{}]}, {}, [rec])

    out = rows([run("kernel", "oom_killed"), run("kernel", "completed"), run("kernel", "oom_killed")], run("sim", "completed"))
    row = next(r for r in out if r.metric == "p oom_killed")
    assert row.source == "outcome" and row.kernel is not None and (row.kernel.median, row.kernel.max) == (1.0, 1.0) and row.sim == 0
    assert not any(r.metric == "p oom_killed" for r in rows([run("kernel", "completed")], run("sim", "completed")))
