"""The trace phase: parsing (CSV, oracleGeneral, damo), the page mapping, errors that name the
scenario file, key and line/byte, simulator determinism, and the runner replaying the very
sequence lowering wrote (tests/data/traces, made by tools/make_trace_samples.py)."""

from __future__ import annotations

import importlib
import json
import subprocess
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reclaimlab import load, lower, trace
from reclaimlab.errors import ScenarioError

DATA = Path(__file__).parent / "data" / "traces"
RUNNER = Path(__file__).resolve().parents[1] / "target" / "release" / "reclaimlab-runner"

SCENARIO = """\
schema_version = 1
seed = 5
[machine]
memory = "64MiB"
[[processes]]
name = "app"
[[processes.regions]]
name = "a"
size = "4MiB"
content = "text"
[[processes.regions]]
name = "b"
size = "4MiB"
content = "random"
[[processes.phases]]
kind = "fill"
region = "a"
[[processes.phases]]
name = "replay"
kind = "trace"
regions = ["b", "a"]
file = "{file}"
format = "{format}"
{extra}
"""


def scenario(tmp_path: Path, file: str, fmt: str, extra: str = "") -> Path:
    p = tmp_path / "s.toml"
    p.write_text(SCENARIO.format(file=file, format=fmt, extra=extra), encoding="utf-8")
    return p


def csv_source() -> tuple[list[int], list[bool]]:
    rows = (DATA / "zipf.csv").read_text().splitlines()[1:]
    pages = [int(r.split(",")[1]) for r in rows]
    writes = [r.split(",")[2] == "w" for r in rows]
    return pages, writes


def phase_of(config: dict[str, Any]) -> dict[str, Any]:
    ph: dict[str, Any] = config["processes"][0]["phases"][1]["phase"]
    return ph


def words_of(config: dict[str, Any]) -> np.ndarray:
    return trace.read_compact(Path(phase_of(config)["trace"]["path"]).read_bytes())


# --- formats and mapping ---------------------------------------------------------------------


def test_csv_modulo_keeps_pages_and_ops(tmp_path: Path) -> None:
    pages, writes = csv_source()
    config = lower(load(scenario(tmp_path, str(DATA / "zipf.csv"), "csv")), profile=None)
    ph = phase_of(config)
    assert ph["regions"] == [1, 0] and ph["passes"] == 1 and ph["limit"] is None
    w = words_of(config)
    assert list(w & 0x7FFFFFFF) == [p % 2048 for p in pages]  # 8 MiB = 2048 pages
    assert list((w >> 31).astype(bool)) == writes
    assert any(writes) and not all(writes)


def test_oracle_general_first_seen_matches_the_csv_sequence(tmp_path: Path) -> None:
    """The sample oracleGeneral file holds the CSV's page sequence as scrambled obj_ids: the
    first_seen map must give the same pages as first_seen over the CSV, all reads."""
    og = lower(load(scenario(tmp_path, str(DATA / "zipf.oracleGeneral"), "oracle_general", 'map = "first_seen"')), profile=None)
    cs = lower(load(scenario(tmp_path, str(DATA / "zipf.csv"), "csv", 'map = "first_seen"')), profile=None)
    a, b = words_of(og), words_of(cs)
    assert list(a) == list(b & 0x7FFFFFFF)
    pages, _ = csv_source()
    seen: dict[int, int] = {}
    assert list(a) == [seen.setdefault(p, len(seen)) for p in pages]
    assert len(a) == 8000


def test_damo_replays_like_damo_replay(tmp_path: Path) -> None:
    """Per snapshot aggr/sample = 20 slices; in slice k, each region with samples > k has every
    page read once, in order; the heap and the stack ranges are laid back to back."""
    config = lower(load(scenario(tmp_path, str(DATA / "tiny.damo"), "damo")), profile=None)
    w = words_of(config)
    heap = lambda a, n: list(range(a, a + n))  # noqa: E731
    stack = list(range(256, 272))
    expect: list[int] = []
    for regions in [
        [(heap(0, 64), 20), (heap(64, 192), 2), (stack, 10)],
        [(heap(0, 32), 15), (heap(32, 224), 0), (stack, 20)],
        [(heap(0, 128), 5), (heap(128, 128), 1), (stack, 0)],
    ]:
        for k in range(20):
            for pages, samples in regions:
                if k < samples:
                    expect += pages
    assert list(w) == expect  # reads only
    assert len(expect) == 3392


