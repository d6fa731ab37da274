#!/bin/busybox sh
# What both VM lab guest programs start with (reclaimlab.vm.initramfs.guest_script puts it in
# front of guest/init.sh, the scenario runner, or guest/selftests.sh, the selftest runner, to
# make the guest's /init): the busybox applets, the pseudo filesystems, a small /tmp, the data
# channel on the second serial port as fd 9, and the helpers both use. The record format is
# described at the top of guest/init.sh.

/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
mount -t tmpfs -o size=64m,mode=1777 tmpfs /tmp

stty -F /dev/ttyS1 raw -echo 2>/dev/null   # raw: no \n -> \r\n on the way out
exec 9>/dev/ttyS1

bye() {
    echo "@@EV bye" >&9
    # The last close of the tty waits until the UART has sent everything (closing_wait).
    exec 9>&-
    sync
    reboot -f
}
ev() { echo "@@EV $*" >&9; }
die() { echo "@@ERR $*" >&9; bye; }
info() { echo "@@INFO $1 $(tr '\n' ' ' < "$2" 2>/dev/null)" >&9; }
# uptime in centiseconds (without a leading-zero octal trap)
now() { read -r up _ < /proc/uptime; echo $(( ${up%.*} * 100 + 1${up#*.} - 100 )); }
setf() { echo "$2" > "$1" 2>/dev/null || die "cannot write '$2' to $1"; }
waitdev() {
    n=0
    until [ -b "$1" ]; do n=$((n + 1)); [ $n -gt 200 ] && die "no block device $1 after 10 s"; sleep 0.05; done
}
