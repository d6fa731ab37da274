"""``make vmlab``: install the VM lab's kernels, runner and base images into the cache.

Steps (each skipped when its result is already in the cache):

1. host tools: checked here; ``make vmlab`` installs them with apt-get (qemu-system-x86,
   busybox-static, zstd);
2. per kernel (cache.KERNELS): find the newest package matching its pattern in the host's apt
   sources, ``apt-get download`` it, ``dpkg-deb -x`` it to a temporary directory, and keep:
   * ``vmlinux``: the ELF inside /boot/vmlinuz (a bzImage whose payload is zstd-compressed in
     Debian's builds; found by its magic and decompressed with zstd). QEMU boots it through its
     PVH entry point (CONFIG_PVH=y), which skips the in-guest decompression, slow under TCG;
   * the modules of ``KernelSpec.modules`` that are modules in this build, with everything they
     depend on, decompressed (Debian 6.12 ships .ko.xz; the guest's busybox insmod wants plain
     .ko) and ordered dependencies first. The .deb has no modules.dep, so the dependencies are
     read from each module's .modinfo section (``depends=``);
   * the same for the filesystems' modules (cache.FS_MODULES, less those above), kept apart
     (``fsmodules/``, kernel.json ``fs_modules``): only a run that mounts ext4 or xfs loads them.
     A kernel installed before them gets them added in place (nothing else is touched);
   * config facts (CONFIG_ZSWAP, CONFIG_MEMCG_V1, ...) from /boot/config-<release>;
3. the runner, statically linked (``cargo build --target x86_64-unknown-linux-gnu`` with
   ``+crt-static``; with an explicit --target, RUSTFLAGS do not reach build scripts, and the
   artifacts land in their own target subdirectory), copied to the cache;
4. the base initramfs per kernel (initramfs.base_image).

Command line: ``reclaimlab lab vm-install [--kernel NAME ...]`` (``make vmlab``).
"""

from __future__ import annotations

import dataclasses
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from reclaimlab.lab.runner import repo_root
from reclaimlab.vm import initramfs
from reclaimlab.vm.cache import FS_MODULES, KERNELS, InstalledKernel, KernelSpec, VmUnavailable, cache_dir, kernel_json, missing_tools

__all__ = ["install", "install_kernel", "static_runner"]

#: zstd frame magic (RFC 8878 §3.1.1): where a zstd-compressed vmlinux starts inside the bzImage.
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: xz stream magic (the xz file format, §2.1.1.1).
XZ_MAGIC = b"\xfd7zXZ\x00"
#: Config options recorded in kernel.json (reported in provenance and by `vm probe`).
CONFIG_FACTS = (
    "CONFIG_ZSWAP",
    "CONFIG_ZSWAP_DEFAULT_ON",
    "CONFIG_ZSWAP_SHRINKER_DEFAULT_ON",
    "CONFIG_ZSWAP_COMPRESSOR_DEFAULT",
    "CONFIG_ZSWAP_ZPOOL_DEFAULT",
    "CONFIG_ZSMALLOC",
    "CONFIG_ZBUD",
    "CONFIG_Z3FOLD",
    "CONFIG_ZRAM",
    "CONFIG_MEMCG",
    "CONFIG_MEMCG_V1",
    "CONFIG_LRU_GEN",
    "CONFIG_LRU_GEN_ENABLED",
    "CONFIG_PVH",
    "CONFIG_CRYPTO_LZO",
    "CONFIG_CRYPTO_LZ4",
    "CONFIG_CRYPTO_ZSTD",
    "CONFIG_CRYPTO_DEFLATE",
)


def _say(msg: str) -> None:
    print(f"vmlab: {msg}", file=sys.stderr, flush=True)


def _run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]
    if r.returncode != 0:
        raise VmUnavailable(f"`{' '.join(argv)}` failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-800:]}")
    return r  # type: ignore[no-any-return]


def _version_key(v: str) -> list[tuple[int, str]]:
    return [(int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"[.\-+~]", v)]


def newest_package(spec: KernelSpec) -> str:
    """The newest package name matching ``spec.package_regex`` in the host's apt sources."""
    out = _run(["apt-cache", "search", "--names-only", spec.package_regex]).stdout
    names = [line.split(" - ")[0].strip() for line in out.splitlines() if line.strip()]
    names = [n for n in names if re.match(spec.package_regex, n)]
    if not names:
        raise VmUnavailable(
            f"no package matches {spec.package_regex} in this host's apt sources (for {spec.name}); `apt-get update` first?"
        )
    return max(names, key=_version_key)


