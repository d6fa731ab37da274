"""The kernel's own codec time per page content, measured through zram (``calibrate`` stage 1b).

What it measures: for every codec the host's zram offers that the simulator has, the time the
kernel spends compressing a page on a zram write and decompressing it on a zram read, per
content class. zram calls the same library compressors as zswap (lib/lzo, lib/lz4, ...,
through crypto's comp/acomp wrappers), on the faulting or reclaiming thread, so this is the
codec time a swap-out to zswap or zram and a swap-in from either charge.

How (``run``), under the lab lock, everything journaled as ``codec_check`` journals its device:

1. one zram device per codec, all at once (hot_add, ``comp_algorithm``, ``disksize``), so that
   the codecs are measured interleaved, round by round, and a slow spell of this shared host
   falls on all of them;
2. per round, per codec (order rotated each round), per class (order rotated), per page: a
   baseline page and the class's page are written to two fresh slots with 4 KiB O_DIRECT
   ``pwrite`` calls and read back with O_DIRECT ``preadv``, each call timed;
3. the baseline ``same:0x5a`` is a same-filled page: zram stores it as one word without
   compressing it (``page_same_filled``) and fills it on read. Its times are the syscall, bio
   and slot overhead with no codec work. A pair's codec time is the class page's time minus
   the baseline page's, taken microseconds apart (so the speed of the moment cancels); the
   figure is the median over all pairs of all rounds;
4. a speed probe per round (``lab.speed.probe_ns``: our lzo on one text page in user space) and
   the load average are recorded with it (``speed_probe_ns``, ``loadavg``).

A random page compresses to more than zsmalloc's huge class size: zram stores it as-is, and its
read is a copy, not a decompression (the model charges ``zswap_copy_ns`` there). Its write
still runs the compressor over the whole page: that is the ``random`` compress figure.

The pure parts (``net_figures``, ``composition_fit``) are tested without a kernel
(tests/test_kernel_codecs.py).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import secrets
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from reclaimlab.codec_check import _add_zram, _configure, _zram_algorithms
from reclaimlab.lab import probe as probing
from reclaimlab.lab.errors import LabError, LabUnavailable
from reclaimlab.lab.session import session
from reclaimlab.lab.speed import probe_ns

__all__ = ["BASELINE", "CLASSES", "composition_fit", "net_figures", "run"]

PAGE = 4096
#: Same-filled (not zero: zero pages never reach a codec in 6.18, they go to the swap zeromap):
#: zram's no-codec path, the baseline every class is measured against.
BASELINE = "same:0x5a"
#: The classes measured: text, the random-byte and run-byte ends, and two mixes that check the
#: composition model (docs/model/time.md, "Codec cost by content").
CLASSES = ("text", "random", "mix64", "mix1024", "mix2048", "mix3072")

_Note = Callable[[str], None]


def net_figures(rounds: Sequence[Mapping[str, Mapping[str, tuple[Sequence[int], Sequence[int]]]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """codec -> class -> {compress_ns, decompress_ns, and the per-round medians}, from rounds of
    codec -> class -> (write differences, read differences): per page, the class page's time
    minus the baseline page's taken just before it. The figure is the median over every pair of
    every round (robust to a slow spell hitting one side of a few pairs)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    codecs = sorted({c for r in rounds for c in r})
    for codec in codecs:
        out[codec] = {}
        for cls in rounds[0][codec]:
            w = [x for r in rounds for x in r[codec][cls][0]]
            rd = [x for r in rounds for x in r[codec][cls][1]]
            out[codec][cls] = {
                "compress_ns": round(statistics.median(w), 1),
                "decompress_ns": round(statistics.median(rd), 1),
                "pairs": len(w),
                "compress_rounds_ns": [round(statistics.median(r[codec][cls][0])) for r in rounds],
                "decompress_rounds_ns": [round(statistics.median(r[codec][cls][1])) for r in rounds],
            }
    return out


def composition_fit(per_class: Mapping[str, Mapping[str, float]], what: str) -> dict[str, Any]:
    """The codec's ``random`` and ``run`` figures from the ``mixK`` classes: a page of K random
    bytes then a run of zeros costs ``random x K/4096 + run x (1 - K/4096)`` (least squares over
    the mixes). A ``random`` page is left out: zram stores it as-is, a huge zsmalloc object of
    a page of its own whose allocation can cost more than the codec (10 us against 1 us on this
    host while other work ran), and reads it back with a copy; its residual is reported. A
    ``mix0`` (our codecs on a zero page) counts. Returns {random, run, residuals}."""
    rows: list[tuple[float, float]] = []
    for cls, cell in per_class.items():
        if not cls.startswith("mix"):
            continue
        rows.append((int(cls[3:]) / PAGE, float(cell[f"{what}_ns"])))
    if len(rows) < 2:
        raise ValueError(f"{what}: need at least two mixK classes; have {len(rows)}")
    # y = run + (random - run) k: ordinary least squares on k.
    n = len(rows)
    mk = sum(k for k, _ in rows) / n
    my = sum(y for _, y in rows) / n
    sxx = sum((k - mk) ** 2 for k, _ in rows)
    slope = sum((k - mk) * (y - my) for k, y in rows) / sxx
    run_ns = my - slope * mk
    random_ns = run_ns + slope
    res = {}
    for cls, cell in per_class.items():
        if cls.startswith("mix") or (cls == "random" and what == "compress"):  # random: reported only
            k = 1.0 if cls == "random" else int(cls[3:]) / PAGE
            y = float(cell[f"{what}_ns"])
            res[cls] = round((run_ns + (random_ns - run_ns) * k - y) / y, 4) if y else 0.0
    return {"random": max(0, round(random_ns)), "run": max(0, round(run_ns)), "residuals": res}


