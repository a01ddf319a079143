"""Advice that respects the trace and the run: none from a trace without kernels (it says what
the trace holds instead), and knobs that check the run's settings (metrics.json, the command
nsys launched, spec.lock.yaml) and say what they checked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from orchestrator.analysis import advise, analyze_paths, compare
from orchestrator.analysis.presentation.verdict import verdict
from orchestrator.analysis.settings import RunSettings, from_args, from_spec
from tests.fixtures.nsys_builder import NsysBuilder
from tests.unit.test_analysis_report import cli

DATA = Path(__file__).resolve().parents[1] / "data"
H100 = DATA / "nsys_h100"
TRACES = DATA / "traces"
MAIN = 10


def _no_kernels(path: Path, *, kernel: bool = False) -> Path:
    """An export whose capture holds two copies, data ranges and a main-thread wait, and (with
    `kernel`) one kernel after them."""
    b = NsysBuilder(path)
    b.add_gpu(0)
    b.add_thread(MAIN, "pt_main_thread")
    b.add_nvtx(0, 60_000, "data", tid=MAIN)
    b.add_osrt(0, 60_000, "pthread_cond_wait", tid=MAIN)
    b.add_memcpy(1_000, 5_000, 1, 1 << 16)
    b.add_memcpy(50_000, 57_600, 1, 1 << 16)
    if kernel:
        b.add_kernel(200_000, 210_000, "k")
    return b.close()


def test_a_trace_without_kernels_gets_no_advice_and_says_what_it_holds(tmp_path: Path) -> None:
    m = analyze_paths([_no_kernels(tmp_path / "a.sqlite")])
    assert m.ranks[0].activity.kernel_count == 0 and m.ranks[0].activity.memcpy_count == 2
    assert advise(m) == []
    v = verdict(m, advise(m))
    assert v.gpu is False
    assert v.idle.startswith("GPU idle: no kernels in this trace")
    assert "2 copies (128.00 KiB) and 0 memsets over 56.6 µs" in v.idle
    assert v.findings[0].title == "No kernels in this trace"
    # the same capture with a kernel: the data wait is judged again
    with_kernel = analyze_paths([_no_kernels(tmp_path / "b.sqlite", kernel=True)])
    assert {a.rule for a in advise(with_kernel)} >= {"data-loader"}
    res = CliRunner().invoke(cli(), ["analyze", str(tmp_path / "a.sqlite")])
    assert res.exit_code == 0, res.output
    assert "no GPU-side figures: it holds 2 copies" in " ".join(res.output.split())
    assert "advice" not in res.output and "busy" not in res.output
    # compare: no GPU row is measured, the copies are
    c = compare([m, with_kernel])
    rows = {r.metric: r for r in c.rows}
    assert rows["idle"].measured == [False, True] and rows["HtoD"].measured == [True, True]


def test_unified_memory_knob_checks_the_peft_scheme() -> None:
    lora = [a for a in advise(analyze_paths([H100 / "lora_um"])) if a.rule == "unified-memory"]
    full = [a for a in advise(analyze_paths([H100 / "full_um"])) if a.rule == "unified-memory"]
    assert lora and full
    assert "--peft lora" not in lora[0].knob and "it already uses lora" in lora[0].knob
    assert lora[0].checked == "metrics.json: config.peft = lora"
    assert "--peft lora" in full[0].knob and full[0].checked == "metrics.json: config.peft = none"


def test_no_data_loader_advice_where_the_wait_is_gone_with_workers() -> None:
    m = analyze_paths([H100 / "workers4"])
    assert m.settings.data_workers is not None and m.settings.data_workers.value == 4
    fired = advise(m)
    assert "data-loader" not in {a.rule for a in fired}
    assert not any("num-workers" in f.knob for f in verdict(m, fired).findings)


def _with_config(tmp_path: Path, variant: str, **config: object) -> Path:
    """A copy of a real trace's folder whose metrics.json config says otherwise."""
    folder = tmp_path / variant
    shutil.copytree(TRACES / variant, folder)
    data = json.loads((folder / "metrics.json").read_text())
    data["config"].update(config)
    (folder / "metrics.json").write_text(json.dumps(data))
    return folder


