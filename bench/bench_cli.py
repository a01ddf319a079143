"""Benchmark: how fast the everyday commands answer (cold start of a fresh process).

Each command runs as a user types it (the `gh-run` console script of this venv) in a
throw-away home holding 20 ended runs; the baseline is a bare `python -c pass` of the same
interpreter, measured in the same run and interleaved with the commands, so the ratios hold on
a busy machine. Printed: the median wall time of each command over --repeat runs and its
multiple of the baseline, next to the goals of issue 16 (`--help` <= 4x, `status` <= 5x,
`render` <= 8x), and the same for CPU time (user + system of the process): on a machine that
other work keeps busy, wall times stretch with the load and CPU times much less.

Python's bytecode cache is on (PYTHONDONTWRITEBYTECODE is dropped), as on a user's machine.
`render` is measured with `-x local` (what it imports) and with the default `-x auto`, which
also asks `sinfo` whether a controller answers (a subprocess: its cost is SLURM's, not
Python's). `check` needs a SLURM controller (`sbatch --test-only`); without one it is left out.
`(render's libraries)` is not a command: a Python that imports what `render` cannot start
without (Pydantic's BaseModel and Field, Typer, Jinja2, PyYAML) and stops, the floor under any
`render` built on them; issue 25's goal is `render` and `check` within 1.3x of it. gh-run ends
without the interpreter's teardown (orchestrator/cli/exiting.py), which the floor row pays (40-60
ms of CPU with these libraries), so `(... no teardown)` is the floor ended the same way: the
like-for-like measure of what gh-run itself adds.

`analyze` is `gh-run analyze` of a small real single-rank Kineto trace (tests/data/traces/
baseline: 467 KB gzipped, one H100 rank, two steps), whole process, as a user runs it; its goal
(issue 27) is <= 0.35 s and >= 5x faster than Holistic Trace Analysis whole-process on the same
trace: `(HTA, same trace)` is a Python that runs HTA's TraceAnalysis and the breakdowns gh-run
computes (temporal, kernel types, comm/comp overlap, idle time; bench_analyze.py's HTA_SCRIPT).
HTA is a test dependency of gh-run (pyproject's `test` extra), never a runtime one; it takes
seconds, so it runs in at most --hta-repeat of the rounds. `(analyze's libraries)` is the floor
under `analyze`: a Python that imports what the analysis and its command line are built on
(numpy, Pydantic's BaseModel, Typer, orjson) and ends as gh-run ends (no teardown); whatever
gh-run does, `analyze` takes at least that, so it says how much of the goal is left to gh-run.

`--baseline DIR` (a checkout of an earlier gh-run, e.g. `git archive REV | tar -x -C DIR`) adds
`render` and `check` run from it (`python -m orchestrator` in that folder, its own jobs/ and
clusters/), and `analyze` run from it, interleaved with the rest: before and after in the same
run.

Usage: .venv/bin/python bench/bench_cli.py [--repeat 15] [--hta-repeat 5] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
GOALS = {"--help": 4.0, "status": 5.0, "render -x local": 8.0, "render": 8.0}
FLOOR = "from pydantic import BaseModel, Field; import typer, jinja2, yaml"
# Issue 25: render and check within this multiple of the floor row.
FLOOR_GOAL = 1.3
# Issue 27: analyze of a small single-rank trace, whole process.
TRACE = REPO / "tests" / "data" / "traces" / "baseline" / "sft_rank0.pt.trace.json.gz"
ANALYZE_GOAL_S = 0.35
HTA_GOAL = 5.0
HTA = "(HTA, same trace)"
ANALYZE_FLOOR = "(analyze's libraries)"
ANALYZE_LIBS = "import numpy, orjson, typer; from pydantic import BaseModel"


def seed_home(home: Path) -> str:
    """A home with 20 ended local runs (each with a log); returns the newest run id."""
    from tests.fixtures.store_rows import ended_run

    rid = ""
    for i in range(20):
        rid = f"bench-{i:02d}-20250101-000000-abcdef"
        ended_run(home, rid, log="".join(f"line {n}\n" for n in range(200)))
    return rid


def timed(
    argv: list[str], env: dict[str, str], may_refuse: bool = False, cwd: Path = REPO
) -> tuple[float, float]:
    """(wall, CPU) seconds of one run."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)
    took = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    # `check` asks the controller: a refusal (exit 2, e.g. nodes down) is still a whole answer.
    if res.returncode != 0 and not (may_refuse and res.returncode == 2):
        sys.exit(f"{' '.join(argv)} exited {res.returncode}:\n{res.stdout!r}\n{res.stderr!r}")
    return took, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=15, help="runs of each command (median)")
    ap.add_argument("--baseline", type=Path, default=None, help="an earlier gh-run checkout")
    ap.add_argument("--hta-repeat", type=int, default=5, help="rounds that also run HTA")
    args = ap.parse_args()
    gh_run = str(Path(sys.executable).parent / "gh-run")
    with tempfile.TemporaryDirectory(prefix="gh-run-bench-cli-") as tmp:
        home = Path(tmp) / "home"
        last = seed_home(home)
        env = {**os.environ, "GH_RUN_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "120"}
        # As installed for a user, Python caches compiled modules: a machine that sets
        # PYTHONDONTWRITEBYTECODE would measure compiling gh-run's sources on every start.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        cases: dict[str, list[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "--help": [gh_run, "--help"],
            "--version": [gh_run, "--version"],
            "status": [gh_run, "status"],
            "status RUN": [gh_run, "status", last],
            "logs RUN": [gh_run, "logs", last],
            "render -x local": [gh_run, "render", "jobs/smoke.yaml", "-x", "local"],
            "render": [gh_run, "render", "jobs/smoke.yaml"],
            "analyze": [gh_run, "analyze", str(TRACE)],
            # Not a command: the floor under `render`, the libraries it cannot start without
            # (validation, the CLI, templates, YAML), imported and nothing else done.
            "(render's libraries)": [sys.executable, "-c", FLOOR],
            "(... no teardown)": [sys.executable, "-c", f"{FLOOR}; import os; os._exit(0)"],
            ANALYZE_FLOOR: [sys.executable, "-c", f"{ANALYZE_LIBS}; import os; os._exit(0)"],
        }
        hta = _hta_case()
        if hta is not None:
            cases[HTA] = hta
        slurm = False
        if shutil.which("sbatch") and shutil.which("sinfo"):
            ok = subprocess.run(["sinfo", "-h"], capture_output=True, check=False).returncode
            if ok == 0:
                slurm = True
                cases["check"] = [gh_run, "check", "jobs/smoke.yaml"]
        where = dict.fromkeys(cases, REPO)
        if args.baseline is not None:
            before = [sys.executable, "-m", "orchestrator"]
            cases["render -x local (baseline)"] = [
                *before,
                "render",
                "jobs/smoke.yaml",
                "-x",
                "local",
            ]
            cases["render (baseline)"] = [*before, "render", "jobs/smoke.yaml"]
            cases["analyze (baseline)"] = [*before, "analyze", str(TRACE)]
            if slurm:
                cases["check (baseline)"] = [*before, "check", "jobs/smoke.yaml"]
            where.update({k: args.baseline.resolve() for k in cases if k.endswith("(baseline)")})
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
        for name, argv in cases.items():  # warm the file cache once
            timed(argv, env, name.startswith("check"), where[name])
        for i in range(args.repeat):
            for name, argv in cases.items():
                if name == HTA and i >= args.hta_repeat:
                    continue
                times[name].append(timed(argv, env, name.startswith("check"), where[name]))
    base = statistics.median(w for w, _ in times["python -c pass"])
    base_cpu = statistics.median(c for _, c in times["python -c pass"])
    print(f"{'command':<20} {'median':>9} {'x python':>9} {'goal':>9} {'CPU':>9} {'x python':>9}")
    for name, ts in times.items():
        med = statistics.median(w for w, _ in ts)
        cpu = statistics.median(c for _, c in ts)
        goal = GOALS.get(name)
        mark = "" if goal is None else f"<={goal:.0f}x" + (" ok" if med / base <= goal else " MISS")
        print(
            f"{name:<20} {med * 1000:>7.1f}ms {med / base:>8.1f}x {mark:>9}"
            f" {cpu * 1000:>7.1f}ms {cpu / base_cpu:>8.1f}x"
        )
    print(f"({args.repeat} runs each, interleaved; python: {sys.executable})")
    floors = {
        f: (statistics.median(w for w, _ in times[f]), statistics.median(c for _, c in times[f]))
        for f in ("(render's libraries)", "(... no teardown)")
    }
    print(f"\nagainst the floor (goal <= {FLOOR_GOAL}x the floor row), wall / CPU:")
    for name in times:
        if not name.startswith(("render", "check")):
            continue
        med = statistics.median(w for w, _ in times[name])
        cpu = statistics.median(c for _, c in times[name])
        (fw, fc), (nw, nc) = floors.values()
        mark = "ok" if med / fw <= FLOOR_GOAL else "MISS"
        print(
            f"{name:<28} {med / fw:>5.2f}x / {cpu / fc:.2f}x {mark:<4}"
            f"  (no-teardown floor: {med / nw:.2f}x / {cpu / nc:.2f}x)"
        )
    _print_analyze(times)


