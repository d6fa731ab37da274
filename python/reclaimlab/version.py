"""The package's version (its own module, so that the modules the package imports can record it
without importing the package: no import cycle)."""

from __future__ import annotations

from importlib import metadata

__all__ = ["__version__"]

try:
    __version__ = metadata.version("reclaimlab")
except metadata.PackageNotFoundError:  # a source checkout that is not installed
    __version__ = "0.0.0+unknown"