def _unzstd(data: bytes) -> bytes:
    # zstd reports the bzImage's tail after the frame as an error, after writing the frame.
    return subprocess.run(["zstd", "-dc", "-q"], input=data, capture_output=True, check=False).stdout


def _unxz(data: bytes) -> bytes:
    try:
        return lzma.LZMADecompressor().decompress(data)  # stops at the end of the stream
    except lzma.LZMAError:
        return b""


#: The bzImage payload formats of Debian's builds: 6.12 uses zstd, 6.1 xz.
PAYLOADS = ((ZSTD_MAGIC, _unzstd), (XZ_MAGIC, _unxz))


def extract_vmlinux(vmlinuz: Path, out: Path) -> None:
    """The ELF vmlinux from a bzImage: the first compressed payload that decompresses to an ELF."""
    data = vmlinuz.read_bytes()
    for magic, decompress in PAYLOADS:
        at = data.find(magic)
        while at >= 0:
            elf = decompress(data[at:])
            if elf[:4] == b"\x7fELF":
                out.write_bytes(elf)
                return
            at = data.find(magic, at + 1)
    raise VmUnavailable(f"{vmlinuz}: no zstd- or xz-compressed ELF payload found (not a Debian amd64 bzImage?)")


def _modinfo_depends(ko: bytes) -> list[str]:
    m = re.search(rb"(?:^|\0)depends=([^\0]*)\0", ko)
    if m is None or not m.group(1):
        return []
    return [d.decode() for d in m.group(1).split(b",") if d]


def _module_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return lzma.decompress(data) if path.name.endswith(".xz") else data


def _module_name(path: Path) -> str:
    name = path.name
    for suffix in (".xz", ".zst", ".gz"):
        name = name.removesuffix(suffix)
    return name.removesuffix(".ko").replace("-", "_")


def resolve_modules(moddir: Path, wanted: tuple[str, ...]) -> list[tuple[str, bytes]]:
    """The modules of ``wanted`` this build has as modules (built-in ones are skipped), with
    their dependencies, in load order (dependencies first): (file name, decompressed bytes)."""
    index = {_module_name(p): p for p in moddir.rglob("*.ko*")}
    order: list[tuple[str, bytes]] = []
    seen: set[str] = set()

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if name in seen:
            return
        if name in chain:
            raise VmUnavailable(f"module dependency cycle: {' -> '.join((*chain, name))}")
        path = index.get(name)
        if path is None:
            return  # built in (or not built at all: `vm probe` tells from the config)
        data = _module_bytes(path)
        for dep in _modinfo_depends(data):
            visit(dep, (*chain, name))
        seen.add(name)
        order.append((f"{name}.ko", data))

    for name in wanted:
        visit(name, ())
    return order


def _config(path: Path) -> dict[str, str]:
    facts = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key in CONFIG_FACTS:
            facts[key] = value.strip('"')
        elif line.startswith("# CONFIG_") and line.endswith(" is not set"):
            key = line[2:].split()[0]
            if key in CONFIG_FACTS:
                facts[key] = "n"
    return facts


def _fs_modules(moddir: Path, kdir: Path, base: tuple[Path, ...]) -> tuple[Path, ...]:
    """Write FS_MODULES (with the dependencies ``base`` does not load) to ``kdir/fsmodules``."""
    loaded = {m.name for m in base}
    out_dir = kdir / "fsmodules"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for name, data in resolve_modules(moddir, FS_MODULES):
        if name in loaded:
            continue
        (out_dir / name).write_bytes(data)
        out.append(out_dir / name)
    return tuple(out)


