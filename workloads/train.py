"""The training loop: one `Trainer` (model, optimizer, precision, offload) and `run()`, which
drives it for `cfg.steps` steps under the profiling hooks and returns the metrics."""

from __future__ import annotations

import contextlib
import resource
import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from workloads import distributed
from workloads.config import Config
from workloads.cpu_reference import CpuReference, PhaseClock, phase_medians, relative_to
from workloads.data import SyntheticInstructions, make_loader
from workloads.distributed import DataParallel, host_work
from workloads.lora import apply_lora
from workloads.memory import OffloadActivations, activation_context
from workloads.model import Decoder, lm_loss
from workloads.peak import peak_memory
from workloads.profiling import (
    Annotator,
    CudaProfilerWindow,
    TorchProfileWindow,
    step_range_name,
)
from workloads.ranks import rank_from_env
from workloads.um import host_snapshot

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@dataclass
class StepResult:
    loss: float
    grad_scale: float | None


class Trainer:
    """Model, optimizer and the per-step forward/backward/optimizer under the run's knobs."""

    def __init__(
        self,
        cfg: Config,
        device: torch.device,
        annotator: Annotator | None = None,
        data_parallel: DataParallel | None = None,
    ):
        self.cfg = cfg
        self.device = device
        self.annotator = annotator or Annotator(nvtx=False)
        torch.manual_seed(cfg.seed)
        with device:  # build the weights where they live; no CPU init of a big model
            self.model = Decoder(cfg.vocab, cfg.hidden, cfg.layers, cfg.heads, cfg.seq_len)
        self.adapters = 0
        if cfg.peft == "lora":
            self.adapters = apply_lora(self.model, cfg.lora_rank, cfg.lora_alpha)
        self.model.activation_checkpointing = cfg.activation_checkpointing
        self.model.train()
        # what forward/backward run through: DDP over the model (gradients averaged), or it
        self.train_model = data_parallel.wrap(self.model) if data_parallel else self.model
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            trainable, lr=cfg.lr, fused=True if cfg.fused_adam else None
        )
        self.autocast_dtype = _DTYPES[cfg.precision]
        self.scaler: torch.amp.GradScaler | None = (
            torch.amp.GradScaler(device.type) if cfg.precision == "fp16" else None
        )
        self.saved = activation_context(cfg.offload_activations, device)

    @property
    def offload(self) -> OffloadActivations | None:
        return self.saved if isinstance(self.saved, OffloadActivations) else None

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.cfg.precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def forward_loss(self, input_ids: Tensor, labels: Tensor) -> Tensor:
        """Forward and loss, with saved activations where the run keeps them."""
        with self.saved, self.autocast():
            return lm_loss(self.train_model(input_ids), labels)

    def step(self, input_ids: Tensor, labels: Tensor) -> StepResult:
        ann = self.annotator
        if self.offload is not None:
            self.offload.reset()
        with ann.range("forward"):
            loss = self.forward_loss(input_ids, labels)
        with ann.range("backward"):
            if self.scaler is not None:
                self.scaler.scale(loss).backward()  # type: ignore[no-untyped-call]
            else:
                loss.backward()  # type: ignore[no-untyped-call]
        with ann.range("optimizer"):
            if self.scaler is not None:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        scale = self.scaler.get_scale() if self.scaler is not None else None
        return StepResult(loss=loss.item(), grad_scale=scale)  # .item() waits for the GPU

    def trainable_parameters(self) -> list[Tensor]:
        """What the optimizer updates: every weight (full SFT) or the adapters (LoRA)."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def parameter_checksum(self) -> float:
        """Sum of every parameter in float64: equal on every DDP rank when replicas agree."""
        with torch.no_grad():
            return float(sum(p.detach().double().sum().item() for p in self.model.parameters()))

    def parameter_counts(self) -> tuple[int, int]:
        total = sum(p.numel() for p in self.model.parameters())
        trainable = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
        return total, trainable


def _median_after_warmup(values: list[float]) -> float:
    """Median over the steps after the first (which pays for start-up), or all if few."""
    return statistics.median(values[1:] if len(values) >= 3 else values)


def run(cfg: Config, log: bool = True) -> dict[str, Any]:
    """Train for cfg.steps steps; returns the metrics (not yet written)."""
    rank, local_rank, world = rank_from_env()
    cuda = cfg.device == "cuda"
    if cuda:
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    data_parallel = distributed.setup(cfg.ddp, rank, world, device)
    try:
        return _train(cfg, device, data_parallel, log)
    finally:
        data_parallel.close()


def _train(cfg: Config, device: torch.device, dp: DataParallel, log: bool) -> dict[str, Any]:
    cuda = device.type == "cuda"
    rank = dp.rank
    # With --cpu-reference the ranges also count this process's CPU time, phase by phase.
    clock = PhaseClock(nvtx=cuda, enabled=cfg.annotate) if cfg.cpu_reference else None
    annotator = clock or Annotator(nvtx=cuda, enabled=cfg.annotate)
    trainer = Trainer(cfg, device, annotator, dp)
    shards = dp.world_size if dp.enabled else 1
    dataset = SyntheticInstructions(
        cfg.steps * cfg.batch_size * shards,
        cfg.seq_len,
        cfg.vocab,
        seed=cfg.seed,
        item_cost=cfg.item_cost,
        item_ms=cfg.item_ms,
    )
    loader = make_loader(
        dataset, cfg.batch_size, cfg.num_workers, pin_memory=cuda, sampler=dp.sampler(dataset)
    )
    straggle_ms = cfg.straggle_ms if cfg.straggle_rank == rank else 0.0
    touch_bytes = cfg.um_host_touch_mb * 2**20
    peak = peak_memory(cfg, device)
    peak.reset()
    cuda_window = CudaProfilerWindow(cfg.cuda_profiler_window, cuda)
    trace = TorchProfileWindow(
        cfg.torch_profile, cfg.profile_steps, cuda, rank, profile_memory=cfg.profile_memory
    )
    step_times: list[float] = []
    # when each step began (Unix ns): lines the workload's own timings up with a trace's clock
    step_starts: list[int] = []
    data_times: list[float] = []
    # CPU time of this process per step (all its threads): on a shared CPU machine wall time
    # swings with other load, CPU time much less (DataLoader workers are other processes).
    cpu_times: list[float] = []
    # The same CPU time in units of a fixed work timed just before the step (--cpu-reference).
    reference = CpuReference(cfg.vocab) if cfg.cpu_reference else None
    cpu_relative: list[float] = []
    reference_times: list[float] = []
    phase_cpu: list[dict[str, float]] = []
    losses: list[float] = []
    offloaded_bytes: int | None = None
    snapshot_bytes: int | None = None
    batches = iter(loader)
    with trace:
        for step in range(cfg.steps):
            cuda_window.before_step(step)
            if reference is not None:
                with annotator.range("cpu_reference"):
                    reference_s = reference.measure()
            step_starts.append(time.time_ns())
            t0 = time.perf_counter()
            c0 = time.process_time()
            with annotator.range(step_range_name(step)):
                with annotator.range("data"):
                    if straggle_ms:
                        host_work(straggle_ms)
                    batch = next(batches)
                    input_ids = batch["input_ids"].to(device, non_blocking=True)
                    labels = batch["labels"].to(device, non_blocking=True)
                t_data = time.perf_counter()
                result = trainer.step(input_ids, labels)
                if touch_bytes:
                    with annotator.range("host_snapshot"):
                        snapshot = host_snapshot(
                            trainer.trainable_parameters(), touch_bytes, managed=cfg.unified_memory
                        )
                        snapshot_bytes = len(snapshot)
            t_end = time.perf_counter()
            cpu_times.append(time.process_time() - c0)
            if reference is not None:
                cpu_relative.append(cpu_times[-1] / reference_s)
                reference_times.append(reference_s)
                if clock is not None:
                    phase_cpu.append(clock.take())
            cuda_window.after_step(step)
            trace.step()
            step_times.append(t_end - t0)
            data_times.append(t_data - t0)
            losses.append(result.loss)
            if trainer.offload is not None:
                offloaded_bytes = trainer.offload.packed_bytes
            if log:
                print(
                    f"rank {rank} step {step} loss {result.loss:.4f} "
                    f"step {1e3 * (t_end - t0):.1f} ms data {1e3 * (t_data - t0):.1f} ms",
                    flush=True,
                )
    cuda_window.close()
    total, trainable = trainer.parameter_counts()
    median_step = _median_after_warmup(step_times)
    tokens_per_step = cfg.batch_size * cfg.seq_len
    return {
        "schema_version": 1,
        "workload": "sft",
        "rank": rank,
        "world_size": dp.world_size,
        "ddp_backend": dp.backend,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if cuda else "cpu",
        "torch_version": torch.__version__,
        "steps": cfg.steps,
        "median_step_time_s": median_step,
        "median_data_time_s": _median_after_warmup(data_times),
        "median_step_cpu_time_s": _median_after_warmup(cpu_times),
        "median_step_cpu_relative": _median_after_warmup(cpu_relative) if cpu_relative else None,
        "median_cpu_reference_s": (
            _median_after_warmup(reference_times) if reference_times else None
        ),
        "median_phase_cpu_s": phase_medians(phase_cpu) if phase_cpu else None,
        "median_phase_cpu_relative": (
            phase_medians(relative_to(phase_cpu, reference_times)) if phase_cpu else None
        ),
        "tokens_per_step": tokens_per_step,
        "tokens_per_s": tokens_per_step / median_step,
        "peak_gpu_memory_bytes": peak.allocated(),
        "peak_gpu_memory_reserved_bytes": peak.reserved(),
        "peak_gpu_memory_source": peak.source,
        "peak_host_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "offloaded_bytes_per_step": offloaded_bytes,
        "host_snapshot_bytes_per_step": snapshot_bytes,
        "straggle_ms_per_step": straggle_ms,
        "annotated": cfg.annotate,
        # the data-loading cost planted per sample and per step (this rank's batch), in ms
        "planted_item_ms": cfg.item_ms,
        "planted_data_ms_per_step": round(cfg.item_ms * cfg.batch_size, 6),
        "final_loss": losses[-1],
        "losses": losses,
        "step_times_s": step_times,
        "data_times_s": data_times,
        "step_cpu_times_s": cpu_times,
        "step_cpu_relative": cpu_relative or None,
        "step_start_unix_ns": step_starts,
        "phase_cpu_s": phase_cpu or None,
        "parameters": total,
        "trainable_parameters": trainable,
        "parameter_checksum": trainer.parameter_checksum(),
        "lora_adapters": trainer.adapters,
        "trace_file": trace.path.name if trace.path is not None else None,
        "config": cfg.to_json(),
    }
