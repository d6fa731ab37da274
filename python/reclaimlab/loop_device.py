"""The lab's filesystem device (``calibrate`` stage 2b): a loop device with direct IO over an
image file, as ``lab/filesystems.py`` makes one for every ext4/xfs/btrfs of a scenario, measured
as the simulator models a block device (``devices.py`` ``lab-loop``), and an ext4 create loop
on it (what one fsync of a fresh file costs there).

Why its own device: the loop worker turns each request into direct IO on the image file
(drivers/block/loop.c ``lo_rw_aio``, IOCB_DIRECT), so its reads and writes are the image
file's, not the VM disk's raw figures; its queue (``read_ahead_kb`` 2560, ``max_sectors_kb``
1280 here) is the loop device's own; and it has a volatile write cache without FUA
(``loop_reconfigure_limits``: BLK_FEAT_WRITE_CACHE when the backing file has ->fsync, never
BLK_FEAT_FUA), so every REQ_PREFLUSH and every emulated FUA is a REQ_OP_FLUSH that the loop
worker serves with ``vfs_fsync`` of the image file (``lo_req_flush``) -- on this VM an fsync
of a file on ext4 on the virtio disk.

What ``run`` does, under the lab lock, everything journaled (image, loop device, mount; the
journal's restore undoes them when the stage ends or fails):

1. an image of ``image_mib`` MiB in ``<state dir>/fs``, ``posix_fallocate``d, and a loop device
   over it with ``--direct-io=on`` (the steps of the lab's ``filesystems.set_up``);
2. ``mkfs.ext4`` with the lab's options, mounted with default options;
3. the create loop (``rounds`` rounds of ``files`` files of ``file_kib`` KiB: ``open(O_CREAT|O_EXCL)``, ``write(2)``
   of 4 KiB each, ``fsync``, ``close``), each step timed, with the loop device's
   ``/sys/block/loopN/stat`` before and after (requests, merges, sectors, flushes and their
   times: what the create loop sent per file and what each request and flush took);
4. ``scans`` reads of a ``read_mib`` MiB file written and fsynced just before, each after
   ``posix_fadvise(DONTNEED)`` of it, with ``read(2)`` of 4 KiB (the lab runner's read phase:
   readahead at the loop device's ``read_ahead_kb``), timed, with the stat's read requests
   and the device's busy time;
5. O_DIRECT on the filesystem: random 4 KiB reads, sequential ``max_sectors_kb`` reads and
   overwrites of that file at queue depth 1, sequential ``max_sectors_kb`` writes of
   ``write_mib`` MiB to a new file;
6. the CPU time of buffered 4 KiB write(2)s per page (``write_cpu``): into a new file, into
   its pages again once they are dropped from the cache, and into them while cached.

Everything runs on a fresh filesystem, as in a lab run: data goes to blocks of the image that
were never written (fallocated, unwritten extents of the image file, which the VM's ext4
converts at each write's completion and commits at the next flush), the journal to blocks
mkfs wrote.

The pure part (``device_figures``, ``create_figures``, ``write_figures``) is tested without a
kernel.
"""

from __future__ import annotations

import mmap
import os
import secrets
import statistics
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from reclaimlab.lab import filesystems, host
from reclaimlab.lab.errors import LabError, LabUnavailable
from reclaimlab.lab.record import BLOCK_STAT
from reclaimlab.lab.session import session

__all__ = ["create_figures", "device_figures", "run"]

PAGE = 4096
MIB = 1 << 20
SECTOR = 512

_Note = Callable[[str], None]


def _stat(dev: str) -> dict[str, int]:
    vals = host.read_text(f"/sys/block/{Path(dev).name}/stat").split()
    return {k: int(v) for k, v in zip(BLOCK_STAT, vals, strict=False)}


