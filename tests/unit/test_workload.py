"""The reference workload (workloads/): each knob changes what it should, on CPU.

torch is an optional extra (`pip install .[workload]`); CI installs it, so these run there.
"""

from __future__ import annotations

import gzip
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from workloads.config import Config  # noqa: E402
from workloads.cpu_reference import PhaseClock, phase_medians, relative_to  # noqa: E402
from workloads.data import IGNORE, SyntheticInstructions  # noqa: E402
from workloads.lora import is_adapter_param  # noqa: E402
from workloads.memory import OffloadActivations, activation_context  # noqa: E402
from workloads.profiling import PHASES  # noqa: E402
from workloads.sft import build_parser, main, parse_config  # noqa: E402
from workloads.train import Trainer  # noqa: E402

CPU = torch.device("cpu")
TINY = Config(layers=2, hidden=64, heads=4, vocab=512, seq_len=32, batch_size=2, device="cpu")


def tiny(**changes: Any) -> Config:
    return Config(**{**TINY.to_json(), "profile_steps": (1, 3), **changes})


def batch(cfg: Config) -> tuple[Any, Any]:
    ds = SyntheticInstructions(cfg.batch_size, cfg.seq_len, cfg.vocab, seed=cfg.seed)
    items = [ds[i] for i in range(cfg.batch_size)]
    return (
        torch.stack([it["input_ids"] for it in items]),
        torch.stack([it["labels"] for it in items]),
    )


class SavedTensorCounter:
    """A saved-tensor hook that counts what autograd keeps for backward (and keeps it as is)."""

    def __init__(self) -> None:
        self.count = 0
        self.bytes = 0

    def pack(self, t: Any) -> Any:
        self.count += 1
        self.bytes += t.numel() * t.element_size()
        return t

    def hooks(self) -> Any:
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)


def grads(trainer: Trainer) -> dict[str, Any]:
    return {
        n: p.grad.detach().clone()
        for n, p in trainer.model.named_parameters()
        if p.grad is not None
    }


# --- command line -------------------------------------------------------------------------


def test_help_teaches_every_knob() -> None:
    text = build_parser().format_help()
    for flag in (
        "--num-workers",
        "--item-cost",
        "--item-ms",
        "--no-nvtx",
        "--cpu-reference",
        "--offload-activations",
        "--activation-checkpointing",
        "--peft",
        "--precision",
        "--fused-adam",
        "--torch-profile",
        "--profile-steps",
        "--cuda-profiler-window",
        "metrics.json",
        "examples:",
    ):
        assert flag in text


def test_help_runs_as_module() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "workloads.sft", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "--offload-activations" in out.stdout


def test_bad_profile_window_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_config(["--device", "cpu", "--steps", "2", "--profile-steps", "1:5"])
    assert exc.value.code == 2
    assert "--profile-steps 1:5" in capsys.readouterr().err


@pytest.mark.parametrize(("steps", "window"), [(1, (0, 1)), (2, (1, 2)), (3, (1, 3)), (10, (1, 3))])
def test_default_profile_window_fits_the_steps(steps: int, window: tuple[int, int]) -> None:
    """Without --profile-steps the window is 1:3 (after the warm-up step), or what fits."""
    cfg = parse_config(["--device", "cpu", "--steps", str(steps), "--torch-profile", "/tmp/t"])
    assert cfg.profile_steps == window


def test_output_defaults_to_gh_run_artifacts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GH_RUN_ARTIFACTS", "/tmp/artifacts-here")
    assert parse_config(["--device", "cpu"]).output == "/tmp/artifacts-here"
    monkeypatch.delenv("GH_RUN_ARTIFACTS")
    assert parse_config(["--device", "cpu"]).output == "."


def test_torch_profile_dir_defaults_to_gh_run_torch_profile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GH_RUN_TORCH_PROFILE", raising=False)
    assert parse_config(["--device", "cpu"]).torch_profile is None
    monkeypatch.setenv("GH_RUN_TORCH_PROFILE", "/tmp/traces-here")
    assert parse_config(["--device", "cpu"]).torch_profile == "/tmp/traces-here"
    assert parse_config(["--device", "cpu", "--torch-profile", "x"]).torch_profile == "x"


# --- data ---------------------------------------------------------------------------------


