"""`reclaimlab lab codec-check`: the comparison on synthetic numbers (no root), and one run on
this host's zram (lab) that must leave the machine as it found it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.labutil import REPO
from reclaimlab import codec_check as cc
from reclaimlab.lab.errors import LabError
from reclaimlab.lab.journal import LabLock, pending, restore
from reclaimlab.lab.probe import probe
from reclaimlab.lab.state import machine_state

# ---------------------------------------------------------------------------------------------
# The comparison, on synthetic numbers
# ---------------------------------------------------------------------------------------------


def test_same_filled_pages() -> None:
    assert cc.is_same_filled(bytes(4096))
    assert cc.is_same_filled(b"\x5a" * 4096)
    assert cc.is_same_filled(b"\x01\x02\x03\x04\x05\x06\x07\x08" * 512)  # words, not bytes
    # A 4-byte pattern repeats as an 8-byte word as well: same-filled.
    assert cc.is_same_filled(b"\x01\x02\x03\x04" * 1024)
    page = bytearray(4096)
    page[4095] = 1
    assert not cc.is_same_filled(bytes(page))


def test_zram_storage_rules() -> None:
    same = b"\x5a" * 4096
    other = bytes(range(256)) * 16
    assert cc.stored_size(same, 44) == cc.Stored(0, same=True)  # the compressed length is ignored
    assert cc.stored_size(other, 1000) == cc.Stored(1000)
    assert cc.stored_size(other, 3624) == cc.Stored(3624)
    assert cc.stored_size(other, 3625) == cc.Stored(4096, huge=True)  # >= huge_class_size
    assert cc.stored_size(other, 4116) == cc.Stored(4096, huge=True)  # incompressible: above a page
    assert cc.stored_size(other, 3000, huge_class_size=2048) == cc.Stored(4096, huge=True)


def test_mm_stat_deltas() -> None:
    before = cc.parse_mm_stat("8192 1500 65536 0 65536 1 0 2 2")
    assert before["compr_data_size"] == 1500 and before["huge_pages_since"] == 2
    assert cc.page_delta(before, cc.parse_mm_stat("12288 2700 65536 0 65536 1 0 2 2")) == cc.Stored(1200)
    assert cc.page_delta(before, cc.parse_mm_stat("12288 1500 65536 0 65536 2 0 2 2")) == cc.Stored(0, same=True)
    assert cc.page_delta(before, cc.parse_mm_stat("12288 5596 69632 0 69632 1 0 3 3")) == cc.Stored(4096, huge=True)
    # Nothing stored (or two pages): the page's size cannot be read off the deltas.
    with pytest.raises(LabError, match="orig_data_size grew by 0"):
        cc.page_delta(before, before)
    # An older kernel's shorter mm_stat still parses.
    assert cc.parse_mm_stat("4096 100 8192 0 8192 0 0") == {
        "orig_data_size": 4096,
        "compr_data_size": 100,
        "mem_used_total": 8192,
        "mem_limit": 0,
        "mem_used_max": 8192,
        "same_pages": 0,
        "pages_compacted": 0,
    }


def test_compare_class_statistics() -> None:
    kernel = [cc.Stored(1000), cc.Stored(1010), cc.Stored(4096, huge=True), cc.Stored(0, same=True)]
    sim = [cc.Stored(1000), cc.Stored(1004), cc.Stored(3600), cc.Stored(0, same=True)]
    s = cc.compare_class("text", kernel, sim, sim_raw=[1000, 1004, 3600, 44])
    assert s.pages == 4
    assert s.identical == 2
    assert s.identical_share == 0.5
    assert s.mean_abs_diff == (0 + 6 + 496 + 0) / 4
    assert s.max_abs_diff == 496
    assert s.kernel_mean == (1000 + 1010 + 4096 + 0) / 4
    assert s.sim_mean == (1000 + 1004 + 3600 + 0) / 4
    assert (s.kernel_same_pages, s.sim_same_pages) == (1, 1)
    assert (s.kernel_huge_pages, s.sim_huge_pages) == (1, 0)
    assert s.sim_raw_mean == (1000 + 1004 + 3600 + 44) / 4
    assert s.kernel_sizes == [1000, 1010, 4096, 0] and s.sim_sizes == [1000, 1004, 3600, 0]
    with pytest.raises(ValueError, match="3 kernel pages against 4"):
        cc.compare_class("text", kernel[:3], sim)


def test_report_totals_and_json() -> None:
    a = cc.compare_class("zero", [cc.Stored(0, same=True)], [cc.Stored(0, same=True)])
    b = cc.compare_class("text", [cc.Stored(100), cc.Stored(200), cc.Stored(300)], [cc.Stored(100), cc.Stored(210), cc.Stored(300)])
    doc = cc.report({"lzo": [a, b]}, {"zstd": "not offered"}, seed=1, variants=3)
    assert doc["kind"] == "codec-check" and doc["seed"] == 1 and doc["skipped"] == {"zstd": "not offered"}
    lzo = doc["codecs"]["lzo"]
    assert list(lzo["classes"]) == ["zero", "text"]
    assert lzo["classes"]["text"]["identical"] == 2
    assert lzo["total"] == {"pages": 4, "identical": 3, "identical_share": 0.75, "mean_abs_diff": 10 / 4}
    json.dumps(doc, allow_nan=False)  # serialisable as is


def test_table_rows() -> None:
    a = cc.compare_class("text", [cc.Stored(100), cc.Stored(4096, huge=True)], [cc.Stored(100), cc.Stored(3000)])
    doc = cc.report({"lz4": [a]}, {}, devices={"lz4": "zram1"})
    title, header, rows = cc.table(doc, "lz4")
    assert "lz4" in title and "zram1" in title
    assert len(header) == len(rows[0]) == 8
    assert rows[0][:4] == ["text", "2", "1 (50.0%)", "548.00"]
    assert rows[0][6:] == ["0/0", "1/0"]
    assert rows[-1][0] == "all" and rows[-1][2] == "1 (50.0%)"


# ---------------------------------------------------------------------------------------------
# On this host's zram
# ---------------------------------------------------------------------------------------------


def _zram_skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "codec-check needs root"
    try:
        from reclaimlab import _core  # noqa: F401
    except ImportError:
        return "the native module reclaimlab._core is not built (make build)"
    p = probe()
    if not p.zram_loaded:
        return "this host has no zram loaded"
    if not p.zram_hot_add and not any(z.disksize == 0 and z.initstate == 0 for z in p.zram_devices):
        return "no unused zram device and no zram-control/hot_add"
    if p.zram_comp_algorithms and "lzo" not in p.zram_comp_algorithms:
        return "zram on this kernel does not offer lzo"
    return None


@pytest.fixture
def zram_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, dict[str, object]]]:
    reason = _zram_skip_reason()
    if reason:
        pytest.skip(reason)
    state = tmp_path / "state"
    monkeypatch.setenv("RECLAIMLAB_STATE_DIR", str(state))
    before = machine_state(state)
    try:
        yield state, before
    finally:
        if pending(state) is not None:  # a test that failed half-way
            with LabLock(state).acquire("test teardown"):
                restore(state)


@pytest.mark.lab
def test_codec_check_lzo_on_zram(zram_lab: tuple[Path, dict[str, object]]) -> None:
    state, before = zram_lab
    doc = cc.run(["lzo", "no-such-codec"], variants=4)
    assert machine_state(state) == before
    assert pending(state) is None
    assert set(doc["codecs"]) == {"lzo"}
    assert "no-such-codec" in doc["skipped"]
    classes = doc["codecs"]["lzo"]["classes"]
    assert list(classes) == list(cc.CLASSES)
    for content, s in classes.items():
        assert s["pages"] == (1 if content in ("zero", "same:0x5a") else 4), content
        assert len(s["kernel_sizes"]) == s["pages"]
    # What zram must do whatever the codec: same-element pages take no pool bytes, random
    # pages are stored uncompressed.
    assert classes["zero"]["kernel_same_pages"] == 1 and classes["zero"]["kernel_sizes"] == [0]
    assert classes["same:0x5a"]["kernel_same_pages"] == 1
    assert classes["random"]["kernel_huge_pages"] == 4 and set(classes["random"]["kernel_sizes"]) == {4096}
    assert 0 < classes["text"]["kernel_mean"] < 4096


@pytest.mark.lab
def test_codec_check_cli(zram_lab: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    state, before = zram_lab
    out = tmp_path / "cc.json"
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    r = subprocess.run(
        [sys.executable, "-m", "reclaimlab", "lab", "codec-check", "--codecs", "lzo", "--variants", "2", "--json", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stderr
    assert "codec-check lzo" in r.stdout
    doc = json.loads(out.read_text())
    assert set(doc["codecs"]["lzo"]["classes"]) == set(cc.CLASSES)
    assert machine_state(state) == before
