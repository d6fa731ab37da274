"""validate's statistics on synthetic RunResults, and the CLI with fake backends (no root)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import reclaimlab
from conftest import MINIMAL
from reclaimlab.cli import app
from reclaimlab.lab.result import KernelRunResult
from reclaimlab.report import DocError
from reclaimlab.result import RunResult
from reclaimlab.validate import (
    ALL_RATES,
    FILL_RATE,
    RANDOM_RATE,
    KernelResultsError,
    Row,
    Stat,
    ValidateResult,
    format_rel_error,
    kernel_label,
    kernels_markdown,
    relative_error,
    revalidate,
    rows,
    scenario_markdown,
    select,
    summarize,
    summary_entries,
    summary_markdown,
    validate,
)
from reclaimlab.validation_doc import update_doc


def _result(backend: str, counters: dict[str, int], rate: float = 100.0, elapsed: float = 1.0) -> RunResult:
    return RunResult(
        scenario="s",
        backend=backend,
        config={},
        counters=counters,
        phase_records=[
            {"process": "p", "phase": "fill0", "elapsed_s": elapsed, "accesses": 10, "accesses_per_s": rate, "outcome": "completed"}
        ],
    )


KERNEL = [
    _result("kernel", {"vmstat.pswpout": 100, "vmstat.zswpout": 0, "vmstat.pgfault": 7}, rate=90.0, elapsed=1.2),
    _result("kernel", {"vmstat.pswpout": 120, "vmstat.zswpout": 0, "vmstat.pgfault": 9}, rate=110.0, elapsed=1.0),
    _result("kernel", {"vmstat.pswpout": 80, "vmstat.zswpout": 0, "vmstat.pgfault": 8}, rate=100.0, elapsed=0.8),
]
SIM = _result("sim", {"vmstat.pswpout": 150, "vmstat.zswpout": 5, "vmstat.pgfault": 8, "vmstat.swap_ra": 0}, rate=100.0, elapsed=0.5)


def test_summarize() -> None:
    assert summarize([3, 1, 2]) == Stat(2.0, 1.0, 3.0, 3)
    assert summarize([1, 2]) == Stat(1.5, 1.0, 2.0, 2)
    assert summarize([]) is None


def test_relative_error() -> None:
    assert relative_error(150, 100) == 0.5
    assert relative_error(50, 100) == -0.5
    assert relative_error(0, 0) == 0.0
    assert math.isinf(relative_error(5, 0))
    assert relative_error(-1, -2) == 0.5  # |median|: the sign says whether sim is above
    assert format_rel_error(0.5) == "+50.0%"
    assert format_rel_error(math.inf) == "n/a (kernel 0)"
    assert format_rel_error(None) == "-"


def test_rows() -> None:
    by = {r.metric: r for r in rows(KERNEL, SIM)}
    assert by["vmstat.pswpout"] == Row("vmstat.pswpout", "vmstat", Stat(100.0, 80.0, 120.0, 3), 150, 0.5, False)
    assert by["vmstat.pgfault"].rel_error == 0.0 and by["vmstat.pgfault"].inside is True
    z = by["vmstat.zswpout"]
    assert z.kernel == Stat(0.0, 0.0, 0.0, 3) and z.rel_error is not None and math.isinf(z.rel_error) and z.inside is False
    assert by["vmstat.swap_ra"].kernel is None and by["vmstat.swap_ra"].rel_error is None  # the kernel does not report it
    rate = by["p/fill0 accesses/s"]
    assert rate.source == "phase" and rate.kernel == Stat(100.0, 90.0, 110.0, 3) and rate.inside is True and rate.rel_error == 0.0
    elapsed = by["p/fill0 elapsed_s"]
    assert elapsed.kernel == Stat(1.0, 0.8, 1.2, 3) and elapsed.rel_error == pytest.approx(-0.5) and elapsed.inside is False
    assert [r.metric for r in rows(KERNEL, SIM)][-2:] == ["p/fill0 accesses/s", "p/fill0 elapsed_s"]


def _with_faults(r: RunResult, minflt: int, majflt: int) -> RunResult:
    from dataclasses import replace

    return replace(r, phase_records=[{**p, "minflt": minflt, "majflt": majflt} for p in r.phase_records])


def test_rows_compare_phase_faults_where_the_kernel_has_them() -> None:
    kernel = [_with_faults(r, m, M) for r, m, M in zip(KERNEL, (10, 12, 14), (3, 5, 4), strict=True)]
    by = {r.metric: r for r in rows(kernel, _with_faults(SIM, 12, 6))}
    assert by["p/fill0 minflt"] == Row("p/fill0 minflt", "phase", Stat(12.0, 10.0, 14.0, 3), 12, 0.0, True)
    assert by["p/fill0 majflt"].rel_error == pytest.approx(0.5) and by["p/fill0 majflt"].inside is False
    # Kernel runs without the counts (recorded before they existed): no fault rows at all.
    assert not any("flt" in r.metric for r in rows(KERNEL, _with_faults(SIM, 12, 6)))
    # A simulator result without them: the kernel's spread, no simulator value.
    no_sim = {r.metric: r for r in rows(kernel, SIM)}["p/fill0 minflt"]
    assert no_sim.kernel == Stat(12.0, 10.0, 14.0, 3) and no_sim.sim is None and no_sim.rel_error is None


def test_select_hides_rows_zero_on_both_sides() -> None:
    all_rows = rows(KERNEL, SIM)
    shown = [r.metric for r in select(all_rows)]
    assert "vmstat.swap_ra" not in shown and "vmstat.zswpout" in shown
    assert [r.metric for r in select(all_rows, ["vmstat.pg*"])] == ["vmstat.pgfault", "p/fill0 accesses/s", "p/fill0 elapsed_s"]
    assert len(select(all_rows, show_all=True)) == len(all_rows)


def test_json_has_no_infinities() -> None:
    d = rows(KERNEL, SIM)[0].to_dict()
    assert set(d) == {"metric", "source", "kernel", "sim", "rel_error", "rel_error_text", "inside"}
    z = next(r for r in rows(KERNEL, SIM) if r.metric == "vmstat.zswpout").to_dict()
    assert z["rel_error"] is None and z["rel_error_text"] == "n/a (kernel 0)"


def test_validate_runs_the_kernel_n_times_and_the_sim_once(write: Callable[..., Path]) -> None:
    s = reclaimlab.load(write(MINIMAL))
    calls: list[str] = []

    def kernel(sc: Any, **kw: Any) -> RunResult:
        calls.append("kernel")
        return KERNEL[len([c for c in calls if c == "kernel"]) - 1]

    def sim(sc: Any, **kw: Any) -> RunResult:
        calls.append("sim")
        return SIM

    v = validate(s, reps=3, run_kernel=kernel, run_sim=sim)
    # The simulator runs after the kernel runs, at their speed (validate.at_speed).
    assert calls == ["kernel", "kernel", "kernel", "sim"]
    assert v.reps == 3
    d = json.loads(v.to_json())
    assert d["reps"] == 3 and len(d["kernel_runs"]) == 3 and d["sim"]["backend"] == "sim"
    with pytest.raises(ValueError, match="reps"):
        validate(s, reps=0, run_kernel=kernel, run_sim=sim)


def test_cli_validate(write: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from reclaimlab.backends import kernel, sim

    runs = iter(KERNEL)
    monkeypatch.setattr(kernel, "run", lambda sc, **kw: next(runs))
    monkeypatch.setattr(sim, "run", lambda sc, **kw: SIM)
    out = tmp_path / "v.json"
    r = CliRunner().invoke(app, ["validate", str(write(MINIMAL)), "--reps", "3", "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "simulator vs kernel (3 kernel runs)" in r.output
    assert "100 [80\N{EN DASH}120]" in r.output and "+50.0%" in r.output and "n/a (kernel 0)" in r.output
    assert "vmstat.pswpout" in [row["metric"] for row in json.loads(out.read_text())["rows"]]


# --- reusing stored kernel runs ---------------------------------------------------------------

NEW_SIM = _result("sim", {"vmstat.pswpout": 110, "vmstat.zswpout": 0, "vmstat.pgfault": 8}, rate=95.0, elapsed=1.1)


def _kernel_run(r: RunResult) -> KernelRunResult:
    return KernelRunResult(
        scenario=r.scenario,
        backend="kernel",
        config=r.config,
        counters=r.counters,
        phase_records=r.phase_records,
        series={"t": [0.0, 1.0], "keys": ["vmstat.pswpout"]},
        raw={"before": {"vmstat.pswpout": 1}, "after": {"vmstat.pswpout": 101}},
    )


def _previous(name: str) -> dict[str, Any]:
    runs: list[RunResult] = [_kernel_run(r) for r in KERNEL]
    d: dict[str, Any] = json.loads(ValidateResult(name, runs, SIM, rows(runs, SIM)).to_json())
    return d


def test_from_dict_round_trips_and_keeps_the_kernel_snapshots() -> None:
    d = _previous("s")
    v = ValidateResult.from_dict(d)
    assert v.scenario == "s" and v.reps == 3 and all(isinstance(r, KernelRunResult) for r in v.kernel_runs)
    assert v.kernel_runs[0].raw["after"] == {"vmstat.pswpout": 101}  # type: ignore[attr-defined]
    assert json.loads(v.to_json()) == d  # rows recomputed from the runs, identical
    with pytest.raises(ValueError, match="schema_version"):
        ValidateResult.from_dict({**d, "schema_version": 2})


def test_revalidate_reuses_the_kernel_runs_and_reruns_the_sim(write: Callable[..., Path], tmp_path: Path) -> None:
    s = reclaimlab.load(write(MINIMAL))
    name = s.name or "scenario"
    calls: list[str] = []

    def sim(sc: Any, **kw: Any) -> RunResult:
        calls.append("sim")
        return NEW_SIM

    path = tmp_path / "prev.json"
    path.write_text(json.dumps(_previous(name)))
    for previous in (path, _previous(name), ValidateResult.from_dict(_previous(name))):
        v = revalidate(s, previous, run_sim=sim)
        assert v.scenario == name and v.sim is NEW_SIM and v.reps == 3
        assert [r.counters for r in v.kernel_runs] == [r.counters for r in KERNEL]
        by = {r.metric: r for r in v.rows}
        assert by["vmstat.pswpout"].rel_error == pytest.approx(0.1) and by["vmstat.pswpout"].inside is True
        assert by["p/fill0 accesses/s"].rel_error == pytest.approx(-0.05)
    assert calls == ["sim"] * 3


def test_revalidate_refuses_another_scenario_or_configuration(write: Callable[..., Path]) -> None:
    s = reclaimlab.load(write(MINIMAL))
    name = s.name or "scenario"
    with pytest.raises(KernelResultsError, match="'other'"):
        revalidate(s, _previous("other"), run_sim=lambda sc, **kw: NEW_SIM)
    changed = _result("sim", {"vmstat.pswpout": 1})
    changed.config = {"seed": 2}
    with pytest.raises(KernelResultsError, match=r"another configuration.*seed"):
        revalidate(s, _previous(name), run_sim=lambda sc, **kw: changed)
    # the simulator's own parameters (costs, device models) may change: the kernel did not use them
    machine: dict[str, Any] = {"memory_bytes": 1, "swap": [{"name": "swapfile", "size_bytes": 2, "device": {"read_latency_ns": 150000}}]}
    prev = _previous(name)
    for run in prev["kernel_runs"]:
        run["config"] = {"costs": {}, "machine": machine}
    calibrated = _result("sim", {"vmstat.pswpout": 1})
    calibrated.config = {
        "costs": {"fault_ns": 636},
        "machine": {**machine, "swap": [{**machine["swap"][0], "device": {"read_latency_ns": 69600}}]},
    }
    assert revalidate(s, prev, run_sim=lambda sc, **kw: calibrated).sim is calibrated
    resized = _result("sim", {"vmstat.pswpout": 1})
    resized.config = {"costs": {}, "machine": {**machine, "swap": [{**machine["swap"][0], "size_bytes": 3}]}}
    with pytest.raises(KernelResultsError, match="machine"):
        revalidate(s, prev, run_sim=lambda sc, **kw: resized)
    # A filesystem's backing is what the lab built: runs recorded before the key existed were
    # made on the lab's loop device; a simulator run on a filesystem of its own is another machine.
    fs = {"name": "data", "fstype": "ext4", "device": {"read_latency_ns": 1}}
    for run in prev["kernel_runs"]:
        run["config"] = {"costs": {}, "machine": {**machine, "filesystems": [fs]}}
    for backing, ok in (("loop", True), ("device", False)):
        on = _result("sim", {"vmstat.pswpout": 1})
        on.config = {"costs": {}, "machine": {**machine, "filesystems": [{**fs, "backing": backing}]}}
        if ok:
            assert revalidate(s, prev, run_sim=lambda sc, on=on, **kw: on).sim is on
        else:
            with pytest.raises(KernelResultsError, match="machine"):
                revalidate(s, prev, run_sim=lambda sc, on=on, **kw: on)


def test_cli_validate_kernel_results(write: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from reclaimlab.backends import kernel, sim

    def no_kernel(sc: Any, **kw: Any) -> RunResult:
        raise AssertionError("--kernel-results must not run the kernel")

    monkeypatch.setattr(kernel, "run", no_kernel)
    monkeypatch.setattr(sim, "run", lambda sc, **kw: NEW_SIM)
    scenario = write(MINIMAL)
    name = reclaimlab.load(scenario).name or "scenario"
    f = tmp_path / "v.json"
    f.write_text(json.dumps(_previous(name)))
    r = CliRunner().invoke(app, ["validate", str(scenario), "--kernel-results", str(f), "--json", str(f)])  # rewrite in place
    assert r.exit_code == 0, r.output
    assert "100 [80\N{EN DASH}120]" in r.output and "+10.0%" in r.output
    d = json.loads(f.read_text())
    assert d["sim"]["counters"]["vmstat.pswpout"] == 110 and d["kernel_runs"][0]["raw"]["after"] == {"vmstat.pswpout": 101}
    f.write_text(json.dumps(_previous("other")))
    r = CliRunner().invoke(app, ["validate", str(scenario), "--kernel-results", str(f)])
    assert r.exit_code == 2 and "'other'" in r.output
    r = CliRunner().invoke(app, ["validate", str(scenario), "--kernel-results", str(tmp_path / "missing.json")])
    assert r.exit_code == 2


# --- docs/validation.md ------------------------------------------------------------------------

CONFIG = {
    "processes": [{"name": "p", "phases": [{"name": "fill0", "phase": {"kind": "fill"}}, {"name": "access", "phase": {"kind": "random"}}]}]
}


def _run(backend: str, counters: dict[str, int], fill: float, access: float) -> RunResult:
    return RunResult(
        scenario="x",
        backend=backend,
        config=CONFIG,
        counters=counters,
        phase_records=[
            {"process": "p", "phase": "fill0", "elapsed_s": 1.0, "accesses": 1, "accesses_per_s": fill, "outcome": "completed"},
            {"process": "p", "phase": "access", "elapsed_s": 1.0, "accesses": 1, "accesses_per_s": access, "outcome": "completed"},
        ],
    )


def _vr(name: str, kernel: dict[str, int], sim: dict[str, int], fill: float = 100.0, access: float = 100.0) -> ValidateResult:
    k = [_run("kernel", kernel, 100.0, 100.0)] * 3
    sm = _run("sim", sim, fill, access)
    return ValidateResult(name, k, sm, rows(k, sm))


A = _vr(
    "a",
    {"vmstat.pswpout": 100, "vmstat.zswpout": 0, "vmstat.zswpwb": 0},
    {"vmstat.pswpout": 110, "vmstat.zswpout": 0, "vmstat.zswpwb": 5},
    200.0,
    50.0,
)
B = _vr("b", {"vmstat.pswpout": 100, "vmstat.zswpout": 50}, {"vmstat.pswpout": 70, "vmstat.zswpout": 50}, 300.0, 150.0)
C = _vr("c", {"vmstat.pswpout": 100}, {"vmstat.pswpout": 105})


def test_summary_medians_over_scenarios_nonzero_on_either_side() -> None:
    lines = {line.split(" | ")[0]: line for line in summary_markdown([A, B, C]).splitlines()}
    # pswpout: +10%, -30%, +5% -> median +5%, median |err| 10%
    assert lines["| `vmstat.pswpout`"] == "| `vmstat.pswpout` | 3 | +5.0% | 10.0% | a +10.0% (out); b -30.0% (out); c +5.0% (out) |"
    # zswpout: zero on both sides in a (left out), 0% in b
    assert lines["| `vmstat.zswpout`"].startswith("| `vmstat.zswpout` | 1 | +0.0% | 0.0% | b +0.0% (in) |")
    # zswpwb: kernel 0, sim 5 -> listed, not in the medians
    assert lines["| `vmstat.zswpwb`"] == "| `vmstat.zswpwb` | 1 | - | - | a n/a (kernel 0) (out) |"
    assert lines["| `vmstat.pswpin`"] == "| `vmstat.pswpin` | 0 | - | - | - |"
    # phases by kind, from the config
    assert lines["| fill accesses/s"].startswith(
        "| fill accesses/s | 3 | +100.0% | 100.0% | a p/fill0 +100.0% (out); b p/fill0 +200.0% (out)"
    )
    assert lines["| random-phase accesses/s"].startswith("| random-phase accesses/s | 3 | +0.0% | 50.0% | a p/access -50.0% (out)")
    # every phase with accesses: fills and random phases here (a, b, c: +100%, -50%, +200%, +50%, 0, 0)
    assert lines["| all phase rates (accesses/s)"].startswith(
        "| all phase rates (accesses/s) | 6 | +25.0% | 50.0% | a p/fill0 +100.0% (out)"
    )
    assert "left out of the medians" in summary_markdown([A, B, C])
    assert "left out of the medians" not in summary_markdown([B, C])


def test_all_phase_rates_leave_out_phases_without_accesses() -> None:
    config = {
        "processes": [
            {"name": "p", "phases": [{"name": "passes", "phase": {"kind": "sequential"}}, {"name": "nap", "phase": {"kind": "sleep"}}]}
        ]
    }
    records = [
        {"process": "p", "phase": "passes", "elapsed_s": 1.0, "accesses": 1, "accesses_per_s": 100.0, "outcome": "completed"},
        {"process": "p", "phase": "nap", "elapsed_s": 1.0, "accesses": 0, "accesses_per_s": 0.0, "outcome": "completed"},
    ]
    k = [RunResult(scenario="s", backend="kernel", config=config, counters={}, phase_records=records)] * 3
    sim_records = [{**records[0], "accesses_per_s": 80.0}, records[1]]
    sm = RunResult(scenario="s", backend="sim", config=config, counters={}, phase_records=sim_records)
    entries = summary_entries([ValidateResult("s", k, sm, rows(k, sm))])
    assert [(e.label, round(e.rel_error, 3)) for e in entries[ALL_RATES]] == [("s p/passes", -0.2)]
    assert entries[FILL_RATE] == entries[RANDOM_RATE] == []


def test_scenario_markdown() -> None:
    text = scenario_markdown(B)
    assert text.splitlines()[0] == "| metric | kernel median [min\N{EN DASH}max] | sim | rel. error | in spread |"
    assert "| `vmstat.pswpout` | 100 [100\N{EN DASH}100] | 70 | -30.0% | no |" in text
    assert "| `p/fill0 accesses/s` | 100 [100\N{EN DASH}100] | 300 | +200.0% | no |" in text


DOC = """# title

