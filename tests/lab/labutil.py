"""Shared by the lab tests: the tiny scenario, the skip conditions, the Lab environment."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reclaimlab.lab.probe import probe
from reclaimlab.lab.runner import RUNNER_ENV
from reclaimlab.lab.state import machine_state

HERE = Path(__file__).parent
REPO = HERE.parents[1]
FAKE_RUNNER = HERE / "fake_runner.py"
REAL_RUNNER = REPO / "target" / "release" / "reclaimlab-runner"

#: 32 MiB of regions (half compressible text, half random) under a 28 MiB v1 memcg limit, a
#: 64 MiB swap file, zswap on; 50k random reads. Runs in well under a second. (At 24 MiB the
#: kernel's memcg OOM killer occasionally fires while swap readahead fills the swap cache.)
TINY = """\
schema_version = 1
seed = 7
[machine]
memory = "host"
cpus = "host"
[[machine.swap]]
name = "swapfile"
size = "64MiB"
device = "virtio-disk"
[kernel]
zswap.enabled = true
zswap.compressor = "lzo"
[cgroups]
cgroup_version = 1
[cgroups.groups.workload]
"memory.limit_in_bytes" = "28MiB"
[[processes]]
name = "w"
cgroup = "workload"
[[processes.regions]]
name = "text"
size = "16MiB"
content = "text"
[[processes.regions]]
name = "rand"
size = "16MiB"
content = "random"
[[processes.phases]]
kind = "fill"
region = "text"
[[processes.phases]]
kind = "fill"
region = "rand"
[[processes.phases]]
name = "access"
kind = "random"
regions = ["text", "rand"]
count = 50000
"""


def lab_skip_reason() -> str | None:
    """Why the lab tests cannot run here (None: they can)."""
    if os.geteuid() != 0:
        return "the lab needs root"
    p = probe()
    if not p.zswap:
        return "this kernel has no zswap"
    if p.cgroup_v1_memory is None and not p.cgroup_v2_memory_enabled:
        return "no memory cgroup controller"
    if p.swaps:
        return f"the host has active swap ({', '.join(p.swaps)}): the lab refuses to mix with it"
    if not p.tools.get("mkswap") or not p.tools.get("swapon"):
        return "mkswap/swapon not found"
    return None


@dataclass
class Lab:
    state: Path
    before: dict[str, Any]
    runner: str  # "real" or "fake"
    env: dict[str, str]  # for subprocesses

    def state_now(self) -> dict[str, Any]:
        return machine_state(self.state)

    def start_driver(self, scenario: Path, log: Path, *options: str, orphan_runner: bool = False) -> subprocess.Popen[bytes]:
        """`reclaimlab run --backend kernel` on ``scenario`` in a process of its own (for tests
        that SIGKILL it), output to ``log``. ``orphan_runner``: no PDEATHSIG, so the runner
        outlives a killed driver and only `lab restore` can clean up after it."""
        env = {**self.env, "RECLAIMLAB_RUNNER_PDEATHSIG": "0"} if orphan_runner else self.env
        with log.open("w") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "reclaimlab", "run", "--backend", "kernel", "--no-build-runner", *options, str(scenario)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )


def runner_env(kind: str) -> dict[str, str]:
    if kind == "fake":
        return {RUNNER_ENV: f"{sys.executable} {FAKE_RUNNER}"}
    return {}
