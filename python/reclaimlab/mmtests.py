"""mmtests' derived reclaim figures, computed from a run's counters the way mmtests' vmstat
report computes them from /proc/vmstat (seed 001 publishes them): efficiency is pages
reclaimed per page scanned, velocity pages scanned per second of the run, the percentage of
direct scans is direct reclaim's share of all pages scanned, and page writes by reclaim is
nr_vmscan_write. A report metric names one as ``mmtests:<name>``; ``compare`` shows them
beside the counters when a run has the scan counters."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from reclaimlab.result import RunResult
from reclaimlab.scenario.models import MMTESTS_FIGURES
from reclaimlab.summary import run_seconds

Number = float | int


def _ratio(num: str, den: str, scale: float = 100.0) -> Callable[[Mapping[str, int], float], float | None]:
    def f(c: Mapping[str, int], _s: float) -> float | None:
        d = c.get(den)
        n = c.get(num)
        return None if n is None or not d else scale * n / d

    return f


def _velocity(scanned: str) -> Callable[[Mapping[str, int], float], float | None]:
    def f(c: Mapping[str, int], seconds: float) -> float | None:
        n = c.get(scanned)
        return None if n is None or seconds <= 0 else n / seconds

    return f


def _direct_share(c: Mapping[str, int], _s: float) -> float | None:
    d, k = c.get("vmstat.pgscan_direct"), c.get("vmstat.pgscan_kswapd")
    return None if d is None or k is None or d + k == 0 else 100.0 * d / (d + k)


def _writes(c: Mapping[str, int], _s: float) -> float | None:
    v = c.get("vmstat.nr_vmscan_write")
    return None if v is None else float(v)


#: name → (meaning, function of the counters and the run's seconds).
DERIVED: dict[str, tuple[str, Callable[[Mapping[str, int], float], float | None]]] = {
    "kswapd_efficiency": (
        "kswapd pages reclaimed per page scanned, % (pgsteal_kswapd / pgscan_kswapd)",
        _ratio("vmstat.pgsteal_kswapd", "vmstat.pgscan_kswapd"),
    ),
    "direct_efficiency": (
        "direct reclaim pages reclaimed per page scanned, % (pgsteal_direct / pgscan_direct)",
        _ratio("vmstat.pgsteal_direct", "vmstat.pgscan_direct"),
    ),
    "kswapd_velocity": ("kswapd pages scanned per second of the run (pgscan_kswapd / elapsed)", _velocity("vmstat.pgscan_kswapd")),
    "direct_velocity": ("direct reclaim pages scanned per second of the run (pgscan_direct / elapsed)", _velocity("vmstat.pgscan_direct")),
    "direct_scans_percent": (
        "direct reclaim's share of the pages scanned, % (pgscan_direct / (pgscan_direct + pgscan_kswapd))",
        _direct_share,
    ),
    "page_writes_by_reclaim": ("pages reclaim wrote (nr_vmscan_write)", _writes),
}


# The scenario loader accepts exactly these names.
assert tuple(DERIVED) == MMTESTS_FIGURES


def derived(name: str, r: RunResult) -> float | None:
    """mmtests figure ``name`` of run ``r`` (None when the run lacks its counters or they are 0)."""
    return DERIVED[name][1](r.counters, run_seconds(r))


def all_derived(r: RunResult) -> dict[str, float]:
    """Every figure the run has, as ``mmtests:<name>`` → value (empty without scan counters)."""
    out: dict[str, float] = {}
    for name in DERIVED:
        v = derived(name, r)
        if v is not None:
            out[f"mmtests:{name}"] = v
    return out