class _Dev:
    """A zram device open for 4 KiB O_DIRECT reads and writes from a page-aligned buffer."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_DIRECT | os.O_CLOEXEC)
        except OSError as e:
            raise LabError(f"cannot open {path} with O_DIRECT: {e.strerror or e}") from None
        self.buf = mmap.mmap(-1, PAGE)

    def write(self, k: int, page: bytes) -> int:
        self.buf.seek(0)
        self.buf.write(page)
        t0 = time.perf_counter_ns()
        n = os.pwrite(self.fd, self.buf, k * PAGE)
        t1 = time.perf_counter_ns()
        if n != PAGE:
            raise LabError(f"short write to page {k} of {self.path}: {n} bytes")
        return t1 - t0

    def read(self, k: int) -> int:
        t0 = time.perf_counter_ns()
        n = os.preadv(self.fd, [self.buf], k * PAGE)
        t1 = time.perf_counter_ns()
        if n != PAGE:
            raise LabError(f"short read of page {k} of {self.path}: {n} bytes")
        return t1 - t0

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.buf.close()


def _loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def run(
    codecs: Sequence[str] | None = None,
    classes: Sequence[str] = CLASSES,
    variants: int = 32,
    rounds: int = 12,
    seed: int = 1,
    note: _Note | None = None,
) -> dict[str, Any]:
    """Measure the kernel's codec time per class (module docstring); the report: per codec and
    class the net figures, the composition fit, the speed probe and load per round."""
    from reclaimlab import native

    core = native.core()
    say = note or (lambda _m: None)
    p = probing.probe()
    if not p.root:
        raise LabUnavailable("measuring the kernel's codecs needs root: it configures zram devices")
    if not p.zram_loaded:
        raise LabUnavailable("this host has no zram loaded (the lab does not load modules: `modprobe zram`)")
    if not p.zram_hot_add:
        raise LabUnavailable("no /sys/class/zram-control/hot_add: one zram device per codec is needed")
    offered = set(p.zram_comp_algorithms)
    wanted = [c for c in (codecs if codecs is not None else core.codecs()) if c in set(core.codecs()) and (not offered or c in offered)]
    if not wanted:
        raise LabUnavailable(f"zram offers none of the simulator's codecs (it offers: {', '.join(sorted(offered))})")
    all_classes = [BASELINE, *classes]
    pages = {c: [bytes(core.page_bytes(c, seed, 0, v)) for v in range(int(core.distinct_variants(c, variants)))] for c in all_classes}
    per_round = 2 * sum(len(pages[c]) for c in classes)
    disksize = (rounds * per_round + 64) * PAGE
    raw_rounds: list[dict[str, dict[str, tuple[list[int], list[int]]]]] = []
    speed: list[float] = []
    loads: list[list[float]] = []
    devices: dict[str, str] = {}
    with (
        session("reclaimlab calibrate (kernel codecs)", note=say) as lab,
        lab.journal(runid=f"kernel-codecs-{secrets.token_hex(2)}", scenario="kernel codecs", busy_retries=19) as journal,
    ):
        devs: dict[str, _Dev] = {}
        try:
            for codec in wanted:
                zid = _add_zram(journal, p)
                algs = _zram_algorithms(zid)
                if algs and codec not in algs:
                    continue
                devs[codec] = _Dev(_configure(journal, zid, codec, disksize))
                devices[codec] = f"zram{zid}"
            say(f"kernel codecs: {', '.join(f'{c} on {d}' for c, d in devices.items())}; {rounds} rounds of {per_round} pages each")
            slot = {c: 0 for c in devs}
            for r in range(rounds):
                if lab.interrupted:
                    break
                speed.append(probe_ns())
                loads.append(_loadavg())
                got: dict[str, dict[str, tuple[list[int], list[int]]]] = {}
                order = list(devs)[r % len(devs) :] + list(devs)[: r % len(devs)]
                for codec in order:
                    d = devs[codec]
                    got[codec] = {}
                    cls_order = list(classes)[r % len(classes) :] + list(classes)[: r % len(classes)]
                    for cls in cls_order:
                        # Pairs: a baseline page then a class page, written then read, so that
                        # each difference is taken within a few microseconds.
                        dw, dr = [], []
                        for j, pg in enumerate(pages[cls]):
                            base = pages[BASELINE][j % len(pages[BASELINE])]
                            k = slot[codec]
                            slot[codec] += 2
                            wb = d.write(k, base)
                            wc = d.write(k + 1, pg)
                            rb = d.read(k)
                            rc = d.read(k + 1)
                            dw.append(wc - wb)
                            dr.append(rc - rb)
                        got[codec][cls] = (dw, dr)
                raw_rounds.append(got)
        finally:
            for d in devs.values():
                d.close()
    if not raw_rounds:
        raise LabError("kernel codecs: interrupted before the first round")
    net = net_figures(raw_rounds)
    fits = {}
    for codec, per_class in net.items():
        fits[codec] = {what: composition_fit(per_class, what) for what in ("compress", "decompress")}
    return {
        "method": (
            "zram write/read of 4 KiB pages with O_DIRECT; per round the median per class minus the "
            f"median of the same-filled baseline {BASELINE!r} on the same device; median over rounds"
        ),
        "rounds": len(raw_rounds),
        "variants": variants,
        "devices": devices,
        "classes": net,
        "composition": fits,
        "speed_probe_ns": [round(x) for x in speed],
        "loadavg": loads,
    }
