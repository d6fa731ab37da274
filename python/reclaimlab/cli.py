"""The ``reclaimlab`` command: run, compare and validate scenarios; the lab's probe and restore.

Exit codes: 0 success, 1 the simulator or the lab is not available or failed (lab: not root,
the lock is held, a runner failed, the run timed out ...), 2 bad input (the scenario, an
override, the command line, or a scenario this host cannot run), 130/143 a lab run interrupted
by SIGINT/SIGTERM (after restoring the host).
"""

from __future__ import annotations

import enum
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

import reclaimlab
from reclaimlab import native
from reclaimlab.compare import compare as run_compare
from reclaimlab.compare import format_number
from reclaimlab.errors import ScenarioError
from reclaimlab.result import RunResult
from reclaimlab.views import compare_view, counters_table, phases_table, run_view, zsmalloc_tables

if TYPE_CHECKING:
    from reclaimlab.compare import CompareResult
    from reclaimlab.ranking import RankingResult
    from reclaimlab.stats import Repeated
    from reclaimlab.validate import ValidateResult

#: With ``validate --compare``, the rows shown per configuration unless --counters says otherwise.
KEY_ROWS = ("vmstat.zswp*", "vmstat.pswp*", "zswap.pool_total_size", "zswap.stored_pages", "zswap.pool_limit_hit")

app = typer.Typer(
    name="reclaimlab",
    help="Linux reclaim/swap/zswap: run a scenario in the simulator or on the real kernel, compare configurations, validate.",
    # `--install-completion` / `--show-completion` for bash, zsh, fish
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Help texts are plain text: "[compare]" is the scenario's table, not rich markup.
    rich_markup_mode=None,
)
lab_app = typer.Typer(
    name="lab",
    help="The lab (the real-kernel backend): what this host offers, and undoing a crashed run's changes.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(lab_app)

EXIT_UNAVAILABLE = 1
EXIT_BAD_INPUT = 2
#: 128 + SIGINT, as a shell reports a command stopped by Ctrl-C.
EXIT_INTERRUPTED = 130


class Backend(enum.StrEnum):
    sim = "sim"
    kernel = "kernel"
    vm = "vm"  # the VM lab: a QEMU guest with one of Debian's kernels (docs/vmlab.md)


class LabBackend(enum.StrEnum):
    kernel = "kernel"
    vm = "vm"


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
CountersOption = Annotated[
    list[str] | None,
    typer.Option("--counters", metavar="PATTERN", help="Only counters matching PATTERN, e.g. 'vmstat.*swp*' (repeatable)."),
]


def check_output_path(value: Path | None) -> Path | None:
    """An output file option (--json OUT) checked before the run: a run of hours must not end
    in a traceback because OUT cannot be written. '-' is stdout."""
    if value is None or str(value) == "-":
        return value
    parent = value.parent if str(value.parent) else Path(".")
    if value.is_dir():
        raise typer.BadParameter(f"{value} is a directory; expected a file to write")
    if not parent.is_dir():
        raise typer.BadParameter(f"cannot write {value}: the directory {parent} does not exist")
    writable = os.access(value, os.W_OK) if value.exists() else os.access(parent, os.W_OK | os.X_OK)
    if not writable:
        raise typer.BadParameter(f"cannot write {value}: permission denied")
    return value


JsonOption = Annotated[
    Path | None,
    typer.Option("--json", metavar="OUT", help="Write the result as JSON to OUT ('-' for stdout).", callback=check_output_path),
]
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
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as e:  # checked before the run (check_output_path); changed since
            _fail(f"reclaimlab: cannot write {out}: {e.strerror or e}", EXIT_UNAVAILABLE)


SeedsOption = Annotated[
    int,
    typer.Option(
        "--seeds", min=1, metavar="N", help="Repeat with N seeds (the scenario's and the next N-1): mean, 95% CI, significance marks."
    ),
]


class Per(enum.StrEnum):
    access = "access"
    second = "second"


IntervalOption = Annotated[
    str | None,
    typer.Option(
        "--interval",
        metavar="DURATION",
        help="Simulator: sample every counter this often in simulated time, e.g. 100ms (the result's series; --csv/--parquet, plot).",
    ),
]
CsvOption = Annotated[Path | None, typer.Option("--csv", metavar="OUT", help="Write a tidy long table (one value per row) as CSV.")]
ParquetOption = Annotated[Path | None, typer.Option("--parquet", metavar="OUT", help="Write the tidy long table as Parquet (pyarrow).")]


def _interval(text: str | None) -> float | None:
    """--interval as seconds; at least 1 ms (series times are kept to the millisecond)."""
    if text is None:
        return None
    from reclaimlab.units import parse_duration

    try:
        ns = parse_duration(text)
    except ValueError as e:
        _fail(f"reclaimlab: --interval: {e}", EXIT_BAD_INPUT)
    if ns < 1_000_000:
        _fail(f"reclaimlab: --interval: expected at least 1ms; got {text!r}", EXIT_BAD_INPUT)
    return ns / 1e9


def _write_tables(tidy: Callable[[], Any], csv_out: Path | None, parquet_out: Path | None) -> None:
    """The tidy table (pandas) as CSV and/or Parquet. ``tidy`` builds it only when one is asked
    for: importing pandas is a third of a small run's start-up."""
    if csv_out is None and parquet_out is None:
        return
    frame = tidy()
    if csv_out is not None:
        frame.to_csv(csv_out, index=False)
    if parquet_out is not None:
        frame.to_parquet(parquet_out, index=False)


TimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        metavar="SECONDS",
        help="Kernel backend: kill the runners and restore after this long (default: 10x the timed phases, at least 600 s).",
    ),
]
SampleOption = Annotated[
    float | None,
    typer.Option(
        "--sample-interval",
        metavar="SECONDS",
        help="Kernel backend: sample the counters this often (the result's series; each read of memory.stat flushes the memcg "
        "statistics). Default: the scenario's cgroups.memory_stat_interval, which this sets (also for the simulator in validate).",
    ),
]
BuildRunnerOption = Annotated[
    bool,
    typer.Option("--build-runner/--no-build-runner", help="Kernel backend: build the workload runner with cargo if it is not built."),
]

