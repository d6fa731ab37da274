"""Recorded access traces for the ``trace`` phase (docs/workload.md, "Trace phases").

Three input formats are read here, once, at lowering:

* ``csv``: a header line, then one access per line. Column ``page`` (a page number) or
  ``addr`` (a byte address; page = addr // 4096), optional ``op`` (``r``/``read`` or
  ``w``/``write``, any case; absent: reads). Other columns (e.g. ``time``) are ignored.
  Numbers are decimal or ``0x`` hex.
* ``oracle_general``: libCacheSim's binary trace, packed little-endian 24-byte records
  ``u32 timestamp, u64 obj_id, u32 obj_size, i64 next_access_vtime``. One record is one read
  of object ``obj_id`` (the format has no operation); records of ``obj_size`` 0 are skipped,
  as libCacheSim's reader does by default; the other fields are not used.
* ``damo``: a damo record file (``damo record``'s default ``json_compressed``: zlib-compressed
  JSON, or its plain ``json``). It is replayed as ``damo replay`` does it (damo_replay.py):
  per snapshot, ``aggr_us // sample_us`` slices; in slice k every region whose
  ``nr_accesses.samples`` > k has each of its pages read once, in address order, regions in
  snapshot order. Addresses are mapped by offset into the record's address space with the gaps
  between monitored ranges removed (the union of all regions' pages, laid back to back).

The object (CSV page, oracleGeneral obj_id, damo page offset) becomes a page index in the
concatenation of the phase's regions by ``map``: ``modulo`` (index = id mod pages) or
``first_seen`` (the n-th distinct id seen gets index n mod pages).

The result is the compact file of crates/reclaimlab-workload/src/trace.rs (magic, count, one
u32 per access: bit 31 write, bits 0..30 page index), written content-addressed to
``<cache>/traces/<sha256>.rltrace``. The lowered config names it by path and sha256, so the
simulator and the lab runner replay the same sequence and results are keyed by its content.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import io
import json
import os
import struct
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "FORMATS",
    "MAGIC",
    "MAPS",
    "MAX_ACCESSES",
    "TraceError",
    "compact_bytes",
    "convert",
    "read_compact",
    "relocate",
    "trace_files",
    "without_paths",
    "write_compact",
]

FORMATS = ("csv", "oracle_general", "damo")
MAPS = ("modulo", "first_seen")
MAGIC = b"RLTRACE1"
WRITE_BIT = 1 << 31
#: Page indices take 31 bits of an access word.
MAX_PAGES = 1 << 31
#: The most accesses a converted trace may hold (a 1 GiB compact file); use ``limit`` for more.
MAX_ACCESSES = 1 << 28
PAGE_SIZE = 4096
#: libCacheSim oracleGeneral: struct { u32 clock_time; u64 obj_id; u32 obj_size; i64 next_access_vtime; } packed.
#: (``ORACLE_GENERAL``, the numpy dtype, is made on first use: numpy is imported only where a
#: trace is converted or read, not by every run that lowers a scenario.)
ORACLE_GENERAL_FIELDS = [("timestamp", "<u4"), ("obj_id", "<u8"), ("obj_size", "<u4"), ("next_access_vtime", "<i8")]
ORACLE_GENERAL_SIZE = 24


def __getattr__(name: str) -> Any:
    if name == "ORACLE_GENERAL":
        import numpy as np

        dtype = np.dtype(ORACLE_GENERAL_FIELDS)
        assert dtype.itemsize == ORACLE_GENERAL_SIZE
        return dtype
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class TraceError(ValueError):
    """A trace file that cannot be read; the message says where (line or byte) and why."""


def convert(path: Path, fmt: str, total_pages: int, mapping: str = "modulo", limit: int | None = None) -> np.ndarray:
    """The access words (``uint32``) of trace ``path`` in format ``fmt`` for a phase over
    ``total_pages`` pages. ``limit``: stop after that many accesses (a replay never reads
    further). Raises TraceError."""
    if not 0 < total_pages <= MAX_PAGES:
        raise TraceError(f"the phase's regions have {total_pages} pages; a trace phase needs 1 to {MAX_PAGES}")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TraceError(f"cannot read {path}: {e.strerror or e}") from None
    cap = MAX_ACCESSES if limit is None else min(limit, MAX_ACCESSES)
    if fmt == "csv":
        ids, writes = _csv(data, cap)
    elif fmt == "oracle_general":
        ids, writes = _oracle_general(data, cap)
    elif fmt == "damo":
        ids, writes = _damo(data, cap)
    else:
        raise TraceError(f"expected a format among {', '.join(FORMATS)}; got {fmt!r}")
    if limit is None and len(ids) > MAX_ACCESSES:
        raise TraceError(f"more than {MAX_ACCESSES} accesses; set limit to replay a prefix")
    return _words(ids, writes, total_pages, mapping)


def _words(ids: np.ndarray, writes: np.ndarray, total_pages: int, mapping: str) -> np.ndarray:
    import numpy as np

    ids = ids.astype(np.uint64, copy=False)
    if mapping == "first_seen":
        uniq, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        rank = np.empty(len(uniq), dtype=np.uint64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(uniq), dtype=np.uint64)
        ids = rank[inverse.reshape(-1)]
    elif mapping != "modulo":
        raise TraceError(f"expected a map among {', '.join(MAPS)}; got {mapping!r}")
    index = (ids % np.uint64(total_pages)).astype(np.uint32)
    return index | (writes.astype(np.uint32) << np.uint32(31))


def _int(text: str) -> int:
    t = text.strip()
    return int(t, 16) if t[:2].lower() == "0x" else int(t)


_OPS = {"r": False, "read": False, "w": True, "write": True}


def _csv(data: bytes, cap: int) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceError(f"byte {e.start}: not UTF-8 text (a CSV trace is text)") from None
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise TraceError("line 1: empty file; expected a header line with a page or addr column")
    cols = [c.strip().lower() for c in header]
    if ("page" in cols) == ("addr" in cols):
        raise TraceError(f"line 1: expected a header with exactly one of the columns page and addr; got {','.join(header)!r}")
    key = "page" if "page" in cols else "addr"
    at, op_at = cols.index(key), (cols.index("op") if "op" in cols else None)
    ids: list[int] = []
    writes: list[bool] = []
    for row in reader:
        if len(ids) >= cap:
            break
        line = reader.line_num
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(cols):
            raise TraceError(f"line {line}: expected {len(cols)} fields like the header; got {len(row)}")
        try:
            v = _int(row[at])
        except ValueError:
            raise TraceError(f"line {line}, column {key}: expected a non-negative integer (decimal or 0x hex); got {row[at]!r}") from None
        if v < 0 or v >= 1 << 64:
            raise TraceError(f"line {line}, column {key}: expected a non-negative integer below 2^64; got {row[at]!r}")
        ids.append(v // PAGE_SIZE if key == "addr" else v)
        if op_at is not None:
            op = _OPS.get(row[op_at].strip().lower())
            if op is None:
                raise TraceError(f"line {line}, column op: expected r, w, read or write; got {row[op_at]!r}")
            writes.append(op)
        else:
            writes.append(False)
    return np.array(ids, dtype=np.uint64), np.array(writes, dtype=bool)


def _oracle_general(data: bytes, cap: int) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    size = ORACLE_GENERAL_SIZE
    if len(data) % size:
        whole = len(data) // size * size
        raise TraceError(
            f"byte {whole}: {len(data)} bytes is not a whole number of {size}-byte oracleGeneral records "
            f"({len(data) - whole} bytes left over after record {len(data) // size})"
        )
    recs = np.frombuffer(data, dtype=__getattr__("ORACLE_GENERAL"))
    # libCacheSim's reader skips requests of size 0 by default (ignore_size_zero_req).
    ids = recs["obj_id"][recs["obj_size"] != 0][:cap].copy()
    return ids, np.zeros(len(ids), dtype=bool)


def _num(v: Any, where: str) -> int:
    # damo writes records with raw=True: plain numbers. Its human-readable forms are not read.
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TraceError(f"{where}: expected a number (damo record files hold raw numbers); got {v!r}")
    return int(v)


def _damo(data: bytes, cap: int) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    if data.lstrip()[:1] in (b"[", b"{"):
        raw = data  # damo's json format
    else:
        try:
            raw = zlib.decompress(data)
        except zlib.error as e:
            raise TraceError(f"byte 0: neither JSON nor zlib-compressed JSON (damo's json_compressed): {e}") from None
    try:
        records = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        pos = f"byte {e.pos} of the JSON text" if isinstance(e, json.JSONDecodeError) else "JSON text"
        raise TraceError(f"{pos}: not valid JSON: {getattr(e, 'msg', e)}") from None
    if not isinstance(records, list) or not records:
        raise TraceError("expected a JSON list of damo records (one per monitoring target)")
    if len(records) != 1:
        # damo replay supports a single record only; picking one silently would hide the rest.
        raise TraceError(f"expected one record (one monitoring target), as damo replay supports; got {len(records)}")
    rec = records[0]
    if not isinstance(rec, Mapping) or not isinstance(rec.get("intervals"), Mapping) or not isinstance(rec.get("snapshots"), list):
        raise TraceError("records[0]: expected a damo record with intervals and snapshots")
    iv = rec["intervals"]
    sample, aggr = _num(iv.get("sample_us"), "records[0].intervals.sample_us"), _num(iv.get("aggr_us"), "records[0].intervals.aggr_us")
    if sample <= 0 or aggr < sample:
        raise TraceError(f"records[0].intervals: expected 0 < sample_us <= aggr_us; got {sample} and {aggr}")
    max_nr = aggr // sample  # damo replay: runtime / (runtime / (aggr / sample)) slices
    snaps: list[list[tuple[int, int, int]]] = []
    for si, snap in enumerate(rec["snapshots"]):
        if not isinstance(snap, Mapping) or not isinstance(snap.get("regions"), list):
            raise TraceError(f"records[0].snapshots[{si}]: expected a snapshot with regions")
        regions = []
        for ri, r in enumerate(snap["regions"]):
            where = f"records[0].snapshots[{si}].regions[{ri}]"
            if not isinstance(r, Mapping):
                raise TraceError(f"{where}: expected a region with start, end and nr_accesses")
            start, end = _num(r.get("start"), f"{where}.start"), _num(r.get("end"), f"{where}.end")
            if not 0 <= start <= end:
                raise TraceError(f"{where}: expected 0 <= start <= end; got {start} and {end}")
            na = r.get("nr_accesses")
            if not isinstance(na, Mapping):
                raise TraceError(f"{where}.nr_accesses: expected a table with samples or percent")
            if na.get("samples") is not None:
                samples = _num(na["samples"], f"{where}.nr_accesses.samples")
            elif na.get("percent") is not None:
                samples = int(_num(na["percent"], f"{where}.nr_accesses.percent") * max_nr / 100)  # damo's add_unset_unit
            else:
                raise TraceError(f"{where}.nr_accesses: expected samples or percent")
            first, n = start // PAGE_SIZE, -(-(end - start) // PAGE_SIZE)
            if n > 0:
                regions.append((first, n, samples))
        snaps.append(regions)
    # The record's address space without gaps: merged page ranges, back to back.
    ranges = sorted((f, f + n) for regions in snaps for f, n, _ in regions)
    merged: list[list[int]] = []
    for lo, hi in ranges:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    starts = np.array([m[0] for m in merged], dtype=np.int64)
    offsets = np.cumsum([0] + [m[1] - m[0] for m in merged])
    chunks: list[np.ndarray] = []
    total = 0
    for regions in snaps:
        for k in range(max_nr):
            for first, n, samples in regions:
                if k >= samples:
                    continue
                m = int(np.searchsorted(starts, first, side="right")) - 1
                base = int(offsets[m]) + first - int(starts[m])
                take = min(n, cap - total)
                chunks.append(np.arange(base, base + take, dtype=np.uint64))
                total += take
                if total >= cap:
                    ids = np.concatenate(chunks)
                    return ids, np.zeros(len(ids), dtype=bool)
    ids = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint64)
    return ids, np.zeros(len(ids), dtype=bool)


def compact_bytes(words: np.ndarray) -> bytes:
    """The compact file's bytes for ``words`` (trace.rs)."""
    return MAGIC + struct.pack("<Q", len(words)) + words.astype("<u4", copy=False).tobytes()


