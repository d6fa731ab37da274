"""The simulator backend: lowers the scenario, runs ``_core.Simulation`` in chunks of events."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

from reclaimlab import native, resources
from reclaimlab.core_errors import from_core_error
from reclaimlab.errors import ScenarioError
from reclaimlab.lower import lower
from reclaimlab.profile import Profile, active_profile
from reclaimlab.result import RunResult
from reclaimlab.scenario import Scenario

__all__ = ["CHUNK_EVENTS", "finish", "prepare", "run", "simulate"]

#: Events per ``Simulation.step`` call: large enough that the Python loop costs nothing,
#: small enough for a live progress bar and a prompt Ctrl-C.
CHUNK_EVENTS = 200_000
#: Without a terminal, a run that takes longer than this prints a progress line this often.
LOG_EVERY_S = 10.0


class _Progress:
    """A rich progress bar on a terminal; plain lines on stderr for long runs otherwise."""

    def __init__(self, enabled: bool, label: str, stream: TextIO | None = None):
        self.enabled = enabled
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.bar: Any = None
        self.task: Any = None
        self.started = time.monotonic()
        self.last_log = self.started
        self.last_time, self.last_fraction = self.started, 0.0

    def __enter__(self) -> _Progress:
        if self.enabled and getattr(self.stream, "isatty", lambda: False)():
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                # from the wall-clock rate of recent progress (rich's moving estimate), so a run
                # that slows down as memory fills corrects its estimate as it goes
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            self.bar.__enter__()
            self.task = self.bar.add_task(self.label, total=1.0)
        return self

    def update(self, fraction: float) -> None:
        if not self.enabled:
            return
        fraction = min(max(fraction, 0.0), 1.0)
        if self.bar is not None:
            self.bar.update(self.task, completed=fraction)
            return
        now = time.monotonic()
        if now - self.last_log >= LOG_EVERY_S:
            self.last_log = now
            print(f"{self.label}: {fraction:.0%} ({now - self.started:.0f}s{self.eta(now, fraction)})", file=self.stream, flush=True)

    def eta(self, now: float, fraction: float) -> str:
        """Wall-clock time left, from the rate since the previous line (progress follows simulated
        time, whose cost per second changes as memory fills, so the recent rate is the better guess)."""
        before = self.last_fraction
        self.last_fraction = fraction
        if fraction <= before or fraction >= 1.0:
            return ""
        left = (1.0 - fraction) * (now - self.last_time) / (fraction - before)
        self.last_time = now
        return f", ETA {left:.0f}s"

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if self.bar is not None:
            self.bar.__exit__(et, e, tb)


def prepare(scenario: Scenario, label: str | None = None) -> tuple[dict[str, Any], str, Profile | None]:
    """Lower ``scenario`` and check the core's bounds and the resource estimate before anything
    is allocated: (config, its canonical JSON, the profile it was lowered with). Raises
    ScenarioError if the core refuses it; prints the estimate's warning, if any."""
    core = native.core()
    profile = active_profile()
    config = lower(scenario, profile)
    config_json = json.dumps(config, sort_keys=True)
    try:
        # The core's bounds and what the run will allocate, before anything is allocated.
        estimate = resources.Estimate(**core.estimate(config_json))
    except ValueError as e:
        raise from_core_error(scenario, e) from None
    refusal, warning = resources.judge(estimate, resources.headroom())
    if refusal is not None:
        raise ScenarioError.single(scenario.file, refusal)
    if warning is not None:
        print(f"reclaimlab: {label or scenario.name or 'simulation'}: {warning}", file=sys.stderr, flush=True)
    return config, config_json, profile


