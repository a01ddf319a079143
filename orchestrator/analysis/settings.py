"""What the run was set to, for advice that respects it: data-loader workers, precision, PEFT
scheme, activation offloading and checkpointing, Unified Memory. Each setting keeps where it was
read (`Setting.source`), so a piece of advice can say what it checked.

Sources, the first that says wins (what ran over what was launched over what was asked):
1. the workload's own `metrics.json` beside the trace (`config`: the reference workload,
   workloads/sft.py, writes every flag it ran with);
2. the command nsys launched (`META_DATA_CAPTURE`, `captures.Capture.command`): the reference
   workload's flags (`--num-workers 4`, `--precision bf16`, `--peft lora`,
   `--offload-activations`, `--activation-checkpointing`, `--unified-memory`) and Hydra
   overrides (`model.data.num_workers=4`, `model.peft.peft_scheme=lora`,
   `trainer.precision=bf16-mixed`, `+model.cpu_offloading=True`);
3. the run's `spec.lock.yaml` (`workload`: NeMo's typed knobs `data_workers`, `peft_scheme`,
   `precision`, `cpu_offloading_layers`, `unified_memory`, its `overrides`, or a command's
   `args` with the flags above).
A source that does not mention a setting leaves it to the next; none: None (unknown).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from orchestrator.core.base import Strict


class Setting(Strict):
    """One setting's value and where it was read (`metrics.json: config.num_workers = 0`)."""

    value: str | int | bool
    source: str


class RunSettings(Strict):
    """The settings the advice checks; None = no source said."""

    data_workers: Setting | None = None
    precision: Setting | None = None
    peft: Setting | None = None
    offload_activations: Setting | None = None
    activation_checkpointing: Setting | None = None
    unified_memory: Setting | None = None

    def items(self) -> list[tuple[str, str, str]]:
        """(name, value, source) of every known setting, for reports."""
        out = []
        for name in type(self).model_fields:
            s: Setting | None = getattr(self, name)
            if s is not None:
                out.append((NAMES.get(name, name), _word(s.value), s.source))
        return out

    def sources(self) -> list[str]:
        """Where the settings were read, once each (`metrics.json`, `the profiled command`)."""
        return list(dict.fromkeys(s.split(":")[0] for _, _, s in self.items()))


NAMES = {
    "data_workers": "data-loader workers",
    "precision": "precision",
    "peft": "PEFT",
    "offload_activations": "activation offloading",
    "activation_checkpointing": "activation checkpointing",
    "unified_memory": "Unified Memory",
}


def _word(v: str | int | bool) -> str:
    return ("on" if v else "off") if isinstance(v, bool) else str(v)


LOW_PRECISION = ("bf16", "fp16", "16", "half", "mixed", "fp8")


def is_low_precision(value: str | int | bool) -> bool:
    """bf16 / fp16 / mixed / fp8 (tensor cores), not fp32 or 32."""
    text = str(value).lower()
    return any(p in text for p in LOW_PRECISION) and text not in ("32", "fp32", "32-true")


def uses_lora(value: str | int | bool) -> bool:
    """A PEFT scheme that trains adapters (lora, qlora, …), not `none`/`null`/full SFT."""
    text = str(value).lower()
    return text not in ("", "none", "null", "false", "full")


# the reference workload's flags (workloads/sft.py) and their settings
_VALUE_FLAGS = {
    "--num-workers": "data_workers",
    "--num_workers": "data_workers",
    "--precision": "precision",
    "--peft": "peft",
}
_SWITCHES = {
    "--offload-activations": "offload_activations",
    "--activation-checkpointing": "activation_checkpointing",
    "--unified-memory": "unified_memory",
}
# Hydra override keys (without +, ++ or ~) and the setting each one is
_HYDRA = (
    (re.compile(r"(^|\.)num_workers$"), "data_workers"),
    (re.compile(r"(^|\.)peft_scheme$"), "peft"),
    (re.compile(r"^trainer\.precision$"), "precision"),
    (re.compile(r"(^|\.)cpu_offloading$"), "offload_activations"),
)
# metrics.json `config` keys of the reference workload
_CONFIG = {
    "num_workers": "data_workers",
    "precision": "precision",
    "peft": "peft",
    "offload_activations": "offload_activations",
    "activation_checkpointing": "activation_checkpointing",
    "unified_memory": "unified_memory",
}