def test_data_loader_knob_checks_the_workers(tmp_path: Path) -> None:
    at0 = next(a for a in advise(analyze_paths([TRACES / "baseline"])) if a.rule == "data-loader")
    assert at0.knob.startswith("--num-workers 4") and at0.checked == (
        "metrics.json: config.num_workers = 0"
    )
    m = analyze_paths([_with_config(tmp_path, "baseline", num_workers=4)])
    at4 = next(a for a in advise(m) if a.rule == "data-loader")
    assert at4.knob.startswith("--num-workers 8: the wait remains with 4 workers")
    assert at4.checked == "metrics.json: config.num_workers = 4"
    (tmp_path / "baseline" / "metrics.json").unlink()  # no settings: said so
    unknown = next(
        a for a in advise(analyze_paths([tmp_path / "baseline"])) if a.rule == "data-loader"
    )
    assert (
        unknown.checked is not None and "do not say how many data-loader workers" in unknown.checked
    )


def test_fp32_knob_checks_the_precision(tmp_path: Path) -> None:
    fp32 = next(a for a in advise(analyze_paths([TRACES / "fp32"])) if a.rule == "fp32-kernels")
    assert (
        fp32.knob == "--precision bf16" and fp32.checked == "metrics.json: config.precision = fp32"
    )
    m = analyze_paths([_with_config(tmp_path, "fp32", precision="bf16")])
    said = next(a for a in advise(m) if a.rule == "fp32-kernels")
    assert said.knob.startswith("it already runs bf16: these GEMMs run outside autocast")


def test_the_terminal_says_what_each_knob_checked() -> None:
    res = CliRunner(env={"COLUMNS": "250"}).invoke(cli(), ["analyze", str(H100 / "lora_um")])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if x.startswith("advice unified-memory"))
    # the checked setting right after the knob, then the projection (here: none, said why)
    assert "(checked: metrics.json: config.peft = lora); no honest projection:" in line


def test_settings_from_commands_hydra_and_specs(tmp_path: Path) -> None:
    got = from_args(
        ["python", "t.py", "--num-workers=2", "--precision", "fp16", "--offload-activations",
         "model.data.train_ds.num_workers=6", "+model.peft.peft_scheme=lora",
         "trainer.precision=bf16-mixed", "+model.cpu_offloading=False"],
        "cmd",
    )  # fmt: skip
    assert {k: s.value for k, s in got.items()} == {
        "data_workers": 2, "precision": "fp16", "offload_activations": True, "peft": "lora"
    }  # fmt: skip
    assert got["data_workers"].source == "cmd: --num-workers 2"
    hydra = from_args(["trainer.precision=bf16-mixed", "model.data.num_workers=4"], "cmd")
    assert hydra["precision"].value == "bf16-mixed" and hydra["data_workers"].value == 4
    spec = tmp_path / "spec.lock.yaml"
    spec.write_text(
        "workload:\n  kind: nemo\n  peft_scheme: lora\n  precision: bf16-mixed\n"
        "  data_workers: 4\n  cpu_offloading_layers: 8\n  overrides: {trainer.max_steps: 10}\n"
    )
    s = RunSettings(**from_spec(spec))
    assert s.peft is not None and s.peft.value == "lora"
    assert s.peft.source == "spec.lock.yaml: workload.peft_scheme = lora"
    assert s.data_workers is not None and s.data_workers.value == 4
    assert s.offload_activations is not None and s.offload_activations.value is True


def test_the_command_nsys_launched_is_a_source() -> None:
    m = analyze_paths([DATA / "ddp_h200" / "nsys_one_report"])
    w = m.settings.data_workers
    assert w is not None and w.value == 4 and w.source == "the profiled command: --num-workers 4"
