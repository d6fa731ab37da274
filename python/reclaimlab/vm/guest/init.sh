# The VM lab guest's PID 1 (docs/vmlab.md). It runs one scenario and powers the guest off:
#
#   mount proc, sys, dev, debugfs, a small /tmp; source /plan/plan.sh (the run's plan, written
#   by reclaimlab.vm.plan: variables and plan_apply); load the kernel modules of the image;
#   plan_apply (cgroup hierarchy, sysctls, cgroups, swap devices, zswap, MGLRU, filesystems);
#   start one reclaimlab-runner per process (with filesystems: --fs-dir per filesystem and
#   --cgroup-procs, it writes its files in its cgroup before "ready"), move each into its
#   cgroup once it says "ready", with filesystems sync and drop the page cache, snapshot, "go", sample every SAMPLE_CS centiseconds until every runner has finished its
#   phases (or exited), snapshot again, let the runners exit, send their output, power off.
#
# Everything goes to the host on the second serial port (/dev/ttyS1), one record per line:
#   @@EV name args...        progress (init, applied, go, done, exit I STATUS, bye)
#   @@INFO key value          facts about the guest (release, zswap parameters, lru_gen ...)
#   @@ERR message             a failure; the guest powers off right after it
#   @@SNAP label uptime_cs    then "@@F path" + the file's text per file, then "@@END"
#                             (label: before, sample, after; "trace": the hist files, --trace)
#   @@OUT i / @@STDERR i      runner i's stdout / stderr, then "@@END"
#   @@DMESG                   the kernel's OOM reports, if any, then "@@END"
# Any exit of this script (or a panic: panic=-1) reboots, and QEMU runs with -no-reboot: the
# guest ends either way.
#
# This file follows guest/prologue.sh in the guest's /init (mounts, fd 9, bye/ev/die/info/now/
# setf/waitdev are there).

# setf, then check the value reads back (Y/N, 1/0 and true/false are the same answer: module
# parameters show Y/N, sysctls 1/0, /sys/kernel/mm/swap/vma_ra_enabled true/false; a file
# listing its choices with the current one in brackets, /sys/kernel/mm/transparent_hugepage/*,
# reads as that choice)
setp() {
    setf "$1" "$2"
    v=$(cat "$1")
    case "$v" in *\[*\]*) v=${v#*\[}; v=${v%%\]*} ;; esac
    case "$v:$2" in Y:1|N:0|1:Y|0:N|true:Y|false:N|true:1|false:0) ;; *) [ "$v" = "$2" ] || die "$1: wrote '$2' but it reads '$v'" ;; esac
}
snap() {
    label=$1
    shift
    echo "@@SNAP $label $(now)" >&9
    for f in "$@"; do
        [ -f "$f" ] || continue
        echo "@@F $f" >&9
        cat "$f" >&9
    done
    echo "@@END" >&9
}
alive() {
    eval p=\$pid$1
    [ -r /proc/$p/stat ] || return 1
    read -r _ _ st _ < /proc/$p/stat
    [ "$st" != Z ]
}
done_phases() { grep -q '"event":"phases_done"' /tmp/out$1; }
# The host lab's driver protocol for `after`: runner i printed {"event":"waiting","index":K};
# it gets "continue" once runner Q printed the phase line of its phase J (AFTER_i_K="Q J"),
# or runner Q is done or gone. answered<i> is the last index answered. Returns 0 if a runner
# is still waiting (the main loop then polls faster).
release_waiters() {
    w_left=1
    w=0
    while [ $w -lt "$NPROC" ]; do
        k=$(grep -o '"event":"waiting","index":[0-9]*' /tmp/out$w | tail -n 1 | sed 's/.*://')
        eval "seen=\${answered$w:-}"
        if [ -n "$k" ] && [ "$k" != "$seen" ]; then
            eval "dep=\$AFTER_${w}_$k"
            q=${dep% *}; j=${dep#* }
            if grep -q "\"event\":\"phase\".*\"index\":$j," /tmp/out$q || done_phases $q || ! alive $q; then
                eval "echo continue >&$((3 + w))"
                eval "answered$w=$k"
            else
                w_left=0
            fi
        fi
        w=$((w + 1))
    done
    return $w_left
}

ev init "$(now)"
[ -r /plan/plan.sh ] || die "no /plan/plan.sh in the initramfs"
. /plan/plan.sh

for m in /lib/modules/*.ko; do
    [ -f "$m" ] || continue
    case "$m" in
        *-zram.ko) insmod "$m" num_devices="$ZRAM_NUM" || die "insmod $m failed" ;;
        *) insmod "$m" || die "insmod $m failed" ;;
    esac
done
rm -rf /lib/modules   # the rootfs is RAM: give it back

plan_apply
info release /proc/sys/kernel/osrelease
info cmdline /proc/cmdline
for p in /sys/module/zswap/parameters/*; do info "zswap.${p##*/}" "$p"; done
info lru_gen /sys/kernel/mm/lru_gen/enabled
info thp /sys/kernel/mm/transparent_hugepage/enabled
info swaps /proc/swaps
info meminfo_total /proc/meminfo
# after plan_apply: the value the run's watermarks come from (khugepaged raises it at boot)
info min_free_kbytes /proc/sys/vm/min_free_kbytes
ev applied "$(now)"

