"""The checks that span several keys of a validated scenario: names unique, references
(regions, cgroups, configs, metrics) resolve, kernel presets, switches, codecs and cost names
known to the native core, keys that need a given cgroup version."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

from reclaimlab import native
from reclaimlab.errors import Path, Problem, format_path
from reclaimlab.scenario.models import (
    BASELINE_DIRECTIONS,
    V1_FILES,
    V2_FILES,
    CgroupClosePhase,
    CgroupOpenPhase,
    CgroupReadPhase,
    Cgroups,
    CgroupWritePhase,
    CreateFilesPhase,
    Device,
    FillPhase,
    Kernel,
    Machine,
    MmapPhase,
    MultiRegionPhase,
    Process,
    RandomPhase,
    ReadPhase,
    ReclaimPhase,
    Report,
    Scenario,
    WritePhase,
    ZramWritePhase,
    parse_after,
    parse_metric,
    phase_name,
)
from reclaimlab.units import PAGE_SIZE, describe, pages

__all__ = ["after_targets", "check"]


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _duplicates(names: Sequence[str | None], base: Path, key: str, what: str) -> list[Problem]:
    problems = []
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name is None:
            continue
        if name in seen:
            problems.append(Problem((*base, i, key), f"duplicate {what} name {name!r} (also {format_path((*base, seen[name]))})"))
        else:
            seen[name] = i
    return problems


def _switch_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


def check(s: Scenario, caps: native.Capabilities) -> list[Problem]:
    p: list[Problem] = []
    p += _check_machine(s.machine, caps)
    p += _check_kernel(s.kernel, caps)
    p += _check_costs(s.costs, caps)
    p += _check_cgroups(s.cgroups)
    p += _check_processes(s, s.processes)
    if s.compare is not None:
        if not s.compare.configs:
            p.append(Problem(("compare", "configs"), "expected at least one configuration"))
        p += _duplicates([c.name for c in s.compare.configs], ("compare", "configs"), "name", "configuration")
        names = [c.name for c in s.compare.configs]
        if s.compare.baseline is not None and s.compare.baseline not in names:
            close = difflib.get_close_matches(s.compare.baseline, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            p.append(
                Problem(
                    ("compare", "baseline"),
                    f"expected the name of a [compare] config{hint} (one of {_quoted(names)}); got {s.compare.baseline!r}",
                )
            )
    if s.report is not None:
        p += _check_report(s, s.report)
    return p


def _check_machine(m: Machine, caps: native.Capabilities) -> list[Problem]:
    p: list[Problem] = []
    names = [sw.name if sw.name is not None else f"swap{i}" for i, sw in enumerate(m.swap)]
    p += _duplicates(names, ("machine", "swap"), "name", "swap device")
    for i, sw in enumerate(m.swap):
        where: Path = ("machine", "swap", i)
        if sw.kind == "file":
            if sw.comp_algorithm is not None:
                p.append(Problem((*where, "comp_algorithm"), 'only a kind = "zram" device has a comp_algorithm; this one is kind = "file"'))
            if sw.allocator is not None:
                p.append(Problem((*where, "allocator"), 'only a kind = "zram" device has an allocator; this one is kind = "file"'))
            if sw.device is None:
                p.append(
                    Problem(
                        (*where, "device"),
                        "required key is missing: a swap file needs a device, one of 'hdd', 'ssd', 'nvme', 'virtio-disk' or a table",
                    )
                )
        elif sw.comp_algorithm is not None and sw.comp_algorithm not in caps.codecs:
            p.append(Problem((*where, "comp_algorithm"), f"expected one of {_quoted(caps.codecs)}; got {sw.comp_algorithm!r}"))
        if sw.device is not None and sw.device.missing():
            p.append(
                Problem(
                    (*where, "device"),
                    f"a device without a preset needs all of {', '.join(Device.FIGURES)}; missing {', '.join(sw.device.missing())}",
                )
            )
    p += _duplicates([f.name for f in m.filesystems], ("machine", "filesystems"), "name", "filesystem")
    for i, fs in enumerate(m.filesystems):
        if fs.type == "tmpfs":
            if fs.device is not None:
                p.append(
                    Problem(("machine", "filesystems", i, "device"), "a tmpfs has no block device; leave device out (size= limits it)")
                )
            if "backing" in fs.model_fields_set:
                p.append(Problem(("machine", "filesystems", i, "backing"), "a tmpfs has no block device, so no backing; leave backing out"))
            continue
        if fs.size is not None:
            p.append(Problem(("machine", "filesystems", i, "size"), f"only a tmpfs has a size; a {fs.type} filesystem has its device's"))
        if fs.device is None:
            p.append(
                Problem(("machine", "filesystems", i, "device"), f"required key is missing: a {fs.type} filesystem needs a block device")
            )
        elif fs.device.missing():
            p.append(
                Problem(
                    ("machine", "filesystems", i, "device"),
                    f"a device without a preset needs all of {', '.join(Device.FIGURES)}; missing {', '.join(fs.device.missing())}",
                )
            )
    return p


def _check_kernel(k: Kernel, caps: native.Capabilities) -> list[Problem]:
    p: list[Problem] = []
    if not caps.version_ok(k.version):
        p.append(Problem(("kernel", "version"), f"expected one of {_quoted(caps.known_versions())}; got {k.version!r}"))
    elif k.switches:
        preset = caps.switches(k.version)
        if preset is not None:
            for name, value in k.switches.items():
                where: Path = ("kernel", "switches", name)
                if name not in preset:
                    close = difflib.get_close_matches(name, list(preset), n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    p.append(Problem(where, f"unknown switch{hint}; expected one of: {', '.join(sorted(preset))}"))
                    continue
                want = preset[name]
                ok = type(value) is type(want) or (isinstance(want, float) and type(value) is int)
                if not ok:
                    p.append(Problem(where, f"expected {_switch_type(want)} (like the preset's {describe(want)}); got {describe(value)}"))
    if caps.version_ok(k.version):
        p += _check_zpool(k)
    return p


def _check_zpool(k: Kernel) -> list[Problem]:
    """zswap's allocator must exist in the version preset (zbud: up to 6.14)."""
    zpool = k.zswap.zpool
    presets = native.zpools().get(zpool, ())
    if zpool in native.zpools() and k.version not in presets:
        where: Path = ("kernel", "zswap", "zpool")
        return [
            Problem(
                where,
                f"{zpool} does not exist in kernel {k.version} (kernel.version = {k.version!r}); it exists in {', '.join(presets)}",
            )
        ]
    return []


