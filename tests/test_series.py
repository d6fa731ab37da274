"""Time series from the simulator (--interval), the tidy tables, and repeats over seeds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

import reclaimlab
from conftest import MINIMAL
from reclaimlab.cli import app
from reclaimlab.lab.record import EVENT, kind
from reclaimlab.stats import ci95, t975, welch_significant

runner = CliRunner()

#: Swaps within 200 ms of a time-bounded phase, in about 0.1 s of wall time.
SMALL = """\
schema_version = 1
seed = 7
[machine]
memory = "256MiB"
[[machine.swap]]
size = "256MiB"
device = "ssd"
[kernel]
zswap.enabled = true
[cgroups]
cgroup_version = 1
[cgroups.groups.w]
"memory.limit_in_bytes" = "12MiB"
[[processes]]
name = "p"
cgroup = "w"
[[processes.regions]]
name = "a"
size = "16MiB"
content = "text"
[[processes.phases]]
kind = "fill"
region = "a"
[[processes.phases]]
name = "access"
kind = "random"
region = "a"
duration = "200ms"
[compare]
configs = [{ name = "zswap", set = { "kernel.zswap.enabled" = true } }, { name = "swap", set = { "kernel.zswap.enabled" = false } }]
"""


@pytest.mark.native
def test_interval_samples_without_changing_the_result(real_core: Any, write: Any) -> None:
    path = write(SMALL)
    plain = reclaimlab.run(path)
    sampled = reclaimlab.run(path, interval_s=0.02)
    assert plain.counters == sampled.counters  # sampling only reads
    assert plain.phase_records == sampled.phase_records
    assert plain.stats == sampled.stats
    s = sampled.series
    assert s["interval_s"] == 0.02
    t = s["t"]
    assert t[0] == 0.0 and t == sorted(t) and len(t) >= 3
    assert t[-1] == pytest.approx(plain.stats["sim_time_ns"] / 1e9, abs=1e-3)
    assert set(s["values"]) == set(plain.counters)  # the same keys as the counters
    for key, col in s["values"].items():
        assert len(col) == len(t)
        assert col[-1] == plain.counters[key]  # the last sample is the result
        if kind(key) == EVENT:
            assert col == sorted(col), key  # events only grow
    assert "series" in json.loads(sampled.to_json()) and "series" not in json.loads(plain.to_json())
    frame = sampled.series_frame
    assert list(frame.columns) == ["t_s", "metric", "value"]
    assert len(frame) == len(t) * len(s["values"])


@pytest.mark.native
def test_compare_csv_and_parquet_are_tidy(real_core: Any, write: Any, tmp_path: Path) -> None:
    text = SMALL.replace('name = "zswap"', 'name = "on"').replace('name = "swap"', 'name = "off"')
    csv, pq = tmp_path / "c.csv", tmp_path / "c.parquet"
    r = runner.invoke(app, ["compare", str(write(text)), "--interval", "20ms", "--csv", str(csv), "--parquet", str(pq), "--no-progress"])
    assert r.exit_code == 0, r.output
    a, b = pd.read_csv(csv), pd.read_parquet(pq)
    assert list(a.columns) == ["config", "kernel.zswap.enabled", "kind", "metric", "t_s", "value"]
    assert list(b.columns) == list(a.columns)
    assert set(a["config"]) == {"on", "off"}
    assert set(b["kernel.zswap.enabled"]) == {True, False}  # the override's value, not "k=v"
    assert set(a["kind"]) == {"counter", "phase", "latency", "series"}
    pool = b[(b["kind"] == "series") & (b["metric"] == "zswap.pool_total_size") & (b["config"] == "on")]
    assert len(pool) >= 3 and pool["t_s"].is_monotonic_increasing


def test_interval_must_be_a_duration(write: Any) -> None:
    r = runner.invoke(app, ["run", str(write(MINIMAL)), "--interval", "10"])
    assert r.exit_code == 2 and "--interval: expected a duration" in r.stderr
    r = runner.invoke(app, ["run", str(write(MINIMAL)), "--interval", "10us"])
    assert r.exit_code == 2 and "--interval: expected at least 1ms; got '10us'" in r.stderr


def test_confidence_interval_and_welch() -> None:
    assert t975(1) == 12.706 and t975(30) == 2.042 and t975(1000) == 1.960
    mean, half = ci95([10.0, 12.0, 14.0])
    assert mean == 12.0 and half == pytest.approx(4.303 * 2.0 / 3**0.5)
    assert ci95([5.0]) == (5.0, 0.0)
    assert welch_significant([10, 10.1, 9.9, 10.05], [12, 12.1, 11.9, 12.05])
    assert not welch_significant([10, 12, 8, 11], [10.5, 12.5, 8.5, 9])
    assert welch_significant([1, 1, 1], [2, 2, 2])  # no spread, different means: a deterministic difference
    assert not welch_significant([1, 1, 1], [1, 1, 1])


@pytest.mark.native
def test_seeds_give_mean_ci_and_marks(real_core: Any, write: Any, tmp_path: Path) -> None:
    text = SMALL.replace('name = "zswap"', 'name = "on"').replace('name = "swap"', 'name = "off"')
    out = tmp_path / "s.json"
    r = runner.invoke(app, ["compare", str(write(text)), "--seeds", "3", "--json", str(out), "--no-progress"], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    assert "3 seeds: mean ±95% CI" in r.stdout
    assert "significant at 95% (Welch's t-test" in r.stdout
    d = json.loads(out.read_text())
    assert d["kind"] == "compare-seeds" and len(d["runs"]) == 3
    first = d["runs"][0]["configs"][0]["result"]["provenance"]["seed"]
    assert d["seeds"] == [first, first + 1, first + 2]
    m = d["summary"]["on"]["majflt_per_1k"]
    assert m["n"] == 3 and m["mean"] == pytest.approx(sum(m["values"]) / 3)
