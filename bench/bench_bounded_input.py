"""Time and peak memory of the bounded cases of issue 15 (class 1), each a real `gh-run`
process, next to a baseline measured in the same run (rendering the smoke job).

    .venv/bin/python bench/bench_bounded_input.py                 # this checkout
    .venv/bin/python bench/bench_bounded_input.py --code ../main  # another checkout's code

Every case runs under a 30 s and 2 GiB (address space) cap, so code without the bounds is
stopped rather than allowed to exhaust the machine; a stopped case prints as such. Prints one
line per case: seconds, peak RSS (MiB), exit code, and the ratios to the baseline.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CAP_S = 30
CAP_BYTES = 2 << 30
BOMB = (
    "["
    + ", ".join(
        ["&a0 [x, x, x, x, x, x, x, x, x, x]"]
        + [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 7)]
    )
    + "]"
)


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP_BYTES, CAP_BYTES))


def measure(code: Path, args: list[str], home: Path) -> tuple[float, float, int | str]:
    """(seconds, peak RSS MiB, exit code or 'stopped') of `python -m orchestrator ARGS`,
    the RSS read from that process's own rusage (wait4)."""
    env = {
        **os.environ,
        "GH_RUN_HOME": str(home),
        "PYTHONPATH": str(code),
        "NO_COLOR": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "SCRATCH": str(home / "scratch"),  # clusters/gh200.yaml's paths.runs
    }
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=code,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_limit,
    )
    timer = threading.Timer(CAP_S, proc.kill)
    timer.start()
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    took = time.perf_counter() - t0
    rc: int | str = os.waitstatus_to_exitcode(status)
    if took >= CAP_S:
        rc = f"stopped ({CAP_S} s)"
    elif b"MemoryError" in err:
        rc = "stopped (2 GiB)"
    return took, usage.ru_maxrss / 1024, rc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--code", type=Path, default=REPO, help="checkout whose code runs")
    code = ap.parse_args().code.resolve()
    tmp = Path(tempfile.mkdtemp(prefix="bench-bounded-"))
    camp = tmp / "matrix.yaml"
    lines = [f"name: big\njob: {REPO / 'jobs' / 'smoke.yaml'}\nmatrix:"]
    for a in range(7):
        lines.append(f"  ax{a}:")
        lines += [f"    v{v}: []" for v in range(10)]
    camp.write_text("\n".join(lines) + "\n")
    setbomb = tmp / "setbomb.yaml"
    setbomb.write_text(
        f"name: b\njob: {REPO / 'jobs' / 'sft.yaml'}\nset: ['workload.overrides.x={BOMB}']\n"
        "include: [{name: a}]\n"
    )
    cases = [
        ("baseline: render jobs/smoke.yaml", ["render", "jobs/smoke.yaml", "-x", "local"]),
        (
            f"render jobs/sft.yaml --set <{len(BOMB)}-byte alias bomb, 10^7 values>",
            ["render", "jobs/sft.yaml", "-x", "local", "--set", f"workload.overrides.x={BOMB}"],
        ),
        (
            f"campaign run <{camp.stat().st_size}-byte file, 10^7 variants>",
            ["campaign", "run", str(camp), "-x", "local"],
        ),
        (
            f"campaign run <set: the alias bomb, {setbomb.stat().st_size}-byte file>",
            ["campaign", "run", str(setbomb), "-x", "local"],
        ),
    ]
    print(f"code: {code}  (cap: {CAP_S} s, {CAP_BYTES >> 30} GiB per case)")
    base_s = base_mib = 0.0
    for i, (what, args) in enumerate(cases):
        took, mib, rc = measure(code, args, tmp / f"home{i}")
        if i == 0:
            base_s, base_mib = took, mib
        print(
            f"{what:58s} {took:7.2f} s ({took / base_s:5.1f}x)  peak RSS {mib:7.1f} MiB "
            f"({mib / base_mib:5.1f}x)  exit {rc}"
        )


if __name__ == "__main__":
    main()
