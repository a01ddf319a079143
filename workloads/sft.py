"""Reference LLM fine-tuning workload for gh-run: `python -m workloads.sft --help`.

A Llama-style decoder with random weights trains on a synthetic instruction data set, with the
knobs of the seed experiments (data-loader workers, activation offloading, activation
checkpointing, LoRA vs full fine-tuning, precision, fused Adam) and the profiling hooks gh-run's
analysis reads (NVTX/record_function ranges, a Kineto trace window, a cudaProfilerApi window,
metrics.json). See docs/workload.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workloads.config import Config, DeviceKind

EPILOG = """\
examples:
  # CPU smoke run (seconds): 2 steps, trace of both, metrics.json in ./out
  python -m workloads.sft --device cpu --steps 2 --output out --torch-profile out \\
      --profile-steps 0:2

  # GPU run under nsys, capturing steps 5..9 only:
  nsys profile --capture-range=cudaProfilerApi --capture-range-end=stop -o sft \\
      python -m workloads.sft --layers 8 --hidden 2048 --heads 16 --vocab 32000 \\
      --seq-len 1024 --batch-size 8 --steps 20 --cuda-profiler-window 5:10

  # the seed's experiments, one flag each:
  --num-workers 4 | --offload-activations | --activation-checkpointing | --peft lora
  --precision fp32 | --precision fp16 | --fused-adam
  --unified-memory [--um-host-touch-mb 256]   (RMM managed memory, as on a GH200)

  # unannotated (no NVTX, no record_function) and data-bound on purpose: 6 ms of CPU work
  # per sample, so the GPU waits 48 ms per batch of 8 at --num-workers 0:
  python -m workloads.sft --no-nvtx --item-ms 6 --batch-size 8 --num-workers 0

  # data parallel on 2 GPUs, rank 1 a straggler (80 ms of host work a step):
  torchrun --nproc-per-node 2 -m workloads.sft --ddp --straggle-rank 1 --straggle-ms 80

outputs (in --output, default $GH_RUN_ARTIFACTS or .):
  metrics.json (rank 0; other ranks metrics_rank<N>.json): median step time (s), tokens/s,
  peak GPU memory (bytes; null on CPU), final loss, the config.
  --torch-profile DIR (or $GH_RUN_TORCH_PROFILE): DIR/sft_rank<N>.pt.trace.json.gz, a Kineto
  trace of --profile-steps.
ranges: step_<N> per step, nested data / forward / backward / optimizer (and host_snapshot)
  (NVTX on CUDA, and torch.profiler user annotations always; none with --no-nvtx). Rank N
  comes from RANK or SLURM_PROCID.
