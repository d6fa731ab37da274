"""Backends run a validated scenario and return a RunResult with kernel-named counters.

``sim``: the deterministic simulator (the Rust core). A ``lab`` backend (the real kernel) will
sit beside it and produce the same counter keys.
"""

from __future__ import annotations

from reclaimlab.backends import sim

__all__ = ["BACKENDS", "sim"]

BACKENDS = {"sim": sim.run}
