"""The headline, banners, normalisations and ranking of run/compare (summary.py, views.py)."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console

from reclaimlab import summary
from reclaimlab.compare import CompareResult, Config
from reclaimlab.overrides import Override
from reclaimlab.result import RunResult
from reclaimlab.views import change, compare_view, run_view


def _config(duration_ns: int | None) -> dict[str, Any]:
    phase = {"kind": "random", "regions": [0], "count": None if duration_ns else 10, "duration_ns": duration_ns, "write_percent": 0}
    return {
        "processes": [
            {"name": "p", "phases": [{"name": "fill0", "phase": {"kind": "fill", "region": 0}}, {"name": "access", "phase": phase}]}
        ]
    }


def _result(
    accesses: int, elapsed: float, majflt: int, outcome: str = "completed", oom: int = 0, duration_ns: int | None = 10**10
) -> RunResult:
    return RunResult(
        scenario="s",
        backend="sim",
        config=_config(duration_ns),
        counters={"vmstat.pgmajfault": majflt, "vmstat.pswpin": majflt, "vmstat.oom_kill": oom, "zswap.pool_total_size": 3 * 1024 * 1024},
        phase_records=[
            {"process": "p", "phase": "fill0", "elapsed_s": 0.5, "accesses": 1000, "accesses_per_s": 2000.0, "outcome": "completed"},
            {
                "process": "p",
                "phase": "access",
                "elapsed_s": elapsed,
                "accesses": accesses,
                "accesses_per_s": accesses / elapsed,
                "outcome": outcome,
            },
        ],
    )


def _render(parts: Any) -> str:
    console = Console(width=200, record=True, file=open("/dev/null", "w"))
    for p in parts if isinstance(parts, list) else [parts]:
        console.print(p)
    text = console.export_text()
    console.file.close()
    return text


def _compare(*results: RunResult) -> CompareResult:
    names = ["swap", "zswap", "deflate"][: len(results)]
    return CompareResult(
        "s", [(Config(n, (Override("kernel.zswap.enabled", n != "swap", "test"),)), r) for n, r in zip(names, results, strict=False)]
    )


def test_formatting() -> None:
    assert summary.fmt_count(1234) == "1234"
    assert summary.fmt_count(12345) == "12.3k"
    assert summary.fmt_count(1_500_000) == "1.5M"
    assert summary.fmt_bytes(14936973312) == "13.9 GiB"
    assert summary.fmt_bytes(512) == "512 B"
    assert summary.fmt_seconds(0.0401) == "40.1 ms"
    assert summary.fmt_seconds(20.0) == "20.00 s"
    assert change(150.0, 100.0) == "+50.0%"
    assert change(400.0, 100.0) == "x4"
    assert change(100.0, 100.0) == "="


def test_normalisations_per_access_and_second() -> None:
    r = _result(accesses=9000, elapsed=10.0, majflt=500)
    # 10 000 accesses (1000 in fill0), 10.5 s of workload
    assert summary.normalise(r, "vmstat.pgmajfault", "access") == pytest.approx(50.0)
    assert summary.normalise(r, "vmstat.pgmajfault", "second") == pytest.approx(500 / 10.5)
    assert summary.normalise(r, "zswap.pool_total_size", "access") is None  # a gauge


def test_oom_kill_is_a_banner_in_every_view() -> None:
    ok = _result(accesses=100_000, elapsed=10.0, majflt=5000)
    killed = _result(accesses=30_000, elapsed=3.0, majflt=1000, outcome="oom_killed", oom=1)
    result = _compare(ok, killed)
    for patterns, show_all in (((), False), (("vmstat.pgmajfault",), False), ((), True)):
        text = _render(compare_view(result, None, patterns, show_all))
        assert "!! zswap: OOM: the OOM killer killed p 3.00 s into phase access" in text
        assert "zswap !!" in text  # the column header, in the headline and the counter table
        assert "OOM-KILLED" in text
        assert "not ranked (did not run as asked): zswap" in text
    # fewer major faults would read as a win: the killed configuration is not the winner
    assert "winner: swap" in _render(compare_view(result, None, (), False))
    text = _render(run_view(killed, (), False))
    assert "!! OOM: the OOM killer killed p" in text and "oom_killed" in text


def test_time_bounded_phases_warn_when_work_differs() -> None:
    slow = _result(accesses=100_000, elapsed=10.0, majflt=6000)
    fast = _result(accesses=600_000, elapsed=10.0, majflt=36000)
    text = _render(compare_view(_compare(slow, fast), None, (), False))
    assert "note: p/access run for a fixed time; the configurations made 101k to 601k accesses (6.0x)" in text
    # per access the faults are equal: majflt/1k shows it
    assert summary.normalise(slow, "vmstat.pgmajfault", "access") == pytest.approx(
        summary.normalise(fast, "vmstat.pgmajfault", "access"), rel=0.01
    )
    counted = _result(accesses=100_000, elapsed=10.0, majflt=6000, duration_ns=None)
    assert summary.time_bounded_phases(counted) == []
    assert "run for a fixed time" not in _render(compare_view(_compare(counted, counted), None, (), False))


def test_ranking_and_winner_with_units() -> None:
    a = _result(accesses=100_000, elapsed=10.0, majflt=1)
    b = _result(accesses=150_000, elapsed=10.0, majflt=1)
    c = _result(accesses=120_000, elapsed=10.0, majflt=1)
    text = _render(compare_view(_compare(a, b, c), "swap", (), False))
    assert "ranking by access acc/s (higher is better):" in text
    assert "winner: zswap, 15k/s access acc/s, +25.0% vs deflate (runner-up), +50.0% vs swap (baseline)" in text
    # the primary metric without a time-bounded phase: the elapsed time of the longest phase
    quick = _result(accesses=10, elapsed=1.0, majflt=1, duration_ns=None)
    slow = _result(accesses=10, elapsed=2.0, majflt=1, duration_ns=None)
    metric = summary.primary_metric([quick, slow])
    assert metric is not None and metric.label == "access s" and metric.better == "lower"


def test_per_option_normalises_the_counter_table() -> None:
    slow = _result(accesses=99_000, elapsed=10.0, majflt=6000)
    fast = _result(accesses=599_000, elapsed=10.0, majflt=36000)
    text = _render(compare_view(_compare(slow, fast), None, ("vmstat.pgmajfault",), False, per="access"))
    row = next(line for line in text.splitlines() if line.startswith("│ vmstat.pgmajfault"))
    assert "60 " in row and "(=)" in row


def test_cgroup_phase_writes_are_shown_and_kept() -> None:
    # A reclaim phase's record says what the write did; run shows it in a "write" column, and
    # the JSON keeps it.
    r = _result(1000, 1.0, 0)
    r.phase_records.append(
        {
            "process": "agent",
            "phase": "reclaim0",
            "elapsed_s": 0.01,
            "accesses": 0,
            "accesses_per_s": 0.0,
            "outcome": "completed",
            "reclaimed_bytes": 3 << 20,
            "written": "4194304",
            "error": "EAGAIN",
        }
    )
    text = _render(run_view(r, [], False))
    assert "failed: EAGAIN, reclaimed 3 MiB, wrote 4194304" in text
    back = RunResult.from_json(r.to_json())
    assert back.phase_records[-1]["error"] == "EAGAIN" and back.phase_records[-1]["reclaimed_bytes"] == 3 << 20
