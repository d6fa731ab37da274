"""What this host offers the lab, and whether a scenario can run on it.

``probe()`` only reads: /proc, /sys, mountinfo, and name lookups with ``modprobe -n`` (a dry
run that loads nothing). It never writes a zswap parameter to find out whether a compressor
works, and never reads ``zram-control/hot_add`` (that creates a device).

``check(config, probe)`` compares a lowered scenario (``reclaimlab.lower.lower``) with the probe
and returns one ``Problem`` per scenario key the host cannot honour; ``notes()`` returns the
differences that do not block a run (machine size, CPUs) as sentences for the user.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reclaimlab import native
from reclaimlab.errors import Path as KeyPath
from reclaimlab.errors import Problem
from reclaimlab.lab import filesystems, host, knobs, tracing
from reclaimlab.lab.journal import state_dir
from reclaimlab.native import Knob
from reclaimlab.scenario import cgroup_files
from reclaimlab.scenario.types import count_host_memcgs, host_page_reporting_order

__all__ = ["ZRAM_ALLOCATOR", "Probe", "ZramDevice", "check", "notes", "parse_crypto", "probe"]

#: What a zram device allocates from on a real kernel: drivers/block/zram calls zs_malloc
#: directly, and no sysfs file selects another allocator, so the lab can honour no other.
ZRAM_ALLOCATOR = "zsmalloc"
#: Crypto algorithm types a zswap compressor can have (crypto_has_acomp() finds all three).
COMPRESSION_TYPES = ("compression", "acomp", "scomp")
#: Names worth a ``modprobe -n crypto-NAME`` lookup when they are not registered yet.
KNOWN_COMPRESSORS = ("lzo", "lzo-rle", "lz4", "lz4hc", "zstd", "deflate", "842")


@dataclass(frozen=True)
class ZramDevice:
    id: int
    disksize: int
    initstate: int
    comp_algorithms: tuple[str, ...]
    selected: str | None


@dataclass(frozen=True)
class Probe:
    """A snapshot of the host's capabilities (read-only; see the module docstring)."""

    root: bool
    kernel_release: str
    mem_total_bytes: int
    mem_available_bytes: int
    cpus: int
    #: zswap module parameters present, with their current values.
    zswap_params: dict[str, str]
    #: Compression algorithms registered with the crypto API now (zswap can use any of them).
    zswap_compressors: tuple[str, ...]
    #: More that ``modprobe -n crypto-NAME`` resolves (loaded on demand when zswap asks).
    zswap_compressors_loadable: tuple[str, ...]
    debugfs_supported: bool
    #: Where debugfs is mounted now (None: not mounted; the lab mounts it privately when needed).
    debugfs_mount: str | None
    #: The zswap debugfs directory if it exists now (zswap creates it when first enabled).
    zswap_debugfs: str | None
    zram_loaded: bool
    zram_loadable: bool
    zram_hot_add: bool
    zram_devices: tuple[ZramDevice, ...]
    #: What zram's comp_algorithm offers (read from an existing device; empty when none exists).
    zram_comp_algorithms: tuple[str, ...]
    #: Mount point of the cgroup v1 memory controller, if mounted.
    cgroup_v1_memory: str | None
    #: Mount point of the unified (v2) hierarchy, if mounted.
    cgroup_v2: str | None
    #: The memory controller is available in the v2 hierarchy (its root's cgroup.controllers).
    cgroup_v2_memory: bool
    #: ... and enabled for children of the root (cgroup.subtree_control), which the lab needs.
    cgroup_v2_memory_enabled: bool
    #: The v2 memory interface files a memory-controlled cgroup has here (from an existing one).
    cgroup_v2_files: tuple[str, ...]
    swaps: tuple[str, ...]
    #: The sysctls of the declared knobs this kernel has (``vm.page-cluster`` -> value).
    sysctls: dict[str, str]
    tools: dict[str, str | None] = field(default_factory=dict)
    #: Other declared knobs' files (neither zswap parameters nor sysctls) this kernel has.
    knob_files: dict[str, str] = field(default_factory=dict)
    #: tracefs is in /proc/filesystems (``--trace``; the lab mounts it when it is not mounted).
    tracefs_supported: bool = False
    #: Online memcgs besides the root and reclaimlab's (scenario key machine.host_memcgs: zswap's
    #: shrink worker walks them); None if the memory hierarchy cannot be read.
    host_memcgs: int | None = None
    #: Free page reporting's order (scenario key machine.page_reporting_order; 0: none):
    #: /sys/module/page_reporting/parameters/page_reporting_order.
    page_reporting_order: int = 0

    @property
    def compressors(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.zswap_compressors) | set(self.zswap_compressors_loadable)))

    @property
    def zswap(self) -> bool:
        return "enabled" in self.zswap_params

    def knob_now(self, k: Knob) -> str | None:
        """The current text of knob ``k``'s file; None if this kernel has no such file."""
        path = Path(k.kernel_file)
        if path.parent == host.ZSWAP_PARAMS:
            return self.zswap_params.get(path.name)
        if knobs.is_sysctl(k):
            return self.sysctls.get(knobs.sysctl_name(k))
        return self.knob_files.get(k.kernel_file)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["zram_devices"] = [asdict(z) for z in self.zram_devices]
        return d

    def summary(self) -> dict[str, Any]:
        """The short form kept in a result's provenance."""
        return {
            "kernel_release": self.kernel_release,
            "mem_total_bytes": self.mem_total_bytes,
            "cpus": self.cpus,
            "zswap_params": dict(self.zswap_params),
            "zswap_compressors": list(self.compressors),
            "cgroup": "v1" if self.cgroup_v1_memory else ("v2" if self.cgroup_v2_memory_enabled else None),
            "zram": self.zram_loaded or self.zram_loadable,
            "host_memcgs": self.host_memcgs,
            "page_reporting_order": self.page_reporting_order,
        }

    def rows(self) -> list[tuple[str, str]]:
        """(item, value) lines for ``reclaimlab lab probe``."""

        def yn(b: bool) -> str:
            return "yes" if b else "no"

        zram_devs = ", ".join(f"zram{z.id} (disksize {z.disksize})" for z in self.zram_devices) or "none"
        rows = [
            ("root", yn(self.root)),
            ("kernel", self.kernel_release),
            ("MemTotal", f"{self.mem_total_bytes / 2**30:.1f} GiB"),
            ("CPUs", str(self.cpus)),
            ("zswap parameters", ", ".join(f"{k}={v}" for k, v in self.zswap_params.items()) or "none (no zswap)"),
            ("zswap compressors", ", ".join(self.zswap_compressors) or "none"),
            ("  loadable (modprobe)", ", ".join(self.zswap_compressors_loadable) or "none"),
            ("debugfs", self.debugfs_mount or ("not mounted (the lab mounts it privately)" if self.debugfs_supported else "not supported")),
            ("zswap debugfs", self.zswap_debugfs or "absent (created when zswap is first enabled)"),
            ("tracefs (--trace)", "supported (mounted for a traced run if not mounted)" if self.tracefs_supported else "not supported"),
            ("zram", "loaded" if self.zram_loaded else ("loadable" if self.zram_loadable else "no")),
            ("  hot_add", yn(self.zram_hot_add)),
            ("  devices", zram_devs),
            ("  comp_algorithm", ", ".join(self.zram_comp_algorithms) or "unknown"),
            ("cgroup v1 memory", self.cgroup_v1_memory or "no"),
            ("cgroup v2", (self.cgroup_v2 or "no") + (" (memory controller)" if self.cgroup_v2_memory else " (no memory controller)")),
            ("other memcgs", "unknown" if self.host_memcgs is None else f'{self.host_memcgs} (machine.host_memcgs = "host")'),
            (
                "free page reporting",
                f'order {self.page_reporting_order} (machine.page_reporting_order = "host")' if self.page_reporting_order else "none",
            ),
            ("active swap", ", ".join(self.swaps) or "none"),
            ("sysctls", ", ".join(f"{k}={v}" for k, v in self.sysctls.items())),
            ("tools", ", ".join(f"{k}={'yes' if v else 'MISSING'}" for k, v in self.tools.items())),
        ]
        return rows


