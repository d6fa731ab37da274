"""The speed probe: how fast this host's CPU runs at a moment (docs/lab.md, "Speed").

On the project's shared VMs the same code runs at different speeds from one session to the
next (our lzo on a text page: 3.5 us on 2026-11-22, 1.3 us on 2026-11-24) and even within one.
Calibrate records the probe with the machine profile, every kernel run records it before and
after, and ``validate`` runs the simulator with its CPU costs scaled by the ratio of the two
(``speed_factor``), so that kernel runs are compared at the speed they ran at.

The probe is user-space work the kernel does not slow down or speed up: our lzo compressing one
text page (``_core.codec_timing``), median of ``samples`` samples of ``reps`` calls. It
measures the CPU's speed, not its availability (a busy host's other tasks show up in each
phase's ``run_delay_s`` instead, lab/result.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["probe_ns", "run_probe_ns", "speed_factor"]


def probe_ns(samples: int = 5, reps: int = 51) -> float:
    """ns for our lzo to compress one text page, median of ``samples``."""
    from reclaimlab import native

    core = native.core()
    page = bytes(core.page_bytes("text", 1, 0, 0))
    return float(statistics.median(float(core.codec_timing("lzo", page, reps)[0]) for _ in range(samples)))


def run_probe_ns(stats: Mapping[str, Any]) -> float | None:
    """A run's probe: the mean of its before/after probes (``stats["speed_probe_ns"]``)."""
    v = stats.get("speed_probe_ns")
    if isinstance(v, Sequence) and v and all(isinstance(x, int | float) for x in v):
        return float(statistics.fmean(v))
    return None


def speed_factor(run_probes: Sequence[float | None], profile_probe: float | None) -> float | None:
    """How much slower (> 1) or faster (< 1) the kernel runs' CPU was than the profile's: the
    median of the runs' probes over the profile's. None if either side has no probe."""
    probes = [p for p in run_probes if p is not None and p > 0]
    if not probes or not profile_probe or profile_probe <= 0:
        return None
    return float(statistics.median(probes)) / profile_probe
