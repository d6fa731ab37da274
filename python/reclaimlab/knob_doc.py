"""The knob table of docs/scenario.md, made from the core's declarations (``native.knobs()``),
and its table of cgroup files (``reclaimlab.scenario.cgroup_files``).

``python -m reclaimlab.knob_doc docs/scenario.md`` (``make docs-knobs``) rewrites the tables
between the markers; tests/test_knob_doc.py fails while the page is out of date.
"""

from __future__ import annotations

import sys
from pathlib import Path

from reclaimlab import native
from reclaimlab.scenario import cgroup_files

__all__ = ["BEGIN", "END", "table", "update"]

BEGIN = "<!-- knobs: generated from _core.knobs() by `make docs-knobs`; do not edit -->"
END = "<!-- /knobs -->"


def _type(k: native.Knob) -> str:
    if k.choices:
        return " \\| ".join(f"`{c!r}`".replace("'", '"') for c in k.choices)
    if k.type == "int":
        lo = "" if k.min is None else str(k.min)
        hi = "" if k.max is None else str(k.max)
        return f"int {lo}..{hi}" if hi else f"int ≥ {lo}"
    return k.type


def _default(k: native.Knob) -> str:
    if k.default is None:
        return "computed"
    if isinstance(k.default, bool):
        return f"`{str(k.default).lower()}`"
    if isinstance(k.default, str):
        return f'`"{k.default}"`'
    return f"`{k.default}`"


def table() -> str:
    """The markdown table: one row per knob, keys relative to ``[kernel]``."""
    rows = ["| key | type | default | file | meaning |", "|---|---|---|---|---|"]
    for k in native.knobs():
        key = k.key.removeprefix("kernel.")
        rows.append(f"| `{key}` | {_type(k)} | {_default(k)} | `{k.kernel_file}` | {k.doc} |")
    return "\n".join(rows)


def _replace(text: str, begin: str, end: str, body: str) -> str:
    head, sep, rest = text.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        raise ValueError(f"the page has no {begin!r} ... {end!r} block")
    return f"{head}{begin}\n{body}\n{end}{tail}"


def update(text: str) -> str:
    """``text`` with the parts between the markers replaced by the current tables."""
    text = _replace(text, BEGIN, END, table())
    return _replace(text, cgroup_files.BEGIN, cgroup_files.END, cgroup_files.table())


def main(argv: list[str]) -> int:
    for name in argv:
        path = Path(name)
        path.write_text(update(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
