"""What each block of memory is, from the evidence its history holds: the stack it was allocated
from (when stacks were recorded), the phase of the step it was allocated in and the one it was
freed in (the marks), and its lifetime across steps. Each block is classed by the first rule
that holds (`RULES`, in order), and each category's figure says which rules classed its bytes.

Categories (PyTorch's own memory profiler, torch.profiler._memory_profiler, names the same
kinds; it needs a full profile of operators and their tensors, this needs the allocator's
history alone):
- parameters: the model's weights and buffers, made before training and held throughout;
- gradients: made in backward and held after it (until the optimizer used them);
- optimizer_state: made in the optimizer's step() and held after it (Adam's moments);
- activations: made in forward and freed in the same step's backward (saved for backward);
- temporaries: freed in the stretch they were made in (a forward op's scratch, backward's, a
  recomputation under activation checkpointing, the optimizer's);
- inputs: made in forward (or before a step) and freed after its backward, in a later step:
  the batch, outputs kept for logging;
- retained: made in a step that ended and never freed: what grows each step (a leak), or a
  cache kept on purpose (cuBLAS's workspace is made once in the first step);
- unknown: allocated before the history begins, with no stack to tell;
- cache (not a block): reserved by the allocator but not allocated: free blocks kept in the
  cache, which fragmentation leaves unusable for a larger request.

Where it can be wrong (docs/metrics.md says the same): a block the model makes in forward and
keeps (a KV cache) is "retained"; gradients freed inside backward (gradient accumulation into
a buffer made by the user, or DDP's buckets) follow their own lifetimes; without the hook's
forward and backward marks, forward and backward are told apart by the stack only (autograd's
engine thread has no Python frames), and without stacks not at all; a ring buffer that dropped
the allocation of a block leaves it "unknown" unless the snapshot's segments still hold its
stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrator.analysis.families.memory_blocks import Blocks, Phases
from orchestrator.analysis.timeline import memory as M

PARAMETERS, GRADIENTS, OPTIMIZER_STATE, ACTIVATIONS, TEMPORARIES = 0, 1, 2, 3, 4
INPUTS, RETAINED, UNKNOWN = 5, 6, 7
# not a block's category: what a source's totals hold beyond the blocks its events show
# (allocated before its window and never freed in it), shown as "unknown"
BEFORE = 99
NAMES = {
    PARAMETERS: "parameters",
    GRADIENTS: "gradients",
    OPTIMIZER_STATE: "optimizer_state",
    ACTIVATIONS: "activations",
    TEMPORARIES: "temporaries",
    INPUTS: "inputs",
    RETAINED: "retained",
    UNKNOWN: "unknown",
}
LABELS = {
    "parameters": "parameters",
    "gradients": "gradients",
    "optimizer_state": "optimizer state",
    "activations": "activations",
    "temporaries": "temporaries",
    "inputs": "inputs and outputs",
    "retained": "retained across steps",
    "unknown": "unknown",
    "cache": "allocator cache (reserved, free)",
}

# ---- what a stack says (frames are matched by file and function, never by line)
_OPTIM_FILES = (
    "/torch/optim/",
    "/bitsandbytes/optim/",
    "/apex/optimizers/",
    "/deepspeed/ops/adam/",
    "/deepspeed/ops/lamb/",
    "/transformer_engine/pytorch/optimizers/",
    "/megatron/core/optimizer/",
)
_PARAM_FUNCS = {"_apply", "to", "cuda", "convert", "to_empty", "_load_from_state_dict"}
_PARAM_FILES = ("/torch/nn/init.py", "/torch/nn/parameter.py")
_CHECKPOINT_FILES = ("/torch/utils/checkpoint.py",)
_LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen ", "<string>")


@dataclass
class StackFacts:
    """Per stack index: what its frames say."""

    optimizer: Any
    parameter: Any
    checkpoint: Any
    where: list[str]  # the workload's own innermost frame, "file:line in function"


def stack_facts(stacks: list[tuple[M.Frame, ...]]) -> StackFacts:
    n = len(stacks)
    optim = np.zeros(n, dtype=bool)
    param = np.zeros(n, dtype=bool)
    ckpt = np.zeros(n, dtype=bool)
    where = []
    for i, st in enumerate(stacks):
        files = [f.filename.replace("\\", "/") for f in st]
        optim[i] = any(any(p in f for p in _OPTIM_FILES) for f in files)
        ckpt[i] = any(any(p in f for p in _CHECKPOINT_FILES) for f in files)
        param[i] = any(
            (f.endswith("/torch/nn/modules/module.py") and fr.name in _PARAM_FUNCS)
            or f.endswith(_PARAM_FILES)
            or fr.name == "reset_parameters"
            or ("/torch/nn/modules/" in f and fr.name == "__init__")
            or fr.name == "from_pretrained"
            for f, fr in zip(files, st, strict=True)
        )
        own = next((fr for fr in st if not any(p in fr.filename for p in _LIBRARY)), None)
        own = own or (st[0] if st else None)
        where.append(f"{_short(own.filename)}:{own.line} in {own.name}" if own else "")
    return StackFacts(optim, param, ckpt, where)


def _short(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) > 1 else path


# ---- the rules, in the order they are tried; each: (category, how it was classed). "Held
# through training": never freed, or freed only after the last finished step (the teardown)
RULES: list[tuple[int, str]] = [
    (OPTIMIZER_STATE, "allocated in the optimizer's code (stack in torch/optim/ or an optimizer"
     " library) and held after that step() returned"),
    (TEMPORARIES, "allocated and freed inside one optimizer step() (stack in optimizer code)"),
    (PARAMETERS, "allocated by module construction, .to()/.cuda() or parameter init (stack) and"
     " held through training"),
    (OPTIMIZER_STATE, "allocated during an optimizer step (marks) and held after it"),
    (TEMPORARIES, "allocated and freed within one optimizer step (marks)"),
    (GRADIENTS, "allocated in backward (marks), held after it and freed by the next step"),
    (TEMPORARIES, "allocated and freed within one backward (marks); recomputation under"
     " activation checkpointing is counted here"),
    (ACTIVATIONS, "allocated in forward and freed in the same step's backward (saved for"
     " backward)"),
    (TEMPORARIES, "allocated and freed within one stretch of forward"),
    (INPUTS, "allocated in a step's forward (or before it) and freed after its backward, by the"
     " end of the next step"),
    (ACTIVATIONS, "allocated in forward of the step the history ends in, still held (in flight)"),
    (RETAINED, "allocated in a step that ended and still held after the next step ended"),
    (PARAMETERS, "allocated before the first step and held through training"),
    (TEMPORARIES, "allocated and freed before the first step"),
    (INPUTS, "allocated before the first step and freed during training"),
    (ACTIVATIONS, "allocated between two optimizer steps and freed before the next (no"
     " forward/backward marks to tell activations from temporaries)"),
    (UNKNOWN, "allocated before the history began (no stack to tell what it is)"),
    (UNKNOWN, "allocated before the history began and freed in it (no stack to tell)"),
    (ACTIVATIONS, "allocated before the history began and freed in backward"),
    (GRADIENTS, "allocated in backward (marks) and held across steps; its size is a"
     " parameter's (gradients kept between steps: zero_grad(set_to_none=False))"),
    (RETAINED, "allocated in backward (marks) and held across steps; no parameter has its"
     " size (a workspace: cuBLAS keeps one per stream; or a leak)"),
    (UNKNOWN, "no step marks in the history: nothing tells what it was (only the stack can)"),
    (UNKNOWN, "not classed by any rule"),
]  # fmt: skip


def classify(
    blocks: Blocks, ph: Phases, facts: StackFacts | None, n_events: int
) -> tuple[Any, Any]:
    """(category, rule index into RULES) of every block."""
    nb = blocks.n
    cat = np.full(nb, UNKNOWN, dtype=np.int8)
    rule = np.full(nb, len(RULES) - 1, dtype=np.int16)
    done = np.zeros(nb, dtype=bool)

    def put(mask: Any, r: int) -> None:
        m = mask & ~done
        cat[m] = RULES[r][0]
        rule[m] = r
        done[m] = True

    if n_events == 0:
        put(np.ones(nb, dtype=bool), 16)
        return cat, rule
    traced = blocks.alloc >= 0
    ai = np.where(traced, blocks.alloc, 0)
    never = blocks.free >= n_events
    freed_in_history = ~never & (blocks.free >= 0)
    fi = np.where(freed_in_history, blocks.free, 0)
    pa = np.where(traced, ph.phase[ai], -1)
    sa = np.where(traced, ph.step[ai], -1)
    ra = np.where(traced, ph.run[ai], -1)
    pf = np.where(freed_in_history, ph.phase[fi], -1)
    sf = np.where(freed_in_history, ph.step[fi], -1)
    rf = np.where(freed_in_history, ph.run[fi], -2)
    same_run = freed_in_history & (rf == ra) & traced
    # held through training: never freed, or freed after the last finished step ended
    last_end = int(ph.end_event[-1]) if ph.steps_done else n_events
    through = never | (blocks.free > last_end)
    # still held after the step after its own ended (that step finished in the history)
    nxt = sa + 1
    has_next = traced & (nxt < ph.steps_done)
    if ph.steps_done:
        next_end = np.where(has_next, ph.end_event[np.clip(nxt, 0, ph.steps_done - 1)], -1)
    else:  # no step ended in the history: no block outlives a next step
        next_end = np.full(nb, -1, dtype=np.int64)
    outlives_next = has_next & (blocks.free > next_end)
    if facts is not None and facts.optimizer.size:
        st = blocks.stack
        has = st >= 0
        optim = np.zeros(nb, dtype=bool)
        param = np.zeros(nb, dtype=bool)
        optim[has] = facts.optimizer[st[has]]
        param[has] = facts.parameter[st[has]]
        put(optim & ~same_run, 0)
        put(optim & same_run, 1)
        put(param & through, 2)
    if not ph.marked:
        put(np.ones(nb, dtype=bool), 21)
        return cat, rule
    opt = pa == M.OPTIMIZER
    put(traced & opt & ~same_run, 3)
    put(traced & opt & same_run, 4)
    setup = pa == M.SETUP
    put(traced & setup & through, 12)
    bwd = pa == M.BACKWARD
    put(traced & bwd & same_run, 6)
    kept = traced & bwd & (outlives_next | never)
    param_sizes = np.unique(blocks.size[cat == PARAMETERS])
    put(kept & np.isin(blocks.size, param_sizes), 19)
    put(kept, 20)
    put(traced & bwd, 5)
    fwd = (pa == M.FORWARD) | (pa == M.AFTER_BACKWARD)
    put(traced & fwd & freed_in_history & (pf == M.BACKWARD) & (sf == sa), 7)
    put(traced & fwd & same_run, 8)
    put(traced & fwd & outlives_next, 11)
    put(traced & fwd & never & (sa < ph.steps_done) & ~has_next, 11)
    put(traced & fwd & never, 10)
    put(traced & fwd, 9)
    put(traced & setup & same_run, 13)
    put(traced & setup, 14)
    unk = pa == M.UNKNOWN
    put(traced & unk & outlives_next, 11)
    put(traced & unk & through & (ph.steps_done == 0), 12)
    put(traced & unk & never, 10)
    put(traced & unk & freed_in_history & (sf == sa), 15)
    put(traced & unk, 9)
    put(~traced & never, 16)
    put(~traced & freed_in_history & (pf == M.BACKWARD), 18)
    put(~traced, 17)
    return cat, rule