def read_compact(data: bytes) -> np.ndarray:
    """The access words of a compact file (for tests and tools)."""
    import numpy as np

    if data[:8] != MAGIC or len(data) < 16 or (len(data) - 16) != 4 * struct.unpack("<Q", data[8:16])[0]:
        raise TraceError("not a reclaimlab compact trace, or truncated")
    return np.frombuffer(data, dtype="<u4", offset=16)


def write_compact(words: np.ndarray, directory: Path) -> tuple[Path, str]:
    """Writes the compact file for ``words`` to ``directory/<sha256>.rltrace`` (content
    addressed: an existing file with that name is kept) and returns (path, sha256)."""
    data = compact_bytes(words)
    sha = hashlib.sha256(data).hexdigest()
    path = directory / f"{sha}.rltrace"
    try:
        if path.stat().st_size == len(data):
            return path, sha
    except OSError:
        pass
    directory.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)  # atomic: a reader never sees half a file
    return path, sha


def _trace_phases(config: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for proc in config.get("processes", []):
        for ph in proc.get("phases", []):
            if ph["phase"].get("kind") == "trace":
                yield ph["phase"]


def trace_files(config: Mapping[str, Any]) -> dict[str, Path]:
    """The compact trace files a lowered config reads, by file name."""
    return {Path(ph["trace"]["path"]).name: Path(ph["trace"]["path"]) for ph in _trace_phases(config)}


def without_paths(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a lowered config whose trace phases name their file by sha256 only: the path
    is where this machine keeps the file, the sha256 what it holds (for comparing the configs
    of runs made on other machines)."""
    out = copy.deepcopy(dict(config))
    for ph in _trace_phases(out):
        ph["trace"] = {k: v for k, v in ph["trace"].items() if k != "path"}
    return out


def relocate(config: dict[str, Any], directory: str) -> None:
    """Points every trace phase of a lowered config at ``directory/<file name>`` (where the lab
    copies them: next to the lowered JSON, or into the VM's /plan)."""
    for ph in _trace_phases(config):
        ph["trace"]["path"] = os.path.join(directory, Path(ph["trace"]["path"]).name)
