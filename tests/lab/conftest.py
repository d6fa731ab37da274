"""Fixtures for the lab tests: a private state dir, the runner to use, and a guard that
restores the host after every test, even one that failed half-way."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.labutil import REAL_RUNNER, REPO, Lab, lab_skip_reason, runner_env
from reclaimlab.lab.errors import LabBusy
from reclaimlab.lab.journal import WAIT_ENV, LabLock, pending, restore
from reclaimlab.lab.runner import RUNNER_ENV, repo_root
from reclaimlab.lab.state import machine_state


@pytest.fixture(params=["real", "fake"])
def lab(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    """A lab environment: root checks, a private state dir, the runner. The real runner when it
    is built; the fake one (tests/lab/fake_runner.py) only where it is not."""
    # Another lab run on this host (a user's, or another checkout's tests) holds the host-wide
    # lock and has its swap on: wait for it to end before looking at the host.
    with contextlib.suppress(LabBusy):
        LabLock(tmp_path / "wait").acquire("waiting for the host lab lock", wait_s=900).release()
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    kind = request.param
    built = REAL_RUNNER.is_file() and repo_root() is not None
    forced = os.environ.get("RECLAIMLAB_TEST_RUNNER")  # "fake" or "real": run only those
    if forced:
        if kind != forced:
            pytest.skip(f"RECLAIMLAB_TEST_RUNNER={forced}")
    elif kind == "fake" and built:
        pytest.skip("the real runner is built: the fake one is only for hosts without it")
    if kind == "real" and not built:
        pytest.skip("runner binary not built (cargo build --release -p reclaimlab-runner)")
    state = tmp_path / "state"  # /tmp is a disk file system here; swap files need one
    # Lab runs of other test sessions or of a user take the same host-wide lock: wait for them.
    env = {"RECLAIMLAB_STATE_DIR": str(state), WAIT_ENV: "900", **runner_env(kind)}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("RECLAIMLAB_RUNNER_PDEATHSIG", raising=False)
    if kind == "real":
        monkeypatch.delenv(RUNNER_ENV, raising=False)
    before = machine_state(state)
    sub_env = {**os.environ, **env, "PYTHONPATH": str(REPO / "python")}
    try:
        yield Lab(state, before, kind, sub_env)
    finally:
        # Never leave the host changed, even when a test failed half-way.
        if pending(state) is not None:
            with LabLock(state).acquire("test teardown"):
                restore(state)
