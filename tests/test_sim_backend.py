"""The sim backend and RunResult, against the test stand-in for the native module, and (when
it is built) the real one."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pytest

import fakecore
import reclaimlab
from conftest import MINIMAL, THREE_REGIONS
from reclaimlab import RunResult, ScenarioError, load
from reclaimlab.backends import sim

TINY = MINIMAL.replace(
    '[[processes.phases]]\nkind = "fill"\nregion = "a"',
    """[[processes.phases]]
kind = "fill"
region = "a"
[[processes.phases]]
name = "read"
kind = "random"
region = "a"
count = 1000
[[processes.phases]]
kind = "exit"
""",
)


def test_run_returns_counters_and_phases(fake_core: Any) -> None:
    r = reclaimlab.run(THREE_REGIONS)
    assert r.backend == "sim"
    assert r.scenario == "three-regions"
    # The stand-in core: what the backend does with a core's output, not what the model says.
    assert r.counters and list(r.counters) == sorted(r.counters)
    assert list(r.phases.columns) == ["process", "phase", "elapsed_s", "accesses", "accesses_per_s", "outcome", "minflt", "majflt"]
    assert set(r.phases["outcome"]) == {"completed"}
    assert list(r.phases["phase"]) == ["fill0", "fill1", "fill2", "access"]
    assert r.phases["accesses"].dtype == "int64"
    assert r.phases["elapsed_s"].dtype == "float64"
    access = r.phases[r.phases["phase"] == "access"].iloc[0]
    assert access["elapsed_s"] == pytest.approx(20.0)
    assert access["accesses_per_s"] == pytest.approx(access["accesses"] / 20.0)
    (simulation,) = fakecore.Simulation.instances
    assert simulation.steps == 5  # 1M events in chunks of 200k
    assert simulation.config == r.config


def test_json_shape(fake_core: Any) -> None:
    r = reclaimlab.run(THREE_REGIONS, overrides=["kernel.zswap.enabled=false"])
    d = json.loads(r.to_json())
    assert sorted(d) == ["backend", "config", "counters", "phases", "provenance", "scenario", "schema_version", "stats"]
    assert d["schema_version"] == 1
    assert d["backend"] == "sim"
    assert d["scenario"] == "three-regions"
    assert d["config"] == reclaimlab.lower(load(THREE_REGIONS, ["kernel.zswap.enabled=false"]))
    assert sorted(d["phases"][0]) == ["accesses", "accesses_per_s", "elapsed_s", "outcome", "phase", "process"]
    prov = d["provenance"]
    assert sorted(prov) == [
        "kernel_preset",
        "native_version",
        "overrides",
        "profile",
        "python",
        "reclaimlab_version",
        "scenario_path",
        "scenario_sha256",
        "seed",
    ]
    assert prov["overrides"] == ["kernel.zswap.enabled=false"]
    assert prov["seed"] == 42
    assert prov["kernel_preset"] == "6.18"
    assert prov["scenario_path"] == str(THREE_REGIONS)
    assert prov["native_version"] == "0.0.0-fake"
    assert len(prov["scenario_sha256"]) == 64
    assert prov["profile"] is None  # the fake_core fixture runs without a machine profile


def test_json_is_deterministic(fake_core: Any) -> None:
    a = reclaimlab.run(THREE_REGIONS).to_json()
    b = reclaimlab.run(load(THREE_REGIONS)).to_json()
    assert a == b
    assert a.endswith("\n")
    # Sorted keys at every level.
    assert a == json.dumps(json.loads(a), sort_keys=True, indent=2) + "\n"


def test_result_round_trips(fake_core: Any) -> None:
    r = reclaimlab.run(THREE_REGIONS)
    again = RunResult.from_json(r.to_json())
    assert again.to_json() == r.to_json()
    pd.testing.assert_frame_equal(again.phases, r.phases)


def test_run_accepts_scenario_with_overrides(fake_core: Any) -> None:
    s = load(THREE_REGIONS)
    r = reclaimlab.run(s, overrides=["seed=3"])
    assert r.config["seed"] == 3
    assert r.provenance["overrides"] == ["seed=3"]


def test_core_rejection_is_a_scenario_error(fake_core: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    s = load(THREE_REGIONS)

    def reject(_: str) -> None:
        raise ValueError("kernel.switches.x: unknown switch")

    monkeypatch.setattr(fake_core, "Simulation", reject)
    with pytest.raises(ScenarioError, match=r"three-regions.toml: kernel.switches.x: the simulator rejected the value: unknown switch"):
        sim.run(s)


def test_progress_without_a_terminal_is_quiet(fake_core: Any, capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[float] = []
    reclaimlab.backends.sim.run(load(TINY), progress=True, on_progress=seen.append)
    assert seen == [0.2, 0.4, 0.6, 0.8]
    assert capsys.readouterr().err == ""


def test_native_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "reclaimlab._core", None)  # import fails
    monkeypatch.delattr(reclaimlab, "_core", raising=False)
    with pytest.raises(reclaimlab.NativeUnavailable, match="maturin develop"):
        reclaimlab.run(TINY)


# --- the real simulator ----------------------------------------------------------------------


@pytest.mark.native
def test_native_tiny_scenario_is_deterministic(real_core: Any) -> None:
    a = reclaimlab.run(TINY)
    b = reclaimlab.run(TINY)
    assert a.to_json() == b.to_json()
    assert [p["phase"] for p in a.phase_records] == ["fill0", "read", "exit2"]
    read = a.phase_records[1]
    assert read["accesses"] == 1000
    assert all(isinstance(v, int) for v in a.counters.values())
    assert "vmstat.pgfault" in a.counters
    # Per-phase faults as getrusage counts them: one process, so they add up to vmstat's.
    assert sum(p["minflt"] + p["majflt"] for p in a.phase_records) == a.counters["vmstat.pgfault"]
    assert sum(p["majflt"] for p in a.phase_records) == a.counters["vmstat.pgmajfault"]


@pytest.mark.native
def test_native_capabilities_match_the_loader(real_core: Any) -> None:
    caps = reclaimlab.native.capabilities()
    assert set(caps.codecs) == {"lzo", "lzo-rle", "lz4", "zstd", "deflate"}
    assert caps.version_ok("6.18")
    assert caps.default_costs and "access_ns" in caps.default_costs
    load(THREE_REGIONS)  # validates against the real presets and codecs


@pytest.mark.native
def test_native_seed_changes_results_only_through_randomness(real_core: Any) -> None:
    a = reclaimlab.run(TINY, overrides=["seed=1"])
    b = reclaimlab.run(TINY, overrides=["seed=2"])
    assert a.config["seed"] != b.config["seed"]
    assert a.phase_records[1]["accesses"] == b.phase_records[1]["accesses"] == 1000


def test_progress_lines_without_a_terminal_for_long_runs(
    fake_core: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sim, "LOG_EVERY_S", 0.0)
    sim.run(load(TINY), progress=True, label="tiny")
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("tiny: 20% (")
    assert err[-1].startswith("tiny: 100% (")


@pytest.mark.native
def test_provenance_names_the_machine_profile_and_its_hash(real_core: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib

    from reclaimlab.profile import PROFILE_ENV, default_profile_path

    monkeypatch.delenv(PROFILE_ENV, raising=False)
    prov = reclaimlab.run(TINY).provenance
    path = default_profile_path()
    assert path.parent.name == "profiles" and path.parent.parent.name == "reclaimlab"  # package data
    assert prov["profile"] == {"name": "polyglot-vm", "file": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    monkeypatch.setenv(PROFILE_ENV, "none")
    assert reclaimlab.run(TINY).provenance["profile"] is None
