"""docs/scenario.md's knob table is the core's declarations (regenerate: make docs-knobs)."""

from __future__ import annotations

from pathlib import Path

from reclaimlab import knob_doc, native

DOC = Path(__file__).resolve().parents[1] / "docs" / "scenario.md"


def test_scenario_md_knob_table_is_up_to_date() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert knob_doc.update(text) == text, "docs/scenario.md's knob table is stale: run `make docs-knobs`"


def test_every_knob_has_a_row_with_its_file_and_default() -> None:
    rows = knob_doc.table().splitlines()[2:]
    assert len(rows) == len(native.knobs())
    pc = next(r for r in rows if r.startswith("| `vm.page-cluster` |"))
    assert "`/proc/sys/vm/page-cluster`" in pc and "| `3` |" in pc
    mfk = next(r for r in rows if r.startswith("| `vm.min_free_kbytes` |"))
    assert "| computed |" in mfk