# --- VM lab options (docs/vmlab.md) ---------------------------------------------------------
VmKernelOption = Annotated[
    str | None,
    typer.Option(
        "--kernel", metavar="NAME", help="VM backend: the guest's kernel (debian-6.12, debian-6.1); default: the scenario's lab.kernel."
    ),
]
VmMglruOption = Annotated[
    bool | None,
    typer.Option(
        "--mglru/--no-mglru",
        help="Multi-gen LRU on or off: sets kernel.lru_gen.enabled (the model, and the VM guest; default: the scenario's, else off).",
    ),
]
VmMemoryOption = Annotated[
    str | None,
    typer.Option("--vm-memory", metavar="SIZE", help="VM backend: the guest's RAM (default: machine.memory; 1GiB when it is 'host')."),
]


TraceOption = Annotated[
    str | None,
    typer.Option(
        "--trace",
        metavar="G1,G2",
        help="Count tracepoints (vmscan, shrinker, zswap, compaction): the simulator's own counts, and the kernel's (this host's, "
        "--backend kernel; the VM guest's, --backend vm) as trace.* counters (docs/vmlab.md#tracing).",
    ),
]


def _with_mglru(set_: list[str] | None, mglru: bool | None, trace: str | None = None) -> list[str]:
    """--mglru/--no-mglru as the override of kernel.lru_gen.enabled (one fact: the simulator
    and the guest both read the knob); --trace as the override of the scenario's ``trace``."""
    out = [*(set_ or ()), *(() if mglru is None else (f"kernel.lru_gen.enabled={'true' if mglru else 'false'}",))]
    if trace is not None:
        groups = [g.strip() for g in trace.split(",") if g.strip()]
        out.append("trace=[" + ", ".join(json.dumps(g) for g in groups) + "]")
    return out


def _vm_options(kernel: str | None, vm_memory: str | None) -> dict[str, Any]:
    from reclaimlab.units import parse_size

    try:
        memory = parse_size(vm_memory) if vm_memory is not None else None
    except ValueError as e:
        _fail(f"reclaimlab: --vm-memory: {e}", EXIT_BAD_INPUT)
    return {"kernel": kernel, "memory": memory}


# --- end of the VM lab options ----------------------------------------------------------------


@contextmanager
def _input_errors() -> Iterator[None]:
    """A bad scenario (exit 2) or a missing native module (exit 1) as a message."""
    try:
        yield
    except ScenarioError as e:
        _fail(str(e), EXIT_BAD_INPUT)
    except native.NativeUnavailable as e:
        _fail(f"reclaimlab: {e}", EXIT_UNAVAILABLE)
    except KeyboardInterrupt:
        _fail("reclaimlab: interrupted (Ctrl-C); no result was written", EXIT_INTERRUPTED)


@contextmanager
def _unavailable(kind: type[Exception]) -> Iterator[None]:
    """An optional dependency that is missing (exit 1), as a message."""
    try:
        yield
    except kind as e:
        _fail(f"reclaimlab: {e}", EXIT_UNAVAILABLE)


@contextmanager
def _lab_errors() -> Iterator[None]:
    """Lab failures as messages and exit codes (the host is restored before they get here)."""
    from reclaimlab.lab.errors import LabError, LabInterrupted

    try:
        yield
    except LabInterrupted as e:
        _fail(f"reclaimlab: {e}", 128 + e.signum)
    except LabError as e:
        _fail(f"reclaimlab: {e}", EXIT_UNAVAILABLE)
    except KeyboardInterrupt:  # before the lab changed anything (afterwards: LabInterrupted)
        _fail("reclaimlab: interrupted", 128 + 2)


def _kernel_run(scenario: reclaimlab.Scenario, timeout: float | None, sample_interval: float | None, build_runner: bool) -> RunResult:
    from reclaimlab.backends import kernel

    with _lab_errors():
        return kernel.run(scenario, timeout_s=timeout, sample_interval_s=sample_interval, build=build_runner)
    raise AssertionError("unreachable")  # pragma: no cover - _lab_errors re-raises as typer.Exit


