"""Child processes the harness runs (vipune, its lane): how a command reads in a message, and
how it is killed with the children a wrapper script started."""

from __future__ import annotations

import os
import signal
import subprocess


def shown(cmd: list[str]) -> str:
    """A command line for an error message, with a long last argument (a question) shortened."""
    words = [str(c) for c in cmd]
    if len(words[-1]) > 200:
        words[-1] = words[-1][:200] + f"… ({len(words[-1])} characters)"
    return " ".join(words)


def kill_group(proc: subprocess.Popen) -> None:
    """Kill a child started with ``start_new_session=True`` and everything in its session."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
