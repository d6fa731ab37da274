"""The lab: the same scenario on this host's real kernel (docs/lab.md).

* ``probe``: what the host offers; ``check`` a lowered scenario against it (no changes);
* ``journal``: the append-only journal of changes, the lab lock, ``restore()``;
* ``apply``: swap devices, zswap parameters, sysctls, cgroups (journaled first);
* ``record``: counters under the simulator's names; gauge/event classification; time series;
* ``runner``: the workload runner processes and their protocol;
* ``state``: ``machine_state()``, to check that the host was left as found.

The backend that ties them together is ``reclaimlab.backends.kernel``. (The submodules keep
their names: ``reclaimlab.lab.probe.probe()`` probes; nothing here shadows a module.)
"""

from __future__ import annotations

from reclaimlab.lab.errors import LabBusy, LabError, LabInterrupted, LabLeftovers, LabTimeout, LabUnavailable, RunnerFailed
from reclaimlab.lab.journal import LabLock, restore, state_dir
from reclaimlab.lab.probe import Probe, check, notes
from reclaimlab.lab.result import KernelRunResult
from reclaimlab.lab.state import machine_state

__all__ = [
    "KernelRunResult",
    "LabBusy",
    "LabError",
    "LabInterrupted",
    "LabLeftovers",
    "LabLock",
    "LabTimeout",
    "LabUnavailable",
    "Probe",
    "RunnerFailed",
    "check",
    "machine_state",
    "notes",
    "restore",
    "state_dir",
]