<!-- BEGIN GENERATED: validation-summary -->
old summary
<!-- END GENERATED: validation-summary -->

text kept

<!-- BEGIN GENERATED: b -->
old b
<!-- END GENERATED: b -->

<!-- BEGIN GENERATED: a -->
<!-- END GENERATED: a -->
"""


def test_update_doc(tmp_path: Path) -> None:
    doc = tmp_path / "v.md"
    doc.write_text(DOC)
    paths = []
    for r in (A, B):
        p = tmp_path / f"{r.scenario}.json"
        p.write_text(r.to_json())
        paths.append(p)
    (tmp_path / "codec-check.json").write_text("{}")  # skipped
    assert update_doc(doc, [*paths, tmp_path / "codec-check.json"]) == ["b", "a"]  # the document's order
    text = doc.read_text()
    assert "old" not in text and "text kept" in text
    assert scenario_markdown(A) in text and scenario_markdown(B) in text
    assert summary_markdown([B, A]) in text and "b -30.0% (out); a +10.0% (out)" in text
    once = text
    r = CliRunner().invoke(app, ["validation-report", "--update-doc", str(doc), *map(str, paths), str(tmp_path / "codec-check.json")])
    assert r.exit_code == 0, r.output
    assert doc.read_text() == once  # deterministic
    (tmp_path / "c.json").write_text(C.to_json())
    with pytest.raises(DocError, match="GENERATED: c"):
        update_doc(doc, [tmp_path / "c.json"])
    assert doc.read_text() == once  # nothing written


def test_revalidate_host_memory_within_a_tolerance(write: Callable[..., Path]) -> None:
    """memory = "host" on another machine of the same kind (440 kB less): the simulator runs at
    the kernel runs' size; far apart, the message gives both sizes."""
    s = reclaimlab.load(write(MINIMAL.replace('memory = "256MiB"', 'memory = "host"')))
    name = s.name or "scenario"
    here = s.machine.memory
    prev = _previous(name)
    for run in prev["kernel_runs"]:
        run["config"] = {"machine": {"memory_bytes": here + 440 * 1024, "swap": []}}
    seen: list[int] = []

    def sim(sc: Any, **kw: Any) -> RunResult:
        seen.append(sc.machine.memory)
        r = _result("sim", {"vmstat.pswpout": 1})
        r.config = {"machine": {"memory_bytes": sc.machine.memory, "swap": []}}
        return r

    v = revalidate(s, prev, run_sim=sim)
    assert seen == [here, here + 440 * 1024]  # rerun at the kernel runs' size
    assert v.sim.config["machine"]["memory_bytes"] == here + 440 * 1024
    far = here + here // 10
    for run in prev["kernel_runs"]:
        run["config"] = {"machine": {"memory_bytes": far, "swap": []}}
    with pytest.raises(
        KernelResultsError, match=rf'memory = "host": the kernel runs had {far} bytes \({far // 1024} kB\), this machine has {here} bytes'
    ):
        revalidate(s, prev, run_sim=sim)


