"""The VM lab's filesystems without a guest: the plan, the host-made images, the keys."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from reclaimlab.lab.errors import LabError
from reclaimlab.vm import initramfs, qemu
from reclaimlab.vm.cache import InstalledKernel
from reclaimlab.vm.channel import Channel, keyed
from reclaimlab.vm.install import _fs_modules
from reclaimlab.vm.plan import FS_MODULE_DIR, READY_POLLS, guest_backing, make_plan

from .test_vm_unit import _config

MIB = 1 << 20


def _fs_config(*types: str, backing: str = "device") -> dict[str, Any]:
    c = _config()
    c["machine"]["filesystems"] = [
        {"name": f"fs{i}", "fstype": t, **({"size_bytes": 16 * MIB} if t == "tmpfs" else {"backing": backing})} for i, t in enumerate(types)
    ]
    # 32 MiB on the first filesystem (a file region of process 0)
    c["processes"][0]["regions"] = [{"name": "f", "pages": 8192, "file": 0}]
    return c


def test_plan_mounts_disk_images_after_the_swap_disks_and_tmpfs() -> None:
    p = make_plan(_fs_config("ext4", "tmpfs", "xfs"), "rid", 1.0)
    s = p.script
    assert p.disks == [("d", 1 << 26)]  # the swap disk is vda
    assert [(d.name, d.fstype, d.device) for d in p.fs_disks] == [("fs0", "ext4", "/dev/vdb"), ("fs2", "xfs", "/dev/vdc")]
    # the image: the file plus a quarter plus 64 MiB (fsimage.image_bytes); xfs at its minimum
    assert p.fs_disks[0].size_bytes == 104 * MIB and p.fs_disks[1].size_bytes == 320 * MIB
    assert p.fs_dirs == ["/mnt/fs0", "/mnt/fs1", "/mnt/fs2"]
    assert p.block == [("block[fs0]", "/dev/vdb"), ("block[fs2]", "/dev/vdc")]
    insmod = s.index(f"for m in /plan/{FS_MODULE_DIR}/*.ko; do insmod $m")
    assert insmod < s.index("mount -t ext4 /dev/vdb /mnt/fs0 ||") < s.index("mount -t xfs /dev/vdc /mnt/fs2 ||")
    assert "mount -t tmpfs -o size=16777216,mode=0700 tmpfs /mnt/fs1 ||" in s
    assert s.index("waitdev /dev/vdb") < s.index("mount -t ext4")
    assert "FS_ARGS='--fs-dir /mnt/fs0 --fs-dir /mnt/fs1 --fs-dir /mnt/fs2'" in s.splitlines()
    assert "DROP_CACHES=1" in s.splitlines()
    # 32 MiB written before "ready" at the assumed 10 MB/s: 3.3 s more of 0.05 s polls
    assert f"READY_POLLS={READY_POLLS + 20 * 32 * MIB // 10_000_000}" in s.splitlines()
    assert "/sys/block/vdb/stat" in s and "/sys/block/vdc/stat" in s


def test_plan_without_filesystems_loads_and_drops_nothing() -> None:
    p = make_plan(_config(), "rid", 1.0)
    assert "DROP_CACHES=0" in p.script.splitlines() and "FS_ARGS=''" in p.script.splitlines()
    assert FS_MODULE_DIR not in p.script and "/mnt/fs" not in p.script
    assert p.fs_disks == [] and p.block == []
    # a tmpfs alone needs no modules and no disk
    t = make_plan(_fs_config("tmpfs"), "rid", 1.0)
    assert FS_MODULE_DIR not in t.script and t.fs_disks == [] and "DROP_CACHES=1" in t.script


def test_plan_refuses_a_type_the_guest_cannot_mount() -> None:
    with pytest.raises(ValueError, match=r"machine.filesystems\[1\].type: the VM lab mounts ext4, xfs, tmpfs, not 'btrfs'"):
        make_plan(_fs_config("ext4", "btrfs"), "r", 1.0)
    assert guest_backing({"name": "a", "fstype": "ext4", "backing": "device"}) == "virtio-blk"
    assert guest_backing({"name": "a", "fstype": "tmpfs"}) == "tmpfs"


def test_plan_refuses_a_loop_backed_filesystem() -> None:
    """The guest's disk filesystems are virtio disks: a scenario declaring the host lab's loop
    device (the default) would be simulated with its IO counted twice, so it is refused."""
    with pytest.raises(ValueError, match=r'machine.filesystems\[0\].backing: .*set backing = "device" \(got \'loop\'\)'):
        make_plan(_fs_config("ext4", backing="loop"), "r", 1.0)


def test_init_gives_runners_their_fs_dirs_and_cgroup(tmp_path: Path) -> None:
    """init.sh's runner arguments, run by sh: with FS_ARGS each runner gets them and its own
    cgroup's cgroup.procs; without, nothing."""
    init = (Path(initramfs.__file__).parent / "guest" / "init.sh").read_text()
    lines = init.splitlines()
    start = next(k for k, ln in enumerate(lines) if ln.strip() == 'rargs=""')
    snippet = "\n".join(ln.strip() for ln in lines[start : start + 3])
    for fs_args, want in (
        ("--fs-dir /mnt/fs0 --fs-dir /mnt/fs1", "--fs-dir /mnt/fs0 --fs-dir /mnt/fs1 --cgroup-procs /cg/b/cgroup.procs"),
        ("", ""),
    ):
        prog = f"FS_ARGS='{fs_args}'; cg0=/cg/a; cg1=/cg/b; i=1\n{snippet}\necho \"[$rargs]\""
        out = subprocess.run(["sh", "-c", prog], capture_output=True, text=True, check=True).stdout.strip()
        assert out == f"[{want}]"


