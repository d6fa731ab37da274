"""The VM lab's pieces that need no guest: archives, plans, the data channel, key naming."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from reclaimlab.lab.record import Sources, snapshot
from reclaimlab.ranking import ConfigValidation, RankingResult
from reclaimlab.result import RunResult
from reclaimlab.validate import ValidateResult, rows
from reclaimlab.vm import initramfs
from reclaimlab.vm.cache import VmUnavailable, installed_kernel
from reclaimlab.vm.channel import Channel, keyed
from reclaimlab.vm.install import _modinfo_depends, resolve_modules
from reclaimlab.vm.plan import MAX_PROCESSES, make_plan
from reclaimlab.vm.times import ratio_rows


def _config(version: int = 2, swaps: list[dict] | None = None, nproc: int = 1, lru_gen: bool = False) -> dict:
    groups = [
        {
            "path": "/",
            "parent": None,
            "limit_bytes": None,
            "high_bytes": None,
            "swappiness": None,
            "zswap_max_bytes": None,
            "zswap_writeback": True,
        },
        {
            "path": "/a",
            "parent": 0,
            "limit_bytes": 1 << 24,
            "high_bytes": 1 << 23,
            "swappiness": 30,
            "zswap_max_bytes": 4096,
            "zswap_writeback": False,
        },
    ]
    return {
        "machine": {
            "memory_bytes": 1 << 30,
            "cpus": 1,
            "swap": swaps if swaps is not None else [{"name": "d", "kind": "file", "size_bytes": 1 << 26, "priority": -2}],
        },
        "kernel": {
            "zswap": {
                "enabled": True,
                "compressor": "lz4",
                "max_pool_percent": 10,
                "accept_threshold_percent": 90,
                "shrinker_enabled": True,
            },
            "vm": {"swappiness": 100, "page_cluster": 0, "min_free_kbytes": None, "watermark_scale_factor": 10},
            "lru_gen": {"enabled": lru_gen, "min_ttl_ms": 0},
        },
        "cgroups": {"version": version, "groups": groups},
        "processes": [{"name": f"p{i}", "cgroup": 1, "phases": []} for i in range(nproc)],
    }


def test_newc_archive_lists_with_cpio() -> None:
    busybox = shutil.which("busybox") or ("/bin/busybox" if Path("/bin/busybox").is_file() else None)
    if busybox is None:
        pytest.skip("no busybox to read the archive back")
    data = initramfs.newc([("d", initramfs.DIR, b""), ("d/x", initramfs.FILE, b"hello"), ("y", initramfs.EXE, b"12345678")])
    assert len(data) % 512 == 0
    r = subprocess.run([busybox, "cpio", "-t"], input=data, capture_output=True, check=True)
    assert r.stdout.decode().split() == ["d", "d/x", "y"]


def test_newc_is_deterministic_and_concatenates() -> None:
    a = initramfs.run_archive({"plan.sh": b"x=1\n", "lowered.json": b"{}"})
    assert a == initramfs.run_archive({"lowered.json": b"{}", "plan.sh": b"x=1\n"})
    assert a.startswith(b"070701") and b"plan/lowered.json\0" in a and b"TRAILER!!!\0" in a


def test_plan_v2_writes_the_host_labs_files_in_order() -> None:
    p = make_plan(_config(), "rid", 1.0)
    s = p.script
    d = "/sys/fs/cgroup/reclaimlab-rid/a"
    assert p.cgroup_dirs == {"/": "/sys/fs/cgroup/reclaimlab-rid", "/a": d}
    for line in (
        f"setf {d}/memory.max 16777216",
        f"setf {d}/memory.high 8388608",
        f"setf {d}/memory.zswap.max 4096",
        f"setf {d}/memory.zswap.writeback 0",
    ):
        assert line in s
    assert "memory.swappiness" not in s  # v1 only
    assert "setf /sys/fs/cgroup/reclaimlab-rid/cgroup.subtree_control +memory" in s
    assert "swapon /dev/vda" in s and "swapon -p" not in s  # negative priority: the kernel's own
    assert "setp /proc/sys/vm/swappiness 100" in s and "setp /proc/sys/vm/page-cluster 0" in s
    order = [s.index(f"setp /sys/module/zswap/parameters/{n} ") for n in ("compressor", "max_pool_percent", "shrinker_enabled", "enabled")]
    assert "has no /sys/module/zswap/parameters/shrinker_enabled (the scenario sets kernel.zswap.shrinker_enabled = Y)" in s
    assert order == sorted(order)  # compressor first, enabled last
    # MGLRU is the knob kernel.lru_gen.enabled: off (its default) where the guest has the file.
    assert "[ -e /sys/kernel/mm/lru_gen/enabled ] && setp /sys/kernel/mm/lru_gen/enabled 0x0000" in s
    assert p.disks == [("d", 1 << 26)] and p.zram == []
    assert "cg0=/sys/fs/cgroup/reclaimlab-rid/a" in s


def test_plan_v1_and_zram() -> None:
    swaps = [
        {"name": "z", "kind": "zram", "size_bytes": 1 << 25, "priority": 100, "comp_algorithm": "lz4"},
        {"name": "d", "kind": "file", "size_bytes": 1 << 26, "priority": 5},
    ]
    p = make_plan(_config(version=1, swaps=swaps, lru_gen=True), "r", 2.0)
    assert "mount -t cgroup -o memory memory /sys/fs/cgroup/memory" in p.script
    assert "setf /sys/fs/cgroup/memory/reclaimlab-r/a/memory.swappiness 30" in p.script
    assert "setf /sys/block/zram0/comp_algorithm lz4" in p.script
    # A priority >= 0 through the runner's swapon(2): the guest's busybox swapon has no -p.
    assert "/bin/reclaimlab-runner --swapon /dev/zram0 --priority 100 ||" in p.script
    assert "/bin/reclaimlab-runner --swapon /dev/vda --priority 5 ||" in p.script
    assert "    swapon" not in p.script
    assert p.zram == [("zram0", 0)] and "ZRAM_NUM=1" in p.script and "SAMPLE_CS=200" in p.script
    assert "setp /sys/kernel/mm/lru_gen/enabled 0x0007" in p.script
    assert "has no /sys/kernel/mm/lru_gen/enabled" in p.script


def test_plan_refuses_too_many_processes() -> None:
    with pytest.raises(ValueError, match=f"1 to {MAX_PROCESSES} processes"):
        make_plan(_config(nproc=MAX_PROCESSES + 1), "r", 1.0)


STREAM = b"""boot noise
@@EV init 170
@@INFO release 6.12.1
@@SNAP before 200
@@F /proc/vmstat
pswpout 5
zswpout 7
@@F /proc/meminfo
MemTotal:  1000 kB
@@F /sys/fs/cgroup/reclaimlab-r/a/memory.stat
pgfault 10
zswap 4096
@@F /sys/fs/cgroup/reclaimlab-r/a/memory.events
max 3
@@F /sys/kernel/debug/zswap/stored_pages
2
@@END
@@EV exit 0 137
@@OUT 0
{"event":"ready","pid":5}
{"event":"phase","process":"p","phase":"f","index":0,"start_ns":1,"end_ns":2,"accesses":3}

