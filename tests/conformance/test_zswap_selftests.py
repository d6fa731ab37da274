"""The kernel's tools/testing/selftests/cgroup/test_zswap.c (as of v6.12), run in the
simulator: one scenario per selftest in this directory, and the selftest's own assertion on
the same counters. Each test says what the selftest does and asserts, in our words; where the
scenario format cannot express the selftest's setup exactly, the scenario's header and
docs/conformance.md say what was adapted and why.
"""

from __future__ import annotations

from typing import Any

import pytest
from selftest_sim import PAGE_SIZE, MiB, cg, outcomes, run

pytestmark = pytest.mark.native


@pytest.fixture(autouse=True)
def _needs_core(real_core: Any) -> None:
    """The tests run the real simulator (skipped when the native module is not built)."""


def test_zswap_usage__v6_12() -> None:
    # memory.max = 1M, 4 MiB written: the cgroup's zswpout must rise over the run.
    r = run("zswap_usage__v6_12")
    assert outcomes(r, "allocate_bytes") == ["completed"]
    before = 0  # a new cgroup's memory.stat starts at 0; the selftest reads it first
    assert cg(r, "no_shrink_test", "memory.stat.zswpout") > before


def test_swapin_nozswap__v6_12() -> None:
    # memory.max = 8M, memory.zswap.max = 0, 32 MiB written and read back: at least 24 MiB
    # must have been swapped out (memory.swap.peak) and none of it into zswap (zswpout).
    r = run("swapin_nozswap__v6_12")
    assert outcomes(r, "allocate_and_read_bytes") == ["completed", "completed"]
    assert cg(r, "no_zswap_test", "memory.swap.peak") >= 24 * MiB
    assert cg(r, "no_zswap_test", "memory.stat.zswpout") == 0


def test_zswapin__v6_12() -> None:
    # memory.max = 8M, zswap.max = max, 32 MiB written and read back: at least 24 MiB must
    # come back from zswap (memory.stat zswpin in pages).
    r = run("zswapin__v6_12")
    assert outcomes(r, "allocate_and_read_bytes") == ["completed", "completed"]
    assert cg(r, "zswapin_test", "memory.stat.zswpin") >= 24 * MiB // PAGE_SIZE


PARENT = "zswap_writeback_test"
CHILD = f"{PARENT}/zswap_writeback_test_child"


def _attempt_writeback(group: str, parent_wb: int) -> tuple[int, dict[str, dict[str, Any]]]:
    """test_zswap_writeback_one: attempt_writeback run in `group` (the parent, or the child with
    writeback 1 under it) with the parent's memory.zswap.writeback = parent_wb. Returns memory.stat
    zswpwb of the group and the phase records by name."""
    r = run(
        "zswap_writeback__v6_12",
        [
            f"processes.attempt_writeback.cgroup={group}",
            f'cgroups.groups.{PARENT}."memory.zswap.writeback"={parent_wb}',
        ],
    )
    phases = {p["phase"]: p for p in r.phase_records if p["process"] == "attempt_writeback"}
    assert [p["outcome"] for p in phases.values()] == ["completed"] * 5
    # attempt_writeback's set-up checks: the first memory.reclaim of 4 MiB succeeds, and zswap
    # holds material usage whose half is written to memory.zswap.max
    assert phases["reclaim"].get("error") is None, "Failed to reclaim all of the requested memory"
    assert int(phases["set_zswap_max"]["written"]) > 0
    return cg(r, group, "memory.stat.zswpwb"), phases


@pytest.mark.xfail(
    strict=True,
    reason="the second memory.reclaim ends in -EAGAIN: after its second pass the ~517 pages "
    "it wrote to disk are active and under writeback, and the next 15 passes find nothing to "
    "scan (the inactive list is empty; inactive_is_low reads statistics flushed before the "
    "pages moved) and cost only shrink_node_ns each (730 ns, measured on this host), so the "
    "retries run out after 0.19 ms, before the writes complete and rotate the pages back; it "
    "passes from about 2.8 us per pass. The 6.12 guest (TCG, a "
    "slow CPU) passes. See docs/conformance.md",
)
@pytest.mark.parametrize("group", [PARENT, CHILD], ids=["parent", "child"])
def test_zswap_writeback_enabled__v6_12(group: str) -> None:
    # writeback = 1 (the child: 1 under a parent with 1): the second memory.reclaim succeeds,
    # and zswpwb > 0.
    zswpwb, phases = _attempt_writeback(group, parent_wb=1)
    assert zswpwb > 0
    assert phases["reclaim_again"].get("error") is None


@pytest.mark.parametrize("group", [PARENT, CHILD], ids=["parent", "child"])
def test_zswap_writeback_disabled__v6_12(group: str) -> None:
    # writeback = 0 on the parent (the child's own 1 does not override it): the second
    # memory.reclaim fails with -EAGAIN and zswpwb == 0.
    zswpwb, phases = _attempt_writeback(group, parent_wb=0)
    assert phases["reclaim_again"].get("error") == "EAGAIN"
    assert zswpwb == 0


def test_no_invasive_cgroup_shrink__v6_12() -> None:
    # Two 1M groups; wb_group also has zswap.max = 10K. The control group's 10 MiB goes to
    # zswap first, then wb_group writes 10 MiB: only wb_group's entries may be written back.
    r = run("no_invasive_cgroup_shrink__v6_12")
    ctl, wb = "per_memcg_wb_test2", "per_memcg_wb_test1"
    # the order the selftest has: the control allocation is done before wb_group starts
    fill = {(p["process"], p["phase"]): p for p in r.phase_records}
    assert fill[("control", "fill0")]["elapsed_s"] < 5.0  # the wb process sleeps 5 s first
    assert outcomes(r, "control") == ["completed", "completed"]
    assert outcomes(r, "allocate_bytes") == ["completed", "completed"]
    # the selftest's set-up check (read before wb_group runs; the control group's entries can
    # only shrink by writeback, which the last assertion excludes)
    assert cg(r, ctl, "memory.stat.zswapped") >= 1
    assert cg(r, wb, "memory.stat.zswpwb") > 0
    assert cg(r, ctl, "memory.stat.zswpwb") == 0


def test_no_kmem_bypass__v6_12() -> None:
    # With 1 GiB: once debugfs stored_pages exceeds totalram / 5 / 4096, at most a quarter of
    # the stored bytes may be missing from the child cgroup's memory.stat zswapped.
    totalram = 1 << 30
    r = run("no_kmem_bypass__v6_12")
    assert outcomes(r, "no_kmem_bypass_child") == ["completed", "completed"]
    stored_pages = r.counters["zswap.stored_pages"]
    assert stored_pages > totalram // 5 // PAGE_SIZE, "kswapd did not push enough to zswap"
    zswapped = cg(r, "kmem_bypass_test", "memory.stat.zswapped")
    assert stored_pages * PAGE_SIZE - zswapped < stored_pages * PAGE_SIZE / 4
