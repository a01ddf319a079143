"""The two kinds of failure a user sees, and the exit code each one gets.

A `UserError` is something the user can fix (bad input): one sentence naming the file, the
field and the fix; exit code 2. A `RuntimeFailure` is the world failing (controller down, job
failed, disk full): exit code 1. Anything else is a bug and shows a traceback only with --debug.
"""

from __future__ import annotations


class GhRunError(Exception):
    """Base of every error gh-run reports to the user as a sentence."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UserError(GhRunError):
    """Bad input: a spec, a cluster file, an override, an argument. Exit 2."""

    exit_code = 2


class RuntimeFailure(GhRunError):
    """The cluster, the file system or the job failed. Exit 1."""

    exit_code = 1


def combine(errors: list[GhRunError], what: str) -> GhRunError:
    """Several problems as one error: each sentence on its own line under `what` (exit 2 when
    one of them is bad input, else 1); a single problem stays its own sentence."""
    if len(errors) == 1:
        return errors[0]
    kind = UserError if any(isinstance(e, UserError) for e in errors) else RuntimeFailure
    lines = "".join(f"\n  - {e.message}" for e in errors)
    return kind(f"{what}: {len(errors)} problems, each with its fix:{lines}")
