"""nsys's own failures under load, told apart from gh-run's. Recording tests take turns on the
machine's one nsys slot (tests/conftest.py, nsys_recording), yet on CI's two cores, with the
unit and integration streams side by side, nsys has still died inside itself now and then and
recorded nothing:

- 2022.4's launcher: "QuadD/Common/ProcessWaiter/Src/POSIX/ProcessWaiterImpl.cpp(166): Throw in
  function ..." (unit, Python 3.13);
- 2024.2 inside the container: "Connection to Agent lost. This is most likely a bug. Internal
  reason: 'Connection reset by peer'." (integration, test_profiled);
- 2023.4: "Local Endpoint is not available" (a second session recording at the same moment);
- 2024.2 in both tasks of one job at a load of 11: "No transition in
  N5Agent6Client3FSM8Profiler8ShutdownE (1) for N5Agent6Client3FSM18SubscribeCompletedE." in one
  task's log, "End of file" in the other's (integration, test_profiled). The CLI's tail of the
  job's log did not show either: `run_crashed` reads the run folder's task logs too.
- the launcher (libProcessLauncher.so, 2023.4) in one task of a two-node job at a load of 4-5:
  "Failed to probe the process (sync)", with "End of file" in the other task's log
  (integration, test_in_job_analysis).

- a two-node job in the container whose tasks both ended within a second of starting, no
  report written, the step cancelled by srun, and none of the texts above in what the CLI
  printed (integration, test_profiled, a fresh-clone CI rehearsal; its logs went with pytest's
  basetemp). `died_at_start` counts that shape, for a test that expects success, and
  `once_more` keeps the first try's task logs as a warning in the test log: the next such job
  (test_the_same_job_under_nsys_2022_4) showed "Local Endpoint is not available" in one task's
  log.

What these tests examine is what gh-run does around nsys, so a run that failed with one of
these texts is made again (an integration test's job once; a unit test's recording, which costs
seconds, up to twice); any other failure stands, and a crash on the last try fails the test.
The unit tests that run `nsys profile` themselves do it through tests/conftest.py's
`nsys_profile` (2022.4's ProcessWaiter crash, `sem_open` failing, came back in
test_nsys_versions under 3.13 with no second try, and twice in a row in
test_export_versions under 3.14 on a fresh-clone CI run, hence a pause and a third try)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

ATTEMPTS = 3
# seconds between a unit test's tries: time for whatever else was using nsys to finish
PAUSE_S = 3.0


def crashed(text: str) -> bool:
    """Whether `text` (a job's stderr, or the CLI's tail of it) shows nsys failing inside itself."""
    return (
        ("/QuadD/" in text and "Throw in function" in text)
        or "Connection to Agent lost" in text
        or "Local Endpoint is not available" in text
        # the agent's state machine met an event it has no transition for
        or ("No transition in N5Agent" in text and "FSM" in text)
        # the launcher lost the process it had started under the profiler
        or "Failed to probe the process" in text
    )


# a job's end as the CLI prints it, under ten seconds in
_QUICK_END = re.compile(r"FAILED, exit code \d+ after 0:00:0\d")
NO_REPORT = "the profiled task wrote none"


def died_at_start(cli_text: str) -> bool:
    """Whether a failed `gh-run submit --wait` ended within seconds with no report from any task
    and its step cancelled: nsys (or the container) dying as it starts, a shape a failure of
    gh-run's that a test examines does not take. Only for a test that expects success: a second
    try of a failure of gh-run's fails the same way."""
    return bool(_QUICK_END.search(cli_text)) and NO_REPORT in cli_text and "CANCELLED" in cli_text


def _task_log_files(cli_text: str) -> list[Path] | None:
    """The task logs in the run folder the CLI's text names ("run folder: PATH"); None: it
    names none."""
    m = re.search(r"run folder: (\S+)", cli_text)
    if m is None:
        return None
    return [f for f in sorted(Path(m.group(1)).glob("*_log.*")) if f.is_file()]


def task_logs(cli_text: str, lines: int = 40) -> str:
    """The first `lines` lines of each task log in the run folder the CLI's text names."""
    logs = _task_log_files(cli_text)
    if logs is None:
        return "(no run folder named)"
    out = [
        f"== {f.name}\n" + "\n".join(f.read_text(errors="replace").splitlines()[:lines])
        for f in logs
    ]
    return "\n".join(out) or "(no task log)"


def once_more(cli_text: str, expects_success: bool = True) -> bool:
    """Whether a failed `gh-run submit --wait` is made again (`run_crashed`, or, for a test that
    expects success, `died_at_start`); if so, the first try's text and task logs go into the
    test log as a warning."""
    if not (run_crashed(cli_text) or (expects_success and died_at_start(cli_text))):
        return False
    warnings.warn(
        f"nsys failed inside itself; once more. First try:\n{cli_text}\n{task_logs(cli_text)}",
        stacklevel=2,
    )
    return True


def run_crashed(cli_text: str) -> bool:
    """Whether a failed `gh-run submit --wait` shows nsys failing inside itself: in the CLI's
    own text, or in the task logs of the run folder it names ("run folder: PATH"), whose tail
    is all the CLI prints."""
    if crashed(cli_text):
        return True
    return any(crashed(f.read_text(errors="replace")) for f in _task_log_files(cli_text) or [])
