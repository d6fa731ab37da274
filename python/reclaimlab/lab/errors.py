"""Errors of the lab (the real-kernel backend).

A scenario the host cannot run is a ``reclaimlab.ScenarioError`` (exit code 2: bad input),
with one problem per scenario key. Everything else the lab refuses or fails at is a
``LabError`` (exit code 1): not root, the lock is held, leftovers of a crashed run, a runner
that failed, a timeout, an interrupt.
"""

from __future__ import annotations

__all__ = ["LabBusy", "LabError", "LabInterrupted", "LabLeftovers", "LabTimeout", "LabUnavailable", "RunnerFailed"]


class LabError(RuntimeError):
    """The lab could not do what was asked; the message says why and what to do."""


class LabUnavailable(LabError):  # noqa: N818 - reads as a state, like NativeUnavailable
    """The host lacks something the lab itself needs (root, a memory cgroup controller, the runner)."""


class LabBusy(LabError):  # noqa: N818 - reads as a state, like NativeUnavailable
    """Another lab run (or `lab restore`) holds the lab lock."""


class LabLeftovers(LabError):  # noqa: N818 - reads as a state, like NativeUnavailable
    """A journal of an earlier run exists: its changes may still be in place."""


class RunnerFailed(LabError):  # noqa: N818 - reads as a state, like NativeUnavailable
    """A workload runner reported an error, exited early or broke the protocol."""


class LabTimeout(LabError):  # noqa: N818 - reads as a state, like NativeUnavailable
    """The run took longer than its timeout; the runners were killed."""


class LabInterrupted(LabError):  # noqa: N818 - reads as a state, like KeyboardInterrupt
    """SIGINT or SIGTERM during a run; the run's changes were restored."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.signum = signum
