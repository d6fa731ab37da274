"""Counter classification, deltas, series and the simulator's key set (no root)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import reclaimlab
from lab.labutil import FAKE_RUNNER, REAL_RUNNER
from reclaimlab.lab import host
from reclaimlab.lab.errors import LabTimeout, RunnerFailed
from reclaimlab.lab.record import (
    EVENT,
    GAUGE,
    PRESSURE_MEMORY,
    Series,
    Sources,
    buddyinfo,
    counters,
    kind,
    pressure,
    sim_counter_keys,
    snapshot,
    zoneinfo,
)
from reclaimlab.lab.runner import Runner, RunnerSet


@pytest.mark.parametrize(
    ("key", "want"),
    [
        ("vmstat.pswpout", EVENT),
        ("vmstat.zswpout", EVENT),
        ("vmstat.nr_vmscan_write", EVENT),
        ("vmstat.nr_free_pages", GAUGE),
        ("vmstat.nr_zspages", GAUGE),
        ("vmstat.nr_swapcached", GAUGE),
        ("vmstat.workingset_nodes", GAUGE),
        ("vmstat.workingset_refault_anon", EVENT),
        ("zswap.stored_pages", GAUGE),
        ("zswap.pool_total_size", GAUGE),
        ("zswap.stored_incompressible_pages", GAUGE),
        ("zswap.written_back_pages", EVENT),
        ("zswap.reject_compress_poor", EVENT),
        ("memcg[/].memory.stat.pgfault", EVENT),
        ("memcg[/a/b].memory.stat.total_pgmajfault", EVENT),
        ("memcg[/a].memory.stat.pgpgout", EVENT),
        ("memcg[/a].memory.stat.workingset_refault_anon", EVENT),
        ("memcg[/a].memory.stat.zswpout", EVENT),
        ("memcg[/a].memory.stat.rss", GAUGE),
        ("memcg[/a].memory.stat.total_swap", GAUGE),
        ("memcg[/a].memory.stat.zswapped", GAUGE),
        ("memcg[/a].memory.stat.anon_thp", GAUGE),
        ("memcg[/a].memory.events.high", EVENT),
        ("memcg[/a].memory.current", GAUGE),
        ("memcg[/a].memory.usage_in_bytes", GAUGE),
        ("memcg[/a].memory.max_usage_in_bytes", GAUGE),
        ("memcg[/a].memory.failcnt", EVENT),
        ("meminfo.SwapFree", GAUGE),
        ("zram0.mm_stat.compr_data_size", GAUGE),
        ("zram0.mm_stat.pages_compacted", EVENT),
        ("pressure.memory.some.total", EVENT),
        ("pressure.memory.full.avg10", GAUGE),
        ("memcg[/a].memory.pressure.full.total", EVENT),
        ("memcg[/a].memory.pressure.some.avg300", GAUGE),
    ],
)
def test_classification(key: str, want: str) -> None:
    assert kind(key) == want


def test_counters_are_deltas_for_events_and_values_for_gauges() -> None:
    before = {"vmstat.pswpout": 100, "vmstat.nr_free_pages": 5000, "zswap.stored_pages": 3}
    after = {"vmstat.pswpout": 150, "vmstat.nr_free_pages": 4000, "zswap.stored_pages": 10, "vmstat.new": 7}
    assert counters(before, after) == {"vmstat.new": 7, "vmstat.nr_free_pages": 4000, "vmstat.pswpout": 50, "zswap.stored_pages": 10}
    assert counters(before, after, {"vmstat.pswpout", "vmstat.absent"}) == {"vmstat.pswpout": 50}


def test_series_columns() -> None:
    s = Series(keys=["vmstat.pswpout", "zswap.stored_pages"], interval_s=1.0)
    before = {"vmstat.pswpout": 10, "zswap.stored_pages": 0}
    s.add(0.0, before, before)
    s.add(1.0004, before, {"vmstat.pswpout": 15})
    assert s.to_dict() == {"interval_s": 1.0, "t": [0.0, 1.0], "values": {"vmstat.pswpout": [0, 5], "zswap.stored_pages": [0, None]}}


def test_snapshot_of_the_global_sources_needs_no_root() -> None:
    snap = snapshot(Sources())
    assert snap["vmstat.pgfault"] > 0 and "meminfo.MemTotal" in snap


def test_pressure_file_under_the_simulators_keys(tmp_path: Path) -> None:
    text = "some avg10=1.23 avg60=0.05 avg300=10.00 total=324837845\nfull avg10=0.00 avg60=0.13 avg300=0.15 total=168055405\n"
    assert pressure(text, "pressure.memory.") == {
        "pressure.memory.some.avg10": 123,
        "pressure.memory.some.avg60": 5,
        "pressure.memory.some.avg300": 1000,
        "pressure.memory.some.total": 324837845,
        "pressure.memory.full.avg10": 0,
        "pressure.memory.full.avg60": 13,
        "pressure.memory.full.avg300": 15,
        "pressure.memory.full.total": 168055405,
    }
    # A copy of a v2 guest's files (the VM lab's snapshot): the system's and a cgroup's.
    (tmp_path / "proc/pressure").mkdir(parents=True)
    (tmp_path / "proc/pressure/memory").write_text(text)
    for f in ("proc/vmstat", "proc/meminfo"):
        (tmp_path / f).write_text("pgfault 1\n" if f.endswith("vmstat") else "MemTotal: 100 kB\n")
    cg = tmp_path / "cg"
    cg.mkdir()
    (cg / "memory.stat").write_text("anon 0\n")
    (cg / "memory.pressure").write_text(text)
    snap = snapshot(Sources(cgroup_version=2, cgroups={"/a": cg}, root=tmp_path))
    assert snap["pressure.memory.some.total"] == 324837845
    assert snap["memcg[/a].memory.pressure.full.avg300"] == 15
    # Without PSI the keys are absent, not 0.
    (tmp_path / "proc/pressure/memory").unlink()
    assert not any("pressure" in k and not k.startswith("memcg") for k in snapshot(Sources(root=tmp_path)))


def test_buddyinfo_under_the_simulators_keys(tmp_path: Path) -> None:
    # A two-node host: each zone's orders are summed over the nodes (the simulator has one).
    text = (
        "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3 \n"
        "Node 0, zone   Normal    768    169    134    151    161    107    108     75     50     76     12 \n"
        "Node 1, zone   Normal      2      1      0      0      0      0      0      0      0      4      1 \n"
    )
    got = buddyinfo(text)
    assert got["buddyinfo.Normal.0"] == 770 and got["buddyinfo.Normal.9"] == 80 and got["buddyinfo.Normal.10"] == 13
    assert got["buddyinfo.DMA.10"] == 3 and len(got) == 22
    assert kind("buddyinfo.Normal.9") == GAUGE
    for f in ("proc/vmstat", "proc/meminfo"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("pgfault 1\n" if f.endswith("vmstat") else "MemTotal: 100 kB\n")
    (tmp_path / "proc/buddyinfo").write_text(text)
    assert snapshot(Sources(root=tmp_path))["buddyinfo.Normal.1"] == 170


def test_this_hosts_pressure_is_read_when_it_has_psi() -> None:
    snap = snapshot(Sources())
    if not PRESSURE_MEMORY.exists():
        pytest.skip("this kernel has no /proc/pressure (CONFIG_PSI off or psi=0)")
    assert snap["pressure.memory.some.total"] >= snap["pressure.memory.full.total"]


@pytest.mark.native
def test_native_key_set_is_what_the_core_reports(real_core: object) -> None:
    config = reclaimlab.lower(reclaimlab.load(Path(__file__).parents[2] / "scenarios" / "three-regions.toml"))
    keys, source = sim_counter_keys(config)
    assert source == "native"
    assert "vmstat.zswpout" in keys and "memcg[/workload].memory.stat.total_rss" in keys


# ---------------------------------------------------------------------------------------------
# The runner protocol, with scripts (no root, no cgroups)
# ---------------------------------------------------------------------------------------------

SLEEPER = {
    "seed": 1,
    "processes": [
        {
            "name": "p",
            "cgroup": 0,
            "regions": [{"name": "a", "pages": 16, "content": "text", "variants": 4}],
            "phases": [
                {"name": "fill0", "phase": {"kind": "fill", "region": 0}},
                {"name": "nap", "phase": {"kind": "sleep", "duration_ns": 0}},
            ],
        }
    ],
}


def _set(tmp: Path, cmd: list[str], config: dict[str, object]) -> RunnerSet:
    path = tmp / "lowered.json"
    path.write_text(json.dumps(config))
    started: list[Runner] = []
    return RunnerSet(cmd, path, config, started.append)


def test_protocol_with_the_fake_runner(tmp_path: Path) -> None:
    rs = _set(tmp_path, [sys.executable, str(FAKE_RUNNER)], SLEEPER)
    try:
        rs.start()
        rs.wait_ready()
        rs.go()
        ticks: list[float] = []
        rs.run(time.monotonic() + 30, lambda: ticks.append(time.monotonic()), 0.01)
        rs.finish()
        r = rs.runners[0]
        assert [p["phase"] for p in r.phases] == ["fill0", "nap"] and r.phases[0]["accesses"] == 16
        assert r.proc.returncode == 0
    finally:
        rs.close()


@pytest.mark.skipif(not REAL_RUNNER.exists(), reason="the workload runner is not built (make build)")
def test_after_waits_for_the_named_phase_of_another_runner(tmp_path: Path) -> None:
    """The driver answers a runner's `waiting` with `continue` once the phase its `after` names
    has ended: q's fill starts after p's 300 ms sleep (the real runner, --dry-run: no memory)."""
    region = {"name": "r", "pages": 64, "content": "text", "variants": 4}
    config = {
        "seed": 3,
        "processes": [
            {
                "name": "p",
                "cgroup": 0,
                "regions": [region],
                "phases": [{"name": "nap", "phase": {"kind": "sleep", "duration_ns": 300_000_000}}],
            },
            {
                "name": "q",
                "cgroup": 0,
                "regions": [region],
                "phases": [
                    {"name": "fill0", "phase": {"kind": "fill", "region": 0}, "after": {"process": 0, "phase": 0}},
                    {"name": "nap", "phase": {"kind": "sleep", "duration_ns": 0}},
                ],
            },
        ],
    }
    path = tmp_path / "lowered.json"
    path.write_text(json.dumps(config))
    rs = RunnerSet([str(REAL_RUNNER)], path, config, lambda r: None, ["--dry-run"])
    try:
        rs.start()
        rs.wait_ready()
        rs.go()
        rs.run(time.monotonic() + 30, lambda: None, 1.0)
        rs.finish()
        p, q = rs.runners
        # Each runner's times count from its own `go` (sent within microseconds of the other).
        assert q.phases[0]["start_ns"] >= p.phases[0]["end_ns"] - 20_000_000
        assert q.phases[0]["start_ns"] >= 250_000_000
        assert [ph["phase"] for ph in q.phases] == ["fill0", "nap"]
    finally:
        rs.close()


def test_a_runner_error_is_reported(tmp_path: Path) -> None:
    bad = dict(SLEEPER, processes=[])  # --process 0 does not exist in what the runner reads
    rs = _set(tmp_path, [sys.executable, str(FAKE_RUNNER)], SLEEPER)
    rs.config_path.write_text(json.dumps(bad))
    try:
        rs.start()
        with pytest.raises(RunnerFailed, match="failed: bad config"):
            rs.wait_ready()
    finally:
        rs.close()


def test_an_early_exit_is_reported_with_stderr(tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text(
        "import json, sys\nprint(json.dumps({'event': 'ready', 'pid': __import__('os').getpid()}), flush=True)\nsys.stdin.readline()\nsys.exit('boom')\n"
    )
    rs = _set(tmp_path, [sys.executable, str(script)], SLEEPER)
    try:
        rs.start()
        rs.wait_ready()
        rs.go()
        with pytest.raises(RunnerFailed, match=r"stopped after 0 of 2 phases \(exit code 1\): boom"):
            rs.run(time.monotonic() + 30, lambda: None, 1.0)
    finally:
        rs.close()


def test_timeout_kills_the_runners(tmp_path: Path) -> None:
    config = dict(SLEEPER)
    config["processes"] = [dict(SLEEPER["processes"][0], phases=[{"name": "nap", "phase": {"kind": "sleep", "duration_ns": 60 * 10**9}}])]  # type: ignore[index]
    rs = _set(tmp_path, [sys.executable, str(FAKE_RUNNER)], config)
    try:
        rs.start()
        rs.wait_ready()
        rs.go()
        with pytest.raises(LabTimeout):
            rs.run(time.monotonic() + 0.3, lambda: None, 0.1)
    finally:
        rs.close()
    assert rs.runners[0].proc.returncode == -9


def test_runners_die_with_the_driver(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG: a driver killed with SIGKILL takes its runners along."""
    code = f"""
import sys, json, time
sys.path.insert(0, {str(Path(__file__).parents[2] / "python")!r})
from pathlib import Path
from reclaimlab.lab.runner import RunnerSet
cfg = json.loads(Path(sys.argv[1]).read_text())
rs = RunnerSet([sys.executable, {str(FAKE_RUNNER)!r}], Path(sys.argv[1]), cfg, lambda r: print(r.pid, flush=True))
rs.start(); rs.wait_ready(); rs.go(); time.sleep(60)
"""
    config = dict(SLEEPER)
    config["processes"] = [dict(SLEEPER["processes"][0], phases=[{"name": "nap", "phase": {"kind": "sleep", "duration_ns": 60 * 10**9}}])]  # type: ignore[index]
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=tmp_path, delete=False) as f:
        f.write(json.dumps(config))
    driver = subprocess.Popen([sys.executable, "-c", code, f.name], stdout=subprocess.PIPE, text=True)
    try:
        assert driver.stdout is not None
        pid = int(driver.stdout.readline())
        start = host.proc_start_time(pid)
        assert host.pid_alive(pid, start)
        driver.kill()
        driver.wait()
        deadline = time.monotonic() + 5
        while host.pid_alive(pid, start) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not host.pid_alive(pid, start)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        if driver.stdout is not None:
            driver.stdout.close()