def test_dataset_is_deterministic_and_masks_the_prompt() -> None:
    a = SyntheticInstructions(4, 64, 512, seed=1)
    b = SyntheticInstructions(4, 64, 512, seed=1, item_cost=3)  # more work, same sample
    x, y = a[2], b[2]
    assert torch.equal(x["input_ids"], y["input_ids"]) and torch.equal(x["labels"], y["labels"])
    assert x["input_ids"].shape == (64,) and int(x["input_ids"].max()) < 512
    labels = x["labels"]
    assert labels[0] == IGNORE  # the prompt is not trained on
    assert (labels != IGNORE).sum() > 10  # the response is
    # labels are the inputs shifted by one where they count
    mask = labels[:-1] != IGNORE
    assert torch.equal(labels[:-1][mask], x["input_ids"][1:][mask])


def test_item_ms_plants_a_cost_of_at_least_that_much_and_keeps_the_sample() -> None:
    import time

    plain = SyntheticInstructions(4, 64, 512, seed=1)
    slow = SyntheticInstructions(4, 64, 512, seed=1, item_ms=30)
    t0 = time.perf_counter()
    x = slow[2]
    took = time.perf_counter() - t0
    # a lower bound by construction (the item works until its deadline), not a timing guess
    assert took >= 0.030
    assert torch.equal(x["input_ids"], plain[2]["input_ids"])
    assert torch.equal(x["labels"], plain[2]["labels"])


def test_item_ms_refuses_a_negative_cost(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_config(["--device", "cpu", "--item-ms", "-1"])
    assert exc.value.code == 2 and "--item-ms" in capsys.readouterr().err


# --- LoRA ---------------------------------------------------------------------------------


def test_lora_freezes_all_but_adapters() -> None:
    cfg = tiny(peft="lora", lora_rank=4, precision="fp32")
    trainer = Trainer(cfg, CPU)
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trainable and all(is_adapter_param(n) for n in trainable)
    assert len(trainable) == cfg.layers * 4 * 2  # q/k/v/o, A and B each
    assert trainer.adapters == cfg.layers * 4
    total, n_trainable = trainer.parameter_counts()
    assert n_trainable == cfg.layers * 4 * 2 * cfg.lora_rank * cfg.hidden
    assert n_trainable < total / 10
    opt_params = {id(p) for g in trainer.optimizer.param_groups for p in g["params"]}
    assert opt_params == {id(p) for p in trainer.model.parameters() if p.requires_grad}

    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.step(*batch(cfg))
    for name, p in trainer.model.named_parameters():
        if is_adapter_param(name):
            continue
        assert torch.equal(before[name], p), f"frozen {name} changed"
    lora_b = [n for n in before if n.endswith("lora_b")]
    assert all(not torch.equal(before[n], trainer.model.get_parameter(n)) for n in lora_b)


def test_full_finetuning_trains_everything() -> None:
    trainer = Trainer(tiny(peft="none"), CPU)
    assert all(p.requires_grad for p in trainer.model.parameters())


# --- activation offloading ----------------------------------------------------------------


def test_offload_selects_save_on_cpu_pinned_only_on_cuda() -> None:
    on_cpu = activation_context(True, CPU)
    on_cuda = activation_context(True, torch.device("cuda"))  # built lazily: no GPU needed
    assert isinstance(on_cpu, torch.autograd.graph.save_on_cpu)
    assert isinstance(on_cpu, OffloadActivations) and on_cpu.pin_memory is False
    assert isinstance(on_cuda, OffloadActivations) and on_cuda.pin_memory is True
    assert not isinstance(activation_context(False, CPU), torch.autograd.graph.saved_tensors_hooks)


def test_offload_moves_every_saved_activation_to_host_memory() -> None:
    cfg = tiny(offload_activations=True, precision="fp32")
    ids, labels = batch(cfg)
    plain = Trainer(tiny(precision="fp32"), CPU)
    counter = SavedTensorCounter()
    with counter.hooks():
        plain.forward_loss(ids, labels).backward()
    assert counter.count > 0

    trainer = Trainer(cfg, CPU)
    offload = trainer.offload
    assert offload is not None
    packed: list[tuple[Any, Any]] = []
    save_on_cpu_pack = offload.pack_hook

    def spy(t: Any) -> Any:
        out = save_on_cpu_pack(t)
        packed.append(out)
        return out

    offload.pack_hook = spy  # read what save_on_cpu hands autograd to keep
    loss = trainer.forward_loss(ids, labels)
    # everything autograd would keep on the device went through save_on_cpu instead
    assert offload.packed_tensors == counter.count == len(packed)
    assert offload.packed_bytes == counter.bytes
    for device, kept in packed:
        assert kept.device.type == "cpu"  # what is kept lives in host memory
        assert isinstance(device, torch.device)  # and remembers where to go back to
    loss.backward()
    # same gradients as keeping the activations in place: the unpack path restores them
    ref, got = grads(plain), grads(trainer)
    assert ref.keys() == got.keys()
    for name in ref:
        torch.testing.assert_close(got[name], ref[name], msg=name)


# --- activation checkpointing -------------------------------------------------------------


def test_checkpointing_saves_fewer_activations_and_same_gradients() -> None:
    cfg = tiny(layers=3, precision="fp32")
    ids, labels = batch(cfg)
    results = {}
    for ckpt in (False, True):
        trainer = Trainer(tiny(layers=3, precision="fp32", activation_checkpointing=ckpt), CPU)
        counter = SavedTensorCounter()
        with counter.hooks():
            loss = trainer.forward_loss(ids, labels)
        loss.backward()
        results[ckpt] = (counter.count, counter.bytes, grads(trainer))
    (n_plain, b_plain, g_plain), (n_ckpt, b_ckpt, g_ckpt) = results[False], results[True]
    assert n_ckpt < n_plain / 2
    assert b_ckpt < b_plain / 2
    for name in g_plain:
        torch.testing.assert_close(g_ckpt[name], g_plain[name], msg=name)


# --- precision ----------------------------------------------------------------------------


def test_fp16_uses_the_grad_scaler() -> None:
    cfg = tiny(precision="fp16")
    trainer = Trainer(cfg, CPU)
    assert isinstance(trainer.scaler, torch.amp.GradScaler) and trainer.scaler.is_enabled()
    result = trainer.step(*batch(cfg))
    assert result.grad_scale is not None and math.isfinite(result.loss)

    # An overflowing scale proves the loss really goes through the scaler: fp16 gradients
    # turn inf, the scaler skips the optimizer step and halves its scale.
    trainer.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**100)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    result = trainer.step(*batch(cfg))
    assert result.grad_scale == 2.0**99
    for name, p in trainer.model.named_parameters():
        assert torch.equal(before[name], p), f"{name} changed in a skipped step"


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_other_precisions_have_no_scaler(precision: str) -> None:
    assert Trainer(tiny(precision=precision), CPU).scaler is None


