"""Trace file-create-loop's workload on this host's kernel: which block requests and jbd2 events
an ext4 create loop with fsync makes (docs/model/time.md#flushes-and-the-journal), and the
kernel memory its memcg holds at the end (docs/model/memcg.md).

As root, under the lab lock, with everything it makes journaled first (so ``reclaimlab lab
restore`` undoes it after a crash) and removed at the end: an image of ``--image-mib`` in the
lab's state directory, a loop device with direct IO over it, ``mkfs.ext4`` with the lab's
options, a mount, tracefs (mounted if it is not; events and buffer size written back), a cgroup
v1 memory group ``reclaimlab-<run>`` with ``--limit-mib``. A child process in that group makes
``--files`` files of 128 KiB (``open(O_CREAT|O_EXCL)``, 32 ``write(2)``s of 4 KiB, ``fsync``,
``close``) while ``block:block_rq_issue``, ``block:block_bio_queue``, ``block:block_rq_complete``
(filtered to the loop device) and every ``jbd2`` event go to ``DIR/trace.txt``. Also written:
``DIR/dumpe2fs.txt`` (``dumpe2fs -h``) and ``DIR/result.json`` (the loop device's stat over the
run, the memcg's usage, kmem usage and memory.stat at the end).

Usage: trace_create_loop.py --out DIR [--files 2000] [--limit-mib 64] [--image-mib 313]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import threading
import time
from pathlib import Path

from reclaimlab.lab import filesystems, host
from reclaimlab.lab.session import session

TRACEFS = Path("/sys/kernel/tracing")
STAT_FIELDS = ["rio", "rm", "rs", "rt", "wio", "wm", "ws", "wt", "inf", "iot", "tiq", "dio", "dm", "ds", "dt", "fio", "ft"]
LINE = (b"the quick brown fox jumps over the lazy dog\n" * 94)[:4096]


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _stat(dev: str) -> dict[str, int]:
    return dict(zip(STAT_FIELDS, map(int, Path(f"/sys/block/{Path(dev).name}/stat").read_text().split()), strict=False))


def _create_loop(point: Path, cgroup: Path, files: int) -> None:
    """The child: join the cgroup, make the files, exit (never returns)."""
    try:
        (cgroup / "cgroup.procs").write_text(str(os.getpid()))
        for k in range(files):
            fd = os.open(point / f"f{k:06d}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            for _ in range(32):
                os.write(fd, LINE)
            os.fsync(fd)
            os.close(fd)
        os._exit(0)
    except BaseException as e:
        print(e, file=sys.stderr)
        os._exit(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--limit-mib", type=int, default=64)
    ap.add_argument("--image-mib", type=int, default=313)
    a = ap.parse_args()
    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)
    runid = f"trace-create-{secrets.token_hex(2)}"
    with (
        session("trace_create_loop", _say, 900) as lab,
        lab.journal(runid=runid, scenario="trace_create_loop", what="cleanup", busy_retries=19) as j,
    ):
        img_dir = lab.state / "fs"
        img_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        image = img_dir / f"{runid}-0.img"
        j.record("fsimage", path=str(image))
        fd = os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.posix_fallocate(fd, 0, a.image_mib << 20)
        finally:
            os.close(fd)
        j.record("loop", image=str(image))
        dev = host.run_tool(["losetup", "--find", "--show", "--direct-io=on", str(image)]).strip()
        host.run_tool(filesystems.mkfs_argv("ext4", dev), timeout=300)
        (out / "dumpe2fs.txt").write_text(host.run_tool(["dumpe2fs", "-h", dev]))
        point = lab.state / "mnt" / f"{runid}-0"
        point.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        j.record("mount", path=str(point), fstype="ext4", created_dir=True)
        point.mkdir(mode=0o700)
        host.run_tool(["mount", "-t", "ext4", dev, str(point)])
        rdev = os.stat(dev).st_rdev
        if not (TRACEFS / "events").is_dir():
            j.record("mount", path=str(TRACEFS), fstype="tracefs", created_dir=False)
            host.run_tool(["mount", "-t", "tracefs", "tracefs", str(TRACEFS)])
        if host.read_text(TRACEFS / "current_tracer").strip() != "nop" or host.read_text(TRACEFS / "set_event").strip():
            raise SystemExit(f"tracefs at {TRACEFS} is in use")
        jbd2 = sorted(e.name for e in (TRACEFS / "events" / "jbd2").iterdir() if e.is_dir())
        events = ["block/block_rq_issue", "block/block_rq_complete", "block/block_bio_queue"] + [f"jbd2/{e}" for e in jbd2]
        files = {str(TRACEFS / "tracing_on"): host.read_text(TRACEFS / "tracing_on").strip()}
        for e in events:
            files[str(TRACEFS / "events" / e / "enable")] = host.read_text(TRACEFS / "events" / e / "enable").strip()
        files[str(TRACEFS / "events" / "block" / "filter")] = "0"
        j.record("tracefs", root=str(TRACEFS), files=files, buffer_size_kb=host.read_text(TRACEFS / "buffer_size_kb").split()[0])
        host.write_text(TRACEFS / "tracing_on", "0")
        host.write_text(TRACEFS / "buffer_size_kb", "16384")
        for e in events:
            host.write_text(TRACEFS / "events" / e / "enable", "1")
        # The kernel's dev_t in trace filters: major << 20 | minor.
        host.write_text(TRACEFS / "events" / "block" / "filter", f"dev == {(os.major(rdev) << 20) | os.minor(rdev)}")
        host.write_text(TRACEFS / "trace", "")
        cg = Path("/sys/fs/cgroup/memory") / f"reclaimlab-{runid}"
        j.record("cgroup", path=str(cg))
        cg.mkdir()
        host.write_text(cg / "memory.limit_in_bytes", str(a.limit_mib << 20))
        stop = threading.Event()
        pipe = os.open(TRACEFS / "trace_pipe", os.O_RDONLY | os.O_NONBLOCK)

        def reader() -> None:
            with open(out / "trace.txt", "wb") as tr:
                while True:
                    try:
                        chunk = os.read(pipe, 1 << 16)
                    except BlockingIOError:
                        chunk = b""
                    if chunk:
                        tr.write(chunk)
                    elif stop.is_set():
                        break
                    else:
                        time.sleep(0.05)

        th = threading.Thread(target=reader, daemon=True)
        th.start()
        before = _stat(dev)
        host.write_text(TRACEFS / "tracing_on", "1")
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _create_loop(point, cg, a.files)
        _, status = os.waitpid(pid, 0)
        elapsed = time.monotonic() - t0
        after = _stat(dev)
        host.write_text(TRACEFS / "tracing_on", "0")
        res: dict[str, object] = {"status": status, "elapsed_s": elapsed, "stat": {k: after[k] - before[k] for k in after}, "device": dev}
        for f in ("memory.usage_in_bytes", "memory.kmem.usage_in_bytes", "memory.kmem.max_usage_in_bytes", "memory.stat"):
            res[f] = (cg / f).read_text()
        stop.set()
        th.join(60)
        os.close(pipe)
        (out / "result.json").write_text(json.dumps(res, indent=1))
        host.run_tool(["umount", str(point)])
    _say(json.dumps({k: res[k] for k in ("status", "elapsed_s", "stat")}))


if __name__ == "__main__":
    main()
