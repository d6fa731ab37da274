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
from reclaimlab.result import RunResult
from reclaimlab.validate import Row, Stat, format_rel_error, relative_error, rows, select, summarize, validate


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
    assert calls == ["sim", "kernel", "kernel", "kernel"]
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