def test_revalidate_names_both_values(write: Callable[..., Path]) -> None:
    s = reclaimlab.load(write(MINIMAL))
    prev = _previous(s.name or "scenario")
    for run in prev["kernel_runs"]:
        run["config"] = {"machine": {"memory_bytes": 1, "swap": []}}
    other = _result("sim", {"vmstat.pswpout": 1})
    other.config = {"machine": {"memory_bytes": 2, "swap": []}}
    with pytest.raises(KernelResultsError, match=r"differs in: machine.memory_bytes: kernel runs 1, now 2\)"):
        revalidate(s, prev, run_sim=lambda sc, **kw: other)


def test_kernel_runs_recorded_before_a_knob_existed_ran_its_default() -> None:
    """A recorded kernel run's config without a knob (declared later, e.g. kernel.lru_gen)
    is the same configuration as one that sets the knob's default, not as one that changes it."""
    from reclaimlab.validate import _workload_config

    now = {"kernel": {"version": "6.12", "lru_gen": {"enabled": False, "min_ttl_ms": 0}, "vm": {"swappiness": 60}}}
    old = {"kernel": {"version": "6.12", "vm": {"swappiness": 60}}}
    assert _workload_config(old) == _workload_config(now)
    on = {"kernel": {"version": "6.12", "lru_gen": {"enabled": True}, "vm": {"swappiness": 60}}}
    assert _workload_config(on) != _workload_config(old)


