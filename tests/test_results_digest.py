"""tools/results_digest.py: an outcome change is named, not only counted as a difference."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "results_digest.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("results_digest", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _result(outcome: str, pswpout: int) -> dict[str, Any]:
    return {
        "counters": {"vmstat.pswpout": pswpout},
        "phases": [
            {"process": "w", "phase": "fill0", "outcome": "completed", "elapsed_s": 1.0},
            {"process": "w", "phase": "access", "outcome": outcome, "elapsed_s": 2.0},
        ],
    }


def test_compare_names_the_phases_whose_outcome_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tool = _tool()
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "s.json").write_text(json.dumps({"configs": [{"result": _result("completed", 10)}]}))
    (b / "s.json").write_text(json.dumps({"configs": [{"result": _result("oom_killed", 12)}]}))
    assert tool.compare(a, b) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == ["DIFF s.json", "  OUTCOME /configs[0]/result/phases[1] w/access: completed -> oom_killed", "1 differ"]
    # numbers moved, outcomes the same: no OUTCOME line
    (b / "s.json").write_text(json.dumps({"configs": [{"result": _result("completed", 12)}]}))
    assert tool.compare(a, b) == 1
    assert capsys.readouterr().out.splitlines() == ["DIFF s.json", "1 differ"]
