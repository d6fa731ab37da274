from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import reclaimlab
from conftest import MINIMAL, THREE_REGIONS
from reclaimlab.cli import app

runner = CliRunner()
Write = Callable[..., Path]


def test_version() -> None:
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0
    assert r.output.startswith(f"reclaimlab {reclaimlab.__version__}")


def test_help_lists_commands() -> None:
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0
    assert "run" in r.output and "compare" in r.output


def test_bad_scenario_exits_2_with_the_message(write: Write) -> None:
    path = write(MINIMAL.replace('content = "text"', 'content = "txet"').replace("schema_version = 1", "schema_version = 1\nbogus = 1"))
    r = runner.invoke(app, ["run", str(path)])
    assert r.exit_code == 2
    assert f"{path}: bogus: unknown key" in r.stderr
    assert f'{path}: processes[0].regions[0].content: bad page content "txet"' in r.stderr
    assert "Traceback" not in r.output


def test_missing_file_exits_2() -> None:
    r = runner.invoke(app, ["run", "does-not-exist.toml"])
    assert r.exit_code == 2
    assert "does-not-exist.toml: cannot read the scenario" in r.stderr


def test_bad_set_exits_2(write: Write) -> None:
    r = runner.invoke(app, ["run", str(write(MINIMAL)), "--set", "kernel.vm.swappiness=900", "--set", "kernel.zswap.nope=1"])
    assert r.exit_code == 2
    assert "--set kernel.zswap.nope=1: unknown key 'nope' under kernel.zswap" in r.stderr
    assert "kernel.vm.swappiness: expected an integer in 0..200; got 900 (from --set kernel.vm.swappiness=900)" in r.stderr


def test_compare_bad_vary_exits_2() -> None:
    r = runner.invoke(app, ["compare", str(THREE_REGIONS), "--vary", "kernel.vm.swappiness"])
    assert r.exit_code == 2
    assert "--vary: expected key=value1,value2" in r.stderr


def test_compare_without_configs_exits_2(write: Write) -> None:
    r = runner.invoke(app, ["compare", str(write(MINIMAL))])
    assert r.exit_code == 2
    assert "no configurations to compare" in r.stderr


def test_native_missing_exits_1(monkeypatch: pytest.MonkeyPatch, write: Write) -> None:
    monkeypatch.setitem(sys.modules, "reclaimlab._core", None)
    monkeypatch.delattr(reclaimlab, "_core", raising=False)
    r = runner.invoke(app, ["run", str(write(MINIMAL))])
    assert r.exit_code == 1
    assert "maturin develop" in r.stderr


