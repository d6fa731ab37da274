"""``make vmlab-selftests``: the kernel's own cgroup selftests, built for the VM lab's guests.

The kernel's ``tools/testing/selftests/cgroup/test_zswap.c`` and ``test_memcontrol.c`` are GPL
code: they are run, never copied into this repository. For each installed VM kernel
(cache.KERNELS) this module

1. finds Debian's kernel source package of the **same version** as the installed kernel image
   (``linux-source-6.12`` 6.12.117-1~deb12u1 for ``linux-image-6.12.117+deb12-amd64-unsigned``
   of that version; ``apt-cache madison`` must list it) and fetches it with ``apt-get download``
   into the VM cache's ``debs/``;
2. extracts from its ``/usr/src/linux-source-X.Y.tar.xz`` only what the two tests build from:
   ``tools/testing/selftests/cgroup/``, the kselftest headers and ``lib.mk`` beside it, and the
   ``clone3/`` and ``pidfd/`` headers that cgroup_util.c includes, into
   ``<cache>/selftests/<kernel>/src/`` (outside the repository);
3. builds ``test_zswap`` and ``test_memcontrol`` there with the packaged source's own Makefile
   (``make -C .../cgroup OUTPUT=... USERLDFLAGS=-static ...``; the host's gcc and glibc),
   statically linked so that the guest's busybox initramfs can run them, with one object of
   ours linked in (guest/linebuf.c: stdout line-buffered, see there);
4. copies from the installed kernel image's package (the .deb ``make vmlab`` fetched) the
   modules of ext4 (Debian builds it as a module) and its dependencies, decompressed, to
   ``<cache>/selftests/<kernel>/modules/``: the guest gives the tests an ext4 scratch
   directory, so that their page cache (test_memcontrol's ``O_TMPFILE`` files in the working
   directory) is file-backed as on a real machine, not shmem as it would be on the initramfs;
5. writes ``<cache>/selftests/<kernel>/selftests.json``: the source package and version, each
   binary's SHA-256 and its test names in order (the ``T(...)`` entries of its ``tests[]``
   array, read from the extracted source), and the compiler.

A kernel whose source has no test_zswap.c (6.1: it came with 6.8) gets test_memcontrol only.
Re-running rebuilds only when the kernel's version or our linked object changed.

Command line: ``reclaimlab lab vm-selftests [--kernel NAME ...]`` (``make vmlab-selftests``).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from reclaimlab.vm.cache import InstalledKernel, VmUnavailable, cache_dir, installed_kernel

__all__ = [
    "BINARIES",
    "InstalledSelftests",
    "SelftestBinary",
    "install",
    "install_selftests",
    "installed_selftests",
    "source_package",
    "test_names",
]

#: The selftests the VM lab builds, in the order it runs them.
BINARIES = ("test_zswap", "test_memcontrol")
#: What the build needs from the source tree, relative to its top directory (tar wildcards).
SOURCE_MEMBERS = (
    "tools/testing/selftests/lib.mk",
    "tools/testing/selftests/kselftest*.h",
    "tools/testing/selftests/cgroup/*",
    "tools/testing/selftests/clone3/*",
    "tools/testing/selftests/pidfd/*",
)
SELFTESTS_DIR = "tools/testing/selftests/cgroup"
#: Modules the selftest guest loads beyond the VM lab's (when they are modules in the build):
#: ext4 for the scratch filesystem, crc32c for its checksums.
EXTRA_MODULES = ("crc32c_generic", "ext4")
#: Bump when the build changes in a way the stamp does not otherwise see.
BUILD_VERSION = "1"


def _say(msg: str) -> None:
    print(f"vmlab-selftests: {msg}", file=sys.stderr, flush=True)


def _run(argv: list[str], **kw: Any) -> str:
    r = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL, **kw)
    if r.returncode != 0:
        raise VmUnavailable(f"`{' '.join(argv)}` failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-1500:]}")
    return str(r.stdout)


def source_package(k: InstalledKernel) -> tuple[str, str]:
    """(package, version) of Debian's kernel source matching the installed kernel image:
    ``linux-source-<major>.<minor>`` at the image package's own version."""
    m = re.match(r"(?:\d+:)?(\d+)\.(\d+)\.", k.version)
    if m is None:
        raise VmUnavailable(f"cannot tell the kernel series from {k.package} version {k.version!r}")
    return f"linux-source-{m.group(1)}.{m.group(2)}", k.version


def _available_versions(package: str) -> list[str]:
    out = _run(["apt-cache", "madison", package])
    return [parts[1].strip() for line in out.splitlines() if len(parts := line.split("|")) >= 3]


def _deb_version(path: Path) -> str:
    # apt-get download writes an epoch's ":" as "%3a"
    return path.name.split("_")[1].replace("%3a", ":")