@@END
@@STDERR 0
oops
@@END
@@EV by"""


def test_channel_parses_records_fed_in_pieces() -> None:
    ch = Channel()
    for i in range(0, len(STREAM), 7):
        ch.feed(STREAM[i : i + 7])
    assert ch.event("init") == ["170"] and ch.info["release"] == "6.12.1"
    assert not ch.bye  # the last line is incomplete
    ch.feed(b"e\n")
    assert ch.bye
    (snap,) = ch.snaps
    assert snap.label == "before" and snap.uptime_cs == 200
    assert snap.files["/proc/vmstat"] == "pswpout 5\nzswpout 7\n"
    assert [e["event"] for e in ch.outputs[0]] == ["ready", "phase"]
    assert ch.stderrs[0] == "oops"
    keys = keyed(snap, 2, {"/a": "/sys/fs/cgroup/reclaimlab-r/a"}, [])
    assert keys["vmstat.zswpout"] == 7 and keys["meminfo.MemTotal"] == 1000
    assert keys["memcg[/a].memory.stat.zswap"] == 4096 and keys["memcg[/a].memory.events.max"] == 3
    assert keys["zswap.stored_pages"] == 2


def test_keyed_names_keys_as_the_host_lab(tmp_path: Path) -> None:
    """The same files read by record.snapshot directly give the same keys and values."""
    ch = Channel()
    ch.feed(STREAM + b"e\n")
    snap = ch.snaps[0]
    for path, text in snap.files.items():
        f = tmp_path / path.lstrip("/")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    direct = snapshot(Sources(2, {"/a": tmp_path / "sys/fs/cgroup/reclaimlab-r/a"}, tmp_path / "sys/kernel/debug/zswap", [], root=tmp_path))
    assert keyed(snap, 2, {"/a": "/sys/fs/cgroup/reclaimlab-r/a"}, []) == direct


def test_modinfo_depends_and_order(tmp_path: Path) -> None:
    (tmp_path / "zram.ko").write_bytes(b"\x7fELF....\0license=GPL\0depends=zsmalloc,lz4\0vermagic=x\0")
    (tmp_path / "zsmalloc.ko").write_bytes(b"\0depends=\0")
    (tmp_path / "lz4.ko").write_bytes(b"\0depends=lz4_compress\0")
    (tmp_path / "lz4_compress.ko").write_bytes(b"\0name=lz4_compress\0")
    assert _modinfo_depends((tmp_path / "zram.ko").read_bytes()) == ["zsmalloc", "lz4"]
    order = [n for n, _ in resolve_modules(tmp_path, ("virtio_blk", "zram"))]
    assert order == ["zsmalloc.ko", "lz4_compress.ko", "lz4.ko", "zram.ko"]  # virtio_blk: built in


def test_missing_kernel_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECLAIMLAB_VM_CACHE", str(tmp_path))
    with pytest.raises(VmUnavailable, match="make vmlab"):
        installed_kernel("debian-6.12")
    with pytest.raises(VmUnavailable, match="unknown VM kernel"):
        installed_kernel("debian-9")
    (tmp_path / "kernels" / "debian-6.1").mkdir(parents=True)
    (tmp_path / "kernels" / "debian-6.1" / "kernel.json").write_text(json.dumps({"name": "debian-6.1"}))
    with pytest.raises(VmUnavailable, match="unreadable"):
        installed_kernel("debian-6.1")


def _run(backend: str, elapsed: float, zswpout: int) -> RunResult:
    phase = {"process": "p", "phase": "a", "elapsed_s": elapsed, "accesses": 100, "accesses_per_s": 100 / elapsed, "outcome": "completed"}
    return RunResult("s", backend, {}, {"vmstat.zswpout": zswpout}, [phase])


def test_vm_runs_times_are_never_set_against_the_simulators() -> None:
    sim = _run("sim", 1.0, 100)
    by = {r.metric: r for r in rows([_run("vm", 8.0, 110), _run("vm", 9.0, 90)], sim)}
    assert by["vmstat.zswpout"].rel_error == 0.0  # counters: compared
    assert by["p/a elapsed_s"].kernel is not None and by["p/a elapsed_s"].sim is None and by["p/a elapsed_s"].rel_error is None
    by_host = {r.metric: r for r in rows([_run("kernel", 2.0, 100)], sim)}
    assert by_host["p/a elapsed_s"].rel_error == pytest.approx(-0.5)  # the host lab's times are compared


def test_time_ratios_between_configurations() -> None:
    def config(name: str, kernel_s: list[float], sim_s: float) -> ConfigValidation:
        runs = [_run("vm", t, 1) for t in kernel_s]
        sim = _run("sim", sim_s, 1)
        return ConfigValidation(name, [], ValidateResult("s", runs, sim, rows(runs, sim)))

    ranking = RankingResult("s", [config("base", [10.0, 12.0, 11.0], 1.0), config("other", [22.0, 22.0, 30.0], 3.0)], 3)
    (row,) = ratio_rows(ranking)
    assert (row.phase, row.config, row.baseline) == ("p/a", "other", "base")
    assert row.kernel == pytest.approx(2.0) and row.sim == pytest.approx(3.0)


def test_plan_names_each_after_condition() -> None:
    config = _config(nproc=2)
    config["processes"][1]["phases"] = [
        {"name": "f", "phase": {"kind": "sleep", "duration_ns": 0}},
        {"name": "g", "phase": {"kind": "sleep", "duration_ns": 0}, "after": {"process": 0, "phase": 3}},
    ]
    script = make_plan(config, "r", 1.0).script
    assert "AFTER_1_1='0 3'" in script.splitlines()
    assert "AFTER_1_0" not in script and "AFTER_0_" not in script


def test_guest_init_answers_waiting_runners(tmp_path: Path) -> None:
    """init.sh's release_waiters, run by sh on made-up runner outputs: runner 1 waits for
    phase 1 of runner 0 and gets one `continue` once that phase's line is there."""
    sh = shutil.which("dash") or shutil.which("sh")
    assert sh is not None
    init = (Path(initramfs.__file__).parent / "guest" / "init.sh").read_text()
    funcs = []
    for name in ("alive() {", "release_waiters() {"):
        start = init.index(name)
        funcs.append(init[start : init.index("\n}\n", start) + 3])
    done = next(line for line in init.splitlines() if line.startswith("done_phases()"))
    out0, out1, in1 = tmp_path / "out0", tmp_path / "out1", tmp_path / "in1"
    script = (
        "\n".join([*funcs, done]).replace("/tmp/out", f"{tmp_path}/out")
        + f"""
NPROC=2; AFTER_1_0="0 1"; pid0=$$; pid1=$$
exec 4>{in1}
echo '{{"event":"phase","phase":"f","index":0,"start_ns":1}}' > {out0}
echo '{{"event":"waiting","index":0}}' > {out1}
release_waiters && echo waiting
echo '{{"event":"phase","phase":"g","index":1,"start_ns":2}}' >> {out0}
release_waiters || echo released
release_waiters || echo nothing-left
"""
    )
    r = subprocess.run([sh, "-c", script], capture_output=True, text=True, check=True)
    assert r.stdout.split() == ["waiting", "released", "nothing-left"]
    assert in1.read_text() == "continue\n"
    assert out0.exists() and out1.exists()


