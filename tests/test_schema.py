"""`reclaimlab schema`: the scenario format's JSON Schema accepts every bundled scenario and
rejects what the loader rejects for shape (unknown keys, a size without a unit it knows)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from reclaimlab.cli import app

ROOT = Path(__file__).resolve().parents[1]
# The bundled scenarios and the conformance scenarios (the latter use files and cgroup phases).
SCENARIOS = sorted([*(ROOT / "scenarios").rglob("*.toml"), *(ROOT / "tests/conformance").glob("*.toml")])


@pytest.fixture(scope="module")
def schema() -> dict[str, object]:
    r = CliRunner().invoke(app, ["schema"])
    assert r.exit_code == 0, r.output
    doc: dict[str, object] = json.loads(r.stdout)
    jsonschema.Draft202012Validator.check_schema(doc)
    return doc


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: str(p.relative_to(ROOT)))
def test_bundled_scenarios_are_valid(schema: dict[str, object], path: Path) -> None:
    jsonschema.validate(tomllib.loads(path.read_text(encoding="utf-8")), schema)


def test_schema_rejects_bad_shapes(schema: dict[str, object]) -> None:
    doc = tomllib.loads((ROOT / "scenarios/three-regions.toml").read_text(encoding="utf-8"))
    doc["bogus"] = 1
    with pytest.raises(jsonschema.ValidationError, match="bogus"):
        jsonschema.validate(doc, schema)
    doc.pop("bogus")
    doc["machine"]["memory"] = "1 gigabyte"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)
    doc["machine"]["memory"] = "host"
    jsonschema.validate(doc, schema)
