"""Comparing configurations of one scenario: same workload, same seed, one knob changed.

Configurations come from the scenario's ``[compare] configs`` or from ``--vary key=v1,v2``
(cartesian product). The first configuration is the baseline; the table shows every other
configuration's values with their change against it, mmtests style: ``1234 (+15.2%)``.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from reclaimlab.errors import Problem, ScenarioError
from reclaimlab.overrides import Override, parse_value
from reclaimlab.result import RunResult, counter_sort_key, split_counter
from reclaimlab.scenario import Scenario, load

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CompareResult",
    "Config",
    "Row",
    "compare",
    "expand",
    "expand_range",
    "format_cell",
    "parse_vary",
    "split_values",
]


@dataclass(frozen=True)
class Config:
    name: str
    overrides: tuple[Override, ...]


def split_values(text: str) -> list[str]:
    """Split ``v1,v2,...`` at top-level commas (not inside [], {} or quotes)."""
    out: list[str] = []
    depth, quote, start = 0, "", 0
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return out


#: ``start..stop`` or ``start..stop:step`` (numbers; stop included).
_RANGE = re.compile(r"(-?\d+(?:\.\d+)?)\.\.(-?\d+(?:\.\d+)?)(?::(\d+(?:\.\d+)?))?")
#: The most values one range may expand to (a typo such as 1..1000000 is refused, not run).
MAX_RANGE_VALUES = 1000


def expand_range(text: str) -> list[str] | None:
    """``"5..40:5"`` -> ["5", "10", ..., "40"] (stop included, step 1 by default); None if
    ``text`` is not a range. Decimal arithmetic, so ``0.1..0.3:0.1`` gives 0.1, 0.2, 0.3."""
    m = _RANGE.fullmatch(text.strip())
    if m is None:
        return None
    start, stop = Decimal(m[1]), Decimal(m[2])
    step = Decimal(m[3] or "1")
    if step <= 0:
        raise ValueError(f"--vary: range {text!r}: the step must be > 0")
    if stop < start:
        raise ValueError(f"--vary: range {text!r}: expected start <= stop")
    count = int((stop - start) / step) + 1
    if count > MAX_RANGE_VALUES:
        raise ValueError(f"--vary: range {text!r} has {count} values; at most {MAX_RANGE_VALUES}")
    return [str(start + k * step) for k in range(count)]


def parse_vary(spec: str) -> tuple[str, list[tuple[str, Any]]]:
    """``"kernel.zswap.enabled=true,false"`` -> (key, [("true", True), ("false", False)]).
    A value ``start..stop[:step]`` stands for every number from start to stop
    (``kernel.zswap.max_pool_percent=5..40:5``)."""
    key, sep, values = spec.partition("=")
    if not sep or not key.strip() or not values.strip():
        raise ValueError(f"--vary: expected key=value1,value2,... or key=start..stop:step; got {spec!r}")
    texts: list[str] = []
    for v in split_values(values):
        texts += expand_range(v) or [v]
    return key.strip(), [(v, parse_value(v)) for v in texts]


def configs_from_vary(varies: Sequence[str]) -> list[Config]:
    axes = [parse_vary(v) for v in varies]
    configs = []
    for combo in itertools.product(*(values for _, values in axes)):
        name = ", ".join(f"{key}={text}" for (key, _), (text, _) in zip(axes, combo, strict=True))
        ovs = tuple(Override(key, value, f"--vary {key}={text}", text) for (key, _), (text, value) in zip(axes, combo, strict=True))
        configs.append(Config(name, ovs))
    return configs


def configs_from_scenario(scenario: Scenario) -> list[Config]:
    if scenario.compare is None or not scenario.compare.configs:
        raise ScenarioError.single(scenario.file, "no configurations to compare: add [compare] configs to the scenario or pass --vary")
    return [Config(c.name, tuple(c.overrides())) for c in scenario.compare.configs]


def expand(scenario: Scenario, vary: Sequence[str] = ()) -> list[tuple[Config, Scenario]]:
    """Every configuration with its validated scenario; all problems raised together."""
    try:
        configs = configs_from_vary(vary) if vary else configs_from_scenario(scenario)
    except ValueError as e:
        raise ScenarioError.single(scenario.file, str(e)) from None
    out: list[tuple[Config, Scenario]] = []
    problems: list[Problem] = []
    for cfg in configs:
        try:
            out.append((cfg, scenario.with_overrides(cfg.overrides)))
        except ScenarioError as e:
            problems += e.problems
    if problems:
        raise ScenarioError(scenario.file, problems)
    return out


@dataclass(frozen=True)
class Row:
    label: str
    source: str  # counter source, or "phase"
    values: tuple[float | int | None, ...]  # per configuration; None = absent


def format_number(value: float | int) -> str:
    if isinstance(value, int):
        return str(value)
    return f"{value:.1f}"


def format_cell(value: float | int | None, base: float | int | None, is_baseline: bool) -> str:
    """``1234 (+15.2%)`` against the baseline; ``-`` when absent."""
    if value is None:
        return "-"
    text = format_number(value)
    if is_baseline:
        return text
    if base is None:
        return f"{text} (n/a)"
    if base == 0:
        return f"{text} (+0.0%)" if value == 0 else f"{text} (n/a)"
    return f"{text} ({(value - base) / abs(base) * 100:+.1f}%)"


@dataclass
class CompareResult:
    scenario: str
    configs: list[tuple[Config, RunResult]]
    #: The scenario's ``[compare] baseline`` (tables default to the first configuration).
    baseline: str | None = None

    @property
    def names(self) -> list[str]:
        return [c.name for c, _ in self.configs]

    def rows(self, patterns: Sequence[str] = (), show_all: bool = False, with_phases: bool = True) -> list[Row]:
        """Counter rows (sorted by source, then name) then per-phase accesses/s rows.

        ``patterns`` (fnmatch, on the full key) select counters; rows absent or zero in every
        configuration are skipped unless ``show_all``.
        """
        keys: set[str] = set()
        for _, r in self.configs:
            keys.update(r.counters)
        rows: list[Row] = []
        for key in sorted(keys, key=counter_sort_key):
            if patterns and not any(fnmatch.fnmatchcase(key, p) for p in patterns):
                continue
            values = tuple(r.counters.get(key) for _, r in self.configs)
            if not show_all and all(not v for v in values):
                continue
            rows.append(Row(key, split_counter(key)[0], values))
        if not with_phases:
            return rows
        phases: dict[tuple[str, str], None] = {}
        for _, r in self.configs:
            for p in r.phase_records:
                phases.setdefault((p["process"], p["phase"]), None)
        for proc, phase in phases:
            rates: tuple[float | int | None, ...] = tuple(_phase_rate(r, proc, phase) for _, r in self.configs)
            rows.append(Row(f"{proc}/{phase} accesses/s", "phase", rates))
        return rows

    def frame(self, patterns: Sequence[str] = (), show_all: bool = False) -> pd.DataFrame:
        """Rows x configurations; NaN where a counter is absent."""
        import pandas as pd

        rows = self.rows(patterns, show_all)
        data = {name: [float("nan") if row.values[i] is None else row.values[i] for row in rows] for i, name in enumerate(self.names)}
        return pd.DataFrame(data, index=pd.Index([r.label for r in rows], name="metric"))

    def tidy(self) -> pd.DataFrame:
        """Every configuration's ``RunResult.tidy()`` rows, with the configuration's name and one
        column per overridden key holding its value (not ``"k=v"`` strings), so that the table
        loads back into pandas, a spreadsheet or R as it is."""
        import pandas as pd

        frames = []
        keys = sorted({o.key for c, _ in self.configs for o in c.overrides})
        for c, r in self.configs:
            f = r.tidy()
            f.insert(0, "config", c.name)
            values = {o.key: o.value for o in c.overrides}
            for i, k in enumerate(keys):
                v = values.get(k)
                f.insert(1 + i, k, None if v is None else (v if isinstance(v, (bool, int, float, str)) else json.dumps(v, sort_keys=True)))
            frames.append(f)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "scenario": self.scenario,
            "configs": [{"name": c.name, "overrides": [str(o) for o in c.overrides], "result": r.to_dict()} for c, r in self.configs],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=indent, allow_nan=False) + "\n"


def _phase_rate(r: RunResult, proc: str, phase: str) -> float | None:
    for p in r.phase_records:
        if p["process"] == proc and p["phase"] == phase:
            return float(p["accesses_per_s"])
    return None


def compare(
    scenario: Scenario | str | os.PathLike[str],
    vary: Sequence[str] = (),
    overrides: Iterable[str] = (),
    progress: bool = False,
    run: Callable[..., RunResult] | None = None,
    interval_s: float | None = None,
    jobs: int = 1,
    cache: bool = False,
    ray_address: str | None = None,
) -> CompareResult:
    """Run every configuration (sharing the scenario's seed) and collect results.
    ``interval_s``: sample the counters over time (the simulator's ``--interval``).
    ``jobs``: configurations run at once, on threads (0: one per CPU); ``ray_address``:
    run them on that Ray cluster instead; ``cache``: reuse results of identical configurations
    (reclaimlab.sweep). Results are the same in every case. A custom ``run`` runs serially."""
    if isinstance(scenario, Scenario):
        base = scenario.with_overrides(overrides) if overrides else scenario
    else:
        base = load(scenario, overrides)
    configs = expand(base, vary)
    labels = [f"[{i + 1}/{len(configs)}] {cfg.name}" for i, (cfg, _) in enumerate(configs)]
    baseline = base.compare.baseline if base.compare is not None and not vary else None
    if run is None:
        from reclaimlab import sweep

        runs = sweep.run_all(
            [(label, sc) for label, (_, sc) in zip(labels, configs, strict=True)],
            jobs=jobs,
            progress=progress,
            interval_s=interval_s,
            cache=cache,
            ray_address=ray_address,
        )
        return CompareResult(base.name or "scenario", [(cfg, r) for (cfg, _), r in zip(configs, runs, strict=True)], baseline)
    results = []
    for label, (cfg, sc) in zip(labels, configs, strict=True):
        extra: dict[str, Any] = {"interval_s": interval_s} if interval_s else {}
        results.append((cfg, run(sc, progress=progress, label=label, **extra)))
    return CompareResult(base.name or "scenario", results, baseline)
