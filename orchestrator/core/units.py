"""SLURM's time and memory notations and sizes in bytes, parsed once and printed back in one
canonical form."""

from __future__ import annotations

import re

# Matched whole (fullmatch): `$` alone would accept a trailing newline.
_TIME = re.compile(
    r"(?:(?P<d>\d+)-(?P<dh>\d{1,2})(?::(?P<dm>\d{1,2})(?::(?P<ds>\d{1,2}))?)?"
    r"|(?P<h>\d+):(?P<m>\d{1,2}):(?P<s>\d{1,2})"
    r"|(?P<m2>\d+):(?P<s2>\d{1,2})"
    r"|(?P<m3>\d+))"
)
_MEM = re.compile(r"(?P<n>\d+(?:\.\d+)?)\s*(?P<u>[KMGT]?)(?:i?B)?", re.IGNORECASE)
_MEM_FACTOR_MIB = {"K": 1 / 1024, "M": 1.0, "": 1.0, "G": 1024.0, "T": 1024.0 * 1024.0}


def parse_time(text: str | int) -> int:
    """SLURM time (`MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`) → seconds."""
    raw = str(text).strip()
    m = _TIME.fullmatch(raw)
    if not m:
        raise ValueError(
            f"{raw!r} is not a SLURM time; write HH:MM:SS (e.g. 00:30:00) or D-HH:MM:SS"
        )
    g = {k: int(v) for k, v in m.groupdict().items() if v is not None}
    if "d" in g:
        return g["d"] * 86400 + g["dh"] * 3600 + g.get("dm", 0) * 60 + g.get("ds", 0)
    if "h" in g:
        return g["h"] * 3600 + g["m"] * 60 + g["s"]
    if "m2" in g:
        return g["m2"] * 60 + g["s2"]
    return g["m3"] * 60


def format_time(seconds: int) -> str:
    """Seconds → `HH:MM:SS` (or `D-HH:MM:SS` past a day), what sbatch --time accepts."""
    d, rest = divmod(int(seconds), 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


def parse_mem_mib(text: str | int) -> int:
    """Memory (`16G`, `512M`, `480GB`, a bare number = MiB as in sbatch) → MiB."""
    raw = str(text).strip()
    m = _MEM.fullmatch(raw)
    if not m:
        raise ValueError(f"{raw!r} is not a memory size; write e.g. 16G or 512M")
    mib = float(m.group("n")) * _MEM_FACTOR_MIB[m.group("u").upper()]
    return max(1, round(mib))


def format_mem(mib: int) -> str:
    """MiB → the shortest exact sbatch form (`16G`, `1500M`)."""
    return f"{mib // 1024}G" if mib % 1024 == 0 else f"{mib}M"


_SIZE_FACTOR = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str | int) -> int:
    """A size in bytes, at least one: a number, then K, M, G or T (binary units) in any case,
    with or without B / iB (`10G`, `512MiB`, `1.5g`, `8 GB`, `4096`, `4096B`; a bare number is
    bytes). The one size notation: artifact limits and the trace ceiling
    (`tracetext.parse_size`, which names the flag or variable) read it here."""
    raw = str(text).strip()
    m = _MEM.fullmatch(raw)
    size = int(float(m.group("n")) * _SIZE_FACTOR[m.group("u").upper()]) if m else 0
    if size < 1:
        raise ValueError(f"{raw!r} is not a size; write e.g. 10G or 512M")
    return size


def format_size(n: int) -> str:
    """Bytes → the shortest exact form (`10G`, `1536M`, `4097`)."""
    for unit in ("T", "G", "M", "K"):
        if n % _SIZE_FACTOR[unit] == 0:
            return f"{n // _SIZE_FACTOR[unit]}{unit}"
    return str(n)