i=0
while [ $i -lt "$NPROC" ]; do
    mkfifo /tmp/in$i
    rargs=""
    # FS_ARGS is "--fs-dir /mnt/fs0 ..." (no spaces in the paths): split on purpose.
    [ -n "$FS_ARGS" ] && eval "rargs=\"$FS_ARGS --cgroup-procs \$cg$i/cgroup.procs\""
    # shellcheck disable=SC2086
    /bin/reclaimlab-runner --config /plan/lowered.json --process $i $rargs < /tmp/in$i > /tmp/out$i 2> /tmp/err$i 9>&- &
    eval "pid$i=\$!"
    eval "exec $((3 + i))>/tmp/in$i"
    i=$((i + 1))
done
i=0
while [ $i -lt "$NPROC" ]; do
    n=0
    until grep -q '"event":"ready"' /tmp/out$i; do
        alive $i || die "runner $i exited before it was ready: $(tail -c 600 /tmp/err$i /tmp/out$i | tr '\n' ' ')"
        n=$((n + 1)); [ $n -gt "$READY_POLLS" ] && die "runner $i: no ready within $((READY_POLLS / 20)) s"
        sleep 0.05
    done
    eval "echo \$pid$i > \$cg$i/cgroup.procs" || die "cannot move runner $i into its cgroup"
    i=$((i + 1))
done
# As the host lab (lab.host.drop_caches): the files are on their disks, none of them cached.
if [ "$DROP_CACHES" = 1 ]; then sync; echo 3 > /proc/sys/vm/drop_caches || die "cannot drop the page cache"; fi

# --trace: the hist triggers count from here (vm/trace.py)
[ -n "$TRACE_FILES" ] && plan_trace
snap before /proc/vmstat /proc/meminfo $SNAP_FILES /sys/kernel/debug/zswap/*
ev go "$(now)"
i=0
while [ $i -lt "$NPROC" ]; do eval "echo go >&$((3 + i))"; i=$((i + 1)); done
next=$(( $(now) + SAMPLE_CS ))
while :; do
    left=0
    i=0
    while [ $i -lt "$NPROC" ]; do
        if ! done_phases $i && alive $i; then left=1; fi
        i=$((i + 1))
    done
    [ $left = 0 ] && break
    if [ "$(now)" -ge $next ]; then
        snap sample /proc/vmstat /proc/meminfo $SNAP_FILES /sys/kernel/debug/zswap/*
        next=$((next + SAMPLE_CS))
    fi
    if release_waiters; then sleep 0.05; else sleep 0.2; fi
done
snap after /proc/vmstat /proc/meminfo $SNAP_FILES /sys/kernel/debug/zswap/*
[ -n "$TRACE_FILES" ] && snap trace $TRACE_FILES
ev done "$(now)"

# EOF on its stdin: the runner exits (its memory is released).
i=0
while [ $i -lt "$NPROC" ]; do eval "exec $((3 + i))>&-"; i=$((i + 1)); done
i=0
while [ $i -lt "$NPROC" ]; do
    eval "wait \$pid$i"
    ev exit $i $?
    echo "@@OUT $i" >&9; cat /tmp/out$i >&9; printf '\n@@END\n' >&9
    echo "@@STDERR $i" >&9; tail -c 4000 /tmp/err$i >&9; printf '\n@@END\n' >&9
    i=$((i + 1))
done
# The kernel's OOM reports (warnings: not on the console at loglevel 4), for the host's error.
if dmesg | grep -q "invoked oom-killer"; then
    echo "@@DMESG" >&9; dmesg | grep -A 45 "invoked oom-killer" | tail -c 8000 >&9; printf '\n@@END\n' >&9
fi
bye
