"""Running many configurations: on threads of this process or on a Ray cluster, with a result cache.

Each configuration is lowered and checked here (``backends.sim.prepare``), so that every error
names the scenario and its key; only the lowered config's JSON goes to a worker, which runs it in
the core (``backends.sim.simulate``) and gives back the core's raw result. The RunResult is built
here from it exactly as a serial run builds it, so a parallel or cached result is the serial one,
byte for byte (tests/test_sweep.py).

Threads rather than processes: the core releases the GIL while it steps (``Simulation.step``),
and a worker thread holds it only between chunks of 200 000 events (a progress update) and to
turn the finished result into a dict, so N threads run N simulations at once. Measured on the
README's sweep (8 configurations, 2 cores), threads against the spawned process pool they
replace: no second interpreter and package import per worker, so less CPU and wall time. Each
thread builds, steps and drops its own ``Simulation`` (the native object is bound to the thread
that made it). Ctrl-C (in the main thread) sets a flag every worker checks between chunks: the
running configurations stop within a chunk, the waiting ones never start.

The cache (``cache_dir()``) keeps the core's raw result under a key made of everything the result
depends on: the lowered config (which carries the seed, the scenario's every value and the
profile's costs), the native module (its version and the hash of its file: a rebuilt core never
reuses a result of the old one), the profile's hash and the sampling interval.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reclaimlab import native
from reclaimlab.backends import sim
from reclaimlab.cachedir import CACHE_ENV, cache_dir  # re-exported: the result cache's location
from reclaimlab.core_errors import from_core_error
from reclaimlab.profile import Profile
from reclaimlab.result import RunResult
from reclaimlab.scenario import Scenario

__all__ = ["CACHE_ENV", "SweepUnavailableError", "cache_dir", "cache_key", "run_all"]

#: The cache's file layout; bump it when what a cache file holds changes.
CACHE_FORMAT = 1
#: How often the main thread redraws the progress of a parallel sweep (seconds of wall time).
POLL_S = 0.2


class SweepUnavailableError(Exception):
    """What the sweep needs is missing (Ray, for ``--ray``)."""


@functools.lru_cache(maxsize=4)
def _file_sha256(path: str, mtime_ns: int, size: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def cache_key(config_json: str, profile: Profile | None, interval_s: float | None) -> str:
    path = getattr(native.core(), "__file__", None)
    module_sha = None
    if path is not None:
        st = os.stat(path)
        module_sha = _file_sha256(path, st.st_mtime_ns, st.st_size)
    version = native.native_version()
    parts = {
        "format": CACHE_FORMAT,
        "config_sha256": hashlib.sha256(config_json.encode()).hexdigest(),
        "native_version": version,
        "native_sha256": module_sha,
        "profile_sha256": None if profile is None else profile.sha256,
        "interval_s": interval_s,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _cache_path(key: str) -> Path:
    return cache_dir() / "results" / key[:2] / f"{key}.json"


def _cache_get(key: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    try:
        d = json.loads(_cache_path(key).read_text())
    except (OSError, ValueError):
        return None  # absent, or unreadable: run it again (and overwrite it)
    if not isinstance(d, dict) or d.get("format") != CACHE_FORMAT or d.get("key") != key:
        return None
    return d["raw"], d["series"]


def _cache_put(key: str, raw: dict[str, Any], series: dict[str, Any]) -> None:
    path = _cache_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"format": CACHE_FORMAT, "key": key, "raw": raw, "series": series}, sort_keys=True))
        os.replace(tmp, path)  # atomic: a reader never sees half a file
    except OSError as e:
        print(f"reclaimlab: result cache {cache_dir()}: not written ({e.strerror or e})", file=sys.stderr, flush=True)


@dataclass
class _Job:
    index: int
    label: str
    scenario: Scenario
    config: dict[str, Any]
    config_json: str
    profile: Profile | None
    key: str


def _ray_work(config_json: str, interval_s: float | None, limit_ns: int | None) -> tuple[dict[str, Any], dict[str, Any]]:
    return sim.simulate(config_json, interval_s, limit_ns)


def run_all(
    scenarios: Sequence[tuple[str, Scenario]],
    jobs: int = 1,
    progress: bool = False,
    interval_s: float | None = None,
    cache: bool = False,
    ray_address: str | None = None,
) -> list[RunResult]:
    """Run every (label, scenario) in the simulator, ``jobs`` at a time (0: one per CPU), or on
    the Ray cluster at ``ray_address``; results in the given order, each as ``sim.run`` gives it.
    ``cache``: reuse and store results in ``cache_dir()``. With ``jobs`` > 1 the configurations
    run on that many threads of this process (the core runs without the GIL)."""
    if jobs < 0:
        raise ValueError(f"--jobs: expected a number of configurations at once >= 0 (0: one per CPU); got {jobs}")
    jobs = jobs or _cpus()
    prepared: list[_Job] = []
    for i, (label, sc) in enumerate(scenarios):
        config, config_json, profile = sim.prepare(sc, label)
        key = cache_key(config_json, profile, interval_s) if cache else ""
        prepared.append(_Job(i, label, sc, config, config_json, profile, key))
    done: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
    if cache:
        for j in prepared:
            hit = _cache_get(j.key)
            if hit is not None:
                done[j.index] = hit
    todo = [j for j in prepared if j.index not in done]
    if cache and progress and len(todo) < len(prepared):
        print(f"reclaimlab: {len(prepared) - len(todo)} of {len(prepared)} configurations from the cache ({cache_dir()})", file=sys.stderr)
    if ray_address is not None:
        ran = _run_ray(todo, ray_address, progress, interval_s)
    elif jobs == 1 or len(todo) <= 1:
        ran = _run_here(todo, progress, interval_s)
    else:
        ran = _run_threads(todo, min(jobs, len(todo)), progress, interval_s)
    for j in todo:
        if cache:
            _cache_put(j.key, *ran[j.index])
        done[j.index] = ran[j.index]
    return [sim.finish(j.scenario, j.config, j.profile, *done[j.index]) for j in prepared]


def _run_here(todo: list[_Job], progress: bool, interval_s: float | None) -> dict[int, tuple[dict[str, Any], dict[str, Any]]]:
    out = {}
    for j in todo:
        with sim._Progress(progress, j.label) as bar:
            try:
                out[j.index] = sim.simulate(j.config_json, interval_s, j.config.get("max_time_ns"), on_progress=bar.update)
            except ValueError as e:
                raise from_core_error(j.scenario, e) from None
            bar.update(1.0)
    return out


def _cpus() -> int:
    """The CPUs this process may run on (its affinity mask, e.g. under taskset or a cgroup cpuset)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class _CancelledError(Exception):
    """The sweep was interrupted: a worker thread stops at its next chunk."""


