"""A reproducible install: the wheel built from this checkout, installed into a fresh venv
(with its runtime dependencies), runs the bundled scenario to the same counters and phases as
the checkout, with the packaged machine profile named (and hashed) in the provenance.

Slow (a wheel build and a venv: a minute or two); part of ``make test``."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import reclaimlab
from conftest import ROOT, THREE_REGIONS

pytestmark = pytest.mark.native


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=900, **kw)


def test_installed_wheel_gives_the_checkouts_numbers(real_core: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    maturin = Path(sys.executable).with_name("maturin")
    if not maturin.exists() or shutil.which("cargo") is None:
        pytest.skip("needs maturin in this venv and cargo (make build)")
    wheels = tmp_path / "wheels"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "RECLAIMLAB_PROFILE")}
    _run([str(maturin), "build", "--release", "--quiet", "--out", str(wheels)], cwd=ROOT, env=env)
    (wheel,) = wheels.glob("reclaimlab-*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "--quiet", str(wheel)], env=env)
    out = tmp_path / "installed.json"
    # Run from elsewhere, so that nothing of the checkout is importable.
    _run([str(venv / "bin" / "reclaimlab"), "run", str(THREE_REGIONS), "--json", str(out), "--no-progress"], cwd=tmp_path, env=env)
    installed = json.loads(out.read_text(encoding="utf-8"))

    monkeypatch.delenv("RECLAIMLAB_PROFILE", raising=False)
    here = json.loads(reclaimlab.run(THREE_REGIONS).to_json())
    assert installed["counters"] == here["counters"]
    assert installed["phases"] == here["phases"]
    profile = installed["provenance"]["profile"]
    packaged = ROOT / "python" / "reclaimlab" / "profiles" / "polyglot-vm.toml"
    assert profile["name"] == "polyglot-vm"
    assert profile["sha256"] == hashlib.sha256(packaged.read_bytes()).hexdigest() == here["provenance"]["profile"]["sha256"]
    assert str(venv) in profile["file"]  # the installed copy, not the checkout's
