"""The kernel backend: run a scenario on this host's real kernel (the lab).

``run()`` does, in order (docs/lab.md):

1. lower the scenario, probe the host, ``check`` -> ScenarioError naming every key the host
   cannot honour; nothing has been changed yet;
2. find the workload runner; take the lab lock; refuse if swap is already active or an earlier
   run left a journal;
3. journal + apply: debugfs, sysctls, cgroups, swap devices, zswap parameters, filesystems
   (image, loop device, mkfs, mount: ``lab.filesystems``); with ``trace`` (``--trace``),
   tracefs and its events (``lab.tracing``);
4. start one runner per process (journaled; each writes its files before it is ready); with
   filesystems, sync and drop the page cache; move each runner into its cgroup once it is ready,
   snapshot the counters, start the trace reader, say ``go``, sample every ``sample_interval_s`` (default: the scenario's
   ``cgroups.memory_stat_interval``);
5. when every runner has finished its phases (memory still held): the "after" snapshot;
   tell the runners to exit;
6. always (success, error, SIGINT/SIGTERM, timeout): kill our runners, restore every journaled
   change, release the lock (``reclaimlab.lab.session``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reclaimlab import trace as trace_phase
from reclaimlab.errors import ScenarioError
from reclaimlab.lab import filesystems, host, speed
from reclaimlab.lab import probe as probing
from reclaimlab.lab.apply import Applied, apply, new_runid
from reclaimlab.lab.errors import LabError, LabUnavailable, RunnerFailed
from reclaimlab.lab.host import drop_caches
from reclaimlab.lab.record import Series, Sources, counters, sim_counter_keys, snapshot
from reclaimlab.lab.result import KernelRunResult, phase_record
from reclaimlab.lab.runner import READY_TIMEOUT_S, Runner, RunnerSet, build_runner, locate_runner, runner_command, runner_version
from reclaimlab.lab.session import session
from reclaimlab.lab.tracing import HostTrace
from reclaimlab.lower import lower
from reclaimlab.profile import Profile, active_profile
from reclaimlab.result import scenario_provenance
from reclaimlab.scenario import Scenario
from reclaimlab.vm import trace as vmtrace

__all__ = ["default_timeout", "run", "sampling"]

#: The timeout when none is given: 10x the scenario's timed phases, at least this.
MIN_DEFAULT_TIMEOUT_S = 600.0


def sampling(scenario: Scenario, interval_s: float | None) -> tuple[Scenario, float | None]:
    """The lab's sampler reads memory.stat, and every read flushes the memcg statistics, so the
    simulator models the sampler as a reader at the scenario's ``cgroups.memory_stat_interval``
    (docs/model/memcg.md). Without ``interval_s`` the lab samples at that interval (None: not
    during the run); with it, the scenario is given that interval, so that the run's config
    says what the lab did."""
    if interval_s is None:
        ns = scenario.cgroups.memory_stat_interval
        return scenario, (ns / 1e9 if ns else None)
    cgroups = scenario.cgroups.model_copy(update={"memory_stat_interval": round(interval_s * 1e9)})
    return scenario.model_copy(update={"cgroups": cgroups}), interval_s


def default_timeout(config: dict[str, Any]) -> float:
    """10x the longest process's timed phases (random ``duration``, ``sleep``), at least 600 s."""
    longest = 0
    for proc in config["processes"]:
        total = sum(int(ph["phase"].get("duration_ns") or 0) for ph in proc["phases"])
        longest = max(longest, total)
    return max(MIN_DEFAULT_TIMEOUT_S, 10 * longest / 1e9)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _move(r: Runner, cgroup_dir: Path, hierarchy: Path, version: int) -> None:
    """Put the (ready, not yet allocating) runner into its cgroup and check it arrived."""
    host.write_text(cgroup_dir / "cgroup.procs", str(r.pid))
    want = "/" + str(cgroup_dir.relative_to(hierarchy))
    try:
        lines = host.read_text(f"/proc/{r.pid}/cgroup").splitlines()
    except OSError as e:
        raise LabError(f"cannot read /proc/{r.pid}/cgroup: {e}") from None
    # "ID:controllers:path"; v1 memory: controllers include "memory"; v2: "0::path".
    paths = []
    for ln in lines:
        parts = ln.split(":", 2)
        if len(parts) == 3 and ((version == 1 and "memory" in parts[1].split(",")) or (version == 2 and parts[0] == "0")):
            paths.append(parts[2])
    if not any(path == want or path.endswith(want) for path in paths):
        raise LabError(f"{r.label()} is not in {cgroup_dir} after the move (it is in {', '.join(paths) or 'no memory cgroup'})")


