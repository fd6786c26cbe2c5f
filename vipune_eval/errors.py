"""The errors a user can act on: each names what failed and, where it can, the fix."""

from __future__ import annotations

PREFIX = "vipune-eval: "  # every line the harness prints for a person starts so
FIX = f"{PREFIX}fix: "  # the line that says what to do (a failed run's summary reads it: plan.failures)


class EvalError(Exception):
    """An error the user can act on; the CLI prints it (``shown``) and exits 1.

    ``message`` says what failed, naming the file, question, build or key; ``fix`` says what to
    do about it, never folded into the message. ``str()`` is ``message — fix``, for a log line.
    """

    def __init__(self, message: str, fix: str | None = None):
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message} — {self.fix}" if self.fix else self.message

    def shown(self, where: str = "") -> str:
        """The error as a person reads it: the message, then the fix on a line of its own, last
        (what to do is what a user reads last). ``where``: the command that failed."""
        head = f"{PREFIX}{where}: " if where else PREFIX
        return head + self.message + (f"\n{FIX}{self.fix}" if self.fix else "")


class BinaryNotFound(EvalError):
    """The configured vipune binary is not on PATH or not executable (raised before any job runs,
    or by the job that reports a missing binary)."""
