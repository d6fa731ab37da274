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
6. MGLRU on or off.

With ``trace`` (``--trace``) it also defines ``plan_trace``, which mounts tracefs and installs
the hist triggers of vm.trace; init.sh calls it just before "go" and sends TRACE_FILES after
the last snapshot.

It defines variables (NPROC, SAMPLE_CS, ZRAM_NUM, SNAP_FILES, TRACE_FILES, cg<i>, AFTER_<i>_<k>) and
``plan_apply``; the helpers it calls (setf, setp, waitdev, die) are init.sh's.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from reclaimlab.lab import knobs
from reclaimlab.scenario import cgroup_files
from reclaimlab.vm import trace

__all__ = ["CGROUP_ROOT", "MAX_PROCESSES", "Plan", "make_plan"]

CGROUP_ROOT = "/sys/fs/cgroup"
#: init.sh gives runner i the file descriptor 3+i for its stdin; 9 is the data channel.
MAX_PROCESSES = 6


@dataclass
class Plan:
    script: str
    #: scenario cgroup path ("/", "/a") -> the guest's directory
    cgroup_dirs: dict[str, str] = field(default_factory=dict)
    #: file swaps in disk order: (scenario swap name, size in bytes)
    disks: list[tuple[str, int]] = field(default_factory=list)
    #: zram swaps: (counter key prefix "zram<k>", guest device id)
    zram: list[tuple[str, int]] = field(default_factory=list)


def _q(v: object) -> str:
    return shlex.quote(str(v))


def make_plan(config: dict[str, Any], runid: str, sample_interval_s: float) -> Plan:
    """The plan for ``config`` (a lowered scenario). ValueError for what the guest cannot do."""
    procs = config["processes"]
    if not 1 <= len(procs) <= MAX_PROCESSES:
        raise ValueError(f"the VM lab runs 1 to {MAX_PROCESSES} processes; the scenario has {len(procs)}")
    if config["machine"].get("filesystems"):
        # The guest has only its swap disks: no filesystem images are attached yet.
        raise ValueError("the VM lab has no filesystems yet: scenarios with [[machine.filesystems]] run on the host lab")
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
    ]
    for i, proc in enumerate(procs):
        head.append(f"cg{i}={_q(plan.cgroup_dirs[groups[proc['cgroup']]['path']])}")
        # `after`: phase k of runner i waits for phase j of runner q (init.sh's release_waiters).
        for pk, ph in enumerate(proc["phases"]):
            if "after" in ph:
                head.append(f"AFTER_{i}_{pk}={_q(str(ph['after']['process']) + ' ' + str(ph['after']['phase']))}")
    plan.script = "\n".join([*head, *lines]) + "\n"
    return plan
