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
from reclaimlab.profile import active_profile
from reclaimlab.result import RunResult
from reclaimlab.scenario import Scenario

__all__ = ["CHUNK_EVENTS", "run"]

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

    def __enter__(self) -> _Progress:
        if self.enabled and getattr(self.stream, "isatty", lambda: False)():
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                TimeElapsedColumn(),
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
            print(f"{self.label}: {fraction:.0%} ({now - self.started:.0f}s)", file=self.stream, flush=True)

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if self.bar is not None:
            self.bar.__exit__(et, e, tb)


def run(
    scenario: Scenario,
    progress: bool = False,
    label: str | None = None,
    chunk: int = CHUNK_EVENTS,
    on_progress: Callable[[float], None] | None = None,
) -> RunResult:
    """Run ``scenario`` in the simulator. Raises ScenarioError if the core rejects the config."""
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
    try:
        sim = core.Simulation(config_json)
    except ValueError as e:
        raise from_core_error(scenario, e) from None
    with _Progress(progress, label or scenario.name or "simulating") as bar:
        while not sim.step(chunk):
            fraction = float(sim.progress())
            bar.update(fraction)
            if on_progress is not None:
                on_progress(fraction)
        bar.update(1.0)
    raw = json.loads(sim.result_json())
    return RunResult.from_native(scenario, config, raw, profile, backend="sim")
