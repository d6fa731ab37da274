"""Sweeps: ranges in --vary, configurations in parallel processes, the result cache, Ray.

Parallel and cached results must be the serial results byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import THREE_REGIONS
from reclaimlab import sweep
from reclaimlab.backends import sim
from reclaimlab.cli import app
from reclaimlab.compare import compare, expand_range, parse_vary

# Four configurations of the bundled scenario that reclaim (swap and zswap, two limits).
VARY = ["kernel.zswap.enabled=false,true", "kernel.vm.swappiness=60..100:40"]


def test_expand_range() -> None:
    assert expand_range("5..40:5") == ["5", "10", "15", "20", "25", "30", "35", "40"]
    assert expand_range("1..3") == ["1", "2", "3"]
    assert expand_range("0.1..0.3:0.1") == ["0.1", "0.2", "0.3"]
    assert expand_range("7..7") == ["7"]
    assert expand_range("10..14:3") == ["10", "13"]  # the stop is included only when a step lands on it
    assert expand_range("true") is None
    assert expand_range("1GiB") is None
    with pytest.raises(ValueError, match="start <= stop"):
        expand_range("5..1")
    with pytest.raises(ValueError, match="step must be > 0"):
        expand_range("1..5:0")
    with pytest.raises(ValueError, match="at most 1000"):
        expand_range("1..1000000")


def test_parse_vary_with_ranges_and_values() -> None:
    key, values = parse_vary("kernel.zswap.max_pool_percent=5..15:5,40")
    assert key == "kernel.zswap.max_pool_percent"
    assert values == [("5", 5), ("10", 10), ("15", 15), ("40", 40)]


def test_jobs_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="--jobs"):
        sweep.run_all([], jobs=-1)


def _jsons(result: Any) -> list[str]:
    return [r.to_json() for _, r in result.configs]


@pytest.mark.native
def test_parallel_and_cached_results_are_the_serial_ones(real_core: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sweep.CACHE_ENV, str(tmp_path / "cache"))
    serial = compare(THREE_REGIONS, vary=VARY)
    parallel = compare(THREE_REGIONS, vary=VARY, jobs=2, cache=True)
    assert len(serial.configs) == 4
    assert [c.name for c, _ in parallel.configs] == [c.name for c, _ in serial.configs]
    assert _jsons(parallel) == _jsons(serial)
    # The configurations differ, so equal lists are not four copies of one result.
    assert len({json.dumps(r.counters, sort_keys=True) for _, r in serial.configs}) == 4
    files = sorted((tmp_path / "cache").rglob("*.json"))
    assert len(files) == 4

    # A second sweep comes from the cache: the core is not run at all.
    def no_core(*args: object, **kwargs: object) -> None:
        raise AssertionError("ran the core for a cached configuration")

    monkeypatch.setattr(sim, "simulate", no_core)
    assert _jsons(compare(THREE_REGIONS, vary=VARY, cache=True)) == _jsons(serial)
    # Another seed is another key.
    with pytest.raises(AssertionError, match="ran the core"):
        compare(THREE_REGIONS, vary=VARY, overrides=["seed=7"], cache=True)


@pytest.mark.native
def test_cache_key_follows_config_profile_and_interval(real_core: object) -> None:
    a = sweep.cache_key('{"seed": 1}', None, None)
    assert a == sweep.cache_key('{"seed": 1}', None, None)
    assert a != sweep.cache_key('{"seed": 2}', None, None)
    assert a != sweep.cache_key('{"seed": 1}', None, 1.0)


@pytest.mark.native
def test_a_broken_cache_file_is_run_again(real_core: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sweep.CACHE_ENV, str(tmp_path))
    first = compare(THREE_REGIONS, vary=["kernel.zswap.enabled=true"], cache=True)
    (f,) = tmp_path.rglob("*.json")
    f.write_text("{not json")
    again = compare(THREE_REGIONS, vary=["kernel.zswap.enabled=true"], cache=True)
    assert _jsons(again) == _jsons(first)
    assert json.loads(f.read_text())["key"] == f.stem


@pytest.mark.native
def test_cli_compare_jobs(real_core: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sweep.CACHE_ENV, str(tmp_path / "cache"))
    out = tmp_path / "r.json"
    args = ["compare", str(THREE_REGIONS), "--jobs", "2", "--no-progress", "--json", str(out)]
    r = CliRunner().invoke(app, [*args, "--vary", "kernel.vm.swappiness=60..100:40"])
    assert r.exit_code == 0, r.output
    assert [c["name"] for c in json.loads(out.read_text())["configs"]] == ["kernel.vm.swappiness=60", "kernel.vm.swappiness=100"]
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 2
    r = CliRunner().invoke(app, [*args, "--no-cache", "--vary", "kernel.vm.swappiness=20"])
    assert r.exit_code == 0, r.output
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 2


@pytest.mark.native
def test_ray_missing_is_a_clear_error(real_core: object, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_ray(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    r = CliRunner().invoke(app, ["compare", str(THREE_REGIONS), "--ray", "auto", "--no-cache", "--no-progress", "--vary", "seed=1"])
    assert r.exit_code == 1
    assert "--ray: Ray is not installed" in r.output


@pytest.mark.native
def test_ray_local_cluster_gives_the_serial_results(real_core: object) -> None:
    # Ray is an optional dependency (large: not installed by `make build`); with it installed,
    # this starts a local Ray instance and runs the sweep there.
    pytest.importorskip("ray", reason="Ray is not installed (optional: pip install 'ray[default]')")
    serial = compare(THREE_REGIONS, vary=VARY[:1])
    on_ray = compare(THREE_REGIONS, vary=VARY[:1], ray_address="local")
    assert _jsons(on_ray) == _jsons(serial)