"""


def _window(text: str) -> tuple[int, int]:
    start, sep, end = text.partition(":")
    if not sep or not start.strip().isdigit() or not end.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected START:END (step numbers), got {text!r}")
    return int(start), int(end)


def default_profile_window(steps: int) -> tuple[int, int]:
    """The Kineto window when --profile-steps is not given: steps 1 and 2 (step 0 warms up
    caches and allocators), or as much of that as `steps` allows: 1:2 for two steps, 0:1 for
    one."""
    start, end = Config.profile_steps
    if steps <= start:
        return 0, steps
    return start, min(end, steps)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return value


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def build_parser() -> argparse.ArgumentParser:
    d = Config()
    p = argparse.ArgumentParser(
        prog="python -m workloads.sft",
        description=(
            "Fine-tune a Llama-style decoder (random weights, synthetic instruction data, no "
            "downloads) with the seed experiments' knobs and gh-run's profiling hooks."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    m = p.add_argument_group("model (tiny by default)")
    m.add_argument(
        "--layers", type=_positive, default=d.layers, help="decoder blocks (%(default)s)"
    )
    m.add_argument("--hidden", type=_positive, default=d.hidden, help="model width (%(default)s)")
    m.add_argument(
        "--heads", type=_positive, default=d.heads, help="attention heads; divide --hidden"
    )
    m.add_argument("--vocab", type=_positive, default=d.vocab, help="vocabulary (%(default)s)")

    data = p.add_argument_group("data")
    data.add_argument("--seq-len", type=_positive, default=d.seq_len, help="tokens per sample")
    data.add_argument("--batch-size", type=_positive, default=d.batch_size, help="per step")
    data.add_argument(
        "--num-workers",
        type=_non_negative,
        default=d.num_workers,
        help="DataLoader worker processes; 0 loads in the training loop (the seed's 0 vs 4)",
    )
    data.add_argument(
        "--item-cost",
        type=_non_negative,
        default=d.item_cost,
        help="extra tokenisation passes per sample, to make data loading the bottleneck "
        "(0.3-0.8 ms each at --seq-len 1024, CPU-dependent)",
    )
    data.add_argument(
        "--item-ms",
        type=_non_negative_float,
        default=d.item_ms,
        metavar="MS",
        help="plant a known data-loading cost: each sample takes at least MS ms of CPU work in "
        "all (it re-tokenises until then), so a batch costs --batch-size x MS on any CPU; "
        "metrics.json records it as planted_data_ms_per_step",
    )

    k = p.add_argument_group("experiment knobs")
    k.add_argument(
        "--offload-activations",
        action="store_true",
        help="keep saved activations in host memory (save_on_cpu, pinned on CUDA)",
    )
    k.add_argument(
        "--activation-checkpointing",
        action="store_true",
        help="recompute each block in backward instead of saving its activations",
    )
    k.add_argument(
        "--peft",
        choices=("lora", "none"),
        default=d.peft,
        help="lora: adapters on q/k/v/o, base frozen; none: full fine-tuning (%(default)s)",
    )
    k.add_argument("--lora-rank", type=_positive, default=d.lora_rank, help="%(default)s")
    k.add_argument("--lora-alpha", type=float, default=d.lora_alpha, help="%(default)s")
    k.add_argument(
        "--precision",
        choices=("bf16", "fp16", "fp32"),
        default=d.precision,
        help="autocast dtype; fp16 adds a GradScaler; weights stay fp32 (%(default)s)",
    )
    k.add_argument("--fused-adam", action="store_true", help="AdamW(fused=True)")
    k.add_argument("--lr", type=float, default=d.lr, help="%(default)s")

    um = p.add_argument_group("Unified Memory (CUDA; needs the rmm-cu13 package)")
    um.add_argument(
        "--unified-memory",
        action="store_true",
        help="before torch loads: rmm.reinitialize(pool_allocator=True, managed_memory=True) "
        "and RMM as torch's allocator (the seed's GH200 experiment); peak memory from RMM's "
        "statistics",
    )
    um.add_argument(
        "--um-max-pool-fraction",
        type=_fraction,
        default=None,
        metavar="F",
        help="cap RMM's managed pool at F (0-1] of the GPU's free memory (default: RMM's, no "
        "cap; oversubscribing managed memory can hang a GPU that is not a GH200)",
    )
    um.add_argument(
        "--um-host-touch-mb",
        type=_non_negative,
        default=d.um_host_touch_mb,
        metavar="MB",
        help="after each step the CPU copies the first MB MiB of the trainable parameters out of "
        "managed memory (a host-side snapshot, range host_snapshot): pages migrate to the host "
        "and back to the GPU, with page faults in nsys",
    )

    ddp = p.add_argument_group("data parallel (one process per device, from torchrun or srun)")
    ddp.add_argument(
        "--ddp",
        action="store_true",
        help="DistributedDataParallel over torch.distributed (NCCL on CUDA, gloo on CPU); rank "
        "and world size from RANK/WORLD_SIZE or SLURM_PROCID/SLURM_NTASKS, rendezvous at "
        "MASTER_ADDR:MASTER_PORT; each rank reads its own shard",
    )
    ddp.add_argument(
        "--straggle-rank",
        type=_non_negative,
        default=None,
        metavar="R",
        help="the rank that straggles on purpose (with --straggle-ms)",
    )
    ddp.add_argument(
        "--straggle-ms",
        type=float,
        default=d.straggle_ms,
        metavar="MS",
        help="extra busy host work per step on --straggle-rank, inside its data phase",
    )

    r = p.add_argument_group("run")
    r.add_argument("--steps", type=_positive, default=d.steps, help="training steps")
    r.add_argument(
        "--device", choices=("cpu", "cuda"), default=None, help="default: cuda if available"
    )
    r.add_argument("--seed", type=int, default=d.seed, help="%(default)s")
    r.add_argument(
        "--cpu-reference",
        action="store_true",
        help="before each step, time a fixed CPU work (tokenising a fixed text) in this "
        "process; metrics.json gains median_step_cpu_relative, the step's CPU time in units "
        "of it, which a shared or virtual machine's changing speed moves far less than CPU "
        "time (for nightly comparisons on such machines)",
    )
    r.add_argument(
        "--output",
        default=None,
        help="directory for metrics.json (default: $GH_RUN_ARTIFACTS if set, else .)",
    )

    prof = p.add_argument_group("profiling")
    prof.add_argument(
        "--no-nvtx",
        dest="annotate",
        action="store_false",
        help="leave out the workload's own ranges (the NVTX ranges and their record_function "
        "twins: step_N, data, forward, ...), as in a script nobody annotated; traces then hold "
        "only what torch and the libraries mark (ProfilerStep#N in a Kineto trace)",
    )
    prof.add_argument(
        "--torch-profile",
        metavar="DIR",
        default=None,
        help="write a Kineto trace of --profile-steps to DIR/sft_rank<N>.pt.trace.json.gz "
        "(default: $GH_RUN_TORCH_PROFILE if set, else no trace)",
    )
    prof.add_argument(
        "--profile-steps",
        metavar="START:END",
        type=_window,
        default=None,
        help="steps START..END-1 (from 0) for --torch-profile (default 1:3, after the first "
        "step's warm-up; with fewer --steps, the window that fits)",
    )
    prof.add_argument(
        "--profile-memory", action="store_true", help="record allocations in the Kineto trace"
    )
    prof.add_argument(
        "--cuda-profiler-window",
        metavar="START:END",
        type=_window,
        default=None,
        help="cudaProfilerStart/Stop around steps START..END-1, for "
        "nsys --capture-range=cudaProfilerApi",
    )
    return p


def parse_config(argv: Sequence[str] | None = None) -> Config:
    parser = build_parser()
    return config_from_args(parser, parser.parse_args(argv))


def _check_torch_free(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> None:
    """The checks that need no torch (made before the Unified-Memory bootstrap loads it)."""
    if ns.unified_memory and ns.device == "cpu":
        parser.error("--unified-memory needs a GPU (RMM's managed memory); drop --device cpu")
    if ns.um_max_pool_fraction is not None and not ns.unified_memory:
        parser.error("--um-max-pool-fraction needs --unified-memory; add it or drop the cap")
    if ns.um_host_touch_mb and not ns.unified_memory:
        parser.error(
            "--um-host-touch-mb needs --unified-memory (the CPU can only read managed memory)"
        )
    if (ns.straggle_rank is None) != (ns.straggle_ms == 0):
        parser.error("--straggle-rank and --straggle-ms go together; give both or neither")
    if ns.straggle_ms < 0:
        parser.error(f"--straggle-ms {ns.straggle_ms}: must be >= 0")


def config_from_args(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> Config:
    _check_torch_free(parser, ns)
    device: DeviceKind = ns.device or ("cuda" if _cuda_available() else "cpu")
    if device == "cuda" and not _cuda_available():
        parser.error("--device cuda: no CUDA device is visible; use --device cpu")
    if ns.hidden % ns.heads or (ns.hidden // ns.heads) % 2:
        parser.error(
            f"--hidden {ns.hidden} / --heads {ns.heads}: need an even head size; "
            "pick heads that divide hidden into an even number"
        )
    profile_steps = ns.profile_steps or default_profile_window(ns.steps)
    for flag, window in (
        ("--profile-steps", profile_steps),
        ("--cuda-profiler-window", ns.cuda_profiler_window),
    ):
        if window is not None and not 0 <= window[0] < window[1] <= ns.steps:
            parser.error(
                f"{flag} {window[0]}:{window[1]}: need 0 <= START < END <= --steps ({ns.steps})"
            )
    output = ns.output or os.environ.get("GH_RUN_ARTIFACTS") or "."
    return Config(
        layers=ns.layers,
        hidden=ns.hidden,
        heads=ns.heads,
        vocab=ns.vocab,
        seq_len=ns.seq_len,
        batch_size=ns.batch_size,
        num_workers=ns.num_workers,
        item_cost=ns.item_cost,
        item_ms=ns.item_ms,
        cpu_reference=ns.cpu_reference,
        offload_activations=ns.offload_activations,
        activation_checkpointing=ns.activation_checkpointing,
        peft=ns.peft,
        lora_rank=ns.lora_rank,
        lora_alpha=ns.lora_alpha,
        precision=ns.precision,
        fused_adam=ns.fused_adam,
        lr=ns.lr,
        unified_memory=ns.unified_memory,
        um_max_pool_fraction=ns.um_max_pool_fraction,
        um_host_touch_mb=ns.um_host_touch_mb,
        ddp=ns.ddp,
        straggle_rank=ns.straggle_rank,
        straggle_ms=ns.straggle_ms,
        steps=ns.steps,
        device=device,
        seed=ns.seed,
        output=output,
        annotate=ns.annotate,
        torch_profile=ns.torch_profile or os.environ.get("GH_RUN_TORCH_PROFILE") or None,
        profile_steps=profile_steps,
        profile_memory=ns.profile_memory,
        cuda_profiler_window=ns.cuda_profiler_window,
    )


def metrics_file_name(rank: int) -> str:
    return "metrics.json" if rank == 0 else f"metrics_rank{rank}.json"


def write_metrics(metrics: dict[str, Any], output: str) -> Path:
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    path = out / metrics_file_name(int(metrics["rank"]))
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(metrics, indent=2) + "\n")
    tmp.replace(path)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.unified_memory:
        _check_torch_free(parser, ns)
        from workloads.ranks import rank_from_env
        from workloads.um import enable_unified_memory

        # before anything imports torch or touches the GPU, as the seed does
        enable_unified_memory(rank_from_env()[1], ns.um_max_pool_fraction)
    cfg = config_from_args(parser, ns)
    try:
        from workloads.train import run  # torch loads here, after --help and argument errors
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        # gh-run itself does not need torch (`make demo` leaves it out): say how to add it.
        print(
            f"workloads.sft: torch is not installed for {sys.executable}; `make workload` in "
            "the gh-run checkout (or `pip install -e '.[workload]'`) installs it",
            file=sys.stderr,
        )
        return 2

    metrics = run(cfg)
    path = write_metrics(metrics, cfg.output)
    peak = metrics["peak_gpu_memory_bytes"]
    print(
        f"median step {metrics['median_step_time_s'] * 1e3:.1f} ms, "
        f"{metrics['tokens_per_s']:.0f} tokens/s, "
        f"peak GPU memory {'n/a' if peak is None else f'{peak / 2**30:.2f} GiB'}, "
        f"final loss {metrics['final_loss']:.4f}; wrote {path}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