def test_damo_plain_json_and_percent(tmp_path: Path) -> None:
    rec = json.loads(zlib.decompress((DATA / "tiny.damo").read_bytes()))
    for s in rec[0]["snapshots"]:
        for r in s["regions"]:
            r["nr_accesses"]["samples"] = None  # percent only: damo computes samples = percent * 20 / 100
    (tmp_path / "p.json").write_text(json.dumps(rec))
    a = trace.convert(tmp_path / "p.json", "damo", 4096)
    b = trace.convert(DATA / "tiny.damo", "damo", 4096)
    assert list(a) == list(b)


@pytest.mark.native
def test_limit_and_passes_lower_and_replay(tmp_path: Path, real_core: Any) -> None:
    from reclaimlab.backends import sim

    s = load(scenario(tmp_path, str(DATA / "zipf.csv"), "csv", "passes = 3\nlimit = 20000"))
    config = lower(s, profile=None)
    assert len(words_of(config)) == 8000  # the file holds one pass; 3 passes cut at 20,000
    r = sim.run(s)
    assert list(r.phases["accesses"]) == [1024, 20_000]


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "fmt", "message"),
    [
        ("time,op\n1,r\n", "csv", "line 1: expected a header with exactly one of the columns page and addr"),
        ("page,op\n1,r\n2,x\n", "csv", "line 3, column op: expected r, w, read or write; got 'x'"),
        ("addr\n4096\nzz\n", "csv", "line 3, column addr: expected a non-negative integer (decimal or 0x hex); got 'zz'"),
        ("page,op\n1,r\n2\n", "csv", "line 3: expected 2 fields like the header; got 1"),
        (b"\x00" * 30, "oracle_general", "byte 24: 30 bytes is not a whole number of 24-byte oracleGeneral records"),
        (b"\x78\x9c garbage", "damo", "byte 0: neither JSON nor zlib-compressed JSON"),
        (
            '[{"intervals": {"sample_us": 5000, "aggr_us": 100000}, "snapshots": [{"regions": [{"start": "1 KiB"}]}]}]',
            "damo",
            "records[0].snapshots[0].regions[0].start: expected a number",
        ),
        ("[1, 2]", "damo", "expected one record (one monitoring target), as damo replay supports; got 2"),
    ],
)
def test_bad_trace_names_file_key_and_place(tmp_path: Path, content: str | bytes, fmt: str, message: str) -> None:
    bad = tmp_path / "bad.trace"
    if isinstance(content, bytes):
        bad.write_bytes(content)
    else:
        bad.write_text(content)
    path = scenario(tmp_path, "bad.trace", fmt)  # relative to the scenario file
    with pytest.raises(ScenarioError) as e:
        lower(load(path), profile=None)
    text = str(e.value)
    assert text.startswith(f"{path}: processes[0].phases[1].file: {fmt} trace {bad}: "), text
    assert message in text, text


def test_missing_trace_file(tmp_path: Path) -> None:
    path = scenario(tmp_path, "nope.csv", "csv")
    with pytest.raises(ScenarioError, match=r"processes\[0\]\.phases\[1\]\.file: csv trace .*nope.csv: cannot read .*No such file"):
        lower(load(path), profile=None)


def test_scenario_keys_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"processes\[0\]\.phases\[1\]\.format: expected one of 'csv', 'oracle_general', 'damo'"):
        load(scenario(tmp_path, "x.csv", "parquet"))
    with pytest.raises(ScenarioError, match=r"processes\[0\]\.phases\[1\]\.regions\[0\]: expected the name of a region"):
        load(scenario(tmp_path, "x.csv", "csv").read_text().replace('regions = ["b", "a"]', 'regions = ["zz"]'))


# --- determinism and the runner -------------------------------------------------------------------


@pytest.mark.native
def test_simulation_is_deterministic_and_keyed_by_content(tmp_path: Path, real_core: Any) -> None:
    from reclaimlab.backends import sim

    s = load(scenario(tmp_path, str(DATA / "zipf.csv"), "csv"))
    a, b = sim.run(s), sim.run(s)
    assert a.to_json() == b.to_json()
    assert a.phases["accesses"].tolist() == [1024, 8000]
    other = load(scenario(tmp_path, str(DATA / "zipf.csv"), "csv", 'map = "first_seen"'))
    assert phase_of(lower(other, profile=None))["trace"]["sha256"] != phase_of(lower(s, profile=None))["trace"]["sha256"]


