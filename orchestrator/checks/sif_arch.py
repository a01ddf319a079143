"""The architecture a SIF image was built for, read from its header and descriptors (never by
running it): the SIF format (Sylabs' sif, pkg/sif) keeps a 3-byte arch code in its global header
and in the descriptor of each file-system partition; the primary system partition's is the
image's (`apptainer sif list` shows it). Read with the struct layout of that format: a 32-byte
launch line, "SIF_MAGIC", version, arch, a 16-byte id, then eight little-endian int64 (times,
descriptor counts, the descriptors' offset and size, the data's offset and size); each
descriptor: data type (int32), used (1 byte), id, group, link (uint32), offset, size, padded
size, two times, uid, gid (int64), a 128-byte name and 384 bytes of type-specific data, which
for a partition starts with its file-system type, its partition type (int32) and its arch.
"""

from __future__ import annotations

import struct
from pathlib import Path

_MAGIC = b"SIF_MAGIC\x00"
_HEADER = struct.Struct("<32s10s3s3s16s8q")
_DESCRIPTOR = struct.Struct("<i?IIIqqqqqqq128s384s")
_PARTITION = struct.Struct("<ii3s")
_DATA_PARTITION = 0x4004
_PRIMARY_SYSTEM = 2
# SIF arch codes, in the names `uname -m` and cluster files use
ARCHES = {
    b"01": "i386",
    b"02": "x86_64",
    b"03": "arm",
    b"04": "aarch64",
    b"05": "ppc64",
    b"06": "ppc64le",
    b"07": "mips",
    b"08": "mipsle",
    b"09": "mips64",
    b"10": "mips64le",
    b"11": "s390x",
}


def sif_arch(path: Path) -> str | None:
    """The image's architecture (`uname -m` spelling), or None: not a SIF file, or one that
    does not say (code 00)."""
    try:
        with path.open("rb") as f:
            head = f.read(_HEADER.size)
            if len(head) < _HEADER.size:
                return None
            _, magic, _, arch, _, *nums = _HEADER.unpack(head)
            if magic != _MAGIC:
                return None
            total, offset = nums[3], nums[4]
            found = None
            if 0 < total <= 4096 and offset > 0:
                f.seek(offset)
                for _ in range(total):
                    raw = f.read(_DESCRIPTOR.size)
                    if len(raw) < _DESCRIPTOR.size:
                        break
                    kind, used, *_rest, extra = _DESCRIPTOR.unpack(raw)
                    if not used or kind != _DATA_PARTITION:
                        continue
                    _, part_type, part_arch = _PARTITION.unpack_from(extra)
                    if part_type == _PRIMARY_SYSTEM or found is None:
                        found = part_arch
            return ARCHES.get((found or arch).rstrip(b"\x00"))
    except OSError:
        return None
