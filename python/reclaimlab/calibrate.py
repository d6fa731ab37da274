"""``reclaimlab calibrate``: measure this machine and write its machine profile.

The profile (TOML, ``profiles/<kind>.toml``) holds the simulator's CPU cost defaults
(``[costs]``, the names of crates/reclaimlab-core/src/costs.rs), device presets measured here
(``[devices.<preset>]``) and the raw numbers (``[measurements]``). Lowering applies it by default
(``reclaimlab.lower``; ``$RECLAIMLAB_PROFILE``). docs/calibration.md describes every
measurement, its method and its caveats. In short:

1. **codecs**: wall-clock time per 4 KiB page of the simulator's own codec implementations
   (``_core.codec_timing``), per codec and content class; and (1b, ``kernel_codecs``) the
   kernel's own codec time per content class through zram writes and reads. Each codec gets
   figures per kind of byte (text, random, run; ``kind_figures``): the kernel's where zram
   offers the codec, else ours (scaled by the kernel's ratio on text from a zswap run, 4.).
2. **swap device**: 4 KiB O_DIRECT random reads and writes at queue depth 1 on a temporary
   file in the lab's state directory (the filesystem of the lab's swap files), plus 1 MiB
   sequential transfers for bandwidth -> the ``virtio-disk`` preset. The file is journaled
   (as a lab swap file is) and removed, also after a crash (``reclaimlab lab restore``).
   2b. **the lab's loop device** (``loop_device``): a loop device over a fallocated image, as
   the lab makes one for a scenario's filesystem, with an ext4 create loop (fsync of fresh
   files), a read(2) scan and O_DIRECT IO on it -> the ``lab-loop`` preset (its flush
   included). ``--only-loop-device`` measures this alone and replaces those two tables of the
   existing profile.
3. **fault, access, reclaim and swap-in costs**: small scenarios run on the real kernel with
   the lab backend (``reclaimlab.backends.kernel.run``) and in the simulator; a least-squares
   fit (``fit_costs``) of a few cost parameters makes the simulator's phase times match the
   kernel's. The simulator's time is linear in the costs for these single-process scenarios,
   and its slope per parameter (charges per phase) is found by re-running it with that
   parameter raised by ``SLOPE_DELTA_NS``.

Everything that changes the host goes through a lab session (``reclaimlab.lab.session``: the
journal and the lock); the lock is also held
while codecs and the device are timed, so that no lab run competes with the measurement. When
another lab process holds the lock, calibrate waits (``--wait``) instead of failing.

The arithmetic (codec figures by kind of byte, the device model, the fit, the TOML) is plain functions,
tested without root in tests/test_calibrate.py. ``main(Options)`` runs ``reclaimlab calibrate``
(its options: cli.py, ``reclaimlab calibrate --help``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import mmap
import os
import platform
import random
import re
import secrets
import signal
import statistics
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reclaimlab import kernel_codecs, loop_device, reclaim_pass
from reclaimlab.errors import ScenarioError, format_key
from reclaimlab.kernel_codecs import composition_fit
from reclaimlab.lab import host, speed
from reclaimlab.lab.errors import LabError, LabInterrupted, LabUnavailable, RunnerFailed
from reclaimlab.lab.interrupts import raise_interrupt
from reclaimlab.lab.journal import Journal, state_dir
from reclaimlab.lab.session import locked, session
from reclaimlab.lower import lower
from reclaimlab.profile import DEFAULT_PROFILE_KIND, PROFILE_SCHEMA_VERSION, PROFILES_DIR
from reclaimlab.scenario.types import host_page_reporting_order

__all__ = [
    "CLASSES",
    "CODECS",
    "CodecTimer",
    "Fit",
    "Inline",
    "Observation",
    "codec_costs",
    "device_model",
    "fit_costs",
    "format_bandwidth",
    "format_duration",
    "kernel_codec_costs",
    "kernel_preset",
    "kind_figures",
    "main",
    "measure_codecs",
    "measure_device",
    "nopressure_scenario",
    "pressure_scenario",
    "render_profile",
]

PAGE = 4096
#: Codecs timed (kernel crypto names); each has its own cost figures.
CODECS = ("lzo", "lzo-rle", "lz4", "zstd", "deflate")
#: The cost parameter prefix of each codec.
COST_CODECS = {"lzo": "lzo", "lzo-rle": "lzo_rle", "lz4": "lz4", "zstd": "zstd", "deflate": "deflate"}
#: The kinds of bytes a page's codec time is composed of (crates/reclaimlab-core
#: compress::BYTE_KINDS) and the suffix of each kind's cost figure: ``<prefix>_compress_ns``
#: is a text page, ``<prefix>_compress_random_ns`` a random one, ``<prefix>_compress_run_ns``
#: one run of a byte (docs/model/time.md, "Codec cost by content").
KIND_SUFFIX = {"text": "", "random": "_random", "run": "_run"}
#: Content classes timed, as scenarios spell them.
CLASSES = ("text", "random", "mix1024", "zero")
#: The ns a cost parameter is raised by to read the simulator's slope (linear: any value works).
SLOPE_DELTA_NS = 1000
#: Parameters fitted from the no-pressure runs; from the swap-file run under a memcg limit (the
#: reclaim work every swap-out does); and from the zswap run under the same limit (what zswap
#: adds per store and load, and the swap-in work).
NOPRESSURE_PARAMS = ("access_ns", "fault_ns", "page_alloc_zero_ns")
SWAPFILE_PARAMS = ("reclaim_page_ns",)
#: ... with the zram stage first (which then fits reclaim_page_ns): what a disk write adds.
SWAPFILE_AFTER_ZRAM = ("swap_write_end_ns",)
#: From a zram run (where the kernel's codec figures are known): the swap-in work.
ZRAM_PARAMS = ("reclaim_page_ns", "swapin_page_ns")
PRESSURE_PARAMS = ("swapin_page_ns", "zswap_entry_ns")
#: Fitted along with the parameters above from the pressure runs, but only to absorb how much
#: the fill cost of those runs differs from the no-pressure runs' (the machine's speed drifts
#: between runs); the profile keeps the no-pressure value. In the swap-file run the swap-in
#: work is a nuisance too: its disk reads dominate the access phase (the zswap run fits it).
PRESSURE_NUISANCE = ("page_alloc_zero_ns",)
SWAPFILE_NUISANCE = ("page_alloc_zero_ns", "swapin_page_ns")
#: From a sequential zswap read-back at vm.page-cluster 3: the work of a readahead page (read
#: into the swap cache, mapped later by a minor fault). The same read-back at page-cluster 0
#: (every page a major fault) fits swapin_page_ns as a check, recorded but not kept: the
#: profile's swapin_page_ns comes from the zram run's random reads.
READAHEAD_PARAMS = ("swap_ra_page_ns",)
READAHEAD_CHECK_PARAMS = ("swapin_page_ns",)
#: From a zram run whose first reclaim meets a memcg of pages all referenced once since their
#: fault (each is scanned, its accessed bit cleared and rotated; about 12 scanned per page
#: freed) and whose next fill reclaims one page per page scanned: the work of scanning a page,
#: apart from freeing it. reclaim_page_ns is fitted with it (a nuisance here: the zram stage
#: fits it with this figure fixed).
SCAN_PARAMS = ("scan_page_ns",)
SCAN_NUISANCE = ("reclaim_page_ns", "page_alloc_zero_ns")
#: From buffered write(2) runs (stage 3c): on tmpfs, a first pass over a file of holes (a new
#: folio each: shmem_alloc_and_add_folio) and a second pass over its cached folios; on ext4 (the
#: lab's loop device), a second pass over a cached, dirty file and a pass over clean cached
#: folios (the file fsynced before: each write dirties a clean folio); then, in a memcg at its
#: limit, a pass over dropped pages of a file whose new folios take the frames reclaim frees
#: from a read file's large clean folios (about nothing to reclaim per page), and a write
#: stream whose reclaim frees one written-back order-0 folio per page written.
WRITE_TMPFS_PARAMS = ("pagecache_add_ns", "shmem_write_page_ns")
WRITE_EXT4_PARAMS = ("write_page_ns", "folio_account_dirtied_ns")
WRITE_RECLAIM_PARAMS = ("write_begin_folio_ns", "reclaim_file_folio_ns")
#: Phases of the write stages that are run and recorded but not fitted: ext4's first pass
#: (new folios from memory no reclaim freed: on this VM up to twice the per-page time of the
#: same write into frames reclaim just freed, cause not found; not free page reporting,
#: docs/calibration.md 3c, 3d) and its fsynced pass
#: (the loop device's time); the reclaim stage's read (readahead, the device).
WRITE_UNFITTED = {"tmpfs": (), "ext4": ("p/write", "p/flush"), "reclaim": ("p/read",)}
#: From a THP fill on a VM whose balloon reports free memory (stage 3d), into blocks free for
#: 30 s (reported): the first touch of a reported page beyond what the model charges a THP
#: page already (page_alloc_zero_ns, the profile's). A fill into the blocks it just freed is run
#: and recorded as the check of that base (not fitted: on this busy host it met reported
#: memory in two runs of five, presumably another tenant's allocations having taken the blocks).
PAGE_REPORTING_PARAMS = ("page_reported_touch_ns",)
PAGE_REPORTING_UNFITTED = ("b/fill-backed",)
#: The cgroup of the pressure scenario.
PRESSURE_GROUP = "calibrate"

_Note = Callable[[str], None]


# ---------------------------------------------------------------------------------------------
# Pure arithmetic (tested without a kernel)
# ---------------------------------------------------------------------------------------------


def cost_names() -> tuple[str, ...]:
    """The time-model parameters, in the native core's order."""
    from reclaimlab import native

    return tuple(native.core().default_costs())


def kind_figures(
    codec: str, per_class: Mapping[str, Mapping[str, float]], composition: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, int]:
    """A codec's six cost figures from per-class times: text from the ``text`` class; random
    and run from the composition fit over the ``mixK`` classes and ``random`` (given, or fitted
    here, a ``zero`` page counting as ``mix0``). Classes missing: those figures left out."""
    prefix = COST_CODECS[codec]
    out: dict[str, int] = {}
    for what in ("compress", "decompress"):
        if "text" in per_class:
            out[f"{prefix}_{what}_ns"] = round(float(per_class["text"][f"{what}_ns"]))
        fit = composition.get(what) if composition is not None else None
        if fit is None:
            classes = {
                ("mix0" if c == "zero" else c): cell for c, cell in per_class.items() if c in ("zero", "random") or c.startswith("mix")
            }
            try:
                fit = composition_fit(classes, what)
            except ValueError:
                continue
        out[f"{prefix}_{what}_random_ns"] = int(fit["random"])
        out[f"{prefix}_{what}_run_ns"] = int(fit["run"])
    return out


def codec_costs(table: Mapping[str, Mapping[str, Mapping[str, float]]]) -> dict[str, int]:
    """The cost-model figures from our codec table (codec -> class -> {compress_ns,
    decompress_ns}): per codec, its figures by kind of byte (``kind_figures``), whole ns."""
    out: dict[str, int] = {}
    for codec in COST_CODECS:
        if table.get(codec):
            out.update(kind_figures(codec, table[codec]))
    return out


def kernel_codec_costs(report: Mapping[str, Any]) -> dict[str, int]:
    """The cost-model figures of every codec ``kernel_codecs.run`` measured on the kernel."""
    out: dict[str, int] = {}
    for codec, per_class in report.get("classes", {}).items():
        if codec in COST_CODECS:
            out.update(kind_figures(codec, per_class, report.get("composition", {}).get(codec)))
    return out


def kernel_fit_codecs(zswap_compressors: Sequence[str]) -> list[str]:
    """The compressors whose kernel cost calibrate fits from a zswap run: those the host's
    zswap offers that have cost figures, but lzo (the pressure fit's own codec, whose
    user-space timing is what the other costs were fitted against)."""
    return [c for c in CODECS if c in COST_CODECS and c != "lzo" and c in zswap_compressors]


