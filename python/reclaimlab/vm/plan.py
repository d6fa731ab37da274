"""A lowered scenario as the shell script the guest's init sources (/plan/plan.sh).

The plan sets the guest up the way the host lab's ``apply`` sets up the host (same order, same
files, same values: ``zswap_values`` and ``SYSCTLS`` are the host lab's), except that nothing
has to be journaled or restored: the guest is thrown away.

1. mount the cgroup hierarchy of the scenario's ``cgroups.version`` (v2: cgroup2 with +memory
   in the root's subtree_control; v1: the memory controller);
2. sysctls;
3. cgroups, parents first, ``reclaimlab-<runid>`` standing for the scenario's "/";
4. swap devices: a "file" swap is a virtio disk (vda, vdb ... in the scenario's order: QEMU
   gets the disks in that order), zram devices are zram0, zram1 ... (the module was loaded
   with ``num_devices`` = their number); mkswap, swapon with the scenario's priority;
5. sysfs knobs (zswap parameters), ``enabled`` last;
6. MGLRU on or off;
7. the scenario's filesystems (``machine.filesystems``), each at ``/mnt/fs<i>``: an ext4 or
   xfs is a virtio disk after the swap disks, its image made on the host by the type's mkfs
   (``vm.qemu``: an unnamed file, as the swap disks), mounted here after the filesystem
   modules the run's archive carries (/plan/fsmod) are loaded; a tmpfs is mounted with the
   scenario's size. How a filesystem reaches the guest is ``guest_backing`` alone.

With filesystems, each runner gets ``--fs-dir`` per filesystem and ``--cgroup-procs`` (it joins
its cgroup before it writes its files, as in the host lab), and init syncs and drops the page
cache once every runner is ready (``DROP_CACHES``), as the host lab does.

With ``trace`` (``--trace``) it also defines ``plan_trace``, which mounts tracefs and installs
the hist triggers of vm.trace; init.sh calls it just before "go" and sends TRACE_FILES after
the last snapshot.

It defines variables (NPROC, SAMPLE_CS, ZRAM_NUM, SNAP_FILES, TRACE_FILES, FS_ARGS, DROP_CACHES,
READY_POLLS, cg<i>, AFTER_<i>_<k>) and
``plan_apply``; the helpers it calls (setf, setp, waitdev, die) are init.sh's.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from reclaimlab.fsimage import file_bytes, image_bytes
from reclaimlab.lab import knobs
from reclaimlab.scenario import cgroup_files
from reclaimlab.vm import trace
from reclaimlab.vm.cache import GUEST_FS_TYPES

__all__ = ["CGROUP_ROOT", "FS_MODULE_DIR", "MAX_PROCESSES", "FsDisk", "Plan", "guest_backing", "make_plan"]

CGROUP_ROOT = "/sys/fs/cgroup"
#: init.sh gives runner i the file descriptor 3+i for its stdin; 9 is the data channel.
MAX_PROCESSES = 6
#: Where the run's archive puts the filesystem modules (under /plan), named NN-<module>.ko in
#: load order (backends.vm).
FS_MODULE_DIR = "fsmod"
#: init.sh polls every 0.05 s for a runner's "ready": 60 s, plus the time to write its files.
READY_POLLS = 1200
#: How fast the guest is assumed to write and fsync the scenario's files before "ready" (TCG,
#: a virtio disk backed by the host's page cache): a floor, for the ready timeout only.
GUEST_FILE_WRITE_BYTES_PER_S = 10_000_000


def guest_backing(fs: dict[str, Any]) -> str:
    """How filesystem ``fs`` (a lowered ``machine.filesystems`` entry) reaches the guest:
    ``"virtio-blk"`` (an image the host makes with the type's mkfs, attached as a virtio disk:
    a plain block device, whose writeback is counted once, one pgpgout per bio, unlike the host
    lab's loop device over a file) or ``"tmpfs"`` (mounted in the guest, no device). The one
    place this is decided. A disk filesystem must declare ``backing = "device"``: the
    simulator counts a ``"loop"`` filesystem's IO twice (block.rs), which a virtio disk does
    not. ValueError (its message starting with the key) for a type the guest cannot mount or
    another backing."""
    t = str(fs["fstype"])
    if t == "tmpfs":
        return "tmpfs"
    if t not in GUEST_FS_TYPES:
        raise ValueError(f"type: the VM lab mounts {', '.join((*GUEST_FS_TYPES, 'tmpfs'))}, not {t!r} (filesystem {fs['name']!r})")
    if fs.get("backing", "loop") != "device":
        raise ValueError(
            f"backing: the VM lab gives filesystem {fs['name']!r} a virtio disk of its own, "
            f'not a loop device over an image file: set backing = "device" (got {fs.get("backing", "loop")!r})'
        )
    return "virtio-blk"


@dataclass(frozen=True)
class FsDisk:
    """A scenario filesystem on a virtio disk: its image is made on the host (vm.qemu)."""

    name: str  # the scenario's name
    fstype: str
    size_bytes: int
    device: str  # /dev/vdX in the guest


@dataclass
class Plan:
    script: str
    #: scenario cgroup path ("/", "/a") -> the guest's directory
    cgroup_dirs: dict[str, str] = field(default_factory=dict)
    #: file swaps in disk order: (scenario swap name, size in bytes)
    disks: list[tuple[str, int]] = field(default_factory=list)
    #: zram swaps: (counter key prefix "zram<k>", guest device id)
    zram: list[tuple[str, int]] = field(default_factory=list)
    #: disk filesystems, in disk order after the swap disks
    fs_disks: list[FsDisk] = field(default_factory=list)
    #: block stat sources: (counter key prefix "block[<fs name>]", guest device /dev/vdX)
    block: list[tuple[str, str]] = field(default_factory=list)
    #: the mount point of each filesystem, in ``machine.filesystems`` order (the runner's --fs-dir)
    fs_dirs: list[str] = field(default_factory=list)


def _q(v: object) -> str:
    return shlex.quote(str(v))


def make_plan(config: dict[str, Any], runid: str, sample_interval_s: float) -> Plan:
    """The plan for ``config`` (a lowered scenario). ValueError for what the guest cannot do."""
    procs = config["processes"]
    if not 1 <= len(procs) <= MAX_PROCESSES:
        raise ValueError(f"the VM lab runs 1 to {MAX_PROCESSES} processes; the scenario has {len(procs)}")
    fss = list(config["machine"].get("filesystems") or [])
    backings = []
    for i, fs in enumerate(fss):
        try:
            backings.append(guest_backing(fs))
        except ValueError as e:
            raise ValueError(f"machine.filesystems[{i}].{e}") from None
    version = int(config["cgroups"]["version"])
    groups = config["cgroups"]["groups"]
    lines = ["plan_apply() {"]
    # The cgroup2 mount option the scenario asks for (the guest mounts cgroup2 itself).
    mount_opts = " -o memory_recursiveprot" if config["cgroups"].get("memory_recursiveprot") else ""
    if version == 2:
        base = CGROUP_ROOT
        lines += [
            f"    mount -t cgroup2{mount_opts} cgroup2 {base} || die 'cannot mount cgroup2 on {base}'",
            f"    setf {base}/cgroup.subtree_control +memory",
        ]
    else:
        base = f"{CGROUP_ROOT}/memory"
        lines += [
            f"    mount -t tmpfs cgroup {CGROUP_ROOT} && mkdir {base}",
            f"    mount -t cgroup -o memory memory {base} || die 'no cgroup v1 memory controller in this kernel'",
        ]
    for k, want in knobs.sysctl_writes(config):
        lines.append(f"    setp {k.kernel_file} {_q(want)}")

    root = f"{base}/reclaimlab-{runid}"
    plan = Plan(script="")
    parents = {g["parent"] for g in groups if g["parent"] is not None}
    for i, g in enumerate(groups):
        d = root if g["path"] == "/" else f"{root}/{g['path'].lstrip('/')}"
        plan.cgroup_dirs[g["path"]] = d
        lines.append(f"    mkdir {_q(d)} || die {_q('cannot create ' + d)}")
        for cf in cgroup_files.written(version):
            text = cf.text(g.get(cf.lowered))
            if text is not None:
                lines.append(f"    setf {_q(d + '/' + cf.name)} {_q(text)}")
        if version == 2 and i in parents:
            lines.append(f"    setf {_q(d + '/cgroup.subtree_control')} +memory")

    zram_index = 0
    for si, sw in enumerate(config["machine"]["swap"]):
        if sw["kind"] == "zram":
            zid = zram_index
            dev = f"/dev/zram{zid}"
            plan.zram.append((f"zram{zram_index}", zid))
            zram_index += 1
            lines.append(f"    waitdev {dev}")
            if sw.get("comp_algorithm"):
                # The file lists what this zram offers (`lzo lzo-rle [lz4] zstd`): since 6.12 each
                # backend is a Kconfig option (Debian's 6.12 leaves CONFIG_ZRAM_BACKEND_LZO
                # out, so no lzo or lzo-rle there); a write of another name fails with EINVAL.
                alg, f = str(sw["comp_algorithm"]), f"/sys/block/zram{zid}/comp_algorithm"
                lines.append(f"    offered=$(echo $(tr -d '[]' < {f}))")
                lines.append(
                    f'    case " $offered " in *{_q(" " + alg + " ")}*) ;; *) die '
                    + _q(f"machine.swap[{si}].comp_algorithm: zram in this guest kernel offers ")
                    + '"$offered"'
                    + _q(f", not {alg}")
                    + " ;; esac"
                )
                lines.append(f"    setf {f} {_q(alg)}")
            lines.append(f"    setf /sys/block/zram{zid}/disksize {int(sw['size_bytes'])}")
        else:
            dev = f"/dev/vd{chr(ord('a') + len(plan.disks))}"
            plan.disks.append((str(sw["name"]), int(sw["size_bytes"])))
            lines.append(f"    waitdev {dev}")
        prio = int(sw["priority"])
        # As the host lab: a negative priority cannot be asked for; swapon without -p gets the
        # kernel's next "least priority" (-2, -3 ...), which the lowered scenario says for those.
        lines.append(f"    mkswap {dev} > /dev/null || die 'mkswap {dev} failed'")
        if prio >= 0:
            # busybox's swapon in the guest has no -p (Debian builds it without
            # FEATURE_SWAPON_PRI): the runner makes the swapon(2) call with the priority.
            lines.append(f"    /bin/reclaimlab-runner --swapon {dev} --priority {prio} || die 'swapon -p {prio} {dev} failed'")
        else:
            lines.append(f"    swapon {dev} || die 'swapon {dev} failed'")

    for k, want in knobs.sysfs_writes(config):
        f = k.kernel_file
        if knobs.value_of(config, k) == k.default:
            # A kernel without the file behaves as its default (6.1: no shrinker_enabled, off;
            # 6.18: no zpool, zsmalloc).
            lines.append(f"    [ -e {f} ] && setp {f} {_q(want)}")
        else:
            lines.append(f"    [ -e {f} ] || die {_q(f'this kernel has no {f} (the scenario sets {k.key} = {want})')}")
            lines.append(f"    setp {f} {_q(want)}")
    if "virtio-blk" in backings:
        # Debian builds ext4 and xfs as modules: the run's archive carries them (backends.vm).
        lines.append(f'    for m in /plan/{FS_MODULE_DIR}/*.ko; do insmod $m || die "insmod $m failed"; done')
        lines.append(f"    rm -rf /plan/{FS_MODULE_DIR}")
    for i, (fs, backing) in enumerate(zip(fss, backings, strict=True)):
        point = f"/mnt/fs{i}"
        plan.fs_dirs.append(point)
        lines.append(f"    mkdir -p {point}")
        if backing == "virtio-blk":
            dev = f"/dev/vd{chr(ord('a') + len(plan.disks) + len(plan.fs_disks))}"
            plan.fs_disks.append(FsDisk(str(fs["name"]), str(fs["fstype"]), image_bytes(config, i), dev))
            plan.block.append((f"block[{fs['name']}]", dev))
            lines.append(f"    waitdev {dev}")
            t = str(fs["fstype"])
            lines.append(f"    mount -t {t} {dev} {point} || die {_q(f'cannot mount {dev} ({t}) on {point}')}")
        else:
            # The scenario's size= (the simulator's limit), else the kernel's default (half of
            # RAM), as the host lab.
            opts = "mode=0700" if fs.get("size_bytes") is None else f"size={int(fs['size_bytes'])},mode=0700"
            lines.append(f"    mount -t tmpfs -o {opts} tmpfs {point} || die 'cannot mount tmpfs on {point}'")
    lines.append("    :")
    lines.append("}")
    trace_groups = list(config.get("trace") or ())
    if trace_groups:
        lines += ["plan_trace() {", *trace.setup_lines(trace_groups), "}"]

    snap_files = []
    for path in sorted(plan.cgroup_dirs):
        d = plan.cgroup_dirs[path]
        names = (
            ["memory.stat", *cgroup_files.READ_V1]
            if version == 1
            else ["memory.stat", *cgroup_files.READ_V2_KEYED, *cgroup_files.READ_V2, "memory.pressure"]
        )
        snap_files += [f"{d}/{n}" for n in names]
    snap_files += [f"/sys/block/zram{zid}/mm_stat" for _, zid in plan.zram]
    snap_files += [f"/sys/block/{d.device.removeprefix('/dev/')}/stat" for d in plan.fs_disks]
    # memory PSI, when the guest kernel has it enabled (record.snapshot skips it otherwise)
    snap_files.append("/proc/pressure/memory")
    # free blocks per order (the simulator's buddyinfo.* keys, when its zone exists)
    snap_files.append("/proc/buddyinfo")
    # free pages, watermarks and lowmem_reserve per zone (the simulator's zoneinfo.* keys)
    snap_files.append("/proc/zoneinfo")
    head = [
        "# written by reclaimlab.vm.plan for one run; sourced by /init",
        f"NPROC={len(procs)}",
        f"SAMPLE_CS={max(10, round(sample_interval_s * 100))}",
        f"ZRAM_NUM={len(plan.zram)}",
        f"SNAP_FILES={_q(' '.join(snap_files))}",
        f"TRACE_FILES={_q(' '.join(trace.hist_files(trace_groups)))}",
        f"FS_ARGS={_q(' '.join(f'--fs-dir {d}' for d in plan.fs_dirs))}",
        f"DROP_CACHES={1 if fss else 0}",
        f"READY_POLLS={READY_POLLS + 20 * sum(file_bytes(config, i) for i in range(len(fss))) // GUEST_FILE_WRITE_BYTES_PER_S}",
    ]
    for i, proc in enumerate(procs):
        head.append(f"cg{i}={_q(plan.cgroup_dirs[groups[proc['cgroup']]['path']])}")
        # `after`: phase k of runner i waits for phase j of runner q (init.sh's release_waiters).
        for pk, ph in enumerate(proc["phases"]):
            if "after" in ph:
                head.append(f"AFTER_{i}_{pk}={_q(str(ph['after']['process']) + ' ' + str(ph['after']['phase']))}")
    plan.script = "\n".join([*head, *lines]) + "\n"
    return plan
