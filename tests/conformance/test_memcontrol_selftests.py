"""The kernel's tools/testing/selftests/cgroup/test_memcontrol.c (as of v6.12), run in the
simulator, for the tests whose setup the scenario format can express: anonymous memory in a
v2 cgroup under memory.high or memory.max, page cache, memory.reclaim. memory.min/low,
memory.swap.max, memory.peak, memory.oom.group, sockets and inotify are not modelled here; the
table in docs/conformance.md lists every selftest and what each lacks.
"""

from __future__ import annotations

from typing import Any

import pytest
from selftest_sim import MiB, cg, outcomes, run, values_close

pytestmark = pytest.mark.native

G = "memcg_test"


@pytest.fixture(autouse=True)
def _needs_core(real_core: Any) -> None:
    """The tests run the real simulator (skipped when the native module is not built)."""


def test_memcg_current_peak__v6_12() -> None:
    # The anonymous half of the selftest: 50 MiB written in a cgroup without limits; while
    # the memory is held, memory.current >= 50 MiB and within 3% of it, and memory.stat anon
    # within 3% of memory.current. (The snapshot is taken before the process exits.)
    r = run("memcg_current_peak__v6_12")
    assert outcomes(r, "alloc_anon_50M_check") == ["completed"]
    size = 50 * MiB
    current = cg(r, G, "memory.current")
    assert current >= size
    assert values_close(size, current, 3)
    assert values_close(cg(r, G, "memory.stat.anon"), current, 3)


def test_memcg_high__v6_12() -> None:
    # memory.high = 30M, no swap, 31 MiB written (v6.12's size): the allocation completes
    # (memory.high throttles and never kills) and memory.events high > 0.
    r = run("memcg_high__v6_12")
    assert outcomes(r, "alloc_anon") == ["completed"]
    assert cg(r, G, "memory.events.high") > 0


def test_memcg_max__v6_12() -> None:
    # memory.max = 30M, no swap, 100 MiB written: the OOM killer kills the child, and
    # memory.events max > 0.
    r = run("memcg_max__v6_12")
    assert outcomes(r, "alloc_anon") == ["oom_killed"]
    assert cg(r, G, "memory.events.max") > 0


def test_memcg_oom_events__v6_12() -> None:
    # The whole assertion: memory.events oom == 1 and oom_kill == 1.
    r = run("memcg_oom_events__v6_12")
    assert outcomes(r, "alloc_anon") == ["oom_killed"]
    assert cg(r, G, "memory.events.oom") == 1
    assert cg(r, G, "memory.events.oom_kill") == 1


def test_memcg_reclaim__v6_12() -> None:
    # 50 MiB of page cache and 50 MiB of anon in memcg_test, swap on: memory.current within
    # 10% of 100 MiB; then memory.reclaim of memory.current - 30M succeeds and leaves
    # memory.current below 30M or within 3% of it (reclaim_until's checks; a second write is
    # never needed, so the selftest's retries on -EAGAIN do not come into play).
    r = run("memcg_reclaim__v6_12")
    assert all(p["outcome"] == "completed" for p in r.phase_records)
    (rec,) = [p for p in r.phase_records if p["phase"] == "reclaim"]
    goal = 30 * MiB
    assert values_close(int(rec["written"]) + goal, 100 * MiB, 10), "failed to allocate 100M for memcg reclaim test"
    assert rec.get("error") is None
    current = cg(r, G, "memory.current")
    assert current < goal or values_close(current, goal, 3)
