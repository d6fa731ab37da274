"""Analytic mode (engine.accesses) against exact mode on the validation suite: both re-simulate
every stored kernel run (results/validation/*.json, as `make validation-report` does) and this
prints, per scenario (and configuration), the median |relative error| of the counters that are
non-zero on either side and of the phase figures (times, rates), how many metrics fall in the
kernel runs' spread, and the share of accesses analytic mode drew in bulk
(docs/model/analytic.md).

    python tools/analytic_validation.py OUTDIR     # OUTDIR/exact/*.json, OUTDIR/analytic/*.json
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODES = ("exact", "analytic")


def run(out: Path) -> None:
    cli = str(ROOT / ".venv" / "bin" / "reclaimlab")
    for mode in MODES:
        (out / mode).mkdir(parents=True, exist_ok=True)
        for f in sorted((ROOT / "results" / "validation").glob("*.json")):
            if f.stem.startswith("codec-check"):
                continue
            cmd = [cli, "validate", str(ROOT / "scenarios" / "validation" / f"{f.stem}.toml"), "--set", f"engine.accesses={mode}"]
            if '"kind": "validate-compare"' in f.read_text():
                cmd.append("--compare")
            cmd += ["--kernel-results", str(f), "--json", str(out / mode / f.name)]
            r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
            if r.returncode != 0:
                sys.exit(f"{mode} {f.stem}: {r.stderr.strip().splitlines()[-1:]}")


def parts(d: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if "rows" in d:
        return [("", d)]
    return [(c["name"], c["validate"]) for c in d["configs"]]


def errors(rows: list[dict[str, Any]], phase: bool = False) -> list[float]:
    """|relative error| of the counters (or, with `phase`, of the phase figures: times, rates)."""
    return [
        abs(r["rel_error"])
        for r in rows
        if (r.get("source") == "phase") == phase
        and r.get("rel_error") is not None
        and not math.isinf(r["rel_error"])
        and (r["sim"] or r["kernel"]["median"])
    ]


def inside(rows: list[dict[str, Any]]) -> tuple[int, int]:
    judged = [r for r in rows if r.get("inside") is not None]
    return sum(bool(r["inside"]) for r in judged), len(judged)


def summary(out: Path) -> str:
    lines = [
        "| scenario | counters: median \\|rel. error\\| exact | analytic | phases: exact | analytic "
        "| in spread exact | analytic | accesses drawn in bulk |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    every: dict[str, list[float]] = {m: [] for m in MODES}
    every_phase: dict[str, list[float]] = {m: [] for m in MODES}
    spread = {m: [0, 0] for m in MODES}
    for f in sorted((out / "exact").glob("*.json")):
        both = [parts(json.loads((out / m / f.name).read_text())) for m in MODES]
        for (name, de), (_, da) in zip(*both, strict=True):
            cells = []
            for m, d in zip(MODES, (de, da), strict=True):
                errs = errors(d["rows"])
                every[m] += errs
                cells.append(f"{statistics.median(errs) * 100:.1f}%")
            for m, d in zip(MODES, (de, da), strict=True):
                errs = errors(d["rows"], phase=True)
                every_phase[m] += errs
                cells.append(f"{statistics.median(errs) * 100:.1f}%" if errs else "-")
            for m, d in zip(MODES, (de, da), strict=True):
                k, n = inside(d["rows"])
                spread[m][0] += k
                spread[m][1] += n
                cells.append(f"{k}/{n}")
            sim = da["sim"]
            bulk = (sim.get("stats") or {}).get("analytic_accesses") or 0
            total = sum(p.get("accesses", 0) for p in sim.get("phases", []))
            cells.append(f"{bulk * 100 / max(total, 1):.0f}%")
            lines.append(f"| {f.stem}{f' [{name}]' if name else ''} | " + " | ".join(cells) + " |")
    cells = (
        [f"{statistics.median(every[m]) * 100:.1f}%" for m in MODES]
        + [f"{statistics.median(every_phase[m]) * 100:.1f}%" for m in MODES]
        + [f"{spread[m][0]}/{spread[m][1]}" for m in MODES]
    )
    lines.append("| **all** | " + " | ".join(cells) + " | |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)  # not a directory to write into (a `--help` here once became one)
    target = Path(sys.argv[1])
    run(target)
    print(summary(target), end="")