def _run_threads(todo: list[_Job], jobs: int, progress: bool, interval_s: float | None) -> dict[int, tuple[dict[str, Any], dict[str, Any]]]:
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    cancel = threading.Event()
    # Written by the workers between chunks, read by the main thread: one float per key (a
    # dict store is atomic under the GIL).
    fractions = {j.index: 0.0 for j in todo}

    def work(j: _Job) -> tuple[dict[str, Any], dict[str, Any]]:
        def report(fraction: float) -> None:
            if cancel.is_set():
                raise _CancelledError
            fractions[j.index] = fraction

        if cancel.is_set():
            raise _CancelledError
        try:
            return sim.simulate(j.config_json, interval_s, j.config.get("max_time_ns"), on_progress=report)
        except BaseException as e:
            # Drop the traceback here: its frames hold this thread's Simulation, which must be
            # freed on the thread that made it, not wherever the exception is read.
            raise e.with_traceback(None) from None

    out: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
    label = f"{len(todo)} configurations, {jobs} at once"
    with sim._Progress(progress, label) as bar, ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="reclaimlab-sweep") as pool:
        futures = {pool.submit(work, j): j for j in todo}
        pending = set(futures)
        try:
            while pending:
                finished, pending = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
                for f in finished:
                    j = futures[f]
                    try:
                        out[j.index] = f.result()
                    except ValueError as e:
                        raise from_core_error(j.scenario, e) from None
                    fractions[j.index] = 1.0
                # Progress over all configurations; the bar's ETA is from its wall-clock rate.
                bar.update(sum(fractions.values()) / len(fractions))
        except BaseException:
            # Ctrl-C, or a configuration failed: the others stop at their next chunk (the
            # pool's exit waits for them), the ones not started never start.
            cancel.set()
            for f in pending:
                f.cancel()
            raise
    return out


def _run_ray(todo: list[_Job], address: str, progress: bool, interval_s: float | None) -> dict[int, tuple[dict[str, Any], dict[str, Any]]]:
    try:
        import ray  # optional: pip install "ray[default]"
    except ImportError:
        raise SweepUnavailableError(
            "--ray: Ray is not installed (pip install 'ray[default]' here and on the cluster's nodes, with reclaimlab)"
        ) from None
    if not todo:
        return {}
    started = not ray.is_initialized()
    if started:
        # The cluster's workers import reclaimlab (with the same native module) from their own
        # environment: install this package there too.
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    try:
        remote = ray.remote(_ray_work)
        refs = {remote.remote(j.config_json, interval_s, j.config.get("max_time_ns")): j for j in todo}
        out: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
        pending = list(refs)
        with sim._Progress(progress, f"{len(todo)} configurations on Ray ({address})") as bar:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for r in ready:
                    j = refs[r]
                    try:
                        out[j.index] = ray.get(r)
                    except ray.exceptions.RayTaskError as e:
                        cause = getattr(e, "cause", None)  # the exception the task raised
                        if isinstance(cause, ValueError):
                            raise from_core_error(j.scenario, cause) from None
                        raise
                bar.update(len(out) / len(todo))
        return out
    finally:
        if started:
            ray.shutdown()
