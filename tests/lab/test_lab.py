"""The lab on this host's real kernel: end to end, kill midway + `lab restore`, bad input, the
lock. Every test compares the full machine state before and after. Skipped (with the reason)
where the host cannot run them: not root, no zswap, no memory cgroup controller, runner not
built (then the fake runner runs them instead)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import reclaimlab
from lab.labutil import TINY, Lab
from reclaimlab.backends import kernel
from reclaimlab.lab import host
from reclaimlab.lab.errors import LabBusy, LabTimeout, RunnerFailed
from reclaimlab.lab.journal import JOURNAL_NAME, WAIT_ENV, LabLock, read_entries
from reclaimlab.lab.probe import probe
from reclaimlab.lab.record import sim_counter_keys

pytestmark = pytest.mark.lab


def _cli(lab: Lab, *args: str, timeout: float = 120, wait_s: str | None = None) -> subprocess.CompletedProcess[str]:
    env = lab.env if wait_s is None else {**lab.env, WAIT_ENV: wait_s}
    return subprocess.run(
        [sys.executable, "-m", "reclaimlab", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _scenario(tmp_path: Path, text: str = TINY, name: str = "tiny.toml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _run(path: Path, *overrides: str) -> Any:
    s = reclaimlab.load(path, overrides)
    # Once in a while the kernel's memcg OOM killer takes the runner under this tight limit
    # (swap readahead charging the swap cache): that is the kernel's answer, not the lab's
    # fault; one retry keeps the test about the lab.
    try:
        return kernel.run(s, on_note=None)
    except RunnerFailed as e:
        if "SIGKILL" not in str(e):
            raise
        return kernel.run(s, on_note=None)


# ---------------------------------------------------------------------------------------------
# End to end
# ---------------------------------------------------------------------------------------------


def test_zswap_on_end_to_end(lab: Lab, tmp_path: Path) -> None:
    path = _scenario(tmp_path)
    r = _run(path)
    assert lab.state_now() == lab.before

    assert r.backend == "kernel"
    sim_keys, source = sim_counter_keys(reclaimlab.lower(reclaimlab.load(path)))
    host_keys = set(r.raw["after"])
    # Exactly the simulator's keys that this kernel has: nothing more, nothing missing.
    assert set(r.counters) == sim_keys & host_keys, source
    assert set(r.stats["missing_keys"]) == sim_keys - host_keys
    for key in ("vmstat.zswpout", "vmstat.pswpout", "zswap.stored_pages", "memcg[/workload].memory.stat.swap", "meminfo.SwapTotal"):
        assert key in r.counters
    assert r.counters["vmstat.zswpout"] > 0
    assert r.counters["memcg[/workload].memory.stat.total_pgpgout"] > 0
    # v1's page counter files: the limit was hit (pages were reclaimed), so charges failed;
    # the watermark is at least what is charged now.
    assert r.counters["memcg[/workload].memory.failcnt"] > 0
    usage = r.counters["memcg[/workload].memory.usage_in_bytes"]
    assert r.counters["memcg[/workload].memory.max_usage_in_bytes"] >= usage > 0
    assert r.counters["meminfo.SwapTotal"] == 64 * 1024 - 4  # kB, the header page excluded
    assert r.counters["zswap.stored_pages"] > 0  # a gauge read while the runner still held its memory
    # Phases: the simulator's columns and names (the fault counts are the runner's getrusage).
    frame = r.phases
    assert list(frame.columns) == ["process", "phase", "elapsed_s", "accesses", "accesses_per_s", "outcome", "minflt", "majflt"]
    assert list(frame["phase"]) == ["fill0", "fill1", "access"]
    assert list(frame["accesses"]) == [4096, 4096, 50000]
    assert (frame["elapsed_s"] > 0).all()
    d = json.loads(r.to_json())
    assert d["series"]["t"][0] == 0.0 and len(d["series"]["t"]) >= 2
    assert "vmstat.zswpout" in d["series"]["values"]
    assert d["provenance"]["host_kernel_release"] == os.uname().release
    assert d["provenance"]["scenario_sha256"]
    print(f"[{lab.runner} runner] zswap on: zswpout={r.counters['vmstat.zswpout']} pswpout={r.counters['vmstat.pswpout']}")


def test_zswap_off_swaps_to_disk(lab: Lab, tmp_path: Path) -> None:
    r = _run(_scenario(tmp_path), "kernel.zswap.enabled=false")
    assert lab.state_now() == lab.before
    assert r.counters["vmstat.pswpout"] > 0
    assert r.counters["vmstat.zswpout"] == 0
    print(f"[{lab.runner} runner] zswap off: zswpout={r.counters['vmstat.zswpout']} pswpout={r.counters['vmstat.pswpout']}")


def test_cli_run_kernel_prints_tables_and_json(lab: Lab, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ("run", "--backend", "kernel", "--no-build-runner", str(_scenario(tmp_path)), "--json", str(out), "--all")
    r = _cli(lab, *args)
    if r.returncode == 1 and "SIGKILL" in r.stderr:  # the memcg OOM killer, see _run
        r = _cli(lab, *args)
    assert r.returncode == 0, r.stderr
    assert lab.state_now() == lab.before
    assert "tiny: headline (kernel)" in r.stdout and "tiny: phases" in r.stdout and "tiny: counters" in r.stdout
    assert "zswpout" in r.stdout
    d = json.loads(out.read_text())
    assert d["backend"] == "kernel" and d["counters"]["vmstat.zswpout"] > 0


# ---------------------------------------------------------------------------------------------
# Killed midway: `lab restore` undoes everything, including our orphaned runner
# ---------------------------------------------------------------------------------------------


#: TINY with room to spare (no memory pressure, so no OOM risk) and a long last phase that keeps
#: the runner alive while the test interrupts the driver.
LONG = (
    TINY.replace('"memory.limit_in_bytes" = "28MiB"', '"memory.limit_in_bytes" = "48MiB"')
    + '[[processes.phases]]\nkind = "sleep"\nduration = "60s"\n'
)


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_killed_driver_then_lab_restore(lab: Lab, tmp_path: Path) -> None:
    # A long last phase keeps the runner alive after the driver dies; without PDEATHSIG (which
    # would kill it with the driver) it is an orphan that only `lab restore` can know about.
    path = _scenario(tmp_path, LONG)
    journal = lab.state / JOURNAL_NAME
    driver = lab.start_driver(path, tmp_path / "driver.log", orphan_runner=True)
    try:

        def applied() -> bool:
            if driver.poll() is not None:
                raise AssertionError(f"the driver exited early ({driver.returncode}): {(tmp_path / 'driver.log').read_text()}")
            if not journal.exists():
                return False
            ops = [e["op"] for e in read_entries(journal)]
            return "cgroup" in ops and "swapon" in ops and "runner" in ops

        _wait_for(applied, 60, "the journal to show the cgroup, swapon and runner")
        runner = next(e for e in read_entries(journal) if e["op"] == "runner")
        scratch = Path(next(e for e in read_entries(journal) if e["op"] == "scratch")["path"])
        # Let the runner get into its cgroup and its phases.
        cgroup_dirs = [Path(e["path"]) for e in read_entries(journal) if e["op"] == "cgroup"]
        _wait_for(lambda: str(runner["pid"]) in host.read_text(cgroup_dirs[-1] / "cgroup.procs").split(), 30, "the runner to be moved")
        time.sleep(0.5)
        assert driver.poll() is None, f"the driver exited early ({driver.returncode}): {(tmp_path / 'driver.log').read_text()}"
    finally:
        if driver.poll() is None:  # only the driver we started, while it runs (a reaped pid may be reused)
            os.kill(driver.pid, signal.SIGKILL)
        driver.wait()

    # Leftovers: our swap, zswap on, our cgroups, our runner still running.
    left = lab.state_now()
    assert left != lab.before
    assert left["swaps"] != lab.before["swaps"]
    assert left["zswap"]["enabled"] == "Y"
    assert any("reclaimlab-" in c for c in left["cgroups"])
    assert host.pid_alive(runner["pid"], runner["start_time"])
    assert (scratch / "lowered.json").exists()
    # A new run refuses while the leftovers are there.
    refused = _cli(lab, "run", "--backend", "kernel", "--no-build-runner", str(_scenario(tmp_path)))
    assert refused.returncode == 1
    assert "active swap" in refused.stderr or "journal" in refused.stderr

    r = _cli(lab, "lab", "restore")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"killed runner pid {runner['pid']}" in r.stdout
    assert f"removed scratch directory {scratch}" in r.stdout and not scratch.exists()
    assert "swapoff" in r.stdout and "removed cgroup" in r.stdout and "kernel.zswap.enabled: Y -> N" in r.stdout
    assert not host.pid_alive(runner["pid"], runner["start_time"])
    assert not journal.exists()
    assert lab.state_now() == lab.before
    # Idempotent: a second restore finds nothing to do.
    again = _cli(lab, "lab", "restore")
    assert again.returncode == 0 and "nothing to restore" in again.stdout
    assert lab.state_now() == lab.before


def test_sigterm_restores_before_exiting(lab: Lab, tmp_path: Path) -> None:
    path = _scenario(tmp_path, LONG)
    journal = lab.state / JOURNAL_NAME
    driver = subprocess.Popen(
        [sys.executable, "-m", "reclaimlab", "run", "--backend", "kernel", "--no-build-runner", str(path)],
        env=lab.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        _wait_for(lambda: journal.exists() and any(e["op"] == "runner" for e in read_entries(journal)), 60, "the runner")
        time.sleep(1.0)
        driver.send_signal(signal.SIGTERM)
        _, err = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
    assert driver.returncode == 128 + signal.SIGTERM, err
    assert "interrupted by SIGTERM; the host was restored" in err
    assert not journal.exists()
    assert lab.state_now() == lab.before


# ---------------------------------------------------------------------------------------------
# Bad input: refused, named by key, exit code 2, nothing changed
# ---------------------------------------------------------------------------------------------


def test_cgroup_v2_scenario_on_a_v1_host(lab: Lab, tmp_path: Path) -> None:
    if probe().cgroup_v2_memory:
        pytest.skip("this host has the cgroup v2 memory controller")
    text = TINY.replace("cgroup_version = 1", "cgroup_version = 2").replace('"memory.limit_in_bytes" = "28MiB"', '"memory.high" = "28MiB"')
    path = _scenario(tmp_path, text)
    r = _cli(lab, "run", "--backend", "kernel", "--no-build-runner", str(path))
    assert r.returncode == 2, r.stderr
    assert (
        f"{path}: cgroups.cgroup_version: the scenario needs cgroup v2 (memory.high); this host has the cgroup v1 memory controller only"
        in r.stderr
    )
    assert "Traceback" not in r.stderr
    assert lab.state_now() == lab.before
    assert not (lab.state / JOURNAL_NAME).exists()


def test_compressor_the_kernel_lacks(lab: Lab, tmp_path: Path) -> None:
    p = probe()
    missing = next((c for c in ("zstd", "lz4", "842") if c not in p.compressors), None)
    if missing is None:
        pytest.skip("this kernel has every compressor the simulator knows")
    path = _scenario(tmp_path, TINY.replace('zswap.compressor = "lzo"', f'zswap.compressor = "{missing}"'))
    r = _cli(lab, "run", "--backend", "kernel", "--no-build-runner", str(path))
    assert r.returncode == 2, r.stderr
    available = ", ".join(p.compressors)
    assert f"{path}: kernel.zswap.compressor: {missing!r} is not available to this kernel (available: {available})" in r.stderr
    assert lab.state_now() == lab.before


# ---------------------------------------------------------------------------------------------
# The lock
# ---------------------------------------------------------------------------------------------


def test_second_run_refuses_while_the_lock_is_held(lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with LabLock(lab.state).acquire("a test holding the lock"):
        r = _cli(lab, "run", "--backend", "kernel", "--no-build-runner", str(_scenario(tmp_path)), wait_s="0")
        assert r.returncode == 1
        assert "another reclaimlab lab process holds the lab lock" in r.stderr
        assert f"pid {os.getpid()} (a test holding the lock" in r.stderr
        restore_r = _cli(lab, "lab", "restore", wait_s="0")
        assert restore_r.returncode == 1 and f"pid {os.getpid()}" in restore_r.stderr
        with pytest.raises(LabBusy):
            monkeypatch.setenv(WAIT_ENV, "0")
            kernel.run(reclaimlab.load(_scenario(tmp_path)), on_note=None)
    assert lab.state_now() == lab.before


# ---------------------------------------------------------------------------------------------
# zram, sysctls, failures
# ---------------------------------------------------------------------------------------------


def test_zram_swap_and_sysctls(lab: Lab, tmp_path: Path) -> None:
    p = probe()
    if not p.zram_loaded or not (p.zram_hot_add or any(z.disksize == 0 and z.initstate == 0 for z in p.zram_devices)):
        pytest.skip("no usable zram on this host")
    text = TINY.replace('size = "64MiB"\ndevice = "virtio-disk"', 'size = "64MiB"\nkind = "zram"\ncomp_algorithm = "lzo"')
    text = text.replace('"memory.limit_in_bytes" = "28MiB"', '"memory.limit_in_bytes" = "28MiB"\n"memory.swappiness" = 100')
    r = _run(_scenario(tmp_path, text), "kernel.zswap.enabled=false", "kernel.vm.swappiness=100", "kernel.vm.page-cluster=0")
    assert lab.state_now() == lab.before  # sysctls back, the zram device reset and hot-removed
    assert r.counters["vmstat.pswpout"] > 0 and r.counters["vmstat.zswpout"] == 0
    assert r.counters["zram0.mm_stat.orig_data_size"] > 0
    assert 0 < r.counters["zram0.mm_stat.compr_data_size"] < r.counters["zram0.mm_stat.orig_data_size"]
    (dev,) = r.provenance["swap_devices"]
    assert dev["kind"] == "zram" and dev["priority"] == 100 and dev["key"] == "zram0"


def test_a_failing_runner_still_restores(lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "bad_runner.py"
    script.write_text(
        "import json, os, sys\n"
        "print(json.dumps({'event': 'ready', 'pid': os.getpid()}), flush=True)\n"
        "sys.stdin.readline()\n"
        "print(json.dumps({'event': 'error', 'message': 'mmap failed: out of luck'}), flush=True)\n"
        "sys.exit(2)\n"
    )
    monkeypatch.setenv("RECLAIMLAB_RUNNER", f"{sys.executable} {script}")
    with pytest.raises(RunnerFailed, match="failed: mmap failed: out of luck"):
        kernel.run(reclaimlab.load(_scenario(tmp_path)), on_note=None)
    assert lab.state_now() == lab.before
    assert not (lab.state / JOURNAL_NAME).exists()


def test_timeout_kills_our_runner_and_restores(lab: Lab, tmp_path: Path) -> None:
    with pytest.raises(LabTimeout):
        kernel.run(reclaimlab.load(_scenario(tmp_path, LONG)), on_note=None, timeout_s=2.0)
    assert lab.state_now() == lab.before


def test_trace_phase_replays_on_the_kernel(lab: Lab, tmp_path: Path) -> None:
    """A trace phase on the real kernel: the runner reads the compact file copied next to the
    lowered JSON and makes exactly the simulator's number of accesses (the order is checked
    against the simulator's by tests/test_trace.py with --trace)."""
    data = Path(__file__).resolve().parents[1] / "data" / "traces" / "zipf.csv"
    text = TINY.replace(
        'name = "access"\nkind = "random"\nregions = ["text", "rand"]\ncount = 50000',
        f'name = "replay"\nkind = "trace"\nregions = ["text", "rand"]\nfile = "{data}"\nformat = "csv"\npasses = 2',
    )
    path = _scenario(tmp_path, text, "trace.toml")
    r = _run(path)
    assert lab.state_now() == lab.before
    assert list(r.phases["phase"]) == ["fill0", "fill1", "replay"]
    assert list(r.phases["accesses"]) == [4096, 4096, 16_000]
