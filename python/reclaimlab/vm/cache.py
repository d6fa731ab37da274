"""Where the VM lab keeps what ``make vmlab`` installed, and the kernels it knows.

The cache lives outside the repository: ``$RECLAIMLAB_VM_CACHE`` if set, else
``/var/cache/reclaimlab-vm`` for root, else ``~/.cache/reclaimlab/vm``::

    debs/<package>_<version>_amd64.deb          what apt-get download fetched
    kernels/<name>/kernel.json                  the installed kernel of <name> (debian-6.12 ...)
    kernels/<name>/<release>/vmlinux            extracted from the .deb's vmlinuz (PVH boot)
    kernels/<name>/<release>/modules/*.ko       the modules the guest loads, decompressed
    kernels/<name>/<release>/fsmodules/*.ko     the filesystems' modules (runs with ext4/xfs only)
    initramfs/<name>-<sha256>.cpio              base images, named by the hash of their inputs
    runner/reclaimlab-runner                    the statically linked runner they contain
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reclaimlab.lab.errors import LabUnavailable

__all__ = [
    "CACHE_ENV",
    "FS_MODULES",
    "GUEST_FS_TYPES",
    "KERNELS",
    "TOOLS",
    "InstalledKernel",
    "KernelSpec",
    "VmUnavailable",
    "cache_dir",
    "installed_kernel",
    "missing_tools",
]

CACHE_ENV = "RECLAIMLAB_VM_CACHE"


class VmUnavailable(LabUnavailable):
    """The VM lab is not installed (or not completely): what is missing and how to install it."""


@dataclass(frozen=True)
class KernelSpec:
    """One kernel the VM lab can boot: a Debian package family and what the scenario calls it."""

    name: str  # lab.kernel / --kernel
    #: ``apt-cache search --names-only`` pattern; the highest version found is installed.
    package_regex: str
    #: The simulator's preset closest to this kernel (``kernel.version``), for the notes.
    preset: str | None
    #: Kernel modules (by module name) the guest loads when the kernel builds them as modules,
    #: with their dependencies (from each module's .modinfo ``depends``).
    modules: tuple[str, ...]


#: The modules every guest loads if they are modules (built-in ones are simply not found):
#: the swap disk (virtio_blk), zram and the allocators and compressors a scenario can name.
GUEST_MODULES = ("virtio_pci", "virtio_blk", "zsmalloc", "zram", "lz4", "lz4hc", "zstd", "deflate")

#: The disk filesystem types a guest can mount (vm.plan): the scenario's image is made on the
#: host and attached as a virtio disk. (btrfs is not offered: its module pulls in raid6 and
#: xor, and no scenario needs it yet.)
GUEST_FS_TYPES = ("ext4", "xfs")
#: Their modules (Debian builds ext4 and xfs as modules), loaded only by a run that mounts one
#: (they travel in the run's archive, not the base image, so runs without filesystems boot as
#: before). crc32c_generic first: ext4, jbd2 and libcrc32c (xfs) ask the crypto API for
#: "crc32c" by name, not through a modinfo dependency, and the guest has no modprobe to load
#: it on demand.
FS_MODULES = ("crc32c_generic", "ext4", "xfs")

KERNELS: dict[str, KernelSpec] = {
    # bookworm-security carries the 6.12 backport (6.12.*+deb12); the generic flavour, not
    # `cloud`, which has CONFIG_ZSWAP unset.
    "debian-6.12": KernelSpec("debian-6.12", r"^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$", "6.12", GUEST_MODULES),
    # bookworm's own kernel: 6.1 LTS (zbud is zswap's default pool there; zsmalloc a module).
    "debian-6.1": KernelSpec("debian-6.1", r"^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$", None, GUEST_MODULES),
}

#: Host tools the VM lab needs, and the Debian package that has each.
TOOLS = {
    "qemu-system-x86_64": "qemu-system-x86",
    "timeout": "coreutils",
    "setpriv": "util-linux",
    "dpkg-deb": "dpkg",
    "zstd": "zstd",
}
#: The statically linked busybox the guest runs (Debian's busybox-static installs it here).
BUSYBOX = Path("/bin/busybox")


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/cache/reclaimlab-vm")
    return Path.home() / ".cache" / "reclaimlab" / "vm"


def missing_tools() -> list[str]:
    """``tool (package)`` for each host tool that is not on PATH."""
    out = [f"{t} ({pkg})" for t, pkg in TOOLS.items() if shutil.which(t) is None]
    if not BUSYBOX.is_file():
        out.append(f"{BUSYBOX} (busybox-static)")
    return out


@dataclass(frozen=True)
class InstalledKernel:
    """A kernel ``install`` extracted: the kernel.json beside its files."""

    name: str
    package: str
    version: str
    release: str
    vmlinux: Path
    #: Module files in load order (dependencies first), decompressed.
    modules: tuple[Path, ...]
    #: Facts read from the package's config-<release> (CONFIG_ZSWAP ...), as ``{option: value}``.
    config: dict[str, str]
    #: FS_MODULES with their dependencies not in ``modules``, in load order, decompressed;
    #: None: installed before the VM lab had filesystems (``make vmlab`` adds them).
    fs_modules: tuple[Path, ...] | None = None

    @property
    def memcg_v1(self) -> bool:
        """Whether the cgroup v1 memory controller exists (CONFIG_MEMCG_V1 came with 6.12;
        before it, MEMCG alone had v1)."""
        if "CONFIG_MEMCG_V1" in self.config:
            return self.config["CONFIG_MEMCG_V1"] == "y"
        major_minor = tuple(int(x) for x in self.release.split("-")[0].split("+")[0].split(".")[:2])
        return self.config.get("CONFIG_MEMCG") == "y" and major_minor < (6, 12)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "package": self.package,
            "version": self.version,
            "release": self.release,
            "vmlinux": str(self.vmlinux),
            "modules": [str(m) for m in self.modules],
            "config": dict(sorted(self.config.items())),
            **({} if self.fs_modules is None else {"fs_modules": [str(m) for m in self.fs_modules]}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InstalledKernel:
        return cls(
            name=str(d["name"]),
            package=str(d["package"]),
            version=str(d["version"]),
            release=str(d["release"]),
            vmlinux=Path(d["vmlinux"]),
            modules=tuple(Path(m) for m in d["modules"]),
            config={str(k): str(v) for k, v in d["config"].items()},
            fs_modules=None if d.get("fs_modules") is None else tuple(Path(m) for m in d["fs_modules"]),
        )


def kernel_json(name: str, root: Path | None = None) -> Path:
    return (root or cache_dir()) / "kernels" / name / "kernel.json"


def installed_kernel(name: str, root: Path | None = None) -> InstalledKernel:
    """The installed kernel ``name``; VmUnavailable saying how to install it otherwise."""
    if name not in KERNELS:
        raise VmUnavailable(f"unknown VM kernel {name!r}: expected one of {', '.join(sorted(KERNELS))}")
    path = kernel_json(name, root)
    try:
        k = InstalledKernel.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise VmUnavailable(f"the VM kernel {name} is not installed (no {path}): run `make vmlab`") from None
    except (OSError, ValueError, KeyError) as e:
        raise VmUnavailable(f"{path} is unreadable ({e}): run `make vmlab` again") from None
    missing = [p for p in (k.vmlinux, *k.modules, *(k.fs_modules or ())) if not p.is_file()]
    if missing:
        raise VmUnavailable(f"the VM kernel {name} is incomplete ({missing[0]} is missing): run `make vmlab` again")
    return k