def test_zoneinfo_under_the_simulators_keys(tmp_path: Path) -> None:
    # /proc/zoneinfo of the 6.12 guest (1 GiB, THP madvise), abridged: per zone the free pages,
    # the watermarks, the sizes and lowmem_reserve; the empty zones are left out.
    text = (
        "Node 0, zone      DMA\n  per-node stats\n      nr_inactive_anon 16\n"
        "  pages free     3808\n        boost    0\n        min      174\n        low      217\n"
        "        high     260\n        promo    303\n        spanned  4095\n        present  3998\n"
        "        managed  3840\n        cma      0\n        protection: (0, 941, 941, 941, 941)\n"
        "      nr_free_pages 3808\n"
        "Node 0, zone    DMA32\n  pages free     231745\n        boost    0\n        min      11089\n"
        "        low      13861\n        high     16633\n        spanned  258013\n        present  258013\n"
        "        managed  243786\n        protection: (0, 0, 0, 0, 0)\n"
        "Node 0, zone   Normal\n  pages free     0\n        min      0\n        managed  0\n"
    )
    got = zoneinfo(text)
    assert got["zoneinfo.DMA.min"] == 174 and got["zoneinfo.DMA.protection.3"] == 941
    assert got["zoneinfo.DMA32.nr_free_pages"] == 231745 and got["zoneinfo.DMA32.low"] == 13861
    assert got["zoneinfo.DMA32.managed"] == 243786
    assert not any(k.startswith("zoneinfo.Normal.") for k in got)
    assert kind("zoneinfo.DMA32.min") == GAUGE
    # Read only where asked (the VM lab's guest), not from the host's /proc.
    for f in ("proc/vmstat", "proc/meminfo"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("pgfault 1\n" if f.endswith("vmstat") else "MemTotal: 100 kB\n")
    (tmp_path / "proc/zoneinfo").write_text(text)
    assert not any(k.startswith("zoneinfo.") for k in snapshot(Sources(root=tmp_path)))
    assert snapshot(Sources(root=tmp_path, zoneinfo=True))["zoneinfo.DMA.low"] == 217