def device_model(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The device model from raw IO measurements (``measure_device``'s keys).

    Bandwidth is the sequential 1 MiB throughput; latency is the mean 4 KiB queue-depth-1
    time minus one page's transfer at that bandwidth, so that the model's idle 4 KiB completion
    (latency + transfer, docs/model/time.md) equals the measured mean. The mean, not the
    median: the model gives every IO the same latency, and only the mean makes N of them take
    as long as N measured ones (the slow tail counts; a phase's time is a sum of IOs).
    With the request rate at depth measured (``rand_write_4k_qd_ios_per_s``): ``iops``, and the
    latency is the mean minus the larger of transfer and 1/iops (the model's idle completion is
    latency + max(transfer, 1/iops)); the queue's ``max_sectors_kb``, ``nr_requests`` and
    ``read_ahead_kb`` are the disk's own (sysfs). Integers in the simulator's units (ns, bytes/s) plus ``rotational``."""
    out: dict[str, Any] = {"rotational": bool(raw["rotational"])}
    # The device's request rate at depth (4 KiB writes from WRITERS threads): every request
    # occupies the device at least 1/iops, so a read queued behind writeback waits for the
    # requests ahead of it (docs/model/time.md, "Swap device model").
    iops = raw.get("rand_write_4k_qd_ios_per_s")
    busy_min = 1e9 / float(iops) if iops else 0.0
    if iops:
        out["iops"] = round(float(iops))
    for key in ("max_sectors_kb", "nr_requests"):
        if raw.get(key):
            out[key] = int(raw[key])
    # read_ahead_kb 0 is a real setting (no readahead), not a missing figure.
    if raw.get("read_ahead_kb") is not None:
        out["read_ahead_kb"] = int(raw["read_ahead_kb"])
    for d in ("read", "write"):
        bw = float(raw[f"seq_{d}_bytes_per_s"])
        if not bw > 0:
            raise ValueError(f"seq_{d}_bytes_per_s: expected > 0; got {bw}")
        busy = max(PAGE * 1e9 / bw, busy_min)
        out[f"{d}_latency_ns"] = max(0, round(float(raw[f"rand_{d}_4k_mean_ns"]) - busy))
        out[f"{d}_bytes_per_s"] = round(bw)
    return out


def format_duration(ns: int) -> str:
    """A duration as scenarios write it, to 0.1 µs: ``"153.2us"``, ``"80us"``, ``"0ns"``."""
    tenths = round(ns / 100)
    if tenths == 0:
        return "0ns"
    if tenths % 10 == 0:
        return f"{tenths // 10}us"
    return f"{tenths // 10}.{tenths % 10}us"


def format_bandwidth(bytes_per_s: float) -> str:
    """A bandwidth as scenarios write it, to 1 MB/s: ``"812MB/s"``."""
    return f"{max(1, round(bytes_per_s / 1e6))}MB/s"


@dataclass(frozen=True)
class Observation:
    """One phase seen on both sides: the kernel's elapsed time, the simulator's at the base
    costs, and the simulator's slope d(elapsed)/d(cost) for each parameter (how many times
    the phase charges it). ``scale_ns`` weighs its error in the fit (default: ``kernel_ns``);
    runs of the same phase share one scale, the phase's mean time, so that they weigh alike."""

    name: str
    kernel_ns: float
    sim_ns: float
    slopes: Mapping[str, float]
    scale_ns: float | None = None

    @property
    def scale(self) -> float:
        return self.scale_ns if self.scale_ns is not None else self.kernel_ns


@dataclass
class Fit:
    """Fitted parameters (whole ns), the relative residual (sim - kernel) / kernel of each
    observation at the fitted values, parameters held at the floor, and parameters that no
    observation charges (left at their base values)."""

    params: dict[str, int]
    residuals: dict[str, float]
    floored: list[str] = field(default_factory=list)
    unidentified: list[str] = field(default_factory=list)


def _solve_least_squares(rows: list[list[float]], rhs: list[float]) -> list[float]:
    """Minimum-norm least squares (numpy's lstsq: pandas already brings numpy)."""
    import numpy as np

    a = np.array(rows, dtype=float)
    b = np.array(rhs, dtype=float)
    x, *_ = np.linalg.lstsq(a, b, rcond=None)
    return [float(v) for v in x]


def fit_costs(observations: Sequence[Observation], base: Mapping[str, int], params: Sequence[str], floor: int = 0) -> Fit:
    """Least-squares fit of ``params`` so that the simulator's phase times match the kernel's.

    The simulator's time of observation i is modelled as ``sim_ns_i + sum_j slope_ij *
    (theta_j - base_j)`` (exact when the phase's counts do not depend on the costs). The
    residuals are weighted by ``1 / scale_i`` (relative error; the scale is the phase's mean
    kernel time when given), so a long phase does not drown a short one. A parameter that
    would come out below ``floor`` is held there and the others refitted (a small active-set
    loop); a parameter no observation charges keeps its base value. ``Fit.residuals`` are
    (sim - kernel) / kernel per observation at the fitted values."""
    obs = [o for o in observations if o.kernel_ns > 0 and o.scale > 0]
    if not obs:
        raise ValueError("no observation with a kernel time > 0")
    unidentified = [p for p in params if all(abs(o.slopes.get(p, 0.0)) == 0 for o in obs)]
    free = [p for p in params if p not in unidentified]
    fixed: dict[str, float] = {p: float(base[p]) for p in unidentified}
    floored: list[str] = []
    while True:
        rows, rhs = [], []
        for o in obs:
            # kernel = sim_ns + sum slope * (theta - base) -> sum_free slope * delta = kernel - sim - sum_fixed ...
            target = o.kernel_ns - o.sim_ns - sum(o.slopes.get(p, 0.0) * (fixed[p] - base[p]) for p in fixed)
            rows.append([o.slopes.get(p, 0.0) / o.scale for p in free])
            rhs.append(target / o.scale)
        deltas = _solve_least_squares(rows, rhs) if free else []
        values = {p: base[p] + d for p, d in zip(free, deltas, strict=True)}
        low = [p for p in free if values[p] < floor]
        if not low:
            break
        worst = min(low, key=lambda p: values[p])
        fixed[worst] = float(floor)
        floored.append(worst)
        free.remove(worst)
    values.update(fixed)
    fitted = {p: max(floor, round(values[p])) for p in params}
    residuals = {}
    for o in obs:
        sim = o.sim_ns + sum(o.slopes.get(p, 0.0) * (fitted[p] - base[p]) for p in params)
        residuals[o.name] = (sim - o.kernel_ns) / o.kernel_ns
    return Fit(params=fitted, residuals=residuals, floored=floored, unidentified=unidentified)


def kernel_preset(release: str, versions: Sequence[str]) -> str:
    """The newest kernel preset not newer than ``release`` (else the oldest preset)."""

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", v)[:2])

    ordered = sorted(versions, key=key)
    if not ordered:
        raise ValueError("no kernel presets")
    host_key = key(release)
    older = [v for v in ordered if key(v) <= host_key]
    return older[-1] if older else ordered[0]


# ---------------------------------------------------------------------------------------------
# The profile's TOML
# ---------------------------------------------------------------------------------------------


class Inline(dict):  # type: ignore[type-arg]
    """A table rendered as a TOML inline table (``{ a = 1, b = 2 }``)."""


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, Inline):
        return "{ " + ", ".join(f"{format_key(str(k))} = {_toml_value(x)}" for k, x in v.items() if x is not None) + " }"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML: {v!r}")


def _toml_table(path: list[str], table: Mapping[str, Any], out: list[str], comments: Mapping[str, str] | None = None) -> None:
    scalars = [(k, v) for k, v in table.items() if v is not None and (not isinstance(v, dict) or isinstance(v, Inline))]
    tables = [(k, v) for k, v in table.items() if isinstance(v, dict) and not isinstance(v, Inline)]
    if path and (scalars or not tables):
        out.append("")
        out.append("[" + ".".join(format_key(p) for p in path) + "]")
    for k, v in scalars:
        line = f"{format_key(str(k))} = {_toml_value(v)}"
        note = (comments or {}).get(str(k))
        out.append(f"{line:<34} # {note}" if note else line)
    for k, v in tables:
        _toml_table([*path, str(k)], v, out)


def render_profile(
    kind: str,
    costs: Mapping[str, int],
    devices: Mapping[str, Mapping[str, Any]],
    measurements: Mapping[str, Any],
    header: Sequence[str] = (),
    cost_notes: Mapping[str, str] | None = None,
) -> str:
    """The profile as TOML text: header comment lines, ``schema_version``, ``kind``, ``[costs]``
    (in the native core's order), ``[devices.<preset>]`` (scenario units) and ``[measurements]``."""
    names = cost_names()
    unknown = [k for k in costs if k not in names]
    if unknown:
        raise ValueError(f"unknown cost parameters: {', '.join(unknown)}")
    out = [f"# {line}".rstrip() for line in header]
    if out:
        out.append("")
    out.append(f"schema_version = {PROFILE_SCHEMA_VERSION}")
    out.append(f"kind = {_toml_value(kind)}")
    ordered = {k: costs[k] for k in names if k in costs}
    _toml_table(["costs"], ordered, out, cost_notes)
    for name, fig in devices.items():
        _toml_table(["devices", name], fig, out)
    if measurements:
        _toml_table(["measurements"], measurements, out)
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# Locking, signals
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# 1. Codecs
# ---------------------------------------------------------------------------------------------


class CodecTimer:
    """Codec timing in rounds, which ``calibrate`` spreads over its run (between lab runs).

    A round times every codec and class: per class, the median over up to ``variants``
    distinct pages of each page's median over ``reps`` samples (``_core.codec_timing``). The
    table's figure for a codec and class is the median over the rounds. (On the project's VMs
    the vCPU's speed switches between two levels every few seconds, whatever the guest does;
    rounds taken between the lab runs sample the same mix of both as the runs.)"""

    def __init__(
        self,
        core: Any,
        codecs: Sequence[str] = CODECS,
        classes: Sequence[str] = CLASSES,
        variants: int = 16,
        reps: int = 101,
        seed: int = 1,
    ):
        self.core = core
        self.codecs = tuple(codecs)
        self.classes = tuple(classes)
        self.reps = reps
        self.pages = {c: [bytes(core.page_bytes(c, seed, 0, v)) for v in range(int(core.distinct_variants(c, variants)))] for c in classes}
        self.rounds: list[dict[tuple[str, str], tuple[float, float]]] = []

    def round(self) -> None:
        r = {}
        for codec in self.codecs:
            for cls in self.classes:
                comp, decomp = [], []
                for page in self.pages[cls]:
                    c, d = self.core.codec_timing(codec, page, self.reps)
                    comp.append(float(c))
                    decomp.append(float(d))
                r[(codec, cls)] = (statistics.median(comp), statistics.median(decomp))
        self.rounds.append(r)

    def table(self, since: int = 0) -> dict[str, dict[str, dict[str, Any]]]:
        """codec -> class -> {compress_ns, decompress_ns, compressed_bytes, and the per-round
        figures compress_rounds_ns, decompress_rounds_ns}, over the rounds from ``since`` on."""
        rounds = self.rounds[since:]
        if not rounds:
            raise ValueError("no codec timing round yet")
        table: dict[str, dict[str, dict[str, Any]]] = {}
        for codec in self.codecs:
            table[codec] = {}
            for cls in self.classes:
                cs = [r[(codec, cls)][0] for r in rounds]
                ds = [r[(codec, cls)][1] for r in rounds]
                size = statistics.fmean(int(self.core.compressed_len(codec, p)) for p in self.pages[cls])
                table[codec][cls] = {
                    "compress_ns": round(statistics.median(cs), 1),
                    "decompress_ns": round(statistics.median(ds), 1),
                    "compressed_bytes": round(size, 1),
                    "compress_rounds_ns": [round(x) for x in cs],
                    "decompress_rounds_ns": [round(x) for x in ds],
                }
        return table


def measure_codecs(core: Any, rounds: int = 3, **kwargs: Any) -> dict[str, dict[str, dict[str, Any]]]:
    """``rounds`` rounds of ``CodecTimer(core, **kwargs)`` back to back; its table."""
    timer = CodecTimer(core, **kwargs)
    for _ in range(rounds):
        timer.round()
    return timer.table()


# ---------------------------------------------------------------------------------------------
# 2. The swap device
# ---------------------------------------------------------------------------------------------


def backing_device(path: Path) -> dict[str, Any]:
    """The block device and filesystem holding ``path``: name, rotational flag, fs type."""
    st = os.stat(path)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    info: dict[str, Any] = {"dev": f"{major}:{minor}", "name": None, "rotational": None, "fstype": None, "mount": None}
    sysdir = Path(f"/sys/dev/block/{major}:{minor}")
    if sysdir.exists():
        real = sysdir.resolve()
        disk = real.parent if (real / "partition").exists() else real
        info["name"] = real.name
        rot = host.read_int_file(disk / "queue" / "rotational")
        info["rotational"] = None if rot is None else bool(rot)
        # Request merging and the tag limit of the disk's queue (the model's request figures).
        info["max_sectors_kb"] = host.read_int_file(disk / "queue" / "max_sectors_kb")
        info["nr_requests"] = host.read_int_file(disk / "queue" / "nr_requests")
        # The largest file readahead window on the disk (the model's read_ahead_kb).
        info["read_ahead_kb"] = host.read_int_file(disk / "queue" / "read_ahead_kb")
    best = None
    resolved = str(path.resolve())
    for m in host.mounts():
        if (resolved == m.point or resolved.startswith(m.point.rstrip("/") + "/")) and (best is None or len(m.point) > len(best.point)):
            best = m
    if best is not None:
        info["fstype"] = best.fstype
        info["mount"] = best.point
    return info


def _lat_stats(ns: list[int], elapsed_ns: int) -> dict[str, float]:
    q = statistics.quantiles(ns, n=10) if len(ns) >= 10 else [float(min(ns))] * 9
    return {
        "median_ns": float(statistics.median(ns)),
        "p10_ns": float(q[0]),
        "p90_ns": float(q[-1]),
        "mean_ns": float(statistics.fmean(ns)),
        "ios": len(ns),
        "bytes_per_s": len(ns) * PAGE * 1e9 / elapsed_ns if elapsed_ns > 0 else 0.0,
    }


def _io_file(path: Path, size: int) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_DIRECT | os.O_CLOEXEC, 0o600)
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError:
        os.close(fd)
        raise
    return fd


