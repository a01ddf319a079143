"""Run a training script nobody here wrote under the PyTorch profiler, as its user would add one,
and time its steps: a window of steps profiled (torch.profiler with a schedule, `prof.step()`
after each optimizer step, the Chrome trace exported), every step's wall taken, the run ended
after `--steps` optimizer steps. The script itself is run unchanged (runpy, its own argv); its
optimizer steps are found by PyTorch's global optimizer hook, so any loop that calls
`optimizer.step()` is stepped.

Writes OUTPUT/<name>_rank0.pt.trace.json.gz and OUTPUT/metrics.json: `step_times_s` (step i:
from the end of optimizer step i-1 to the end of step i; step 0 from the script's start),
`profile_steps` [S, E) (the steps the trace holds, in that indexing: gh-run's
`profiler_overhead` sets them against the steps outside), `config` (the script and its argv).

    python3 kineto_wrap.py --name NAME --output DIR [--wait 5] [--active 6] [--steps 30] \
        -- SCRIPT.py ARGS...
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import time
from pathlib import Path

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.profiler import ProfilerActivity, profile, schedule


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--name", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--wait", type=int, default=5, help="steps before the profiler's warm-up step")
    p.add_argument("--active", type=int, default=6, help="steps the trace holds")
    p.add_argument("--steps", type=int, default=30, help="optimizer steps, then the run ends")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args()
    out = Path(a.output)
    out.mkdir(parents=True, exist_ok=True)
    trace = out / f"{a.name}_rank0.pt.trace.json.gz"
    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    prof = profile(
        activities=activities,
        schedule=schedule(wait=a.wait, warmup=1, active=a.active, repeat=1),
        on_trace_ready=lambda pr: pr.export_chrome_trace(str(trace)),
    )
    walls: list[float] = []
    last = [time.perf_counter()]
    # the trace's ProfilerStep#k spans from the k-th prof.step() to the next: optimizer step k-1's
    # end to step k's, which is step_times_s[k]
    first = a.wait + 1

    def hook(*_: object) -> None:
        # no sync here: it would change the loop (the host runs ahead into the next batch while
        # the GPU finishes backward); the script's own loss read bounds how far it runs ahead
        now = time.perf_counter()
        walls.append(now - last[0])
        last[0] = now
        prof.step()
        if len(walls) >= a.steps:
            finish()

    def finish() -> None:
        prof.stop()
        meta = {
            "workload": a.name,
            "step_times_s": walls,
            "profile_steps": [first, first + a.active],
            "config": {
                "script": Path(a.script).name,
                "argv": a.args,
                "steps": a.steps,
                "profile_steps": [first, first + a.active],
            },
            "device": torch.cuda.get_device_name(0) if cuda else "cpu",
            "torch": torch.__version__,
        }
        (out / "metrics.json").write_text(json.dumps(meta, indent=1))
        sys.stdout.flush()
        os._exit(0)  # the rest of the epoch is not wanted; DataLoader workers die with us

    register_optimizer_step_post_hook(hook)
    sys.argv = [a.script, *a.args]
    sys.path.insert(0, str(Path(a.script).resolve().parent))
    prof.start()
    runpy.run_path(a.script, run_name="__main__")
    finish()  # a script that ended before --steps
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