def _sha256(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _oom_outcome(
    runners: Sequence[Any], config: Mapping[str, Any], before: Mapping[str, Any], after: Mapping[str, Any], go_ns: int | None
) -> None:
    """Runners killed by SIGKILL before their phases were done: OOM kills when the kernel
    counted as many (``vmstat.oom_kill``, /proc/vmstat, over the run), and then an outcome, as
    in the simulator: the phase the runner was in is recorded with outcome ``oom_killed`` (from
    the end of its last reported phase to when its death was seen; its accesses unknown, 0) and
    its later phases not at all. Otherwise the first kill is a RunnerFailed, as before."""
    killed = [r for r in runners if r.killed_ns is not None]
    if not killed:
        return
    ooms = int(after.get("vmstat.oom_kill", 0)) - int(before.get("vmstat.oom_kill", 0))
    if ooms < len(killed):
        raise RunnerFailed(killed[0].killed_error + f" (the kernel counted {ooms} OOM kill(s) for {len(killed)} killed runner(s))")
    for r in killed:
        phases = config["processes"][r.index]["phases"]
        k = len(r.phases)
        if k >= len(phases):
            continue
        start = int(r.phases[-1]["end_ns"]) if r.phases else 0
        end = (r.killed_ns - go_ns) if go_ns is not None and r.killed_ns is not None else start
        r.phases.append(
            {
                "process": r.name,
                "phase": phases[k]["name"],
                "index": k,
                "start_ns": start,
                "end_ns": max(start, end),
                "accesses": 0,
                "outcome": "oom_killed",
            }
        )


def _provenance(
    scenario: Scenario, profile: Profile | None, p: probing.Probe, cmd: list[str], applied: Applied | None, key_source: str
) -> dict[str, Any]:
    return {
        **scenario_provenance(scenario, profile),
        "host_kernel_release": p.kernel_release,
        "host": p.summary(),
        "runner": {"command": cmd, "version": runner_version(cmd), "sha256": _sha256(cmd[-1])},
        "counter_keys_from": key_source,
        "runid": applied.runid if applied else None,
        "swap_devices": [vars(s) for s in applied.swaps] if applied else [],
        "filesystems": [
            {**{k: str(v) if isinstance(v, Path) else v for k, v in vars(m).items()}, "queue": m.queue} for m in applied.filesystems
        ]
        if applied
        else [],
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def run(
    scenario: Scenario,
    progress: bool = False,
    label: str | None = None,
    timeout_s: float | None = None,
    sample_interval_s: float | None = None,
    build: bool = False,
    on_note: Callable[[str], None] | None = _stderr,
    lock_wait_s: float | None = None,
) -> KernelRunResult:
    """Run ``scenario`` on this host's kernel. See the module docstring for the steps.

    Raises ScenarioError (the host cannot run this scenario; nothing changed), LabUnavailable,
    LabBusy, LabLeftovers, RunnerFailed, LabTimeout, LabInterrupted (all LabError).
    ``lock_wait_s``: how long to wait for the lab lock (default ``$RECLAIMLAB_LAB_WAIT_S``).
    """
    note = on_note or (lambda _m: None)
    scenario, sample_interval_s = sampling(scenario, sample_interval_s)
    profile = active_profile()
    config = lower(scenario, profile)
    p = probing.probe()
    problems = probing.check(config, p)
    if problems:
        raise ScenarioError(scenario.file, problems)
    if not p.root:
        raise LabUnavailable("the kernel backend needs root: it writes sysfs, sysctls and cgroups and runs swapon")
    if runner_command() is None and build:
        cmd = build_runner(note)
    else:
        cmd = locate_runner()
    for n in probing.notes(config, p):
        note(f"note: {n}")
    keys, key_source = sim_counter_keys(config)
    timeout = timeout_s if timeout_s is not None else default_timeout(config)
    name = label or scenario.name or "scenario"

    with session(f"reclaimlab run --backend kernel {name}", note=_stderr, wait_s=lock_wait_s) as lab:
        # Outside lab.journal() below, SIGINT/SIGTERM are only noted (and re-raised at the
        # end): nothing may stop the journal from being written or the restore from running.
        swaps = host.active_swaps()
        if swaps:
            raise LabError(
                f"this host already has active swap ({', '.join(swaps)}): the lab does not mix its swap devices with "
                "someone else's. If it is left over from a lab run, `reclaimlab lab restore` removes it."
            )
        runid = new_runid()
        applied: Applied | None = None
        with lab.journal(runid=runid, scenario=name, scenario_sha256=scenario.sha256) as journal:
            # The runner's copy of the config (and trace files): journaled before it exists, so
            # `lab restore` removes it after a killed driver as it removes everything else.
            tmp = Path(tempfile.gettempdir(), f"reclaimlab-{runid}")
            journal.record("scratch", path=str(tmp))
            tmp.mkdir(mode=0o700)
            applied = apply(journal, p, config, runid, lab.state)
            trace: HostTrace | None = None
            if config.get("trace"):
                trace = HostTrace(list(config["trace"]))
                lab.before_restore(trace.close)
                trace.setup(journal)
            for n in applied.notes:
                note(f"note: {n}")
            cfg_path = Path(tmp, "lowered.json")
            # Trace phases: their compact files go next to the lowered JSON, so the runner reads
            # a private copy that no cache cleanup can remove mid-run.
            on_disk = copy.deepcopy(config)
            for fname, src in trace_phase.trace_files(config).items():
                shutil.copyfile(src, Path(tmp, fname))
            trace_phase.relocate(on_disk, str(tmp))
            cfg_path.write_text(json.dumps(on_disk, sort_keys=True), encoding="utf-8")
            fs_args = [a for m in applied.filesystems for a in ("--fs-dir", str(m.point))]
            groups = config["cgroups"]["groups"]

            def cgroup_procs(i: int) -> list[str]:
                # The runner joins its cgroup before it makes its files, so that their pages
                # (a tmpfs file's stay) are charged where the simulator charges them.
                if not applied.filesystems:
                    return []
                cg = applied.cgroup_dirs[groups[config["processes"][i]["cgroup"]]["path"]]
                return ["--cgroup-procs", str(cg / "cgroup.procs")]

            runners = RunnerSet(
                cmd,
                cfg_path,
                config,
                lambda r: journal.record("runner", pid=r.pid, start_time=r.start_time, process=r.name),
                fs_args,
                cgroup_procs,
            )
            lab.before_restore(runners.close)
            # No reads during the run: the sampler's first tick would come after the deadline.
            interval = sample_interval_s if sample_interval_s is not None else timeout
            result = _drive(scenario, config, applied, runners, keys, timeout, interval, trace)

    result.provenance = _provenance(scenario, profile, p, cmd, applied, key_source)
    return result


def _schedstat(runners: RunnerSet) -> dict[str, int]:
    """Each live runner's /proc/PID/schedstat: ns on a CPU and ns runnable but waiting for one,
    as series keys ``runner[<process>].schedstat.cpu_ns`` / ``.run_delay_ns`` (totals). A runner
    reports its wait per phase when the phase ends; one the OOM killer ends reports nothing, so
    the series keeps its wait up to the last sample (tools/oom_race.py reads it)."""
    out: dict[str, int] = {}
    for r in runners.runners:
        try:
            fields = Path(f"/proc/{r.pid}/schedstat").read_text(encoding="ascii").split()
            out[f"runner[{r.name}].schedstat.cpu_ns"] = int(fields[0])
            out[f"runner[{r.name}].schedstat.run_delay_ns"] = int(fields[1])
        except (OSError, ValueError, IndexError):
            continue  # exited, killed, or no schedstat
    return out


def _drive(
    scenario: Scenario,
    config: dict[str, Any],
    applied: Applied,
    runners: RunnerSet,
    keys: set[str],
    timeout: float,
    interval: float,
    trace: HostTrace | None = None,
) -> KernelRunResult:
    groups = config["cgroups"]["groups"]
    src = Sources(
        cgroup_version=applied.cgroup_version,
        cgroups=dict(applied.cgroup_dirs),
        zswap_dir=applied.zswap_dir,
        zram=[(s.key, s.zram_id) for s in applied.swaps if s.kind == "zram" and s.key is not None and s.zram_id is not None],
        block=[(m.key, m.loop) for m in applied.filesystems if m.key is not None and m.loop is not None],
    )
    runners.start()
    # Before `ready` the runners write and fsync their files (crates/reclaimlab-runner/src/
    # file.rs): allow for that at a slow disk's 50 MB/s.
    file_bytes = sum(filesystems.file_bytes(config, i) for i in range(len(applied.filesystems)))
    runners.wait_ready(READY_TIMEOUT_S + file_bytes / 50e6)
    if applied.filesystems:
        drop_caches()
    for r, proc in zip(runners.runners, config["processes"], strict=True):
        _move(r, applied.cgroup_dirs[groups[proc["cgroup"]]["path"]], applied.cgroup_root.parent, applied.cgroup_version)

    probe_before = speed.probe_ns()
    before = snapshot(src) | _schedstat(runners)
    if "pressure.memory.some.total" not in before:
        print(
            "reclaimlab: this kernel reports no memory PSI (no readable /proc/pressure/memory: CONFIG_PSI off or psi=0); "
            "pressure keys are not recorded",
            file=sys.stderr,
        )
    wanted = set(keys) | {k for k in before if k.startswith("zram")}
    # Every field of the loop devices' stats in the series (sectors written over time); in
    # counters only those the simulator has.
    series = Series(
        keys=sorted(k for k in wanted | {k for k in before if k.startswith(("block[", "runner["))} if k in before), interval_s=interval
    )
    if trace is not None:
        # Counted from here to the "after" snapshot, the window the other counters cover.
        trace.start([r.pid for r in runners.runners])
    t0 = time.monotonic()
    series.add(0.0, before, before)
    runners.go()

    def tick() -> None:
        series.add(time.monotonic() - t0, before, snapshot(src) | _schedstat(runners))

    runners.run(t0 + timeout, tick, interval)
    after = snapshot(src) | _schedstat(runners)
    traced, dropped = trace.stop() if trace is not None else ({}, 0)
    elapsed = time.monotonic() - t0
    series.add(elapsed, before, after)
    runners.finish()
    _oom_outcome(runners.runners, config, before, after, runners.go_ns)

    phases = sorted(
        ((r.index, int(ev.get("index", i)), phase_record(ev)) for r in runners.runners for i, ev in enumerate(r.phases)),
        key=lambda x: (x[0], x[1]),
    )
    result_counters = counters(before, after, wanted)
    missing = [k for k in keys if k not in after]
    stats: dict[str, Any] = {
        "elapsed_s": round(elapsed, 3),
        # The CPU's speed before and after (lab/speed.py): validate compares at it.
        "speed_probe_ns": [round(probe_before), round(speed.probe_ns())],
        "samples": len(series.t),
    }
    if trace is not None:
        groups = trace.groups
        # A simulator key of a traced event that no event line had: no such event (as vm).
        traced |= {k: 0 for k in missing if vmtrace.event_of(k) in vmtrace.traced_events(groups) and k not in traced}
        result_counters.update(traced)
        missing = [k for k in missing if k not in traced]
        stats["trace_dropped"] = dropped
        stats["trace_other"] = trace.other
        stats["trace_events"] = trace.lines
        stats["trace_reader_cpu_s"] = round(trace.reader_cpu_s, 3)
    stats["missing_keys"] = sorted(missing)
    return KernelRunResult(
        scenario=scenario.name or "scenario",
        backend="kernel",
        config=config,
        counters=result_counters,
        phase_records=[rec for _, _, rec in phases],
        stats=stats,
        series=series.to_dict(),
        raw={"before": before, "after": after},
    )