def measure_device(
    directory: Path,
    journal: Journal,
    size: int = 128 << 20,
    chunk: int = 1 << 20,
    max_ios: int = 4000,
    budget_s: float = 1.5,
    seed: int = 1,
) -> dict[str, Any]:
    """Raw IO figures of the filesystem holding ``directory``, on a temporary file there.

    The file is journaled first (op ``swapfile``: ``restore`` unlinks it), preallocated and
    written once (so that no read hits an unwritten extent and no write converts one), then:
    sequential 1 MiB O_DIRECT writes and reads over the whole file (bandwidth); 4 KiB O_DIRECT
    random reads, then writes, one at a time (queue depth 1), each for at most ``max_ios`` IOs
    or ``budget_s`` seconds. The caller restores the journal (which removes the file)."""
    path = directory / f"calibrate-{os.getpid()}-{secrets.token_hex(3)}.io"
    journal.record("swapfile", path=str(path))
    fd = _io_file(path, size)
    big = mmap.mmap(-1, chunk)
    page = mmap.mmap(-1, PAGE)
    try:
        big.write(os.urandom(chunk))
        page.write(os.urandom(PAGE))

        def sequential(write: bool) -> float:
            t0 = time.perf_counter_ns()
            for off in range(0, size, chunk):
                n = os.pwrite(fd, big, off) if write else os.preadv(fd, [big], off)
                if n != chunk:
                    raise LabError(f"short {'write' if write else 'read'} on {path}: {n} bytes")
            if write:
                os.fdatasync(fd)
            return size * 1e9 / (time.perf_counter_ns() - t0)

        sequential(True)  # first pass: allocate (convert the unwritten extents)
        seq_write = sequential(True)
        seq_read = sequential(False)
        rng = random.Random(seed)
        pages = size // PAGE

        def rand(write: bool) -> dict[str, float]:
            lat: list[int] = []
            start = time.perf_counter_ns()
            deadline = start + int(budget_s * 1e9)
            while len(lat) < max_ios:
                off = rng.randrange(pages) * PAGE
                t = time.perf_counter_ns()
                n = os.pwrite(fd, page, off) if write else os.preadv(fd, [page], off)
                lat.append(time.perf_counter_ns() - t)
                if n != PAGE:
                    raise LabError(f"short {'write' if write else 'read'} on {path}: {n} bytes")
                if t > deadline:
                    break
            return _lat_stats(lat, time.perf_counter_ns() - start)

        reads = rand(False)
        writes = rand(True)
        os.fdatasync(fd)
        interference = _under_writes(fd, path, pages, budget_s, seed)
    finally:
        big.close()
        page.close()
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    dev = backing_device(directory)
    return {
        "directory": str(directory),
        "device": dev["name"],
        "dev": dev["dev"],
        "fstype": dev["fstype"],
        "mount": dev["mount"],
        "rotational": bool(dev["rotational"]) if dev["rotational"] is not None else True,
        **{k: dev[k] for k in ("max_sectors_kb", "nr_requests", "read_ahead_kb") if dev.get(k) is not None},
        "file_bytes": size,
        "seq_chunk_bytes": chunk,
        "seq_read_bytes_per_s": round(seq_read),
        "seq_write_bytes_per_s": round(seq_write),
        **{
            f"rand_{op}_4k_{k}": (m[k] if k == "ios" else round(m[k]))
            for op, m in (("read", reads), ("write", writes))
            for k in ("median_ns", "p10_ns", "p90_ns", "mean_ns", "ios", "bytes_per_s")
        },
        **interference,
    }


#: Writer threads of the interference measurement: 4 KiB O_DIRECT writes kept in flight, as
#: reclaim's swap writeback keeps several (one per reclaiming thread and the plug's batch).
WRITERS = 4


def _under_writes(fd: int, path: Path, pages: int, budget_s: float, seed: int) -> dict[str, Any]:
    """Random 4 KiB writes at queue depth WRITERS alone (the device's write request rate), and
    random 4 KiB reads at queue depth 1 while the same writes run (a swap-in's read behind
    reclaim's writeback on the same device). Threads: os.pwrite/preadv release the GIL."""
    stop = threading.Event()
    done = [0] * WRITERS

    def writer(w: int) -> None:
        rng = random.Random(seed * 1000 + w)
        buf = mmap.mmap(-1, PAGE)
        buf.write(os.urandom(PAGE))
        try:
            while not stop.is_set():
                if os.pwrite(fd, buf, rng.randrange(pages) * PAGE) != PAGE:
                    raise LabError(f"short write on {path}")
                done[w] += 1
        finally:
            buf.close()

    def with_writers(body: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], float]:
        threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(WRITERS)]
        for t in threads:
            t.start()
        t0 = time.perf_counter_ns()
        try:
            out = body()
        finally:
            stop.set()
            for t in threads:
                t.join()
            stop.clear()
        elapsed = time.perf_counter_ns() - t0
        rate = sum(done) * 1e9 / elapsed
        for w in range(WRITERS):
            done[w] = 0
        return out, rate

    def idle() -> dict[str, Any]:
        time.sleep(budget_s / 2)
        return {}

    _, write_rate = with_writers(idle)
    rng = random.Random(seed + 7)
    page = mmap.mmap(-1, PAGE)

    def reads() -> dict[str, Any]:
        lat: list[int] = []
        start = time.perf_counter_ns()
        deadline = start + int(budget_s * 1e9)
        while time.perf_counter_ns() < deadline and len(lat) < 4000:
            t = time.perf_counter_ns()
            if os.preadv(fd, [page], rng.randrange(pages) * PAGE) != PAGE:
                raise LabError(f"short read on {path}")
            lat.append(time.perf_counter_ns() - t)
        return _lat_stats(lat, time.perf_counter_ns() - start)

    try:
        under, write_rate_during = with_writers(reads)
    finally:
        page.close()
    os.fdatasync(fd)
    return {
        "writers": WRITERS,
        "rand_write_4k_qd_ios_per_s": round(write_rate),
        "rand_read_4k_under_writes_mean_ns": round(under["mean_ns"]),
        "rand_read_4k_under_writes_median_ns": round(under["median_ns"]),
        "rand_read_4k_under_writes_ios": under["ios"],
        "rand_write_4k_qd_ios_per_s_during_reads": round(write_rate_during),
    }


def _device_step(note: _Note, wait_s: float) -> dict[str, Any]:
    on_signal, restored = "removing the temporary file first, please wait", "the temporary file was removed"
    runid = f"calibrate-device-{secrets.token_hex(2)}"
    with (
        session("reclaimlab calibrate (swap device)", note, wait_s, on_signal, restored) as lab,
        lab.journal(runid=runid, scenario="calibrate swap device", what="removing the temporary file failed") as journal,
    ):
        return measure_device(lab.state, journal)


