from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import reclaimlab
from reclaimlab import native

ROOT = Path(__file__).resolve().parents[1]
THREE_REGIONS = ROOT / "scenarios" / "three-regions.toml"

sys.path.insert(0, str(Path(__file__).parent))
import fakecore  # noqa: E402

MINIMAL = """\
schema_version = 1
[machine]
memory = "256MiB"
[[machine.swap]]
size = "256MiB"
device = "ssd"
[[processes]]
name = "p"
[[processes.regions]]
name = "a"
size = "1MiB"
content = "text"
[[processes.phases]]
kind = "fill"
region = "a"
"""


def fake_capabilities() -> native.Capabilities:
    """What the loader validates against in unit tests: the fake core's lists, so that results
    do not depend on whether (or which) native module is built."""
    return native.Capabilities(
        versions=tuple(fakecore.SWITCHES),
        codecs=tuple(fakecore.CODECS),
        default_costs=dict(fakecore.COSTS),
        _switches=fakecore.module().preset_switches,
    )


@pytest.fixture(autouse=True)
def _capabilities(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("native") is None:
        monkeypatch.setattr(native, "capabilities", fake_capabilities)


@pytest.fixture(autouse=True)
def _result_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """`reclaimlab compare` caches results (reclaimlab.sweep): never in the user's cache in tests."""
    monkeypatch.setenv("RECLAIMLAB_CACHE_DIR", str(tmp_path_factory.mktemp("result-cache")))


@pytest.fixture
def fake_core(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Install the fake native module as reclaimlab._core."""
    mod = fakecore.module()
    # The stand-in has no time model for a machine profile to calibrate (three cost names).
    monkeypatch.setenv("RECLAIMLAB_PROFILE", "none")
    monkeypatch.setitem(sys.modules, "reclaimlab._core", mod)
    monkeypatch.setattr(reclaimlab, "_core", mod, raising=False)
    native._native_capabilities.cache_clear()
    fakecore.Simulation.instances.clear()
    yield mod
    native._native_capabilities.cache_clear()


@pytest.fixture
def write(tmp_path: Path) -> Callable[..., Path]:
    """write(text, name="s.toml") -> path of a scenario file."""

    def _write(text: str, name: str = "s.toml") -> Path:
        p = tmp_path / name
        p.write_text(text, encoding="utf-8")
        return p

    return _write


@pytest.fixture
def real_core() -> object:
    core = pytest.importorskip("reclaimlab._core")
    native._native_capabilities.cache_clear()
    return core