def simulate(
    config_json: str,
    interval_s: float | None = None,
    limit_ns: int | None = None,
    chunk: int = CHUNK_EVENTS,
    on_progress: Callable[[float], None] | None = None,
    zsmalloc_classes: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run a lowered config in the core: (the core's raw result, the series or {}). Needs only
    the native module (sweeps run it on worker threads and Ray tasks); raises ValueError if the core
    refuses the config. ``zsmalloc_classes``: also each zsmalloc pool's debugfs ``classes``
    table (raw["zsmalloc"]; docs/model/zsmalloc.md)."""
    sim = native.core().Simulation(config_json)
    sampler = _Sampler(sim, interval_s, limit_ns) if interval_s else None
    while not (sampler.step(chunk) if sampler is not None else sim.step(chunk)):
        if on_progress is not None:
            on_progress(float(sim.progress()))
    raw: dict[str, Any] = json.loads(sim.result_json())
    if zsmalloc_classes:
        raw["zsmalloc"] = json.loads(sim.zsmalloc_classes_json())
    series: dict[str, Any] = {}
    if sampler is not None:
        counters = {str(k): int(v) for k, v in raw.get("counters", {}).items()}
        series = sampler.finish(int(raw["stats"]["sim_time_ns"]), counters)
    return raw, series


def run(
    scenario: Scenario,
    progress: bool = False,
    label: str | None = None,
    chunk: int = CHUNK_EVENTS,
    on_progress: Callable[[float], None] | None = None,
    interval_s: float | None = None,
    zsmalloc_classes: bool = False,
) -> RunResult:
    """Run ``scenario`` in the simulator. Raises ScenarioError if the core rejects the config.

    ``interval_s``: sample every counter at multiples of this many seconds of simulated time
    (and at the end) into ``RunResult.series``, in the lab's series format (lab/record.py:
    event counters since the start, gauges as read). Sampling reads only: the counters and
    phases are the same as without it. ``zsmalloc_classes``: also each zsmalloc pool's
    debugfs ``classes`` table, read with the counters (``RunResult.zsmalloc``)."""
    config, config_json, profile = prepare(scenario, label)

    with _Progress(progress, label or scenario.name or "simulating") as bar:

        def step(fraction: float) -> None:
            bar.update(fraction)
            if on_progress is not None:
                on_progress(fraction)

        try:
            raw, series = simulate(config_json, interval_s, config.get("max_time_ns"), chunk, step, zsmalloc_classes)
        except ValueError as e:
            raise from_core_error(scenario, e) from None
        bar.update(1.0)
    return finish(scenario, config, profile, raw, series)


def finish(scenario: Scenario, config: dict[str, Any], profile: Profile | None, raw: dict[str, Any], series: dict[str, Any]) -> RunResult:
    """The RunResult of a core run (its raw result and series, from ``simulate``)."""
    result = RunResult.from_native(scenario, config, raw, profile, backend="sim")
    if series:
        result.series = series
    return result


class _Sampler:
    """Steps the simulation to each sample time (``step_until``) and reads the counters there.

    Some keys appear only once they have a value (e.g. ``lru_inversion.pool_mean_age_ms``), so
    the series is built at the end over every key seen, None where a sample lacks one."""

    def __init__(self, sim: Any, interval_s: float, limit_ns: int | None):
        self.sim = sim
        self.interval_s = interval_s
        self.interval_ns = max(1, round(interval_s * 1e9))
        self.start: dict[str, int] = json.loads(sim.counters_json())
        self.samples: list[tuple[float, dict[str, int]]] = [(0.0, self.start)]
        self.next_ns = self.interval_ns
        self.limit_ns = limit_ns  # max_time: no samples after it

    def step(self, chunk: int) -> bool:
        done = bool(self.sim.step_until(chunk, self.next_ns))
        if not done:
            nxt = self.sim.next_event_ns()
            # Nothing left before the sample time: the counters now are those at that time.
            while nxt is not None and nxt > self.next_ns and (self.limit_ns is None or self.next_ns <= self.limit_ns):
                # runs no event; brings memory pressure (PSI) up to the sample time
                self.sim.step_until(0, self.next_ns)
                self.samples.append((self.next_ns / 1e9, json.loads(self.sim.counters_json())))
                self.next_ns += self.interval_ns
        return done

    def finish(self, end_ns: int, counters: dict[str, int]) -> dict[str, Any]:
        """The series, ending with the result's own counters at the end of the run."""
        from reclaimlab.lab.record import Series

        if end_ns / 1e9 > self.samples[-1][0]:
            self.samples.append((end_ns / 1e9, counters))
        keys = sorted(set(counters).union(*(c for _, c in self.samples)))
        series = Series(keys=keys, interval_s=self.interval_s)
        for t, now in self.samples:
            series.add(t, self.start, now)
        return series.to_dict()
