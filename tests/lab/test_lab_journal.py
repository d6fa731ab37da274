"""The journal, restore() and the lock, without touching the kernel: sysctl/zswap entries point
at ordinary files, runner entries at processes the test starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reclaimlab.lab import host
from reclaimlab.lab.errors import LabBusy, LabLeftovers
from reclaimlab.lab.journal import HOST_LOCK, JOURNAL_NAME, Journal, LabLock, pending, read_entries, restore, restore_entries


def test_journal_appends_fsynced_json_lines(tmp_path: Path) -> None:
    j = Journal.create(tmp_path, runid="r1", pid=123)
    j.record("sysctl", name="vm.swappiness", path="/x", old="60")
    j.close()
    lines = (tmp_path / JOURNAL_NAME).read_text().splitlines()
    assert [json.loads(line)["op"] for line in lines] == ["run", "sysctl"]
    assert json.loads(lines[0])["runid"] == "r1"
    assert oct((tmp_path / JOURNAL_NAME).stat().st_mode & 0o777) == "0o600"


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    p = tmp_path / JOURNAL_NAME
    p.write_text('{"op": "run"}\n{"op": "cgroup", "path": "/nope"}\n{"op": "sysc')
    assert [e["op"] for e in read_entries(p)] == ["run", "cgroup"]


def test_an_existing_journal_blocks_a_new_run(tmp_path: Path) -> None:
    Journal.create(tmp_path).close()
    with pytest.raises(LabLeftovers, match="reclaimlab lab restore"):
        Journal.create(tmp_path)


def test_restore_writes_old_values_back_in_reverse_order_and_is_idempotent(tmp_path: Path) -> None:
    knob = tmp_path / "swappiness"
    knob.write_text("60\n")
    param = tmp_path / "enabled"
    param.write_text("N\n")
    swapfile = tmp_path / "x.swap"
    j = Journal.create(tmp_path)
    j.record("knob", name="kernel.vm.swappiness", path=str(knob), old="60")
    knob.write_text("100\n")
    j.record("swapfile", path=str(swapfile))
    swapfile.write_bytes(b"\0" * 4096)
    j.record("zswap_param", name="enabled", path=str(param), old="N")  # a journal of an older version
    param.write_text("Y\n")
    j.record("cgroup", path=str(tmp_path / "no-such-cgroup"))  # journaled, never made
    j.close()
    steps: list[str] = []
    report = restore(tmp_path, on_step=steps.append)
    assert report.ok
    assert steps == ["zswap enabled: Y -> N", f"removed swap file {swapfile}", "kernel.vm.swappiness: 100 -> 60"]
    assert report.undone == steps
    assert any(s.startswith("cgroup ") for s in report.skipped)
    assert knob.read_text().strip() == "60" and param.read_text().strip() == "N" and not swapfile.exists()
    assert pending(tmp_path) is None
    assert restore(tmp_path).undone == []  # no journal: nothing to do


def test_restore_kills_only_our_runner(tmp_path: Path) -> None:
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = host.proc_start_time(ours.pid)
        assert start is not None
        entries = [
            {"op": "run"},
            {"op": "runner", "pid": ours.pid, "start_time": start, "process": "w"},
            # The pid of a process that is not the one journaled (another start time): left alone.
            {"op": "runner", "pid": other.pid, "start_time": start - 1, "process": "x"},
        ]
        report = restore_entries(entries)
        assert report.ok
        assert report.undone == [f"killed runner pid {ours.pid} (process 'w')"]
        assert ours.wait(timeout=5) == -9
        assert other.poll() is None
        assert restore_entries(entries).undone == []  # gone now
    finally:
        for p in (ours, other):
            p.kill()
            p.wait()


def test_restore_keeps_the_journal_when_something_cannot_be_undone(tmp_path: Path) -> None:
    j = Journal.create(tmp_path)
    j.record("sysctl", name="vm.x", path=str(tmp_path / "dir-not-file"), old="1")
    j.close()
    (tmp_path / "dir-not-file").mkdir()
    report = restore(tmp_path)
    assert not report.ok
    assert "vm.x" in report.failed[0]
    assert pending(tmp_path) is not None


def test_the_lock_names_its_holder(tmp_path: Path) -> None:
    with LabLock(tmp_path).acquire("first run"):
        with pytest.raises(LabBusy) as e:
            LabLock(tmp_path).acquire("second run", wait_s=0)
        assert f"pid {os.getpid()} (first run" in str(e.value)
    LabLock(tmp_path).acquire("after release").release()


def test_the_lock_is_held_across_processes(tmp_path: Path) -> None:
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[2]);"
        "from pathlib import Path; from reclaimlab.lab.journal import LabLock;"
        "LabLock(Path(sys.argv[1])).acquire('holder'); print('locked', flush=True); time.sleep(30)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path), str(Path(__file__).parents[2] / "python")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(LabBusy, match=f"pid {holder.pid} \\(holder"):
            LabLock(tmp_path).acquire("me", wait_s=0)
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    LabLock(tmp_path).acquire("me").release()  # the kernel released the dead holder's lock


def test_the_host_lock_spans_state_directories(tmp_path: Path) -> None:
    """Two lab runs with different state directories (make test's private one and a user's)
    still exclude each other: the host-wide lock is taken first."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with LabLock(tmp_path / "a").acquire("user's validate"):
        with pytest.raises(LabBusy, match=f"{HOST_LOCK}: pid {os.getpid()} \\(user's validate"):
            LabLock(tmp_path / "b").acquire("test", wait_s=0)
    LabLock(tmp_path / "b").acquire("after release").release()


def test_a_run_waits_for_the_host_lock(tmp_path: Path) -> None:
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[2]);"
        "from pathlib import Path; from reclaimlab.lab.journal import LabLock;"
        "l = LabLock(Path(sys.argv[1])).acquire('short holder'); print('locked', flush=True); time.sleep(1.5); l.release();"
        "time.sleep(30)"
    )
    (tmp_path / "other").mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "other"), str(Path(__file__).parents[2] / "python")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(LabBusy):
            LabLock(tmp_path).acquire("impatient", wait_s=0)
        LabLock(tmp_path).acquire("patient", wait_s=60).release()
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
