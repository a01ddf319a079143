"""gh-run's memory figures against what the workloads measured themselves (issue 39), on the real
H200 recordings of tests/data/memory_h200 (README there): every category within 5 % of the
truth the workload planted and measured, the leak's growth per step within 5 %, and the first
memory finding naming the planted cause. The out-of-memory explanation is checked on the real
out-of-memory recording (`oom/`) and on a STAND-IN made from the real `activations` recording
(bench/memory_oom_standin.py: an out-of-memory cut in the forward, which the real run does not
show: it ran out in backward)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis import loader
from orchestrator.analysis.memory_model import MemoryUse
from orchestrator.analysis.metrics import Metrics
from orchestrator.analysis.presentation import memory_findings
from tests.fixtures.recordings import unpacked

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "memory_h200"
GIB = 2**30


def close(got: float | None, want: float, pct: float = 5.0) -> bool:
    return got is not None and abs(got - want) <= pct / 100 * abs(want)


def truth(case: str) -> dict[str, Any]:
    return dict(json.loads((DATA / case / "memory_truth.json").read_text()))


def run_of(case: str) -> Metrics:
    folder = unpacked(DATA / case)
    inputs = sorted(folder.glob("*.pickle")) or sorted(folder.glob("*.pt.trace.json.gz"))
    assert inputs, folder
    return loader.analyze_paths(inputs)


def use_of(case: str) -> MemoryUse:
    m = run_of(case)
    uses = [r.memory for r in m.ranks if r.memory is not None]
    assert len(uses) == 1, [r.memory for r in m.ranks]
    return uses[0]


def first_rule(case: str) -> str:
    found = memory_findings.findings(run_of(case))
    assert found, case
    return found[0].rule


def step1(t: dict[str, Any]) -> dict[str, Any]:
    return dict(t["steps"][1])


def made_in_forward(t: dict[str, Any]) -> int:
    """Bytes the forward made and autograd saved for backward (its saved tensors, less the
    batch: the first block's input is the batch, made before the forward), in step 1."""
    s = step1(t)
    return int(s["saved_for_backward_bytes"] - s["batch_bytes"])


@pytest.mark.parametrize("case", ["activations", "activations_timeline", "activations_kineto"])
def test_activations_dominate_and_each_category_matches(case: str) -> None:
    t, use = truth(case), use_of(case)
    assert close(use.peak_allocated_bytes, t["max_memory_allocated"])
    acts = use.category("activations")
    # saved for backward and made in forward: the loss's input (the output, kept by the loop
    # until the step ends) is classed an input, not an activation, hence 5 %
    assert acts is not None and close(acts.max_bytes, made_in_forward(t)), (acts, t["steps"][1])
    grads = use.category("gradients")
    assert grads is not None and close(grads.max_bytes, t["gradient_bytes"]), grads
    if case != "activations_kineto":  # Kineto's window opens after the model is made
        params = use.category("parameters")
        assert params is not None and close(params.bytes, t["parameter_bytes"]), params
    assert use.peak_phase == "backward" and use.peak_step is not None
    assert first_rule(case) == "memory-activations"


def test_checkpointing_lowers_the_peak_and_keeps_only_the_blocks_inputs() -> None:
    plain, ckpt = use_of("activations"), use_of("activations_ckpt")
    t = truth("activations_ckpt")
    assert plain.peak_allocated_bytes and ckpt.peak_allocated_bytes
    assert ckpt.peak_allocated_bytes < 0.4 * plain.peak_allocated_bytes
    assert close(ckpt.peak_allocated_bytes, t["max_memory_allocated"])
    s = step1(t)
    held = s["memory"]["after_forward"]["allocated"] - s["memory"]["before_forward"]["allocated"]
    acts = ckpt.category("activations")
    # what the forward holds when it ends: the blocks' inputs (activations) and its output
    assert acts is not None and close(acts.max_bytes, held - s["output_bytes"]), (acts, s)
    # the recomputation in backward is temporaries, not activations
    temps = ckpt.category("temporaries")
    assert temps is not None and temps.bytes > (acts.bytes or 0)
    assert "memory-activations" not in {
        a.rule for a in memory_findings.findings(run_of("activations_ckpt"))
    }


def test_adam_state_dominates() -> None:
    t, use = truth("adam"), use_of("adam")
    state = use.category("optimizer_state")
    planted = t["planted"]["adam_moments_bytes"]
    assert state is not None and close(state.bytes, planted), state
    assert sum(t["optimizer_state_bytes"].values()) == pytest.approx(planted, rel=1e-6)
    assert close(use.category_bytes("parameters"), t["parameter_bytes"])
    assert close(use.category_bytes("gradients"), t["gradient_bytes"])
    assert close(use.peak_allocated_bytes, t["max_memory_allocated"])
    assert "torch/optim" in state.how or "optimizer" in state.how
    assert first_rule("adam") == "memory-optimizer"


@pytest.mark.parametrize("case", ["leak", "leak_kineto"])
def test_the_leak_per_step_and_where_it_grows(case: str) -> None:
    t, use = truth(case), use_of(case)
    planted = t["planted"]["leak_bytes_per_step"]
    assert close(use.growth_per_step_bytes, planted), use.growth_per_step_bytes
    assert close(use.retained_per_step_bytes, planted), use.retained_per_step_bytes
    if case == "leak":  # stacks: the line that keeps them
        assert use.leak_where is not None and "memory_cases.py" in use.leak_where
        assert "forward" in use.leak_where
    assert first_rule(case) == "memory-leak"


def test_fragmentation_against_the_allocators_own_figures() -> None:
    t, use = truth("fragment"), use_of("fragment")
    assert close(use.peak_reserved_bytes, t["max_memory_reserved"])
    assert close(use.peak_allocated_bytes, t["max_memory_allocated"])
    # the cache at each finished step's end: reserved - allocated as the workload read them
    ends = {s.step: s for s in use.steps if s.finished}
    for s in t["steps"]:
        got = ends[s["step"]]
        want = s["memory"]["after_step"]["reserved"] - s["memory"]["after_step"]["allocated"]
        assert got.reserved_end is not None and got.allocated_end is not None
        assert close(got.reserved_end - got.allocated_end, want), (s["step"], got, want)
    assert first_rule("fragment") == "memory-fragmentation"
    # expandable segments take the cache away, and the finding with it
    exp = use_of("fragment_expandable")
    assert exp.expandable_segments is True
    assert close(exp.peak_reserved_bytes, truth("fragment_expandable")["max_memory_reserved"])
    rules = {a.rule for a in memory_findings.findings(run_of("fragment_expandable"))}
    assert "memory-fragmentation" not in rules


def test_categories_add_up_to_the_peak() -> None:
    for case in ("activations", "activations_ckpt", "adam", "leak", "fragment"):
        use = use_of(case)
        held = sum(c.bytes for c in use.categories if c.name != "cache")
        assert held == use.peak_allocated_bytes, case
        cache = use.category_bytes("cache") or 0
        assert use.peak_reserved_bytes is not None
        assert held + cache <= use.peak_reserved_bytes


@pytest.fixture(scope="module")
def oom_standin(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A STAND-IN out-of-memory snapshot made from the real `activations` recording."""
    real = unpacked(DATA / "activations") / "memory.rank0.pickle"
    out = tmp_path_factory.mktemp("oom") / "artifacts" / "memory" / "memory-oom.rank0.pickle"
    res = subprocess.run(
        [sys.executable, str(REPO / "bench" / "memory_oom_standin.py"), str(real), str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    return out, dict(json.loads(res.stdout))


def test_out_of_memory_explained_on_the_standin(oom_standin: tuple[Path, dict[str, Any]]) -> None:
    path, planted = oom_standin
    m = loader.analyze_paths([path])
    use = m.ranks[0].memory
    assert use is not None and use.oom is not None
    oom = use.oom
    assert oom.requested_bytes == planted["requested_bytes"]
    assert oom.allocated_bytes == planted["allocated_at_oom"]
    assert oom.reserved_bytes == planted["reserved_at_oom"]
    assert oom.largest_free_block_bytes == planted["largest_free_block"]
    assert oom.limit_bytes == planted["limit_bytes"]
    assert oom.device_free_bytes == planted["device_free_bytes"]
    assert (oom.step, oom.phase) == (planted["step"], planted["phase"])
    held = {c.name: c.bytes for c in oom.categories}
    assert sum(b for k, b in held.items() if k != "cache") == planted["allocated_at_oom"]
    # what held it: the parameters (real: 1.50 GiB) and the forward's activations so far
    assert close(held["parameters"], truth("activations")["parameter_bytes"])
    assert held["activations"] == max(b for k, b in held.items() if k != "cache")
    found = memory_findings.findings(m)
    assert found[0].rule == "memory-oom"
    assert "activation checkpointing" in found[0].knob