def install_kernel(spec: KernelSpec, cache: Path) -> InstalledKernel:
    package = newest_package(spec)
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    found = sorted(debs.glob(f"{package}_*.deb"))
    if not found:
        _say(f"{spec.name}: apt-get download {package}")
        _run(["apt-get", "download", package], cwd=debs)
        found = sorted(debs.glob(f"{package}_*.deb"))
        if not found:
            raise VmUnavailable(f"apt-get download {package} left no {package}_*.deb in {debs}")
    deb = found[-1]
    version = deb.name.split("_")[1]
    with tempfile.TemporaryDirectory(prefix="reclaimlab-vmlab-") as tmp:
        _run(["dpkg-deb", "-x", str(deb), tmp])
        vmlinuz = sorted(Path(tmp, "boot").glob("vmlinuz-*"))
        if not vmlinuz:
            raise VmUnavailable(f"{deb} has no /boot/vmlinuz-*")
        release = vmlinuz[0].name.removeprefix("vmlinuz-")
        kdir = cache / "kernels" / spec.name / release
        current = kernel_json(spec.name, cache)
        if current.is_file():
            try:
                old = InstalledKernel.from_dict(json.loads(current.read_text(encoding="utf-8")))
                if old.package == package and old.version == version and old.vmlinux.is_file():
                    if old.fs_modules is None:
                        # Installed before the VM lab had filesystems: add their modules only
                        # (the base image's inputs stay as they are).
                        fs = _fs_modules(Path(tmp, "lib", "modules", release), kdir, old.modules)
                        old = dataclasses.replace(old, fs_modules=fs)
                        current.write_text(json.dumps(old.to_dict(), indent=2) + "\n", encoding="utf-8")
                        _say(f"{spec.name}: added the filesystem modules {', '.join(m.stem for m in fs) or 'none'}")
                    _say(f"{spec.name}: {package} {version} already installed")
                    return old
            except (OSError, ValueError, KeyError):
                pass
        if kdir.exists():
            shutil.rmtree(kdir)
        (kdir / "modules").mkdir(parents=True)
        _say(f"{spec.name}: extracting vmlinux and modules of {release}")
        extract_vmlinux(vmlinuz[0], kdir / "vmlinux")
        modules = []
        for name, data in resolve_modules(Path(tmp, "lib", "modules", release), spec.modules):
            (kdir / "modules" / name).write_bytes(data)
            modules.append(kdir / "modules" / name)
        fs_modules = _fs_modules(Path(tmp, "lib", "modules", release), kdir, tuple(modules))
        config = _config(Path(tmp, "boot", f"config-{release}"))
    if config.get("CONFIG_ZSWAP") != "y":
        raise VmUnavailable(f"{package}: CONFIG_ZSWAP is not set in its config; the VM lab needs zswap")
    k = InstalledKernel(spec.name, package, version, release, kdir / "vmlinux", tuple(modules), config, fs_modules)
    current.write_text(json.dumps(k.to_dict(), indent=2) + "\n", encoding="utf-8")
    _say(f"{spec.name}: installed {package} {version}: modules {', '.join(m.stem for m in modules) or 'none'}")
    return k


def static_runner(cache: Path) -> Path:
    """Build the runner statically linked and copy it (stripped of debug info) to the cache."""
    root = repo_root()
    if root is None or shutil.which("cargo") is None:
        raise VmUnavailable("building the static runner needs the source checkout and cargo")
    target = "x86_64-unknown-linux-gnu"
    _say(f"building the statically linked runner (cargo build --release --target {target})")
    env = {**os.environ, "RUSTFLAGS": "-C target-feature=+crt-static"}
    r = subprocess.run(
        ["cargo", "build", "--release", "--quiet", "-p", "reclaimlab-runner", "--target", target],
        cwd=root,
        env=env,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if r.returncode != 0:
        raise VmUnavailable(f"building the static runner failed (cargo exit {r.returncode}); see the output above")
    built = root / "target" / target / "release" / "reclaimlab-runner"
    out = cache / "runner" / "reclaimlab-runner"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    if shutil.which("objcopy"):
        _run(["objcopy", "--strip-debug", str(built), str(tmp)])
    else:
        shutil.copyfile(built, tmp)
    tmp.chmod(0o755)
    tmp.replace(out)
    return out


def install(names: list[str], cache: Path | None = None) -> None:
    cache = cache or cache_dir()
    missing = missing_tools()
    if missing:
        raise VmUnavailable(f"missing host tools: {', '.join(missing)} (`make vmlab` installs them with apt-get)")
    cache.mkdir(parents=True, exist_ok=True)
    runner = static_runner(cache)
    for name in names:
        k = install_kernel(KERNELS[name], cache)
        image = initramfs.base_image(k, runner, cache)
        _say(f"{name}: base initramfs {image} ({image.stat().st_size // 1024} KiB)")
    _say(f"installed in {cache}")