@app.command()
def run(
    scenario: Annotated[Path, typer.Argument(help="The scenario file (TOML).")],
    set_: SetOption = None,
    json_out: JsonOption = None,
    progress: ProgressOption = True,
    backend: Annotated[
        Backend,
        typer.Option("--backend", "-b", help="sim: the simulator; kernel: this host's real kernel (root); vm: a QEMU guest (make vmlab)."),
    ] = Backend.sim,
    timeout: TimeoutOption = None,
    sample_interval: SampleOption = None,
    build_runner: BuildRunnerOption = True,
    vm_kernel: VmKernelOption = None,
    mglru: VmMglruOption = None,
    vm_memory: VmMemoryOption = None,
    trace: TraceOption = None,
    counters: CountersOption = None,
    show_all: Annotated[bool, typer.Option("--all", help="Show every counter, with per-1000-access and per-second figures.")] = False,
    interval: IntervalOption = None,
    csv_out: CsvOption = None,
    parquet_out: ParquetOption = None,
    seeds: SeedsOption = 1,
    zsmalloc_classes: Annotated[
        bool,
        typer.Option(
            "--zsmalloc-classes",
            help="Simulator: also show each zsmalloc pool's debugfs classes table (zspages per fullness group, "
            "freeable pages), read with the counters, and put it in --json.",
        ),
    ] = False,
) -> None:
    """Run SCENARIO in the simulator (or on this host's kernel, or in a VM); print the headline
    (outcome, per-phase time and rate, faults per access, swap traffic, pool size, OOM kills)."""
    with _input_errors():
        if zsmalloc_classes and (backend is not Backend.sim or seeds > 1):
            raise typer.BadParameter("--zsmalloc-classes: the simulator's output, for one run (not with --backend kernel/vm or --seeds)")
        if backend is Backend.kernel:
            result = _kernel_run(reclaimlab.load(scenario, _with_mglru(set_, mglru, trace)), timeout, sample_interval, build_runner)
        elif backend is Backend.vm:
            from reclaimlab.backends import vm

            loaded = reclaimlab.load(scenario, _with_mglru(set_, mglru, trace))
            with _lab_errors():
                options = _vm_options(vm_kernel, vm_memory)
                every = sample_interval if sample_interval is not None else vm.DEFAULT_SAMPLE_INTERVAL_S
                result = vm.run(loaded, timeout_s=timeout, sample_interval_s=every, build=build_runner, **options)
        elif seeds > 1:
            from reclaimlab.compare import CompareResult, Config

            def one(sc: reclaimlab.Scenario) -> CompareResult:
                r = reclaimlab.run(sc, progress=progress, interval_s=_interval(interval))
                return CompareResult(r.scenario, [(Config(r.scenario, ()), r)])

            repeated = _repeat(scenario, _with_mglru(set_, mglru, trace), seeds, one)
            console = _console(stderr=json_out is not None and str(json_out) == "-")
            console.print(compare_view(repeated.runs[0], None, counters or (), show_all, None, repeated))
            if json_out is not None:
                _write_json(json_out, json.dumps(repeated.to_dict(), sort_keys=True, indent=2) + "\n")
            _write_tables(repeated.tidy, csv_out, parquet_out)
            return
        else:
            result = reclaimlab.run(
                scenario,
                overrides=_with_mglru(set_, mglru, trace),
                progress=progress,
                interval_s=_interval(interval),
                zsmalloc_classes=zsmalloc_classes,
            )
    to_stdout = json_out is not None and str(json_out) == "-"
    console = _console(stderr=to_stdout)
    for part in run_view(result, counters or (), show_all):
        console.print(part)
    for table in zsmalloc_tables(result):
        console.print(table)
    if json_out is not None:
        _write_json(json_out, result.to_json())
    _write_tables(result.tidy, csv_out, parquet_out)


@app.command()
def compare(
    scenario: Annotated[Path, typer.Argument(help="The scenario file (TOML).")],
    vary: Annotated[
        list[str] | None,
        typer.Option(
            "--vary",
            metavar="KEY=V1,V2,...",
            help="Compare these values of KEY (repeatable: cartesian product); START..STOP[:STEP] is a range, e.g. 5..40:5.",
        ),
    ] = None,
    set_: SetOption = None,
    json_out: JsonOption = None,
    counters: CountersOption = None,
    show_all: Annotated[bool, typer.Option("--all", help="Show every counter, not only the headline.")] = False,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", min=0, help="Configurations run at once, each on a thread of its own (0: one per CPU).")
    ] = 1,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache", help="Run every configuration, even one whose result is cached (~/.cache/reclaimlab, $RECLAIMLAB_CACHE_DIR)."
        ),
    ] = False,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray", metavar="ADDRESS", help="Run the configurations on this Ray cluster (e.g. auto, or ray://host:10001); needs Ray."
        ),
    ] = None,
    progress: ProgressOption = True,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline", metavar="NAME", help="The configuration the others are set against (default: [compare] baseline, else the first)."
        ),
    ] = None,
    per: Annotated[
        Per | None, typer.Option("--per", help="In the counter table, event counters per 1000 accesses or per second of the workload.")
    ] = None,
    interval: IntervalOption = None,
    csv_out: CsvOption = None,
    parquet_out: ParquetOption = None,
    seeds: SeedsOption = 1,
) -> None:
    """Run SCENARIO's configurations (its [compare] configs, or --vary); print the headline, the ranking and the winner."""
    from reclaimlab.sweep import SweepUnavailableError

    repeated = None
    sweep: dict[str, Any] = {"jobs": jobs, "cache": not no_cache, "ray_address": ray}
    with _input_errors(), _unavailable(SweepUnavailableError):
        if seeds > 1:
            repeated = _repeat(
                scenario,
                set_ or (),
                seeds,
                lambda sc: run_compare(sc, vary=vary or (), progress=progress, interval_s=_interval(interval), **sweep),
            )
            result = repeated.runs[0]
        else:
            result = run_compare(
                scenario, vary=vary or (), overrides=set_ or (), progress=progress, interval_s=_interval(interval), **sweep
            )
    names = result.names
    if baseline is None and result.baseline is not None:
        baseline = result.baseline
    if baseline is not None and baseline not in names:
        _fail(f"reclaimlab compare: --baseline: expected one of {', '.join(names)}; got {baseline!r}", EXIT_BAD_INPUT)
    to_stdout = json_out is not None and str(json_out) == "-"
    _console(stderr=to_stdout).print(compare_view(result, baseline, counters or (), show_all, None if per is None else per.value, repeated))
    if json_out is not None:
        _write_json(json_out, result.to_json() if repeated is None else json.dumps(repeated.to_dict(), sort_keys=True, indent=2) + "\n")
    _write_tables(result.tidy if repeated is None else repeated.tidy, csv_out, parquet_out)


