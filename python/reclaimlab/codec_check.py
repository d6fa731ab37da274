"""``reclaimlab lab codec-check``: the kernel's compressed page sizes against the simulator's.

The simulator never guesses how many bytes a page compresses to: it runs its own compressors
on the exact page bytes (docs/model/codecs.md). This check measures what the running kernel's
compressors make of the same bytes, through a zram block device:

1. take the lab lock; journal a zram device (hot_add, or an unused existing one when there is
   no hot_add), its ``comp_algorithm`` and ``disksize`` (the journal ops ``zram_hot_add``,
   ``zram_added``, ``zram_config`` of ``reclaimlab.lab.journal``; nothing is swapped on);
2. for every content class and variant v: write ``_core.page_bytes(content, seed, region_id,
   v)`` to page k of the device (O_DIRECT from a page-aligned mmap buffer; write + fsync where
   O_DIRECT is refused) and read ``mm_stat`` before and after: the deltas of
   ``compr_data_size``, ``same_pages`` and ``huge_pages`` say how the kernel stored that page;
3. restore the journal (reset the device, hot_remove it if it was added), per codec.

The simulator's expectation applies zram's rules to ``_core.compressed_len(codec, page)``:
a page whose 8-byte words are all equal is a same-element page (0 bytes, no compression); a
page compressing to ``huge_class_size`` (3625 bytes, zsmalloc with chain size 8) or more is
stored as 4096 bytes (a huge page); otherwise its compressed length.

The comparison (``stored_size``, ``page_delta``, ``compare_class``, ``report``) is plain
functions, tested without a kernel in tests/lab/test_codec_check.py.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import platform
import secrets
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reclaimlab.lab import host
from reclaimlab.lab import probe as probing
from reclaimlab.lab.errors import LabError, LabUnavailable
from reclaimlab.lab.journal import Journal
from reclaimlab.lab.record import ZRAM_MM_STAT
from reclaimlab.lab.session import session

__all__ = [
    "CLASSES",
    "DEFAULT_DISKSIZE",
    "HUGE_CLASS_SIZE",
    "MM_STAT_FIELDS",
    "ClassStats",
    "Stored",
    "compare_class",
    "is_same_filled",
    "page_delta",
    "parse_mm_stat",
    "report",
    "run",
    "stored_size",
    "table",
]

PAGE = 4096
#: The content classes compared, as the scenario spells them.
CLASSES = ("zero", "random", "mix1024", "mix2048", "text", "same:0x5a")
#: zsmalloc's huge_class_size with the default chain size 8 (docs/model/zsmalloc.md): zram
#: stores a page compressing to this many bytes or more uncompressed, as 4096 bytes.
HUGE_CLASS_SIZE = 3625
#: More than the pages written (classes x variants), small: zram allocates only what is stored.
DEFAULT_DISKSIZE = 64 << 20
#: /sys/block/zramN/mm_stat, in order: the lab's one list of its fields.
MM_STAT_FIELDS = ZRAM_MM_STAT


# ---------------------------------------------------------------------------------------------
# The comparison (no kernel needed)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stored:
    """How zram stored one page: its bytes in the pool (compr_data_size), same-element, huge."""

    size: int
    same: bool = False
    huge: bool = False


def is_same_filled(page: bytes) -> bool:
    """zram's page_same_filled(): every 8-byte word of the page is equal."""
    if len(page) % 8 or not page:
        return False
    return page == page[:8] * (len(page) // 8)


def stored_size(page: bytes, comp_len: int, huge_class_size: int = HUGE_CLASS_SIZE) -> Stored:
    """What zram stores for ``page`` given its compressed length ``comp_len``."""
    if is_same_filled(page):
        return Stored(0, same=True)
    if comp_len >= huge_class_size:
        return Stored(PAGE, huge=True)
    return Stored(comp_len)


def parse_mm_stat(text: str) -> dict[str, int]:
    """The fields of ``mm_stat`` by name (older kernels have fewer: the missing are absent)."""
    values = [int(x) for x in text.split()]
    return dict(zip(MM_STAT_FIELDS, values, strict=False))


def page_delta(before: dict[str, int], after: dict[str, int]) -> Stored:
    """How the kernel stored the one page written between two ``mm_stat`` readings.

    LabError if the readings do not show exactly one new page (orig_data_size + 4096): then the
    write did not land as one stored page and its size cannot be read off the deltas."""
    grew = after["orig_data_size"] - before["orig_data_size"]
    if grew != PAGE:
        raise LabError(f"mm_stat orig_data_size grew by {grew} bytes for one page written (expected {PAGE})")
    same = after.get("same_pages", 0) - before.get("same_pages", 0)
    huge = after.get("huge_pages", 0) - before.get("huge_pages", 0)
    return Stored(after["compr_data_size"] - before["compr_data_size"], same=same == 1, huge=huge == 1)


@dataclass(frozen=True)
class ClassStats:
    """One content class under one codec: the kernel's stored sizes against the simulator's."""

    content: str
    pages: int
    identical: int  # pages whose stored size is the same on both sides
    identical_share: float
    mean_abs_diff: float  # bytes
    max_abs_diff: int
    kernel_mean: float  # mean stored bytes per page
    sim_mean: float
    kernel_same_pages: int
    sim_same_pages: int
    kernel_huge_pages: int
    sim_huge_pages: int
    sim_raw_mean: float  # mean of compressed_len itself (what zswap sees), before zram's rules
    kernel_sizes: list[int] = field(default_factory=list)
    sim_sizes: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def compare_class(content: str, kernel: Sequence[Stored], sim: Sequence[Stored], sim_raw: Sequence[int] = ()) -> ClassStats:
    """Per-class statistics of paired kernel/simulator stored sizes (page i against page i)."""
    if len(kernel) != len(sim):
        raise ValueError(f"{content}: {len(kernel)} kernel pages against {len(sim)} simulator pages")
    n = len(kernel)
    diffs = [abs(k.size - s.size) for k, s in zip(kernel, sim, strict=True)]
    identical = sum(1 for d in diffs if d == 0)

    def mean(xs: Sequence[float]) -> float:
        return float(statistics.fmean(xs)) if xs else 0.0

    return ClassStats(
        content=content,
        pages=n,
        identical=identical,
        identical_share=identical / n if n else 0.0,
        mean_abs_diff=mean(diffs),
        max_abs_diff=max(diffs, default=0),
        kernel_mean=mean([k.size for k in kernel]),
        sim_mean=mean([s.size for s in sim]),
        kernel_same_pages=sum(k.same for k in kernel),
        sim_same_pages=sum(s.same for s in sim),
        kernel_huge_pages=sum(k.huge for k in kernel),
        sim_huge_pages=sum(s.huge for s in sim),
        sim_raw_mean=mean(list(sim_raw)),
        kernel_sizes=[k.size for k in kernel],
        sim_sizes=[s.size for s in sim],
    )


def report(
    per_codec: dict[str, list[ClassStats]],
    skipped: dict[str, str],
    **meta: Any,
) -> dict[str, Any]:
    """The JSON document of a check: per codec, per class, plus the totals over all pages."""
    codecs: dict[str, Any] = {}
    for codec, stats in per_codec.items():
        pages = sum(s.pages for s in stats)
        identical = sum(s.identical for s in stats)
        abs_sum = sum(s.mean_abs_diff * s.pages for s in stats)
        codecs[codec] = {
            "classes": {s.content: s.to_dict() for s in stats},
            "total": {
                "pages": pages,
                "identical": identical,
                "identical_share": identical / pages if pages else 0.0,
                "mean_abs_diff": abs_sum / pages if pages else 0.0,
            },
        }
    return {"schema_version": 1, "kind": "codec-check", **meta, "codecs": codecs, "skipped": skipped}


def table(doc: dict[str, Any], codec: str) -> tuple[str, list[str], list[list[str]]]:
    """Title, header and rows of one codec's table (``reclaimlab lab codec-check``)."""
    c = doc["codecs"][codec]
    title = f"codec-check {codec} ({doc['devices'].get(codec, '?')}): stored bytes per page, kernel vs simulator"
    header = ["content", "pages", "identical", "mean |diff| B", "kernel mean B", "sim mean B", "same k/s", "huge k/s"]
    rows = []
    for s in c["classes"].values():
        rows.append(
            [
                s["content"],
                str(s["pages"]),
                f"{s['identical']} ({s['identical_share'] * 100:.1f}%)",
                f"{s['mean_abs_diff']:.2f}",
                f"{s['kernel_mean']:.1f}",
                f"{s['sim_mean']:.1f}",
                f"{s['kernel_same_pages']}/{s['sim_same_pages']}",
                f"{s['kernel_huge_pages']}/{s['sim_huge_pages']}",
            ]
        )
    t = c["total"]
    rows.append(
        ["all", str(t["pages"]), f"{t['identical']} ({t['identical_share'] * 100:.1f}%)", f"{t['mean_abs_diff']:.2f}", "", "", "", ""]
    )
    return title, header, rows


# ---------------------------------------------------------------------------------------------
# The simulator's side
# ---------------------------------------------------------------------------------------------


def _pages(core: Any, content: str, seed: int, region_id: int, variants: int) -> list[bytes]:
    n = int(core.distinct_variants(content, variants))
    return [bytes(core.page_bytes(content, seed, region_id, v)) for v in range(n)]


def simulate(core: Any, codec: str, pages: Sequence[bytes], huge_class_size: int = HUGE_CLASS_SIZE) -> tuple[list[Stored], list[int]]:
    raw = [int(core.compressed_len(codec, p)) for p in pages]
    return [stored_size(p, c, huge_class_size) for p, c in zip(pages, raw, strict=True)], raw


# ---------------------------------------------------------------------------------------------
# The kernel's side
# ---------------------------------------------------------------------------------------------


def _zram_algorithms(zid: int) -> tuple[str, ...]:
    try:
        return tuple(w.strip("[]") for w in host.read_text(f"/sys/block/zram{zid}/comp_algorithm").split())
    except OSError:
        return ()


def _add_zram(journal: Journal, p: probing.Probe) -> int:
    """A zram device for this check, journaled exactly as ``lab.apply`` journals a zram swap
    device (``zram_hot_add`` intent, ``zram_added`` id), so that ``restore`` removes it; or,
    without hot_add, an unused existing device (disksize 0, not initialised, not swap)."""
    if p.zram_hot_add:
        token = secrets.token_hex(4)
        existing = sorted(int(d.name[4:]) for d in Path("/sys/block").glob("zram*") if d.name[4:].isdigit())
        journal.record("zram_hot_add", token=token, existing=existing)
        zid = int(host.read_text(host.ZRAM_CONTROL / "hot_add").strip())  # reading creates the device
        journal.record("zram_added", token=token, id=zid)
        return zid
    active = set(host.active_swaps())
    for z in probing.probe().zram_devices:  # a fresh look: an earlier codec's device is reset by now
        if z.disksize == 0 and z.initstate == 0 and f"/dev/zram{z.id}" not in active:
            return z.id
    raise LabError("no unused zram device, and no zram-control/hot_add to add one")


def _configure(journal: Journal, zid: int, codec: str, disksize: int) -> Path:
    sysdir = Path(f"/sys/block/zram{zid}")
    journal.record("zram_config", id=zid)
    host.write_text(sysdir / "comp_algorithm", codec)
    selected = next((w.strip("[]") for w in host.read_text(sysdir / "comp_algorithm").split() if w.startswith("[")), None)
    if selected != codec:
        raise LabError(f"zram{zid}: wrote comp_algorithm {codec!r} but {selected!r} is selected")
    host.write_text(sysdir / "disksize", str(disksize))
    dev = Path(f"/dev/zram{zid}")
    host.wait_for_path(dev, f"configuring zram{zid}")
    return dev


class _Device:
    """The zram block device open for writing whole pages (O_DIRECT if the kernel allows it)."""

    def __init__(self, dev: Path):
        self.path = dev
        self.direct = True
        try:
            self.fd = os.open(dev, os.O_WRONLY | os.O_DIRECT | os.O_CLOEXEC)
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise LabError(f"cannot open {dev}: {e.strerror or e}") from None
            self.direct = False
            self.fd = os.open(dev, os.O_WRONLY | os.O_CLOEXEC)
        self.buf = mmap.mmap(-1, PAGE)  # anonymous, so page-aligned, as O_DIRECT needs

    def write_page(self, k: int, page: bytes) -> None:
        self.buf.seek(0)
        self.buf.write(page)
        try:
            n = os.pwrite(self.fd, self.buf, k * PAGE)
        except OSError as e:
            if not (self.direct and e.errno == errno.EINVAL):
                raise LabError(f"writing page {k} of {self.path} failed: {e.strerror or e}") from None
            # O_DIRECT refused at write time: reopen buffered and write + fsync from now on.
            os.close(self.fd)
            self.direct = False
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CLOEXEC)
            n = os.pwrite(self.fd, self.buf, k * PAGE)
        if n != PAGE:
            raise LabError(f"short write to page {k} of {self.path}: {n} bytes")
        if not self.direct:
            os.fsync(self.fd)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.buf.close()