def fetch_source(k: InstalledKernel, cache: Path) -> Path:
    """The source package's .deb in ``<cache>/debs``, downloaded unless it is there."""
    package, version = source_package(k)
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    found = [p for p in sorted(debs.glob(f"{package}_*_all.deb")) if _deb_version(p) == version]
    if found:
        return found[0]
    versions = _available_versions(package)
    if version not in versions:
        raise VmUnavailable(
            f"{package} {version} (the version of the installed {k.name} kernel, {k.package}) is not in this host's apt "
            f"sources (they have: {', '.join(versions) or 'none'}); run `apt-get update`, or `make vmlab` to install the "
            "newest kernel, then this again"
        )
    _say(f"{k.name}: apt-get download {package}={version}")
    _run(["apt-get", "download", f"{package}={version}"], cwd=debs)
    found = [p for p in sorted(debs.glob(f"{package}_*_all.deb")) if _deb_version(p) == version]
    if not found:
        raise VmUnavailable(f"apt-get download {package}={version} left no {package}_*_all.deb in {debs}")
    return found[0]


def extract_source(deb: Path, package: str, dest: Path) -> Path:
    """Extract SOURCE_MEMBERS from the package's source tarball into ``dest``; return the tree's
    top directory. The tarball is streamed (dpkg-deb | tar | tar): nothing else is written."""
    tarball = f"./usr/src/{package}.tar.xz"
    top = package  # the tarball's top directory: linux-source-6.12/
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as err:
        deb_p = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
        outer = subprocess.Popen(["tar", "-xO", tarball], stdin=deb_p.stdout, stdout=subprocess.PIPE, stderr=err)
        assert deb_p.stdout is not None and outer.stdout is not None
        deb_p.stdout.close()  # the next process owns it: dpkg-deb sees a broken pipe if tar exits early
        inner = subprocess.run(
            ["tar", "-xJ", "-C", str(dest), "--wildcards", *(f"{top}/{m}" for m in SOURCE_MEMBERS)],
            stdin=outer.stdout,
            stdout=subprocess.DEVNULL,
            stderr=err,
            check=False,
        )
        outer.stdout.close()
        codes = (deb_p.wait(), outer.wait(), inner.returncode)
        if any(codes):
            err.seek(0)
            raise VmUnavailable(
                f"extracting {SELFTESTS_DIR} from {deb} failed (exit {codes}): {err.read().decode(errors='replace')[-1500:]}"
            )
    tree = dest / top
    if not (tree / SELFTESTS_DIR / "Makefile").is_file():
        raise VmUnavailable(f"{deb}: {tarball} has no {SELFTESTS_DIR}/Makefile")
    return tree


def test_names(source: Path) -> list[str]:
    """The test functions a selftest runs, in order: the ``T(name)`` entries of its ``tests[]``."""
    text = source.read_text(encoding="utf-8", errors="replace")
    m = re.search(r"\btests\[\]\s*=\s*\{(.*?)\};", text, re.S)
    if m is None:
        raise VmUnavailable(f"{source}: no tests[] array (the selftest's layout changed?)")
    return re.findall(r"\bT\((\w+)\)", m.group(1))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _linebuf_source() -> bytes:
    return resources.files("reclaimlab.vm").joinpath("guest/linebuf.c").read_bytes()


@dataclass(frozen=True)
class SelftestBinary:
    name: str
    path: Path
    sha256: str
    tests: tuple[str, ...]


@dataclass(frozen=True)
class InstalledSelftests:
    kernel: str
    source_package: str
    source_version: str
    compiler: str
    binaries: tuple[SelftestBinary, ...]
    #: EXTRA_MODULES (and what they depend on) in load order, decompressed.
    modules: tuple[Path, ...]
    stamp: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "source_package": self.source_package,
            "source_version": self.source_version,
            "compiler": self.compiler,
            "stamp": self.stamp,
            "binaries": [{"name": b.name, "path": str(b.path), "sha256": b.sha256, "tests": list(b.tests)} for b in self.binaries],
            "modules": [str(m) for m in self.modules],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InstalledSelftests:
        return cls(
            kernel=str(d["kernel"]),
            source_package=str(d["source_package"]),
            source_version=str(d["source_version"]),
            compiler=str(d["compiler"]),
            stamp=str(d["stamp"]),
            binaries=tuple(
                SelftestBinary(str(b["name"]), Path(b["path"]), str(b["sha256"]), tuple(str(t) for t in b["tests"])) for b in d["binaries"]
            ),
            modules=tuple(Path(m) for m in d["modules"]),
        )


def _stamp(k: InstalledKernel) -> str:
    h = hashlib.sha256(f"build {BUILD_VERSION}\n{source_package(k)}\n{k.package} {k.version}\n{EXTRA_MODULES}\n".encode())
    h.update(_linebuf_source())
    return h.hexdigest()[:32]


def selftests_dir(name: str, root: Path | None = None) -> Path:
    return (root or cache_dir()) / "selftests" / name