def test_fused_adam_flag() -> None:
    assert Trainer(tiny(fused_adam=True), CPU).optimizer.defaults["fused"] is True
    assert not Trainer(tiny(), CPU).optimizer.defaults["fused"]


# --- end to end ---------------------------------------------------------------------------


def _trace_events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    events: list[dict[str, Any]] = doc["traceEvents"]
    return events


def test_two_step_cpu_run_writes_metrics_and_kineto_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("RANK", "SLURM_PROCID"):
        monkeypatch.delenv(var, raising=False)
    args = ["--device", "cpu", "--steps", "2", "--layers", "2", "--hidden", "64", "--vocab"]
    args += ["512", "--seq-len", "32", "--batch-size", "2", "--output", str(tmp_path)]
    args += ["--torch-profile", str(tmp_path / "trace"), "--profile-steps", "0:2"]
    assert main(args) == 0

    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["peak_gpu_memory_bytes"] is None  # CPU
    assert metrics["median_step_time_s"] > 0 and metrics["tokens_per_s"] > 0
    assert math.isfinite(metrics["final_loss"]) and len(metrics["step_times_s"]) == 2
    assert metrics["config"]["steps"] == 2 and metrics["config"]["device"] == "cpu"
    assert metrics["trace_file"] == "sft_rank0.pt.trace.json.gz"
    assert metrics["median_step_cpu_relative"] is None  # only with --cpu-reference

    events = _trace_events(tmp_path / "trace" / "sft_rank0.pt.trace.json.gz")
    names = {e["name"] for e in events if e.get("cat") == "user_annotation"}
    assert {"step_0", "step_1", *PHASES} <= names

    # One step and no --profile-steps: the default window (1:3) shrinks to what fits (0:1).
    one = [str(tmp_path / "one") if a == str(tmp_path) else a for a in args[:-2]]
    one[one.index("--steps") + 1] = "1"
    one[one.index("--torch-profile") + 1] = str(tmp_path / "one" / "trace")
    assert main(one) == 0
    events = _trace_events(tmp_path / "one" / "trace" / "sft_rank0.pt.trace.json.gz")
    assert "step_0" in {e["name"] for e in events if e.get("cat") == "user_annotation"}