def _check_costs(costs: dict[str, int], caps: native.Capabilities) -> list[Problem]:
    if caps.default_costs is None:
        return []
    p: list[Problem] = []
    for name in costs:
        if name not in caps.default_costs:
            close = difflib.get_close_matches(name, list(caps.default_costs), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            p.append(
                Problem(("costs", name), f"unknown time-model parameter{hint}; expected one of: {', '.join(sorted(caps.default_costs))}")
            )
    return p


def _check_cgroups(c: Cgroups) -> list[Problem]:
    p: list[Problem] = []
    if c.memory_recursiveprot and c.cgroup_version != 2:
        p.append(Problem(("cgroups", "memory_recursiveprot"), "is a cgroup2 mount option; it needs cgroup_version = 2"))
    for key, files in c.groups.items():
        where: Path = ("cgroups", "groups", key)
        parts = key.split("/")
        if not key or key == "/":
            p.append(Problem(where, "the root cgroup has no limits to set; name a child like 'workload'"))
            continue
        if any(part in ("", ".", "..") for part in parts) or any(ch in key for ch in "\n\0"):
            p.append(Problem(where, f"expected a path relative to the root like 'workload' or 'a/b'; got {key!r}"))
            continue
        wrong = V1_FILES if c.cgroup_version == 2 else V2_FILES
        need = 1 if c.cgroup_version == 2 else 2
        for f in files.files_set():
            if f in wrong:
                p.append(Problem((*where, f), f"{f} needs cgroup_version = {need}; this scenario has cgroup_version = {c.cgroup_version}"))
    return p


#: The most files one create_files phase may create (files x loops): each is a region of the
#: lowered config, and the core numbers regions with 16 bits.
MAX_CREATED_FILES = 60000


def _files_on(s: Scenario, procs: list[Process]) -> list[tuple[str, int, Path]]:
    """Every file of every process (declared or created by a create_files phase), as (its
    filesystem's name, its size in bytes, where it is declared), in lowering order."""
    names = [fs.name for fs in s.machine.filesystems]
    out: list[tuple[str, int, Path]] = []
    if not names:
        return out
    for i, proc in enumerate(procs):
        for k, f in enumerate(proc.files):
            out.append(
                (f.filesystem if f.filesystem is not None else names[0], pages(f.size) * PAGE_SIZE, ("processes", i, "files", k, "size"))
            )
        for j, ph in enumerate(proc.phases):
            if isinstance(ph, CreateFilesPhase):
                fs = ph.filesystem if ph.filesystem is not None else names[0]
                out.extend([(fs, pages(ph.size) * PAGE_SIZE, ("processes", i, "phases", j, "size"))] * (ph.files * ph.loops))
    return out


def _check_tmpfs_sizes(s: Scenario, procs: list[Process]) -> list[Problem]:
    """The files on a tmpfs fit in its size (unset: half of RAM, the kernel's default): files
    have a fixed size, so a write past it (ENOSPC) is refused here. Reported at the first file
    that does not fit."""
    p: list[Problem] = []
    files = _files_on(s, procs)
    for n, fs in enumerate(s.machine.filesystems):
        if fs.type != "tmpfs" or not isinstance(s.machine.memory, int):
            continue
        limit = fs.size if fs.size is not None else pages(s.machine.memory) // 2 * PAGE_SIZE
        used = 0
        for name, size, path in files:
            if name != fs.name:
                continue
            used += size
            if used > limit:
                p.append(
                    Problem(
                        path,
                        f"the files on tmpfs {fs.name!r} reach {used} bytes here, "
                        f"over its size of {limit} bytes (machine.filesystems[{n}].size)",
                    )
                )
                break
    return p


def _check_processes(s: Scenario, procs: list[Process]) -> list[Problem]:
    p: list[Problem] = []
    if not procs:
        p.append(Problem(("processes",), "expected at least one [[processes]] entry"))
    elif not any(
        size > 0
        for proc in procs
        for size in [
            *(r.size for r in proc.regions),
            *(f.size for f in proc.files),
            *(ph.size for ph in proc.phases if isinstance(ph, CreateFilesPhase)),
        ]
    ):
        p.append(Problem(("processes",), "expected regions with a total size > 0; no process has a region or file"))
    p += _duplicates([proc.name for proc in procs], ("processes",), "name", "process")
    p += _check_after(procs)
    p += _check_tmpfs_sizes(s, procs)
    cgroups = set(s.cgroups.all_paths())
    for i, proc in enumerate(procs):
        where: Path = ("processes", i)
        if proc.cgroup_path() not in cgroups:
            known = _quoted(c.lstrip("/") or "/" for c in sorted(cgroups))
            p.append(Problem((*where, "cgroup"), f"expected a cgroup under [cgroups.groups] or '/' (one of {known}); got {proc.cgroup!r}"))
        p += _duplicates([r.name for r in proc.regions], (*where, "regions"), "name", "region")
        p += _duplicates([f.name for f in proc.files], (*where, "files"), "name", "file")
        region_names = {r.name for r in proc.regions}
        filesystems = [fs.name for fs in s.machine.filesystems]
        for k, f in enumerate(proc.files):
            if f.name in region_names:
                p.append(Problem((*where, "files", k, "name"), f"a region of process {proc.name!r} is also named {f.name!r}"))
            if f.filesystem is None and len(filesystems) != 1:
                have = "none" if not filesystems else f"{len(filesystems)} ({_quoted(filesystems)})"
                p.append(
                    Problem(
                        (*where, "files", k, "filesystem"),
                        f"required key is missing: the machine has {have} [[machine.filesystems]], so name one",
                    )
                )
            elif f.filesystem is not None and f.filesystem not in filesystems:
                p.append(
                    Problem(
                        (*where, "files", k, "filesystem"),
                        f"expected the name of a [[machine.filesystems]] entry (one of {_quoted(filesystems)}); got {f.filesystem!r}",
                    )
                )
        files = [f.name for f in proc.files]
        tmpfiles = {f.name for f in proc.files if f.tmpfile}
        for k, f in enumerate(proc.files):
            fs_name = f.filesystem if f.filesystem is not None else (filesystems[0] if len(filesystems) == 1 else None)
            if f.tmpfile and fs_name is not None and any(fs.name == fs_name and fs.type == "tmpfs" for fs in s.machine.filesystems):
                p.append(
                    Problem(
                        (*where, "files", k, "tmpfile"), f"a tmpfile on tmpfs {fs_name!r} is not modelled; put it on a block filesystem"
                    )
                )
        p += _duplicates([phase_name(ph, j) for j, ph in enumerate(proc.phases)], (*where, "phases"), "name", "phase")
        regions = [r.name for r in proc.regions]
        for j, ph in enumerate(proc.phases):
            pw: Path = (*where, "phases", j)
            if isinstance(ph, CreateFilesPhase):
                if ph.filesystem is None and len(filesystems) != 1:
                    have = "none" if not filesystems else f"{len(filesystems)} ({_quoted(filesystems)})"
                    p.append(
                        Problem(
                            (*pw, "filesystem"), f"required key is missing: the machine has {have} [[machine.filesystems]], so name one"
                        )
                    )
                elif ph.filesystem is not None and ph.filesystem not in filesystems:
                    p.append(
                        Problem(
                            (*pw, "filesystem"),
                            f"expected the name of a [[machine.filesystems]] entry (one of {_quoted(filesystems)}); got {ph.filesystem!r}",
                        )
                    )
                if ph.files * ph.loops > MAX_CREATED_FILES:
                    p.append(Problem((*pw, "files"), f"files x loops must be at most {MAX_CREATED_FILES}; got {ph.files * ph.loops}"))
                clash = sorted(set(ph.file_names(phase_name(ph, j))) & ({*files} | {*regions}))
                if clash:
                    p.append(
                        Problem(
                            (*pw, "name"), f"the files it creates are named like a region or file of process {proc.name!r}: {clash[0]!r}"
                        )
                    )
            elif isinstance(ph, ReadPhase | MmapPhase | WritePhase):
                if ph.file not in files:
                    p.append(
                        Problem(
                            (*pw, "file"),
                            f"expected the name of a file of process {proc.name!r} (one of {_quoted(files)}); got {ph.file!r}",
                        )
                    )
                elif (isinstance(ph, WritePhase) or (isinstance(ph, MmapPhase) and ph.write_percent > 0)) and ph.file in tmpfiles:
                    p.append(
                        Problem(
                            (*pw, "file"),
                            f"{ph.file!r} is a tmpfile, which only read phases may use (truncating written pages at exit is not modelled)",
                        )
                    )
            elif isinstance(ph, ReclaimPhase | CgroupWritePhase | CgroupOpenPhase | CgroupReadPhase | CgroupClosePhase):
                if isinstance(ph, ReclaimPhase):
                    file, verb = "memory.reclaim", "writes"
                elif isinstance(ph, CgroupClosePhase):
                    file, verb = "a cgroup file", "closes"
                else:
                    file = ph.file or "a peak file"
                    verb = {"cgroup_write": "writes", "cgroup_open": "opens", "cgroup_read": "reads"}[ph.kind]
                if s.cgroups.cgroup_version != 2:
                    p.append(
                        Problem(
                            (*pw, "kind"),
                            f"a {ph.kind} phase {verb} {file}, a cgroup v2 file; cgroup_version is {s.cgroups.cgroup_version}",
                        )
                    )
                elif not isinstance(ph, ReclaimPhase) and file != "memory.stat" and proc.cgroup_path() == "/":
                    key = "file" if getattr(ph, "file", None) is not None else "kind"
                    p.append(
                        Problem((*pw, key), f"the root cgroup has no {file}; put process {proc.name!r} in a cgroup of [cgroups.groups]")
                    )
            elif isinstance(ph, ZramWritePhase):
                zram = [sw.name if sw.name is not None else f"swap{i}" for i, sw in enumerate(s.machine.swap) if sw.kind == "zram"]
                if ph.device is None and len(zram) != 1:
                    have = f"{len(zram)} zram devices ({_quoted(zram)}): name one" if zram else 'no kind = "zram" swap device'
                    p.append(Problem((*pw, "device"), f"a zram_write phase writes a zram device's {ph.file}; the machine has {have}"))
                elif ph.device is not None and ph.device not in zram:
                    p.append(
                        Problem(
                            (*pw, "device"), f'expected the name of a kind = "zram" swap device (one of {_quoted(zram)}); got {ph.device!r}'
                        )
                    )
            else:
                p += _check_phase(ph, pw, proc.name, regions)
        p += _check_fds(proc, where)
    return p


def fd_files(proc: Process) -> list[dict[str, str]]:
    """For each phase of the process, in order, its open descriptors before the phase runs
    (name -> file), following cgroup_open and cgroup_close (and ignoring references that
    ``_check_fds`` reports)."""
    out: list[dict[str, str]] = []
    open_: dict[str, str] = {}
    for ph in proc.phases:
        out.append(dict(open_))
        if isinstance(ph, CgroupOpenPhase) and ph.fd not in open_:
            open_[ph.fd] = ph.file
        elif isinstance(ph, CgroupClosePhase):
            open_.pop(ph.fd, None)
    return out


def _check_fds(proc: Process, where: Path) -> list[Problem]:
    """The process's descriptor names: each cgroup_write/cgroup_read/cgroup_close names one
    that a cgroup_open of the process opened before it and no cgroup_close closed since, on the
    file it names (if it names one); a cgroup_open does not reuse a name still open."""
    p: list[Problem] = []
    for j, (ph, open_) in enumerate(zip(proc.phases, fd_files(proc), strict=True)):
        if not isinstance(ph, CgroupOpenPhase | CgroupWritePhase | CgroupReadPhase | CgroupClosePhase) or ph.fd is None:
            continue
        pw: Path = (*where, "phases", j, "fd")
        if isinstance(ph, CgroupOpenPhase):
            if ph.fd in open_:
                p.append(Problem(pw, f"descriptor {ph.fd!r} of process {proc.name!r} is already open (on {open_[ph.fd]}); close it first"))
            continue
        if ph.fd not in open_:
            have = f"open here: {_quoted(open_)}" if open_ else "none is open here"
            want = f"expected the name of a descriptor a cgroup_open of process {proc.name!r} opened before this phase"
            p.append(Problem(pw, f"{want} ({have}); got {ph.fd!r}"))
        elif not isinstance(ph, CgroupClosePhase) and ph.file is not None and ph.file != open_[ph.fd]:
            p.append(Problem((*where, "phases", j, "file"), f"descriptor {ph.fd!r} is open on {open_[ph.fd]}, not {ph.file}"))
    return p


def after_targets(procs: Sequence[Process]) -> dict[tuple[int, int], tuple[int, int]]:
    """The ``after`` conditions of valid references: (process, phase) -> (process, phase), by
    index. A process's ``after`` is its first phase's."""
    index = {proc.name: i for i, proc in enumerate(procs)}
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for i, proc in enumerate(procs):
        for j, ph in enumerate(proc.phases):
            text = proc.after if j == 0 and proc.after is not None else ph.after
            ref = parse_after(text) if text is not None else None
            if ref is None or ref[0] not in index or ref[0] == proc.name:
                continue
            q = index[ref[0]]
            names = [phase_name(x, k) for k, x in enumerate(procs[q].phases)]
            if ref[1] in names:
                out[(i, j)] = (q, names.index(ref[1]))
    return out


def _check_after(procs: Sequence[Process]) -> list[Problem]:
    """``after = "<process>:<phase>"`` names a phase of another process, and no chain of them
    waits on itself."""
    p: list[Problem] = []
    names = [proc.name for proc in procs]
    for i, proc in enumerate(procs):
        refs: list[tuple[Path, str]] = []
        if proc.after is not None:
            refs.append((("processes", i, "after"), proc.after))
            if not proc.phases:
                p.append(Problem(("processes", i, "after"), f"process {proc.name!r} has no phases to start after {proc.after!r}"))
            elif proc.phases[0].after is not None:
                p.append(Problem(("processes", i, "phases", 0, "after"), "the process's `after` is its first phase's: give one of the two"))
        refs += [(("processes", i, "phases", j, "after"), ph.after) for j, ph in enumerate(proc.phases) if ph.after is not None]
        for where, text in refs:
            ref = parse_after(text)
            if ref is None:
                p.append(Problem(where, f"expected '<process>:<phase>'; got {text!r}"))
            elif ref[0] == proc.name:
                p.append(Problem(where, f"names a phase of its own process {proc.name!r} (its phases run in order already)"))
            elif ref[0] not in names:
                p.append(
                    Problem(
                        where,
                        f"expected the name of another process (one of {_quoted(n for n in names if n != proc.name)}); got {ref[0]!r}",
                    )
                )
            else:
                q = procs[names.index(ref[0])]
                phases = [phase_name(x, k) for k, x in enumerate(q.phases)]
                if ref[1] not in phases:
                    p.append(Problem(where, f"expected a phase of process {q.name!r} (one of {_quoted(phases)}); got {ref[1]!r}"))
    if p:
        return p
    # Phase (i, j) ends after (i, j-1) and after its `after` phase: a cycle never ends.
    targets = after_targets(procs)
    state: dict[tuple[int, int], int] = {}

    def visit(node: tuple[int, int]) -> tuple[int, int] | None:
        stack: list[tuple[tuple[int, int], bool]] = [(node, False)]
        while stack:
            n, leaving = stack.pop()
            if leaving:
                state[n] = 2
                continue
            if state.get(n) == 2:
                continue
            if state.get(n) == 1:
                return n
            state[n] = 1
            stack.append((n, True))
            if n[1] > 0:
                stack.append(((n[0], n[1] - 1), False))
            if n in targets:
                stack.append((targets[n], False))
        return None

    for i, proc in enumerate(procs):
        for j in range(len(proc.phases)):
            loop = visit((i, j))
            if loop is not None:
                a, b = loop
                key: Path = ("processes", a, "after") if b == 0 and procs[a].after is not None else ("processes", a, "phases", b, "after")
                which = phase_name(procs[a].phases[b], b)
                return [Problem(key, f"phase {which!r} of process {procs[a].name!r} waits, through `after`, on itself")]
    return p


def _check_phase(ph: Any, pw: Path, proc: str, regions: list[str]) -> list[Problem]:
    p: list[Problem] = []

    def unknown(path: Path, name: str) -> Problem:
        return Problem(path, f"expected the name of a region of process {proc!r} (one of {_quoted(dict.fromkeys(regions))}); got {name!r}")

    if isinstance(ph, FillPhase):
        if ph.region not in regions:
            p.append(unknown((*pw, "region"), ph.region))
    elif isinstance(ph, MultiRegionPhase):
        if ph.region is not None and ph.regions is not None:
            p.append(Problem(pw, "expected one of region or regions, not both"))
        elif ph.region is None and ph.regions is None:
            p.append(Problem((*pw, "regions"), "required key is missing (or give region = NAME)"))
        elif ph.regions is not None and not ph.regions:
            p.append(Problem((*pw, "regions"), "expected at least one region name"))
        else:
            seen: set[str] = set()
            for k, name in enumerate(ph.region_names()):
                at: Path = (*pw, "regions", k) if ph.regions is not None else (*pw, "region")
                if name not in regions:
                    p.append(unknown(at, name))
                elif name in seen:
                    p.append(Problem(at, f"region {name!r} is listed twice"))
                seen.add(name)
        if isinstance(ph, RandomPhase) and (ph.count is None) == (ph.duration is None):
            both = "both" if ph.count is not None else "neither"
            p.append(Problem(pw, f"expected exactly one of count or duration; got {both}"))
    return p


def _check_report(s: Scenario, r: Report) -> list[Problem]:
    p: list[Problem] = []
    configs = [c.name for c in s.compare.configs] if s.compare is not None else []
    if not configs:
        p.append(Problem(("report",), "a [report] needs [compare] configs: they are the report's columns"))
    phases = sorted({f"{proc.name}/{phase_name(ph, j)}" for proc in s.processes for j, ph in enumerate(proc.phases)})
    cgroups = s.cgroups.all_paths()

    def metric(path: Path, text: str) -> list[Problem]:
        try:
            m = parse_metric(text)
        except ValueError as e:
            return [Problem(path, str(e))]
        if m.phase is not None and m.phase not in phases:
            return [Problem(path, f"expected '<process>/<phase>' of this scenario (one of {_quoted(phases)}); got {m.phase!r}")]
        if m.latency is not None:
            names = sorted(proc.name for proc in s.processes)
            pattern = m.latency[0]
            matched = [n for n in names if (n.startswith(pattern[:-1]) if pattern.endswith("*") else n == pattern)]
            if not matched:
                return [
                    Problem(path, f"expected a process of this scenario or a prefix* of some (one of {_quoted(names)}); got {pattern!r}")
                ]
        if m.memcg is not None and m.memcg not in cgroups:
            return [Problem(path, f"expected a cgroup of this scenario in memcg[...] (one of {_quoted(cgroups)}); got {m.memcg!r}")]
        return []

    def config(path: Path, name: str) -> list[Problem]:
        if not configs or name in configs:
            return []
        close = difflib.get_close_matches(name, configs, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return [Problem(path, f"expected the name of a [compare] config{hint} (one of {_quoted(configs)}); got {name!r}")]

    for i, text in enumerate(r.metrics):
        p += metric(("report", "metrics", i), text)
    seen: dict[str, int] = {}
    for i, text in enumerate(r.metrics):
        if text in seen:
            p.append(Problem(("report", "metrics", i), f"duplicate metric {text!r} (also report.metrics[{seen[text]}])"))
        seen.setdefault(text, i)
    for name, values in r.published.items():
        p += config(("report", "published", name), name)
        for key in values:
            where: Path = ("report", "published", name, key)
            bad = metric(where, key)
            if not bad and key not in r.metrics:
                bad = [Problem(where, f"a published value needs its metric in report.metrics; add {key!r} there")]
            p += bad
    for i, c in enumerate(r.claims):
        w: Path = ("report", "claims", i)
        p += metric((*w, "metric"), c.metric)
        p += config((*w, "config"), c.config)
        if c.direction == "greater_than":
            if c.other_metric is None:
                p.append(
                    Problem(
                        (*w, "other_metric"),
                        'required key is missing: direction = "greater_than" compares metric with other_metric in one config',
                    )
                )
            else:
                p += metric((*w, "other_metric"), c.other_metric)
            if c.baseline is not None:
                p.append(Problem((*w, "baseline"), 'direction = "greater_than" compares two metrics in one config; it takes no baseline'))
            continue
        if c.other_metric is not None:
            p.append(
                Problem(
                    (*w, "other_metric"),
                    f'only direction = "greater_than" takes an other_metric; this claim has direction = "{c.direction}"',
                )
            )
        if c.baseline is None:
            if c.direction in BASELINE_DIRECTIONS:
                p.append(
                    Problem(
                        (*w, "baseline"), f'required key is missing: direction = "{c.direction}" compares config with a baseline config'
                    )
                )
        else:
            p += config((*w, "baseline"), c.baseline)
            if c.baseline == c.config:
                p.append(Problem((*w, "baseline"), f"expected a config other than the claim's config; both are {c.config!r}"))
    return p
