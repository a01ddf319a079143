"""What an nsys GPU metric means, from the name the export gives it
(`TARGET_INFO_GPU_METRICS.metricName`, "SMs Active [Throughput %]"), never from its id or
position (`metricId` is "not assumed to be stable", says the schema).

The names differ between nsys versions and GPUs. The spellings below are those of the metric
sets nsys 2022.4, 2023.4 and 2024.2 ship (`target-linux-x64/GpuMetrics*`: tu10x ... gh100) and
of the recordings in tests/data/gpu_metrics (2024.2.3 on H200: "SMs Active [Throughput %]");
2022.4's sets spell "SM Active" and "DRAM Read Throughput". A GH200's set reports its
NVLink-C2C link where an H100/H200 reports PCIe: no installed version ships such a set, so
its names are matched by meaning (C2C, and receive / transmit or read / write), unverified on a
recording. A metric no rule knows is kept under its own name (`key` None) and read like any
other: a new set never loses data, it only lacks a label.

A name's unit is its bracket ("[Throughput %]", "[MHz]", "[GB/s]"); values are the integers
nsys sampled, times the multiplier the export's `GpuMetricsConfig` gives the metric (2024.2:
1e-6 for the clocks, sampled in Hz though named [MHz]; `multipliers`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Known:
    """A metric whose meaning gh-run knows: its key (the catalogue's, without the unit), a
    label, and the pattern its base name (the text before the bracket) matches."""

    key: str
    label: str
    pattern: re.Pattern[str]
    # several metrics of the set add up to this one (NVLink's request and response user data)
    summed: bool = False


def _k(key: str, label: str, pattern: str, summed: bool = False) -> Known:
    return Known(key, label, re.compile(pattern, re.IGNORECASE), summed)


KNOWN: list[Known] = [
    _k("gpc_clock", "GPC clock", r"^GPC Clock Frequency$"),
    _k("sys_clock", "SYS clock", r"^SYS Clock Frequency$"),
    _k("gr_active", "GR active", r"^GR Active$"),
    _k("sm_active", "SMs active", r"^SMs? Active$"),
    _k("sm_issue", "SM issue", r"^SM Issue( Active)?$"),
    _k("tensor_active", "tensor cores active", r"^Tensor (Pipe )?Active$"),
    _k("dram_read", "DRAM read", r"^DRAM Read (Bandwidth|Throughput)$"),
    _k("dram_write", "DRAM write", r"^DRAM Write (Bandwidth|Throughput)$"),
    _k("pcie_rx", "PCIe receive", r"^PCIe RX (Throughput|Bandwidth)$"),
    _k("pcie_tx", "PCIe transmit", r"^PCIe TX (Throughput|Bandwidth)$"),
    # GH200's CPU-GPU link (unverified spellings: matched by meaning)
    _k("c2c_rx", "NVLink-C2C receive", r"\bC2C\b.*\b(RX|Read|Receive[ds]?)\b"),
    _k("c2c_tx", "NVLink-C2C transmit", r"\bC2C\b.*\b(TX|Write|Transmit(ted)?)\b"),
    # GPU-GPU NVLink: the user data of requests and responses (protocol overhead left out)
    _k("nvlink_rx", "NVLink receive", r"^NVLink RX (Requests|Responses) User Data$", True),
    _k("nvlink_tx", "NVLink transmit", r"^NVLink TX (Requests|Responses) User Data$", True),
]

_BRACKET = re.compile(r"^(?P<base>.*?)\s*\[(?P<unit>[^\]]*)\]\s*$")


def split(name: str) -> tuple[str, str]:
    """ "SMs Active [Throughput %]" -> ("SMs Active", "Throughput %"); no bracket: (name, "")."""
    m = _BRACKET.match(name)
    return (m["base"], m["unit"]) if m else (name.strip(), "")


def unit_of(sub: str) -> str:
    """The unit a value reads in, from a name's bracket: "%", "MHz", "GB/s", or the bracket's
    own text (warps per cycle, ...)."""
    s = sub.strip()
    if s.endswith("%"):
        return "%"
    if s.lower() in ("mhz", "hz"):
        return "MHz"
    if re.fullmatch(r"(?i)g(i)?b/s|gbytes/s", s):
        return "GB/s"
    return s


def known(name: str) -> Known | None:
    """What gh-run knows of a metric name. Of several units of one metric (a warp count in
    "[Avg]" and in "[Throughput %]") only the percentage or the clock is known; the others stay
    generic."""
    base, sub = split(name)
    unit = unit_of(sub)
    for k in KNOWN:
        if k.pattern.search(base):
            want = "MHz" if k.key.endswith("_clock") else None
            if (want and unit == want) or (not want and unit in ("%", "GB/s", "")):
                return k
    return None


def key_of(name: str) -> str | None:
    """The catalogue key of a metric name ("tensor_active_pct", "pcie_rx_gb_s",
    "gpc_clock_mhz"), None where gh-run does not know it."""
    k = known(name)
    if k is None:
        return None
    unit = unit_of(split(name)[1])
    suffix = {"%": "pct", "MHz": "mhz", "GB/s": "gb_s"}.get(unit, "pct")
    return f"{k.key}_{suffix}"


def multipliers(config: str | None) -> dict[str, float]:
    """Each metric's multiplier from the export's `GpuMetricsConfig` (`read_multipliers`)."""
    return read_multipliers(config)[0]


def read_multipliers(config: str | None) -> tuple[dict[str, float], str | None]:
    """Each metric's multiplier from the export's `GpuMetricsConfig` (YAML: metric sets, each
    metric's `subMetrics` with `name` and an optional `multiplier`), by the name the export gives
    the metric ("GPC Clock Frequency [MHz]"), and a note when the configuration could not be
    read. Sets that disagree on a name: the first set's word stands (the sets of one chip family
    agree; what differs is the chips). An older config without sub-metrics: its clocks
    (`.per_second` ids) in Hz, read as MHz. The YAML is read by the bounded loader
    (`side_inputs.load_yaml`: its size and the values it builds, aliases counted as used) and
    a multiplier that is not a finite number is left out."""
    if not config:
        return {}, None
    import math

    from orchestrator.analysis.readers.side_inputs import SideInputError, load_yaml

    try:
        doc = load_yaml(config)
    except SideInputError as exc:
        return {}, f"the export's GpuMetricsConfig is not read ({exc}): no multiplier applied"
    out: dict[str, float] = {}
    dropped = 0
    sets = doc.get("metricSets") if isinstance(doc, dict) else doc
    for s in sets if isinstance(sets, list) else []:
        for m in (s.get("metrics") or []) if isinstance(s, dict) else []:
            if not isinstance(m, dict) or not isinstance(m.get("name"), str):
                continue
            subs = m.get("subMetrics")
            if isinstance(subs, list):
                for sub in subs:
                    if isinstance(sub, dict) and "multiplier" in sub:
                        with_unit = f"{m['name']} [{sub.get('name', '')}]"
                        value = sub["multiplier"]
                        ok = isinstance(value, int | float) and not isinstance(value, bool)
                        if not ok or not math.isfinite(float(value)):
                            dropped += 1
                            continue
                        out.setdefault(with_unit, float(value))
            elif str(m.get("id", "")).endswith(".per_second"):
                out.setdefault(str(m["name"]), 1e-6)
    note = (
        f"the export's GpuMetricsConfig gives {dropped} multiplier(s) that are not numbers: left"
        " out"
        if dropped
        else None
    )
    return out, note