@pytest.mark.parametrize(("fstype", "at", "magic"), [("ext4", 1080, b"\x53\xef"), ("xfs", 0, b"XFSB")])
def test_fs_image_is_an_unnamed_file_with_the_filesystem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fstype: str, at: int, magic: bytes
) -> None:
    if shutil.which(f"mkfs.{fstype}") is None:
        pytest.skip(f"mkfs.{fstype} is not installed")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    fd = qemu.fs_image(320 * MIB, fstype)
    try:
        assert os.pread(fd, len(magic), at) == magic
        assert os.fstat(fd).st_size == 320 * MIB
        assert os.fstat(fd).st_blocks * 512 < 320 * MIB  # sparse: only what mkfs wrote
        assert os.readlink(f"/proc/self/fd/{fd}").endswith("(deleted)")
    finally:
        os.close(fd)
    assert list(tmp_path.iterdir()) == []  # nothing has a name, before or after


def test_a_failed_mkfs_leaves_no_descriptor_and_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("mkfs.xfs") is None or shutil.which(qemu.QEMU) is None:
        pytest.skip("needs mkfs.xfs and QEMU")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    fds = set(os.listdir("/proc/self/fd"))
    with pytest.raises(LabError, match=r"mkfs\.xfs"):
        qemu.fs_image(16 * MIB, "xfs")  # below xfs's minimum: mkfs refuses
    # the same inside a guest's start: the swap disk made before it is closed too, no QEMU ran
    spec = qemu.GuestSpec(
        vmlinux=Path("/nonexistent"), initrd=b"", memory_bytes=64 * MIB, cpus=1, disks=[MIB], fs_images=[(16 * MIB, "xfs")]
    )
    g = qemu.Guest(spec)
    try:
        with pytest.raises(LabError, match=r"mkfs\.xfs"):
            g.start()
    finally:
        g.close()
    assert g.proc is None
    assert set(os.listdir("/proc/self/fd")) == fds
    assert list(tmp_path.iterdir()) == []


def test_keyed_reads_the_filesystem_disks_stat_as_the_host_labs_block_keys() -> None:
    ch = Channel()
    ch.feed(
        b"@@SNAP after 300\n@@F /proc/vmstat\nnr_dirty 12\npgpgout 400\n@@F /proc/meminfo\nDirty:  48 kB\n"
        b"@@F /sys/block/vdb/stat\n     10 1 80 5 20 3 160 7 0 9 12 0 0 0 0 2 1\n@@END\n"
    )
    keys = keyed(ch.snaps[0], 2, {}, [], [("block[data]", "/dev/vdb")])
    assert keys["vmstat.nr_dirty"] == 12 and keys["vmstat.pgpgout"] == 400 and keys["meminfo.Dirty"] == 48
    assert keys["block[data].stat.write_ios"] == 20 and keys["block[data].stat.write_sectors"] == 160
    assert keys["block[data].stat.flush_ios"] == 2


def test_fs_modules_are_kept_apart_from_the_base_modules(tmp_path: Path) -> None:
    mods = tmp_path / "lib"
    mods.mkdir()
    (mods / "ext4.ko").write_bytes(b"\0depends=jbd2,crc16\0")
    (mods / "jbd2.ko").write_bytes(b"\0depends=\0")
    (mods / "crc16.ko").write_bytes(b"\0depends=\0")
    (mods / "xfs.ko").write_bytes(b"\0depends=libcrc32c\0")
    (mods / "libcrc32c.ko").write_bytes(b"\0depends=\0")
    (mods / "crc32c_generic.ko").write_bytes(b"\0depends=\0")
    kdir = tmp_path / "k"
    got = _fs_modules(mods, kdir, (kdir / "modules" / "crc16.ko",))  # crc16: loaded at boot already
    assert [m.name for m in got] == ["crc32c_generic.ko", "jbd2.ko", "ext4.ko", "libcrc32c.ko", "xfs.ko"]
    assert all(m.parent == kdir / "fsmodules" and m.is_file() for m in got)
    k = InstalledKernel("debian-6.12", "p", "1", "r", kdir / "vmlinux", (), {}, got)
    assert InstalledKernel.from_dict(k.to_dict()) == k
    old = {**k.to_dict()}
    del old["fs_modules"]
    assert InstalledKernel.from_dict(old).fs_modules is None  # installed before filesystems


def _newc_names(data: bytes) -> list[tuple[str, int]]:
    """(name, mode) of each entry of a newc archive (the header's fields are 8 hex digits)."""
    out: list[tuple[str, int]] = []
    at = 0
    while True:
        assert data[at : at + 6] == b"070701"
        field = [int(data[at + 6 + 8 * k : at + 14 + 8 * k], 16) for k in range(13)]
        mode, size, namesize = field[1], field[6], field[11]
        name = data[at + 110 : at + 110 + namesize - 1].decode()
        if name == "TRAILER!!!":
            return out
        out.append((name, mode))
        at += 110 + namesize
        at += -at % 4
        at += size + (-size % 4)


def test_run_archive_makes_the_module_directory_before_its_files() -> None:
    data = initramfs.run_archive({"plan.sh": b"x", f"{FS_MODULE_DIR}/00-a.ko": b"a", f"{FS_MODULE_DIR}/01-b.ko": b"b"})
    assert _newc_names(data) == [
        ("plan/fsmod", initramfs.DIR),
        ("plan/fsmod/00-a.ko", initramfs.FILE),
        ("plan/fsmod/01-b.ko", initramfs.FILE),
        ("plan/plan.sh", initramfs.FILE),
    ]
