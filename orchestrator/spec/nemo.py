"""The `nemo` workload kind: a NeMo (Hydra) training script, its overrides, and typed knobs.

    workload:
      kind: nemo
      script: /opt/NeMo/examples/nlp/language_modeling/tuning/megatron_gpt_finetuning.py
      overrides:                       # Hydra overrides, in order; mappings nest
        trainer.max_steps: 100
        model: {restore_from_path: /models/llama-2-7b.nemo}
        +model.new_key: 1              # `+` adds a key, `++` adds or overrides
        ~model.old_key: null           # `~` deletes a key
      data_workers: 4                  # typed knobs for the seed's experiments (see below)
      cpu_offloading_layers: 8
      peft_scheme: lora
      precision: bf16-mixed
      fp8: hybrid
      unified_memory: true

Knobs: `data_workers: N` → `model.data.train_ds.num_workers=N`,
`model.data.validation_ds.num_workers=N` (`data_workers_keys` names other keys, e.g.
`[model.data.num_workers]` for pre-training);
`cpu_offloading_layers: N` → `model.activations_checkpoint_granularity=null
+model.cpu_offloading=True +model.cpu_offloading_num_layers=N`; `peft_scheme` →
`model.peft.peft_scheme`; `precision` → `trainer.precision`; `fp8: hybrid|e4m3` →
`++model.transformer_engine=True ++model.fp8=True ++model.fp8_e4m3=.. ++model.fp8_hybrid=..`
plus TE's delayed-scaling defaults (margin 0, interval 1, amax history 1024, amax max). A knob
and an override of the same key are refused. `trainer.devices`/`trainer.num_nodes` follow the
job's resources (tasks per node, nodes) unless overridden.

Each override becomes one argv word `key=value` in Hydra's grammar: null → `null`, booleans →
`True`/`False`, numbers as written, lists → `[a,b]`, and a string that Hydra would read as
something else (spaces, quotes, `=`, `,`, brackets, `true`, `null`, a number) is quoted the
Hydra way (`'...'`, with `\\'` for a quote). The word is then shell-quoted by the template's
`q` filter, so what NeMo's argv holds is exactly the Hydra text.

Unified Memory: the job writes `um_bootstrap.py` into its run folder and runs
`python um_bootstrap.py SCRIPT ARGS...`; the bootstrap calls
`rmm.reinitialize(pool_allocator=True, managed_memory=True)` and
`torch.cuda.memory.change_current_allocator(rmm_torch_allocator)` before any other import, then
runs SCRIPT as `__main__` with `sys.argv = [SCRIPT, ARGS...]`, unchanged.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from orchestrator.spec.envvars import ProcessEnv

HydraScalar = str | int | float | bool | None
# Override values: scalars and (nested) lists of them; mappings are flattened into dotted keys.
HydraValue = HydraScalar | list[Any]

KEY_RE = re.compile(
    r"^(\+\+|\+|~)?[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*(@[A-Za-z0-9_./:-]+)?$"
)
_PREFIX_RE = re.compile(r"^(\+\+|\+|~)")
# Characters Hydra reads as part of an unquoted value (letters, digits and `_./:@%+-`), plus
# whole `${...}` interpolations.
_UNQUOTED_RE = re.compile(r"^(?:[A-Za-z0-9_./:@%+-]|\$\{[A-Za-z0-9_.:/-]+\})+$")
# Unquoted words Hydra would turn into another type.
_NOT_A_STRING_RE = re.compile(
    r"^(?i:null|true|false|[+-]?inf|nan)$|^[+-]?(\d[\d_]*)?\.?\d*([eE][+-]?\d+)?$"
)

UM_BOOTSTRAP_NAME = "um_bootstrap.py"
UM_BOOTSTRAP = '''\
"""gh-run Unified-Memory bootstrap, written into the run folder by gh-run (orchestrator/nemo.py).

