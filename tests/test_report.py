"""The seed report: the [report] section's validation, claim evaluation, Markdown, update_doc
and the command line; end to end with the real simulator when it is built."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import reclaimlab
from conftest import ROOT
from reclaimlab import ScenarioError, load, mmtests
from reclaimlab.compare import CompareResult, Config
from reclaimlab.report import (
    ClaimResult,
    DocError,
    build,
    claim_holds,
    format_metric_value,
    metric_values,
    replace_block,
    report,
    update_doc,
)
from reclaimlab.result import RunResult
from reclaimlab.scenario import Scenario, parse_metric

SEEDS = sorted((ROOT / "scenarios" / "seeds").glob("*.toml"))
SEEDS_DOC = ROOT / "docs" / "seeds.md"

# Two cgroups, a limited one with a process that fills then reads its region; small enough for
# the real simulator to run in well under a second.
BASE = """\
schema_version = 1
seed = 7
[machine]
memory = "64MiB"
[[machine.swap]]
size = "64MiB"
device = "ssd"
[kernel]
version = "6.18"
zswap.enabled = true
[cgroups]
cgroup_version = 2
[cgroups.groups.w]
"memory.high" = "6MiB"
[[processes]]
name = "p"
cgroup = "w"
[[processes.regions]]
name = "a"
size = "8MiB"
content = "text"
[[processes.phases]]
kind = "fill"
region = "a"
[[processes.phases]]
name = "read"
kind = "random"
region = "a"
count = 20000
[compare]
configs = [
  { name = "swap", set = { "kernel.zswap.enabled" = false } },
  { name = "zswap", set = {} },
]
"""

REPORT = """
[report]
title = "tiny: zswap vs swap"
source = "tiny.txt"
metrics = ["vmstat.pswpin", "vmstat.zswpout", "phase:p/read.accesses_per_s", "phase:p/read.accesses_per_s_norm"]
[report.published.swap]
"vmstat.pswpin" = 100
"phase:p/read.accesses_per_s" = 1000.5
[report.published.zswap]
"vmstat.pswpin" = 0
[[report.claims]]
text = "zswap avoids disk reads"
metric = "vmstat.pswpin"
baseline = "swap"
config = "zswap"
direction = "down"
[[report.claims]]
text = "zswap stores pages"
metric = "vmstat.zswpout"
baseline = "swap"
config = "zswap"
direction = "up"
[[report.claims]]
text = "zswap reads faster"
metric = "phase:p/read.accesses_per_s"
baseline = "swap"
config = "zswap"
direction = "several_times"
"""

TINY = BASE + REPORT


def errors(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load(text)
    return str(info.value).splitlines()


# --- the [report] section ---------------------------------------------------------------------


def test_report_section_loads() -> None:
    s = load(TINY)
    assert s.report is not None
    assert s.report.title == "tiny: zswap vs swap"
    assert s.report.published["swap"] == {"vmstat.pswpin": 100, "phase:p/read.accesses_per_s": 1000.5}
    assert [c.direction for c in s.report.claims] == ["down", "up", "several_times"]
    assert load(BASE).report is None  # optional
    assert "report" not in reclaimlab.lower(s)  # the core never sees it


def test_published_tables_accept_dotted_keys() -> None:
    s = load(BASE + REPORT.replace('"vmstat.pswpin" = 0', "vmstat.pswpin = 0"))
    assert s.report is not None and s.report.published["zswap"] == {"vmstat.pswpin": 0}


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            '[report.published.zswap]\n"vmstat.pswpin" = 0',
            '[report.published.zwsap]\n"vmstat.pswpin" = 0',
            "<string>: report.published.zwsap: expected the name of a [compare] config (did you mean 'zswap'?) "
            "(one of 'swap', 'zswap'); got 'zwsap'",
        ),
        (
            'baseline = "swap"\nconfig = "zswap"\ndirection = "down"',
            'baseline = "swap"\nconfig = "nope"\ndirection = "down"',
            "<string>: report.claims[0].config: expected the name of a [compare] config (one of 'swap', 'zswap'); got 'nope'",
        ),
        (
            'metrics = ["vmstat.pswpin",',
            'metrics = ["vmstat pswpin",',
            "<string>: report.metrics[0]: expected a counter key like 'vmstat.pswpin' or 'memcg[/a].memory.stat.zswpwb', "
            "or 'phase:<process>/<phase>.<field>'; got 'vmstat pswpin'",
        ),
        (
            '"phase:p/read.accesses_per_s_norm"]',
            '"phase:p/read.speed"]',
            "<string>: report.metrics[3]: expected 'phase:<process>/<phase>.<elapsed_s|accesses_per_s|accesses|accesses_per_s_norm>'; "
            "got 'phase:p/read.speed'",
        ),
        (
            '"phase:p/read.accesses_per_s_norm"]',
            '"phase:p/write.elapsed_s"]',
            "<string>: report.metrics[3]: expected '<process>/<phase>' of this scenario (one of 'p/fill0', 'p/read'); got 'p/write'",
        ),
        (
            'metrics = ["vmstat.pswpin",',
            'metrics = ["memcg[/x].memory.stat.zswpwb",',
            "<string>: report.metrics[0]: expected a cgroup of this scenario in memcg[...] (one of '/', '/w'); got '/x'",
        ),
        (
            'direction = "down"',
            'direction = "sideways"',
            "<string>: report.claims[0].direction: expected one of 'up', 'down', 'about_zero', 'several_times', "
            "'greater_than'; got 'sideways'",
        ),
        (
            'baseline = "swap"\nconfig = "zswap"\ndirection = "down"',
            'config = "zswap"\ndirection = "down"',
            '<string>: report.claims[0].baseline: required key is missing: direction = "down" compares config with a baseline config',
        ),
        (
            'baseline = "swap"\nconfig = "zswap"\ndirection = "down"',
            'baseline = "zswap"\nconfig = "zswap"\ndirection = "down"',
            "<string>: report.claims[0].baseline: expected a config other than the claim's config; both are 'zswap'",
        ),
        (
            'baseline = "swap"\nconfig = "zswap"\ndirection = "down"',
            'config = "zswap"\ndirection = "greater_than"',
            '<string>: report.claims[0].other_metric: required key is missing: direction = "greater_than" compares metric '
            "with other_metric in one config",
        ),
        (
            'baseline = "swap"\nconfig = "zswap"\ndirection = "down"',
            'baseline = "swap"\nconfig = "zswap"\ndirection = "down"\nother_metric = "vmstat.pswpout"',
            '<string>: report.claims[0].other_metric: only direction = "greater_than" takes an other_metric; this claim has '
            'direction = "down"',
        ),
        (
            '[report.published.zswap]\n"vmstat.pswpin" = 0',
            '[report.published.zswap]\n"vmstat.pswpout" = 0',
            '<string>: report.published.zswap."vmstat.pswpout": a published value needs its metric in report.metrics; '
            "add 'vmstat.pswpout' there",
        ),
        (
            '[report.published.zswap]\n"vmstat.pswpin" = 0',
            '[report.published.zswap]\n"vmstat.pswpin" = "zero"',
            "<string>: report.published.zswap.\"vmstat.pswpin\": expected an integer; got 'zero'",
        ),
        (
            'metrics = ["vmstat.pswpin",',
            'metrics = ["vmstat.zswpout", "vmstat.pswpin",',
            "<string>: report.metrics[2]: duplicate metric 'vmstat.zswpout' (also report.metrics[0])",
        ),
        (
            'title = "tiny: zswap vs swap"',
            'titel = "tiny: zswap vs swap"',
            "<string>: report.titel: unknown key (did you mean 'title'?); expected one of: title, source, metrics, published, claims",
        ),
    ],
)
def test_report_errors(old: str, new: str, message: str) -> None:
    text = TINY.replace(old, new, 1)
    assert text != TINY, old
    assert message in errors(text)


def test_report_needs_compare_configs() -> None:
    text = BASE.split("[compare]")[0] + '[report]\nmetrics = ["vmstat.pswpin"]\n'
    assert errors(text) == ["<string>: report: a [report] needs [compare] configs: they are the report's columns"]


def test_all_report_problems_are_reported_together() -> None:
    text = TINY.replace('config = "zswap"\ndirection = "up"', 'config = "zsawp"\ndirection = "up"').replace(
        '"vmstat.zswpout", "phase', '"vmstat", "phase'
    )
    lines = errors(text)
    assert len(lines) == 2
    assert lines[0].startswith("<string>: report.metrics[1]: expected a counter key")
    assert lines[1].startswith("<string>: report.claims[1].config: expected the name of a [compare] config")


def test_parse_metric() -> None:
    assert parse_metric("vmstat.pswpin").counter == "vmstat.pswpin"
    m = parse_metric("memcg[/a/b].memory.stat.zswpwb")
    assert (m.counter, m.memcg) == ("memcg[/a/b].memory.stat.zswpwb", "/a/b")
    m = parse_metric("phase:apt/update.1.elapsed_s")
    assert (m.phase, m.field, m.counter) == ("apt/update.1", "elapsed_s", None)
    for bad in ("pswpin", "phase:update.elapsed_s", "phase:a/b", "memcg[/a.x"):
        with pytest.raises(ValueError, match="expected"):
            parse_metric(bad)


# --- claims -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("direction", "value", "kw", "holds"),
    [
        ("up", 11, {"base": 10}, True),
        ("up", 10, {"base": 10}, False),
        ("up", 9.5, {"base": 10}, False),
        ("down", 3242, {"base": 32025}, True),
        ("down", 10, {"base": 10}, False),
        ("down", 11, {"base": 10}, False),
        ("several_times", 30, {"base": 10}, True),
        ("several_times", 29.9, {"base": 10}, False),
        ("several_times", 5, {"base": 0}, False),
        ("several_times", 0.0235, {"base": 0.0057}, True),
        ("about_zero", 0, {"base": 472978}, True),
        ("about_zero", 4729, {"base": 472978}, True),
        ("about_zero", 4730, {"base": 472978}, False),
        ("about_zero", -3, {"base": 472978}, True),
        ("about_zero", 5, {"largest": 1000}, True),
        ("about_zero", 11, {"largest": 1000}, False),
        ("about_zero", 0, {"base": 0}, True),
        ("greater_than", 135078, {"other": 20736}, True),
        ("greater_than", 0, {"other": 142710}, False),
        ("greater_than", 5, {"other": 5}, False),
        # missing values: cannot tell
        ("up", None, {"base": 1}, None),
        ("up", 1, {}, None),
        ("greater_than", 1, {}, None),
        ("about_zero", 1, {}, None),
    ],
)
def test_claim_holds(direction: str, value: Any, kw: dict[str, Any], holds: bool | None) -> None:
    assert claim_holds(direction, value, **kw) is holds


def _run(counters: dict[str, int], phases: list[tuple[str, str, float, int]]) -> RunResult:
    return RunResult(
        "s",
        "sim",
        {},
        counters,
        [
            {"process": p, "phase": ph, "elapsed_s": el, "accesses": acc, "accesses_per_s": acc / el, "outcome": "completed"}
            for p, ph, el, acc in phases
        ],
    )


def test_metric_values() -> None:
    runs = [
        _run({"vmstat.pswpin": 100}, [("p", "read", 2.0, 2000)]),
        _run({"vmstat.pswpin": 0}, [("p", "read", 0.5, 2000)]),
        _run({}, []),
    ]
    assert metric_values("vmstat.pswpin", runs) == [100, 0, None]
    assert metric_values("phase:p/read.elapsed_s", runs) == [2.0, 0.5, None]
    assert metric_values("phase:p/read.accesses", runs) == [2000, 2000, None]
    assert metric_values("phase:p/read.accesses_per_s", runs) == [1000.0, 4000.0, None]
    assert metric_values("phase:p/read.accesses_per_s_norm", runs) == [1.0, 4.0, None]
    assert metric_values("phase:p/read.accesses_per_s_norm", runs[2:]) == [None]


def test_format_metric_value() -> None:
    assert format_metric_value("vmstat.pswpin", 32025) == "32025"
    assert format_metric_value("phase:p/read.accesses_per_s", 12434.26) == "12434.3"
    assert format_metric_value("phase:p/read.elapsed_s", 8.4731) == "8.473"
    assert format_metric_value("phase:p/read.accesses_per_s_norm", 0.00789) == "0.0079"
    assert format_metric_value("vmstat.pswpin", None) == "n/a"


def _synthetic(scenario: Scenario) -> CompareResult:
    """swap: slow, reads from disk; zswap: 5x faster, no disk reads."""
    return CompareResult(
        "tiny",
        [
            (Config("swap", ()), _run({"vmstat.pswpin": 120, "vmstat.zswpout": 0}, [("p", "fill0", 1.0, 10), ("p", "read", 20.0, 20000)])),
            (Config("zswap", ()), _run({"vmstat.pswpin": 0, "vmstat.zswpout": 50}, [("p", "fill0", 1.0, 10), ("p", "read", 4.0, 20000)])),
        ],
    )


def test_build_judges_claims_on_published_and_simulated_values() -> None:
    s = load(TINY)
    r = build(s, _synthetic(s))
    assert r.configs == ["swap", "zswap"]
    assert r.simulated["phase:p/read.accesses_per_s_norm"] == {"swap": 1.0, "zswap": 5.0}
    down, up, several = r.claims
    assert isinstance(down, ClaimResult)
    assert (down.published, down.published_holds, down.simulated, down.reproduced) == ((100, 0), True, (120, 0), True)
    assert (up.published, up.published_holds, up.simulated, up.reproduced) == ((None, None), None, (0, 50), True)
    assert several.simulated == (1000.0, 5000.0) and several.reproduced
    assert r.reproduced == 3


def test_markdown() -> None:
    s = load(TINY)
    md = build(s, _synthetic(s)).to_markdown()
    assert md == build(s, _synthetic(s)).to_markdown()
    lines = md.splitlines()
    assert lines[0] == "## scenario: tiny: zswap vs swap"  # loaded from a string: no file stem
    assert "published: `tiny.txt`" in lines[2]
    table = [ln for ln in lines if ln.startswith("| `")]
    assert [c.strip() for c in table[0].split("|")[1:-1]] == ["`vmstat.pswpin`", "100 / 120", "0 / 0"]
    assert [c.strip() for c in table[2].split("|")[1:-1]] == ["`phase:p/read.accesses_per_s`", "1000.5 / 1000.0", "\N{EN DASH} / 5000.0"]
    assert [c.strip() for c in table[3].split("|")[1:-1]] == [
        "`phase:p/read.accesses_per_s_norm`",
        "\N{EN DASH} / 1.0000",
        "\N{EN DASH} / 5.0000",
    ]
    claims = [ln for ln in lines if ln.startswith("| zswap")]
    assert [c.strip() for c in claims[0].split("|")[1:-1]] == [
        "zswap avoids disk reads",
        "`vmstat.pswpin`",
        "swap → zswap: down",
        "100 → 0 (-100.0%)",
        "120 → 0 (-100.0%)",
        "✓",
    ]
    assert [c.strip() for c in claims[1].split("|")[1:-1]][3:] == ["\N{EN DASH}", "0 → 50", "✓"]
    assert [c.strip() for c in claims[2].split("|")[1:-1]][2:] == [
        "swap → zswap: ≥ 3\N{MULTIPLICATION SIGN}",
        "1000.5 → \N{EN DASH}",
        "1000.0 → 5000.0 (\N{MULTIPLICATION SIGN}5.0)",
        "✓",
    ]
    assert lines[-1] == "3 of 3 claims reproduced."
    assert not build(s, _synthetic(s)).to_markdown(heading_level=None).startswith("#")


def test_markdown_greater_than_and_failures() -> None:
    text = (
        TINY
        + """
