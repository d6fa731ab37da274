"""The kernel's own test_zswap in a Debian 6.12 guest (docs/conformance.md).

Skipped, with the reason, where the VM lab (`make vmlab`) or the built selftests
(`make vmlab-selftests`) are missing. One guest, about 35 s under TCG on this project's machines.
"""

from __future__ import annotations

import time

import pytest

from reclaimlab.vm.cache import VmUnavailable, missing_tools
from reclaimlab.vm.selftests import installed_selftests


def _skip_reason() -> str | None:
    missing = missing_tools()
    if missing:
        return f"the VM lab is not installed (missing {', '.join(missing)}): run `make vmlab`"
    try:
        s = installed_selftests("debian-6.12")
    except VmUnavailable as e:
        return str(e)
    if "test_zswap" not in {b.name for b in s.binaries}:
        return "test_zswap was not built for debian-6.12"
    return None


_reason = _skip_reason()
pytestmark = [pytest.mark.skipif(_reason is not None, reason=_reason or "")]


def test_zswap_selftest_in_the_6_12_guest() -> None:
    from reclaimlab.vm import selftest_run

    t0 = time.monotonic()
    doc = selftest_run.run("debian-6.12", ["test_zswap"], test_timeout_s=120, on_note=None)
    wall = time.monotonic() - t0
    run = doc["binaries"]["test_zswap"]
    tests = {t["name"]: t for t in run["tests"]}
    # every test of v6.12's tests[] got a verdict from the binary's own TAP line
    assert list(tests) == doc["source"]["binaries"]["test_zswap"]["tests"]
    assert run["timed_out_in_test"] is None and all(t["verdict"] in ("pass", "fail", "skip") for t in tests.values())
    # the kernel's own assertions on 6.12: pages reach zswap under memory.max 1M; none under
    # memory.zswap.max 0; zswapin brings back 24 MiB
    for name in ("test_zswap_usage", "test_swapin_nozswap", "test_zswapin"):
        assert tests[name]["verdict"] == "pass", tests[name]
    assert doc["kernel"]["release"].startswith("6.12.") and doc["guest"]["zswap_params"]["enabled"] == "Y"
    assert "memory_recursiveprot" in (doc["guest"]["cgroup2_mount"] or "")
    assert wall < 150