def _mm_stat(zid: int) -> dict[str, int]:
    return parse_mm_stat(host.read_text(f"/sys/block/zram{zid}/mm_stat"))


def _measure(zid: int, dev: Path, classes: dict[str, list[bytes]]) -> tuple[dict[str, list[Stored]], bool]:
    out: dict[str, list[Stored]] = {}
    d = _Device(dev)
    try:
        k = 0
        for content, pages in classes.items():
            got = []
            for page in pages:
                before = _mm_stat(zid)
                d.write_page(k, page)
                got.append(page_delta(before, _mm_stat(zid)))
                k += 1
            out[content] = got
        return out, d.direct
    finally:
        d.close()


def run(
    codecs: Sequence[str] | None = None,
    variants: int = 64,
    seed: int = 1,
    region_id: int = 0,
    classes: Sequence[str] = CLASSES,
    disksize: int = DEFAULT_DISKSIZE,
    huge_class_size: int = HUGE_CLASS_SIZE,
    on_note: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Measure every codec of ``codecs`` (default: the simulator's) that this kernel's zram offers; the report (``report``).

    Each codec gets its own device, restored before the next. Raises LabUnavailable (not root,
    no zram), LabBusy, LabLeftovers, LabInterrupted (after restoring), LabError.
    """
    from reclaimlab import native

    core = native.core()
    note = on_note or (lambda _m: None)
    if variants < 1:
        raise ValueError(f"variants: expected at least 1; got {variants}")
    if len(classes) * variants * PAGE > disksize:
        raise ValueError(f"{len(classes)} classes x {variants} variants do not fit a {disksize}-byte device")
    p = probing.probe()
    if not p.root:
        raise LabUnavailable("codec-check needs root: it configures a zram device")
    if not p.zram_loaded:
        raise LabUnavailable("this host has no zram loaded (the lab does not load modules: `modprobe zram`)")
    if not p.zram_hot_add and not any(z.disksize == 0 and z.initstate == 0 for z in p.zram_devices):
        raise LabUnavailable("no unused zram device and no /sys/class/zram-control/hot_add to add one")

    known = set(core.codecs())
    if codecs is None:  # every codec the simulator has
        codecs = list(core.codecs())
    offered = set(p.zram_comp_algorithms)
    skipped: dict[str, str] = {}
    wanted = []
    for c in codecs:
        if c not in known:
            skipped[c] = f"the simulator has no codec {c!r} (it has: {', '.join(sorted(known))})"
        elif offered and c not in offered:
            skipped[c] = f"zram on this kernel does not offer {c!r} (it offers: {', '.join(sorted(offered))})"
        else:
            wanted.append(c)

    pages = {c: _pages(core, c, seed, region_id, variants) for c in classes}
    per_codec: dict[str, list[ClassStats]] = {}
    devices: dict[str, str] = {}
    direct: dict[str, bool] = {}

    with session("reclaimlab lab codec-check", note=note) as lab:
        for codec in wanted:
            if lab.interrupted:
                break
            measured: dict[str, list[Stored]] | None = None
            # A reset refused while the device is still open for a moment (EBUSY, e.g. a udev
            # probe after our close) is retried.
            with lab.journal(
                runid=f"codec-check-{codec}-{secrets.token_hex(2)}", scenario=f"codec-check {codec}", busy_retries=19
            ) as journal:
                zid = _add_zram(journal, p)
                algs = _zram_algorithms(zid)
                if algs and codec not in algs:
                    skipped[codec] = f"zram on this kernel does not offer {codec!r} (it offers: {', '.join(algs)})"
                else:
                    dev = _configure(journal, zid, codec, disksize)
                    note(f"{codec}: zram{zid}, {sum(len(v) for v in pages.values())} pages")
                    measured, direct[codec] = _measure(zid, dev, pages)
                    devices[codec] = f"zram{zid}"
            if measured is not None:
                stats = []
                for content, kernel in measured.items():
                    sim, raw = simulate(core, codec, pages[content], huge_class_size)
                    stats.append(compare_class(content, kernel, sim, raw))
                per_codec[codec] = stats

    return report(
        per_codec,
        skipped,
        host_kernel_release=platform.release(),
        seed=seed,
        region_id=region_id,
        variants=variants,
        huge_class_size=huge_class_size,
        classes=list(classes),
        devices=devices,
        o_direct=direct,
        native_version=native.native_version(),
    )
