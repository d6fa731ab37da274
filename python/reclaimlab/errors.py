"""Scenario errors: every problem names the file, the key path and what was expected."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Path", "Problem", "ScenarioError", "format_path"]

#: A key path into the scenario document: table keys and array indices.
Path = tuple[str | int, ...]

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def format_key(key: str) -> str:
    """A table key as TOML writes it: bare when it can be, else double-quoted."""
    if _BARE_KEY.match(key):
        return key
    escaped = key.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def format_path(path: Sequence[str | int]) -> str:
    """``("processes", 0, "phases", 2)`` -> ``processes[0].phases[2]``; keys with dots are quoted:
    ``cgroups.groups.workload."memory.high"``. The result is accepted by ``--set``."""
    out: list[str] = []
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        else:
            out.append(("." if out else "") + format_key(part))
    return "".join(out)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a scenario: where (key path, may be empty) and what."""

    path: Path
    message: str
    note: str = ""  # e.g. "(from --set kernel.vm.swappiness=300)"

    def render(self, file: str) -> str:
        where = f"{file}: {format_path(self.path)}: " if self.path else f"{file}: "
        note = f" {self.note}" if self.note else ""
        return f"{where}{self.message}{note}"


class ScenarioError(Exception):
    """A scenario that cannot be run, with every problem found (one per line in ``str()``)."""

    def __init__(self, file: str, problems: Iterable[Problem]):
        self.file = file
        self.problems: list[Problem] = list(problems)
        super().__init__("\n".join(p.render(file) for p in self.problems))

    @classmethod
    def single(cls, file: str, message: str, path: Path = ()) -> ScenarioError:
        return cls(file, [Problem(path, message)])

    def __reduce__(self) -> tuple[type[ScenarioError], tuple[str, list[Problem]]]:
        return (type(self), (self.file, self.problems))