# ---------------------------------------------------------------------------------------------
# Probing
# ---------------------------------------------------------------------------------------------


def parse_crypto(text: str) -> list[str]:
    """Names of the non-internal compression algorithms in /proc/crypto, in file order."""
    names: list[str] = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        if fields.get("type") in COMPRESSION_TYPES and fields.get("internal", "no") != "yes":
            name = fields.get("name")
            if name and name not in names:
                names.append(name)
    return names


def _modprobe_finds(modprobe: str | None, name: str, release: str) -> bool:
    """``modprobe -n -q NAME``: resolves the name without loading anything."""
    if modprobe is None or not Path("/lib/modules", release).is_dir():
        return False
    try:
        r = subprocess.run([modprobe, "-n", "-q", name], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def _meminfo() -> dict[str, int]:
    out = {}
    for line in host.read_text(host.MEMINFO).splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            try:
                out[key] = int(parts[0])
            except ValueError:
                continue
    return out


def _zram_devices() -> list[ZramDevice]:
    devs = []
    for d in sorted(Path("/sys/block").glob("zram*")):
        try:
            zid = int(d.name[4:])
        except ValueError:
            continue
        algs: tuple[str, ...] = ()
        selected = None
        try:
            words = host.read_text(d / "comp_algorithm").split()
            algs = tuple(w.strip("[]") for w in words)
            selected = next((w.strip("[]") for w in words if w.startswith("[")), None)
        except OSError:
            pass
        devs.append(ZramDevice(zid, host.read_int_file(d / "disksize") or 0, host.read_int_file(d / "initstate") or 0, algs, selected))
    return devs


def _v2_files(root: Path) -> tuple[str, ...]:
    """memory.* files of some existing memory-controlled child cgroup (read-only look)."""
    try:
        for child in sorted(root.iterdir()):
            if child.is_dir() and (child / "memory.max").exists():
                return tuple(sorted(p.name for p in child.iterdir() if p.name.startswith("memory.")))
    except OSError:
        pass
    return ()


def probe() -> Probe:
    release = platform.release()
    tools = {name: shutil.which(name) for name in ("mkswap", "swapon", "swapoff", "modprobe")}
    meminfo = _meminfo()
    params = {}
    if host.ZSWAP_PARAMS.is_dir():
        for p in sorted(host.ZSWAP_PARAMS.iterdir()):
            try:
                params[p.name] = host.read_text(p).strip()
            except OSError:
                continue
    try:
        registered = parse_crypto(host.read_text("/proc/crypto"))
    except OSError:
        registered = []
    loadable = [n for n in KNOWN_COMPRESSORS if n not in registered and _modprobe_finds(tools["modprobe"], f"crypto-{n}", release)]
    try:
        filesystems = host.read_text("/proc/filesystems")
    except OSError:
        filesystems = ""
    mnts = host.mounts()
    debugfs = next((m.point for m in mnts if m.fstype == "debugfs"), None)
    zswap_dir = Path(debugfs, "zswap") if debugfs else None
    v1 = next((m.point for m in mnts if m.fstype == "cgroup" and "memory" in m.options), None)
    v2 = next((m.point for m in mnts if m.fstype == "cgroup2"), None)
    v2_memory = v2_enabled = False
    v2_files: tuple[str, ...] = ()
    if v2 is not None:
        try:
            v2_memory = "memory" in host.read_text(Path(v2, "cgroup.controllers")).split()
            v2_enabled = "memory" in host.read_text(Path(v2, "cgroup.subtree_control")).split()
        except OSError:
            pass
        if v2_enabled:
            v2_files = _v2_files(Path(v2))
    zram = _zram_devices()
    comp = next((z.comp_algorithms for z in zram if z.comp_algorithms), ())
    sysctls, knob_files = {}, {}
    for k in native.knobs():
        if Path(k.kernel_file).parent == host.ZSWAP_PARAMS:
            continue  # in params, read above
        try:
            now = host.read_text(k.kernel_file).strip()
        except OSError:
            continue
        if knobs.is_sysctl(k):
            sysctls[knobs.sysctl_name(k)] = now
        else:
            knob_files[k.kernel_file] = now
    return Probe(
        root=os.geteuid() == 0,
        kernel_release=release,
        mem_total_bytes=meminfo.get("MemTotal", 0) * 1024,
        mem_available_bytes=meminfo.get("MemAvailable", 0) * 1024,
        cpus=os.cpu_count() or 1,
        zswap_params=params,
        zswap_compressors=tuple(registered),
        zswap_compressors_loadable=tuple(loadable),
        debugfs_supported="debugfs" in filesystems.split(),
        debugfs_mount=debugfs,
        zswap_debugfs=str(zswap_dir) if zswap_dir is not None and zswap_dir.is_dir() else None,
        # Built in without parameters, zram has no /sys/module/zram: its class and devices tell.
        zram_loaded=Path("/sys/module/zram").is_dir() or host.ZRAM_CONTROL.is_dir() or bool(zram),
        zram_loadable=_modprobe_finds(tools["modprobe"], "zram", release),
        zram_hot_add=(host.ZRAM_CONTROL / "hot_add").exists(),
        zram_devices=tuple(zram),
        zram_comp_algorithms=comp,
        cgroup_v1_memory=v1,
        cgroup_v2=v2,
        cgroup_v2_memory=v2_memory,
        cgroup_v2_memory_enabled=v2_enabled,
        cgroup_v2_files=v2_files,
        swaps=tuple(host.active_swaps()),
        sysctls=sysctls,
        tools=tools,
        knob_files=knob_files,
        tracefs_supported="tracefs" in filesystems.split(),
        host_memcgs=_host_memcgs(),
        page_reporting_order=host_page_reporting_order(),
    )


def _host_memcgs() -> int | None:
    try:
        return count_host_memcgs()
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------
# Checking a scenario against the probe
# ---------------------------------------------------------------------------------------------


def _gib(n: int) -> str:
    if n % 2**30 == 0:
        return f"{n // 2**30} GiB"
    return f"{n / 2**30:.1f} GiB"


def _group_key(path: str) -> str:
    return path.strip("/") or "/"


def _v2_files_used(g: dict[str, Any]) -> list[str]:
    return [f.name for f in cgroup_files.written(2) if f.text(g.get(f.lowered)) is not None]


def _check_cgroup_phases(config: dict[str, Any], p: Probe) -> list[Problem]:
    """reclaim, cgroup_write, cgroup_open and cgroup_read phases use a cgroup v2 file of the
    process's cgroup while it runs: memory.reclaim, memory.high, memory.peak ... A host without
    the v2 memory controller has none of them (cgroup v1 has no memory.reclaim, and its
    memory.max_usage_in_bytes resets for every reader at once: no per-descriptor peak), and a
    v2 kernel may lack one (memory.peak is writable from 6.12)."""
    problems: list[Problem] = []
    verbs = {"reclaim": "writes", "cgroup_write": "writes", "cgroup_open": "opens", "cgroup_read": "reads"}
    for i, proc in enumerate(config["processes"]):
        for j, ph in enumerate(proc["phases"]):
            kind = ph["phase"]["kind"]
            if kind not in verbs:
                continue
            file = "memory.reclaim" if kind == "reclaim" else str(ph["phase"]["file"])
            verb = verbs[kind]
            where: tuple[str | int, ...] = ("processes", i, "phases", j, "kind")
            if not p.cgroup_v2_memory:
                have = "the cgroup v1 memory controller only" if p.cgroup_v1_memory else "no memory cgroup controller"
                v1 = ", and cgroup v1 has no memory.reclaim" if kind == "reclaim" else ""
                problems.append(Problem(where, f"phase {ph['name']!r} {verb} {file}, a cgroup v2 file; this host has {have}{v1}"))
            elif p.cgroup_v2_files and file not in p.cgroup_v2_files:
                problems.append(Problem(where, f"phase {ph['name']!r} {verb} {file}; this kernel ({p.kernel_release}) has no such file"))
    return problems


def _check_cgroups(config: dict[str, Any], p: Probe) -> list[Problem]:
    problems: list[Problem] = []
    cg = config["cgroups"]
    groups = cg["groups"]
    if cg["version"] == 2:
        used = sorted({f for g in groups for f in _v2_files_used(g)})
        needs = f" ({', '.join(used)})" if used else ""
        if not p.cgroup_v2_memory:
            have = "the cgroup v1 memory controller only" if p.cgroup_v1_memory else "no memory cgroup controller"
            problems.append(Problem(("cgroups", "cgroup_version"), f"the scenario needs cgroup v2{needs}; this host has {have}"))
        elif not p.cgroup_v2_memory_enabled:
            problems.append(
                Problem(
                    ("cgroups", "cgroup_version"),
                    f"the scenario needs cgroup v2{needs}; the memory controller is not enabled in {p.cgroup_v2}/cgroup.subtree_control "
                    "(the lab does not change the root cgroup: enable it with `echo +memory > "
                    f"{p.cgroup_v2}/cgroup.subtree_control`)",
                )
            )
        else:
            if p.cgroup_v2_files:
                for g in groups:
                    for f in _v2_files_used(g):
                        if f not in p.cgroup_v2_files:
                            problems.append(
                                Problem(("cgroups", "groups", _group_key(g["path"]), f), f"this kernel ({p.kernel_release}) has no {f}")
                            )
            # The no-internal-process rule: a v2 cgroup with memory-controlled children holds no tasks.
            parents = {g["parent"] for g in groups if g["parent"] is not None}
            for i, proc in enumerate(config["processes"]):
                if proc["cgroup"] in parents:
                    where = groups[proc["cgroup"]]["path"]
                    problems.append(
                        Problem(
                            ("processes", i, "cgroup"),
                            f"cgroup v2 keeps processes in leaf cgroups only; {where!r} has child cgroups (move the process to a leaf)",
                        )
                    )
    elif not p.cgroup_v1_memory:
        used = sorted({f for g in groups for f in ("memory.limit_in_bytes", "memory.swappiness") if _v1_used(g, f)})
        needs = f" ({', '.join(used)})" if used else ""
        have = "only the cgroup v2 memory controller" if p.cgroup_v2_memory else "no memory cgroup controller"
        message = f"the scenario needs the cgroup v1 memory controller{needs}; this host has {have}"
        problems.append(Problem(("cgroups", "cgroup_version"), message))
    return problems


def _v1_used(g: dict[str, Any], f: str) -> bool:
    return g.get("limit_bytes" if f == "memory.limit_in_bytes" else "swappiness") is not None


def _check_zswap(config: dict[str, Any], p: Probe) -> list[Problem]:
    z = config["kernel"]["zswap"]
    if not z["enabled"]:
        return []
    if not p.zswap:
        return [Problem(("kernel", "zswap", "enabled"), f"this kernel ({p.kernel_release}) has no zswap (no /sys/module/zswap/parameters)")]
    problems = []
    if z["compressor"] not in p.compressors:
        problems.append(
            Problem(
                ("kernel", "zswap", "compressor"),
                f"{z['compressor']!r} is not available to this kernel (available: {', '.join(p.compressors) or 'none'})",
            )
        )
    return problems


def _check_knobs(config: dict[str, Any], p: Probe) -> list[Problem]:
    """Each knob the lab would write needs its file on this kernel, unless the scenario asks
    for the kernel's default (a kernel without the file behaves so: 6.18 has no zswap
    ``zpool`` and allocates from zsmalloc). The lab refuses rather than run with another value."""
    problems = []
    if config["kernel"]["zswap"]["enabled"] and not p.zswap:
        return []  # _check_zswap said it: no zswap at all
    for k, want in knobs.sysctl_writes(config) + knobs.sysfs_writes(config):
        value = knobs.value_of(config, k)
        if p.knob_now(k) is None and value != k.default:
            what = "sysctl " + knobs.sysctl_name(k) if knobs.is_sysctl(k) else k.kernel_file
            problems.append(
                Problem(
                    k.path,
                    f"this kernel ({p.kernel_release}) has no {what}: the lab cannot set {k.name} = {want} "
                    f"(it would run the kernel's own {k.name} instead)",
                )
            )
    return problems


def _check_swap(config: dict[str, Any], p: Probe) -> list[Problem]:
    problems: list[Problem] = []
    swaps = config["machine"]["swap"]
    if swaps:
        missing = [t for t in ("mkswap", "swapon", "swapoff") if not p.tools.get(t)]
        if missing:
            problems.append(Problem(("machine", "swap"), f"swap devices need {', '.join(missing)} (util-linux), not found on PATH"))
    for i, sw in enumerate(swaps):
        if sw["kind"] != "zram":
            continue
        where: KeyPath = ("machine", "swap", i)
        if not p.zram_loaded:
            why = "this host has no zram"
            if p.zram_loadable:
                why = "the zram module is not loaded (the lab does not load modules: `modprobe zram`)"
            problems.append(Problem((*where, "kind"), why))
            continue
        if not p.zram_hot_add and not any(z.disksize == 0 and z.initstate == 0 for z in p.zram_devices):
            problems.append(Problem((*where, "kind"), "no unused zram device and no /sys/class/zram-control/hot_add to add one"))
        allocator = sw.get("allocator")
        if allocator is not None and allocator != ZRAM_ALLOCATOR:
            problems.append(
                Problem(
                    (*where, "allocator"), f"zram on a real kernel allocates from {ZRAM_ALLOCATOR} only (no sysfs file selects {allocator})"
                )
            )
        alg = sw.get("comp_algorithm")
        if alg and p.zram_comp_algorithms and alg not in p.zram_comp_algorithms:
            problems.append(
                Problem(
                    (*where, "comp_algorithm"),
                    f"{alg!r} is not available to zram on this kernel (available: {', '.join(p.zram_comp_algorithms)})",
                )
            )
    return problems


def _limited(config: dict[str, Any], index: int) -> bool:
    groups = config["cgroups"]["groups"]
    g: int | None = index
    while g is not None:
        if groups[g].get("limit_bytes") is not None or groups[g].get("high_bytes") is not None:
            return True
        g = groups[g]["parent"]
    return False


def _check_memory(config: dict[str, Any], p: Probe) -> list[Problem]:
    """Unlimited processes must not pressure the whole (shared) host."""
    problems = []
    budget = p.mem_available_bytes // 2
    total = 0
    for i, proc in enumerate(config["processes"]):
        if _limited(config, proc["cgroup"]):
            continue
        size = sum(r["pages"] for r in proc["regions"]) * 4096
        total += size
        if p.mem_available_bytes and total > budget:
            problems.append(
                Problem(
                    ("processes", i),
                    f"the processes without a memory limit allocate {_gib(total)}, more than half of this host's available memory "
                    f"({_gib(p.mem_available_bytes)}): the lab does not pressure the whole host; put them in a cgroup with a limit",
                )
            )
            break
    return problems


def check(config: dict[str, Any], p: Probe) -> list[Problem]:
    """What ``config`` (a lowered scenario) needs that this host lacks, one problem per key.

    Nothing is changed on the host, whatever the outcome.
    """
    problems: list[Problem] = []
    problems += _check_cgroups(config, p)
    problems += _check_cgroup_phases(config, p)
    problems += _check_zswap(config, p)
    problems += _check_swap(config, p)
    problems += _check_knobs(config, p)
    problems += _check_memory(config, p)
    problems += [Problem(path, message) for path, message in filesystems.check_filesystems(config, state_dir())]
    problems += _check_trace(config, p)
    problems += _check_zram_writes(config)
    problems += _check_kernel_allocs(config)
    return problems


def _check_trace(config: dict[str, Any], p: Probe) -> list[Problem]:
    """--trace: the host lab reads the events from tracefs (lab.tracing), which it mounts if
    needed; it refuses a kernel without tracefs and a tracefs someone else is using."""
    if not config.get("trace"):
        return []
    why = tracing.check(p.tracefs_supported)
    return [Problem(("trace",), f"--trace on the host: {why}; the VM lab (--backend vm) traces in its guest")] if why else []


def _check_zram_writes(config: dict[str, Any]) -> list[Problem]:
    """zram_write phases write /sys/block/zram<N>/ of a device the scenario configures; the host
    lab may set up another zram number than the scenario's index (hot_add), so only the VM lab,
    whose guest numbers them in the scenario's order, runs them."""
    return [
        Problem(("processes", i, "phases", j, "kind"), "zram_write phases run in the simulator and the VM lab (--backend vm) only")
        for i, proc in enumerate(config["processes"])
        for j, ph in enumerate(proc["phases"])
        if ph["phase"].get("kind") == "zram_write"
    ]


def _check_kernel_allocs(config: dict[str, Any]) -> list[Problem]:
    """kernel_alloc phases ask the page allocator for blocks of an order and migratetype, which a
    user process cannot do (the runner refuses them too)."""
    return [
        Problem(("processes", i, "phases", j, "kind"), "kernel_alloc phases run in the simulator only")
        for i, proc in enumerate(config["processes"])
        for j, ph in enumerate(proc["phases"])
        if ph["phase"].get("kind") == "kernel_alloc"
    ]


def _cpus(n: int) -> str:
    return f"{n} CPU" + ("" if n == 1 else "s")


def notes(config: dict[str, Any], p: Probe) -> list[str]:
    """Differences between the scenario's machine and this host that do not block a run."""
    out = []
    m = config["machine"]
    if m["memory_bytes"] != p.mem_total_bytes or m["cpus"] != p.cpus:
        out.append(
            f"scenario machine has {_gib(m['memory_bytes'])} and {_cpus(m['cpus'])}; this host has {_gib(p.mem_total_bytes)} and "
            f"{_cpus(p.cpus)}: the memcg limits still apply; global reclaim will differ"
        )
    host_memcgs = m.get("host_memcgs", 0)
    if config["kernel"]["zswap"]["enabled"] and p.host_memcgs is not None and host_memcgs != p.host_memcgs:
        out.append(
            f"the scenario states {host_memcgs} other memcgs (machine.host_memcgs); this host has {p.host_memcgs}: "
            "zswap's shrink worker walks the host's"
        )
    order = m.get("page_reporting_order", 0)
    if order != p.page_reporting_order and any(r.get("thp") for proc in config["processes"] for r in proc.get("regions", [])):
        # Only a THP pays for reported memory in the model (calibration.md 3d).
        out.append(
            f"the scenario states page_reporting_order {order or 'none'} (machine.page_reporting_order); this host's is "
            f"{p.page_reporting_order or 'none'}: the first touch of a THP in reported memory differs"
        )
    if config["kernel"]["zswap"]["enabled"] and p.debugfs_mount is None and not p.debugfs_supported:
        out.append("this kernel has no debugfs: the zswap.* counters (debugfs) will be missing")
    if config["kernel"]["version"] and not p.kernel_release.startswith(config["kernel"]["version"] + "."):
        out.append(
            f"the scenario's kernel preset is {config['kernel']['version']}; this host runs {p.kernel_release}: "
            "the simulator models the preset, the lab measures this kernel"
        )
    return out