[[report.claims]]
text = "zswap | writes more than it reads"
metric = "vmstat.zswpout"
other_metric = "vmstat.pswpin"
config = "swap"
direction = "greater_than"
"""
    )
    s = load(text)
    r = build(s, _synthetic(s))
    last = r.claims[-1]
    assert last.simulated == (120, 0) and last.reproduced is False
    row = r.to_markdown().splitlines()[-3]
    cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
    assert cells[0] == "zswap \\| writes more than it reads"  # escaped for Markdown
    assert cells[-3:] == ["\N{EN DASH} vs 100", "0 vs 120", "✗"]
    assert r.to_markdown().splitlines()[-1] == "3 of 4 claims reproduced."


# --- update_doc and the command line -------------------------------------------------------------


def fake_run(scenario: Scenario, **_: Any) -> RunResult:
    """A deterministic stand-in for the simulator: zswap makes the read phase 4x faster."""
    zswap = scenario.kernel.zswap.enabled
    return _run(
        {"vmstat.pswpin": 0 if zswap else 99, "vmstat.zswpout": 7 if zswap else 0},
        [("p", "fill0", 1.0, 2048), ("p", "read", 1.0 if zswap else 4.0, 20000)],
    )


DOC = """\
# Seeds

Intro text.

<!-- BEGIN GENERATED: tiny -->
old table
<!-- END GENERATED: tiny -->