def test_how_the_simulator_steps_accesses_is_not_part_of_the_kernel_runs_config() -> None:
    """engine.accesses (docs/model/analytic.md) changes how the simulator runs, not what the
    kernel ran: stored kernel runs validate an analytic-mode simulation too."""
    from reclaimlab.validate import _workload_config

    exact = {"kernel": {"version": "6.12"}, "seed": 1}
    assert _workload_config({**exact, "engine": {"accesses": "analytic"}}) == _workload_config(exact)


def test_the_machines_readahead_state_is_the_simulators_claim_not_the_kernel_runs_config() -> None:
    """machine.swapin_readahead_hits / last_readahead_pages state what the simulated host's
    swap readahead starts from; the lab sets nothing from them (the kernel had its own
    statics), so stored kernel runs validate a simulation that states them. The swap devices
    are still compared."""
    from reclaimlab.validate import _workload_config

    kernel_run = {"machine": {"memory_bytes": 1, "swap": [{"name": "swapfile", "size_bytes": 2}]}}
    stated = {"machine": {**kernel_run["machine"], "swapin_readahead_hits": 0, "last_readahead_pages": 1}}
    assert _workload_config(stated) == _workload_config(kernel_run)
    resized = {"machine": {**stated["machine"], "swap": [{"name": "swapfile", "size_bytes": 3}]}}
    assert _workload_config(resized) != _workload_config(kernel_run)


