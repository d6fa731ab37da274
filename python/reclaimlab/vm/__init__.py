"""The VM lab: the lab's scenarios in a QEMU guest running one of Debian's kernels.

The host lab (``reclaimlab.lab``) runs on this host's kernel; the VM lab boots a guest whose
kernel the scenario (``lab.kernel``) or the command line (``--kernel``) names, so that cgroup v2,
MGLRU and older kernels (6.1, 6.12) can be validated on a host that has none of them
(docs/vmlab.md). It changes nothing on the host: the guest applies the scenario to itself.

* ``cache``: where the installed pieces live (kernels, initramfs images) and what is installed;
* ``install``: ``make vmlab`` — Debian's kernels (apt-get download), the static runner, the
  base initramfs;
* ``initramfs``: the cpio archives (base image cached by a hash of its inputs; one per run);
* ``plan``: a lowered scenario as the shell script the guest's init runs;
* ``guest/init.sh``: the guest's PID 1;
* ``qemu``: starting, watching and stopping one guest;
* ``channel``: the data channel (the guest's second serial port) parsed into snapshots and
  runner events.

The backend itself is ``reclaimlab.backends.vm``.
"""