Prose after, kept.

<!-- BEGIN GENERATED: other -->
untouched
<!-- END GENERATED: other -->
"""


def test_update_doc(tmp_path: Path, write: Callable[..., Path]) -> None:
    scenario = write(TINY, "tiny.toml")
    doc = tmp_path / "seeds.md"
    doc.write_text(DOC, encoding="utf-8")
    assert update_doc(doc, [scenario], run=fake_run) == ["tiny"]
    text = doc.read_text(encoding="utf-8")
    body = report(scenario, run=fake_run).to_markdown(heading_level=None)
    assert text == DOC.replace("old table\n", body)
    assert "Prose after, kept." in text and "untouched" in text
    update_doc(doc, [scenario], run=fake_run)
    assert doc.read_text(encoding="utf-8") == text  # idempotent


def test_update_doc_needs_the_markers(tmp_path: Path, write: Callable[..., Path]) -> None:
    scenario = write(TINY, "absent.toml")
    doc = tmp_path / "seeds.md"
    doc.write_text(DOC, encoding="utf-8")
    with pytest.raises(DocError, match="no block <!-- BEGIN GENERATED: absent -->"):
        update_doc(doc, [scenario], run=fake_run)
    assert doc.read_text(encoding="utf-8") == DOC  # not written
    with pytest.raises(DocError, match="2 block"):
        replace_block(DOC + DOC, "tiny", "x")


def test_report_without_report_section(write: Callable[..., Path]) -> None:
    with pytest.raises(ScenarioError, match=r"no \[report\] section"):
        report(write(BASE), run=fake_run)


def cli(*args: str) -> Any:
    from typer.testing import CliRunner

    from reclaimlab.cli import app

    return CliRunner().invoke(app, ["report", *args])


def test_main_bad_scenario(write: Callable[..., Path]) -> None:
    path = write(TINY.replace('direction = "down"', 'direction = "sideways"'))
    r = cli(str(path))
    assert r.exit_code == 2
    assert r.stderr.startswith(f"{path}: report.claims[0].direction: expected one of 'up'")
    r = cli(str(path.with_name("missing.toml")))
    assert r.exit_code == 2
    assert "cannot read the scenario" in r.stderr


def test_main_writes_markdown(fake_core: Any, write: Callable[..., Path], tmp_path: Path) -> None:
    path = write(TINY, "tiny.toml")
    out = tmp_path / "out.md"
    assert cli(str(path), "--out", str(out)).exit_code == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("## tiny: tiny: zswap vs swap\n")
    r = cli(str(path))
    assert r.exit_code == 0 and r.stdout == text
    doc = tmp_path / "doc.md"
    doc.write_text(DOC, encoding="utf-8")
    assert cli(str(path), "--update-doc", str(doc)).exit_code == 0
    assert "claims reproduced" in doc.read_text(encoding="utf-8")
    assert cli(str(path), "--update-doc", str(tmp_path / "nope.md")).exit_code == 2
    assert cli(str(path), "--out", str(out), "--update-doc", str(doc)).exit_code == 2


# --- the seed scenarios -----------------------------------------------------------------------------


@pytest.mark.native
@pytest.mark.parametrize("path", SEEDS, ids=[p.stem for p in SEEDS])
def test_seed_claims_agree_with_their_published_numbers(real_core: Any, path: Path) -> None:
    """A transcription check: every claim holds on the published numbers where they are given."""
    s = load(path)
    assert s.report is not None and s.report.claims
    assert s.compare is not None
    empty = CompareResult(s.name or "", [(Config(c.name, ()), _run({}, [])) for c in s.compare.configs])
    r = build(s, empty)
    assert [c.claim.text for c in r.claims if c.published_holds is False] == []


def test_seed_doc_has_a_block_per_seed() -> None:
    text = SEEDS_DOC.read_text(encoding="utf-8")
    for path in SEEDS:
        assert text.count(f"<!-- BEGIN GENERATED: {path.stem} -->") == 1, path.stem
        assert text.count(f"<!-- END GENERATED: {path.stem} -->") == 1, path.stem


# --- end to end with the real simulator --------------------------------------------------------------


@pytest.mark.native
def test_end_to_end_markdown(real_core: Any) -> None:
    pytest.importorskip("reclaimlab._core")
    s = load(TINY)
    r = report(s)
    md = r.to_markdown()
    assert md == report(s).to_markdown()  # deterministic
    lines = md.splitlines()
    assert lines[0] == "## scenario: tiny: zswap vs swap"
    assert sum(1 for ln in lines if ln.startswith("| `")) == 4
    assert lines[-1] == f"{r.reproduced} of 3 claims reproduced."
    assert r.simulated["phase:p/read.accesses_per_s_norm"]["swap"] == 1.0
    down = r.claims[0]
    assert down.simulated[0] is not None and down.simulated[0] > 0  # swap-only reads from disk
    assert down.reproduced  # zswap holds the working set
    assert r.claims[1].reproduced


def test_mmtests_figures_are_mmtests_arithmetic() -> None:
    # The seed's vanilla fs_mark row: kswapd 8202014 scanned, 4700400 reclaimed (57%); direct
    # 4865170 / 4864514 (99%); 37% of the scans direct; velocity over the run's seconds.
    counters = {
        "vmstat.pgscan_kswapd": 8202014,
        "vmstat.pgsteal_kswapd": 4700400,
        "vmstat.pgscan_direct": 4865170,
        "vmstat.pgsteal_direct": 4864514,
        "vmstat.nr_vmscan_write": 14511,
    }
    runs = [_run(counters, [("fs_mark", "fsmark", 567.08, 1), ("sys", "fill0", 1.0, 1)]), _run({}, [("fs_mark", "fsmark", 1.0, 1)])]
    value = {m: metric_values(f"mmtests:{m}", runs) for m in mmtests.DERIVED}
    assert round(value["kswapd_efficiency"][0] or 0) == 57
    assert round(value["direct_efficiency"][0] or 0) == 100
    assert round(value["direct_scans_percent"][0] or 0) == 37
    assert round(value["kswapd_velocity"][0] or 0, 3) == round(8202014 / 567.08, 3)
    assert value["page_writes_by_reclaim"][0] == 14511
    # A run without the counters has no figures.
    assert all(v[1] is None for v in value.values())
    with pytest.raises(ValueError, match="mmtests:<kswapd_efficiency"):
        parse_metric("mmtests:nope")


def test_latency_metric() -> None:
    m = parse_metric("latency:user*.alloc_stall.mean_s")
    assert (m.latency, m.counter, m.phase) == (("user*", "alloc_stall", "mean_s"), None, None)
    for bad in ("latency:user.alloc_stall", "latency:user.stall.sum_s", "latency:user.fault.p99_ns", "latency:.fault.sum_s"):
        with pytest.raises(ValueError, match="expected 'latency:"):
            parse_metric(bad)
    r = _run({}, [])
    r.latency = {
        "processes": [
            {"process": "user0", "kinds": {"alloc_stall": {"sum_ns": 3_000_000_000}}},
            {"process": "user1", "kinds": {"fault": {"sum_ns": 7}}},  # no alloc stall: counts 0
            {"process": "app", "kinds": {"alloc_stall": {"sum_ns": 9_000_000_000}}},
        ]
    }
    assert metric_values("latency:user*.alloc_stall.sum_s", [r]) == [3.0]
    assert metric_values("latency:user*.alloc_stall.mean_s", [r]) == [1.5]
    assert metric_values("latency:user*.alloc_stall.max_s", [r]) == [3.0]
    assert metric_values("latency:app.alloc_stall.sum_s", [r]) == [9.0]
    assert metric_values("latency:nobody*.alloc_stall.sum_s", [r, _run({}, [])]) == [None, None]
    assert format_metric_value("latency:user*.alloc_stall.mean_s", 1.23456) == "1.235"


def test_latency_metric_names_a_process() -> None:
    text = (
        TINY
        + '\n[[report.claims]]\ntext = "x"\nmetric = "latency:q*.fault.sum_s"\nconfig = "zswap"\nbaseline = "swap"\ndirection = "down"\n'
    )
    with pytest.raises(ScenarioError, match=r"expected a process of this scenario or a prefix\* of some \(one of 'p'\); got 'q\*'"):
        load(text)
