#!/usr/bin/env python3
"""A stand-in for crates/reclaimlab-runner, speaking the same protocol (see
reclaimlab/lab/runner.py), for tests on hosts where the real runner is not built.

It maps each region anonymously and touches it like the real runner: fill writes every page,
sequential and random phases read (or, for write_percent, write) one byte per page. Page
contents only approximate the workload crate's classes (zero, same:B, random, mixK, text), which
is enough for swap and zswap to see compressible and incompressible pages. Not bit-identical
to the simulator: the lab tests use the real runner whenever it is built.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import random
import resource
import struct
import sys
import time

PAGE = 4096
WORDS = b"the of and to a in is it you that he was for on are with as his they be at one have this from or had by".split()


def emit(**event: object) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def page_bytes(content: str, rng: random.Random) -> bytes:
    if content == "zero":
        return bytes(PAGE)
    if content == "random":
        return os.urandom(PAGE)
    if content.startswith("mix"):
        k = int(content[3:])
        return os.urandom(k) + bytes(PAGE - k)
    if content.startswith("same:"):
        b = content[5:]
        return bytes([int(b, 16) if b.lower().startswith("0x") else int(b)]) * PAGE
    out = bytearray()
    while len(out) < PAGE:
        start = rng.randrange(len(WORDS))
        for w in WORDS[start : start + 1 + rng.randrange(10)]:
            out += w + b" "
    return bytes(out[:PAGE])


def faults() -> tuple[int, int]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_minflt, ru.ru_majflt


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config")
    ap.add_argument("--process", type=int)
    ap.add_argument("--version", action="store_true")
    ap.add_argument("--fs-dir", action="append", default=[])
    args = ap.parse_args()
    if args.version:
        print("fake-runner 0 (tests/lab/fake_runner.py)")
        return 0
    try:
        with open(args.config, encoding="utf-8") as f:
            config = json.load(f)
        proc = config["processes"][args.process]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        emit(event="error", message=f"bad config: {e}")
        return 2
    if any("file" in r for r in proc["regions"]):
        emit(event="error", message="the fake runner has no file phases (build crates/reclaimlab-runner)")
        return 2
    emit(event="ready", pid=os.getpid())
    if sys.stdin.readline().strip() != "go":
        return 2
    rng = random.Random(config["seed"] * 1000 + args.process)
    regions = [(r, mmap.mmap(-1, max(1, r["pages"]) * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)) for r in proc["regions"]]
    variants = [[page_bytes(r["content"], rng) for _ in range(min(16, r["variants"]))] for r, _ in regions]
    for i, entry in enumerate(proc["phases"]):
        ph = entry["phase"]
        kind = ph["kind"]
        minflt0, majflt0 = faults()
        start = time.monotonic_ns()
        accesses = 0
        if kind == "fill":
            r, m = regions[ph["region"]]
            vs = variants[ph["region"]]
            for p in range(r["pages"]):
                m[p * PAGE : (p + 1) * PAGE] = os.urandom(PAGE) if r["content"] == "random" else vs[p % len(vs)]
            accesses = r["pages"]
        elif kind == "trace":
            # The compact file (python/reclaimlab/trace.py): magic, u64 count, u32 words.
            data = open(ph["trace"]["path"], "rb").read()
            words = struct.unpack_from(f"<{struct.unpack_from('<Q', data, 8)[0]}I", data, 16)
            sizes = [regions[k][0]["pages"] for k in ph["regions"]]
            left = ph.get("limit")
            for _ in range(ph.get("passes", 1)):
                for w in words:
                    if left is not None and accesses >= left:
                        break
                    n = w & 0x7FFFFFFF
                    for k, pages in zip(ph["regions"], sizes, strict=True):
                        if n < pages:
                            m = regions[k][1]
                            if w >> 31:
                                m[n * PAGE] = (m[n * PAGE] + 1) & 0xFF
                            else:
                                _ = m[n * PAGE]
                            break
                        n -= pages
                    accesses += 1
        elif kind in ("sequential", "random"):
            idx = [k for k in ph["regions"] if regions[k][0]["pages"] > 0]
            total = sum(regions[k][0]["pages"] for k in idx)
            wp = ph.get("write_percent", 0)

            def touch(n: int, idx: list[int] = idx, wp: int = wp) -> None:
                for k in idx:
                    pages = regions[k][0]["pages"]
                    if n < pages:
                        m = regions[k][1]
                        if wp and rng.randrange(100) < wp:
                            m[n * PAGE] = (m[n * PAGE] + 1) & 0xFF
                        else:
                            _ = m[n * PAGE]
                        return
                    n -= pages

            if kind == "sequential":
                for _ in range(ph.get("passes", 1)):
                    for n in range(total):
                        touch(n)
                        accesses += 1
            elif total:
                end = None if ph.get("duration_ns") is None else start + ph["duration_ns"]
                count = ph.get("count")
                while (count is None or accesses < count) and (end is None or time.monotonic_ns() < end):
                    touch(rng.randrange(total))
                    accesses += 1
        elif kind == "sleep":
            time.sleep(ph["duration_ns"] / 1e9)
        end_ns = time.monotonic_ns()
        minflt1, majflt1 = faults()
        emit(
            event="phase",
            process=proc["name"],
            phase=entry["name"],
            index=i,
            start_ns=start,
            end_ns=end_ns,
            accesses=accesses,
            minflt=minflt1 - minflt0,
            majflt=majflt1 - majflt0,
        )
        if kind == "exit":
            return 0
    emit(event="phases_done")
    sys.stdin.readline()  # "exit" or EOF
    return 0


if __name__ == "__main__":
    sys.exit(main())
