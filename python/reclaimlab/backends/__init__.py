"""Backends run a validated scenario and return a RunResult with kernel-named counters.

``sim``: the deterministic simulator (the Rust core). ``kernel``: the same scenario on the real
kernel of this host (the lab); it produces the same counter keys.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["BACKENDS", "kernel", "sim"]


def __getattr__(name: str) -> Any:
    # Imported on first use: a simulator run does not import the lab (``kernel``) at start-up.
    if name in ("kernel", "sim"):
        return import_module(f"reclaimlab.backends.{name}")
    if name == "BACKENDS":
        return {b: import_module(f"reclaimlab.backends.{b}").run for b in ("sim", "kernel")}
    raise AttributeError(f"module 'reclaimlab.backends' has no attribute {name!r}")
