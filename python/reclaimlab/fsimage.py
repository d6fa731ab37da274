"""The size of the image the lab makes a scenario's filesystem on: one rule for the lab, which
allocates it (lab/filesystems.py), and the lowering, which gives it to the simulator (an ext4's
mke2fs layout and journal size follow from it: crates/reclaimlab-core/src/mm/journal.rs)."""

from __future__ import annotations

from typing import Any

__all__ = ["METADATA_FRACTION", "MIB", "MIN_IMAGE_BYTES", "PAGE", "file_bytes", "image_bytes"]

PAGE = 4096
MIB = 1 << 20
#: The smallest image each mkfs accepts without complaint (mkfs.xfs refuses filesystems under
#: 300 MiB since xfsprogs 5.19; mkfs.btrfs wants 114 MiB for its default profile).
MIN_IMAGE_BYTES = {"ext4": 64 * MIB, "xfs": 320 * MIB, "btrfs": 128 * MIB, "tmpfs": 4 * MIB}
#: Room for metadata and the journal beyond the files themselves.
METADATA_FRACTION = 0.25


def file_bytes(config: dict[str, Any], index: int) -> int:
    """Bytes of every file of every process on filesystem ``index``."""
    return sum(int(r["pages"]) * PAGE for p in config["processes"] for r in p["regions"] if r.get("file") == index)


def image_bytes(config: dict[str, Any], index: int) -> int:
    """The image (or tmpfs) size for filesystem ``index``: its files plus a quarter for
    metadata and 64 MiB, at least the type's minimum, rounded up to MiB."""
    fstype = config["machine"]["filesystems"][index]["fstype"]
    want = int(file_bytes(config, index) * (1 + METADATA_FRACTION)) + 64 * MIB
    want = max(want, MIN_IMAGE_BYTES.get(fstype, 64 * MIB))
    return -(-want // MIB) * MIB