def test_no_nvtx_leaves_only_torchs_own_marks_and_records_the_planted_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--no-nvtx: none of the workload's ranges (step_N, phases) reach the trace; torch's
    ProfilerStep#N and the DataLoader's and optimizer's own annotations stay. metrics.json says
    so, with the planted cost and when each step began."""
    for var in ("RANK", "SLURM_PROCID"):
        monkeypatch.delenv(var, raising=False)
    args = ["--device", "cpu", "--steps", "3", "--layers", "1", "--hidden", "32", "--vocab"]
    args += ["256", "--seq-len", "32", "--batch-size", "2", "--output", str(tmp_path)]
    args += ["--torch-profile", str(tmp_path), "--profile-steps", "1:3", "--no-nvtx"]
    args += ["--item-ms", "4"]
    assert main(args) == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["annotated"] is False and metrics["config"]["annotate"] is False
    assert metrics["planted_item_ms"] == 4 and metrics["planted_data_ms_per_step"] == 8
    starts = metrics["step_start_unix_ns"]
    assert len(starts) == 3 and starts == sorted(starts)
    # each step waited at least its planted batch cost (2 samples x 4 ms)
    assert min(metrics["data_times_s"]) >= 0.008

    events = _trace_events(tmp_path / "sft_rank0.pt.trace.json.gz")
    names = {e["name"] for e in events if e.get("cat") == "user_annotation"}
    assert not names & {"step_0", "step_1", "step_2", *PHASES}
    assert {"ProfilerStep#1", "ProfilerStep#2"} <= names
    assert any(n.startswith("enumerate(DataLoader)") for n in names)


def test_cpu_reference_prices_a_step_in_a_fixed_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--cpu-reference: each step's CPU time over a fixed work timed just before it. A heavier
    data pipeline raises the figure (it measures the program), and the reference work shows
    in the trace under its own name, outside the step's range."""
    for var in ("RANK", "SLURM_PROCID"):
        monkeypatch.delenv(var, raising=False)
    # One intra-op thread, as the canary runs it (OMP_NUM_THREADS=1): with more, torch's
    # threads spin and their CPU time follows the machine's load, not the program.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)

    def relative(item_cost: int, name: str, traced: bool = False) -> dict[str, Any]:
        out = tmp_path / name
        args = ["--device", "cpu", "--steps", "6", "--layers", "1", "--hidden", "32"]
        args += ["--heads", "2", "--vocab", "256", "--seq-len", "64", "--item-cost"]
        args += [str(item_cost), "--cpu-reference", "--output", str(out)]
        if traced:
            args += ["--torch-profile", str(out), "--profile-steps", "0:3"]
        assert main(args) == 0
        return dict(json.loads((out / "metrics.json").read_text()))

    try:
        traced = relative(0, "traced", traced=True)
        light = [relative(0, f"light{i}") for i in range(2)]
        heavy = relative(100, "heavy")
    finally:
        torch.set_num_threads(threads)
    for m in (traced, *light, heavy):
        per_step = m["step_cpu_relative"]
        assert len(per_step) == 6 and all(r > 0 for r in per_step)
        assert m["median_step_cpu_relative"] == pytest.approx(statistics.median(per_step[1:]))
        assert m["config"]["cpu_reference"] is True
        # each phase's CPU time, per step, inside the step's own (the ranges nest in it)
        phases = m["phase_cpu_s"]
        assert len(phases) == 6 and all(set(PHASES) <= set(p) for p in phases)
        for p, step_cpu in zip(phases, m["step_cpu_times_s"], strict=True):
            assert 0 < sum(p.values()) <= step_cpu * 1.001 + 1e-6, (p, step_cpu)
        assert m["median_phase_cpu_s"] == pytest.approx(phase_medians(phases))
        refs = [c / r for c, r in zip(m["step_cpu_times_s"], per_step, strict=True)]
        assert m["median_cpu_reference_s"] == pytest.approx(statistics.median(refs[1:]))
        rel = phase_medians(relative_to(phases, refs))
        assert m["median_phase_cpu_relative"] == pytest.approx(rel)
    # 100 extra tokenisation passes per sample cost many reference works more per step (the
    # lighter of two light runs: the first torch steps of a process may pay for warm-up)
    base = min(m["median_step_cpu_relative"] for m in light)
    assert heavy["median_step_cpu_relative"] > 1.5 * base, (heavy, light)
    # ... and the data phase carries that: it grew more than the model's phases together
    lightest = min(light, key=lambda m: m["median_step_cpu_relative"])
    grew = {
        k: heavy["median_phase_cpu_relative"][k] - lightest["median_phase_cpu_relative"][k]
        for k in PHASES
    }
    assert grew["data"] > 2 * sum(v for k, v in grew.items() if k != "data"), grew
    events = _trace_events(tmp_path / "traced" / "sft_rank0.pt.trace.json.gz")
    spans = {e["name"]: e for e in events if e.get("cat") == "user_annotation"}
    ref, step = spans["cpu_reference"], spans["step_1"]
    assert ref["ts"] + ref["dur"] <= step["ts"] or ref["ts"] >= step["ts"] + step["dur"]


