# The VM lab guest's PID 1 for the kernel's cgroup selftests (reclaimlab.vm.selftest_run,
# docs/conformance.md). It prepares the machine the selftests expect, runs one selftest binary,
# follows its TAP output, and powers the guest off:
#
#   mount proc, sys, dev, debugfs (zswap's stored_pages), a small /tmp; load the image's kernel
#   modules; the loopback interface up with /etc/hosts (test_memcg_sock connects to localhost);
#   cgroup2 at /sys/fs/cgroup with the options systemd mounts it with (nsdelegate,
#   memory_recursiveprot) and +memory in the root's cgroup.subtree_control; /dev/vda as swap;
#   zswap enabled; MGLRU as /plan/selftest.env says; an ext4 (ext2 layout, busybox mke2fs) on
#   /dev/vdb as the working directory: test_memcontrol's page cache is an O_TMPFILE file in
#   ".", which must be file-backed as on a real machine, not shmem as on the initramfs; then
#   /tests/$BINARY.
#
# Per-test timeout: the binary's stdout is line-buffered (guest/linebuf.c is linked in), so a
# TAP result line ("ok N ...", "not ok N ...") arrives as each test ends. When no result line
# has come for TEST_TIMEOUT_CS, the running test is N+1: the binary and every process in a
# cgroup below the root are killed (cgroup.kill) and "@@EV timeout N+1" is sent; the binary's
# later tests do not run (it has no option to start at a given test).
#
# Records on the second serial port (/dev/ttyS1), one per line, as guest/init.sh's:
#   @@EV name args...   init, applied, start, timeout N, exit STATUS, bye
#   @@INFO key value    release, cmdline, zswap.<param>, lru_gen, thp, swaps, meminfo_total,
#                       cgroup2_mount, min_free_kbytes
#   @@ERR message       the setup failed; the guest powers off right after it
#   @@T uptime_cs line  one line of the binary's output (stdout and stderr), as it came
#   @@Z uptime_cs n     zswap's stored_pages (debugfs), each time it changed (polled every 0.5 s)
#   @@DMESG ... @@END   what the kernel logged while the binary ran (OOM reports, warnings)
#
# This file follows guest/prologue.sh in the guest's /init (mounts, fd 9, bye/ev/die/info/now/
# setf/waitdev are there).

# Send the output's complete lines from line $sent+1 on; count the TAP result lines.
forward() {
    n=$(wc -l < /tmp/out)
    [ "$n" -gt "$sent" ] || return 0
    t=$(now)
    tail -n +$((sent + 1)) /tmp/out | head -n $((n - sent)) | while IFS= read -r l; do echo "@@T $t $l"; done >&9
    sent=$n
    r=$(grep -c -E '^(not )?ok [0-9]+' /tmp/out)
    if [ "$r" != "$results" ]; then results=$r; last=$t; fi
}

ev init "$(now)"
[ -r /plan/selftest.env ] || die "no /plan/selftest.env in the initramfs"
. /plan/selftest.env
[ -x "/tests/$BINARY" ] || die "no /tests/$BINARY in the initramfs"

for m in /lib/modules/*.ko; do
    [ -f "$m" ] || continue
    insmod "$m" || die "insmod $m failed"
done
rm -rf /lib/modules

ip link set lo up || die "cannot bring the loopback interface up"
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost\n' > /etc/hosts

mount -t cgroup2 -o "${CGROUP2_OPTS:-nsdelegate,memory_recursiveprot}" cgroup2 /sys/fs/cgroup || die "cannot mount cgroup2"
setf /sys/fs/cgroup/cgroup.subtree_control +memory

waitdev /dev/vda
mkswap /dev/vda > /dev/null || die "mkswap /dev/vda failed"
swapon /dev/vda || die "swapon /dev/vda failed"
[ -d /sys/module/zswap ] || die "this kernel has no zswap (/sys/module/zswap)"
setf /sys/module/zswap/parameters/enabled Y
waitdev /dev/vdb
mke2fs -q /dev/vdb > /dev/null || die "mke2fs /dev/vdb failed"
mkdir -p /mnt/scratch
mount -t ext4 /dev/vdb /mnt/scratch || die "cannot mount /dev/vdb (ext4)"
if [ -f /sys/kernel/mm/lru_gen/enabled ]; then
    setf /sys/kernel/mm/lru_gen/enabled "$LRU_GEN"
fi

info release /proc/sys/kernel/osrelease
info cmdline /proc/cmdline
for p in /sys/module/zswap/parameters/*; do info "zswap.${p##*/}" "$p"; done
info lru_gen /sys/kernel/mm/lru_gen/enabled
info thp /sys/kernel/mm/transparent_hugepage/enabled
info swaps /proc/swaps
info meminfo_total /proc/meminfo
grep cgroup2 /proc/mounts > /tmp/cgroup2
info cgroup2_mount /tmp/cgroup2
info min_free_kbytes /proc/sys/vm/min_free_kbytes
ev applied "$(now)"

cd /mnt/scratch || die "no /mnt/scratch"
: > /tmp/out
dmesg -c > /dev/null   # from here on, the kernel's log is the tests'
zs=-1
ev start "$(now)" "$BINARY"
"/tests/$BINARY" > /tmp/out 2>&1 < /dev/null &
pid=$!
sent=0
results=0
last=$(now)
while :; do
    forward
    read -r z < /sys/kernel/debug/zswap/stored_pages
    if [ "$z" != "$zs" ]; then echo "@@Z $(now) $z" >&9; zs=$z; fi
    [ -r /proc/$pid/stat ] || break
    read -r _ _ st _ < /proc/$pid/stat
    [ "$st" = Z ] && break
    if [ $(( $(now) - last )) -gt "$TEST_TIMEOUT_CS" ]; then
        ev timeout $((results + 1))
        kill -9 $pid
        for k in $(find /sys/fs/cgroup -mindepth 2 -name cgroup.kill); do echo 1 > "$k"; done
        break
    fi
    sleep 0.5
done
wait $pid
status=$?
forward
# a last line without its newline
tail -n +$((sent + 1)) /tmp/out | while IFS= read -r l || [ -n "$l" ]; do echo "@@T $(now) $l"; done >&9
ev exit "$status"
echo "@@DMESG" >&9; dmesg | tail -c 20000 >&9; printf '\n@@END\n' >&9
bye
