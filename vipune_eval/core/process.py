"""Child processes the harness runs (vipune, its vipune-lane): how a command reads in a message, how it
is killed with the children a wrapper script started, and how it is killed when the job dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path


def shown(cmd: Sequence[object]) -> str:
    """A command line for an error message, with a long last argument (a question) shortened."""
    words = [str(c) for c in cmd]
    if len(words[-1]) > 200:
        words[-1] = words[-1][:200] + f"… ({len(words[-1])} characters)"
    return " ".join(words)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill a child started with ``start_new_session=True`` and everything in its session."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


# The watchdog's whole program: its stdin ends when the job dies (the kernel closes the job's end
# of the pipe, whatever killed it); "done" first means the job ended the child itself. A SIGKILL
# lands when the child next leaves the kernel: the folders are removed once no process of its
# group runs (zombies aside; 3 s at most), so no write of the child outlasts their removal.
_WATCH = """
import glob, os, shutil, signal, sys, time

def running(group):
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = open(stat).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[2] == group and fields[0] != "Z":
            return True
    return False

if sys.stdin.buffer.read() != b"done":
    if sys.argv[1] != "-":
        try:
            os.killpg(int(sys.argv[1]), signal.SIGKILL)
        except OSError:
            pass
        deadline = time.monotonic() + 3
        while running(sys.argv[1]) and time.monotonic() < deadline:
            time.sleep(0.01)
    for folder in sys.argv[2:]:
        shutil.rmtree(folder, ignore_errors=True)
"""


class Watchdog:
    """A process in a session of its own that outlives the job (a ``kill -9`` of the job's process
    group, or of the job alone): when the job dies without releasing it, it kills ``child`` (started
    with ``start_new_session=True``, so no kill of the job's group reaches it) with its session,
    and removes ``folders``. With no child it guards the folders alone."""

    def __init__(self, child: subprocess.Popen[bytes] | None, folders: Iterable[Path] = ()) -> None:
        read, write = os.pipe()
        self._write: int | None = write  # the job's end is not inherited: only the job holds it
        group = "-" if child is None else str(child.pid)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCH, group, *map(str, folders)],
                stdin=read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            os.close(self._write)
            raise
        finally:
            os.close(read)

    def release(self) -> None:
        """The job ends the child itself: the watchdog exits, touching nothing (again: nothing)."""
        if self._write is None:
            return
        try:
            os.write(self._write, b"done")
        except OSError:
            pass
        os.close(self._write)
        self._write = None
        self.proc.wait()
