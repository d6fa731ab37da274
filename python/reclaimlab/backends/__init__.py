"""Backends run a validated scenario and return a RunResult with kernel-named counters.

``sim``: the deterministic simulator (the Rust core). ``kernel``: the same scenario on the real
kernel of this host (the lab); it produces the same counter keys.
"""

from __future__ import annotations

from reclaimlab.backends import kernel, sim

__all__ = ["BACKENDS", "kernel", "sim"]

BACKENDS = {"sim": sim.run, "kernel": kernel.run}