def _hta_case() -> list[str] | None:
    """HTA on the bench's trace, whole process; None (said) where HTA is not installed."""
    import importlib.util

    if importlib.util.find_spec("hta") is None:
        print("HTA is not installed in this Python (pip install '.[test]'): no HTA row")
        return None
    from bench.bench_analyze import HTA_SCRIPT

    return [sys.executable, "-c", HTA_SCRIPT, str(TRACE.parent)]


def _print_analyze(times: dict[str, list[tuple[float, float]]]) -> None:
    """analyze of the small trace against its goals: seconds, and the multiple of HTA."""
    med = statistics.median(w for w, _ in times["analyze"])
    cpu = statistics.median(c for _, c in times["analyze"])
    mark = "ok" if med <= ANALYZE_GOAL_S else "MISS"
    print(f"\nanalyze of {TRACE.relative_to(REPO)} ({TRACE.stat().st_size >> 10} KiB):")
    print(
        f"  gh-run analyze  {med:.3f} s wall, {cpu:.3f} s CPU (goal <= {ANALYZE_GOAL_S} s: {mark})"
    )
    if "analyze (baseline)" in times:
        bw = statistics.median(w for w, _ in times["analyze (baseline)"])
        bc = statistics.median(c for _, c in times["analyze (baseline)"])
        print(
            f"  baseline        {bw:.3f} s wall, {bc:.3f} s CPU "
            f"({bw / med:.2f}x / {bc / cpu:.2f}x this tree)"
        )
    fw = statistics.median(w for w, _ in times[ANALYZE_FLOOR])
    fc = statistics.median(c for _, c in times[ANALYZE_FLOOR])
    print(
        f"  its libraries   {fw:.3f} s wall, {fc:.3f} s CPU (numpy, pydantic, typer, orjson"
        f" imported: {fw / med:.0%} of analyze's wall; gh-run's own part {med - fw:.3f} s)"
    )
    if HTA in times:
        hw = statistics.median(w for w, _ in times[HTA])
        hc = statistics.median(c for _, c in times[HTA])
        mark = "ok" if hw / med >= HTA_GOAL else "MISS"
        print(
            f"  HTA             {hw:.3f} s wall, {hc:.3f} s CPU: gh-run {hw / med:.1f}x faster "
            f"wall, {hc / cpu:.1f}x CPU (goal >= {HTA_GOAL:.0f}x: {mark}; {len(times[HTA])} runs)"
        )
        print(
            f"  {HTA_GOAL:.0f}x HTA means analyze <= {hw / HTA_GOAL:.3f} s wall; its libraries"
            f" alone take {fw / (hw / HTA_GOAL):.0%} of that"
        )


if __name__ == "__main__":
    main()
