"""Every bundled scenario, and each of its [compare] configurations, under the debug build's
checks: overflow panics, the block-plug assertion and the page-conservation check every 4096
events (crates/reclaimlab-core/src/engine.rs). The release module never runs these, so a model
bug that only they catch (like the global zswap LRU's miscounted conservation) would otherwise
go unnoticed. The lowered configs come from the real loader and lowering; the core runs as the
debug `simulate` example (cargo's dev profile keeps debug assertions)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from reclaimlab.compare import expand
from reclaimlab.lower import lower
from reclaimlab.profile import active_profile
from reclaimlab.scenario import Scenario, load

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "scenarios").rglob("*.toml"))
#: A bundled run longer than this (virtual time) is cut here: the checks run on what it did.
MAX_TIME_NS = 60 * 10**9

pytestmark = pytest.mark.native


@pytest.fixture(scope="module")
def simulate() -> Path:
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo is not installed")
    subprocess.run([cargo, "build", "--quiet", "-p", "reclaimlab-core", "--example", "simulate"], cwd=ROOT, check=True, timeout=900)
    return ROOT / "target" / "debug" / "examples" / "simulate"


def _configs(scenario: Scenario) -> list[tuple[str, Scenario]]:
    if scenario.compare is None or not scenario.compare.configs:
        return [("", scenario)]
    return [(cfg.name, sub) for cfg, sub in expand(scenario)]


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: str(p.relative_to(ROOT / "scenarios")))
def test_bundled_scenario_runs_clean_under_debug_checks(simulate: Path, path: Path, tmp_path: Path) -> None:
    for name, scenario in _configs(load(path)):
        config = lower(scenario, active_profile())
        if config.get("max_time_ns") is None or config["max_time_ns"] > MAX_TIME_NS:
            config["max_time_ns"] = MAX_TIME_NS
        lowered = tmp_path / "config.json"
        lowered.write_text(json.dumps(config, sort_keys=True), encoding="utf-8")
        r = subprocess.run([simulate, lowered], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{path.name} [{name}] failed under debug checks:\n{r.stderr[-3000:]}"
        assert "events" in r.stdout.splitlines()[-1]


#: Bundled scenarios with a random phase or a sequential pass: what analytic mode
#: (engine.accesses) draws in bulk or passes over in runs.
ANALYTIC_SCENARIOS = [p for p in SCENARIOS if any(f'kind = "{k}"' in p.read_text(encoding="utf-8") for k in ("random", "sequential"))]


@pytest.mark.parametrize("path", ANALYTIC_SCENARIOS, ids=lambda p: str(p.relative_to(ROOT / "scenarios")))
def test_bundled_scenario_runs_clean_in_analytic_mode(simulate: Path, path: Path, tmp_path: Path) -> None:
    """The same checks with engine.accesses = "analytic" (docs/model/analytic.md): the
    conservation check includes that every tracked page is counted in its class."""
    for name, scenario in _configs(load(path)):
        config = lower(scenario, active_profile())
        config["engine"] = {"accesses": "analytic"}
        if config.get("max_time_ns") is None or config["max_time_ns"] > MAX_TIME_NS:
            config["max_time_ns"] = MAX_TIME_NS
        lowered = tmp_path / "config.json"
        lowered.write_text(json.dumps(config, sort_keys=True), encoding="utf-8")
        r = subprocess.run([simulate, lowered], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{path.name} [{name}] failed under debug checks in analytic mode:\n{r.stderr[-3000:]}"
        assert "events" in r.stdout.splitlines()[-1]
