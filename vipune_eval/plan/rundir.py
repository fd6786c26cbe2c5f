"""The run folder: one run at a time (its lock), what a killed run left behind, and the jobs'
environment (their library caches under results/, not the user's HOME)."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import TextIO

from vipune_eval.core import paths
from vipune_eval.errors import EvalError


def job_environment() -> dict[str, str]:
    """Caches the stages' libraries would put under HOME (onnxruntime's device id under
    $XDG_CACHE_HOME, matplotlib's font cache) go under results/.cache instead: a run writes
    nothing of its own under the user's HOME."""
    cache = Path(paths.CACHE).resolve()
    return {"XDG_CACHE_HOME": str(cache / "xdg"), "MPLCONFIGDIR": str(cache / "matplotlib")}


def hold_lock(results: Path = Path(paths.RESULTS)) -> TextIO:
    """An OS lock on ``results/.lock`` for as long as this process lives (a ``kill -9`` releases
    it with the process); refuses at once when another run holds it, naming that run's PID."""
    results.mkdir(parents=True, exist_ok=True)
    handle = open(results / ".lock", "a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        other = handle.read().strip() or "unknown"
        handle.close()
        raise EvalError(f"{results.resolve()}: another run (PID {other}) is working in this directory",
                        fix="wait for it to finish, or stop it; two runs at once would delete each "
                            "other's fresh outputs") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def clear_tmp(results: Path = Path(paths.RESULTS)) -> None:
    """What a killed run left behind: its scratch folders, the lib lane's databases its jobs
    kept in RAM (/dev/shm) and the half-written files of io.atomic_path (only with the lock
    held: no job is running)."""
    from vipune_eval.stages.search.vipune_lib import clear_stale_databases

    clear_stale_databases(results / "tmp")
    shutil.rmtree(results / "tmp", ignore_errors=True)
    for stale in results.rglob(".*.tmp"):
        if stale.is_file():
            stale.unlink(missing_ok=True)
