"""Every scenario under examples/ runs in the simulator and does what its README says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import reclaimlab
from reclaimlab.compare import CompareResult

pytestmark = pytest.mark.native

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MiB = 1 << 20


@pytest.fixture(autouse=True)
def _needs_core(real_core: Any) -> None:
    """The examples run in the real simulator (skipped when the native module is not built)."""


def _results(path: Path) -> dict[str, reclaimlab.RunResult]:
    out: CompareResult = reclaimlab.compare(path)
    return {cfg.name: r for cfg, r in out.configs}


def _outcomes(r: reclaimlab.RunResult, process: str) -> list[str]:
    return [p["outcome"] for p in r.phase_records if p["process"] == process]


def _cg(r: reclaimlab.RunResult, group: str, key: str) -> int:
    return r.counters[f"memcg[/{group}].{key}"]


def test_every_example_is_covered() -> None:
    scenarios = sorted(p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.glob("*/*.toml"))
    assert scenarios == ["kubernetes-limited-swap/node.toml", "systemd-slice/slice.toml"]
    for p in EXAMPLES.glob("*/*.toml"):
        assert (p.parent / "README.md").is_file(), p


def test_kubernetes_limited_swap() -> None:
    r = _results(EXAMPLES / "kubernetes-limited-swap" / "node.toml")
    web, batch, db = "kubepods/burstable/pod-web/web", "kubepods/burstable/pod-batch/worker", "kubepods/pod-db/db"
    limited = r["LimitedSwap"]
    for proc in ("web", "db", "batch"):
        assert set(_outcomes(limited, proc)) == {"completed"}, proc
    assert 0 < _cg(limited, batch, "memory.swap.peak") <= 64 * MiB
    assert _cg(limited, web, "memory.swap.peak") <= 128 * MiB
    assert _cg(limited, db, "memory.swap.peak") == 0
    assert "oom_killed" in _outcomes(r["NoSwap"], "batch")
    unlimited = r["UnlimitedSwap"]
    for proc in ("web", "db", "batch"):
        assert set(_outcomes(unlimited, proc)) == {"completed"}, proc
    assert _cg(unlimited, batch, "memory.swap.peak") > 64 * MiB


def test_systemd_slice() -> None:
    r = _results(EXAMPLES / "systemd-slice" / "slice.toml")
    db, app = "app.slice/db.service", "app.slice/app.service"
    configured = r["as-configured"]
    assert all(set(_outcomes(configured, p)) == {"completed"} for p in ("app", "db", "batch"))
    assert _cg(configured, db, "memory.stat.pgmajfault") == 0
    assert _cg(configured, db, "memory.events.low") == 0
    unprotected = r["service-only-MemoryLow"]
    assert _cg(unprotected, db, "memory.stat.pgmajfault") > 0
    no_writeback = r["ZSwapWriteback=no"]
    assert "time_limit" in _outcomes(no_writeback, "app")
    assert _cg(no_writeback, app, "memory.stat.zswpwb") == 0
    assert _cg(no_writeback, app, "memory.events.high") > 0