def test_plan_checks_the_zram_algorithm_against_what_the_guest_offers(tmp_path: Path) -> None:
    # The lines the plan writes, run by sh against a comp_algorithm file like 6.12 Debian's
    # (no lzo backend) and like 6.1's: a clear error naming the scenario key, or nothing.
    swaps = [{"name": "z", "kind": "zram", "size_bytes": 1 << 25, "priority": -2, "comp_algorithm": "lzo-rle"}]
    script = make_plan(_config(version=2, swaps=swaps), "r", 1.0).script
    lines = [ln for ln in script.splitlines() if "offered" in ln]
    assert len(lines) == 2
    f = tmp_path / "comp_algorithm"
    check = "\n".join(ln.replace("/sys/block/zram0/comp_algorithm", str(f)) for ln in lines)
    prog = 'die() { echo "ERR $*"; exit 3; }\n' + check + "\necho ok\n"
    f.write_text("[lz4] lz4hc zstd deflate \n")  # as 6.12 prints it, with a trailing blank
    out = subprocess.run(["sh", "-c", prog], capture_output=True, text=True, check=False)
    assert out.returncode == 3
    assert out.stdout.strip() == "ERR machine.swap[0].comp_algorithm: zram in this guest kernel offers lz4 lz4hc zstd deflate, not lzo-rle"
    f.write_text("lzo [lzo-rle] lz4 lz4hc 842 zstd\n")
    out = subprocess.run(["sh", "-c", prog], capture_output=True, text=True, check=False)
    assert (out.returncode, out.stdout.strip()) == (0, "ok")
    # "lzo" is not "lzo-rle": a whole word of the list is needed.
    f.write_text("[lzo-rle] lz4\n")
    prog_lzo = prog.replace("' lzo-rle '", "' lzo '")
    assert "' lzo '" in prog_lzo
    assert subprocess.run(["sh", "-c", prog_lzo], capture_output=True, text=True, check=False).returncode == 3


