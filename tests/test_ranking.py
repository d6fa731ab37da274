"""validate --compare: ranking configurations, kernel vs simulator, on synthetic runs (no root)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import reclaimlab
from conftest import MINIMAL
from reclaimlab.cli import app
from reclaimlab.lab.errors import LabTimeout, RunnerFailed
from reclaimlab.ranking import (
    ConfigValidation,
    RankingResult,
    is_ranking_json,
    pair_ranks,
    ranking_markdown,
    revalidate_compare,
    validate_compare,
)
from reclaimlab.result import RunResult
from reclaimlab.validate import KernelResultsError, ValidateResult, rows, validate

COMPARED = (
    MINIMAL.replace("[[machine.swap]]", "[kernel]\nzswap.enabled = false\n\n[[machine.swap]]")
    + """
[compare]
configs = [
  { name = "off", set = {} },
  { name = "on", set = { "kernel.zswap.enabled" = true } },
]
"""
)


def _run(backend: str, counters: dict[str, int], rate: float, config: dict[str, Any] | None = None) -> RunResult:
    return RunResult(
        scenario="s",
        backend=backend,
        config=config or {},
        counters=counters,
        phase_records=[
            {"process": "p", "phase": "access", "elapsed_s": 1.0, "accesses": 10, "accesses_per_s": rate, "outcome": "completed"}
        ],
    )


def _config(name: str, kernel: list[tuple[int, float]], sim: tuple[int, float]) -> ConfigValidation:
    """A configuration whose kernel runs have (pswpin, rate) each, and the simulator (pswpin, rate)."""
    runs = [_run("kernel", {"vmstat.pswpin": c, "vmstat.zswpout": 0}, r) for c, r in kernel]
    s = _run("sim", {"vmstat.pswpin": sim[0], "vmstat.zswpout": 0}, sim[1])
    return ConfigValidation(name, [], ValidateResult("s", runs, s, rows(runs, s)))


def test_pair_ranks_orders_and_ties() -> None:
    a = _config("a", [(100, 10.0), (110, 12.0), (105, 11.0)], (120, 30.0))
    b = _config("b", [(50, 20.0), (60, 11.5), (55, 25.0)], (10, 40.0))
    c = _config("c", [(100, 10.0), (100, 10.0)], (100, 50.0))
    by = {(p.metric, p.a, p.b): p for p in pair_ranks([a, b, c])}
    # pswpin: a's runs all above b's -> ">", the simulator agrees
    p = by[("vmstat.pswpin", "a", "b")]
    assert (p.kernel, p.sim, p.verdict) == (">", ">", "same")
    assert (p.kernel_a, p.kernel_b, p.sim_a, p.sim_b) == (105, 55, 120, 10)
    # pswpin a vs c: the spreads overlap -> a tie the kernel does not decide
    assert by[("vmstat.pswpin", "a", "c")].verdict == "kernel tie"
    # pswpin b vs c: b below c on the kernel, and in the simulator
    assert by[("vmstat.pswpin", "b", "c")].verdict == "same"
    # accesses/s a vs b overlap (12.0 > 11.5): tie; a vs c: the kernel's a spans c's only value
    assert by[("p/access accesses/s", "a", "b")].verdict == "kernel tie"
    # zswpout is zero everywhere: left out
    assert not any(m == "vmstat.zswpout" for m, _, _ in by)


def test_pair_ranks_differs_and_equal() -> None:
    a = _config("a", [(0, 10.0), (0, 11.0)], (0, 30.0))
    b = _config("b", [(0, 20.0), (0, 21.0)], (5, 20.0))
    by = {(p.metric, p.a, p.b): p for p in pair_ranks([a, b])}
    rate = by[("p/access accesses/s", "a", "b")]
    assert (rate.kernel, rate.sim, rate.verdict) == ("<", ">", "differs")
    # kernel 0 = 0 in every run, the simulator 0 < 5: the kernel decides "=", the simulator differs
    assert by[("vmstat.pswpin", "a", "b")].verdict == "differs"


def _fakes(
    kernel_rates: dict[str, list[float]],
    fail_first: set[str] = frozenset(),  # type: ignore[assignment]
) -> tuple[Callable[..., RunResult], Callable[..., RunResult], list[str]]:
    calls: list[str] = []
    failed: set[str] = set()

    def name_of(sc: Any) -> str:
        return "on" if sc.kernel.zswap.enabled else "off"

    def kernel(sc: Any, **kw: Any) -> RunResult:
        name = name_of(sc)
        calls.append(f"kernel {name}")
        if name in fail_first and name not in failed:
            failed.add(name)
            raise RunnerFailed("runner p stopped after 0 of 1 phases (killed by SIGKILL)")
        n = sum(c == f"kernel {name}" for c in calls) - (name in failed)
        return _run("kernel", {"vmstat.pswpin": 100 if name == "off" else 0}, kernel_rates[name][n - 1])

    def sim(sc: Any, **kw: Any) -> RunResult:
        name = name_of(sc)
        calls.append(f"sim {name}")
        return _run("sim", {"vmstat.pswpin": 90 if name == "off" else 0}, 10.0 if name == "off" else 30.0)

    return kernel, sim, calls


def test_validate_compare_interleaves_reps_and_retries(write: Callable[..., Path]) -> None:
    s = reclaimlab.load(write(COMPARED))
    kernel, sim, calls = _fakes({"off": [10.0, 11.0], "on": [20.0, 22.0]}, fail_first={"on"})
    r = validate_compare(s, reps=2, run_kernel=kernel, run_sim=sim, retries=1)
    # The simulator runs after every kernel run, at their common speed (validate.at_speed).
    assert calls == ["kernel off", "kernel on", "kernel on", "kernel off", "kernel on", "sim off", "sim on"]
    assert [c.name for c in r.configs] == ["off", "on"]
    assert [c.result.reps for c in r.configs] == [2, 2]
    assert r.discarded_runs == [{"config": "on", "rep": 1, "error": "runner p stopped after 0 of 1 phases (killed by SIGKILL)"}]
    assert r.configs[1].result.discarded_runs == [{"rep": 1, "error": "runner p stopped after 0 of 1 phases (killed by SIGKILL)"}]
    assert r.configs[1].overrides == ["kernel.zswap.enabled = true"]
    verdicts = {p.metric: p.verdict for p in r.pairs()}
    assert verdicts == {"vmstat.pswpin": "same", "p/access accesses/s": "same"}
    d = json.loads(r.to_json())
    assert d["kind"] == "validate-compare" and d["ranking"]["decisive"] == 2 and d["ranking"]["same"] == 2
    # without retries the runner's death is the run's failure
    kernel, sim, _ = _fakes({"off": [10.0], "on": [20.0]}, fail_first={"on"})
    with pytest.raises(RunnerFailed):
        validate_compare(s, reps=1, run_kernel=kernel, run_sim=sim)


def test_retries_only_for_dead_runners(write: Callable[..., Path]) -> None:
    s = reclaimlab.load(write(MINIMAL))
    attempts: list[int] = []

    def timeout(sc: Any, **kw: Any) -> RunResult:
        attempts.append(1)
        raise LabTimeout("took too long")

    with pytest.raises(LabTimeout):
        validate(s, reps=1, run_kernel=timeout, run_sim=lambda sc, **kw: _run("sim", {}, 1.0), retries=3)
    assert len(attempts) == 1

    def always_killed(sc: Any, **kw: Any) -> RunResult:
        attempts.append(1)
        raise RunnerFailed("killed")

    attempts.clear()
    with pytest.raises(RunnerFailed):
        validate(s, reps=1, run_kernel=always_killed, run_sim=lambda sc, **kw: _run("sim", {}, 1.0), retries=2)
    assert len(attempts) == 3


def test_json_round_trip_markdown_and_revalidate(write: Callable[..., Path], tmp_path: Path) -> None:
    s = reclaimlab.load(write(COMPARED))
    kernel, sim, _ = _fakes({"off": [10.0, 11.0], "on": [20.0, 22.0]})
    r = validate_compare(s, reps=2, run_kernel=kernel, run_sim=sim)
    path = tmp_path / "rank.json"
    path.write_text(r.to_json())
    assert is_ranking_json(path) and not is_ranking_json(tmp_path / "missing.json")
    loaded = RankingResult.load(path)
    assert json.loads(loaded.to_json())["ranking"] == json.loads(r.to_json())["ranking"]
    md = ranking_markdown(loaded)
    assert "| `vmstat.pswpin` | 100 / 90 | 0 / 0 |" in md
    assert "2 of 2 pairs the kernel orders are ranked the same" in md
    # revalidate: the simulator again, the kernel runs reused
    _, sim2, calls = _fakes({"off": [], "on": []})
    again = revalidate_compare(s, path, run_sim=sim2)
    assert calls == ["sim off", "sim on"]
    assert [len(c.result.kernel_runs) for c in again.configs] == [2, 2]
    # a configuration the stored result does not hold
    d = json.loads(path.read_text())
    d["configs"] = d["configs"][:1]
    with pytest.raises(KernelResultsError, match="no configuration 'on'"):
        revalidate_compare(s, RankingResult.from_dict(d), run_sim=sim2)
    with pytest.raises(ValueError, match="validate-compare"):
        RankingResult.from_dict({"schema_version": 1, "scenario": "s"})


def test_cli_validate_compare(write: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from reclaimlab.backends import kernel as kernel_backend
    from reclaimlab.backends import sim as sim_backend

    kernel, sim, _ = _fakes({"off": [10.0, 11.0], "on": [20.0, 22.0]})
    monkeypatch.setattr(kernel_backend, "run", kernel)
    monkeypatch.setattr(sim_backend, "run", sim)
    out = tmp_path / "r.json"
    scenario = str(write(COMPARED))
    r = CliRunner().invoke(app, ["validate", scenario, "--compare", "--reps", "2", "--json", str(out)], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "off: simulator vs kernel (2 kernel runs)" in r.output
    assert "ranking of configurations" in r.output and "2 of 2 pairs" in r.output
    assert json.loads(out.read_text())["kind"] == "validate-compare"
    # --kernel-results with --compare reuses the runs; a plain validate result is refused
    r = CliRunner().invoke(app, ["validate", scenario, "--compare", "--kernel-results", str(out)], terminal_width=200)
    assert r.exit_code == 0, r.output
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"schema_version": 1, "scenario": "s", "kernel_runs": [], "sim": {}}))
    r = CliRunner().invoke(app, ["validate", scenario, "--compare", "--kernel-results", str(plain)])
    assert r.exit_code == 2 and "validate --compare --json" in r.output
    # nothing to compare
    r = CliRunner().invoke(app, ["validate", str(write(MINIMAL, "m.toml")), "--compare"])
    assert r.exit_code == 2 and "no configurations to compare" in r.output


def test_update_doc_writes_the_ranking_block_and_counts_configurations(write: Callable[..., Path], tmp_path: Path) -> None:
    from reclaimlab.report import BEGIN, END
    from reclaimlab.validation_doc import update_doc

    s = reclaimlab.load(write(COMPARED))
    kernel, sim, _ = _fakes({"off": [10.0, 11.0], "on": [20.0, 22.0]})
    r = validate_compare(s, reps=2, run_kernel=kernel, run_sim=sim)
    path = tmp_path / "rank.json"
    path.write_text(r.to_json())
    doc = tmp_path / "v.md"
    blocks = [BEGIN.format(name=n) + "\nold\n" + END.format(name=n) for n in ("validation-summary", r.scenario)]
    doc.write_text("intro\n" + "\n".join(blocks) + "\n")
    assert update_doc(doc, [path]) == [r.scenario]
    text = doc.read_text()
    assert "old" not in text and ranking_markdown(r) in text
    # each configuration is a scenario of the summary, named after the compared scenario ("on"
    # has pswpin 0 on both sides, so only "off" counts)
    summary = text.split(BEGIN.format(name="validation-summary"))[1].split(END.format(name="validation-summary"))[0]
    assert "`vmstat.pswpin` | 1 |" in summary and f"{r.scenario} [off] -10.0%" in summary
