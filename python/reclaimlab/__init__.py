"""reclaimlab: Linux reclaim, swap and zswap — simulated deterministically, or measured on the
real kernel — from one scenario file.

    >>> import reclaimlab
    >>> s = reclaimlab.load("scenarios/three-regions.toml", overrides=["kernel.zswap.enabled=false"])
    >>> r = reclaimlab.run(s)
    >>> r.counters["vmstat.pswpout"], r.phases
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from importlib import metadata

try:
    __version__ = metadata.version("reclaimlab")
except metadata.PackageNotFoundError:  # a source checkout that is not installed
    __version__ = "0.0.0+unknown"

from reclaimlab.compare import CompareResult, compare
from reclaimlab.errors import Problem, ScenarioError
from reclaimlab.lower import lower
from reclaimlab.native import NativeUnavailable
from reclaimlab.overrides import Override
from reclaimlab.result import RunResult
from reclaimlab.scenario import Scenario, load

__all__ = [
    "CompareResult",
    "NativeUnavailable",
    "Override",
    "Problem",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "__version__",
    "compare",
    "load",
    "lower",
    "run",
]


def run(
    scenario_or_path: Scenario | str | os.PathLike[str],
    overrides: Iterable[str | Override] = (),
    progress: bool = False,
) -> RunResult:
    """Run a scenario (a loaded Scenario, a path, or TOML text) in the simulator."""
    from reclaimlab.backends import sim

    if isinstance(scenario_or_path, Scenario):
        overrides = list(overrides)
        scenario = scenario_or_path.with_overrides(overrides) if overrides else scenario_or_path
    else:
        scenario = load(scenario_or_path, overrides)
    return sim.run(scenario, progress=progress)