def installed_selftests(name: str, root: Path | None = None) -> InstalledSelftests:
    """The selftests built for the installed kernel ``name``; VmUnavailable saying how to build
    them when they are missing or were built for another version of the kernel."""
    k = installed_kernel(name, root)
    path = selftests_dir(name, root) / "selftests.json"
    try:
        s = InstalledSelftests.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise VmUnavailable(f"the cgroup selftests for {name} are not built (no {path}): run `make vmlab-selftests`") from None
    except (OSError, ValueError, KeyError) as e:
        raise VmUnavailable(f"{path} is unreadable ({e}): run `make vmlab-selftests` again") from None
    if s.stamp != _stamp(k):
        raise VmUnavailable(
            f"the cgroup selftests for {name} were built from {s.source_package} {s.source_version}, the installed kernel is "
            f"{k.version} (or the build changed): run `make vmlab-selftests` again"
        )
    missing = [p for p in (*(b.path for b in s.binaries), *s.modules) if not p.is_file()]
    if missing:
        raise VmUnavailable(f"the cgroup selftests for {name} are incomplete ({missing[0]} is missing): run `make vmlab-selftests`")
    return s


def install_selftests(k: InstalledKernel, cache: Path) -> InstalledSelftests:
    """Fetch, extract and build the selftests for ``k`` (nothing when they are up to date)."""
    with_stamp = _stamp(k)
    try:
        current = installed_selftests(k.name, cache)
        if current.stamp == with_stamp:
            _say(f"{k.name}: selftests from {current.source_package} {current.source_version} already built")
            return current
    except VmUnavailable:
        pass
    for tool, pkg in (("gcc", "gcc"), ("make", "make"), ("tar", "tar"), ("xz", "xz-utils"), ("apt-get", "apt")):
        if shutil.which(tool) is None:
            raise VmUnavailable(f"building the selftests needs {tool} ({pkg})")
    package, version = source_package(k)
    deb = fetch_source(k, cache)
    base = selftests_dir(k.name, cache)
    if base.exists():
        shutil.rmtree(base)  # another version's tree and binaries
    _say(f"{k.name}: extracting {SELFTESTS_DIR} from {deb.name}")
    tree = extract_source(deb, package, base / "src")
    src = tree / SELFTESTS_DIR
    out = base / "bin"
    out.mkdir(parents=True)
    linebuf_c = out / "linebuf.c"
    linebuf_c.write_bytes(_linebuf_source())
    _run(["gcc", "-O2", "-Wall", "-c", str(linebuf_c), "-o", str(out / "linebuf.o")])
    names = [b for b in BINARIES if (src / f"{b}.c").is_file()]
    if not names:
        raise VmUnavailable(f"{deb.name}: none of {', '.join(BINARIES)} is in {SELFTESTS_DIR}")
    _say(f"{k.name}: building {', '.join(names)} (make -C {src} OUTPUT={out}, statically linked)")
    # The packaged Makefile (lib.mk's rule: $(CC) $(CFLAGS) $(LDFLAGS) test.c cgroup_util.c -o ...);
    # USERLDFLAGS is lib.mk's own hook for extra link flags.
    _run(
        ["make", "-C", str(src), f"OUTPUT={out}", f"USERLDFLAGS=-static {out / 'linebuf.o'}", *(str(out / n) for n in names)],
    )
    compiler = _run(["gcc", "--version"]).splitlines()[0]
    binaries = tuple(SelftestBinary(n, out / n, _sha256(out / n), tuple(test_names(src / f"{n}.c"))) for n in names)
    modules = extra_modules(k, cache, base / "modules")
    s = InstalledSelftests(k.name, package, version, compiler, binaries, modules, with_stamp)
    (base / "selftests.json").write_text(json.dumps(s.to_dict(), indent=2) + "\n", encoding="utf-8")
    for b in binaries:
        _say(f"{k.name}: {b.name}: {len(b.tests)} tests ({b.path.stat().st_size // 1024} KiB)")
    return s


def extra_modules(k: InstalledKernel, cache: Path, dest: Path) -> tuple[Path, ...]:
    """EXTRA_MODULES from the kernel image's .deb (with their dependencies, minus the modules
    the VM lab's guests load already), decompressed into ``dest``, in load order."""
    from reclaimlab.vm.install import resolve_modules  # install imports much more; only needed here

    found = [p for p in sorted((cache / "debs").glob(f"{k.package}_*.deb")) if _deb_version(p) == k.version]
    if not found:
        raise VmUnavailable(
            f"the package of the installed {k.name} kernel ({k.package} {k.version}) is not in {cache / 'debs'}: run `make vmlab`"
        )
    have = {m.name for m in k.modules}
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    with tempfile.TemporaryDirectory(prefix="reclaimlab-vmlab-") as tmp:
        _run(["dpkg-deb", "-x", str(found[0]), tmp])
        for name, data in resolve_modules(Path(tmp, "lib", "modules", k.release), EXTRA_MODULES):
            if name in have:
                continue
            (dest / name).write_bytes(data)
            out.append(dest / name)
    return tuple(out)


def install(names: list[str], cache: Path | None = None) -> None:
    cache = cache or cache_dir()
    for name in names:
        install_selftests(installed_kernel(name, cache), cache)
    _say(f"built in {cache / 'selftests'}")
