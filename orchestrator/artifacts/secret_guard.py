"""Collection of a job with secrets refuses to store what is not shown clean (issue 42, class 5).

The job cleans its run folder as its last act however it ends (`secret_scrub.py`, from the
batch script's EXIT trap) and writes what it left, file by file (size and sha256), to
`.gh-run-scrubbed.json`. But a job killed before its cleaning ended (SIGKILL after the grace
SLURM or the local supervisor gives), a node without python3, or a file written after it, leave
files nobody checked. So collection checks again, before a copy is recorded:

- where the secrets' values are set here (as they were for `submit`), the run folder this
  machine holds (a local run's, or a remote run's mirror) is cleaned with the job's own code
  when the job's cleaning did not vouch for it, and every copy is read for every encoding of
  every value (secret_scrub.encodings) before it is stored;
- where a value is not set here, a file is stored only when the job's cleaning vouched for it
  (same size and sha256); any other is refused, listed with the reason and the fix (export the
  variable and fetch again).
A refused file is not stored (its copy is removed) and is listed in the manifest's refusals. The
job's `.secrets` file, if a killed job left it, is removed from a local run folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.artifacts import secret_scrub as S

if TYPE_CHECKING:
    from orchestrator.spec.job import JobSpec

# the attestation is a few lines per file of the run folder
MAX_ATTESTATION_BYTES = 16 << 20


@dataclass
class Gate:
    """What collection of one run with secrets may store."""

    names: list[str]
    missing: list[str]  # names whose value is not set here
    needles: dict[str, list[bytes]]  # encodings of the values that are set here
    vouched: dict[str, tuple[int, str]] | None  # the job's attestation (relpath -> size, sha)
    notes: list[str] = field(default_factory=list)

    def refusal(self, rel: str, copy: Path, size: int, sha256: str) -> str | None:
        """Why the copy of run-folder file `rel` must not be stored (None: it may)."""
        if self.missing:
            got = self.vouched.get(rel) if self.vouched is not None else None
            if got is None or tuple(got) != (size, sha256):
                why = (
                    "the job's cleaning did not vouch for it (the job was stopped before it ended?)"
                    if self.vouched is None
                    else "it is not as the job's cleaning left it"
                )
                shown = ", ".join(self.missing)
                verb = "is" if len(self.missing) == 1 else "are"
                return (
                    f"a job with secrets: {why}, and {shown} {verb} not set here to check it;"
                    f" export {shown} and fetch again"
                )
        if self.needles:
            try:
                names = S.shows(copy, self.needles)
            except OSError as exc:
                return f"a job with secrets: its copy cannot be read to check it ({exc})"
            if names:
                return (
                    f"holds the value of {', '.join(names)} (in one of its encodings): not"
                    " stored; the run folder keeps it"
                )
        return None


def _vouched(run_dir: Path, names: list[str]) -> dict[str, tuple[int, str]] | None:
    """The job's attestation, when it is one for these secrets."""
    from orchestrator.analysis.readers.side_inputs import SideInputError, load_json

    try:
        data = load_json(run_dir / S.ATTESTATION, MAX_ATTESTATION_BYTES)
    except SideInputError:
        return None
    if not isinstance(data, dict) or data.get("format") != S.ATTESTATION_FORMAT:
        return None
    if sorted(map(str, data.get("names") or [])) != sorted(names):
        return None
    files = data.get("files")
    if not isinstance(files, dict):
        return None
    out: dict[str, tuple[int, str]] = {}
    for rel, entry in files.items():
        if (
            isinstance(entry, list)
            and len(entry) == 2
            and isinstance(entry[0], int)
            and isinstance(entry[1], str)
        ):
            out[str(rel)] = (entry[0], entry[1])
    return out


def open_gate(
    run_dir: Path, spec: JobSpec, local: bool, say: Callable[[str], None] | None = None
) -> Gate | None:
    """The gate of a run's collection (None: the job has no secrets). `local`: `run_dir` is the
    run folder itself on this machine (its `.secrets`, if left, is removed). Where every value is
    set here and the job's cleaning did not vouch for the folder, the folder is cleaned now."""
    names = list(spec.workload.secret_env)
    if not names:
        return None
    values = {n: os.environ.get(n, "") for n in names}
    missing = [n for n in names if not values[n]]
    needles = S.needles_of({n: v for n, v in values.items() if v})
    gate = Gate(names, missing, needles, _vouched(run_dir, names))
    if local:
        left = run_dir / S.SECRETS_FILE
        if left.is_file() and not left.is_symlink():
            left.unlink()
            gate.notes.append(
                f"{left}: the job's secrets file, left by a job that was killed: removed"
            )
    if needles and gate.vouched is None and run_dir.is_dir():
        # the job's own cleaning did not end: do it here, with its code, before anything is read
        changed = S.scrub(run_dir, needles)
        if changed:
            gate.notes.append(
                f"{changed} file(s) of {run_dir} cleaned of {', '.join(sorted(needles))} here: the"
                " job's own cleaning had not run"
            )
    if say is not None:
        for note in gate.notes:
            say(note)
    return gate
