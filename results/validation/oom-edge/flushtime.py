"""Time the kernel's memcg stats flusher (flush_memcg_stats_dwork) on this host: a tracefs
instance with the rstat lock event, one CPU kept busy, under the lab lock. Everything undone."""
import os, subprocess, sys, time, glob
from pathlib import Path
from reclaimlab.lab.journal import LabLock
MNT = Path("/tmp/oe/tfs")
INST = MNT / "instances" / "oomedge"
lock = LabLock().acquire("oomedge: timing the memcg stats flusher (tracefs instance)", wait_s=900)
mounted = False
spin = None
try:
    MNT.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tracefs", "nodev", str(MNT)], check=True)
    mounted = True
    evs = sorted(glob.glob(str(MNT / "events" / "cgroup" / "*rstat*")))
    print("events:", [os.path.basename(e) for e in evs])
    name = next((os.path.basename(e) for e in evs if e.endswith("_rstat_locked")), None)
    assert name, "no rstat_locked event"
    print(open(MNT / "events" / "cgroup" / name / "format").read())
    INST.mkdir()
    (INST / "events" / "cgroup" / name / "enable").write_text("1")
    (INST / "tracing_on").write_text("1")
    spin = subprocess.Popen(["timeout", "21", "sh", "-c", "while :; do :; done"])
    time.sleep(20)
    (INST / "tracing_on").write_text("0")
    (INST / "events" / "cgroup" / name / "enable").write_text("0")
    Path("/tmp/oe/flush-trace.txt").write_text((INST / "trace").read_text())
finally:
    if spin is not None:
        spin.wait()
    if INST.exists():
        os.rmdir(INST)
    if mounted:
        subprocess.run(["umount", str(MNT)], check=True)
    lock.release()
print("done")