Usage: python um_bootstrap.py SCRIPT [ARGS...]. Before anything else is imported, RMM's managed
(Unified) memory pool becomes PyTorch's CUDA allocator; then SCRIPT runs as __main__ with
sys.argv = [SCRIPT, ARGS...], exactly as `python SCRIPT ARGS...` would run it.
"""

import rmm  # first import: RMM must own CUDA memory before anything allocates
from rmm.allocators.torch import rmm_torch_allocator

rmm.reinitialize(pool_allocator=True, managed_memory=True)

import torch  # noqa: E402

torch.cuda.memory.change_current_allocator(rmm_torch_allocator)

import os  # noqa: E402
import runpy  # noqa: E402
import sys  # noqa: E402

if len(sys.argv) < 2:
    sys.exit("usage: python um_bootstrap.py SCRIPT [ARGS...]")
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(os.path.abspath(script))
print(
    "gh-run: Unified Memory on (rmm pool_allocator=True, managed_memory=True); running " + script,
    file=sys.stderr,
    flush=True,
)
runpy.run_path(script, run_name="__main__")
'''

# megatron_gpt_finetuning_config.yaml has no model.data.num_workers (Hydra's struct mode would
# refuse it): the fine-tuning data loaders are configured per dataset.
DATA_WORKERS_KEYS = ("model.data.train_ds.num_workers", "model.data.validation_ds.num_workers")

PeftScheme = Literal["lora", "none", "adapter", "ia3", "ptuning"]
Precision = Literal["bf16-mixed", "16-mixed", "32"]
Fp8Format = Literal["hybrid", "e4m3"]


def hydra_quote(text: str) -> str:
    """A Hydra quoted string: `'...'` with `\\'` for quotes; backslashes that precede a quote
    or the closing quote are doubled (Hydra's escaping rule)."""
    body = re.sub(
        r"(\\*)('|$)",
        lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""),
        text,
    )
    return f"'{body}'"


def _check_leaf(key: str, value: object) -> None:
    if isinstance(value, list):
        for item in value:
            _check_leaf(key, item)
    elif isinstance(value, dict):
        if value:
            raise ValueError(f"override {key}: a mapping inside a list is not supported; use keys")
    elif value is not None and not isinstance(value, str | int | float | bool):
        raise ValueError(f"override {key}: {value!r} is not a Hydra value")
    elif isinstance(value, str) and any(c in value for c in "\x00\n\r"):
        raise ValueError(f"override {key}: the value has a control character; remove it")