def loop_device_tables(rep: Mapping[str, Any], date: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``[devices.lab-loop]`` table (scenario units) and the ``[measurements.loop_device]``
    summary of a ``loop_device.run`` report."""
    fig = loop_device.device_figures(rep)
    table = {
        "rotational": fig["rotational"],
        "read_latency": format_duration(fig["read_latency_ns"]),
        "write_latency": format_duration(fig["write_latency_ns"]),
        "read_bandwidth": format_bandwidth(fig["read_bytes_per_s"]),
        "write_bandwidth": format_bandwidth(fig["write_bytes_per_s"]),
        "max_sectors_kb": fig["max_sectors_kb"],
        "nr_requests": fig["nr_requests"],
        "read_ahead_kb": fig["read_ahead_kb"],
        "flush_latency": format_duration(fig["flush_ns"]),
    }
    rd = rep["read"]
    d = rep["direct"]
    summary = {
        "date": date,
        "method": rep["method"],
        "loop_device": rep["loop_device"],
        "queue": dict(rep["queue"]),
        "figures": fig,
        "create": {
            **loop_device.create_figures(rep),
            "files": rep["create"]["files"],
            "rounds": rep["create"]["rounds"],
            "file_kib": rep["create"]["file_kib"],
            "round_write_request_ns": [round(r["write_ticks"] * 1e6 / max(1, r["write_ios"])) for r in rep["create"]["round_stats"]],
            "round_flush_ns": [round(r["flush_ticks"] * 1e6 / max(1, r["flush_ios"])) for r in rep["create"]["round_stats"]],
        },
        "create_stat": dict(rep["create"]["stat"]),
        "read_scan": {
            "bytes": rd["bytes"],
            "scans": rd["scans"],
            "elapsed_ns": rd["elapsed_ns"],
            **{k: rd["stat"][k] for k in ("read_ios", "read_sectors", "read_ticks", "io_ticks", "time_in_queue")},
        },
        "direct": {
            "chunk_bytes": d["chunk_bytes"],
            "rand_read_4k_median_ns": round(statistics.median(d["rand_read_4k_ns"])),
            "seq_read_bytes_per_s": round(d["seq_read_bytes"] * 1e9 / d["seq_read_ns"]),
            "seq_overwrite_bytes_per_s": round(d["seq_read_bytes"] * 1e9 / d["seq_overwrite_ns"]),
            "seq_write_bytes_per_s": round(d["seq_write_bytes"] * 1e9 / d["seq_write_ns"]),
        },
        "write_cpu": loop_device.write_figures(rep),
        "loadavg": _loadavg(),
    }
    return table, summary


def _loop_device_step(note: _Note, wait_s: float) -> tuple[dict[str, Any], dict[str, Any]]:
    note(f"lab loop device: a loop device over an image in {state_dir()}, ext4 create loop, read scan")
    rep = loop_device.run(note=note, wait_s=wait_s)
    return loop_device_tables(rep, datetime.now(UTC).isoformat(timespec="seconds"))


_TABLE_HEADER = re.compile(r"^\[([^\]]+)\]\s*$")


def replace_tables(text: str, tables: Mapping[str, str]) -> str:
    """``text`` (a profile) with each table named in ``tables`` (its header path, e.g.
    ``devices.lab-loop``) and its sub-tables replaced by the given TOML text, or appended where
    the profile has none: ``--only-loop-device`` keeps everything else as it was."""
    lines = text.splitlines()
    out: list[str] = []
    skipping = False
    for line in lines:
        m = _TABLE_HEADER.match(line)
        if m is not None:
            name = m.group(1)
            skipping = any(name == t or name.startswith(t + ".") for t in tables)
        if not skipping:
            out.append(line)
    while out and not out[-1].strip():
        out.pop()
    devices = [t for t in tables if t.startswith("devices.")]
    rest = [t for t in tables if not t.startswith("devices.")]
    if devices:
        # Device tables go before [measurements], where render_profile puts them.
        at = next((k for k, line in enumerate(out) if line.strip() == "[measurements]"), len(out))
        block: list[str] = []
        for t in devices:
            block += [*tables[t].strip("\n").splitlines(), ""]
        out[at:at] = block
    for t in rest:
        out += ["", *tables[t].strip("\n").splitlines()]
    return "\n".join(out) + "\n"


def only_loop_device(args: Options, note: _Note) -> str:
    """``--only-loop-device``: the existing profile with the loop device measured now."""
    path = args.out_path()
    if not path.exists():
        raise LabError(f"--only-loop-device: no profile at {path} to update")
    table, summary = _loop_device_step(note, args.wait)
    dev: list[str] = []
    _toml_table(["devices", "lab-loop"], table, dev)
    meas: list[str] = []
    _toml_table(["measurements", "loop_device"], {**summary, "command": args.command_line()}, meas)
    return replace_tables(path.read_text(), {"devices.lab-loop": "\n".join(dev), "measurements.loop_device": "\n".join(meas)})


# ---------------------------------------------------------------------------------------------
# 3. Lab runs and the fit
# ---------------------------------------------------------------------------------------------


def nopressure_scenario(version: str, cgroup_version: int, access_count: int = 2_000_000) -> str:
    """No memory pressure: fill 128 MiB (write faults: fault + allocate/zero + the page copy),
    read-touch 64 MiB never written (read faults mapping the zero page: fault only), then
    random reads over the resident 128 MiB (access only)."""
    return f"""\
schema_version = 1
name = "calibrate-nopressure"
seed = 11
[machine]
memory = "host"
cpus = "host"
[kernel]
version = "{version}"
[cgroups]
cgroup_version = {cgroup_version}
[[processes]]
name = "p"
[[processes.regions]]
name = "data"
size = "128MiB"
content = "text"
variants = 64
[[processes.regions]]
name = "untouched"
size = "64MiB"
content = "zero"
[[processes.phases]]
name = "fill"
kind = "fill"
region = "data"
[[processes.phases]]
name = "touch"
kind = "sequential"
region = "untouched"
write_percent = 0
[[processes.phases]]
name = "access"
kind = "random"
regions = ["data"]
count = {access_count}
write_percent = 0
"""


def _memcg_process_text(cgroup_version: int, limit: str) -> str:
    """The end of every calibration scenario: the memcg ``PRESSURE_GROUP`` with its limit (v1
    memory.limit_in_bytes, v2 memory.max) and the one process ``p`` in it, whose regions or
    files and phases follow."""
    limit_key = "memory.limit_in_bytes" if cgroup_version == 1 else "memory.max"
    return f"""[cgroups]
cgroup_version = {cgroup_version}
[cgroups.groups.{PRESSURE_GROUP}]
"{limit_key}" = "{limit}"
[[processes]]
name = "p"
cgroup = "{PRESSURE_GROUP}"
"""


def _pressure_text(
    name: str,
    swap: str,
    version: str,
    cgroup_version: int,
    *,
    cluster: int,
    zswap: bool = False,
    compressor: str = "lzo",
    seed: int = 12,
    fills: Sequence[tuple[str, str, str]] = (("fill-free", "warm", "32MiB"), ("fill", "data", "96MiB")),
) -> str:
    """What the pressure, scan and readahead scenarios share: the machine with one swap device
    (``swap``: the body of its ``[[machine.swap]]`` table), the knobs, the 48 MiB memcg (v1
    memory.limit_in_bytes, v2 memory.max) and one process whose text regions are filled in
    order (``fills``: phase, region, size; by default ``warm`` below the limit, then ``data``
    into swap or zswap)."""
    regions = "".join(f'[[processes.regions]]\nname = "{r}"\nsize = "{size}"\ncontent = "text"\n' for _ph, r, size in fills)
    phases = "".join(f'[[processes.phases]]\nname = "{ph}"\nkind = "fill"\nregion = "{r}"\n' for ph, r, _size in fills)
    return f"""\
schema_version = 1
name = "{name}"
seed = {seed}
[machine]
memory = "host"
cpus = "host"
[[machine.swap]]
{swap}
[kernel]
version = "{version}"
vm.page-cluster = {cluster}
zswap.enabled = {"true" if zswap else "false"}
zswap.compressor = "{compressor}"
zswap.max_pool_percent = 20
zswap.accept_threshold_percent = 90
zswap.shrinker_enabled = false
{_memcg_process_text(cgroup_version, "48MiB")}{regions}{phases}"""


def pressure_scenario(
    version: str, cgroup_version: int, compressor: str = "lzo", access_count: int = 60_000, zswap: bool = True, zram: bool = False
) -> str:
    """zswap on, no writeback, under a 48 MiB memcg limit (v1 memory.limit_in_bytes, or v2
    memory.max), text pages. ``warm`` (32 MiB) is filled below the limit: the run's own fill
    cost, without reclaim. Filling ``data`` (96 MiB) then stores 80 MiB in zswap, and random
    reads over ``data`` swap in from zswap (and store again) on about every other access.
    (With a 32 MiB limit and 64 MiB of data the kernel's memcg OOM killer fired in about one
    run in five while swap readahead filled the swap cache.)

    ``zswap=False``: the same with zswap off, the pages going to a 1 GiB swap file and coming
    back from it one at a time (vm.page-cluster 0: with readahead and a small swap file the
    memcg OOM killer takes the runner in many runs, docs/validation.md), fewer random reads
    (each is a disk read).

    ``zram=True`` (zswap off): the swap device is a 256 MiB zram device with ``compressor``: the
    same reclaim and swap-in without zswap's own work and without disk IO."""
    if zram:
        name, cluster = "calibrate-zram", 3
        swap = f'name = "zram"\nkind = "zram"\nsize = "256MiB"\ncomp_algorithm = "{compressor}"'
        zswap = False
    else:
        name, swap_size, cluster = ("calibrate-zswap", "256MiB", 3) if zswap else ("calibrate-swapfile", "1GiB", 0)
        swap = f'name = "swapfile"\nsize = "{swap_size}"\ndevice = "virtio-disk"'
    return (
        _pressure_text(name, swap, version, cgroup_version, cluster=cluster, zswap=zswap, compressor=compressor)
        + f"""\
[[processes.phases]]
name = "access"
kind = "random"
regions = ["data"]
count = {access_count}
write_percent = 0
"""
    )


def scan_scenario(version: str, cgroup_version: int, compressor: str = "lzo") -> str:
    """Reclaim scanning (``scan_page_ns``): a 256 MiB zram device with ``compressor`` and a
    48 MiB memcg limit. ``warm`` (44 MiB of text) is filled below the limit; filling ``push``
    (8 MiB) reaches it, and that first reclaim finds every page referenced once since its
    fault: it scans the memcg's inactive list, clearing the accessed bits and rotating the
    pages (folio_check_references: FOLIOREF_KEEP for an anon page referenced once), before any
    page can go (about 12 pages scanned per page freed); filling ``more`` (32 MiB) then reclaims
    one page per page scanned. The two fills tell the work of scanning a page from that of
    freeing it. vm.page-cluster 0: no readahead (nothing is swapped in)."""
    swap = f'name = "zram"\nkind = "zram"\nsize = "256MiB"\ncomp_algorithm = "{compressor}"'
    fills = (("fill-free", "warm", "44MiB"), ("fill-first", "push", "8MiB"), ("fill", "more", "32MiB"))
    return _pressure_text("calibrate-scan", swap, version, cgroup_version, cluster=0, seed=13, fills=fills)


def page_reporting_scenario(version: str, cgroup_version: int) -> str:
    """Free page reporting (``page_reported_touch_ns``, stage 3d): no memory limit, THPs in
    ``thp = true`` regions (transparent_hugepage ``madvise``, the host's and the default).
    Process ``a`` sleeps 30 s, in which the blocks earlier runs freed at their exit are
    reported (mm/page_reporting.c: "reporting all pages on an idle system in about 30
    seconds"; with 10 s and 128 MiB, one run of five on this busy host found no reported block
    and two some), fills 256 MiB of THPs from reported blocks (``fill-reported``) and exits;
    ``b`` starts when that fill has ended, sleeps 0.5 s (``a``'s exit frees its blocks) and
    fills 256 MiB of THPs into the blocks just freed, not reported yet (``fill-backed``,
    recorded, not fitted). ``machine.page_reporting_order = "host"``."""
    return f"""\
schema_version = 1
name = "calibrate-page-reporting"
seed = 17
[machine]
memory = "host"
cpus = "host"
page_reporting_order = "host"
[kernel]
version = "{version}"
transparent_hugepage.enabled = "madvise"
transparent_hugepage.defrag = "madvise"
[cgroups]
cgroup_version = {cgroup_version}
[[processes]]
name = "a"
[[processes.regions]]
name = "huge"
size = "256MiB"
content = "text"
thp = true
[[processes.phases]]
name = "settle"
kind = "sleep"
duration = "30s"
[[processes.phases]]
name = "fill-reported"
kind = "fill"
region = "huge"
[[processes.phases]]
name = "gone"
kind = "exit"
[[processes]]
name = "b"
after = "a:fill-reported"
[[processes.regions]]
name = "huge"
size = "256MiB"
content = "text"
thp = true
[[processes.phases]]
name = "wait"
kind = "sleep"
duration = "500ms"
[[processes.phases]]
name = "fill-backed"
kind = "fill"
region = "huge"
"""


def readahead_scenario(version: str, cgroup_version: int, cluster: int) -> str:
    """The zswap scenario of ``pressure_scenario`` (text pages, lzo, 48 MiB limit, no writeback)
    with a sequential read-back of ``data`` instead of random reads: after the fill about 80 MiB
    of it is in zswap with slots in fill order, so at ``vm.page-cluster`` 3 every major fault
    reads an aligned window of 8 slots (swap_cluster_readahead on the rotational swap file) and
    the next 7 pages are minor faults on readahead folios; at 0 every page is a major fault.
    The read-back reclaims as it goes (each swap-in stores a page), as the random reads of the
    zswap run do, so the two differ only in how the pages come back."""
    name = "calibrate-readahead" if cluster else "calibrate-readahead-pc0"
    swap = 'name = "swapfile"\nsize = "256MiB"\ndevice = "virtio-disk"'
    return (
        _pressure_text(name, swap, version, cgroup_version, cluster=cluster, zswap=True)
        + """\
[[processes.phases]]
name = "readback"
kind = "sequential"
region = "data"
passes = 1
"""
    )


def write_scenario(version: str, cgroup_version: int, which: str) -> str:
    """Buffered write(2), one 4 KiB call per page, by one process in a memcg (stage 3c).

    ``tmpfs``: a 128 MiB file on a tmpfs, in a 1 GiB memcg (no reclaim): ``write`` fills its
    holes (shmem_write_begin → shmem_alloc_and_add_folio: allocation without clearing, charge,
    mapping and LRU insertion; the copy; shmem_write_end), ``rewrite`` writes the cached folios
    again (lookup, copy, a dirty flag).

    ``ext4``: two 128 MiB files on ext4 on the lab's loop device (written before the run and
    dropped from the page cache, as every lab file), in a 1 GiB memcg, far below the dirty
    limits (no throttling, no flusher in the measured phases; on cgroup v2 the memcg's own
    dirty domain starts background writeback of ``a`` within a pass, which costs the writer
    nothing here): ``write`` over ``a`` (a new folio
    over an allocated block each: filemap_add_folio, ext4_da_write_begin's buffer head and
    block lookup, the copy, ext4_da_write_end, the clean folio's dirty accounting; recorded, not
    fitted), ``rewrite`` over ``a`` again (cached and dirty), ``flush`` writes ``b`` and fsyncs
    it (not fitted: its time is the device's), ``redirty`` writes ``b`` again (cached and clean:
    each write dirties a folio).

    ``reclaim``: the same filesystem, a 128 MiB memcg: ``read`` reads a 128 MiB file ``r`` (the
    memcg fills with its large clean folios; not fitted), ``write`` writes a 128 MiB file ``a``
    (new folios over allocated blocks, in frames that reclaim frees from ``r``'s folios: one
    folio's reclaim per up to 512 pages), ``stream`` writes a 256 MiB file ``b`` (reclaim now
    frees ``a``'s and ``b``'s order-0 folios once the flusher, which reclaim wakes, has written
    them; dirty ones it meets go to immediate reclaim), as file-stream-write does at a larger
    scale. On cgroup v2 the 128 MiB memcg is also a dirty domain of its own, which throttles
    the writer in ``write`` and ``stream`` (as v2-file-stream-write in the VM lab)."""
    if which == "tmpfs":
        fs = '[[machine.filesystems]]\nname = "shm"\ntype = "tmpfs"\nsize = "256MiB"\n'
        files = [("a", "128MiB", 'filesystem = "shm"\n')]
        phases = [("write", "a", ""), ("rewrite", "a", "")]
        limit, seed = "1GiB", 14
    elif which in ("ext4", "reclaim"):
        fs = '[[machine.filesystems]]\nname = "data"\ntype = "ext4"\ndevice = "lab-loop"\n'
        if which == "ext4":
            files = [("a", "128MiB", ""), ("b", "128MiB", "")]
            phases = [("write", "a", ""), ("rewrite", "a", ""), ("flush", "b", 'fsync_every = "128MiB"\n'), ("redirty", "b", "")]
            limit, seed = "1GiB", 15
        else:
            files = [("r", "128MiB", ""), ("a", "128MiB", ""), ("b", "256MiB", "")]
            phases = [("read", "r", ""), ("write", "a", ""), ("stream", "b", "")]
            limit, seed = "128MiB", 16
    else:
        raise ValueError(f"write_scenario: unknown stage {which!r} (expected tmpfs, ext4 or reclaim)")
    file_text = "".join(f'[[processes.files]]\nname = "{n}"\nsize = "{size}"\ncontent = "text"\n{extra}' for n, size, extra in files)
    phase_text = "".join(
        f'[[processes.phases]]\nname = "{ph}"\nkind = "{"read" if ph == "read" else "write"}"\nfile = "{f}"\n{extra}'
        for ph, f, extra in phases
    )
    return f"""\
schema_version = 1
name = "calibrate-write-{which}"
seed = {seed}
[machine]
memory = "host"
cpus = "host"
{fs}[kernel]
version = "{version}"
zswap.enabled = false
{_memcg_process_text(cgroup_version, limit)}{file_text}{phase_text}"""


def _sim_run(core: Any, config: Mapping[str, Any], costs: Mapping[str, int]) -> tuple[dict[str, float], dict[str, int]]:
    """Phase elapsed ns ("process/phase") and counters of one simulator run with ``costs``."""
    cfg = dict(config)
    cfg["costs"] = dict(sorted(costs.items()))
    sim = core.Simulation(json.dumps(cfg, sort_keys=True))
    while not sim.step(1_000_000):
        pass
    raw = json.loads(sim.result_json())
    phases = {f"{p['process']}/{p['phase']}": float(p["end_ns"] - p["start_ns"]) for p in raw["phases"]}
    return phases, {k: int(v) for k, v in raw["counters"].items()}


def _counts(counters: Mapping[str, int]) -> dict[str, int]:
    """Counters that count things: without statistics derived from time (``*_ms``, ``*_ns``)."""
    return {k: v for k, v in counters.items() if not re.search(r"_(ms|us|ns|s)$", k)}


def sim_slopes(
    core: Any, config: Mapping[str, Any], costs: Mapping[str, int], params: Sequence[str]
) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, int], list[str]]:
    """The simulator's phase times at ``costs``, their slopes per parameter, the counters, and
    the parameters whose change also changed a count (then the slope is approximate: the
    interleaving depended on time)."""
    base, counters = _sim_run(core, config, costs)
    slopes: dict[str, dict[str, float]] = {ph: {} for ph in base}
    nonlinear = []
    for p in params:
        bumped, c2 = _sim_run(core, config, {**costs, p: costs[p] + SLOPE_DELTA_NS})
        for ph in base:
            slopes[ph][p] = (bumped.get(ph, base[ph]) - base[ph]) / SLOPE_DELTA_NS
        if _counts(c2) != _counts(counters):
            nonlinear.append(p)
    return base, slopes, counters, nonlinear


def _kernel_runs(scenario: Any, reps: int, note: _Note, wait_s: float, between: Callable[[], None] | None = None) -> list[Any]:
    """``reps`` kernel runs of ``scenario`` (waiting for the lab lock as needed; a run whose
    runner died, e.g. by the memcg OOM killer, is retried twice); ``between()`` after each."""
    from reclaimlab.backends import kernel

    runs: list[Any] = []
    failures = 0
    while len(runs) < reps:
        note(f"  lab run {len(runs) + 1}/{reps} of {scenario.name}")
        try:
            run = kernel.run(scenario, timeout_s=180, on_note=None, lock_wait_s=wait_s)
            if any(rec.get("outcome") == "oom_killed" for rec in run.phase_records):
                # An outcome for validate; for a fit, a run that did not do the work.
                raise RunnerFailed("the runner was OOM-killed")
            runs.append(run)
        except RunnerFailed as e:  # the host was restored
            failures += 1
            if failures > 2:
                raise
            note(f"  the run failed ({e}); retrying")
            continue
        if between is not None:
            between()
    return runs


def _phase_times(runs: Sequence[Any]) -> dict[str, list[float]]:
    """ "process/phase" -> the elapsed ns of each run, in run order, without the time the runner
    waited for a CPU (``busy_host_free_s``: the calibration scenarios have one process, so that
    wait is other work on the host, not the scenario's own contention)."""
    from reclaimlab.lab.result import busy_host_free_s

    per: dict[str, list[float]] = {}
    for r in runs:
        for rec in r.phase_records:
            per.setdefault(f"{rec['process']}/{rec['phase']}", []).append(busy_host_free_s(rec) * 1e9)
    return per


def _run_delays(runs: Sequence[Any]) -> dict[str, list[float]]:
    """ "process/phase" -> the runner's CPU wait (run_delay) share of each run's elapsed time."""
    per: dict[str, list[float]] = {}
    for r in runs:
        for rec in r.phase_records:
            if "run_delay_s" in rec and float(rec["elapsed_s"]) > 0:
                per.setdefault(f"{rec['process']}/{rec['phase']}", []).append(round(float(rec["run_delay_s"]) / float(rec["elapsed_s"]), 4))
    return per