def _delta(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {k: b[k] - a[k] for k in a if k != "in_flight"}


def _med(xs: list[int]) -> int:
    return round(statistics.median(xs))


def _direct(point: Path, scan: Path, chunk: int, rand_ios: int, write_mib: int) -> dict[str, Any]:
    """Step 5: O_DIRECT on files of the filesystem: random 4 KiB reads, sequential reads and
    overwrites of ``chunk`` bytes of the scan file at queue depth 1, and sequential writes of
    ``chunk`` bytes to a new file (blocks the image never had)."""
    page = mmap.mmap(-1, PAGE)
    big = mmap.mmap(-1, chunk)
    rr: list[int] = []
    fd = os.open(scan, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        pages = size // PAGE
        step = 7919  # a prime stride: blocks of the whole file, in no order
        for k in range(rand_ios):
            t0 = time.perf_counter_ns()
            if os.preadv(fd, [page], (k * step % pages) * PAGE) != PAGE:
                raise LabError(f"short read on {scan}")
            rr.append(time.perf_counter_ns() - t0)
        t0 = time.perf_counter_ns()
        for off in range(0, size - chunk + 1, chunk):
            if os.preadv(fd, [big], off) != chunk:
                raise LabError(f"short read on {scan}")
        seq_r = time.perf_counter_ns() - t0
        seq_r_bytes = (size // chunk) * chunk
    finally:
        os.close(fd)
    big.write(os.urandom(chunk))
    fd = os.open(scan, os.O_WRONLY | os.O_DIRECT | os.O_CLOEXEC)
    try:
        t0 = time.perf_counter_ns()
        for off in range(0, seq_r_bytes, chunk):
            if os.pwrite(fd, big, off) != chunk:
                raise LabError(f"short write on {scan}")
        os.fdatasync(fd)
        seq_ow = time.perf_counter_ns() - t0
    finally:
        os.close(fd)
    path = point / "direct-write"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DIRECT | os.O_CLOEXEC, 0o600)
    try:
        n = write_mib * MIB // chunk
        t0 = time.perf_counter_ns()
        for k in range(n):
            if os.pwrite(fd, big, k * chunk) != chunk:
                raise LabError(f"short write on {path}")
        os.fdatasync(fd)
        seq_w = time.perf_counter_ns() - t0
    finally:
        os.close(fd)
        page.close()
        big.close()
    return {
        "chunk_bytes": chunk,
        "rand_read_4k_ns": rr,
        "seq_read_bytes": seq_r_bytes,
        "seq_read_ns": seq_r,
        "seq_overwrite_ns": seq_ow,
        "seq_write_bytes": n * chunk,
        "seq_write_ns": seq_w,
    }


def _create_loop(point: Path, dev: str, files: int, file_kib: int, rounds: int, pause_s: float) -> dict[str, Any]:
    """Step 3: the create loop on the mounted filesystem, ``rounds`` rounds of ``files``
    files each (one directory per round), ``pause_s`` apart, the device's stat per round
    (other work on the host moves this device's times by several-fold within minutes: the
    figures are medians over rounds)."""
    buf = os.urandom(PAGE)
    writes: list[int] = []
    fsyncs: list[int] = []
    totals: list[int] = []
    stats: list[dict[str, int]] = []
    elapsed = 0
    for r in range(rounds):
        if r:
            time.sleep(pause_s)
        d = point / f"create-{r}"
        d.mkdir()
        before = _stat(dev)
        t_start = time.perf_counter_ns()
        for k in range(files):
            t0 = time.perf_counter_ns()
            fd = os.open(d / f"f{k:06d}", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                for _ in range(file_kib * 1024 // PAGE):
                    if os.write(fd, buf) != PAGE:
                        raise LabError(f"short write in {d}")
                t1 = time.perf_counter_ns()
                os.fsync(fd)
                t2 = time.perf_counter_ns()
            finally:
                os.close(fd)
            writes.append(t1 - t0)
            fsyncs.append(t2 - t1)
            totals.append(time.perf_counter_ns() - t0)
        elapsed += time.perf_counter_ns() - t_start
        stats.append(_delta(before, _stat(dev)))
    return {
        "files": files * rounds,
        "rounds": rounds,
        "file_kib": file_kib,
        "elapsed_ns": elapsed,
        "write_ns": writes,
        "fsync_ns": fsyncs,
        "file_ns": totals,
        "stat": {k: sum(st[k] for st in stats) for k in stats[0]},
        "round_stats": stats,
    }


def _read_file(point: Path, dev: str, read_mib: int, scans: int) -> dict[str, Any]:
    """Step 4: write a file, fsync; ``scans`` times drop its cache and read it with 4 KiB
    read(2)s (the device's busy time is counted in jiffies: several scans make it a figure)."""
    path = point / "scan"
    chunk = os.urandom(MIB)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        for _ in range(read_mib):
            os.write(fd, chunk)
        os.fsync(fd)
        before = _stat(dev)
        elapsed = 0
        n = 0
        for _ in range(scans):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.lseek(fd, 0, os.SEEK_SET)
            t0 = time.perf_counter_ns()
            while True:
                got = os.read(fd, PAGE)
                if not got:
                    break
                n += len(got)
            elapsed += time.perf_counter_ns() - t0
        after = _stat(dev)
    finally:
        os.close(fd)
    if n != scans * read_mib * MIB:
        raise LabError(f"read {n} bytes of {path}, expected {scans * read_mib * MIB}")
    return {"bytes": n, "scans": scans, "elapsed_ns": elapsed, "stat": _delta(before, after), "path": str(path)}


def _write_cpu(point: Path, mib: int) -> dict[str, Any]:
    """Step 6: the CPU time of buffered 4 KiB write(2)s (this thread's, ``thread_time_ns``, so
    a busy host's waits are left out), per page, on a ``mib`` MiB file: (a) a new file (new
    page cache folios, delayed allocation); (b) after fsync and POSIX_FADV_DONTNEED, the same
    pages again (new folios over allocated blocks: a lab write phase's case, its file written
    before the run); (c) after fsync, the pages again while cached (no insertion: what a write
    costs besides the new folio)."""
    path = point / "write-cpu"
    buf = os.urandom(PAGE)
    pages = mib * MIB // PAGE

    def one_pass(fd: int) -> int:
        os.lseek(fd, 0, os.SEEK_SET)
        t0 = time.thread_time_ns()
        for _ in range(pages):
            if os.write(fd, buf) != PAGE:
                raise LabError(f"short write on {path}")
        return time.thread_time_ns() - t0

    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        new = one_pass(fd)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        uncached = one_pass(fd)
        os.fsync(fd)
        cached = one_pass(fd)
        os.fsync(fd)
    finally:
        os.close(fd)
    return {"pages": pages, "new_file_ns": new, "uncached_ns": uncached, "cached_ns": cached}


def run(
    note: _Note | None = None,
    wait_s: float | None = None,
    image_mib: int = 768,
    rand_ios: int = 2000,
    write_mib: int = 128,
    files: int = 100,
    rounds: int = 5,
    pause_s: float = 2.0,
    file_kib: int = 128,
    read_mib: int = 192,
    scans: int = 4,
    write_cpu_mib: int = 64,
) -> dict[str, Any]:
    """Measure the lab's loop device and an ext4 create loop on it (module docstring)."""
    say = note or (lambda _m: None)
    if os.geteuid() != 0:
        raise LabUnavailable("measuring the lab's loop device needs root (losetup, mkfs, mount)")
    runid = f"calibrate-loop-{secrets.token_hex(2)}"
    with (
        session("reclaimlab calibrate (loop device)", say, wait_s) as lab,
        lab.journal(runid=runid, scenario="calibrate loop device", what="removing the loop device failed", busy_retries=19) as j,
    ):
        img_dir = lab.state / "fs"
        img_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        image = img_dir / f"{runid}-0.img"
        size = image_mib * MIB
        j.record("fsimage", path=str(image))
        fd = os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.posix_fallocate(fd, 0, size)
        finally:
            os.close(fd)
        j.record("loop", image=str(image))
        dev = host.run_tool(["losetup", "--find", "--show", "--direct-io=on", str(image)]).strip()
        if not filesystems._LOOP.match(dev):
            raise LabError(f"losetup --find --show {image} printed {dev!r}, not a loop device")
        queue = filesystems.loop_queue(dev)
        chunk = int(queue.get("max_sectors_kb", "1280")) * 1024
        say(f"loop device {dev} over {image} ({image_mib} MiB), queue {queue}")
        host.run_tool(filesystems.mkfs_argv("ext4", dev), timeout=300)
        point = lab.state / "mnt" / f"{runid}-0"
        point.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        j.record("mount", path=str(point), fstype="ext4", created_dir=True)
        point.mkdir(mode=0o700)
        host.run_tool(["mount", "-t", "ext4", dev, str(point)])
        say(f"ext4 create loop: {rounds} rounds of {files} files of {file_kib} KiB, each written, fsynced and closed")
        create = _create_loop(point, dev, files, file_kib, rounds, pause_s)
        say(f"read(2) of a {read_mib} MiB file written just before, {scans} times")
        read = _read_file(point, dev, read_mib, scans)
        say("O_DIRECT reads of that file and writes of a new one")
        direct = _direct(point, Path(read["path"]), chunk, rand_ios, write_mib)
        say(f"CPU time of buffered 4 KiB writes: {write_cpu_mib} MiB, new, uncached and cached pages")
        write_cpu = _write_cpu(point, write_cpu_mib)
    return {
        "method": (
            "a loop device made as the lab makes one (posix_fallocate'd image in the state dir, losetup "
            "--direct-io=on, mkfs.ext4 -E lazy_itable_init=0,lazy_journal_init=0,nodiscard); an ext4 create "
            "loop, read(2) scans and O_DIRECT IO on it (loop_device.py)"
        ),
        "loop_device": dev,
        "queue": queue,
        "create": create,
        "direct": direct,
        "write_cpu": write_cpu,
        "read": read,
    }


def device_figures(m: Mapping[str, Any]) -> dict[str, Any]:
    """The ``lab-loop`` device model (devices.py) from a measurement (``run``'s report).

    * ``read_bytes_per_s``: the read(2) scans' throughput with two readahead windows of
      requests in flight (2 x read_ahead_kb / max_sectors_kb requests, each taking the mean
      request time ``read_ticks`` / ``read_ios``): the loop worker serves them at once (aio
      direct IO), which the model's one-at-a-time queue can only show as the throughput of
      that stream. (The stat's ``time_in_queue`` / ``io_ticks``, requests in flight on
      average, was 4.1 in the first measurement, 2026-11-24 22:34; ``io_ticks`` counts in
      jiffies, too coarse to divide by.)
    * ``read_latency_ns``: the scan's mean read request time (``read_ticks`` / ``read_ios``,
      requests of ``max_sectors_kb``) less the mean request's transfer at that throughput
      (the 4 KiB O_DIRECT reads at queue depth 1 are recorded beside it, not used: the lab's
      file scenarios read sequentially);
    * ``write_bytes_per_s``: sequential O_DIRECT overwrites of the scan file in requests of
      ``max_sectors_kb``, queue depth 1 (the lab's files are written before a run, so a
      streaming write phase overwrites them);
    * ``write_latency_ns``: the create loop's mean write request time, median over rounds (``write_ticks`` /
      ``write_ios``: data blocks the image never had, whose write the VM's filesystem must
      convert from an unwritten extent, and journal blocks, which mkfs wrote) less the mean
      request's transfer at that bandwidth. One figure for both kinds: the model has no
      allocation state of the image (a write to a fresh block costs 20-50 times an
      overwrite here: recorded as ``direct.seq_write_bytes_per_s``, a new file, beside the
      overwrite's);
    * ``flush_ns``: the create loop's mean flush time, median over rounds (``flush_ticks`` / ``flush_ios``: the
      loop worker's vfs_fsync of the image file);
    * the queue's ``max_sectors_kb``, ``nr_requests`` and ``read_ahead_kb`` as sysfs has them.
    """
    q = m["queue"]
    d = m["direct"]
    rd = m["read"]
    st = m["create"]["stat"]
    rios = max(1, int(rd["stat"]["read_ios"]))
    read_req_ns = int(rd["stat"]["read_ticks"]) * 1e6 / rios
    read_req_bytes = int(rd["stat"]["read_sectors"]) * SECTOR / rios
    # Requests in flight while a reader outpaces the device: two readahead windows (the
    # current one and the async one started at its PG_readahead folio), each read_ahead_kb
    # split into max_sectors_kb requests.
    depth = 2 * max(1, -(-int(q["read_ahead_kb"]) // int(q["max_sectors_kb"])))
    read_bw = depth * read_req_bytes * 1e9 / read_req_ns
    write_bw = int(d["seq_read_bytes"]) * 1e9 / int(d["seq_overwrite_ns"])
    rs = m["create"].get("round_stats") or [st]
    ios = max(1, int(st["write_ios"]))
    mean_req_bytes = int(st["write_sectors"]) * SECTOR / ios
    write_req_ns = statistics.median(int(r["write_ticks"]) * 1e6 / max(1, int(r["write_ios"])) for r in rs)
    flush_ns = statistics.median(int(r["flush_ticks"]) * 1e6 / max(1, int(r["flush_ios"])) for r in rs)
    return {
        "rotational": q.get("rotational", "0") == "1",
        "read_latency_ns": max(0, round(read_req_ns - read_req_bytes * 1e9 / read_bw)),
        "write_latency_ns": max(0, round(write_req_ns - mean_req_bytes * 1e9 / write_bw)),
        "read_bytes_per_s": round(read_bw),
        "write_bytes_per_s": round(write_bw),
        "flush_ns": round(flush_ns),
        "max_sectors_kb": int(q["max_sectors_kb"]),
        "nr_requests": int(q["nr_requests"]),
        "read_ahead_kb": int(q["read_ahead_kb"]),
    }


def write_figures(m: Mapping[str, Any]) -> dict[str, int]:
    """Per page of a buffered 4 KiB write(2), CPU ns: into a new file, into dropped pages of
    an allocated file, into cached pages; ``write_page_ns`` is the cached one (the write
    without a new folio, which the model charges as ``pagecache_add_ns`` and
    ``pagecache_add_page_ns``), ``insert_page_ns`` what a new folio added (uncached - cached)."""
    w = m["write_cpu"]
    n = max(1, int(w["pages"]))
    per = {k: round(int(w[f"{k}_ns"]) / n) for k in ("new_file", "uncached", "cached")}
    return {
        **{f"{k}_page_ns": v for k, v in per.items()},
        "write_page_ns": per["cached"],
        "insert_page_ns": per["uncached"] - per["cached"],
    }


def create_figures(m: Mapping[str, Any]) -> dict[str, Any]:
    """Per-file figures of the create loop: median fsync and whole-file times, and what the
    device received per file (requests, merged bios, 4 KiB blocks beyond the file's data,
    flushes)."""
    c = m["create"]
    n = int(c["files"])
    st = c["stat"]
    data_sectors = n * int(c["file_kib"]) * 1024 // SECTOR
    return {
        "fsync_median_ns": _med(c["fsync_ns"]),
        "file_median_ns": _med(c["file_ns"]),
        "write_median_ns": _med(c["write_ns"]),
        "write_requests_per_file": round(st["write_ios"] / n, 3),
        "write_merges_per_file": round(st["write_merges"] / n, 3),
        "extra_blocks_per_file": round((st["write_sectors"] - data_sectors) * SECTOR / PAGE / n, 3),
        "flushes_per_file": round(st["flush_ios"] / n, 3),
    }


if __name__ == "__main__":
    import json
    import sys

    rep = run(note=lambda s: print(s, file=sys.stderr), wait_s=900)
    summary = {"device": device_figures(rep), "create": create_figures(rep)}
    rd = rep["read"]
    summary["read"] = {"bytes_per_s": round(rd["bytes"] * 1e9 / rd["elapsed_ns"]), **rd["stat"]}
    print(json.dumps({"summary": summary, "report": rep}))
