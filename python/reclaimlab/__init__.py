"""reclaimlab: Linux reclaim, swap and zswap — simulated deterministically, or measured on the
real kernel — from one scenario file.

    >>> import reclaimlab
    >>> s = reclaimlab.load("scenarios/three-regions.toml", overrides=["kernel.zswap.enabled=false"])
    >>> r = reclaimlab.run(s)
    >>> r.counters["vmstat.pswpout"], r.phases
    >>> k = reclaimlab.run(s, backend="kernel")  # the same scenario on this host's kernel (root)
    >>> v = reclaimlab.validate(s, reps=3)       # kernel median [min, max] vs the simulator
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from reclaimlab.compare import CompareResult, compare
from reclaimlab.errors import Problem, ScenarioError
from reclaimlab.lab.errors import LabError
from reclaimlab.lab.result import KernelRunResult
from reclaimlab.lower import lower
from reclaimlab.native import NativeUnavailable
from reclaimlab.overrides import Override
from reclaimlab.result import RunResult
from reclaimlab.scenario import Scenario, load
from reclaimlab.validate import ValidateResult, validate
from reclaimlab.version import __version__

__all__ = [
    "CompareResult",
    "KernelRunResult",
    "LabError",
    "NativeUnavailable",
    "Override",
    "Problem",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "ValidateResult",
    "__version__",
    "compare",
    "load",
    "lower",
    "run",
    "validate",
]


def run(
    scenario_or_path: Scenario | str | os.PathLike[str],
    overrides: Iterable[str | Override] = (),
    progress: bool = False,
    backend: str = "sim",
    **options: Any,
) -> RunResult:
    """Run a scenario (a loaded Scenario, a path, or TOML text) in the simulator, or with
    ``backend="kernel"`` on this host's kernel (``options``: those of
    ``reclaimlab.backends.kernel.run``, e.g. ``timeout_s``, ``sample_interval_s``)."""
    if isinstance(scenario_or_path, Scenario):
        overrides = list(overrides)
        scenario = scenario_or_path.with_overrides(overrides) if overrides else scenario_or_path
    else:
        scenario = load(scenario_or_path, overrides)
    if backend == "kernel":
        from reclaimlab.backends import kernel

        return kernel.run(scenario, progress=progress, **options)
    if backend != "sim":
        raise ValueError(f"backend: expected 'sim' or 'kernel'; got {backend!r}")
    from reclaimlab.backends import sim

    return sim.run(scenario, progress=progress, **options)
