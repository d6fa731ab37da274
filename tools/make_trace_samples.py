"""Writes the small sample traces under tests/data/traces (and the bundled scenario's trace):
deterministic, so rerunning it reproduces the committed files byte for byte.

* ``zipf.csv``: 8,000 accesses, columns ``time,page,op``, pages 0..2047 drawn Zipf(0.9)
  with a fixed seed, 30 % writes.
* ``zipf.oracleGeneral``: the same page sequence as libCacheSim's oracleGeneral binary (24-byte
  records: u32 timestamp, u64 obj_id, u32 obj_size, i64 next_access_vtime), obj_id =
  1,000,003 * page + 17 (so the ``first_seen`` map has work to do), obj_size 4096,
  next_access_vtime the index of the object's next access (-1: none), as libCacheSim writes it.
* ``tiny.damo``: a damo record in damo's ``json_compressed`` format (zlib-compressed JSON,
  as ``damo record`` writes it): one target, intervals sample 5 ms / aggr 100 ms (20 slices),
  three snapshots over a heap and a stack range with varying nr_accesses.

And ``scenarios/traces/zipf-8k.csv`` for scenarios/trace-replay.toml: 60,000 accesses,
columns ``page,op``, pages 0..8191 drawn Zipf(0.8), 20 % writes.

Usage: ``python tools/make_trace_samples.py [OUT_DIR]`` (default tests/data/traces; the
scenario's trace is written only with the default).
"""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path

import numpy as np

ORACLE_GENERAL = np.dtype([("timestamp", "<u4"), ("obj_id", "<u8"), ("obj_size", "<u4"), ("next_access_vtime", "<i8")])


def zipf_pages(n: int, pages: int, theta: float, seed: int, write_share: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, pages + 1) ** theta
    # Hot pages scattered over the range, not all at its start.
    perm = rng.permutation(pages)
    picks = perm[rng.choice(pages, size=n, p=w / w.sum())]
    writes = rng.random(n) < write_share
    return picks.astype(np.uint64), writes


def csv_text(pages: np.ndarray, writes: np.ndarray, time: bool = True) -> str:
    pairs = zip(pages.tolist(), writes.tolist(), strict=True)
    if time:
        lines = ["time,page,op", *(f"{i * 1000},{p},{'w' if wr else 'r'}" for i, (p, wr) in enumerate(pairs))]
    else:
        lines = ["page,op", *(f"{p},{'w' if wr else 'r'}" for p, wr in pairs)]
    return "\n".join(lines) + "\n"


def oracle_general(pages: np.ndarray) -> bytes:
    ids = pages * np.uint64(1_000_003) + np.uint64(17)
    recs = np.zeros(len(ids), dtype=ORACLE_GENERAL)
    recs["timestamp"] = np.arange(len(ids), dtype=np.uint32)
    recs["obj_id"] = ids
    recs["obj_size"] = 4096
    nxt = np.full(len(ids), -1, dtype=np.int64)
    last: dict[int, int] = {}
    for i in range(len(ids) - 1, -1, -1):
        o = int(ids[i])
        nxt[i] = last.get(o, -1)
        last[o] = i
    recs["next_access_vtime"] = nxt
    return recs.tobytes()


def damo_record() -> bytes:
    heap, stack = 0x5555_5555_0000, 0x7FFF_F000_0000

    def region(start: int, pages: int, samples: int, age: int) -> dict[str, object]:
        return {
            "start": start,
            "end": start + pages * 4096,
            "nr_accesses": {"samples": samples, "percent": samples * 5},
            "age": {"usec": age * 100_000, "aggr_intervals": age},
        }

    snaps = []
    layouts = [
        [(heap, 64, 20, 3), (heap + 64 * 4096, 192, 2, 5), (stack, 16, 10, 1)],
        [(heap, 32, 15, 4), (heap + 32 * 4096, 224, 0, 6), (stack, 16, 20, 2)],
        [(heap, 128, 5, 1), (heap + 128 * 4096, 128, 1, 7), (stack, 16, 0, 3)],
    ]
    for i, regions in enumerate(layouts):
        rs = [region(*r) for r in regions]
        snaps.append(
            {
                "start_time": 1_000_000_000 + i * 100_000_000,
                "end_time": 1_000_000_000 + (i + 1) * 100_000_000,
                "regions": rs,
                "total_bytes": sum(int(r["end"]) - int(r["start"]) for r in rs),  # type: ignore[call-overload]
            }
        )
    record = {
        "kdamond_idx": 0,
        "context_idx": 0,
        "intervals": {"sample_us": 5000, "aggr_us": 100000, "ops_update_us": 1000000},
        "scheme_idx": None,
        "target_id": 0,
        "snapshots": snaps,
    }
    return zlib.compress(json.dumps([record], indent=4).encode())


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "tests" / "data" / "traces"
    out.mkdir(parents=True, exist_ok=True)
    pages, writes = zipf_pages(8000, 2048, 0.9, seed=15)
    (out / "zipf.csv").write_text(csv_text(pages, writes), encoding="utf-8")
    (out / "zipf.oracleGeneral").write_bytes(oracle_general(pages))
    (out / "tiny.damo").write_bytes(damo_record())
    if len(sys.argv) == 1:
        bundled = root / "scenarios" / "traces"
        bundled.mkdir(exist_ok=True)
        pages, writes = zipf_pages(60_000, 8192, 0.8, seed=8, write_share=0.2)
        (bundled / "zipf-8k.csv").write_text(csv_text(pages, writes, time=False), encoding="utf-8")
        print(f"{bundled / 'zipf-8k.csv'}: {(bundled / 'zipf-8k.csv').stat().st_size} bytes")
    for f in sorted(out.iterdir()):
        print(f"{f}: {f.stat().st_size} bytes")


if __name__ == "__main__":
    main()