def _on(result: ValidateResult, backend: str, provenance: dict[str, Any], cgroup_version: int) -> ValidateResult:
    runs = [
        RunResult(
            scenario=r.scenario,
            backend=backend,
            config={**r.config, "cgroups": {"version": cgroup_version}},
            counters=r.counters,
            phase_records=r.phase_records,
            provenance=provenance,
        )
        for r in result.kernel_runs
    ]
    return ValidateResult(result.scenario, runs, result.sim, rows(runs, result.sim))


def test_kernels_table_has_a_column_per_kernel() -> None:
    host = _on(A, "kernel", {"host_kernel_release": "6.18.44-fc-v657"}, 1)
    guest = _on(B, "vm", {"vm": {"release": "6.12.117+deb12-amd64"}}, 2)
    old = _on(C, "vm", {"vm": {"release": "6.1.0-56-amd64"}}, 2)
    assert [kernel_label(r) for r in (host, guest, old)] == ["6.18 v1 host", "6.12 v2 guest", "6.1 v2 guest"]
    text = kernels_markdown([host, guest, old, _on(C, "kernel", {"host_kernel_release": "6.18.44"}, 1)])
    lines = {line.split(" | ")[0]: line for line in text.splitlines()}
    assert "6.18 v1 host" in text.splitlines()[0] and text.splitlines()[0].count("guest") == 2
    # pswpout: host a +10% and c +5% (median 7.5%), 6.12 b -30%, 6.1 c +5%
    assert lines["| `vmstat.pswpout`"].endswith("| 7.5% (2) | 30.0% (1) | 5.0% (1) |")
    assert lines["| `vmstat.zswpout`"].endswith("| - | 0.0% (1) | - |")


