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


def test_restore_of_a_choice_list_knob_compares_the_selected_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # /sys/kernel/mm/transparent_hugepage/defrag takes one choice and reads back the whole
    # list with the selected one in brackets (a restore once failed on that: "wrote 'madvise'
    # ... but it reads 'always defer defer+madvise [madvise] never'").
    defrag = tmp_path / "defrag"
    choices = ("always", "defer", "defer+madvise", "madvise", "never")

    def show(selected: str) -> str:
        return " ".join(f"[{c}]" if c == selected else c for c in choices) + "\n"

    real_write = host.write_text

    def sysfs_write(path: str | os.PathLike[str], text: str) -> None:
        real_write(path, show(text.strip()) if Path(path) == defrag else text)

    monkeypatch.setattr(host, "write_text", sysfs_write)
    defrag.write_text(show("madvise"))
    j = Journal.create(tmp_path)
    j.record("knob", name="kernel.transparent_hugepage.defrag", path=str(defrag), old="madvise")
    host.write_text(defrag, "defer")
    j.close()
    report = restore(tmp_path)
    assert report.ok and pending(tmp_path) is None
    assert report.undone == ["kernel.transparent_hugepage.defrag: defer -> madvise"]
    assert defrag.read_text() == show("madvise")


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


def _exclusive_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two ordinary files that behave like vm.dirty_ratio / vm.dirty_bytes: writing one zeroes
    the other, and the bytes file refuses 0 (EINVAL)."""
    ratio, nbytes = tmp_path / "dirty_ratio", tmp_path / "dirty_bytes"
    real_write = host.write_text

    def write(path: str | os.PathLike[str], value: str) -> None:
        p = Path(path)
        if p == nbytes and value.strip() == "0":
            raise host.LabError(f"cannot write {path}: Invalid argument")
        real_write(p, value)
        if p == ratio:
            nbytes.write_text("0\n")
        elif p == nbytes:
            ratio.write_text("0\n")

    monkeypatch.setattr(host, "write_text", write)
    return ratio, nbytes


@pytest.mark.parametrize("host_had", ["ratio", "bytes"])
def test_restore_puts_back_the_dirty_limit_the_host_had(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host_had: str) -> None:
    ratio, nbytes = _exclusive_pair(tmp_path, monkeypatch)
    old = ("20", "0") if host_had == "ratio" else ("0", "8388608")
    ratio.write_text(old[0] + "\n")
    nbytes.write_text(old[1] + "\n")
    j = Journal.create(tmp_path)
    j.record(
        "dirty_limit",
        name="vm.dirty_ratio/vm.dirty_bytes",
        ratio_path=str(ratio),
        bytes_path=str(nbytes),
        old_ratio=old[0],
        old_bytes=old[1],
    )
    # The run set the other one of the pair.
    if host_had == "ratio":
        host.write_text(nbytes, "4194304")
    else:
        host.write_text(ratio, "15")
    j.close()
    report = restore(tmp_path)
    assert report.ok, report.failed
    assert (ratio.read_text().strip(), nbytes.read_text().strip()) == old
    assert report.undone and report.undone[0].startswith("vm.dirty_ratio/vm.dirty_bytes: ")
    assert pending(tmp_path) is None


def test_restore_detaches_before_it_deletes_a_filesystem_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    image = tmp_path / "r-0.img"
    image.write_bytes(b"\0" * 4096)
    attached = {str(image): ["/dev/loop9"]}
    detached: list[str] = []

    def run_tool(argv: list[str], timeout: float = 120) -> str:
        if argv[:2] == ["losetup", "-j"]:
            return "".join(f"{d}: [2049]:12 ({argv[2]})\n" for d in attached.get(argv[2], []))
        if argv[:2] == ["losetup", "-d"]:
            detached.append(argv[2])
            attached[str(image)] = []
            return ""
        raise AssertionError(argv)

    monkeypatch.setattr(host, "run_tool", run_tool)
    monkeypatch.setattr(host.shutil, "which", lambda name: f"/usr/sbin/{name}")
    j = Journal.create(tmp_path)
    j.record("fsimage", path=str(image))
    j.record("loop", image=str(image))
    j.record("mount", path=str(tmp_path / "mnt-never-made"), fstype="ext4", created_dir=True)
    j.close()
    report = restore(tmp_path)
    assert report.ok, report.failed
    assert report.undone == [f"detached /dev/loop9 from {image}", f"removed filesystem image {image}"]
    assert detached == ["/dev/loop9"] and not image.exists()


def test_an_image_still_attached_is_not_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    image = tmp_path / "r-0.img"
    image.write_bytes(b"\0")
    monkeypatch.setattr(host, "loops_of", lambda path: ["/dev/loop3"])
    report = restore_entries([{"op": "run"}, {"op": "fsimage", "path": str(image)}])
    assert not report.ok and "still attached to /dev/loop3" in report.failed[0]
    assert image.exists()