def hydra_value(value: object) -> str:
    """One value in Hydra's override grammar."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    value = str(value)
    if _UNQUOTED_RE.fullmatch(value) and not _NOT_A_STRING_RE.fullmatch(value):
        return value
    return hydra_quote(value)


def _flatten(tree: dict[Any, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in tree.items():
        if not isinstance(key, str):
            raise ValueError(f"override key {key!r} is not text; write it as a dotted name")
        if prefix and _PREFIX_RE.match(key):
            raise ValueError(
                f"override key {prefix}.{key}: a +, ++ or ~ prefix goes on the first part of "
                f"the key, e.g. {key[: len(key) - len(key.lstrip('+~'))]}{prefix}."
                f"{key.lstrip('+~')}"
            )
        full = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and value:
            out += _flatten(value, full)
        else:
            out.append((full, value))
    return out


def _bare(key: str) -> str:
    return _PREFIX_RE.sub("", key).split("@", 1)[0]


def override_word(key: str, value: HydraValue) -> str:
    if key.startswith("~") and value is None:
        return key
    return f"{key}={hydra_value(value)}"


class NemoWorkload(ProcessEnv):
    """A NeMo training script run with Hydra overrides (and the seed's experiments as knobs)."""

    kind: Literal["nemo"] = "nemo"
    python: str = Field("python", min_length=1, description="The interpreter (in the container).")
    script: str = Field(..., min_length=1, description="The NeMo script (a path in the container).")
    config_path: str | None = Field(None, description="Hydra --config-path.")
    config_name: str | None = Field(None, description="Hydra --config-name.")
    overrides: dict[str, HydraValue] = Field(
        default_factory=dict,
        description="Hydra overrides, key → value; nested mappings are dotted keys.",
    )
    data_workers: int | None = Field(
        None, ge=0, le=256, description="Data-loader workers, set at each of data_workers_keys."
    )
    data_workers_keys: list[str] = Field(
        default_factory=lambda: list(DATA_WORKERS_KEYS),
        min_length=1,
        description=(
            "Where data_workers goes: NeMo's fine-tuning config has one num_workers per dataset "
            "(the pre-training config has model.data.num_workers)."
        ),
    )
    cpu_offloading_layers: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="Activation CPU offloading of N layers (+model.cpu_offloading...).",
    )
    peft_scheme: PeftScheme | None = Field(None, description="model.peft.peft_scheme.")
    precision: Precision | None = Field(None, description="trainer.precision.")
    fp8: Fp8Format | None = Field(
        None, description="FP8 through Transformer Engine: hybrid (E4M3 fwd/E5M2 bwd) or e4m3."
    )
    unified_memory: bool = Field(
        False, description="Run through the RMM managed-memory bootstrap (GH200 Unified Memory)."
    )
    trainer_from_resources: bool = Field(
        True,
        description="Add trainer.devices / trainer.num_nodes from resources unless overridden.",
    )

    @field_validator("python", "script", "config_path", "config_name")
    @classmethod
    def _one_line(cls, v: str | None) -> str | None:
        if v is not None and any(c in v for c in "\x00\n\r"):
            raise ValueError("contains a control character; remove it")
        return v

    @field_validator("data_workers_keys")
    @classmethod
    def _worker_keys(cls, v: list[str]) -> list[str]:
        for key in v:
            if not KEY_RE.fullmatch(key) or _PREFIX_RE.match(key):
                raise ValueError(
                    f"{key!r} is not a dotted Hydra key such as model.data.num_workers"
                )
        return v

    @field_validator("overrides", mode="before")
    @classmethod
    def _overrides(cls, v: object) -> object:
        if not isinstance(v, dict):
            return v
        flat = _flatten(v)
        out: dict[str, HydraValue] = {}
        seen: dict[str, str] = {}
        for key, value in flat:
            if not KEY_RE.fullmatch(key):
                raise ValueError(
                    f"override key {key!r} is not a Hydra key; write dotted names such as "
                    "model.data.num_workers, with + (add), ++ (add or override) or ~ (delete) "
                    "in front"
                )
            bare = _bare(key)
            if bare in seen:
                raise ValueError(
                    f"override {bare} is given twice ({seen[bare]} and {key}); keep one"
                )
            seen[bare] = key
            _check_leaf(key, value)
            out[key] = value
        return out

    @model_validator(mode="after")
    def _coherent(self) -> NemoWorkload:
        if self.fp8 and self.precision == "32":
            raise ValueError(
                "fp8 needs mixed precision (Transformer Engine runs FP8 under bf16/16 autocast); "
                "set precision: bf16-mixed or drop fp8"
            )
        given = {_bare(k): k for k in self.overrides}
        for knob, key, _ in self.knobs():
            if _bare(key) in given:
                raise ValueError(
                    f"{knob} sets {_bare(key)}, which overrides also sets ({given[_bare(key)]}); "
                    f"keep one of the two"
                )
        return self

    def knobs(self) -> list[tuple[str, str, HydraValue]]:
        """The typed knobs as (knob, Hydra key, value), in a fixed order."""
        out: list[tuple[str, str, HydraValue]] = []
        if self.precision is not None:
            value: HydraValue = 32 if self.precision == "32" else self.precision
            out.append(("precision", "trainer.precision", value))
        if self.peft_scheme is not None:
            out.append(("peft_scheme", "model.peft.peft_scheme", self.peft_scheme))
        if self.data_workers is not None:
            out += [("data_workers", key, self.data_workers) for key in self.data_workers_keys]
        if self.cpu_offloading_layers is not None:
            knob = "cpu_offloading_layers"
            out += [
                (knob, "model.activations_checkpoint_granularity", None),
                (knob, "+model.cpu_offloading", True),
                (knob, "+model.cpu_offloading_num_layers", self.cpu_offloading_layers),
            ]
        if self.fp8 is not None:
            # NeMo's Megatron GPT config names (model.fp8*, Transformer Engine's DelayedScaling);
            # `++` because fine-tuning configs do not all declare them.
            out += [
                ("fp8", "++model.transformer_engine", True),
                ("fp8", "++model.fp8", True),
                ("fp8", "++model.fp8_e4m3", self.fp8 == "e4m3"),
                ("fp8", "++model.fp8_hybrid", self.fp8 == "hybrid"),
                ("fp8", "++model.fp8_margin", 0),
                ("fp8", "++model.fp8_interval", 1),
                ("fp8", "++model.fp8_amax_history_len", 1024),
                ("fp8", "++model.fp8_amax_compute_algo", "max"),
            ]
        return out

    def hydra_args(self, nodes: int = 1, devices: int = 1) -> list[str]:
        """Hydra's part of the argv: config options, the user's overrides, the knobs, and
        trainer.devices/num_nodes from the job's resources unless set."""
        args: list[str] = []
        if self.config_path:
            args.append(f"--config-path={self.config_path}")
        if self.config_name:
            args.append(f"--config-name={self.config_name}")
        pairs = [*self.overrides.items(), *((k, v) for _, k, v in self.knobs())]
        if self.trainer_from_resources:
            have = {_bare(k) for k, _ in pairs}
            for key, value in (("trainer.devices", devices), ("trainer.num_nodes", nodes)):
                if key not in have:
                    pairs.append((key, value))
        args += [override_word(k, v) for k, v in pairs]
        return args

    def argv(self, nodes: int = 1, devices: int = 1, bootstrap: str | None = None) -> list[str]:
        """python [bootstrap] script overrides... (bootstrap: the UM bootstrap's path)."""
        head = [self.python, bootstrap] if bootstrap else [self.python]
        return [*head, self.script, *self.hydra_args(nodes, devices)]
