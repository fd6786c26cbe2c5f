"""A failed pair as the searches record it under vipune.on_error: record (their status files, the
score stage's ``failed``, report.json): what the harness saw, and vipune's exit code and its own
message as fields of their own, so that nothing reads them back from the text."""

from __future__ import annotations

from typing import TypedDict


class FailedPair(TypedDict):
    detail: str  # what the harness saw: the persona, the command, what it did (for a log and report.json)
    exit_code: int | None  # the code vipune failed with; None: there is none (the lib lane runs no vipune
    # process; vipune was killed, hung, or exited 0 with an answer out of contract)
    error: str | None  # vipune's own message: its --json ``{"error"}`` (else its stderr) or the lib
    # lane's refusal; None: vipune said nothing
    timeout: float | None  # the seconds vipune.timeout gave the call when it was killed for taking longer;
    # None: it was not a timeout


def failed_pair(
    detail: str, exit_code: int | None = None, error: str | None = None, timeout: float | None = None
) -> FailedPair:
    return {"detail": detail, "exit_code": exit_code, "error": error or None, "timeout": timeout}