def test_the_phase_clock_charges_each_range_its_own_cpu_time() -> None:
    """Nested ranges each get the CPU time spent inside them; the step and the reference work
    are not phases; a sleep costs no CPU time (waiting is not charged, as on a busy machine)."""
    import time

    def spin(seconds: float) -> None:
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass

    clock = PhaseClock(nvtx=False)
    with clock.range("cpu_reference"):
        spin(0.01)
    with clock.range("step_0"):
        with clock.range("data"):
            spin(0.03)
            time.sleep(0.05)
        with clock.range("forward"):
            spin(0.01)
        with clock.range("forward"):  # a second occurrence adds up
            spin(0.01)
    spent = clock.take()
    assert set(spent) == {"data", "forward"}
    assert 0.03 <= spent["data"] < 0.045 and 0.02 <= spent["forward"] < 0.035, spent
    assert clock.take() == {}  # taken: the next step starts afresh
    assert relative_to([spent], [0.01]) == [{k: v / 0.01 for k, v in spent.items()}]
    # medians after the first step; a step without a phase counts it as zero
    steps = [{"data": 9.0}, {"data": 1.0, "x": 4.0}, {"data": 3.0}, {"data": 2.0, "x": 2.0}]
    assert phase_medians(steps) == {"data": 2.0, "x": 2.0}
    assert phase_medians(steps[:2]) == {"data": 5.0, "x": 2.0}


def test_ranks_name_their_files_and_knobs_compose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "3")
    args = ["--device", "cpu", "--steps", "2", "--layers", "1", "--hidden", "64", "--vocab"]
    args += ["512", "--seq-len", "32", "--batch-size", "2", "--output", str(tmp_path)]
    args += ["--torch-profile", str(tmp_path), "--profile-steps", "1:2", "--num-workers", "1"]
    args += ["--peft", "lora", "--offload-activations", "--activation-checkpointing"]
    assert main(args) == 0
    metrics = json.loads((tmp_path / "metrics_rank3.json").read_text())
    assert metrics["rank"] == 3 and metrics["lora_adapters"] == 4
    assert metrics["offloaded_bytes_per_step"] > 0
    events = _trace_events(tmp_path / "sft_rank3.pt.trace.json.gz")
    assert any(e["name"] == "step_1" for e in events)
    assert not (tmp_path / "metrics.json").exists()


GPU_TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
GPU_VARIANTS = {  # variant: the config keys it changed from the baseline
    "baseline": {},
    "workers4": {"num_workers": 4},
    "offload": {"offload_activations": True},
    "lora": {"peft": "lora"},
    "fp32": {"precision": "fp32"},
}


@pytest.mark.parametrize("variant", sorted(GPU_VARIANTS))
def test_recorded_gpu_variants_are_whole(variant: str) -> None:
    """tests/data/traces/ (from bench/gpu_variants.sh on an H100) are what analysis reads."""
    metrics = json.loads((GPU_TRACES / variant / "metrics.json").read_text())
    cfg = metrics["config"]
    for key, value in GPU_VARIANTS[variant].items():
        assert cfg[key] == value
    assert cfg["device"] == "cuda" and metrics["peak_gpu_memory_bytes"] > 0
    events = _trace_events(GPU_TRACES / variant / metrics["trace_file"])
    cats = {e.get("cat") for e in events}
    assert {"cpu_op", "kernel", "cuda_runtime", "user_annotation"} <= cats
    names = {e["name"] for e in events if e.get("cat") == "user_annotation"}
    start, end = cfg["profile_steps"]
    assert {f"step_{i}" for i in range(start, end)} | set(PHASES) <= names


def test_recorded_offload_lowered_peak_gpu_memory() -> None:
    def peak(variant: str) -> int:
        data = json.loads((GPU_TRACES / variant / "metrics.json").read_text())
        return int(data["peak_gpu_memory_bytes"])

    assert peak("offload") < 0.7 * peak("baseline")


def test_gh_run_itself_does_not_import_torch() -> None:
    code = "import sys, orchestrator.cli; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
