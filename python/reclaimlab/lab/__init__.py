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

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reclaimlab.lab.errors import LabBusy, LabError, LabInterrupted, LabLeftovers, LabTimeout, LabUnavailable, RunnerFailed
    from reclaimlab.lab.journal import LabLock, restore, state_dir
    from reclaimlab.lab.probe import Probe, check, notes
    from reclaimlab.lab.result import KernelRunResult
    from reclaimlab.lab.state import machine_state

#: Each name of this package and the submodule it comes from: imported on first use, so that
#: importing one submodule (``reclaimlab.lab.errors``, as ``import reclaimlab`` does) does not
#: import the whole lab (probe, journal, tracing) into a simulator run's start-up.
_FROM = {
    **dict.fromkeys(("LabBusy", "LabError", "LabInterrupted", "LabLeftovers", "LabTimeout", "LabUnavailable", "RunnerFailed"), "errors"),
    **dict.fromkeys(("LabLock", "restore", "state_dir"), "journal"),
    **dict.fromkeys(("Probe", "check", "notes"), "probe"),
    "KernelRunResult": "result",
    "machine_state": "state",
}


def __getattr__(name: str) -> Any:
    if name in _FROM:
        return getattr(import_module(f"reclaimlab.lab.{_FROM[name]}"), name)
    raise AttributeError(f"module 'reclaimlab.lab' has no attribute {name!r}")


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
