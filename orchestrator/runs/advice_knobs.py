"""Which spec field a finding's knob turns (issue 41 item 3): the `--set` lines that apply it
to the job that ran, or the one sentence saying the spec has no field for it.

NeMo workloads have fields for their knobs (`workload.data_workers`, `workload.precision`,
`workload.cpu_offloading_layers`, `workload.unified_memory`). A command workload's knobs are
its own flags, which gh-run does not know: a knob is applied only where the job's arguments
already hold its flag (`--num-workers 0` becomes `--num-workers 4`, `--precision fp32`
becomes `bf16`, `--no-pin-memory` becomes `--pin-memory`, `--no-cuda-graphs` becomes
`--cuda-graphs`), or where the workload is gh-run's own reference workload, whose flags are
known (workloads/sft.py). Anything else is listed, not guessed: the sentence names the knob
and how to give it with `--set`.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.spec.job import CommandWorkload, JobSpec
from orchestrator.spec.nemo import NemoWorkload

DEFAULT_WORKERS = 4  # the data-loader advice's workers from none (advice.KNOBS)
# flags that carry each rule's knob in a command's arguments, as workloads spell them
WORKER_FLAGS = ("--num-workers", "--workers", "--dataloader-workers", "--dataloader-num-workers")
PRECISION_FLAGS = ("--precision", "--dtype")
# a negated switch and its positive form
SWITCHES = {
    "host-device-copies": ("--no-pin-memory", "--pin-memory"),
    "launch-bound": ("--no-cuda-graphs", "--cuda-graphs"),
}
REFERENCE_MODULE = "workloads.sft"
# what each rule's knob is, for the sentence when the spec has no field for it
KNOB_WORDS = {
    "data-loader": "more DataLoader workers",
    "fp32-kernels": "bf16 mixed precision",
    "host-device-copies": "pinned host memory for the batches",
    "launch-bound": "CUDA graphs (or torch.compile mode 'reduce-overhead')",
    "host-compute": "moving the host work off the step",
    "sync-overhead": "removing the syncs inside the step",
    "low-overlap": "overlapping communication with backward",
    "unified-memory": "keeping the working set on the GPU",
    "offload-traffic": "offloading fewer layers",
}


@dataclass(frozen=True)
class KnobChange:
    """The `--set` lines that apply a finding's knob, and what they change in words."""

    rule: str
    sets: tuple[str, ...]
    says: str


@dataclass(frozen=True)
class NoKnob:
    """A finding whose knob is no field of the spec: the sentence that says so."""

    rule: str
    sentence: str


def knob_change(rule: str, spec: JobSpec, workers_now: int | None = None) -> KnobChange | NoKnob:
    """The spec change that applies `rule`'s knob to `spec` (`workers_now`: the data-loader
    workers the run used, where the analysis read them)."""
    w = spec.workload
    if isinstance(w, NemoWorkload):
        return _nemo(rule, w, workers_now)
    return _command(rule, w, workers_now)


def _more_workers(now: int | None) -> int:
    return DEFAULT_WORKERS if not now else max(2 * now, now + 2)


def _nemo(rule: str, w: NemoWorkload, workers_now: int | None) -> KnobChange | NoKnob:
    if rule == "data-loader":
        n = _more_workers(w.data_workers if w.data_workers is not None else workers_now)
        return KnobChange(rule, (f"workload.data_workers={n}",), f"data workers {n}")
    if rule == "fp32-kernels":
        return KnobChange(rule, ("workload.precision=bf16-mixed",), "precision bf16-mixed")
    if rule == "offload-traffic" and w.cpu_offloading_layers:
        n = w.cpu_offloading_layers // 2
        return KnobChange(rule, (f"workload.cpu_offloading_layers={n}",), f"offloaded layers {n}")
    if rule == "unified-memory" and w.unified_memory:
        return KnobChange(rule, ("workload.unified_memory=false",), "no Unified Memory")
    return _none(rule, "the NeMo workload's fields")


def _command(rule: str, w: CommandWorkload, workers_now: int | None) -> KnobChange | NoKnob:
    args = list(w.args)
    reference = REFERENCE_MODULE in args or w.command.endswith("sft.py")
    if rule == "data-loader":
        at = _flag_value(args, WORKER_FLAGS)
        now = workers_now
        if at is not None and args[at].isdigit():
            now = int(args[at])
        n = _more_workers(now)
        if at is not None:
            return KnobChange(rule, (_arg(at, str(n)),), f"{args[at - 1]} {n}")
        if reference:
            return _append(rule, args, ["--num-workers", str(n)], f"--num-workers {n}")
    if rule == "fp32-kernels":
        at = _flag_value(args, PRECISION_FLAGS)
        if at is not None:
            return KnobChange(rule, (_arg(at, "bf16"),), f"{args[at - 1]} bf16")
        if reference:
            return _append(rule, args, ["--precision", "bf16"], "--precision bf16")
    if rule in SWITCHES:
        off, on = SWITCHES[rule]
        if off in args:
            i = args.index(off)
            return KnobChange(rule, (_arg(i, on),), f"{off} -> {on}")
    return _none(rule, "the command's arguments")


def _flag_value(args: list[str], flags: tuple[str, ...]) -> int | None:
    """The index of the value after one of `flags` (`--flag VALUE`), None without one."""
    for i, a in enumerate(args[:-1]):
        if a in flags:
            return i + 1
    return None


def _append(rule: str, args: list[str], extra: list[str], says: str) -> KnobChange:
    n = len(args)
    return KnobChange(rule, tuple(_arg(n + k, v) for k, v in enumerate(extra)), says)


def _arg(i: int, value: str) -> str:
    """`--set` of argument `i`, quoted so that YAML reads it as text (`4` is no number)."""
    return f"workload.args.{i}='{value}'"


def _none(rule: str, where: str) -> NoKnob:
    knob = KNOB_WORDS.get(rule)
    if knob is None:
        return NoKnob(rule, f"{rule} has no knob gh-run can apply: nothing to try")
    return NoKnob(
        rule,
        f"{rule}: no field in {where} turns {knob}, so gh-run does not guess one; give the"
        " change yourself with --set (such as --set workload.args.N=--your-flag)",
    )