def _cpu_shares(runs: Sequence[Any]) -> dict[str, list[float]]:
    """ "process/phase" -> the runner's CPU time (cpu_s) over its elapsed time without the CPU wait,
    per run: 1.0 for a phase that never slept (CPU-bound), less for one that waited on IO or a
    throttle."""
    from reclaimlab.lab.result import busy_host_free_s

    per: dict[str, list[float]] = {}
    for r in runs:
        for rec in r.phase_records:
            free = busy_host_free_s(rec)
            if "cpu_s" in rec and free > 0:
                per.setdefault(f"{rec['process']}/{rec['phase']}", []).append(round(float(rec["cpu_s"]) / free, 4))
    return per


def _median_counters(runs: Sequence[Any], keys: Sequence[str]) -> dict[str, float]:
    out = {}
    for k in keys:
        vals = [float(r.counters[k]) for r in runs if k in r.counters]
        if vals:
            out[k] = statistics.median(vals)
    return out


def _lab_stage(
    core: Any,
    text: str,
    base_costs: Callable[[], dict[str, int]],
    params: Sequence[str],
    reps: int,
    note: _Note,
    wait_s: float,
    counter_keys: Sequence[str],
    between: Callable[[], None] | None = None,
    device: Mapping[str, Any] | None = None,
    recorded: Mapping[str, Any] | None = None,
    fs_device: Mapping[str, Any] | None = None,
    unfitted: Sequence[str] = (),
) -> tuple[Fit, dict[str, Any]]:
    """Run the scenario ``reps`` times on the kernel, then fit ``params`` starting from
    ``base_costs()`` (called after the runs, so that it can use what ``between`` measured).
    ``device``: the measured swap device's figures (``device_model``), for the simulator's
    swap devices (a run whose time depends on the disk must not be fitted against a preset).
    ``recorded``: this stage's record from an earlier profile (``--lab-from``): its kernel runs
    are fitted again instead of running the kernel (the scenario must be the same).
    ``fs_device``: the device under the scenario's disk filesystems (the lowered figures of the
    profile's ``lab-loop``, measured in the same window as the runs), recorded with the stage.
    ``unfitted``: phases ("process/phase") that are run and recorded but not fitted."""
    from reclaimlab.scenario import load

    scenario = load(text)
    config = lower(scenario, profile=None)
    if device is not None:
        for sw in config["machine"]["swap"]:
            sw["device"] = {**sw["device"], **device}
    if fs_device is not None:
        for fs in config["machine"].get("filesystems", []):
            if "device" in fs:
                fs["device"] = {**fs["device"], **fs_device}
    if recorded is not None:
        if recorded.get("scenario") != scenario.name:
            raise ValueError(f"--lab-from: the recorded stage ran {recorded.get('scenario')!r}, not {scenario.name!r}")
        runs: list[Any] = []
        times = {ph: [float(t) for t in rec["kernel_runs_ns"]] for ph, rec in recorded["phases"].items()}
        recorded_accesses = {ph: int(rec["accesses"]) for ph, rec in recorded["phases"].items()}
        if between is not None:  # what would follow each run (codec rounds the base may read)
            between()
    else:
        runs = _kernel_runs(scenario, reps, note, wait_s, between)
        times = _phase_times(runs)
        recorded_accesses = {}
    costs = base_costs()
    sim_ns, slopes, _, nonlinear = sim_slopes(core, config, costs, params)
    # Every run's phases are observations of their own: the fit sees each run's phases
    # together (the machine's speed drifts between runs; per-phase medians could pair a fast
    # run's fill with a slow run's access phase and skew the split between the parameters).
    # A least-squares fit over the runs fits their mean; validate compares the kernel runs'
    # median. Where one or two runs of five are 1.2-1.8x slower in every phase (the 2026-11-24
    # pressure runs), the two differ (docs/calibration.md, "Mean or median").
    phases = [ph for ph in sim_ns if ph in times]
    observations = [
        Observation(f"{ph}#{i}", t, sim_ns[ph], slopes[ph], statistics.fmean(times[ph]))
        for ph in phases
        if ph not in unfitted
        for i, t in enumerate(times[ph])
    ]
    fit = fit_costs(observations, costs, params)
    fitted_costs = {**costs, **fit.params}
    sim_after, counters_after = _sim_run(core, config, fitted_costs)
    if recorded is not None:
        kc = {k: float(v["kernel_median"]) for k, v in recorded.get("counters", {}).items()}
    else:
        kc = _median_counters(runs, counter_keys)
    record: dict[str, Any] = {
        "scenario": scenario.name,
        "reps": len(runs) if recorded is None else int(recorded["reps"]),
        "fitted": list(params),
        "values": Inline(fit.params),
        "phases": {
            ph: Inline(
                kernel_mean_ns=round(statistics.fmean(times[ph])),
                kernel_median_ns=round(statistics.median(times[ph])),
                kernel_runs_ns=[round(t) for t in times[ph]],
                sim_before_ns=round(sim_ns[ph]),
                sim_fitted_ns=round(sim_after.get(ph, 0.0)),
                accesses=recorded_accesses.get(ph)
                if recorded is not None
                else next((int(rec["accesses"]) for rec in runs[0].phase_records if f"{rec['process']}/{rec['phase']}" == ph), 0),
                **{f"slope_{p}": round(slopes[ph][p], 1) for p in params},
            )
            for ph in phases
        },
        # (sim - kernel mean) / kernel mean at the fitted costs, per phase.
        "residuals": {ph: round((sim_after.get(ph, 0.0) - statistics.fmean(times[ph])) / statistics.fmean(times[ph]), 4) for ph in phases},
        "counters": {k: Inline(kernel_median=kc[k], sim=counters_after.get(k)) for k in kc if k in counters_after},
    }
    if unfitted:
        record["unfitted"] = list(unfitted)
    if fs_device is not None:
        record["fs_device"] = Inline(fs_device)
    if runs:
        record["loadavg"] = _loadavg()
        delays = _run_delays(runs)
        if delays:
            # The share of each run's phase time its runner spent waiting for a CPU (removed
            # from kernel_runs_ns above): how busy the host was.
            record["run_delay_share"] = {ph: v for ph, v in delays.items()}
        cpu = _cpu_shares(runs)
        if cpu:
            # The runner's CPU time over the phase time without the wait: how CPU-bound it was.
            record["cpu_share"] = {ph: v for ph, v in cpu.items()}
    if fit.floored:
        record["floored"] = fit.floored
    if fit.unidentified:
        record["unidentified"] = fit.unidentified
    if nonlinear:
        record["counts_changed_with"] = nonlinear
    return fit, record


def readahead_stages(
    core: Any,
    version: str,
    cgroup_version: int,
    base_costs: Callable[[], dict[str, int]],
    reps: int,
    note: _Note,
    wait_s: float,
    counter_keys: Sequence[str],
    between: Callable[[], None] | None = None,
    recorded: Callable[[str], dict[str, Any] | None] = lambda _stage: None,
) -> tuple[dict[str, int], dict[str, Any]]:
    """The sequential zswap read-back at vm.page-cluster 3 (fits ``swap_ra_page_ns``) and at 0
    (fits ``swapin_page_ns`` as a check, not kept), everything else at ``base_costs()``; with
    ``page_alloc_zero_ns`` as the nuisance, as in the other pressure runs. Returns the kept
    figures and the two records (``readahead``, ``readahead_pc0``)."""
    keys = [*counter_keys, "vmstat.swap_ra", "vmstat.swap_ra_hit"]
    note("lab: sequential zswap read-back at vm.page-cluster 3 (swap_ra_page_ns)")
    fit_ra, rec_ra = _lab_stage(
        core,
        readahead_scenario(version, cgroup_version, 3),
        base_costs,
        READAHEAD_PARAMS + PRESSURE_NUISANCE,
        reps,
        note,
        wait_s,
        keys,
        between,
        recorded=recorded("readahead"),
    )
    rec_ra["kept"] = list(READAHEAD_PARAMS)
    note("lab: the same read-back at vm.page-cluster 0 (swapin_page_ns, a check)")
    _fit0, rec0 = _lab_stage(
        core,
        readahead_scenario(version, cgroup_version, 0),
        base_costs,
        READAHEAD_CHECK_PARAMS + PRESSURE_NUISANCE,
        reps,
        note,
        wait_s,
        keys,
        between,
        recorded=recorded("readahead_pc0"),
    )
    rec0["kept"] = []
    return {k: fit_ra.params[k] for k in READAHEAD_PARAMS}, {"readahead": rec_ra, "readahead_pc0": rec0}


WRITE_STAGES = ("write_tmpfs", "write_ext4", "write_reclaim")


def write_counter_keys() -> list[str]:
    g = f"memcg[/{PRESSURE_GROUP}].memory.stat."
    keys = [g + k for k in ("pgpgin", "pgpgout", "dirty", "cache", "shmem")]
    return keys + [f"vmstat.{k}" for k in ("nr_dirtied", "nr_written", "pgscan_file", "pgsteal_file", "nr_vmscan_immediate_reclaim")]


def write_stages(
    core: Any,
    version: str,
    cgroup_version: int,
    base: Mapping[str, int],
    reps: int,
    note: _Note,
    wait_s: float,
    fs_device: Mapping[str, Any],
    between: Callable[[], None] | None = None,
    recorded: Callable[[str], dict[str, Any] | None] = lambda _stage: None,
    speed_factor: Callable[[], float] = lambda: 1.0,
) -> tuple[dict[str, int], dict[str, Any]]:
    """Stage 3c, buffered write(2): the tmpfs runs (``pagecache_add_ns``,
    ``shmem_write_page_ns``), the ext4 runs with everything before fixed (``write_page_ns``,
    ``folio_account_dirtied_ns``), then the writes in a memcg at its limit with those fixed
    (``write_begin_folio_ns``, ``reclaim_file_folio_ns``); each stage's base is
    ``base`` (at the profile's CPU speed) with the stages before it fitted, times
    ``speed_factor()`` (this moment's speed over the profile's, read after each stage's runs).
    Returns the fitted figures at the profile's speed and the three records."""
    costs = dict(base)
    out: dict[str, int] = {}
    records: dict[str, Any] = {}
    keys = write_counter_keys()
    for name, which, params in (
        ("write_tmpfs", "tmpfs", WRITE_TMPFS_PARAMS),
        ("write_ext4", "ext4", WRITE_EXT4_PARAMS),
        ("write_reclaim", "reclaim", WRITE_RECLAIM_PARAMS),
    ):
        note(f"lab: buffered write(2), {which} ({', '.join(params)})")
        fixed = dict(costs)

        def scaled(fixed: Mapping[str, int] = fixed) -> dict[str, int]:
            f = speed_factor()
            return {k: (v if k == "process_quantum_ns" else max(0, round(v * f))) for k, v in fixed.items()}

        fit, rec = _lab_stage(
            core,
            write_scenario(version, cgroup_version, which),
            scaled,
            params,
            reps,
            note,
            wait_s,
            keys,
            between,
            recorded=recorded(name),
            fs_device=None if which == "tmpfs" else fs_device,
            unfitted=WRITE_UNFITTED[which],
        )
        f = speed_factor()
        values = {k: round(fit.params[k] / f) for k in params}
        rec["kept"] = list(params)
        rec["speed_factor"] = f
        if f != 1.0:
            rec["values_at_profile_speed"] = Inline(values)
        records[name] = rec
        out.update(values)
        costs.update(values)
    return out, records


def _lab_loop_device(profile_path: Path) -> dict[str, Any]:
    """The lowered figures of the profile's ``lab-loop`` device (``[devices.lab-loop]``, or the
    built-in preset when the profile has none), for the write stages' simulator runs."""
    from reclaimlab.lower import _device
    from reclaimlab.profile import device_presets, load_profile

    return _device(device_presets(load_profile(profile_path))["lab-loop"])


def _lowered_device(name: str, table: Mapping[str, Any]) -> dict[str, Any]:
    """A profile's ``[devices.<name>]`` table (scenario units) as the lowered device figures."""
    from reclaimlab.lower import _device
    from reclaimlab.profile import ProfileError, _profile_device

    model, problems = _profile_device(name, dict(table))
    if model is None:
        raise ProfileError("<calibrate>", problems)
    return _device(model)


@dataclass
class _AddOn:
    """What a stage run on top of the existing profile at the output path starts from
    (``--only-write``, ``--only-readahead``): the profile's text, its figures over the core's
    defaults and its speed probe ``ref``; this host's kernel preset and cgroup version; the
    speed probes taken around the runs (``between``), whose median over ``ref`` scales the
    profile's figures to this run's moment (``factor``)."""

    core: Any
    out: Path
    text: str
    ref: float
    base: dict[str, int]
    version: str
    cgv: int
    probes: list[float]

    @staticmethod
    def start(args: Options, flag: str) -> _AddOn:
        from reclaimlab import native
        from reclaimlab.lab import probe as probing

        core = native.core()
        p = probing.probe()
        if not p.root:
            raise LabUnavailable(f"calibrate {flag} needs root for the lab runs")
        out = args.out_path()
        try:
            text = out.read_text(encoding="utf-8")
        except OSError as e:
            raise LabError(f"{flag} adds to an existing profile: cannot read {out}: {e}") from e
        profile = tomllib.loads(text)
        ref = profile.get("measurements", {}).get("speed_probe_ns")
        if not isinstance(ref, int | float) or ref <= 0:
            raise LabError(f"{out}: measurements.speed_probe_ns: expected the profile's speed probe (ns), found {ref!r}")
        defaults = {k: int(v) for k, v in core.default_costs().items()}
        base = {**defaults, **{k: int(v) for k, v in profile.get("costs", {}).items()}}
        version = kernel_preset(p.kernel_release, native.capabilities().known_versions())
        return _AddOn(core, out, text, float(ref), base, version, 1 if p.cgroup_v1_memory else 2, [speed.probe_ns()])

    def between(self) -> None:
        self.probes.append(speed.probe_ns())

    def factor(self) -> float:
        return statistics.median(self.probes) / self.ref