def _repeat(path: Path, overrides: Sequence[str], n: int, run_one: Callable[[reclaimlab.Scenario], CompareResult]) -> Repeated:
    """The scenario's seed and the n-1 following, each a full compare (shared by the configurations)."""
    from reclaimlab.overrides import Override
    from reclaimlab.stats import Repeated

    loaded = reclaimlab.load(path, overrides)
    seeds = [loaded.seed + k for k in range(n)]
    runs = []
    for k, seed in enumerate(seeds):
        typer.echo(f"seed {seed} ({k + 1}/{n}) ...", err=True)
        runs.append(run_one(loaded.with_overrides([Override("seed", seed, "--seeds")])))
    return Repeated(seeds, runs)


@app.command()
def report(
    scenarios: Annotated[list[Path], typer.Argument(help="Scenario files with a [report] section.")],
    out: Annotated[Path | None, typer.Option("--out", metavar="FILE", help="Write the Markdown here.")] = None,
    update_doc: Annotated[
        Path | None, typer.Option("--update-doc", metavar="DOC", help="Rewrite DOC's generated blocks instead of printing.")
    ] = None,
    progress: ProgressOption = False,
    html_out: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="FILE",
            help="Instead: run each scenario's configurations with --interval sampling and write one HTML page of plots.",
        ),
    ] = None,
    interval: IntervalOption = "500ms",
    seeds: SeedsOption = 1,
) -> None:
    """Published numbers beside reclaimlab's for each seed benchmark, with every claim checked
    (or, with --html, a page of plots of the scenarios' configurations)."""
    from reclaimlab import report as reports

    if html_out is not None:
        from reclaimlab import plot as plots

        page = plots.Page(title=", ".join(s.stem for s in scenarios))
        with _input_errors():
            for s in scenarios:
                if seeds > 1:
                    rep = _repeat(s, (), seeds, lambda sc: run_compare(sc, progress=progress, interval_s=_interval(interval)))
                    page.seeds = rep.to_dict()
                    cmp = rep.runs[0]
                else:
                    cmp = run_compare(s, progress=progress, interval_s=_interval(interval))
                prefix = f"{s.stem}: " if len(scenarios) > 1 else ""
                page.runs += [(prefix + c.name, r) for c, r in cmp.configs]
                page.sources.append(str(s))
        html_out.write_text(plots.page_html(page), encoding="utf-8")
        typer.echo(f"wrote {html_out}", err=True)
        return
    if out is not None and update_doc is not None:
        _fail("reclaimlab report: --out and --update-doc exclude each other", EXIT_BAD_INPUT)
    with _input_errors(), _doc_errors("reclaimlab report"):
        if update_doc is not None:
            names = reports.update_doc(update_doc, scenarios, progress=progress)
            typer.echo(f"{update_doc}: updated {', '.join(names)}", err=True)
            return
        text = "\n".join(reports.report(s, progress=progress).to_markdown() for s in scenarios)
    if out is not None:
        out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


@app.command()
def plot(
    results: Annotated[list[Path], typer.Argument(metavar="RESULT.json...", help="JSON of run, compare (--seeds) or validate.")],
    out: Annotated[Path, typer.Option("--out", "-o", metavar="FILE", help="The HTML page to write.")] = Path("reclaimlab.html"),
) -> None:
    """One self-contained HTML page (plotly): time series (--interval results), bars per
    configuration, seed and validation tables."""
    from reclaimlab import plot as plots

    try:
        page = plots.load(results)
    except ValueError as e:
        _fail(f"reclaimlab plot: {e}", EXIT_BAD_INPUT)
    out.write_text(plots.page_html(page), encoding="utf-8")
    typer.echo(f"wrote {out} ({len(page.runs)} runs, {sum(1 for _, r in page.runs if r.series)} with time series)", err=True)


@app.command()
def schema(
    out: Annotated[Path | None, typer.Option("--out", "-o", metavar="FILE", help="Write here instead of stdout.")] = None,
) -> None:
    """The JSON Schema of the scenario format (from the scenario models), for editors: e.g. Taplo
    or VS Code's Even Better TOML with `#:schema ./scenario.schema.json` at the top of a scenario."""
    from reclaimlab.scenario.models import Scenario

    doc = Scenario.model_json_schema()
    doc = {**doc, "$schema": "https://json-schema.org/draft/2020-12/schema", "title": "reclaimlab scenario"}
    text = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")