class _FakeGuest:
    """A guest whose kernel dies of the int3 race on the first ``crashes`` boots, then runs to its end."""

    boots = 0
    crashes = 1

    def __init__(self, spec: object) -> None:
        type(self).boots += 1
        self.crashed = type(self).boots <= type(self).crashes
        self.sent = False

    def start(self) -> None:
        pass

    def read_data(self) -> bytes:
        if self.sent:
            return b""
        self.sent = True
        return b"@@EV init 100\n" if self.crashed else b"@@EV init 100\n@@EV bye\n"

    def running(self) -> bool:
        return not self.sent

    def console_tail(self) -> str:
        return "[    2.2] Oops: int3: 0000 [#2] PREEMPT SMP NOPTI\nKernel panic" if self.crashed else ""

    def exit_status(self) -> int:
        return 0

    def stderr_text(self) -> str:
        return ""

    def close(self) -> None:
        pass


def test_drive_boots_again_after_the_tcg_code_patch_race(monkeypatch: pytest.MonkeyPatch) -> None:
    from reclaimlab.lab.errors import LabError
    from reclaimlab.vm import drive as drive_mod
    from reclaimlab.vm.channel import Channel

    monkeypatch.setattr(drive_mod, "Guest", _FakeGuest)
    notes: list[str] = []
    _FakeGuest.boots, _FakeGuest.crashes = 0, 1
    d, ch = drive_mod.drive(None, Channel, what="the guest (t)", limit_s=60, timeout_message="t", poll_s=0, note=notes.append)  # type: ignore[arg-type]
    assert ch.bye and d.t_init is not None and _FakeGuest.boots == 2
    assert len(notes) == 1 and "Oops: int3" in notes[0]
    # Every boot crashing: the error is raised after CODE_PATCH_ATTEMPTS boots.
    _FakeGuest.boots, _FakeGuest.crashes = 0, 99
    with pytest.raises(drive_mod.CodePatchRaceError):
        drive_mod.drive(None, Channel, what="the guest (t)", limit_s=60, timeout_message="t", poll_s=0)  # type: ignore[arg-type]
    assert _FakeGuest.boots == drive_mod.CODE_PATCH_ATTEMPTS
    assert issubclass(drive_mod.CodePatchRaceError, LabError)
