"""The ``reclaimlab`` command: run and compare scenarios.

Exit codes: 0 success, 1 the simulator is not available or failed, 2 bad input (the scenario,
an override, or the command line).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

import reclaimlab
from reclaimlab import native
from reclaimlab.compare import CompareResult, format_cell, format_number
from reclaimlab.compare import compare as run_compare
from reclaimlab.errors import ScenarioError
from reclaimlab.result import RunResult, counter_sort_key, split_counter

app = typer.Typer(
    name="reclaimlab",
    help="Linux reclaim/swap/zswap: run a scenario in the simulator and compare configurations.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

EXIT_UNAVAILABLE = 1
EXIT_BAD_INPUT = 2


def _version(value: bool) -> None:
    if value:
        nv = native.native_version()
        built = "native module built" if _native_built() else "native module not built"
        typer.echo(f"reclaimlab {reclaimlab.__version__} ({built}{', ' + nv if nv else ''})")
        raise typer.Exit()


def _native_built() -> bool:
    try:
        native.core()
    except native.NativeUnavailable:
        return False
    return True


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", help="Show the version and exit.", callback=_version, is_eager=True)] = False,
) -> None:
    """reclaimlab: a deterministic simulator of Linux reclaim, swap and zswap."""


def _fail(message: str, code: int) -> NoReturn:
    typer.echo(message, err=True)
    raise typer.Exit(code)


SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", metavar="KEY=VALUE", help="Override a scenario key, e.g. kernel.zswap.enabled=false (repeatable)."),
]
JsonOption = Annotated[Path | None, typer.Option("--json", metavar="OUT", help="Write the result as JSON to OUT ('-' for stdout).")]
ProgressOption = Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar on a terminal.")]


def _console(stderr: bool) -> Console:
    """A console for tables: the terminal's width on a terminal; otherwise (a pipe, a file)
    unlimited, so that tables keep their natural width instead of wrapping at 80 columns."""
    console = Console(stderr=stderr)
    if not console.is_terminal:
        console = Console(stderr=stderr, width=100_000)
    return console


def _write_json(out: Path, text: str) -> None:
    if str(out) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        out.write_text(text, encoding="utf-8")


def counters_table(result: RunResult) -> Table:
    table = Table(title=Text(f"{result.scenario}: counters"), title_justify="left")
    table.add_column("source")
    table.add_column("counter")
    table.add_column("value", justify="right")
    previous = None
    for key in sorted(result.counters, key=counter_sort_key):
        source, name = split_counter(key)
        if previous is not None and source != previous:
            table.add_section()
        table.add_row(Text(source if source != previous else ""), Text(name), Text(str(result.counters[key])))
        previous = source
    return table


def phases_table(result: RunResult) -> Table:
    table = Table(title=Text(f"{result.scenario}: phases"), title_justify="left")
    # The outcome column only when a phase did not simply complete (e.g. cut short by max_time).
    outcomes = any(r.get("outcome") not in (None, "completed") for r in result.phase_records)
    columns = [("process", "left"), ("phase", "left"), ("elapsed s", "right"), ("accesses", "right"), ("accesses/s", "right")]
    for col, justify in columns + ([("outcome", "left")] if outcomes else []):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in result.phase_records:
        cells = [r["process"], r["phase"], f"{r['elapsed_s']:.3f}", str(r["accesses"]), f"{r['accesses_per_s']:.1f}"]
        if outcomes:
            cells.append(str(r.get("outcome") or ""))
        table.add_row(*(Text(c) for c in cells))
    return table


def compare_table(result: CompareResult, patterns: Sequence[str], show_all: bool) -> Table:
    names = result.names
    table = Table(title=Text(f"{result.scenario}: compare (baseline {names[0]})"), title_justify="left")
    table.add_column("")
    for name in names:
        table.add_column(Text(name), justify="right")
    previous = None
    for row in result.rows(patterns, show_all):
        if previous is not None and row.source != previous:
            table.add_section()
        previous = row.source
        base = row.values[0]
        table.add_row(Text(row.label), *(Text(format_cell(v, base, i == 0)) for i, v in enumerate(row.values)))
    return table


@app.command()
def run(
    scenario: Annotated[Path, typer.Argument(help="The scenario file (TOML).")],
    set_: SetOption = None,
    json_out: JsonOption = None,
    progress: ProgressOption = True,
) -> None:
    """Run SCENARIO in the simulator; print its counters and per-phase rates."""
    try:
        result = reclaimlab.run(scenario, overrides=set_ or (), progress=progress)
    except ScenarioError as e:
        _fail(str(e), EXIT_BAD_INPUT)
    except native.NativeUnavailable as e:
        _fail(f"reclaimlab: {e}", EXIT_UNAVAILABLE)
    to_stdout = json_out is not None and str(json_out) == "-"
    console = _console(stderr=to_stdout)
    console.print(counters_table(result))
    console.print(phases_table(result))
    if json_out is not None:
        _write_json(json_out, result.to_json())


@app.command()
def compare(
    scenario: Annotated[Path, typer.Argument(help="The scenario file (TOML).")],
    vary: Annotated[
        list[str] | None,
        typer.Option("--vary", metavar="KEY=V1,V2,...", help="Compare these values of KEY (repeatable: cartesian product)."),
    ] = None,
    set_: SetOption = None,
    json_out: JsonOption = None,
    counters: Annotated[
        list[str] | None,
        typer.Option("--counters", metavar="PATTERN", help="Only counters matching PATTERN, e.g. 'vmstat.*swp*' (repeatable)."),
    ] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Also show counters that are zero in every configuration.")] = False,
    progress: ProgressOption = True,
) -> None:
    """Run SCENARIO's configurations (its [compare] configs, or --vary) and tabulate the differences."""
    try:
        result = run_compare(scenario, vary=vary or (), overrides=set_ or (), progress=progress)
    except ScenarioError as e:
        _fail(str(e), EXIT_BAD_INPUT)
    except native.NativeUnavailable as e:
        _fail(f"reclaimlab: {e}", EXIT_UNAVAILABLE)
    to_stdout = json_out is not None and str(json_out) == "-"
    _console(stderr=to_stdout).print(compare_table(result, counters or (), show_all))
    if json_out is not None:
        _write_json(json_out, result.to_json())


__all__ = ["app", "compare_table", "counters_table", "format_number", "phases_table"]