@app.command("validation-report")
def validation_report(
    results: Annotated[list[Path], typer.Argument(metavar="RESULT.json...", help="`reclaimlab validate --json` results.")],
    update_doc: Annotated[
        Path | None,
        typer.Option("--update-doc", metavar="DOC", help="Rewrite DOC's <!-- BEGIN/END GENERATED: <name> --> blocks instead of printing."),
    ] = None,
    other_kernel: Annotated[
        list[Path] | None,
        typer.Option(
            "--other-kernel",
            metavar="RESULT.json",
            help="With --update-doc: a result of another kernel (the VM lab's), counted only in the per-kernel table "
            "(block validation-kernels; repeatable).",
        ),
    ] = None,
) -> None:
    """Markdown tables from validate results (codec-check*.json are skipped): the summary and each scenario's."""
    from reclaimlab import validation_doc

    with _doc_errors("reclaimlab validation-report"):
        if update_doc is not None:
            names = validation_doc.update_doc(update_doc, results, other_kernel or ())
            typer.echo(f"{update_doc}: updated {validation_doc.SUMMARY_BLOCK}, {', '.join(names)}", err=True)
            return
        text = validation_doc.markdown(results)
    sys.stdout.write(text)


@contextmanager
def _doc_errors(prog: str) -> Iterator[None]:
    """A document without its generated blocks, or a file that cannot be read: exit 2."""
    from reclaimlab.report import DocError

    try:
        yield
    except (DocError, OSError, ValueError, KeyError) as e:
        _fail(f"{prog}: {e}", EXIT_BAD_INPUT)


@app.command()
def calibrate(
    kind: Annotated[str, typer.Option("--kind", help="The machine kind: the profile's name.")] = "polyglot-vm",
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Where to write the profile (default: the package's profiles/<kind>.toml, used by lowering)."),
    ] = None,
    reps: Annotated[int, typer.Option("--reps", min=1, help="Kernel runs per lab scenario; every run is fitted.")] = 5,
    codec_reps: Annotated[int, typer.Option("--codec-reps", min=1, help="Timing samples per page and codec.")] = 101,
    codec_rounds: Annotated[
        int,
        typer.Option(
            "--codec-rounds",
            min=1,
            help="Codec timing rounds at the start; one more follows the device and every lab run; the median counts.",
        ),
    ] = 3,
    wait: Annotated[float, typer.Option("--wait", help="Seconds to wait for the lab lock when another lab process holds it.")] = 600.0,
    skip_device: Annotated[bool, typer.Option("--skip-device", help="Do not measure the swap device (no [devices] table).")] = False,
    skip_loop_device: Annotated[
        bool, typer.Option("--skip-loop-device", help="Do not measure the lab's loop device (no [devices.lab-loop] table).")
    ] = False,
    only_loop_device: Annotated[
        bool,
        typer.Option(
            "--only-loop-device",
            help="Measure only the lab's loop device and replace its tables in the existing profile (--output or the default).",
        ),
    ] = False,
    skip_lab: Annotated[bool, typer.Option("--skip-lab", help="No kernel runs (no fitted fault/access/reclaim/swap-in costs).")] = False,
    kernel_codec_rounds: Annotated[
        int, typer.Option("--kernel-codec-rounds", min=0, help="Rounds of the kernel's codec timing through zram (0: skip it).")
    ] = 10,
    lab_from: Annotated[
        Path | None,
        typer.Option(
            "--lab-from", metavar="PROFILE", help="Refit the lab stages on the kernel runs recorded in PROFILE instead of running them."
        ),
    ] = None,
    only_readahead: Annotated[
        bool,
        typer.Option(
            "--only-readahead",
            help="Run only the swap readahead stage (zswap read-back at page-cluster 3 and 0); add its figure to the existing profile.",
        ),
    ] = False,
    only_write: Annotated[
        bool,
        typer.Option(
            "--only-write",
            help="Run only the buffered write(2) stages (tmpfs, ext4 on the lab's loop device, a write stream through a memcg "
            "limit) with the existing profile's loop device; add their figures to it.",
        ),
    ] = False,
    refit_lab: Annotated[
        bool,
        typer.Option(
            "--refit-lab",
            help="Refit the lab stages of the existing profile (--output or the default) on the kernel runs it records; "
            "no measurement, no lab run.",
        ),
    ] = False,
    json_out: Annotated[
        Path | None, typer.Option("--json", metavar="OUT", help="Also write every number as JSON.", callback=check_output_path)
    ] = None,
) -> None:
    """Measure this machine (codecs, swap disk, fault and swap costs from small lab runs; root)
    and write a machine profile for the simulator's time model."""
    from reclaimlab import calibrate as calibration

    if sum([only_loop_device, only_readahead, only_write, refit_lab]) > 1:
        _fail("reclaimlab calibrate: give one of --only-loop-device, --only-readahead, --only-write and --refit-lab", EXIT_BAD_INPUT)
    if refit_lab and lab_from is not None:
        _fail(
            "reclaimlab calibrate: --refit-lab refits the profile at --output (or the default); --lab-from is for a full calibrate",
            EXIT_BAD_INPUT,
        )
    options = calibration.Options(
        kind=kind,
        output=output,
        reps=reps,
        codec_reps=codec_reps,
        codec_rounds=codec_rounds,
        wait=wait,
        skip_device=skip_device,
        skip_loop_device=skip_loop_device,
        only_loop_device=only_loop_device,
        skip_lab=skip_lab,
        kernel_codec_rounds=kernel_codec_rounds,
        lab_from=lab_from,
        only_readahead=only_readahead,
        only_write=only_write,
        refit_lab=refit_lab,
        json=json_out,
    )
    code = calibration.main(options)
    if code:
        raise typer.Exit(code)


