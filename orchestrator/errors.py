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
