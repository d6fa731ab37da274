"""Repeats over seeds (``--seeds N``): mean, a 95% confidence interval, and mmtests-style
significance marks against the baseline.

The simulator is deterministic, so the spread comes from the workload's seed only (page
contents and access order). Each configuration runs with seeds ``seed .. seed+N-1`` (the
scenario's seed first); configurations share each seed (common random numbers).

Interval: mean ± t(0.975, n-1) * s / sqrt(n) (Student's t). Significance, as mmtests'
compare-kernels marks it: a difference to the baseline is significant when Welch's t-test
rejects equal means at the 5% level; the change is then printed between asterisks
(``*+12.3%*``) instead of parentheses (``(+1.2%)``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reclaimlab import summary

if TYPE_CHECKING:
    from reclaimlab.compare import CompareResult
    from reclaimlab.result import RunResult

__all__ = ["Repeated", "ci95", "t975", "welch_significant"]

#: Two-sided 95% quantiles of Student's t, t(0.975, df), for df = 1..30 (standard tables).
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
_T975_LARGE = ((40, 2.021), (60, 2.000), (120, 1.980))


def t975(df: float) -> float:
    """t(0.975, df); a fractional df (Welch) is rounded down, which errs towards "not significant"."""
    d = max(1, math.floor(df))
    if d <= len(_T975):
        return _T975[d - 1]
    for limit, t in _T975_LARGE:
        if d <= limit:
            return t
    return 1.960


def ci95(values: Sequence[float]) -> tuple[float, float]:
    """(mean, half-width of the 95% confidence interval); half-width 0 for one value."""
    m = statistics.fmean(values)
    if len(values) < 2:
        return m, 0.0
    return m, t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def welch_significant(a: Sequence[float], b: Sequence[float]) -> bool:
    """Welch's t-test at the 5% level. Samples without spread differ significantly when their
    means differ (a deterministic difference), and not when they are equal."""
    if len(a) < 2 or len(b) < 2:
        return False
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return ma != mb
    t = abs(ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va**2 / (len(a) - 1) if va else 0.0) + (vb**2 / (len(b) - 1) if vb else 0.0))
    return t > t975(df)


@dataclass
class Repeated:
    """The same compare run once per seed."""

    seeds: list[int]
    runs: list[CompareResult]

    @property
    def n(self) -> int:
        return len(self.seeds)

    @property
    def names(self) -> list[str]:
        return self.runs[0].names

    def results(self, i: int) -> list[RunResult]:
        """Configuration ``i``'s result for every seed."""
        return [run.configs[i][1] for run in self.runs]

    def values(self, i: int, h: summary.Headline) -> list[float]:
        return [float(v) for r in self.results(i) if (v := h.get(r)) is not None]

    def cell(self, i: int, h: summary.Headline, bi: int) -> str:
        """``mean ±ci``, and against the baseline ``(+1.2%)`` or, significant, ``*+12.3%*``."""
        values = self.values(i, h)
        if not values:
            return "-"
        mean, half = ci95(values)
        text = f"{summary.fmt_value(mean, h.unit)} ±{summary.fmt_value(half, h.unit) if half else 0}"
        if i == bi:
            return text
        base = self.values(bi, h)
        if not base:
            return text
        bm = statistics.fmean(base)
        if bm == 0:
            return text if mean == 0 else f"{text} (new)"
        pct = summary.change(mean, bm)
        return f"{text} *{pct}*" if welch_significant(values, base) else f"{text} ({pct})"

    def rank(self, metric: summary.Headline) -> list[tuple[str, float]]:
        """Configurations that ran as asked with every seed, by the metric's mean, best first."""
        scored = []
        for i, name in enumerate(self.names):
            if any(summary.banners(r) for r in self.results(i)):
                continue
            values = self.values(i, metric)
            if values:
                scored.append((name, statistics.fmean(values)))
        return sorted(scored, key=lambda x: -x[1] if metric.better == "higher" else x[1])

    def winner_note(self, best: str, ranked: Sequence[tuple[str, float]], metric: summary.Headline) -> str:
        if len(ranked) < 2:
            return ""
        second = ranked[1][0]
        a, b = self.values(self.names.index(best), metric), self.values(self.names.index(second), metric)
        verdict = "significant" if welch_significant(a, b) else "NOT significant"
        return f"; over {second}: {verdict} at 95% (Welch's t-test, {self.n} seeds)"

    def banner_counts(self) -> list[tuple[str, str]]:
        """Per configuration with a banner in some seed: (name, "OOM in 2/5 seeds ...")."""
        out = []
        for i, name in enumerate(self.names):
            hit = [s for s, r in zip(self.seeds, self.results(i), strict=True) if summary.banners(r)]
            if hit:
                out.append((name, f"did not run as asked with {len(hit)}/{self.n} seeds ({', '.join(map(str, hit))})"))
        return out

    def tidy(self) -> Any:
        """Every seed's tidy compare table with a ``seed`` column (pandas)."""
        import pandas as pd

        frames = []
        for seed, run in zip(self.seeds, self.runs, strict=True):
            f = run.tidy()
            f.insert(1, "seed", seed)
            frames.append(f)
        return pd.concat(frames, ignore_index=True)

    @staticmethod
    def marks_legend() -> str:
        return "change vs baseline: (+1.2%) not significant, *+1.2%* significant at 95% (Welch's t-test, as mmtests marks it)"

    def to_dict(self) -> dict[str, Any]:
        """Every seed's compare, and per configuration and headline metric: mean, ci95, n."""
        results0 = [r for _, r in self.runs[0].configs]
        rows = summary.headline(results0)
        table: dict[str, dict[str, Any]] = {}
        for i, name in enumerate(self.names):
            table[name] = {}
            for h in rows:
                if h.unit == "text":
                    continue
                values = self.values(i, h)
                if values:
                    mean, half = ci95(values)
                    table[name][h.key] = {"mean": mean, "ci95": half, "n": len(values), "values": values}
        return {"kind": "compare-seeds", "seeds": list(self.seeds), "summary": table, "runs": [r.to_dict() for r in self.runs]}