def test_revalidate_host_memcgs_from_the_kernel_runs_probe(write: Callable[..., Path]) -> None:
    """host_memcgs = "host": the simulator re-runs with the other memcgs the kernel runs' host
    had (their probe's record), not this host's; runs without the record keep this host's."""
    s = reclaimlab.load(write(MINIMAL.replace("[machine]\n", '[machine]\nhost_memcgs = "host"\n', 1)))
    here = s.machine.host_memcgs
    prev = _previous(s.name or "scenario")
    seen: list[int] = []

    def sim(sc: Any, **kw: Any) -> RunResult:
        seen.append(sc.machine.host_memcgs)
        return NEW_SIM

    revalidate(s, prev, run_sim=sim)
    assert seen == [here]  # no record
    for i, run in enumerate(prev["kernel_runs"]):
        run["provenance"] = {"host": {"host_memcgs": here + 7 + i % 2}}
    seen.clear()
    revalidate(s, prev, run_sim=sim)
    assert seen == [here + 7]  # the median (low) of 7, 8, 7 more than here


def test_phases_without_accesses_come_from_the_phase_declarations() -> None:
    # Derived from each phase model's makes_accesses: a new phase kind is classified where it is declared.
    from reclaimlab.validate import NO_ACCESS_KINDS

    assert {"sleep", "exit", "reclaim", "cgroup_write", "zram_write", "kernel_alloc"} <= NO_ACCESS_KINDS
    assert not {"fill", "sequential", "random", "trace", "read", "write", "mmap", "create_files"} & NO_ACCESS_KINDS