@pytest.mark.skipif(not RUNNER.is_file(), reason="runner binary not built (cargo build --release -p reclaimlab-runner)")
def test_runner_trace_shows_the_lowered_sequence(tmp_path: Path) -> None:
    """``reclaimlab-runner --trace K`` (dry run) prints the trace phase's first K accesses: the
    CSV's pages mod the phase's pages, over regions b then a, with the CSV's ops."""
    config = lower(load(scenario(tmp_path, str(DATA / "zipf.csv"), "csv", "passes = 2")), profile=None)
    cfg = tmp_path / "lowered.json"
    cfg.write_text(json.dumps(config))
    k = 3000
    out = subprocess.run(
        [str(RUNNER), "--config", str(cfg), "--process", "0", "--no-wait", "--dry-run", "--trace", str(k)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        stdin=subprocess.DEVNULL,
    ).stdout
    events = [json.loads(line) for line in out.splitlines()]
    phases = [e for e in events if e["event"] == "phase"]
    assert [p["accesses"] for p in phases] == [1024, 16_000]
    start = next(i for i, e in enumerate(events) if e["event"] == "phase") + 1
    got = [(e["region"], e["page"], e["write"]) for e in events[start : start + k]]
    pages, writes = csv_source()
    expect = [(1, p % 2048, w) if p % 2048 < 1024 else (0, p % 2048 - 1024, w) for p, w in zip(pages[:k], writes[:k], strict=True)]
    assert got == expect


def test_vm_lab_refuses_traces_its_initramfs_cannot_carry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checked right after lowering, before any kernel, runner or guest is looked at."""
    from reclaimlab.backends import vm

    monkeypatch.setattr(vm, "MAX_TRACE_BYTES", 1 << 14)  # the sample's compact file is 32,016 bytes
    s = load(scenario(tmp_path, str(DATA / "zipf.csv"), "csv"))
    with pytest.raises(
        ScenarioError, match=r"the VM lab carries trace files in its initramfs.*32016B of compact traces is more than it takes \(16KiB\)"
    ):
        vm.run(s, on_note=None)
    monkeypatch.setattr(vm, "MAX_TRACE_BYTES", 1 << 20)
    assert list(vm._traces(s, lower(s))) == [Path(phase_of(lower(s))["trace"]["path"]).name]


def test_oracle_general_layout_agrees_with_libcachesim() -> None:
    """libCacheSim's own reader (the pinned peer of `make bench`) sees in the sample file the
    obj_ids, sizes and next-access times that our parser and generator use."""
    lcs = pytest.importorskip("libcachesim", reason="libcachesim not installed (pip install libcachesim==0.3.5)")
    reader = lcs.TraceReader(trace=str(DATA / "zipf.oracleGeneral"), trace_type=lcs.TraceType.ORACLE_GENERAL_TRACE)
    reqs = [(r.obj_id, r.obj_size, r.next_access_vtime) for r in reader]
    recs = np.frombuffer((DATA / "zipf.oracleGeneral").read_bytes(), dtype=trace.ORACLE_GENERAL)
    # The file says -1 for "never again"; the reader reports INT64_MAX.
    nxt = [2**63 - 1 if v == -1 else v for v in recs["next_access_vtime"].tolist()]
    assert reqs == list(zip(recs["obj_id"].tolist(), recs["obj_size"].tolist(), nxt, strict=True))
    assert reqs[0][0] == 1_000_003 * csv_source()[0][0] + 17 and reqs[0][1] == 4096
    words = trace.convert(DATA / "zipf.oracleGeneral", "oracle_general", 12_345)
    assert list(words) == [obj % 12_345 for obj, _, _ in reqs]


def test_oracle_general_skips_size_zero_records(tmp_path: Path) -> None:
    recs = np.zeros(4, dtype=trace.ORACLE_GENERAL)
    recs["obj_id"] = [10, 11, 12, 13]
    recs["obj_size"] = [4096, 0, 1, 4096]
    (tmp_path / "z.og").write_bytes(recs.tobytes())
    assert list(trace.convert(tmp_path / "z.og", "oracle_general", 100)) == [10, 12, 13]
    assert list(trace.convert(tmp_path / "z.og", "oracle_general", 100, limit=2)) == [10, 12]


def test_configs_compare_by_trace_content_not_path(tmp_path: Path) -> None:
    """Kernel runs recorded on another machine kept the compact file elsewhere: validate
    compares their configs by the trace's sha256 (validate._workload_config)."""
    validate = importlib.import_module("reclaimlab.validate")  # the package exports a function of that name
    config = lower(load(scenario(tmp_path, str(DATA / "zipf.csv"), "csv")), profile=None)
    moved = json.loads(json.dumps(config))
    trace.relocate(moved, "/elsewhere")
    assert phase_of(moved)["trace"]["path"] == "/elsewhere/" + Path(phase_of(config)["trace"]["path"]).name
    assert validate._workload_config(moved) == validate._workload_config(config)
    assert phase_of(validate._workload_config(config))["trace"] == {"sha256": phase_of(config)["trace"]["sha256"]}
    other = json.loads(json.dumps(config))
    phase_of(other)["trace"]["sha256"] = "0" * 64
    assert validate._workload_config(other) != validate._workload_config(config)