def calibrate_write(args: Options, note: _Note) -> tuple[str, dict[str, Any]]:
    """``--only-write``: stage 3c on top of the profile at the output path, as ``--only-readahead``
    does: its costs scaled to the CPU speed of this run's moment, the fitted figures scaled
    back to the profile's speed, the loop device the profile's (measure it right before with
    ``--only-loop-device``: its speed moves within minutes); the profile text with the figures
    and the stages' records added."""
    a = _AddOn.start(args, "--only-write")
    kept, records = write_stages(
        a.core, a.version, a.cgv, a.base, args.reps, note, args.wait, _lab_loop_device(a.out), a.between, speed_factor=a.factor
    )
    when = datetime.now(UTC).isoformat(timespec="seconds")
    for r in records.values():
        r["speed_probe_ns"] = round(statistics.median(a.probes))
        r["kernel_preset"] = a.version
        r["cgroup_version"] = a.cgv
        r["loadavg_end"] = _loadavg()
        r["date"] = when
    new_text = a.text
    items = list(kept.items())
    for i, (k, v) in enumerate(items):
        last = i == len(items) - 1
        new_text = add_to_profile(new_text, k, v, COST_NOTES[k], records if last else {}, args.command_line())
    return new_text, {"kind": args.kind, "costs": kept, "devices": {}, "measurements": {"lab": records}}


# ---------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------

COST_NOTES = {
    "access_ns": "lab: random reads over a resident region",
    "fault_ns": "lab: read faults mapping the zero page",
    "page_alloc_zero_ns": "lab: write faults of a fill (incl. the page copy)",
    "swapin_page_ns": "lab: zram run under a memcg limit (fit; without 1b: the zswap run)",
    "reclaim_page_ns": "lab: zram run under a memcg limit (fit; without 1b: the swap-file run)",
    "page_reported_touch_ns": "lab: THP fill into blocks free for 30 s, beyond page_alloc_zero_ns (fit)",
    "scan_page_ns": "lab: zram fills, first reclaim over referenced pages vs one scan per page freed (fit)",
    "swap_write_end_ns": "lab: swap-file run under a memcg limit (fit)",
    "zswap_entry_ns": "lab: zswap run under a memcg limit (fit)",
    "swap_ra_page_ns": "lab: sequential zswap read-back at page-cluster 3 (fit)",
    "shrink_node_ns": "kernel: failed v1 limit writes over mlock()ed memory, per shrink_node call",
    "pagecache_add_ns": "lab: tmpfs write(2), new folio per hole vs a cached pass (fit)",
    "shmem_write_page_ns": "lab: tmpfs write(2) over cached folios (fit)",
    "write_page_ns": "lab: ext4 write(2) over cached dirty folios (fit)",
    "folio_account_dirtied_ns": "lab: ext4 write(2) over clean cached folios vs dirty ones (fit)",
    "write_begin_folio_ns": "lab: ext4 write(2) over dropped pages, frames freed from large clean folios (fit)",
    "reclaim_file_folio_ns": "lab: ext4 write(2) stream through a 128 MiB memcg (fit)",
}


def _inline_kernel_codecs(kc: Mapping[str, Any]) -> dict[str, Any]:
    """The kernel-codecs report laid out for the profile's TOML (one line per class)."""
    out = {k: v for k, v in kc.items() if k not in ("classes", "composition", "loadavg")}
    out["loadavg_1m"] = [x[0] for x in kc["loadavg"] if x]
    out["devices"] = Inline(kc["devices"])
    for codec, per_class in kc["classes"].items():
        out[codec] = {cls: Inline(cell) for cls, cell in per_class.items()}
        for what, fit in kc["composition"][codec].items():
            out[codec][f"{what}_fit"] = Inline({"random": fit["random"], "run": fit["run"], "residuals": Inline(fit["residuals"])})
    return out


