"""Sweeps: ranges in --vary, configurations on parallel threads, the result cache, Ray.

Parallel and cached results must be the serial results byte for byte."""

from __future__ import annotations

import gc
import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import ROOT, THREE_REGIONS
from reclaimlab import sweep
from reclaimlab.backends import sim
from reclaimlab.cli import app
from reclaimlab.compare import compare, expand_range, parse_vary
from reclaimlab.errors import ScenarioError
from reclaimlab.scenario import load

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


def _sweep_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("reclaimlab-sweep")]


@pytest.mark.native
def test_parallel_configurations_run_on_threads_at_once(real_core: object, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two configurations, two jobs: both are inside the core at the same time, each on a
    # thread of this process (no worker process), and the results are the serial ones.
    serial = compare(THREE_REGIONS, vary=VARY[:1])
    both_in = threading.Barrier(2, timeout=60)
    where: list[str] = []
    real_simulate = sim.simulate

    def simulate(*args: Any, **kwargs: Any) -> Any:
        where.append(threading.current_thread().name)
        both_in.wait()  # fails (BrokenBarrierError) unless the other configuration runs too
        return real_simulate(*args, **kwargs)

    monkeypatch.setattr(sim, "simulate", simulate)
    parallel = compare(THREE_REGIONS, vary=VARY[:1], jobs=2)
    assert _jsons(parallel) == _jsons(serial)
    assert len(where) == 2 and all(name.startswith("reclaimlab-sweep") for name in where)
    assert not _sweep_threads()


@pytest.mark.native
def test_the_core_runs_without_the_gil(real_core: object) -> None:
    # What lets threads run configurations at once: while one thread is in the core, this one
    # keeps running. If the core held the GIL, this thread would not wake for the whole run.
    config_json = sim.prepare(load(ROOT / "scenarios" / "validation" / "zswap-duration.toml"))[1]
    inside = threading.Event()
    span: list[float] = []

    def work() -> None:
        inside.set()
        t0 = time.monotonic()
        sim.simulate(config_json)
        span.extend([t0, time.monotonic()])

    worker = threading.Thread(target=work)
    worker.start()
    inside.wait()
    wakes = []
    while worker.is_alive():
        time.sleep(0.005)
        wakes.append(time.monotonic())
    worker.join()
    start, end = span
    during = [t for t in wakes if start <= t <= end]
    gaps = [b - a for a, b in zip([start, *during], [*during, end], strict=True)]
    assert end - start > 0.3, "the run is too short to tell"
    assert max(gaps) < (end - start) / 2, f"this thread was held for {max(gaps):.2f} s of a {end - start:.2f} s run"


@pytest.mark.native
def test_a_failing_configuration_names_the_scenario(real_core: object, monkeypatch: pytest.MonkeyPatch) -> None:
    # A core error in one worker thread is the scenario's error, naming its file and key; the
    # other configurations stop.
    # The error is raised while that thread's Simulation exists (from inside its run), and the
    # Simulation is still freed on its own thread: a native object dropped on another thread
    # is reported as an unraisable RuntimeError ("unsendable").
    real_simulate = sim.simulate

    def simulate(config_json: str, interval_s: Any, limit_ns: Any, on_progress: Any = None, **kw: Any) -> Any:
        def refuse(fraction: float) -> None:
            raise ValueError("seed: refused by the core")

        if json.loads(config_json)["kernel"]["vm"]["swappiness"] == 100:
            on_progress = refuse
        return real_simulate(config_json, interval_s, limit_ns, chunk=1000, on_progress=on_progress)

    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    monkeypatch.setattr(sim, "simulate", simulate)
    with pytest.raises(ScenarioError) as e:
        compare(THREE_REGIONS, vary=VARY, jobs=2)
    assert e.value.file == str(THREE_REGIONS)
    assert "seed" in str(e.value) and "refused by the core" in str(e.value)
    assert not _sweep_threads()
    del e
    gc.collect()
    assert not [u.exc_value for u in unraisable], [str(u.exc_value) for u in unraisable]


def test_ctrl_c_stops_the_running_configurations_and_starts_no_more(monkeypatch: pytest.MonkeyPatch) -> None:
    # Ctrl-C reaches the main thread, which waits for the workers: they stop at their next
    # chunk (the progress callback), the configurations not yet started never start, and the
    # interrupt is raised once every worker thread has ended.
    started: list[int] = []
    chunks_after: list[int] = []
    interrupted = threading.Event()

    def simulate(config_json: str, interval_s: Any, limit_ns: Any, on_progress: Any = None, **kw: Any) -> Any:
        started.append(json.loads(config_json)["seed"])
        for k in range(10_000):  # a long run in chunks of 10 ms
            time.sleep(0.01)
            if interrupted.is_set():
                chunks_after.append(k)
            on_progress(k / 10_000)
        raise AssertionError("not stopped")

    def fake_prepare(scenario: Any, label: str | None = None) -> tuple[dict[str, Any], str, None]:
        return {}, json.dumps({"seed": scenario.seed}), None

    monkeypatch.setattr(sim, "simulate", simulate)
    monkeypatch.setattr(sim, "prepare", fake_prepare)
    base = load(THREE_REGIONS)
    scenarios = [(f"seed {k}", base.model_copy(update={"seed": k})) for k in range(4)]

    def interrupt() -> None:
        while len(started) < 2:
            time.sleep(0.01)
        interrupted.set()
        signal.raise_signal(signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        sweep.run_all(scenarios, jobs=2)
    assert time.monotonic() - t0 < 30
    assert sorted(started) == [0, 1]  # two ran, two never started
    assert not _sweep_threads()
    assert len(chunks_after) < 2 * 50  # each running worker stopped within a few chunks


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
