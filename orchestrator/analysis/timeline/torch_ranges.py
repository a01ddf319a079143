"""Which NVTX ranges are PyTorch's own operator annotations, and the operator each names.

`torch.autograd.profiler.emit_nvtx` (what nsys's `--pytorch=autograd-nvtx` and
`autograd-shapes-nvtx` turn on) pushes an NVTX range for every operator PyTorch records, named
`NAME[, seq = N][, op_id = N][, sizes = [...]][, input_op_ids = [...]]` (PyTorch's
`torch/csrc/profiler/util.cpp`, `getNvtxStr`): the sequence number ties a forward operator to
its backward, the op id is unique per call, sizes are the inputs' shapes. Evidence met: the real
2026 exports of tests/data/nsys2026 (`aten::mul, op_id = 322567`,
`aten::mul, seq = 46174, op_id = 993406`, `FSDP::pre_forward (encoder.block.18.layer.0),
op_id = 317100`): nearly every name unique, so a list by name is thousands of one-off rows.

Rules:
- a range whose name carries that suffix (`, ` then `seq = `, `op_id = `, `sizes = ` or
  `input_op_ids = `, wherever it first appears: a `record_function` name may hold `, ` itself)
  is a PyTorch-recorded range; its name before the suffix is what it runs;
- such a range is an **operator** (`timeline.CPU_OP`, as Kineto's `cpu_op` events are), except
  where its name says it is a training step (`ProfilerStep#3`) or a wait for data
  (`enumerate(DataLoader)#...`): PyTorch records those too, and they stay the workload's ranges
  (steps, data waits) under their stripped name;
- a range without the suffix is not PyTorch's (`torch.cuda.nvtx.range`, NeMo's, the user's).
"""

from __future__ import annotations

import re

from orchestrator.analysis.timeline.step_names import is_data_wait, step_family

# what follows an operator's name in emit_nvtx's range names (in PyTorch's order: seq, op_id,
# sizes, input_op_ids; the first one present starts the suffix); as literals too, for the page
# reader that cuts the names where it reads them (`sqlite_pages.fetch`'s `cuts`)
FIELDS = ("seq", "op_id", "sizes", "input_op_ids")
SUFFIXES = tuple(f", {f} = " for f in FIELDS)
SUFFIX = re.compile(", (?:" + "|".join(map(re.escape, FIELDS)) + ") = ")


def split(name: str) -> tuple[str, bool]:
    """(the operator's name, True) for a range named as emit_nvtx names it; (name, False)
    otherwise."""
    m = SUFFIX.search(name)
    if m is None:
        return name, False
    return name[: m.start()], True


def strip_joined(joined: str, sep: str, mark: str) -> str:
    """`split` applied at once to names joined by `sep` (none of them holding `sep` or
    `mark`): each PyTorch name becomes its operator's name followed by `mark`, the others stay
    as they are. One pass of the regular expression engine over the whole text, not one call
    per name (a PyTorch-annotated capture holds a million of them)."""
    return re.sub(SUFFIX.pattern + f"[^{re.escape(sep)}]*", re.escape(mark), joined)


def stays_workload_range(op: str) -> bool:
    """True for a PyTorch-recorded range that is a step or a data wait, not an operator."""
    return step_family(op) is not None or is_data_wait(op)
