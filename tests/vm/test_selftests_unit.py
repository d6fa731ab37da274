"""The selftest runner's pieces that need no guest: TAP parsing, the source package, the channel."""

from __future__ import annotations

from pathlib import Path

import pytest

from reclaimlab.vm import selftests, tap
from reclaimlab.vm.cache import InstalledKernel, VmUnavailable
from reclaimlab.vm.selftest_run import SelftestChannel

NAMES = ("test_a", "test_b", "test_c", "test_d")


def _lines(*texts: str, step: float = 1.0) -> list[tuple[float, str]]:
    return [(10.0 + i * step, t) for i, t in enumerate(texts)]


def test_tap_verdicts_and_directives() -> None:
    lines = _lines("# preparing", "ok 1 test_a", "ok 2 # SKIP test_b", "boom", "not ok 3 test_c", "ok 4 # XFAIL test_d")
    v = tap.parse(lines, NAMES, start=10.0)
    assert [(x.number, x.name, x.verdict) for x in v] == [
        (1, "test_a", "pass"),
        (2, "test_b", "skip"),
        (3, "test_c", "fail"),
        (4, "test_d", "xfail"),
    ]
    assert v[0].output == ["# preparing"] and v[2].output == ["boom"]
    assert v[0].seconds == 1.0 and v[2].seconds == 2.0


def test_tap_duplicate_result_lines_count_once() -> None:
    # a forked child flushing its parent's buffered "ok 1" a second time
    v = tap.parse(_lines("ok 1 test_a", "ok 1 test_a", "not ok 2 test_b"), NAMES[:2])
    assert [x.verdict for x in v] == ["pass", "fail"]


def test_tap_timeout_and_not_run() -> None:
    v = tap.parse(_lines("ok 1 test_a", "# still reclaiming"), NAMES, timed_out=2, exit_status=137)
    assert [x.verdict for x in v] == ["pass", "timeout", "not-run", "not-run"]
    assert v[1].output == ["# still reclaiming"]
    assert "killed in test 2 (test_b)" in v[2].reason


def test_tap_crash_before_the_end() -> None:
    v = tap.parse(_lines("ok 1 test_a"), NAMES[:2], exit_status=139)
    assert v[1].verdict == "not-run" and "exit status 139" in v[1].reason


def test_tap_whole_binary_skipped_and_bail_out() -> None:
    v = tap.parse(_lines("1..0 # SKIP zswap isn't configured"), NAMES[:2])
    assert [(x.verdict, x.reason) for x in v] == [("skip", "zswap isn't configured")] * 2
    v = tap.parse(_lines("ok 1 test_a", "Bail out! no cgroup"), NAMES[:2])
    assert [x.verdict for x in v] == ["pass", "error"]


def test_channel_keeps_output_lines_and_stored_pages() -> None:
    ch = SelftestChannel()
    ch.feed(b"@@EV start 120 test_zswap\n@@T 130 ok 1 test_zswap_usage\n@@Z 131 42\n@@T 140 not ok 2 x y\n@@DMESG\n")
    ch.feed(b"[ 1.0] oom\n@@END\n@@EV bye\n")
    assert ch.tap == [(1.3, "ok 1 test_zswap_usage"), (1.4, "not ok 2 x y")]
    assert ch.stored_pages == [(1.31, 42)]
    assert ch.dmesg == "[ 1.0] oom" and ch.bye and ch.event("start") == ["120", "test_zswap"]


def _kernel(version: str) -> InstalledKernel:
    return InstalledKernel("debian-6.12", "linux-image-x", version, "r", Path("/v"), (), {})


def test_source_package_matches_the_image_version() -> None:
    assert selftests.source_package(_kernel("6.12.117-1~deb12u1")) == ("linux-source-6.12", "6.12.117-1~deb12u1")
    assert selftests.source_package(_kernel("6.1.192-2")) == ("linux-source-6.1", "6.1.192-2")
    with pytest.raises(VmUnavailable, match="kernel series"):
        selftests.source_package(_kernel("unknown"))


def test_test_names_from_the_tests_array(tmp_path: Path) -> None:
    # the layout of the selftests' tests[] (our own text, not the kernel's)
    src = tmp_path / "t.c"
    src.write_text("int f;\n#define T(x) { x, #x }\nstruct t tests[] = {\n\tT(test_one),\n\tT(test_two),\n};\n#undef T\n")
    assert selftests.test_names(src) == ["test_one", "test_two"]
    src.write_text("int main(void) { return 0; }\n")
    with pytest.raises(VmUnavailable, match="no tests"):
        selftests.test_names(src)