def validate_table(result: ValidateResult, patterns: Sequence[str], show_all: bool) -> Table:
    from reclaimlab.validate import format_rel_error, format_value, select

    table = Table(title=Text(f"{result.scenario}: simulator vs kernel ({result.reps} kernel runs)"), title_justify="left")
    table.add_column("metric")
    table.add_column("kernel median [min\N{EN DASH}max]", justify="right")
    table.add_column("sim", justify="right")
    table.add_column("rel. error", justify="right")
    table.add_column("in range", justify="center")
    previous = None
    for row in select(result.rows, patterns, show_all):
        if previous is not None and row.source != previous:
            table.add_section()
        previous = row.source
        k = row.kernel
        kernel = "-" if k is None else f"{format_value(k.median)} [{format_value(k.min)}\N{EN DASH}{format_value(k.max)}]"
        inside = "" if row.inside is None else ("yes" if row.inside else "no")
        table.add_row(Text(row.metric), Text(kernel), Text(format_value(row.sim)), Text(format_rel_error(row.rel_error)), Text(inside))
    return table


def ranking_table(result: RankingResult) -> Table:
    from reclaimlab.ranking import summary_line

    pairs = result.pairs()
    table = Table(title=Text(f"{result.scenario}: ranking of configurations, kernel vs simulator"), title_justify="left")
    for col, justify in (
        ("metric", "left"),
        ("a", "left"),
        ("b", "left"),
        ("kernel a \N{RIGHTWARDS ARROW} b", "right"),
        ("sim a \N{RIGHTWARDS ARROW} b", "right"),
        ("kernel", "center"),
        ("sim", "center"),
        ("verdict", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    from reclaimlab.validate import format_value

    previous = None
    for p in pairs:
        if previous is not None and p.metric != previous:
            table.add_section()
        previous = p.metric
        style = "bold red" if p.verdict == "differs" else ""
        table.add_row(
            Text(p.metric),
            Text(p.a),
            Text(p.b),
            Text(f"{format_value(p.kernel_a)} \N{RIGHTWARDS ARROW} {format_value(p.kernel_b)}"),
            Text(f"{format_value(p.sim_a)} \N{RIGHTWARDS ARROW} {format_value(p.sim_b)}"),
            Text(p.kernel),
            Text(p.sim),
            Text(p.verdict, style=style),
        )
    table.caption = summary_line(pairs)
    return table


def _vm_times(console: Console, result: ValidateResult | RankingResult) -> None:
    """For VM lab runs: the note on times, and with --compare the elapsed-time ratios."""
    from reclaimlab.ranking import RankingResult
    from reclaimlab.vm.times import NOTE, ratio_rows

    runs = [r for c in result.configs for r in c.result.kernel_runs] if isinstance(result, RankingResult) else result.kernel_runs
    if not any(r.backend == "vm" for r in runs):
        return
    if isinstance(result, RankingResult):
        table = Table(title=Text(f"{result.scenario}: elapsed time relative to the first configuration"), title_justify="left")
        for col in ("phase", "configuration", "kernel (VM)", "simulator"):
            table.add_column(col, justify="left" if col in ("phase", "configuration") else "right")
        for row in ratio_rows(result):
            cells = [row.phase, f"{row.config} / {row.baseline}"] + [f"{v:.2f}x" if v is not None else "-" for v in (row.kernel, row.sim)]
            table.add_row(*(Text(c) for c in cells))
        console.print(table)
    console.print(Text(NOTE))


@app.command()
def validate(
    scenario: Annotated[Path, typer.Argument(help="The scenario file (TOML).")],
    reps: Annotated[int, typer.Option("--reps", "-n", min=1, help="Kernel runs (the simulator runs once: it is deterministic).")] = 3,
    set_: SetOption = None,
    json_out: JsonOption = None,
    counters: CountersOption = None,
    show_all: Annotated[bool, typer.Option("--all", help="Also show counters that are zero on both sides.")] = False,
    compare_: Annotated[
        bool,
        typer.Option(
            "--compare",
            help="Validate every configuration of the scenario's [compare] (or --vary), kernel runs interleaved by rep, "
            "and check that the simulator ranks the configurations as the kernel does.",
        ),
    ] = False,
    vary: Annotated[
        list[str] | None,
        typer.Option("--vary", metavar="KEY=V1,V2,...", help="With --compare: these values of KEY instead of [compare] (repeatable)."),
    ] = None,
    retries: Annotated[
        int,
        typer.Option(
            "--retries",
            min=0,
            help="Run a kernel run again, at most this many times per rep, when its runner died (e.g. the memcg OOM killer); "
            "the discarded runs are listed in the result.",
        ),
    ] = 0,
    timeout: TimeoutOption = None,
    sample_interval: SampleOption = None,
    build_runner: BuildRunnerOption = True,
    kernel_results: Annotated[
        Path | None,
        typer.Option(
            "--kernel-results",
            metavar="FILE",
            help="Reuse the kernel runs of a previous `validate --json` FILE (no root, no kernel runs; --reps is ignored) "
            "and run only the simulator again. FILE may also be the --json OUT.",
        ),
    ] = None,
    backend: Annotated[
        LabBackend, typer.Option("--backend", "-b", help="kernel: this host's kernel (root); vm: a QEMU guest (make vmlab; counters only).")
    ] = LabBackend.kernel,
    vm_kernel: VmKernelOption = None,
    mglru: VmMglruOption = None,
    vm_memory: VmMemoryOption = None,
    trace: TraceOption = None,
) -> None:
    """Run SCENARIO on this host's kernel --reps times and in the simulator once; compare per counter and phase."""
    from reclaimlab.ranking import RankingResult, revalidate_compare, validate_compare
    from reclaimlab.validate import KernelResultsError, ValidateResult, revalidate
    from reclaimlab.validate import validate as run_validate

    comparing = compare_ or bool(vary)
    kernel_options: dict[str, Any] = {"timeout_s": timeout, "build": build_runner}
    result: ValidateResult | RankingResult
    with _input_errors():
        loaded = reclaimlab.load(scenario, _with_mglru(set_, mglru, trace))
        if sample_interval is not None and backend is LabBackend.kernel:
            from reclaimlab.backends.kernel import sampling

            # Both sides: the lab samples at it, the simulator models those reads.
            loaded, _ = sampling(loaded, sample_interval)
        if kernel_results is not None:
            try:
                previous: ValidateResult | RankingResult = (RankingResult if comparing else ValidateResult).load(kernel_results)
            except (OSError, ValueError, KeyError) as e:
                what = "a `validate --compare --json` result" if comparing else "a `validate --json` result"
                _fail(f"reclaimlab: --kernel-results {kernel_results}: expected {what}: {e}", EXIT_BAD_INPUT)
            try:
                if isinstance(previous, RankingResult):
                    result = revalidate_compare(loaded, previous, vary or ())
                else:
                    result = revalidate(loaded, previous)
            except KernelResultsError as e:
                _fail(f"reclaimlab: {kernel_results}: {e}", EXIT_BAD_INPUT)
        else:
            from reclaimlab.backends import kernel

            run_kernel: Any = kernel.run
            if backend is LabBackend.vm:
                from reclaimlab.backends import vm

                run_kernel = vm.run
                kernel_options.update(_vm_options(vm_kernel, vm_memory))
                kernel_options["sample_interval_s"] = sample_interval if sample_interval is not None else vm.DEFAULT_SAMPLE_INTERVAL_S
            with _lab_errors():
                if comparing:
                    result = validate_compare(
                        loaded,
                        vary or (),
                        reps=reps,
                        run_kernel=run_kernel,
                        retries=retries,
                        on_run=lambda i, n, name: typer.echo(f"kernel run {i}/{n} of {name!r} ...", err=True),
                        **kernel_options,
                    )
                else:
                    result = run_validate(
                        loaded,
                        reps=reps,
                        run_kernel=run_kernel,
                        retries=retries,
                        on_run=lambda i, n: typer.echo(f"kernel run {i}/{n} ...", err=True),
                        **kernel_options,
                    )
    to_stdout = json_out is not None and str(json_out) == "-"
    console = _console(stderr=to_stdout)
    if isinstance(result, RankingResult):
        for c in result.configs:
            # per configuration only the key counters (unless --counters): the ranking is the point
            table = validate_table(c.result, counters or KEY_ROWS, show_all)
            table.title = Text(f"{c.name}: simulator vs kernel ({c.result.reps} kernel runs)")
            console.print(table)
        console.print(ranking_table(result))
    else:
        console.print(validate_table(result, counters or (), show_all))
    _vm_times(console, result)
    if json_out is not None:
        _write_json(json_out, result.to_json())


@lab_app.command("probe")
def lab_probe(
    json_out: Annotated[bool, typer.Option("--json", help="Print the probe as JSON.")] = False,
) -> None:
    """What this host offers the lab (reads only; changes nothing)."""
    from reclaimlab.lab.probe import probe

    p = probe()
    if json_out:
        typer.echo(json.dumps(p.to_dict(), indent=2, sort_keys=True))
        return
    table = Table(title=Text("lab probe"), title_justify="left", show_header=False)
    table.add_column("item")
    table.add_column("value")
    for item, value in p.rows():
        table.add_row(Text(item), Text(value))
    _console(stderr=False).print(table)


@lab_app.command("restore")
def lab_restore() -> None:
    """Undo the changes of a lab run that did not finish (from its journal); print what was undone."""
    from reclaimlab.lab.errors import LabError
    from reclaimlab.lab.journal import LabLock, pending, restore, state_dir

    state = state_dir()
    try:
        with LabLock(state).acquire("reclaimlab lab restore"):
            journal = pending(state)
            if journal is None:
                typer.echo(f"nothing to restore: no journal in {state}")
                return
            typer.echo(f"restoring from {journal}")
            report = restore(state, on_step=lambda step: typer.echo(f"  undone: {step}"))
    except LabError as e:
        _fail(f"reclaimlab: {e}", EXIT_UNAVAILABLE)
    for step in report.skipped:
        typer.echo(f"  already undone: {step}")
    if not report.ok:
        _fail(
            "reclaimlab: could not undo:\n  "
            + "\n  ".join(report.failed)
            + "\nthe journal is kept; fix the cause and run `reclaimlab lab restore` again",
            EXIT_UNAVAILABLE,
        )
    typer.echo(f"restored: {len(report.undone)} change(s) undone, {len(report.skipped)} already undone; journal removed")


VmKernelsOption = Annotated[
    list[str] | None, typer.Option("--kernel", metavar="NAME", help="Only this VM kernel (repeatable): debian-6.12, debian-6.1.")
]


def _vm_kernels(kernels: list[str] | None) -> list[str]:
    from reclaimlab.vm.cache import KERNELS

    unknown = sorted(set(kernels or ()) - set(KERNELS))
    if unknown:
        _fail(f"--kernel: unknown VM kernel {', '.join(unknown)}; expected one of {', '.join(sorted(KERNELS))}", EXIT_BAD_INPUT)
    return kernels or sorted(KERNELS)


@lab_app.command("vm-install")
def lab_vm_install(kernel: VmKernelsOption = None) -> None:
    """Install the VM lab's kernels, static runner and guest images into its cache (`make vmlab`)."""
    from reclaimlab.vm import install

    with _lab_errors():
        install.install(_vm_kernels(kernel))


@lab_app.command("vm-selftests")
def lab_vm_selftests(kernel: VmKernelsOption = None) -> None:
    """Build the kernel's cgroup selftests for the VM kernels from Debian's linux-source (`make vmlab-selftests`)."""
    from reclaimlab.vm import selftests

    with _lab_errors():
        selftests.install(_vm_kernels(kernel))


@lab_app.command("selftests")
def lab_selftests(
    kernel: Annotated[str, typer.Option("--kernel", metavar="NAME", help="The guest's kernel: debian-6.12 or debian-6.1.")] = "debian-6.12",
    binary: Annotated[
        list[str] | None, typer.Option("--binary", metavar="NAME", help="Run only this selftest (test_zswap, test_memcontrol; repeatable).")
    ] = None,
    test_timeout: Annotated[
        float, typer.Option("--test-timeout", min=1.0, metavar="S", help="One test's limit in the guest, seconds.")
    ] = 300.0,
    mglru: Annotated[
        bool, typer.Option("--mglru/--no-mglru", help="MGLRU on or off in the guest (default off, as the simulator).")
    ] = False,
    recursiveprot: Annotated[
        bool,
        typer.Option(
            "--recursiveprot/--no-recursiveprot",
            help="Mount the guest's cgroup2 with memory_recursiveprot, as systemd does (default on).",
        ),
    ] = True,
    memory: VmMemoryOption = None,
    json_out: JsonOption = None,
) -> None:
    """The kernel's own cgroup selftests (test_zswap, test_memcontrol) in a VM lab guest: per-test verdicts.

    Needs `make vmlab` and `make vmlab-selftests` (docs/conformance.md). Changes nothing on the host."""
    from reclaimlab.vm import selftest_run

    with _lab_errors():
        doc = selftest_run.run(
            kernel,
            binary or None,
            test_timeout_s=test_timeout,
            mglru=mglru,
            recursiveprot=recursiveprot,
            memory=_vm_options(kernel, memory)["memory"] or selftest_run.DEFAULT_MEMORY,
            on_note=lambda m: typer.echo(m, err=True),
        )
    console = _console(stderr=json_out is not None and str(json_out) == "-")
    for name, run in doc["binaries"].items():
        src = doc["source"]
        table = Table(title=Text(f"{name}: {src['package']} {src['version']} on {doc['kernel']['release']}"), title_justify="left")
        for col in ("#", "test", "verdict", "s", "reason"):
            table.add_column(col, justify="right" if col in ("#", "s") else "left")
        for t in run["tests"]:
            secs = "" if t["seconds"] is None else f"{t['seconds']:.1f}"
            table.add_row(str(t["number"]), Text(t["name"]), Text(t["verdict"]), secs, Text(t["reason"]))
        console.print(table)
    if json_out is not None:
        _write_json(json_out, json.dumps(doc, indent=2, sort_keys=True) + "\n")


@lab_app.command("codec-check")
def lab_codec_check(
    codecs: Annotated[
        str | None, typer.Option("--codecs", metavar="C1,C2", help="Codecs to check (default: the simulator's that zram offers).")
    ] = None,
    variants: Annotated[int, typer.Option("--variants", min=1, max=2048, help="Pages per content class (at most its distinct ones).")] = 64,
    seed: Annotated[int, typer.Option("--seed", min=0, help="The page contents' seed.")] = 1,
    json_out: JsonOption = None,
) -> None:
    """Compressed page sizes: this kernel's zram against the simulator's codecs, per content class (root)."""
    from reclaimlab import codec_check

    with _input_errors(), _lab_errors():
        names = [c.strip() for c in codecs.split(",") if c.strip()] if codecs is not None else list(native.core().codecs())
        doc = codec_check.run(names, variants=variants, seed=seed, on_note=lambda m: typer.echo(m, err=True))
    console = _console(stderr=json_out is not None and str(json_out) == "-")
    for codec in doc["codecs"]:
        title, header, rows = codec_check.table(doc, codec)
        table = Table(title=Text(title), title_justify="left")
        for i, col in enumerate(header):
            table.add_column(col, justify="left" if i == 0 else "right")
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))
        console.print(table)
    for codec, why in doc["skipped"].items():
        typer.echo(f"skipped {codec}: {why}", err=True)
    if json_out is not None:
        _write_json(json_out, json.dumps(doc, indent=2, sort_keys=True) + "\n")


__all__ = ["app", "compare_view", "counters_table", "format_number", "phases_table", "run_view", "validate_table"]
