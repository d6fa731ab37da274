"""Every bundled scenario's results, for checking that a change moved no number it should not.

    python tools/results_digest.py write DIR     # run every scenario under scenarios/ (and each
                                                 # [compare] configuration) into DIR/<name>.json
    python tools/results_digest.py compare A B   # which results differ between two such dirs
    python tools/results_digest.py compare A B --added-ok   # B may add keys (a new counter,
                                                 # a new result section); every value A has is
                                                 # unchanged

`write` uses the checkout's CLI (`.venv/bin/reclaimlab`, after `make build`) with the result
cache off; `compare` looks at counters, phases and stats and ignores provenance, the lowered
config and wall-clock fields. A phase whose outcome changed (a process now OOM-killed, cut by
the time limit, ...) is named on its own `OUTCOME` line: such a change is easy to miss among
the many numbers a model change moves. How the restructure of issue 8 was shown bit-identical: `write`
before and after each change, then `compare`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
IGNORED = {"provenance", "config", "wall_s", "wall_time_s"}


def write(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    cli = str(ROOT / ".venv" / "bin" / "reclaimlab")
    failed = 0
    for scenario in sorted((ROOT / "scenarios").rglob("*.toml")):
        name = "_".join(scenario.relative_to(ROOT).with_suffix("").parts)
        has_compare = any(line.strip().startswith(("[compare]", "[[compare")) for line in scenario.read_text().splitlines())
        cmd = [cli, "compare" if has_compare else "run", str(scenario), "--json", str(out / f"{name}.json"), "--no-progress"]
        if has_compare:
            cmd.append("--no-cache")
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            failed += 1
            print(f"FAILED {scenario.relative_to(ROOT)}: {r.stderr.strip().splitlines()[-1:]}")
    print(f"wrote {out}")
    return 1 if failed else 0


def _strip(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _strip(v) for k, v in d.items() if k not in IGNORED}
    if isinstance(d, list):
        return [_strip(x) for x in d]
    return d


def _changed(a: Any, b: Any, path: str = "") -> list[str]:
    """Where ``b`` does not hold ``a``'s values: keys of ``a`` missing or different in ``b``
    (keys only ``b`` has are not changes)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for k, v in a.items() for p in (_changed(v, b[k], f"{path}/{k}") if k in b else [f"{path}/{k} missing"])]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b, strict=True)) for p in _changed(x, y, f"{path}[{i}]")]
    return [] if a == b else [path or "/"]


def _outcomes(d: Any, path: str = "") -> dict[str, str]:
    """Every phase record's outcome, by where it sits in the result and its process/phase."""
    out: dict[str, str] = {}
    if isinstance(d, dict):
        if isinstance(d.get("outcome"), str) and "phase" in d:
            out[f"{path} {d.get('process', '?')}/{d['phase']}"] = d["outcome"]
        for k, v in d.items():
            out.update(_outcomes(v, f"{path}/{k}"))
    elif isinstance(d, list):
        for i, x in enumerate(d):
            out.update(_outcomes(x, f"{path}[{i}]"))
    return out


def outcome_changes(old: Any, new: Any) -> list[str]:
    """Phases whose outcome differs between two results (phases only one side has are left out)."""
    a, b = _outcomes(old), _outcomes(new)
    return [f"{k}: {a[k]} -> {b[k]}" for k in a if k in b and a[k] != b[k]]


def compare(a: Path, b: Path, added_ok: bool = False) -> int:
    differ = 0
    for f in sorted(a.glob("*.json")):
        g = b / f.name
        if not g.exists():
            print(f"MISSING {f.name}")
            differ += 1
            continue
        old, new = _strip(json.loads(f.read_text())), _strip(json.loads(g.read_text()))
        changed = _changed(old, new) if added_ok else ([] if old == new else ["/"])
        if changed:
            print(f"DIFF {f.name}" + (f": {', '.join(changed[:5])}" if added_ok else ""))
            for line in outcome_changes(old, new):
                print(f"  OUTCOME {line}")
            differ += 1
    print(("identical" + (" (keys added only)" if added_ok else "")) if not differ else f"{differ} differ")
    return 1 if differ else 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "write":
        return write(Path(argv[1]))
    if len(argv) in (3, 4) and argv[0] == "compare" and argv[3:] in ([], ["--added-ok"]):
        return compare(Path(argv[1]), Path(argv[2]), added_ok=argv[3:] == ["--added-ok"])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
