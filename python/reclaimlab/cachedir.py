"""Where reclaimlab keeps what it can recompute: the result cache (reclaimlab.sweep) and the
compact trace files of trace phases (reclaimlab.lower). A module of its own so that lowering
and the sweep share it without importing each other."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_dir"]

#: Where the cache lives (default: $XDG_CACHE_HOME/reclaimlab, else ~/.cache/reclaimlab).
CACHE_ENV = "RECLAIMLAB_CACHE_DIR"


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "reclaimlab"
