"""Validating a comparison: does the simulator rank configurations the way the kernel does?

A user picks between configurations (zswap on or off, a compressor, a pool limit, zram or a
swap file) by how they compare, so the simulator must order them as the kernel does, not only
be close per configuration. ``validate_compare`` validates every configuration of a scenario's
``[compare]`` (or of ``--vary``), with the kernel runs interleaved (rep 1 of every
configuration, then rep 2, ...), so that a slow spell of the host falls on every configuration
alike rather than on one of them. Then, per metric and per pair of configurations (a, b):

* the kernel's order: ``<`` or ``>`` when the two configurations' kernel runs do not overlap
  (every run of one below every run of the other), ``=`` when every run of both gave the same
  value, else ``~``: the kernel's own spread does not decide the order, and any order the
  simulator gives is accepted ("kernel tie");
* the simulator's order: ``<``, ``>`` or ``=`` of its two values;
* the verdict: ``same`` or ``differs`` where the kernel decides, ``kernel tie`` where it does not.

Metrics: the key counters of docs/validation.md and every phase's accesses/s (``metrics``
patterns select others). A metric that is 0 on both sides in both configurations is left out.

``revalidate_compare`` reuses a previous result's kernel runs (its JSON) and runs only the
simulator again, like ``validate.revalidate``.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from reclaimlab.compare import expand
from reclaimlab.result import RunResult
from reclaimlab.scenario import Scenario
from reclaimlab.validate import (
    KEY_COUNTERS,
    KernelResultsError,
    Number,
    Row,
    ValidateResult,
    at_speed,
    format_value,
    revalidate,
    rows,
    run_kernel_with_retries,
)

__all__ = [
    "ConfigValidation",
    "PairRank",
    "RankingResult",
    "is_ranking_json",
    "pair_ranks",
    "ranking_markdown",
    "revalidate_compare",
    "validate_compare",
]

KIND = "validate-compare"

#: What a metric name must match to be ranked by default: the key counters and phase rates.
DEFAULT_METRICS = (*KEY_COUNTERS, "* accesses/s")


@dataclass
class ConfigValidation:
    name: str
    overrides: list[str]  # "key = value" as the configuration sets them
    result: ValidateResult

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "overrides": list(self.overrides), "validate": self.result.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ConfigValidation:
        return cls(str(d["name"]), [str(o) for o in d["overrides"]], ValidateResult.from_dict(d["validate"]))


@dataclass(frozen=True)
class PairRank:
    metric: str
    a: str  # configuration names, a before b in the scenario's order
    b: str
    kernel_a: Number
    kernel_b: Number  # kernel medians
    sim_a: Number
    sim_b: Number
    kernel: str  # "<", ">", "=", "~"
    sim: str  # "<", ">", "="

    @property
    def verdict(self) -> str:
        if self.kernel == "~":
            return "kernel tie"
        return "same" if self.kernel == self.sim else "differs"

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "a": self.a,
            "b": self.b,
            "kernel_median_a": self.kernel_a,
            "kernel_median_b": self.kernel_b,
            "sim_a": self.sim_a,
            "sim_b": self.sim_b,
            "kernel": self.kernel,
            "sim": self.sim,
            "verdict": self.verdict,
        }


def _order(x: Number, y: Number) -> str:
    return "<" if x < y else (">" if x > y else "=")


def _kernel_order(a: Row, b: Row) -> str:
    assert a.kernel is not None and b.kernel is not None
    if a.kernel.max < b.kernel.min:
        return "<"
    if a.kernel.min > b.kernel.max:
        return ">"
    if a.kernel.min == a.kernel.max == b.kernel.min == b.kernel.max:
        return "="
    return "~"


def _zero_everywhere(row: Row) -> bool:
    return not row.sim and (row.kernel is None or (row.kernel.min == 0 and row.kernel.max == 0))


def pair_ranks(configs: Sequence[ConfigValidation], metrics: Sequence[str] = DEFAULT_METRICS) -> list[PairRank]:
    """Every (metric, pair of configurations) both sides report, in metric order (the first
    configuration's row order), pairs in the configurations' order."""
    by_config = [{r.metric: r for r in c.result.rows} for c in configs]
    ordered: list[str] = []
    for c in configs:
        for r in c.result.rows:
            if r.metric not in ordered and any(fnmatch.fnmatchcase(r.metric, p) for p in metrics):
                ordered.append(r.metric)
    out = []
    for metric in ordered:
        for (i, ca), (j, cb) in combinations(enumerate(configs), 2):
            ra, rb = by_config[i].get(metric), by_config[j].get(metric)
            if ra is None or rb is None or ra.kernel is None or rb.kernel is None or ra.sim is None or rb.sim is None:
                continue
            if _zero_everywhere(ra) and _zero_everywhere(rb):
                continue
            kernel, sim = _kernel_order(ra, rb), _order(ra.sim, rb.sim)
            out.append(PairRank(metric, ca.name, cb.name, ra.kernel.median, rb.kernel.median, ra.sim, rb.sim, kernel, sim))
    return out


@dataclass
class RankingResult:
    scenario: str
    configs: list[ConfigValidation]
    reps: int
    discarded_runs: list[dict[str, Any]] = field(default_factory=list)  # {"config", "rep", "error"}

    def pairs(self, metrics: Sequence[str] = DEFAULT_METRICS) -> list[PairRank]:
        return pair_ranks(self.configs, metrics)

    def config_results(self) -> list[ValidateResult]:
        """Each configuration's validate result under the name ``<scenario> [<configuration>]``
        (how the summary of docs/validation.md lists them beside the other scenarios)."""
        return [
            ValidateResult(f"{self.scenario} [{c.name}]", c.result.kernel_runs, c.result.sim, c.result.rows, c.result.discarded_runs)
            for c in self.configs
        ]

    def to_dict(self) -> dict[str, Any]:
        pairs = self.pairs()
        decisive, same, ties = rank_counts(pairs)
        return {
            "schema_version": 1,
            "kind": KIND,
            "scenario": self.scenario,
            "reps": self.reps,
            "configs": [c.to_dict() for c in self.configs],
            "discarded_runs": list(self.discarded_runs),
            "ranking": {
                "metrics": list(DEFAULT_METRICS),
                "pairs": [p.to_dict() for p in pairs],
                "decisive": decisive,
                "same": same,
                "kernel_ties": ties,
            },
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=indent, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RankingResult:
        """The result ``to_dict`` wrote; the ranking is recomputed from the runs (derived data)."""
        if d.get("schema_version") != 1 or d.get("kind") != KIND:
            got = f"kind {d.get('kind')!r}, schema_version {d.get('schema_version')!r}"
            raise ValueError(f"expected a {KIND} result with schema_version 1; got {got}")
        configs = [ConfigValidation.from_dict(c) for c in d["configs"]]
        return cls(str(d["scenario"]), configs, int(d["reps"]), list(d.get("discarded_runs", [])))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> RankingResult:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


def is_ranking_json(path: str | os.PathLike[str]) -> bool:
    try:
        return bool(json.loads(Path(path).read_text(encoding="utf-8")).get("kind") == KIND)
    except (OSError, ValueError, AttributeError):
        return False


def _override_texts(sc_overrides: Sequence[Any]) -> list[str]:
    return [f"{o.key} = {json.dumps(o.value)}" for o in sc_overrides]


def validate_compare(
    scenario: Scenario,
    vary: Sequence[str] = (),
    reps: int = 3,
    run_kernel: Callable[..., RunResult] | None = None,
    run_sim: Callable[..., RunResult] | None = None,
    on_run: Callable[[int, int, str], None] | None = None,
    retries: int = 0,
    **kernel_options: Any,
) -> RankingResult:
    """Validate every configuration of ``scenario``'s ``[compare]`` (or ``vary``): the simulator
    once each, the kernel ``reps`` times each, interleaved by rep. ScenarioError if there is
    nothing to compare or a configuration is invalid (before anything runs)."""
    if reps < 1:
        raise ValueError(f"reps: expected at least 1; got {reps}")
    configs = expand(scenario, vary)
    if run_kernel is None:
        from reclaimlab.backends import kernel

        run_kernel = kernel.run
    if run_sim is None:
        from reclaimlab.backends import sim

        run_sim = sim.run
    kernel_runs: list[list[RunResult]] = [[] for _ in configs]
    discarded: list[dict[str, Any]] = []
    for rep in range(1, reps + 1):
        for i, (cfg, sc) in enumerate(configs):
            if on_run is not None:
                on_run(rep, reps, cfg.name)
            mine: list[dict[str, Any]] = []
            kernel_runs[i].append(run_kernel_with_retries(run_kernel, sc, retries, mine, rep, **kernel_options))
            discarded += [{"config": cfg.name, **m} for m in mine]
    # Every configuration at the speed of all the (interleaved) kernel runs: one factor, so
    # that the simulator's order between configurations does not depend on it.
    every_run = [r for runs in kernel_runs for r in runs]
    sims = [run_sim(at_speed(sc, every_run)) for _, sc in configs]
    out = []
    for (cfg, sc), sim_result, runs in zip(configs, sims, kernel_runs, strict=True):
        mine = [{"rep": m["rep"], "error": m["error"]} for m in discarded if m["config"] == cfg.name]
        result = ValidateResult(sc.name or "scenario", runs, sim_result, rows(runs, sim_result), mine)
        out.append(ConfigValidation(cfg.name, _override_texts(cfg.overrides), result))
    return RankingResult(scenario.name or "scenario", out, reps, discarded)


def revalidate_compare(
    scenario: Scenario,
    previous: RankingResult | str | os.PathLike[str],
    vary: Sequence[str] = (),
    run_sim: Callable[..., RunResult] | None = None,
) -> RankingResult:
    """``validate_compare`` with the kernel runs of ``previous`` and the simulator run now.
    KernelResultsError if ``previous`` is for another scenario, lacks one of the scenario's
    configurations, or a configuration's kernel runs ran another setup than it gives now."""
    prev = previous if isinstance(previous, RankingResult) else RankingResult.load(previous)
    name = scenario.name or "scenario"
    if prev.scenario != name:
        raise KernelResultsError(f"the kernel results are for scenario {prev.scenario!r}, not {name!r}")
    stored = {c.name: c for c in prev.configs}
    every_run = [r for c in prev.configs for r in c.result.kernel_runs]
    out = []
    for cfg, sc in expand(scenario, vary):
        old = stored.get(cfg.name)
        if old is None:
            raise KernelResultsError(f"the kernel results hold no configuration {cfg.name!r} (they hold: {', '.join(stored) or 'none'})")
        try:
            result = revalidate(sc, old.result, run_sim=run_sim, speed_runs=every_run)
        except KernelResultsError as e:
            raise KernelResultsError(f"configuration {cfg.name!r}: {e}") from None
        out.append(ConfigValidation(cfg.name, _override_texts(cfg.overrides), result))
    return RankingResult(name, out, prev.reps, list(prev.discarded_runs))


# ---------------------------------------------------------------------------------------------
# Markdown (docs/validation.md) and the summary line
# ---------------------------------------------------------------------------------------------


def rank_counts(pairs: Sequence[PairRank]) -> tuple[int, int, int]:
    """(pairs the kernel orders, of them ranked the same by the simulator, kernel ties)."""
    ties = sum(p.verdict == "kernel tie" for p in pairs)
    return len(pairs) - ties, sum(p.verdict == "same" for p in pairs), ties


def summary_line(pairs: Sequence[PairRank]) -> str:
    decisive, same, ties = rank_counts(pairs)
    return (
        f"{same} of {decisive} pairs the kernel orders are ranked the same by the simulator; "
        f"{ties} pairs are ties within the kernel's spread"
    )


def ranking_markdown(result: RankingResult) -> str:
    """Per metric: every configuration's kernel median and simulated value, then each pair's
    kernel and simulated order and verdict; the counts at the end."""
    pairs = result.pairs()
    names = [c.name for c in result.configs]
    lines = ["| metric | " + " | ".join(f"{n}: kernel / sim" for n in names) + " |", "|---|" + "---:|" * len(names)]
    metrics: list[str] = []
    for p in pairs:
        if p.metric not in metrics:
            metrics.append(p.metric)
    for metric in metrics:
        cells = []
        for c in result.configs:
            row = next((r for r in c.result.rows if r.metric == metric), None)
            if row is None or row.kernel is None:
                cells.append("-")
            else:
                cells.append(f"{format_value(row.kernel.median)} / {format_value(row.sim)}")
        lines.append(f"| `{metric}` | " + " | ".join(cells) + " |")
    lines += ["", "| metric | a | b | kernel | sim | verdict |", "|---|---|---|:---:|:---:|---|"]
    for p in pairs:
        verdict = {"same": "same", "differs": "**differs**", "kernel tie": "kernel tie"}[p.verdict]
        lines.append(f"| `{p.metric}` | {p.a} | {p.b} | {_sym(p.kernel)} | {_sym(p.sim)} | {verdict} |")
    text = "\n".join(lines) + "\n\n" + summary_line(pairs) + "."
    if result.discarded_runs:
        text += f" {len(result.discarded_runs)} kernel runs failed (runner killed) and were run again; they are not in the spread."
    return text + "\n"


def _sym(order: str) -> str:
    return {"<": "a < b", ">": "a > b", "=": "a = b", "~": "tie"}[order]