def test_run_prints_the_headline_and_counters_behind_all(fake_core: Any, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    r = runner.invoke(app, ["run", str(THREE_REGIONS), "--no-progress", "--json", str(out), "--set", "kernel.zswap.enabled=false"])
    assert r.exit_code == 0, r.output
    text = r.stdout
    for needle in ("headline", "outcome", "majflt/1k", "pswpout", "phases", "fill0", "access", "accesses/s", "legend:"):
        assert needle in text, needle
    assert "memcg[/workload]" not in text  # the full counter table only with --all
    r = runner.invoke(app, ["run", str(THREE_REGIONS), "--no-progress", "--all"], env={"COLUMNS": "200"})
    text = r.stdout[r.stdout.index(": counters") :]
    for needle in ("vmstat", "memcg[/workload]", "meminfo", "/1k acc", "/s"):
        assert needle in text, needle
    # counters grouped by source: vmstat before zswap before memcg before meminfo
    assert text.index("vmstat") < text.index("zswap ") < text.index("memcg[") < text.index("meminfo")
    d = json.loads(out.read_text(encoding="utf-8"))
    assert d["backend"] == "sim"
    assert d["provenance"]["overrides"] == ["kernel.zswap.enabled=false"]
    assert "series" not in d  # only with --interval


def test_run_counters_glob(fake_core: Any) -> None:
    r = runner.invoke(app, ["run", str(THREE_REGIONS), "--no-progress", "--counters", "vmstat.pswp*"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "pswpin" in r.stdout and "pgscan_anon" not in r.stdout


def test_run_json_to_stdout(fake_core: Any) -> None:
    r = runner.invoke(app, ["run", str(THREE_REGIONS), "--json", "-"])
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    assert d["scenario"] == "three-regions"
    assert "pswpout" in r.stderr  # the tables went to stderr


def test_run_json_is_deterministic(fake_core: Any, tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert runner.invoke(app, ["run", str(THREE_REGIONS), "--json", str(a)]).exit_code == 0
    assert runner.invoke(app, ["run", str(THREE_REGIONS), "--json", str(b)]).exit_code == 0
    assert a.read_bytes() == b.read_bytes()


def test_compare_headline_ranking_and_winner(fake_core: Any, tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    r = runner.invoke(app, ["compare", str(THREE_REGIONS), "--json", str(out), "--no-progress"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert "headline (baseline swap-only)" in r.stdout  # [compare] baseline
    header = next(line for line in lines if "no-limit" in line and "swap-only" in line)
    assert header.index("no-limit") < header.index("swap-only") < header.index("zswap+shrinker")
    assert any(line.strip().startswith("│ outcome") for line in lines)
    assert "vmstat.pgscan_anon" not in r.stdout  # the full table only with --all
    assert "ranking by access acc/s (higher is better):" in r.stdout
    winner = next(line for line in lines if line.startswith("winner: "))
    assert "vs" in winner and "/s" in winner
    d = json.loads(out.read_text(encoding="utf-8"))
    assert [c["name"] for c in d["configs"]] == ["no-limit", "swap-only", "zswap", "zswap+shrinker"]


def test_compare_baseline_option(fake_core: Any) -> None:
    r = runner.invoke(app, ["compare", str(THREE_REGIONS), "--baseline", "zswap", "--no-progress"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "headline (baseline zswap)" in r.stdout
    r = runner.invoke(app, ["compare", str(THREE_REGIONS), "--baseline", "zwsap", "--no-progress"])
    assert r.exit_code == 2
    assert "--baseline: expected one of no-limit, swap-only, zswap, zswap+shrinker; got 'zwsap'" in r.stderr


def test_compare_help_shows_the_compare_table_name() -> None:
    r = runner.invoke(app, ["compare", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    assert "[compare]" in r.stdout


def test_compare_vary_counters_and_all(fake_core: Any) -> None:
    r = runner.invoke(
        app,
        ["compare", str(THREE_REGIONS), "--vary", "kernel.zswap.enabled=false,true", "--counters", "vmstat.*", "--all", "--no-progress"],
        env={"COLUMNS": "200"},
    )
    assert r.exit_code == 0, r.output
    # long configuration names become letters with a legend
    assert "A = kernel.zswap.enabled=false; B = kernel.zswap.enabled=true" in r.stdout
    assert "vmstat.oom_kill" in r.stdout
    assert "zswap.written_back_pages" not in r.stdout
    assert "meminfo" not in r.stdout


@pytest.mark.native
def test_native_run(real_core: Any, write: Write, tmp_path: Path) -> None:
    path = write(MINIMAL)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    r = runner.invoke(app, ["run", str(path), "--json", str(a)])
    assert r.exit_code == 0, r.output
    assert runner.invoke(app, ["run", str(path), "--json", str(b)]).exit_code == 0
    assert a.read_bytes() == b.read_bytes()
    assert "vmstat" in r.stdout


@pytest.mark.native
def test_run_zsmalloc_classes(real_core: Any, write: Write, tmp_path: Path) -> None:
    # zram only, 24 MiB of text through 16 MiB: zram0's pool holds objects at the end.
    zram = MINIMAL.replace('memory = "256MiB"', 'memory = "16MiB"').replace('size = "1MiB"', 'size = "24MiB"')
    path = write(zram.replace('device = "ssd"', 'kind = "zram"'))
    out = tmp_path / "r.json"
    r = runner.invoke(app, ["run", str(path), "--zsmalloc-classes", "--json", str(out)], terminal_width=250)
    assert r.exit_code == 0, r.output
    assert "zsmalloc/zram0/classes" in r.stdout and "Total" in r.stdout
    pools = {p["pool"]: p["classes"] for p in json.loads(out.read_text())["zsmalloc"]}
    counters = json.loads(out.read_text())["counters"]
    assert sum(c["pages_used"] for c in pools["zram0"]) * 4096 == counters["zram0.mm_stat.mem_used_total"] > 0
    assert (
        sum(c["obj_used"] for c in pools["zram0"]) * 4096
        == counters["zram0.mm_stat.orig_data_size"] - 4096 * counters["zram0.mm_stat.same_pages"]
    )
    # Without the flag the result is as before: no zsmalloc section.
    plain = tmp_path / "p.json"
    assert runner.invoke(app, ["run", str(path), "--json", str(plain)]).exit_code == 0
    assert "zsmalloc" not in json.loads(plain.read_text())
    assert runner.invoke(app, ["run", str(path), "--zsmalloc-classes", "--seeds", "2"]).exit_code == 2


def test_set_suggests_the_key_meant(write: Write) -> None:
    r = runner.invoke(app, ["run", str(write(MINIMAL)), "--set", "kernel.zswap.shrinker_enable=true"])
    assert r.exit_code == 2
    assert "unknown key 'shrinker_enable' under kernel.zswap (did you mean 'shrinker_enabled'?)" in r.stderr


def test_completion_is_offered() -> None:
    r = runner.invoke(app, ["--help"])
    assert "--install-completion" in r.output