def _host_facts() -> dict[str, Any]:
    cpu_model = None
    with contextlib.suppress(OSError):
        for line in host.read_text("/proc/cpuinfo").splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    mem_kb = None
    with contextlib.suppress(OSError, ValueError):
        for line in host.read_text("/proc/meminfo").splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    return {
        "kernel_release": platform.release(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model,
        "mem_total_kb": mem_kb,
        "hostname": platform.node(),
    }


def _loadavg() -> list[float]:
    try:
        return [float(x) for x in host.read_text("/proc/loadavg").split()[:3]]
    except (OSError, ValueError):
        return []


@dataclass(frozen=True)
class Options:
    """What ``reclaimlab calibrate`` was asked (its command-line options, cli.py)."""

    kind: str = DEFAULT_PROFILE_KIND
    #: Where to write the profile (None: the package's profiles/<kind>.toml, where lowering
    #: finds the default profile).
    output: Path | None = None
    reps: int = 5
    codec_reps: int = 101
    codec_rounds: int = 3
    wait: float = 600.0
    skip_device: bool = False
    #: Do not measure the lab's loop device (stage 2b).
    skip_loop_device: bool = False
    #: Measure only the lab's loop device; replace [devices.lab-loop] and
    #: [measurements.loop_device] of the existing profile, keep the rest.
    only_loop_device: bool = False
    skip_lab: bool = False
    kernel_codec_rounds: int = 10
    #: Refit the lab stages on the kernel runs recorded in this earlier profile instead of
    #: running them (e.g. when this host is too busy for lab runs to measure it).
    lab_from: Path | None = None
    #: Run only the readahead stages on top of the existing profile at the output path, and add
    #: their figure and records to it (everything else in it stays as it is).
    only_readahead: bool = False
    #: Run only the buffered-write stages (3c) on top of the existing profile at the output path,
    #: with its lab-loop device, and add their figures and records to it.
    only_write: bool = False
    #: Refit every lab stage of the existing profile at the output path on the kernel runs it
    #: records, with its own measured codec, device and reclaim-pass figures (no host
    #: measurement, no lab run); replace the fitted costs and the stages' records.
    refit_lab: bool = False
    json: Path | None = None

    def command_line(self) -> str:
        """The command that asks for these options (the defaults left out), for the profile."""
        out = ["reclaimlab calibrate"]
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            flag = "--" + f.name.replace("_", "-")
            out.append(flag if value is True else f"{flag} {value}")
        return " ".join(out)

    def out_path(self) -> Path:
        return self.output if self.output is not None else PROFILES_DIR / f"{self.kind}.toml"


def _recorded_device(profile: Path) -> dict[str, Any] | None:
    """The raw device measurement (``[measurements.device]``) a profile recorded, if any."""
    device = tomllib.loads(profile.read_text()).get("measurements", {}).get("device")
    return dict(device) if isinstance(device, dict) else None


def calibrate(args: Options, note: _Note) -> tuple[str, dict[str, Any]]:
    """Measure, fit; the profile text and a JSON-ready summary."""
    from reclaimlab import native
    from reclaimlab.lab import probe as probing

    core = native.core()
    if not hasattr(core, "codec_timing"):
        raise LabUnavailable("the native module has no codec_timing: rebuild it (`make build`)")
    p = probing.probe()
    if not p.root and not (args.skip_device and args.skip_loop_device and args.skip_lab):
        raise LabUnavailable(
            "calibrate needs root for the swap device, the loop device and the lab runs "
            "(or use --skip-device --skip-loop-device --skip-lab)"
        )
    started = datetime.now(UTC)
    facts = _host_facts()
    load_start = _loadavg()
    defaults = {k: int(v) for k, v in core.default_costs().items()}
    measurements: dict[str, Any] = {
        "command": args.command_line(),
        "date": started.isoformat(timespec="seconds"),
        "host": {k: v for k, v in facts.items() if v is not None},
    }

    # 1. Codecs: rounds at the start, after the device and after every lab run, each under the
    # lab lock so that no lab run competes for the CPUs.
    timer = CodecTimer(core, reps=args.codec_reps)

    def codec_rounds(n: int, say: bool = True) -> None:
        if say:
            note(f"codecs: {n} timing round(s) of {', '.join(CODECS)} on {', '.join(CLASSES)} pages")
        with locked("reclaimlab calibrate (codecs)", note, args.wait) if p.root else contextlib.nullcontext():
            for _ in range(n):
                timer.round()

    codec_rounds(args.codec_rounds)
    # The CPU's speed now (lab/speed.py): validate scales the costs by a kernel run's probe
    # over the profile's. Taken at the start, after the codecs stage and at the end.
    probes = [speed.probe_ns()]
    costs: dict[str, int] = {}
    kernel_codec_scale: dict[str, float] = {}

    # 1b. The kernel's own codecs, per content class, through zram (kernel_codecs.py): these
    # figures replace ours for every codec the host's zram offers.
    kernel_codec_figures: dict[str, int] = {}
    if p.root and p.zram_loaded and p.zram_hot_add and args.kernel_codec_rounds > 0:
        note(f"kernel codecs: zram writes and reads of {', '.join(kernel_codecs.CLASSES)} pages, {args.kernel_codec_rounds} rounds")
        kc = kernel_codecs.run(rounds=args.kernel_codec_rounds, note=note)
        kernel_codec_figures = kernel_codec_costs(kc)
        probes += [float(x) for x in kc["speed_probe_ns"]]
        measurements["kernel_codecs"] = _inline_kernel_codecs(kc)

    # 1c. The kernel's fixed time of a reclaim pass (reclaim_pass.py): shrink_node calls that
    # find nothing to reclaim, through failed cgroup v1 limit writes. Measured before the lab
    # fits, which then hold only per-page work; also with --lab-from (it takes seconds, and a
    # refit of recorded runs needs the pass cost as much as a fit of new ones).
    if p.root and p.cgroup_v1_memory and not args.skip_lab:
        note("reclaim pass: failed memory.limit_in_bytes writes over mlock()ed memory (shrink_node_ns)")
        rp = reclaim_pass.run(note=note)
        costs["shrink_node_ns"] = int(rp["shrink_node_ns"])
        measurements["reclaim_pass"] = dict(rp)

    # 2. The swap device.
    devices: dict[str, dict[str, Any]] = {}
    if not args.skip_device:
        recorded_device = _recorded_device(args.lab_from) if args.lab_from is not None and not args.skip_lab else None
        if recorded_device is not None:
            # The recorded swap-file runs are refitted with the device measured beside them,
            # not with one measured now (on a busy host a device figure moves several-fold).
            note(f"swap device: the measurement recorded in {args.lab_from}")
            raw = recorded_device
        else:
            note(f"swap device: O_DIRECT IO on a temporary file in {state_dir()}")
            raw = _device_step(note, args.wait)
        model = device_model(raw)
        devices["virtio-disk"] = {
            "rotational": model["rotational"],
            "read_latency": format_duration(model["read_latency_ns"]),
            "write_latency": format_duration(model["write_latency_ns"]),
            "read_bandwidth": format_bandwidth(model["read_bytes_per_s"]),
            "write_bandwidth": format_bandwidth(model["write_bytes_per_s"]),
            **{k: model[k] for k in ("iops", "max_sectors_kb", "nr_requests", "read_ahead_kb") if k in model},
        }
        measurements["device"] = raw
        codec_rounds(1)

    # 2b. The lab's loop device (the filesystems of file scenarios).
    if not args.skip_loop_device:
        table, summary = _loop_device_step(note, args.wait)
        devices["lab-loop"] = table
        measurements["loop_device"] = summary
        codec_rounds(1)

    # 3. Lab runs and fits.
    if not args.skip_lab:
        versions = native.capabilities().known_versions()
        version = kernel_preset(p.kernel_release, versions)
        cgv = 1 if p.cgroup_v1_memory else 2
        old: dict[str, Any] = {}
        if args.lab_from is not None:
            old_all = tomllib.loads(args.lab_from.read_text())["measurements"]
            old = {**old_all["lab"], "date": old_all.get("date", "?")}
            version, cgv = str(old["kernel_preset"]), int(old["cgroup_version"])
            note(f"lab: refitting the kernel runs recorded in {args.lab_from} (no lab runs)")

        def rec(stage: str) -> dict[str, Any] | None:
            if args.lab_from is None:
                return None
            if stage not in old:
                raise LabError(f"--lab-from {args.lab_from}: no recorded lab stage {stage!r}")
            return dict(old[stage])

        note(f"lab: no-pressure runs (fault, allocation, access), kernel preset {version}, cgroup v{cgv}")
        after_run = functools.partial(codec_rounds, 1, False)
        fit1, rec1 = _lab_stage(
            core,
            nopressure_scenario(version, cgv),
            lambda: {**defaults, **codec_costs(timer.table()), **costs},
            NOPRESSURE_PARAMS,
            args.reps,
            note,
            args.wait,
            [],
            after_run,
            recorded=rec("nopressure"),
        )
        costs.update(fit1.params)
        rec_reporting: dict[str, Any] | None = None
        if (args.lab_from is None and p.page_reporting_order) or (args.lab_from is not None and "page_reporting" in old):
            # 3d: a VM whose balloon reports free memory: the first touch of a reported frame.
            note("lab: THP fills into reported and into just-freed blocks (page_reported_touch_ns)")
            fit_pr, rec_reporting = _lab_stage(
                core,
                page_reporting_scenario(version, cgv),
                lambda: {**defaults, **costs},
                PAGE_REPORTING_PARAMS,
                args.reps,
                note,
                args.wait,
                [],
                after_run,
                recorded=rec("page_reporting"),
                unfitted=PAGE_REPORTING_UNFITTED,
            )
            costs.update({k: fit_pr.params[k] for k in PAGE_REPORTING_PARAMS})
            rec_reporting["kept"] = list(PAGE_REPORTING_PARAMS)
        g = f"memcg[/{PRESSURE_GROUP}].memory.stat."
        keys = [g + k for k in ("pgfault", "pgmajfault", "zswpin", "zswpout", "pswpin", "pswpout", "pgscan", "pgsteal")]
        keys += [f"vmstat.{k}" for k in ("zswpin", "zswpout", "pswpin", "pswpout")]
        rec_scan: dict[str, Any] | None = None
        if "lzo_compress_ns" in kernel_codec_figures and (args.lab_from is None or "scan" in old):
            # Scanning apart from freeing, before the stages that fit per-page reclaim work
            # (whose runs scan about 2.2 pages per page freed, so that reclaim_page_ns would
            # hold the scans and charge them to a reclaim that scans one page per page freed).
            note("lab: zram fills, a first reclaim over referenced pages (scan_page_ns)")
            fit_sc, rec_scan = _lab_stage(
                core,
                scan_scenario(version, cgv),
                lambda: {**defaults, **costs, **kernel_codec_figures},
                SCAN_PARAMS + SCAN_NUISANCE,
                args.reps,
                note,
                args.wait,
                [*keys, "vmstat.pgscan_anon", "vmstat.pgsteal_anon"],
                after_run,
                recorded=rec("scan"),
            )
            costs.update({k: fit_sc.params[k] for k in SCAN_PARAMS})
            rec_scan["kept"] = list(SCAN_PARAMS)
        rec_zram: dict[str, Any] | None = None
        if "lzo_compress_ns" in kernel_codec_figures and (args.lab_from is None or "zram" in old):
            # Reclaim and swap-in on their own: zram's path is reclaim, the codec (the kernel's,
            # measured in 1b) and swap-in, without zswap's entry work or disk IO. The fill
            # identifies reclaim_page_ns, the random reads swapin_page_ns; both are then fixed
            # in the swap-file run (which fits what a disk write adds) and the zswap run (what
            # zswap adds).
            note("lab: zram run under a memcg limit (reclaim, swap-in)")
            fit_z, rec_zram = _lab_stage(
                core,
                pressure_scenario(version, cgv, zram=True),
                lambda: {**defaults, **costs, **kernel_codec_figures},
                ZRAM_PARAMS + PRESSURE_NUISANCE,
                args.reps,
                note,
                args.wait,
                keys,
                after_run,
                recorded=rec("zram"),
            )
            costs.update({k: fit_z.params[k] for k in ZRAM_PARAMS})
            rec_zram["kept"] = list(ZRAM_PARAMS)
        rec_swapfile: dict[str, Any] | None = None
        if "device" in measurements:
            # The reclaim work of a swap-out, from runs without zswap: fitted against zswap runs
            # alone, reclaim_page_ns also held zswap's store work, and charged it to every
            # swap-out to disk (2x the kernel's time for a fill that swaps to a file).
            swapfile_params = SWAPFILE_AFTER_ZRAM if rec_zram is not None else SWAPFILE_PARAMS
            note(f"lab: swap-file run under a memcg limit ({', '.join(swapfile_params)})")
            fit_s, rec_swapfile = _lab_stage(
                core,
                pressure_scenario(version, cgv, access_count=20_000, zswap=False),
                lambda: {**defaults, **costs},
                swapfile_params + SWAPFILE_NUISANCE,
                args.reps,
                note,
                args.wait,
                keys,
                after_run,
                device=device_model(measurements["device"]),
                recorded=rec("swapfile"),
            )
            costs.update({k: fit_s.params[k] for k in swapfile_params})
            rec_swapfile["kept"] = list(swapfile_params)
        note("lab: zswap run under a memcg limit (zswap store/load, swap-in)")
        # The run's pages are text: the fit charges the codec's text figures, from the rounds
        # taken between these runs, so that the fitted parameters hold the non-codec work only.
        first = len(timer.rounds)
        text_codec: dict[str, int] = {}

        def base2() -> dict[str, int]:
            # The kernel's own lzo figures where measured (1b); else the mean over our rounds
            # taken between these runs (the fit averages over the runs in the same way).
            if "lzo_compress_ns" in kernel_codec_figures:
                text_codec.update({k: v for k, v in kernel_codec_figures.items() if k.startswith("lzo_") and not k.startswith("lzo_rle")})
            else:
                t = timer.table(since=first)["lzo"]["text"]
                text_codec.update(
                    lzo_compress_ns=round(statistics.fmean(t["compress_rounds_ns"])),
                    lzo_decompress_ns=round(statistics.fmean(t["decompress_rounds_ns"])),
                )
            return {**defaults, **costs, **text_codec}

        # Without the swap-file stage (--skip-device) reclaim_page_ns is fitted here, as before.
        pressure_params = tuple(k for k in PRESSURE_PARAMS if rec_zram is None or k not in ZRAM_PARAMS)
        pressure_params = tuple(k for k in pressure_params if k not in costs or k not in (*ZRAM_PARAMS, *SWAPFILE_PARAMS))
        params2 = pressure_params + PRESSURE_NUISANCE + (() if rec_swapfile is not None or rec_zram is not None else SWAPFILE_PARAMS)
        fit2, rec2 = _lab_stage(
            core, pressure_scenario(version, cgv), base2, params2, args.reps, note, args.wait, keys, after_run, recorded=rec("zswap")
        )
        kept2 = [k for k in params2 if k not in PRESSURE_NUISANCE]
        costs.update({k: fit2.params[k] for k in kept2})
        rec2["kept"] = kept2
        measurements["lab"] = {
            **({"recorded_from": f"{args.lab_from.name}, measured {old.get('date', '?')}"} if args.lab_from is not None else {}),
            "kernel_preset": version,
            "cgroup_version": cgv,
            "text_codec_during_fit": Inline(text_codec),
            "nopressure": rec1,
            **({"page_reporting": rec_reporting} if rec_reporting is not None else {}),
            **({"scan": rec_scan} if rec_scan is not None else {}),
            **({"swapfile": rec_swapfile} if rec_swapfile is not None else {}),
            **({"zram": rec_zram} if rec_zram is not None else {}),
            "zswap": rec2,
        }
        if args.lab_from is None or "readahead" in old:
            ra_costs, ra_records = readahead_stages(
                core,
                version,
                cgv,
                lambda: {**defaults, **costs, **text_codec},
                args.reps,
                note,
                args.wait,
                keys,
                after_run,
                rec if args.lab_from is not None else lambda _stage: None,
            )
            costs.update(ra_costs)
            measurements["lab"].update(ra_records)
        # 3c. Buffered write(2): on tmpfs, and on ext4 over the loop device just measured.
        if "lab-loop" in devices and (args.lab_from is None or "write_tmpfs" in old):
            w_costs, w_records = write_stages(
                core,
                version,
                cgv,
                {**defaults, **costs},
                args.reps,
                note,
                args.wait,
                _lowered_device("lab-loop", devices["lab-loop"]),
                after_run,
                rec if args.lab_from is not None else lambda _stage: None,
            )
            costs.update(w_costs)
            measurements["lab"].update(w_records)
        # 4. The kernel's own codecs, where they are not ours: the same zswap run with each other
        # compressor the host's zswap offers, fitting that codec's two costs with everything else
        # at the figures just fitted. Our codec timing measures our implementation in user
        # space; the kernel's (e.g. lib/zlib_deflate for deflate) can be much slower.
        measured_codecs = {c for c in CODECS if f"{COST_CODECS[c]}_compress_ns" in kernel_codec_figures}
        for codec in [c for c in kernel_fit_codecs(p.zswap_compressors) if c not in measured_codecs]:
            note(f"lab: zswap run with {codec} (the kernel's {codec} costs)")
            params4 = (f"{COST_CODECS[codec]}_compress_ns", f"{COST_CODECS[codec]}_decompress_ns")
            first_k = len(timer.rounds)

            def base4(codec: str = codec, first_k: int = first_k) -> dict[str, int]:
                ours = timer.table(since=first_k)[codec]["text"]
                return {
                    **defaults,
                    **costs,
                    **text_codec,
                    f"{COST_CODECS[codec]}_compress_ns": round(statistics.fmean(ours["compress_rounds_ns"])),
                    f"{COST_CODECS[codec]}_decompress_ns": round(statistics.fmean(ours["decompress_rounds_ns"])),
                }

            if args.lab_from is not None and f"zswap_{codec}" not in old:
                continue
            fit4, rec4 = _lab_stage(
                core,
                pressure_scenario(version, cgv, compressor=codec),
                base4,
                params4,
                args.reps,
                note,
                args.wait,
                keys,
                after_run,
                recorded=rec(f"zswap_{codec}"),
            )
            ours_text = base4()
            rec4["kernel_over_ours_text"] = Inline({k: round(fit4.params[k] / ours_text[k], 3) for k in params4 if ours_text[k] > 0})
            # The ratio on text scales the codec's figures of every kind of byte.
            for k, factor in rec4["kernel_over_ours_text"].items():
                what = "decompress" if "_decompress" in k else "compress"
                for suffix in KIND_SUFFIX.values():
                    kernel_codec_scale[f"{COST_CODECS[codec]}_{what}{suffix}_ns"] = factor
            measurements["lab"][f"zswap_{codec}"] = rec4
    table = timer.table()
    codec_figures = codec_costs(table)
    # A codec fitted on the kernel through zswap: our figures scaled by the kernel's cost over
    # ours on the text pages of the fit. Codecs measured through zram: the kernel's figures.
    for k, factor in kernel_codec_scale.items():
        if k in codec_figures:
            codec_figures[k] = round(codec_figures[k] * factor)
    codec_figures.update(kernel_codec_figures)
    costs = {**codec_figures, **costs}
    measurements["codecs"] = {
        "method": "our codecs, ns per 4 KiB page, hot caches; per round: median over pages of per-page medians; median of rounds",
        "rounds": len(timer.rounds),
        "reps": args.codec_reps,
        **{codec: {cls: Inline(cell) for cls, cell in classes.items()} for codec, classes in table.items()},
    }
    probes.append(speed.probe_ns())
    measurements["speed_probe_ns"] = round(statistics.median(probes))
    measurements["speed_probe"] = "our lzo on one text page, ns (lab/speed.py); median of the probes taken during calibrate"
    measurements["host"]["loadavg_start"] = load_start
    measurements["host"]["loadavg_end"] = _loadavg()
    measurements["duration_s"] = round((datetime.now(UTC) - started).total_seconds(), 1)

    unmeasured = [k for k in cost_names() if k not in costs]
    dev = measurements.get("device", {})
    header = [
        f"reclaimlab machine profile: {args.kind}",
        "",
        f"Made by:  {args.command_line()}",
        f"Date:     {measurements['date']}",
        f"Host:     Linux {facts['kernel_release']} {facts['machine']}; {facts['cpus']} CPUs ({facts['cpu_model']})",
        f"          MemTotal {facts['mem_total_kb']} kB; hostname {facts['hostname']}",
    ]
    if dev:
        header.append(f"Swap fs:  {dev['directory']} on {dev['device']} ({dev['fstype']}), rotational={int(dev['rotational'])}")
    header += [
        f"Load:     {' '.join(map(str, load_start))} at start, {' '.join(map(str, measurements['host']['loadavg_end']))} at the end",
        "",
        "Method and caveats of every figure: docs/calibration.md. Lowering applies this profile by",
        "default (docs/model/time.md, 'Machine profiles'): [costs] replace the built-in cost defaults",
        "(a scenario's [costs] still override them); [devices.<preset>] replaces that built-in",
        "device preset (a scenario's own device figures still win). [measurements] is reference only.",
    ]
    if unmeasured:
        header.append("Not measured (the built-in defaults apply):")
        line = ""
        for name in unmeasured:
            if len(line) + len(name) > 84:
                header.append("  " + line.rstrip())
                line = ""
            line += name + ", "
        header.append("  " + line.rstrip(", ") + ".")
    notes_ = dict(COST_NOTES)
    for k in codec_figures:
        notes_[k] = "our codec's timing by content (user space)"
    for k, factor in kernel_codec_scale.items():
        if k in codec_figures:
            notes_[k] = f"ours by content x {factor} (kernel's {k.split('_')[0]}, zswap run fit)"
    for k in kernel_codec_figures:
        notes_[k] = "kernel: zram write/read by content"
    text = render_profile(args.kind, costs, devices, measurements, header, notes_)
    summary = {"kind": args.kind, "costs": costs, "devices": devices, "measurements": measurements}
    return text, summary


def add_to_profile(text: str, cost: str, value: int, note: str, lab_records: Mapping[str, Any], command: str) -> str:
    """``text`` (a profile) with ``[costs] cost = value`` set (replaced, or inserted in the core's
    order) and the tables ``[measurements.lab.<name>]`` of ``lab_records`` added at the end
    (replacing earlier ones of the same name). Every other line stays as it is."""
    names = cost_names()
    if cost not in names:
        raise ValueError(f"unknown cost parameter: {cost}")
    lines = text.rstrip("\n").split("\n")
    # Drop earlier records of these stages: from their header to the next table that is not theirs.
    drop = tuple(f"[measurements.lab.{format_key(n)}" for n in lab_records)
    kept: list[str] = []
    skipping = False
    for line in lines:
        if line.startswith("# Added by: "):
            continue
        if line.startswith("["):
            skipping = any(line == d + "]" or line.startswith(d + ".") for d in drop)
        if not skipping:
            kept.append(line)
    while kept and kept[-1] == "":
        kept.pop()
    start = kept.index("[costs]")
    end = next((i for i in range(start + 1, len(kept)) if kept[i].startswith("[") or kept[i] == ""), len(kept))
    entry = f"{format_key(cost)} = {value}"
    entry = f"{entry:<34} # {note}"
    body = [ln for ln in kept[start + 1 : end] if ln.split("=")[0].strip() != cost]
    order = {n: i for i, n in enumerate(names)}
    pos = next((i for i, ln in enumerate(body) if order.get(ln.split("=")[0].strip(), -1) > order[cost]), len(body))
    body.insert(pos, entry)
    out = [*kept[: start + 1], *body, *kept[end:]]
    # The header's list of unmeasured costs must not name it any more.
    out = [
        re.sub(rf"(?<=[ ,]){re.escape(cost)}(, |,$|\.$)", lambda m: "" if m.group(1).startswith(",") else ".", ln)
        if ln.startswith("#   ")
        else ln
        for ln in out
    ]
    out = [ln.replace(", .", ".") for ln in out]
    out.append("")
    out.append(f"# Added by: {command}")
    tables: list[str] = []
    if lab_records:  # (none: an empty [measurements.lab] header would declare the table twice)
        _toml_table(["measurements", "lab"], {n: r for n, r in lab_records.items()}, tables)
    out.extend(tables)
    return "\n".join(out) + "\n"


def calibrate_readahead(args: Options, note: _Note) -> tuple[str, dict[str, Any]]:
    """``--only-readahead``: the readahead stages on top of the profile at the output path, its
    costs scaled to the CPU speed of this run's moment (the runs are fitted against the profile's
    other figures, measured at another speed) and the fitted figure scaled back to the
    profile's speed; the profile text with that figure and the stages' records added."""
    a = _AddOn.start(args, "--only-readahead")

    def scaled() -> dict[str, int]:
        factor = a.factor()
        return {k: (v if k == "process_quantum_ns" else max(0, round(v * factor))) for k, v in a.base.items()}

    g = f"memcg[/{PRESSURE_GROUP}].memory.stat."
    keys = [g + k for k in ("pgfault", "pgmajfault", "zswpin", "zswpout")] + ["vmstat.zswpin", "vmstat.zswpout"]
    fitted, records = readahead_stages(a.core, a.version, a.cgv, scaled, args.reps, note, args.wait, keys, a.between)
    factor = a.factor()
    kept = {k: round(v / factor) for k, v in fitted.items()}
    for r in records.values():
        r["speed_probe_ns"] = round(statistics.median(a.probes))
        r["speed_factor"] = round(factor, 4)
        r["kernel_preset"] = a.version
        r["cgroup_version"] = a.cgv
        r["loadavg_end"] = _loadavg()
    records["readahead"]["values_at_profile_speed"] = Inline(kept)
    records["readahead"]["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    ((cost, value),) = kept.items()
    new_text = add_to_profile(a.text, cost, value, COST_NOTES[cost], records, args.command_line())
    return new_text, {"kind": args.kind, "costs": kept, "devices": {}, "measurements": {"lab": records}}


def _new_stage_fit(
    core: Any,
    text: str,
    base: Mapping[str, int],
    params: Sequence[str],
    args: Options,
    note: _Note,
    keys: Sequence[str],
    ref_probe_ns: float,
    unfitted: Sequence[str] = (),
) -> tuple[Fit, dict[str, Any]]:
    """Kernel runs of a lab stage fitted at the CPU speed of their moment: ``base`` (a profile's
    figures, at its speed ``ref_probe_ns``) scaled by the median speed probe of the runs over
    it (read after the runs); the record says the factor (``speed_factor``), and the caller
    scales the fitted figures back."""
    got: dict[str, float] = {}
    probes = [speed.probe_ns()]

    def scaled() -> dict[str, int]:
        got["factor"] = statistics.median(probes) / ref_probe_ns
        return {k: (v if k == "process_quantum_ns" else max(0, round(v * got["factor"]))) for k, v in base.items()}

    fit, rec = _lab_stage(
        core, text, scaled, params, args.reps, note, args.wait, keys, lambda: probes.append(speed.probe_ns()), unfitted=unfitted
    )
    rec["speed_probe_ns"] = round(statistics.median(probes))
    rec["speed_factor"] = round(got["factor"], 4)
    return fit, rec


def refit_lab(args: Options, note: _Note) -> tuple[str, dict[str, Any]]:
    """``--refit-lab``: the lab stages of the profile at the output path fitted again on the
    kernel runs they record (``measurements.lab``), in calibrate's order (no-pressure, scan,
    zram, swap file, zswap, readahead, the zswap runs of other compressors), each stage's base
    being the profile's figures with the stages before it refitted. A stage the profile does not
    record (one added to calibrate since, e.g. scan) is run on the kernel now (root, the lab
    lock) and fitted at this moment's CPU speed. Nothing else is measured: the codec
    figures, ``shrink_node_ns`` and the swap device are the profile's own (the device as recorded
    beside the runs). A stage recorded at another CPU speed (``speed_factor``, from
    ``--only-readahead``) is fitted at that speed and its figure scaled back. A compressor fitted
    through zswap keeps its method: our codec's figures by content (the profile's
    ``measurements.codecs``, all rounds) times the kernel's cost over ours on text."""
    from reclaimlab import native

    core = native.core()
    out = args.out_path()
    try:
        text = out.read_text(encoding="utf-8")
    except OSError as e:
        raise LabError(f"--refit-lab refits an existing profile: cannot read {out}: {e}") from e
    profile = tomllib.loads(text)
    meas = profile.get("measurements", {})
    lab = meas.get("lab")
    if not isinstance(lab, dict) or "nopressure" not in lab:
        raise LabError(f"{out}: measurements.lab.nopressure: expected the recorded lab stages, found none")
    defaults = {k: int(v) for k, v in core.default_costs().items()}
    costs = {**defaults, **{k: int(v) for k, v in profile.get("costs", {}).items()}}
    version, cgv = str(lab["kernel_preset"]), int(lab["cgroup_version"])
    fitted: dict[str, int] = {}
    notes_: dict[str, str] = {}
    records: dict[str, Any] = {}
    when = datetime.now(UTC).isoformat(timespec="seconds")

    def stage(
        name: str,
        text_: str,
        params: Sequence[str],
        kept: Sequence[str],
        base: Mapping[str, int],
        device: Any = None,
        keys: Sequence[str] = (),
        unfitted: Sequence[str] = (),
    ) -> Fit:
        if name in lab:
            rec = dict(lab[name])
            factor = float(rec.get("speed_factor", 1.0))
            at_speed = {k: (v if k == "process_quantum_ns" else max(0, round(v * factor))) for k, v in base.items()}
            note(f"refit: {name} ({', '.join(params)})")
            fs_device = dict(rec["fs_device"]) if "fs_device" in rec else None
            fit, new = _lab_stage(
                core,
                text_,
                lambda: dict(at_speed),
                params,
                0,
                note,
                0.0,
                [],
                device=device,
                recorded=rec,
                fs_device=fs_device,
                unfitted=unfitted,
            )
            for k in (
                "kernel_preset",
                "cgroup_version",
                "speed_probe_ns",
                "speed_factor",
                "loadavg",
                "loadavg_end",
                "run_delay_share",
                "cpu_share",
                "date",
            ):
                if k in rec:
                    new[k] = rec[k]
            new["refit"] = f"{when}: the recorded runs fitted again (calibrate --refit-lab)"
        else:
            # A stage this profile does not record (added to calibrate since): run it now, at
            # this moment's CPU speed, as --only-readahead does.
            note(f"lab: {name}, not recorded in {out}: {args.reps} kernel runs ({', '.join(params)})")
            fit, new = _new_stage_fit(core, text_, base, params, args, note, keys, float(meas["speed_probe_ns"]), unfitted)
            factor = float(new["speed_factor"])
            new.update(kernel_preset=version, cgroup_version=cgv, date=when, loadavg_end=_loadavg())
        values = {k: round(fit.params[k] / factor) for k in kept}
        if factor != 1.0:
            new["values_at_profile_speed"] = Inline(values)
        new["kept"] = list(kept)
        records[name] = new
        costs.update(values)
        fitted.update(values)
        for k in kept:
            notes_[k] = COST_NOTES.get(k, "lab fit")
        return fit

    stage("nopressure", nopressure_scenario(version, cgv), NOPRESSURE_PARAMS, NOPRESSURE_PARAMS, costs)
    if "page_reporting" in lab or host_page_reporting_order():
        # 3d (a stage since 2026-11-25: run now when this host reports and the profile lacks it)
        stage(
            "page_reporting",
            page_reporting_scenario(version, cgv),
            PAGE_REPORTING_PARAMS,
            PAGE_REPORTING_PARAMS,
            costs,
            unfitted=PAGE_REPORTING_UNFITTED,
        )
    text_codec = {k: v for k, v in costs.items() if k.startswith("lzo_") and not k.startswith("lzo_rle")}
    if "zram" in lab:
        g = f"memcg[/{PRESSURE_GROUP}].memory.stat."
        keys = [g + k for k in ("pgfault", "pgmajfault", "pswpin", "pswpout")]
        keys += [f"vmstat.{k}" for k in ("pswpin", "pswpout", "pgscan_anon", "pgsteal_anon")]
        stage("scan", scan_scenario(version, cgv), SCAN_PARAMS + SCAN_NUISANCE, SCAN_PARAMS, costs, keys=keys)
    if "zram" in lab:
        stage("zram", pressure_scenario(version, cgv, zram=True), ZRAM_PARAMS + PRESSURE_NUISANCE, ZRAM_PARAMS, costs)
    if "swapfile" in lab:
        if "device" not in meas:
            raise LabError(f"{out}: measurements.device: the swap-file stage needs the device recorded beside its runs")
        sp = SWAPFILE_AFTER_ZRAM if "zram" in lab else SWAPFILE_PARAMS
        stage(
            "swapfile",
            pressure_scenario(version, cgv, access_count=20_000, zswap=False),
            sp + SWAPFILE_NUISANCE,
            sp,
            costs,
            device=device_model(dict(meas["device"])),
        )
    params2 = tuple(k for k in lab["zswap"]["fitted"])
    kept2 = [k for k in params2 if k not in PRESSURE_NUISANCE]
    stage("zswap", pressure_scenario(version, cgv), params2, kept2, {**costs, **text_codec})
    if "readahead" in lab:
        stage(
            "readahead",
            readahead_scenario(version, cgv, 3),
            READAHEAD_PARAMS + PRESSURE_NUISANCE,
            READAHEAD_PARAMS,
            {**costs, **text_codec},
        )
    if "readahead_pc0" in lab:
        stage("readahead_pc0", readahead_scenario(version, cgv, 0), READAHEAD_CHECK_PARAMS + PRESSURE_NUISANCE, [], {**costs, **text_codec})
    # The write stages only when recorded (they need the loop device measured beside their
    # runs: calibrate --only-loop-device, then --only-write).
    for name, which, wparams in (
        ("write_tmpfs", "tmpfs", WRITE_TMPFS_PARAMS),
        ("write_ext4", "ext4", WRITE_EXT4_PARAMS),
        ("write_reclaim", "reclaim", WRITE_RECLAIM_PARAMS),
    ):
        if name in lab:
            stage(name, write_scenario(version, cgv, which), wparams, wparams, costs, unfitted=WRITE_UNFITTED[which])
    ours = meas.get("codecs", {})
    for codec in CODECS:
        name = f"zswap_{codec}"
        if name not in lab:
            continue
        prefix = COST_CODECS[codec]
        t = ours.get(codec, {}).get("text")
        if not isinstance(t, dict):
            raise LabError(f"{out}: measurements.codecs.{codec}.text: the refit of {name} needs our codec's text figures")
        ours_text = {f"{prefix}_{w}_ns": round(statistics.fmean(t[f"{w}_rounds_ns"])) for w in ("compress", "decompress")}
        params4 = tuple(ours_text)
        fit4 = stage(name, pressure_scenario(version, cgv, compressor=codec), params4, [], {**costs, **text_codec, **ours_text})
        ratio = {k: round(fit4.params[k] / ours_text[k], 3) for k in params4 if ours_text[k] > 0}
        records[name]["kernel_over_ours_text"] = Inline(ratio)
        by_kind = kind_figures(codec, {c: cell for c, cell in ours[codec].items() if isinstance(cell, dict)})
        for k, factor in ratio.items():
            what = "decompress" if "_decompress" in k else "compress"
            for suffix in KIND_SUFFIX.values():
                key = f"{prefix}_{what}{suffix}_ns"
                if key in by_kind:
                    fitted[key] = round(by_kind[key] * factor)
                    notes_[key] = f"ours by content x {factor} (kernel's {codec}, zswap run fit)"
    new_text = text
    items = list(fitted.items())
    for i, (k, v) in enumerate(items):
        last = i == len(items) - 1
        new_text = add_to_profile(new_text, k, v, notes_[k], records if last else {}, args.command_line())
    return new_text, {"kind": args.kind, "costs": fitted, "devices": {}, "measurements": {"lab": records}}


def main(args: Options) -> int:
    """``reclaimlab calibrate``: 0 done; 1 the lab failed or cannot run; 2 bad arguments;
    130/143 interrupted (after removing what it had made)."""
    if min(args.reps, args.codec_reps, args.codec_rounds) < 1:
        print("reclaimlab calibrate: --reps, --codec-reps and --codec-rounds must be at least 1", file=sys.stderr)
        return 2

    def note(m: str) -> None:
        print(m, file=sys.stderr, flush=True)

    out = args.out_path()
    old_term = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
    if old_term is not None:
        signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        if args.only_loop_device:
            text = only_loop_device(args, note)
            summary: dict[str, Any] = {"kind": args.kind, "costs": {}, "devices": {}, "measurements": {}}
        elif args.only_readahead:
            text, summary = calibrate_readahead(args, note)
        elif args.only_write:
            text, summary = calibrate_write(args, note)
        elif args.refit_lab:
            text, summary = refit_lab(args, note)
        else:
            text, summary = calibrate(args, note)
    except LabInterrupted as e:
        print(f"reclaimlab calibrate: {e}", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        print("reclaimlab calibrate: interrupted", file=sys.stderr)
        return 130
    except ScenarioError as e:
        print(f"reclaimlab calibrate: {e}", file=sys.stderr)
        return 2
    except (LabError, OSError) as e:
        print(f"reclaimlab calibrate: {e}", file=sys.stderr)
        return 1
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out)
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=2, sort_keys=True, default=dict) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    for k, v in summary["costs"].items():
        print(f"  {k:<24} {v:>8} ns")
    for name, d in summary["devices"].items():
        figs = ", ".join(f"{k} {v}" for k, v in d.items())
        print(f"  device {name}: {figs}")
    return 0
