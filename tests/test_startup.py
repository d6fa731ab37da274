"""Start-up stays light (issue 17, item 3): the CLI and a plain `run` import neither pandas
(only the CSV/Parquet tables need it) nor numpy (only trace conversion does). `make bench`
reports the CPU figure (tools/bench_startup.py); this pins the mechanism."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "validation" / "swap-only.toml"

PROBE = """
import sys
from reclaimlab.cli import app
try:
    app(["run", sys.argv[1]], standalone_mode=False)
except SystemExit:
    pass
print(sorted(m for m in ("pandas", "numpy", "pyarrow") if m in sys.modules))
"""


def test_a_plain_run_imports_neither_pandas_nor_numpy() -> None:
    r = subprocess.run([sys.executable, "-c", PROBE, str(SCENARIO)], capture_output=True, text=True, check=True)
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout[-500:]


def test_a_run_with_csv_output_still_writes_the_table(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    probe = PROBE.replace('["run", sys.argv[1]]', '["run", sys.argv[1], "--csv", sys.argv[2]]')
    r = subprocess.run([sys.executable, "-c", probe, str(SCENARIO), str(out)], capture_output=True, text=True, check=True)
    assert "pandas" in r.stdout.strip().splitlines()[-1]
    assert out.read_text().splitlines()[0].count(",") >= 2
