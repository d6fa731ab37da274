"""The VM backend: run a scenario in a QEMU guest running one of Debian's kernels (docs/vmlab.md).

``run()`` does, in order:

1. lower the scenario; pick the kernel (``kernel=`` / --kernel, else the scenario's
   ``lab.kernel``, else debian-6.12) and check the installed VM lab can run the scenario
   (ScenarioError naming the key otherwise); nothing has started yet;
2. the static runner (rebuilt with cargo when ``build``; a no-op when unchanged), the base
   initramfs (cached by its inputs' hash), the run's plan (vm.plan) appended to it;
3. boot the guest (vm.qemu: RAM and CPUs from the scenario, one sparse unnamed disk image per
   swap file, one per ext4/xfs filesystem with the type's mkfs made on it here; the filesystem
   modules ride in the run's archive); its init applies the plan (filesystems mounted at
   /mnt/fs<i>), runs the runners with the host lab's protocol (files written before "ready",
   then sync and drop_caches) and sends snapshots and the runners' output on the data channel
   (vm.channel);
4. always (success, error, SIGINT/SIGTERM, timeout): stop QEMU by its pid and close the images.

The result has the host lab's counter keys (``record.snapshot`` reads the guest's files), plus
every v2 ``memory.stat``/``memory.events`` key of the run's cgroups, ``block[<fs>].stat.*`` of
each filesystem's virtio disk (the host lab's keys for its loop devices), plus with ``trace`` in the
scenario (``--trace``) the guest's tracepoint counts under the simulator's ``trace.*`` keys
(vm.trace), every key the kernel reported. Its times are the guest's,
under TCG: fault-heavy phases run 8-20x slower than on hardware; compare them only as ratios
between configurations of one run (``validate --backend vm`` does), never with the simulator's.
Nothing on the host changes: no swap, cgroup, mount, sysctl or loop device, and no named file
(the images are unnamed: vm.qemu).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reclaimlab import trace
from reclaimlab.backends.kernel import default_timeout
from reclaimlab.errors import Problem, ScenarioError
from reclaimlab.fsimage import MIB, file_bytes, image_bytes
from reclaimlab.lab.apply import new_runid
from reclaimlab.lab.errors import LabError, RunnerFailed
from reclaimlab.lab.filesystems import mkfs_argv
from reclaimlab.lab.record import Series, counters, sim_counter_keys
from reclaimlab.lab.result import KernelRunResult, phase_record
from reclaimlab.lower import lower
from reclaimlab.profile import active_profile
from reclaimlab.result import scenario_provenance
from reclaimlab.scenario import Scenario
from reclaimlab.units import format_size
from reclaimlab.vm import initramfs
from reclaimlab.vm import trace as vmtrace
from reclaimlab.vm.cache import KERNELS, InstalledKernel, VmUnavailable, cache_dir, installed_kernel
from reclaimlab.vm.channel import Channel, keyed
from reclaimlab.vm.drive import BOOT_TIMEOUT_S, check_host_memory, drive
from reclaimlab.vm.plan import FS_MODULE_DIR, GUEST_FILE_WRITE_BYTES_PER_S, Plan, guest_backing, make_plan
from reclaimlab.vm.qemu import GuestSpec, qemu_version

__all__ = ["DEFAULT_GUEST_MEMORY", "DEFAULT_KERNEL", "DEFAULT_SAMPLE_INTERVAL_S", "run"]

DEFAULT_KERNEL = "debian-6.12"
#: The guest's RAM when the scenario says ``machine.memory = "host"`` (this host's size makes
#: no sense for a guest; the validation scenarios limit their cgroups far below it).
DEFAULT_GUEST_MEMORY = 1 << 30
#: Each sample costs the guest a few ms of emulated serial output: sample less often than the
#: host lab (1 s).
DEFAULT_SAMPLE_INTERVAL_S = 2.0
POLL_S = 0.1


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _guest_memory(scenario: Scenario, config: dict[str, Any], memory: int | None, note: Callable[[str], None]) -> int:
    if memory is not None:
        return memory
    if scenario.document.get("machine", {}).get("memory") == "host":
        note(f"note: machine.memory = 'host': the guest gets {DEFAULT_GUEST_MEMORY >> 20} MiB (--vm-memory to change)")
        return DEFAULT_GUEST_MEMORY
    return int(config["machine"]["memory_bytes"])


#: The most compact trace bytes a VM run carries in its initramfs (guest RAM; 4 bytes an access).
MAX_TRACE_BYTES = 64 << 20


def _traces(scenario: Scenario, config: dict[str, Any]) -> dict[str, bytes]:
    """The compact files of the trace phases, by file name: they travel in the run's archive,
    next to the lowered JSON (/plan), so they must fit in guest memory."""
    files = {name: path.read_bytes() for name, path in trace.trace_files(config).items()}
    carried = sum(len(v) for v in files.values())
    if carried > MAX_TRACE_BYTES:
        raise ScenarioError.single(
            scenario.file,
            f"the VM lab carries trace files in its initramfs, which sits in guest memory: {format_size(carried)} of compact "
            f"traces is more than it takes ({format_size(MAX_TRACE_BYTES)}); set limit on the trace phases or use --backend kernel",
            ("processes",),
        )
    return files


def _check(scenario: Scenario, config: dict[str, Any], k: InstalledKernel) -> None:
    problems = []
    if config["cgroups"]["version"] == 1 and not k.memcg_v1:
        problems.append(
            Problem(
                ("cgroups", "cgroup_version"),
                f"the VM kernel {k.name} ({k.release}) has no cgroup v1 memory controller (CONFIG_MEMCG_V1 is not set); "
                "use cgroup_version = 2 or another kernel",
            )
        )
    release = tuple(int(x) for x in re.findall(r"\d+", k.release)[:2])
    for i, proc in enumerate(config["processes"]):
        for j, ph in enumerate(proc["phases"]):
            if ph["phase"]["kind"] == "reclaim" and ph["phase"].get("swappiness") is not None and release < (6, 12):
                problems.append(
                    Problem(
                        ("processes", i, "phases", j, "swappiness"),
                        f"memory.reclaim takes swappiness= from 6.12; the VM kernel {k.name} is {k.release}",
                    )
                )
    zsw = config["kernel"]["zswap"]
    if zsw["enabled"]:
        opt = {"lz4": "CONFIG_CRYPTO_LZ4", "zstd": "CONFIG_CRYPTO_ZSTD", "deflate": "CONFIG_CRYPTO_DEFLATE", "lzo": "CONFIG_CRYPTO_LZO"}
        name = opt.get(str(zsw["compressor"]))
        if name is not None and k.config.get(name, "n") == "n":
            problems.append(Problem(("kernel", "zswap", "compressor"), f"{k.name} does not build {zsw['compressor']} ({name})"))
    fss = config["machine"].get("filesystems") or []
    image_total = 0
    for i, fs in enumerate(fss):
        try:
            backing = guest_backing(fs)
        except ValueError as e:
            problems.append(Problem(("machine", "filesystems", i, "type"), str(e)))
            continue
        if backing != "virtio-blk":
            continue
        if k.fs_modules is None:
            raise VmUnavailable(f"the VM kernel {k.name} was installed without the filesystem modules: run `make vmlab` again")
        tool = mkfs_argv(str(fs["fstype"]), "-")[0]
        if shutil.which(tool) is None:
            problems.append(
                Problem(
                    ("machine", "filesystems", i, "type"), f"{tool} is not installed on the host, which makes the image (`make lab-tools`)"
                )
            )
        image_total += image_bytes(config, i)
    if image_total:
        # The images are sparse; at most their size gets written (tempfile's directory).
        st = os.statvfs(tempfile.gettempdir())
        free = st.f_bavail * st.f_frsize
        if image_total > free // 2:
            problems.append(
                Problem(
                    ("machine", "filesystems"),
                    f"the filesystem images need up to {image_total // MIB} MiB; {tempfile.gettempdir()} has {free // MIB} MiB free "
                    "(the VM lab uses at most half of it)",
                )
            )
    if problems:
        raise ScenarioError(scenario.file, problems)


def _fs_modules(k: InstalledKernel, plan: Plan) -> dict[str, bytes]:
    """The filesystem modules for the run's archive (/plan/fsmod/NN-name.ko, in load order),
    when the plan mounts a disk filesystem."""
    if not plan.fs_disks or not k.fs_modules:
        return {}
    return {f"{FS_MODULE_DIR}/{i:02d}-{m.name}": m.read_bytes() for i, m in enumerate(k.fs_modules)}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _runner(build: bool, note: Callable[[str], None]) -> Path:
    from reclaimlab.vm.install import static_runner

    cached = cache_dir() / "runner" / "reclaimlab-runner"
    if build:
        return static_runner(cache_dir())
    if not cached.is_file():
        raise VmUnavailable(f"the static runner is not installed ({cached}): run `make vmlab`")
    return cached


def run(
    scenario: Scenario,
    progress: bool = False,
    label: str | None = None,
    timeout_s: float | None = None,
    sample_interval_s: float = DEFAULT_SAMPLE_INTERVAL_S,
    build: bool = True,
    on_note: Callable[[str], None] | None = _stderr,
    kernel: str | None = None,
    mglru: bool | None = None,
    memory: int | None = None,
) -> KernelRunResult:
    """Run ``scenario`` in a guest. See the module docstring. Raises ScenarioError,
    VmUnavailable, RunnerFailed, LabTimeout, LabInterrupted, LabError."""
    note = on_note or (lambda _m: None)
    profile = active_profile()
    config = lower(scenario, profile)
    traces = _traces(scenario, config)
    name = kernel or scenario.lab.kernel or DEFAULT_KERNEL
    if name not in KERNELS:
        raise ScenarioError.single(scenario.file, f"expected one of {', '.join(sorted(KERNELS))}; got {name!r}", ("lab", "kernel"))
    k = installed_kernel(name)
    _check(scenario, config, k)
    if mglru is not None:
        # --mglru/--no-mglru: the knob kernel.lru_gen.enabled of this run (the CLI sets it as
        # an override, so the simulator side of validate runs the same LRU).
        config["kernel"].setdefault("lru_gen", {})["enabled"] = mglru
    use_mglru = bool(config["kernel"].get("lru_gen", {}).get("enabled", False))
    runner = _runner(build, note)
    base = initramfs.base_image(k, runner, cache_dir())
    runid = new_runid()
    try:
        plan = make_plan(config, runid, sample_interval_s)
    except ValueError as e:
        raise ScenarioError.single(scenario.file, str(e)) from None
    files = {"plan.sh": plan.script.encode(), **traces, **_fs_modules(k, plan)}
    guest_config = copy.deepcopy(config)
    trace.relocate(guest_config, "/plan")
    files["lowered.json"] = json.dumps(guest_config, sort_keys=True).encode()
    archive = initramfs.run_archive(files)
    mem = _guest_memory(scenario, config, memory, note)
    cpus = min(int(config["machine"]["cpus"]), os.cpu_count() or 1)
    if cpus < int(config["machine"]["cpus"]):
        note(f"note: the guest gets {cpus} CPUs (this host's count), not the scenario's {config['machine']['cpus']}")
    check_host_memory(mem)
    keys, key_source = sim_counter_keys(config)
    # The guest writes the scenario's files before "ready": allow for that too.
    written = sum(file_bytes(config, i) for i in range(len(config["machine"].get("filesystems") or [])))
    timeout = timeout_s if timeout_s is not None else default_timeout(config) + written / GUEST_FILE_WRITE_BYTES_PER_S
    spec = GuestSpec(
        vmlinux=k.vmlinux,
        initrd=base.read_bytes() + archive,
        memory_bytes=mem,
        cpus=cpus,
        disks=[size for _, size in plan.disks],
        fs_images=[(d.size_bytes, d.fstype) for d in plan.fs_disks],
        timeout_s=timeout + BOOT_TIMEOUT_S,
    )
    d, ch = drive(
        spec,
        Channel,
        what=f"the guest ({k.name})",
        limit_s=timeout + BOOT_TIMEOUT_S,
        timeout_message=f"the run exceeded its timeout ({timeout:.0f}s after boot); the guest was stopped",
        poll_s=POLL_S,
        note=note,
    )
    wall = time.monotonic() - d.t_start
    result = _result(scenario, config, plan, ch, keys, sample_interval_s)
    result.stats.update(
        {
            "boot_s": round(d.boot_s, 3),
            "wall_s": round(wall, 3),
            "guest_uptime_at_init_s": int((ch.event("init") or ["0"])[0]) / 100,
        }
    )
    result.provenance = {
        **scenario_provenance(scenario, profile),
        "vm": {
            "kernel": k.name,
            "package": k.package,
            "package_version": k.version,
            "release": ch.info.get("release", k.release),
            "config": k.config,
            "qemu": qemu_version(),
            "accel": "tcg",
            "memory_bytes": mem,
            "cpus": cpus,
            "mglru": use_mglru,
            "lru_gen_enabled": ch.info.get("lru_gen"),
            "transparent_hugepage": ch.info.get("thp"),
            "min_free_kbytes": ch.info.get("min_free_kbytes"),
            "cmdline": ch.info.get("cmdline"),
            "zswap_params": {key.removeprefix("zswap."): v for key, v in sorted(ch.info.items()) if key.startswith("zswap.")},
            "swaps": ch.info.get("swaps"),
            "initramfs": base.name,
            "filesystems": [
                {"name": fs["name"], "fstype": fs["fstype"], "backing": guest_backing(fs), "mount": d}
                | next(({"device": x.device, "image_bytes": x.size_bytes} for x in plan.fs_disks if x.name == fs["name"]), {})
                for fs, d in zip(config["machine"].get("filesystems") or [], plan.fs_dirs, strict=True)
            ],
        },
        "runner": {"sha256": _sha256(runner)},
        "counter_keys_from": key_source,
        "runid": runid,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    return result


def _result(scenario: Scenario, config: dict[str, Any], plan: Plan, ch: Channel, keys: set[str], interval: float) -> KernelRunResult:
    version = int(config["cgroups"]["version"])
    snaps = {s.label: s for s in ch.snaps if s.label in ("before", "after")}
    if "before" not in snaps or "after" not in snaps:
        raise LabError("the guest sent no before/after snapshots")
    cg = plan.cgroup_dirs

    def key(s: Any) -> dict[str, int]:
        return keyed(s, version, cg, plan.zram, plan.block)

    before, after = key(snaps["before"]), key(snaps["after"])
    wanted = set(keys) | {k for k in after if k.startswith("zram")}
    if version == 2:  # the v2 files of every cgroup of the run, whether the simulator has them or not
        wanted |= {
            k for k in after if k.startswith("memcg[") and (".memory.stat." in k or ".memory.events." in k or ".memory.swap.events." in k)
        }
    t0 = snaps["before"].uptime_cs
    # Every field of the filesystems' disk stats in the series, as the host lab's (in counters
    # only those the simulator has).
    series = Series(keys=sorted(k for k in wanted | {k for k in before if k.startswith("block[")} if k in before), interval_s=interval)
    series.add(0.0, before, before)
    for s in ch.snaps:
        if s.label == "sample":
            series.add((s.uptime_cs - t0) / 100, before, key(s))
    elapsed = (snaps["after"].uptime_cs - t0) / 100
    series.add(elapsed, before, after)

    records = []
    exits = {int(a[0]): int(a[1]) for n, a in ch.events if n == "exit" and len(a) == 2}
    for i, proc in enumerate(config["processes"]):
        kinds = [ph["phase"]["kind"] for ph in proc["phases"]]
        expected = kinds.index("exit") + 1 if "exit" in kinds else len(kinds)
        out = ch.outputs.get(i, [])
        phases = [ev for ev in out if ev.get("event") == "phase"]
        errors = [ev for ev in out if ev.get("event") == "error"]
        finished = any(ev.get("event") == "phases_done" for ev in out) or ("exit" in kinds and len(phases) >= expected)
        if errors or not finished:
            status = exits.get(i)
            how = (
                "killed by SIGKILL (the memcg OOM killer, if its cgroup had nothing left to reclaim?)"
                if status == 137
                else f"exit status {status}"
            )
            msg = errors[0].get("message") if errors else f"stopped after {len(phases)} of {expected} phases ({how})"
            tail = ch.stderrs.get(i, "")
            oom = f"\nthe guest kernel's OOM report:\n{ch.dmesg}" if ch.dmesg else ""
            detail = (f": {tail[-1500:]}" if tail else "") + oom
            raise RunnerFailed(f"runner for process {proc['name']!r} in the guest failed: {msg}{detail}")
        records += [(i, int(ev.get("index", j)), phase_record(ev)) for j, ev in enumerate(phases)]
    records.sort(key=lambda x: (x[0], x[1]))
    result_counters = counters(before, after, wanted)
    stats: dict[str, Any] = {"elapsed_s": round(elapsed, 3), "samples": len(series.t)}
    groups = list(config.get("trace") or ())
    missing = [k for k in keys if k not in after]
    trace_hist: dict[str, str] = {}
    if groups:
        # The hist triggers count from just before "go" to the trace snapshot (vm.trace).
        snap = next((s for s in ch.snaps if s.label == "trace"), None)
        if snap is None:
            raise LabError("the guest sent no trace snapshot (--trace)")
        trace_hist = dict(snap.files)  # the histograms as the guest printed them
        traced, dropped = vmtrace.counters(snap.files, groups)
        # A simulator key of a traced event that the histogram has no row for: no such event.
        traced |= {k: 0 for k in missing if vmtrace.event_of(k) in vmtrace.traced_events(groups) and k not in traced}
        result_counters.update(traced)
        missing = [k for k in missing if k not in traced]
        stats["trace_dropped"] = dropped
    stats["missing_keys"] = sorted(missing)
    return KernelRunResult(
        scenario=scenario.name or "scenario",
        backend="vm",
        config=config,
        counters=result_counters,
        phase_records=[r for _, _, r in records],
        stats=stats,
        series=series.to_dict(),
        raw={"before": before, "after": after, **({"trace_hist": trace_hist} if trace_hist else {})},
    )