def _value(setting: str, raw: Any) -> str | int | bool | None:
    """A raw value in the setting's type (an int for workers, a bool for switches)."""
    if setting == "data_workers":
        if isinstance(raw, bool):
            return None
        if isinstance(raw, int):
            return raw
        return int(raw) if isinstance(raw, str) and raw.strip().isdigit() else None
    if setting in ("offload_activations", "activation_checkpointing", "unified_memory"):
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        return (
            True
            if text in ("true", "1", "yes")
            else False
            if text in ("false", "0", "no")
            else None
        )
    if raw is None:
        return "none"
    return str(raw) if isinstance(raw, str | int | float) else None


def from_args(args: Iterable[str], where: str) -> dict[str, Setting]:
    """Settings in a command line: the reference workload's flags and Hydra overrides."""
    out: dict[str, Setting] = {}
    words = list(args)
    for i, w in enumerate(words):
        flag, eq, inline = w.partition("=")
        if flag in _VALUE_FLAGS:
            raw = inline if eq else (words[i + 1] if i + 1 < len(words) else None)
            v = _value(_VALUE_FLAGS[flag], raw)
            if v is not None:
                out.setdefault(
                    _VALUE_FLAGS[flag], Setting(value=v, source=f"{where}: {flag} {raw}")
                )
        elif w in _SWITCHES:
            out.setdefault(_SWITCHES[w], Setting(value=True, source=f"{where}: {w}"))
        elif eq and not flag.startswith("-"):
            key = flag.lstrip("+~")
            for pattern, setting in _HYDRA:
                if pattern.search(key) and (v := _value(setting, inline)) is not None:
                    out.setdefault(setting, Setting(value=v, source=f"{where}: {w}"))
    return out


def from_config(f: Path, data: dict[str, Any]) -> dict[str, Setting]:
    """Settings in the workload's metrics.json `config`."""
    cfg = data.get("config")
    out: dict[str, Setting] = {}
    if not isinstance(cfg, dict):
        return out
    for key, setting in _CONFIG.items():
        if key in cfg and (v := _value(setting, cfg[key])) is not None:
            out[setting] = Setting(value=v, source=f"{f.name}: config.{key} = {_word(v)}")
    return out


def from_spec(f: Path) -> dict[str, Setting]:
    """Settings in a run's spec.lock.yaml `workload` (unreadable or silent: none)."""
    from orchestrator.analysis.readers.side_inputs import SideInputError, load_yaml_file

    try:
        data = load_yaml_file(f)
    except SideInputError:
        return {}  # the offloading fold names a broken spec
    wl = data.get("workload") if isinstance(data, dict) else None
    if not isinstance(wl, dict):
        return {}
    out: dict[str, Setting] = {}
    knobs = {
        "data_workers": "data_workers",
        "peft_scheme": "peft",
        "precision": "precision",
        "unified_memory": "unified_memory",
    }
    for key, setting in knobs.items():
        if wl.get(key) is not None and (v := _value(setting, wl[key])) is not None:
            out[setting] = Setting(value=v, source=f"{f.name}: workload.{key} = {_word(v)}")
    layers = wl.get("cpu_offloading_layers")
    if isinstance(layers, int) and not isinstance(layers, bool):
        out["offload_activations"] = Setting(
            value=layers > 0, source=f"{f.name}: workload.cpu_offloading_layers = {layers}"
        )
    overrides = wl.get("overrides")
    if isinstance(overrides, dict):
        words = [f"{k}={'null' if v is None else v}" for k, v in overrides.items()]
        for k, s in from_args(words, f"{f.name}: workload.overrides").items():
            out.setdefault(k, s)
    args = wl.get("args")
    if isinstance(args, list):
        for k, s in from_args(map(str, args), f"{f.name}: workload.args").items():
            out.setdefault(k, s)
    return out


def read(
    folder: Path,
    command: Iterable[str] | None,
    spec: Path | None,
) -> RunSettings:
    """The run's settings from its inputs' folder (metrics.json), the command nsys launched,
    and its spec.lock.yaml, in that order (see the module docstring)."""
    found: dict[str, Setting] = {}
    for name in ("metrics.json", "metrics_rank0.json"):
        f = folder / name
        if f.is_file():
            from orchestrator.analysis.readers.side_inputs import SideInputError, load_json

            try:
                data = load_json(f)
            except SideInputError:
                data = None  # the workload fold names a broken metrics file
            if isinstance(data, dict):
                found.update(from_config(f, data))
            break
    if command is not None:
        for k, s in from_args(command, "the profiled command").items():
            found.setdefault(k, s)
    if spec is not None:
        for k, s in from_spec(spec).items():
            found.setdefault(k, s)
    return RunSettings(**found)
