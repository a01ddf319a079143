"""The in-job analysis step on aarch64 against x86-64 (scripts/test-arm64.sh, step 7).

    in_job_arm64.py prepare ROOT_SRC X86_DIR   # the step rendered into ROOT_SRC/.arm64-in-job
    in_job_arm64.py compare ROOT_SRC X86_DIR   # its records against x86-64's, byte for byte

`prepare` copies real nsys exports of tests/data into the root's checkout, renders
templates/sbatch/analysis_post.sh.j2 and writes `run.sh`, which calls it as nsys_post.sh's task
on a node does (its deadline, then its exports), gh-run on the nodes being the aarch64 wheel
installed in the root (/opt/gh-run-cc). The script then runs under emulation and writes
`<report>.gh-run.json` beside each export. `compare` has
this machine's gh-run write the records of the same exports in X86_DIR, and requires the two
sets to be equal byte for byte once the one string that may differ, the folder the report lay in
(records.py: moved to the folder it is read from), names the same folder; then it has the x86-64
gh-run read the aarch64 records in the exports' place and requires what `analyze --json` prints
to equal a fresh read of the exports (`--reread`).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

# Real recordings of tests/data (README.md beside each says where they come from).
EXPORTS = [
    "tests/data/nsys/cloverleaf-cuda_perlmutter.sqlite",
    "tests/data/nsys/saxpy-mpi-cuda_perlmutter0.sqlite",
    "tests/data/ddp_h200/nsys_one_report/nsys_one_report.sqlite",
]
STEP = ".arm64-in-job"
INSIDE = Path("/src") / STEP  # the root's checkout is /src under emulation
# -P: not the checkout in the working folder (/src), the wheel
GH_RUN_ON_NODE = ["env", "PYTHONPATH=/opt/gh-run-cc", "python3", "-P", "-m", "orchestrator"]
RECORD = ".gh-run.json"


def prepare(root_src: Path, x86: Path) -> None:
    from orchestrator import __version__
    from orchestrator.core.shipped import templates_dir
    from orchestrator.render.scripts import make_environment

    step = root_src / STEP
    (step / "reports").mkdir(parents=True)
    (x86 / "reports").mkdir(parents=True)
    for e in EXPORTS:
        shutil.copyfile(REPO / e, step / "reports" / Path(e).name)
        shutil.copyfile(REPO / e, x86 / "reports" / Path(e).name)
    env = make_environment([templates_dir()])
    script = env.get_template("sbatch/analysis_post.sh.j2").render(
        run_id="arm64-in-job", analysis_gh_runs=[GH_RUN_ON_NODE], version=__version__
    )
    (step / "analysis_post.sh").write_text(script)
    # as nsys_post.sh's task on a node calls it: the budget's deadline, then that node's exports
    reports = " ".join(shlex.quote(str(INSIDE / "reports" / Path(e).name)) for e in EXPORTS)
    # the gh-run that analyses is the wheel's, with its aarch64 C readers (not the checkout's)
    which = "import orchestrator as o; print(o.__file__)"
    (step / "run.sh").write_text(
        f"set -e\nwhich=\"$({shlex.join(GH_RUN_ON_NODE[:4])} -c '{which}')\"\n"
        'case "$which" in /opt/gh-run-cc/*) ;; *) echo "gh-run is $which, not the wheel" >&2; '
        "exit 1;; esac\n"
        f'exec bash {INSIDE}/analysis_post.sh "$(($(date +%s) + 3600))" {reports}\n'
    )


def _gh_run(*args: str) -> bytes:
    done = subprocess.run(
        [str(REPO / ".venv" / "bin" / "gh-run"), *args], capture_output=True, check=False
    )
    if done.returncode != 0:
        sys.exit(f"gh-run {' '.join(args)} failed: {done.stderr.decode(errors='replace')}")
    return done.stdout


def compare(root_src: Path, x86: Path) -> None:
    arm = root_src / STEP / "reports"
    names = [Path(e).name for e in EXPORTS]
    _gh_run("analyze", "--write-records", *(str(x86 / "reports" / n) for n in names))
    failed = []
    for n in names:
        a, x = arm / (n + RECORD), x86 / "reports" / (n + RECORD)
        if not a.is_file():
            sys.exit(f"the aarch64 step wrote no record of {n} (see its output above)")
        got = a.read_bytes().replace(str(INSIDE / "reports").encode(), b"<folder>")
        want = x.read_bytes().replace(str(x86 / "reports").encode(), b"<folder>")
        print(
            f"{n}{RECORD}: aarch64 {len(got)} bytes, x86-64 {len(want)} bytes, "
            f"{'identical' if got == want else 'DIFFERENT'}"
        )
        if got != want:
            failed.append(n)
    if failed:
        sys.exit(f"aarch64 and x86-64 records differ: {', '.join(failed)}")
    reports = [str(arm / n) for n in names]
    from_records = _gh_run("analyze", "--json", *reports)
    fresh = _gh_run("analyze", "--json", "--reread", *reports)
    if from_records != fresh:
        sys.exit("analyze --json from the aarch64 records differs from a fresh read here")
    print(f"analyze --json from the aarch64 records = a fresh x86-64 read ({len(fresh)} bytes)")


if __name__ == "__main__":
    cmd, root_src, x86 = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    {"prepare": prepare, "compare": compare}[cmd](root_src, x86)
