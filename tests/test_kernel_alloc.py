"""kernel_alloc phases (docs/model/kernel_alloc.md) from the scenario to the core, the labs'
refusal, and seed 004's scenario (scenarios/seeds/vitaly-user-switch.toml) end to end."""

from __future__ import annotations

from typing import Any

import pytest

import reclaimlab
from conftest import MINIMAL, ROOT
from lab.test_lab_probe import V1_HOST
from reclaimlab.errors import ScenarioError
from reclaimlab.lab.probe import check
from reclaimlab.report import report
from reclaimlab.scenario import load

SEED = ROOT / "scenarios" / "seeds" / "vitaly-user-switch.toml"

SLAB = '[[processes.phases]]\nname = "slab"\nkind = "kernel_alloc"\ncount = 64\norder = 3\nfallback_order = 0\n'


def test_lowered_and_refused_by_the_host_lab() -> None:
    s = load(MINIMAL + SLAB)
    config = reclaimlab.lower(s)
    phase = config["processes"][0]["phases"][-1]
    assert phase == {
        "name": "slab",
        "phase": {"kind": "kernel_alloc", "count": 64, "order": 3, "fallback_order": 0, "migratetype": "unmovable"},
    }
    problems = [p.render("s.toml") for p in check(config, V1_HOST)]
    assert any("kernel_alloc phases run in the simulator only" in p and "processes[0].phases" in p for p in problems), problems


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (SLAB.replace("fallback_order = 0", "fallback_order = 3"), "fallback_order must be below order (3), got 3"),
        (SLAB.replace("order = 3\n", "order = 11\n"), "order"),
        (SLAB.replace("count = 64", "count = 0"), "count"),
        (SLAB + 'migratetype = "movable"\n', "migratetype"),
    ],
)
def test_bad_kernel_alloc_is_named(text: str, message: str) -> None:
    with pytest.raises(ScenarioError) as e:
        load(MINIMAL + text)
    rendered = [p.render("s.toml") for p in e.value.problems]
    assert any("processes[0].phases" in r and message in r for r in rendered), rendered


@pytest.mark.native
def test_seed_004_runs_and_its_report_is_deterministic(real_core: Any) -> None:
    s = load(SEED)
    assert s.compare is not None and [c.name for c in s.compare.configs] == [
        "vanilla",
        "SLUB fallback",
        "zbud",
        "SLUB fallback, no deferral",
    ]
    r = report(s)
    assert r.to_markdown() == report(s).to_markdown()
    sim = r.simulated
    # Every configuration ran to the end and its user switches stalled in allocation.
    for c in r.configs:
        assert sim["latency:user*.alloc_stall.mean_s"][c] > 0, c
        assert sim["latency:user*.alloc_stall.max_s"][c] >= sim["latency:user*.alloc_stall.mean_s"][c]
    # The mechanism the switches select: without SLUB's 4.4 change the slabs compact; with it
    # they fall back to order 0 instead.
    assert sim["vmstat.compact_stall"]["vanilla"] > sim["vmstat.compact_stall"]["SLUB fallback"]
    assert sim["slub.order_fallback"]["SLUB fallback"] > sim["slub.order_fallback"]["vanilla"]
