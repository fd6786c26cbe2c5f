"""The errors a user can act on: each names what failed and, where it can, the fix."""

from __future__ import annotations


class EvalError(Exception):
    """An error the user can act on; the CLI prints its message and exits 1.

    ``fix`` says what to do about it. ``str()`` is ``message — fix``; the CLI prints the fix on a
    line of its own (``vipune-eval: fix: …``), which a failed run's summary repeats last.
    """

    def __init__(self, message: str, fix: str | None = None):
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message} — {self.fix}" if self.fix else self.message


class BinaryNotFound(EvalError):
    """The configured vipune binary is not on PATH or not executable (raised before any job runs,
    or by the job that reports a missing binary)."""
