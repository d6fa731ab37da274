"""Loading a scenario: read the TOML, normalise spellings, apply ``--set`` overrides to the
document, validate it with the models, run the checks that span several keys. Every problem
found is collected into one ScenarioError; each names the file, the key path and what was
expected."""

from __future__ import annotations

import copy
import hashlib
import os
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path as FsPath
from typing import Any

from pydantic import ValidationError

from reclaimlab import native
from reclaimlab.errors import Path, Problem, ScenarioError
from reclaimlab.overrides import Override, apply_overrides, flatten_table, parse_override
from reclaimlab.scenario.checks import check
from reclaimlab.scenario.messages import translate
from reclaimlab.scenario.models import Compare, Scenario, Source

__all__ = ["load", "normalize"]


def _read(source: str | os.PathLike[str]) -> tuple[str, str | None, bytes]:
    """(display name, path or None, bytes). A str with a newline or '=' is TOML text."""
    if isinstance(source, str) and ("\n" in source or "=" in source):
        return "<string>", None, source.encode()
    path = os.fspath(source)
    try:
        return path, path, FsPath(path).read_bytes()
    except OSError as e:
        raise ScenarioError.single(path, f"cannot read the scenario: {e.strerror or e}") from None


def _flatten_in_place(table: Any, key: str) -> None:
    if isinstance(table, dict) and isinstance(table.get(key), dict):
        table[key] = flatten_table(table[key])


def _flatten_plain(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict) and v:
            out.update(_flatten_plain(v, key))
        else:
            out[key] = v
    return out


def normalize(doc: dict[str, Any]) -> dict[str, Any]:
    """Undo TOML's dotted-key nesting where a key is a file name with dots.

    ``memory.high = "1G"`` (unquoted) in a cgroup table and ``zswap.incompressible = "reject"``
    in ``[kernel.switches]`` parse as nested tables; they mean the single keys ``"memory.high"``
    and ``"zswap.incompressible"``. Compare ``set`` tables become flat path -> value tables, and
    so do ``[report.published.<config>]`` tables (``vmstat.pswpin = 1`` means the metric).
    """
    doc = copy.deepcopy(doc)
    cgroups = doc.get("cgroups")
    if isinstance(cgroups, dict) and isinstance(cgroups.get("groups"), dict):
        groups = cgroups["groups"]
        for name, files in groups.items():
            if isinstance(files, dict):
                groups[name] = _flatten_plain(files)
    kernel = doc.get("kernel")
    if isinstance(kernel, dict) and isinstance(kernel.get("switches"), dict):
        kernel["switches"] = _flatten_plain(kernel["switches"])
    compare = doc.get("compare")
    if isinstance(compare, dict) and isinstance(compare.get("configs"), list):
        for cfg in compare["configs"]:
            _flatten_in_place(cfg, "set")
    report = doc.get("report")
    if isinstance(report, dict) and isinstance(report.get("published"), dict):
        published = report["published"]
        for name, values in published.items():
            if isinstance(values, dict):
                published[name] = _flatten_plain(values)
    return doc


def load(source: str | os.PathLike[str], overrides: Iterable[str | Override] = ()) -> Scenario:
    """Load, override and validate a scenario file (or TOML text: a str containing a newline or '=').

    ``overrides`` are ``"key=value"`` strings as for ``--set``. Raises ScenarioError listing
    every problem found.
    """
    file, path, data = _read(source)
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ScenarioError.single(file, f"not UTF-8 text: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError.single(file, f"invalid TOML: {e}") from None
    ovs: list[Override] = []
    bad: list[Problem] = []
    for o in overrides:
        if isinstance(o, Override):
            ovs.append(o)
            continue
        try:
            ovs.append(parse_override(o))
        except ValueError as e:
            bad.append(Problem((), f"--set: {e}"))
    if bad:
        raise ScenarioError(file, bad)
    src = Source(file=file, path=path, sha256=hashlib.sha256(data).hexdigest(), document=normalize(doc), rebuild=_build)
    return _build(src, ovs)


def _build(src: Source, overrides: Sequence[Override]) -> Scenario:
    scenario, problems = _validate_document(src.document, overrides, src.file)
    if problems or scenario is None:
        raise ScenarioError(src.file, problems)
    if scenario.name is None:
        stem = FsPath(src.path).stem if src.path else "scenario"
        scenario.name = stem
    scenario._source = Source(src.file, src.path, src.sha256, src.document, _build, tuple(overrides))
    return scenario


def _validate_document(
    base: dict[str, Any], overrides: Sequence[Override], file: str, check_compare: bool = True
) -> tuple[Scenario | None, list[Problem]]:
    doc, landed, errors = apply_overrides(Scenario, base, overrides)
    problems = [Problem((), f"{e.override.origin}: {e}") for e in errors]
    caps = native.capabilities()
    try:
        scenario = Scenario.model_validate(doc)
    except ValidationError as e:
        problems += [translate(err, doc) for err in e.errors(include_url=False)]
        scenario = None
    if scenario is not None:
        problems += check(scenario, caps)
    problems = [_annotate(p, landed) for p in problems]
    if scenario is not None and not problems and check_compare and scenario.compare is not None:
        problems += _check_compare_configs(scenario.compare, doc, file)
    return (scenario if not problems else None), problems


def _annotate(problem: Problem, landed: list[tuple[Path, Override]]) -> Problem:
    if problem.note or not problem.path:
        return problem
    for path, ov in reversed(landed):
        n = min(len(path), len(problem.path))
        if path[:n] == problem.path[:n]:
            return Problem(problem.path, problem.message, f"(from {ov.origin})")
    return problem


def _check_compare_configs(compare: Compare, doc: dict[str, Any], file: str) -> list[Problem]:
    problems: list[Problem] = []
    for i, cfg in enumerate(compare.configs):
        where: Path = ("compare", "configs", i, "set")
        _, _, errors = apply_overrides(Scenario, doc, cfg.overrides())
        for e in errors:
            problems.append(Problem((*where, e.override.key), str(e)))
        if errors:
            continue
        _, more = _validate_document(doc, cfg.overrides(), file, check_compare=False)
        problems += [p if p.note else Problem(p.path, p.message, f"(with compare config {cfg.name!r})") for p in more]
    return problems
